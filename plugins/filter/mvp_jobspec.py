# -*- coding: utf-8 -*-
"""Jinja2 filters over the job spec builder (a thin adapter).

The builder lives in ``plugins/module_utils/request/mvp_spec.py``, the request's keys and rules in ``mvp_request.py``,
the refusals in ``mvp_refuse.py`` (the job contract's names in ``mvp_job.py``), where modules and tests
import them; these filters only
call them from the roles' tasks and turn the builder's ``JobSpecError`` into Ansible's
``AnsibleFilterError`` (same message: the field and the fix). Each filter is documented for
``ansible-doc -t filter`` in the YAML file of its name beside this one.
"""

from __future__ import annotations

import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.mvp.ray.plugins.module_utils.request import mvp_refuse, mvp_request, mvp_spec
from ansible_collections.mvp.ray.plugins.module_utils.storage import mvp_copies, mvp_job
# Re-exported for callers that import the filter module by file (tests, tests/reliability).
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import (  # noqa: F401 pylint: disable=unused-import
    HYDRA_SUBDIR, OWNED_ENV, REQUEST_KEYS, RUNTIME_ENV_REFUSED, SUBMISSION_ID_RE, JobSpecError, owned_overrides)
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_spec import hydra_value  # noqa: F401 pylint: disable=unused-import


def _ansible_errors(function):
    """Wrap a builder function so that its JobSpecError (or ValueError) reaches Ansible as AnsibleFilterError."""
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except ValueError as exc:  # JobSpecError is one
            raise AnsibleFilterError(str(exc)) from None
    return wrapper


mvp_job_spec = _ansible_errors(mvp_spec.mvp_job_spec)
mvp_loggers = _ansible_errors(mvp_request.mvp_loggers)
mvp_submit_cmd = mvp_spec.mvp_submit_cmd
mvp_driver_device_probe = _ansible_errors(mvp_spec.mvp_driver_device_probe)
mvp_resume_probe = _ansible_errors(mvp_spec.mvp_resume_probe)
mvp_is_submission_id = mvp_spec.mvp_is_submission_id
mvp_submit_problems = mvp_refuse.mvp_submit_problems
mvp_job_dir = _ansible_errors(mvp_job.job_dir)
mvp_jobs_dir = mvp_job.jobs_dir


def mvp_job_file(directory, name):
    """One path of a job directory by its name in the job contract (``mvp_job.FILES``).

    :param directory: str, the job directory.
    :param name: str, a key of ``mvp_job.FILES`` (``stopped_by``, ``queue``, ``status``, ...).
    :returns: str, the absolute path.
    :raises AnsibleFilterError: for a name the contract does not have, listing the names it has.
    """
    if name not in mvp_job.FILES:
        raise AnsibleFilterError("mvp_job_file: %r is not a file of a job directory; the names are %s"
                                 % (name, ", ".join(sorted(mvp_job.FILES))))
    return mvp_job.job_file(directory, name)


def mvp_copied_files(name):
    """The collection's files one copy installs on the nodes (``mvp_copies.copied_files``).

    :param name: str, ``job_tools`` or ``node_entrypoint``.
    :returns: list of str, paths relative to the collection's root.
    :raises AnsibleFilterError: for another name, naming the ones there are.
    """
    try:
        return mvp_copies.copied_files(name)
    except KeyError as exc:
        raise AnsibleFilterError("mvp_copied_files: %s" % exc.args[0]) from None


class FilterModule(object):
    """Job spec filters: mvp_job_spec, mvp_submit_cmd, mvp_driver_device_probe, mvp_resume_probe,
    mvp_is_submission_id, mvp_submit_problems, mvp_job_dir, mvp_jobs_dir, mvp_job_file, mvp_copied_files."""

    def filters(self):
        """Return the filter table."""
        return {
            "mvp_job_spec": mvp_job_spec,
            "mvp_submit_cmd": mvp_submit_cmd,
            "mvp_driver_device_probe": mvp_driver_device_probe,
            "mvp_resume_probe": mvp_resume_probe,
            "mvp_is_submission_id": mvp_is_submission_id,
            "mvp_submit_problems": mvp_submit_problems,
            "mvp_job_dir": mvp_job_dir,
            "mvp_jobs_dir": mvp_jobs_dir,
            "mvp_job_file": mvp_job_file,
            "mvp_copied_files": mvp_copied_files,
        }
