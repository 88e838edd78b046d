# -*- coding: utf-8 -*-
"""Action plugin ray_job_request: gather a job request from exactly the places a user gives it, once, and check it.

Documented in plugins/modules/ray_job_request.py (Ansible reads an action plugin's documentation there).
"""

from __future__ import annotations

import getpass

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.vars import load_extra_vars

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import new_submission_id, submission_id_prefix
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import (
    REQUEST_KEYS, JobSpecError, check_bounds, check_request, mvp_parse_jobspec)
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request_read import LIMITS


class ActionModule(ActionBase):
    """Gather the request (see plugins/modules/ray_job_request.py)."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def _play_vars(self):
        """The request keys set as play variables (including import_playbook's vars), templated."""
        play = self._task.get_play() if hasattr(self._task, "get_play") else None
        given = {key: value for key, value in ((play.vars if play is not None else None) or {}).items()
                 if key in REQUEST_KEYS}
        return self._templar.template(given) if given else {}

    def _gather(self, path):
        """The request from the JobSpec file at ``path`` ('' for none), the play's variables and -e, and its sources.

        The request keys are the table's (mvp_request.REQUEST_TABLE) wherever they are given.
        """
        request, sources = {}, {}
        if path:
            try:
                with open(path, "rb") as handle:  # one byte past the limit is enough to refuse
                    data = handle.read(LIMITS["max_bytes"] + 1)
            except OSError as exc:
                raise AnsibleActionFail("jobspec %s cannot be read (%s). Fix: give an existing JobSpec file "
                                        "with -e jobspec=FILE; nothing was written." % (path, exc.strerror))
            request.update(mvp_parse_jobspec(data, path))
            sources.update((key, "jobspec") for key in request)
        extra = {k: v for k, v in load_extra_vars(self._loader).items() if k in REQUEST_KEYS}
        for key, value in extra.items():  # bounded before anything templates or copies them
            check_bounds(value, "-e %s" % key)
        for source, given in (("play", self._play_vars()), ("extra vars", extra)):
            request.update(given)
            sources.update((key, source) for key in given)
        return request, sources

    def run(self, tmp=None, task_vars=None):
        """Read the file strictly, the play's variables and the extra vars within bounds; check the request; return it."""
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        given = args.get("request")
        try:
            if given:
                if not isinstance(given, dict):
                    raise AnsibleActionFail("request must be a mapping of request keys, got %s" % type(given).__name__)
                check_bounds(given, "request")
                request, sources = dict(given), {key: "request" for key in given}
            else:
                request, sources = self._gather(args.get("jobspec") or "")
        except JobSpecError as exc:
            raise AnsibleActionFail(str(exc))
        given_id = request.get("submission_id") or ""
        repeat, index = int(args.get("repeat") or 1), int(args.get("run_index") or 1)
        if given_id:
            request["submission_id"] = "%s-%d" % (given_id, index) if repeat > 1 and not given else given_id
        else:
            request["submission_id"] = new_submission_id(submission_id_prefix(request.get("workload")))
            sources["submission_id"] = "generated"
        if args.get("catalog") is not None:
            try:
                # the run's owner when the request names none: the user who runs the play (the Ansible controller's)
                defaults = dict(args.get("defaults") or {})
                defaults.setdefault("owner", getpass.getuser())
                request = check_request(request, args["catalog"], defaults)
            except JobSpecError as exc:
                raise AnsibleActionFail(str(exc))
        result.update(changed=False, request=request, given_id=str(given_id), sources=sources)
        return result
