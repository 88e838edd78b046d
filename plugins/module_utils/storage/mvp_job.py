# -*- coding: utf-8 -*-
"""The job contract: what a submission id is and what a job directory holds, in one place.

Every module, filter, task and job tool that names a job or one of its files takes the
name from here (the format is the project's own; docs/how-it-works.md maps who asks it):

* a **submission id** matches ``SUBMISSION_ID_RE`` (Ray accepts any text; the project keeps ids
  usable as folder names and in shell commands); ``new_submission_id`` makes one;
* a **job directory** is ``<shared_root>/jobs/<submission_id>/`` with the folders ``SUBDIRS``,
  made once and never reused; ``job_paths`` gives the absolute path of every file in it by
  its name in ``FILES``.

Standard library only: ``verl_snapshot`` installs a copy beside the job tools (``mvp_entry.py``
runs on a worker, where the collection is not installed), like ``mvp_verdict``.
"""

from __future__ import annotations

import datetime
import json
import posixpath
import random
import re

# Letters, digits, '.', '_', '-', starting with a letter or digit, at most 128 characters.
SUBMISSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
# The same rule for every name that becomes a folder under the shared root (code_id, model names).
NAME_RE = SUBMISSION_ID_RE
# The folder of every job under the shared root.
JOBS_SUBDIR = "jobs"
# The folders of a job directory, created with it.
SUBDIRS = ("config", "logs", "checkpoints", "debug")
# Every file and folder of a job directory: name -> path relative to the job directory.
FILES = {
    # written once at submission (submit_job: ray_job, module_utils mvp_job_create)
    "job_spec": "config/job_spec.json",          # the job spec (mvp_job_spec), JSON
    "runtime_env": "config/runtime_env.json",    # Ray's runtime_env of the submission, JSON
    "submit_cmd": "config/submit_cmd.txt",       # the equivalent `ray job submit` line
    "resolved_config": "config/resolved_config.yaml",  # the trainer's config composed on the head (secrets redacted)
    "mlflow_run": "config/mlflow_run.json",      # the job's MLflow run: run_id, experiment, tracking_uri, ui_url
    "resume_view": "config/resume",              # a checkpoint view the attempt resumes from (mvp_resume), when one is needed
    "controller": "config/controller.json",      # the run this attempt belongs to: the job controller follows it
    # written while the job runs (mvp_entry.py on the driver's worker, verl)
    "driver_log": "logs/driver.log",             # the trainer's stdout and stderr, MVP_* lines
    "metrics": "logs/metrics.jsonl",             # verl's file logger: {"step": N, "data": {...}} per line
    "hydra": "logs/hydra",                       # Hydra's output (.hydra/config.yaml, the trainer's log)
    "steps": "logs/steps.jsonl",                 # when each step first appeared, and the entrypoint's start and trainer's exit
    "watchdog": "logs/watchdog.json",            # the progress watchdog's record of a hang
    "queue": "logs/queue.json",                  # the job's place in the cluster's queue (mvp_gate.py)
    "verdict": "logs/verdict.json",              # the entrypoint's verdict (mvp_verdict.classify)
    "workers_logs": "logs/workers",              # stderr tails of the job's actors, per node IP
    "interconnect": "logs/interconnect.json",    # the selftest's all-reduce bus bandwidth per size and node pair
    "selftest_result": "checkpoints/selftest_result.json",  # the selftest's checks and whether all passed
    "phases": "logs/phases.json",                # the selftest playing set phases (MVP_SELFTEST_PHASES): what happened
    # written by the plays (ray_job, ray_job_record, debug_bundle)
    "ray_driver_log": "logs/ray_driver.log",     # Ray's copy of the driver log
    "status": "logs/status.json",                # Ray's last status beside the verdict
    "restart": "logs/restart.json",              # this attempt failed and was continued as "next" (job controller)
    "continued": "logs/continued.json",          # the phases of that restart: decided, healed, next attempt started
    "run_end": "logs/run_end.json",              # how the run ended, as the job controller saw it (first attempt)
    "ledger": "logs/ledger.json",                # where the run's GPU-hours went (first attempt; mvp_ledger, job controller)
    "stopped_by": "logs/stopped_by.json",        # a cluster play (down.yml) stopped the job: which, and when
    "interrupted_by": "logs/interrupted_by.json",  # a cluster play (site.yml) stopped it to change its nodes
    "preempt": "logs/preempt.json",              # the job controller preempts it for a higher job: by whom, when, state
    "preempting": "logs/preempting.json",        # the jobs the job controller preempted for this one, and the waits
    "placement": "debug/placement.json",         # where the driver landed (ray_job)
    "debug": "debug",                            # timestamped ray status / job list / nodes / actors
    "checkpoints": "checkpoints",                # verl's trainer.default_local_dir
}
# Names a file of FILES had in job directories written by earlier versions, which stay on the shared storage:
# name -> paths relative to the job directory, read after the current one (``file_names``).
FORMER_FILES = {
    "run_end": ("logs/supervisor.json",),        # until issue 62, named for the removed per-run supervisor
}


def file_names(name):
    """Every path a job directory may hold the file ``name`` of ``FILES`` under, the current name first.

    A reader tries them in order; a writer writes ``FILES[name]`` only.

    :param name: str, a key of ``FILES``.
    :returns: tuple of str, paths relative to the job directory (``FILES[name]``, then ``FORMER_FILES[name]``).
    :raises KeyError: for a name that is not a key of ``FILES``.
    """
    return (FILES[name],) + FORMER_FILES.get(name, ())


def is_submission_id(value):
    """Whether ``value`` is a str matching ``SUBMISSION_ID_RE``.

    :param value: any value.
    :returns: bool.
    """
    return isinstance(value, str) and bool(SUBMISSION_ID_RE.fullmatch(value))


def new_submission_id(prefix, now=None, suffix=None):
    """Make a fresh submission id ``<prefix>-<YYYYmmdd-HHMMSS>-<6 hex digits>`` (UTC).

    :param prefix: str, the workload's name (or ``job``).
    :param now: datetime.datetime or None (the current UTC time).
    :param suffix: str or None: six random hex digits keep concurrent submissions apart.
    :returns: str matching SUBMISSION_ID_RE.
    :raises ValueError: when the result would not be a submission id (a bad prefix).
    """
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y%m%d-%H%M%S")
    value = "%s-%s-%s" % (prefix, stamp, suffix if suffix is not None else "%06x" % random.getrandbits(24))
    if not is_submission_id(value):
        raise ValueError("%r is not a submission id: the prefix %r must be letters, digits, '.', '_' or '-'"
                         % (value, prefix))
    return value


def submission_id_prefix(workload):
    """The prefix a generated submission id starts with: the workload's name, or ``job`` when that name cannot
    start an id (``SUBMISSION_ID_RE``; e.g. a name with '/' or spaces).

    :param workload: any value (the request's ``workload``).
    :returns: str.
    """
    return workload if is_submission_id(workload) and len(workload) <= 100 else "job"


def jobs_dir(shared_root):
    """The folder of every job: ``<shared_root>/jobs`` (str)."""
    return posixpath.join(shared_root, JOBS_SUBDIR)


def job_dir(shared_root, submission_id):
    """The job directory of one submission: ``<shared_root>/jobs/<submission_id>``.

    :param shared_root: str, absolute path of the shared storage as the nodes see it.
    :param submission_id: str matching SUBMISSION_ID_RE.
    :raises ValueError: for an id that is not one (it could name another folder).
    """
    if not is_submission_id(submission_id):
        raise ValueError("%r is not a submission id (%s)" % (submission_id, SUBMISSION_ID_RE.pattern))
    return posixpath.join(jobs_dir(shared_root), submission_id)


def job_paths(directory):
    """Every path of one job directory: ``{"job_dir": directory, <name in FILES>: absolute path}``.

    :param directory: str, the job directory (``job_dir()``).
    :returns: dict str -> str.
    """
    paths = {name: posixpath.join(directory, rel) for name, rel in FILES.items()}
    paths["job_dir"] = directory
    return paths


def job_file(directory, name):
    """One path of a job directory by its name in ``FILES`` (KeyError for an unknown name)."""
    return posixpath.join(directory, FILES[name])


def queue_states(jobs):
    """Each queued job's own gate record (``logs/queue.json``, written by mvp_gate.py), by submission id.

    :param jobs: list of dicts as Ray's Jobs API gives them; a job's folder is its metadata's ``job_dir``
        (every job the project submits carries it).
    :returns: dict submission id -> dict; jobs without a folder and unreadable records are left out.
    """
    states = {}
    for job in jobs or []:
        job_dir = (job.get("metadata") or {}).get("job_dir")
        if not job_dir or not job.get("submission_id"):
            continue
        try:
            with open(job_file(job_dir, "queue"), encoding="utf-8") as handle:
                state = json.load(handle)
        except (OSError, ValueError):
            continue
        if isinstance(state, dict):
            states[job["submission_id"]] = state
    return states
