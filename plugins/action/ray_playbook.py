# -*- coding: utf-8 -*-
"""Action plugin ray_playbook: run a playbook of this collection from a play with ansible-runner, on the controller.

Documented in plugins/modules/ray_playbook.py (Ansible reads an action plugin's documentation there); the
work is in plugins/module_utils/mvp_playbook_run.py.
"""

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.mvp.ray.plugins.module_utils import mvp_playbook_run
from ansible_collections.mvp.ray.plugins.module_utils.mvp_job import is_submission_id


class ActionModule(ActionBase):
    """Run or start a playbook (see plugins/modules/ray_playbook.py)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("playbook", "extra_vars", "ident", "private_data_dir", "background",
                             "retry_within", "retry_delay", "inventory"))

    def run(self, tmp=None, task_vars=None):
        """Run the playbook to its end (retrying within I(retry_within)) or start it in the background."""
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        unknown = sorted(set(args) - self._VALID_ARGS)
        if unknown:
            raise AnsibleActionFail("ray_playbook: unknown options %s (valid: %s)" % (
                ", ".join(unknown), ", ".join(sorted(self._VALID_ARGS))))
        playbook, ident = args.get("playbook"), str(args.get("ident") or "run")
        if not playbook:
            raise AnsibleActionFail("ray_playbook: playbook is required (a path or mvp.ray.<name>).")
        if not is_submission_id(ident):
            raise AnsibleActionFail("ray_playbook: ident %r must be letters, digits, '.', '_' or '-'." % ident)
        inventories = list(args.get("inventory") or task_vars.get("ansible_inventory_sources") or [])
        config_file = task_vars.get("ansible_config_file") or ""
        project_dir = os.path.dirname(config_file) if config_file else None
        envvars = mvp_playbook_run.runner_env(config_file)
        extra_vars = dict(args.get("extra_vars") or {})
        if self._task.check_mode:
            result.update(changed=False, skipped=True, msg="check mode: %s was not run" % playbook)
            return result
        try:
            if args.get("background"):
                folder = args.get("private_data_dir")
                if not folder:
                    raise AnsibleActionFail("ray_playbook: background needs private_data_dir (the run's folder).")
                started = mvp_playbook_run.start_background(playbook, inventories, folder, ident, extra_vars,
                                                            envvars, project_dir)
                result.update(changed=True, **started)
                return result
            folder = args.get("private_data_dir") or tempfile.mkdtemp(prefix="mvp-playbook-")
            within, delay = float(args.get("retry_within") or 0), float(args.get("retry_delay") or 10)
            ran = mvp_playbook_run.run_until_success(within, delay, lambda: mvp_playbook_run.run(
                playbook, inventories, folder, ident, extra_vars, envvars, project_dir))
        except mvp_playbook_run.PlaybookRunError as exc:
            raise AnsibleActionFail(str(exc))
        ran["recap"] = mvp_playbook_run.recap_lines(ran["hosts"])
        result.update(ran)
        if ran["rc"] != 0:
            last = ran["failed_tasks"][-1] if ran["failed_tasks"] else {}
            result.update(failed=True, msg="%s ended %s (rc %s) after %d attempt(s)%s" % (
                playbook, ran["status"], ran["rc"], ran["attempts"],
                ": %s failed on %s: %s" % (last["task"], last["host"], last["msg"]) if last else ""))
        return result
