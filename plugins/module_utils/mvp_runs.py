# -*- coding: utf-8 -*-
"""Read job directories (``<shared_root>/jobs/<submission_id>/``) as training runs.

Used on the head by ``ray_job_runs`` (status.yml, report.yml, ``resume_from``) and
by the tests. Pure file reading, no Ray: the job directory outlives the cluster.

Formats read, all written by this project or by verl into the job directory:

- ``config/job_spec.json``: the job spec (``mvp_job_spec`` filter), written once at submit.
- ``logs/status.json``: Ray's last known state of the job (``ray_job`` ``status_dest``):
  ``{"submission_id", "status", "message", "start_time", "end_time"}`` (times in ms
  since the epoch, as Ray's JobDetails).
- ``logs/metrics.jsonl``: verl's file logger (``verl/utils/tracking.py`` FileLogger),
  one JSON object per ``log`` call: ``{"step": int, "data": {"<metric>": number}}``.
  Several lines may carry the same step (verl's SFT trainer logs ``val/loss`` on a
  line of its own). The last line of a running job may be half written.
- ``checkpoints/``: verl's checkpoint folders ``global_step_<N>/`` and
  ``latest_checkpointed_iteration.txt`` (``verl/utils/checkpoint``); sharded files are
  named ``*_world_size_<W>_rank_<R>.pt``, directly in the step folder (SFT) or in
  ``actor/`` / ``critic/`` below it (main_ppo).
"""

from __future__ import annotations

import json
import math
import os
import re

STEP_DIR_RE = re.compile(r"^global_step_(\d+)$")
WORLD_SIZE_RE = re.compile(r"_world_size_(\d+)_rank_\d+")
SPEC_FILE = "config/job_spec.json"
STATUS_FILE = "logs/status.json"
METRICS_FILE = "logs/metrics.jsonl"


def _read_json(path):
    """Return the JSON object in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def read_metrics(path, keys=None):
    """Read verl's metrics file into one series per metric.

    :param path: str, a ``metrics.jsonl`` file (missing: no metrics).
    :param keys: iterable of metric names to keep, or None for every metric.
    :returns: dict with ``series`` ({metric: [[step, value], ...]} sorted by step; a
        step logged twice keeps its last value; non-finite and non-numeric values are
        dropped), ``last_step`` (int, highest step of any line, 0 without metrics) and
        ``bad_lines`` (int, lines that are not a ``{"step", "data"}`` object, e.g. the
        half-written last line of a running job).
    """
    wanted = None if keys is None else set(keys)
    values = {}
    last_step = 0
    bad = 0
    try:
        handle = open(path, encoding="utf-8")
    except OSError:
        return {"series": {}, "last_step": 0, "bad_lines": 0}
    with handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                step = int(record["step"])
                data = record["data"]
                if not isinstance(data, dict):
                    raise TypeError("data is not an object")
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            last_step = max(last_step, step)
            for key, value in data.items():
                if wanted is not None and key not in wanted:
                    continue
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    continue
                values.setdefault(key, {})[step] = float(value)
    series = {key: [[step, by_step[step]] for step in sorted(by_step)] for key, by_step in values.items()}
    return {"series": series, "last_step": last_step, "bad_lines": bad}


def world_size_of(folder):
    """Return the world size a verl checkpoint folder was written with, or None.

    Read from the sharded file names (``model_world_size_2_rank_0.pt``) in the folder
    or one level below it (``actor/``, ``critic/``).

    :param folder: str, a ``global_step_<N>`` folder.
    :returns: int or None (no sharded file found).
    """
    candidates = []
    for root, dirs, files in os.walk(folder):
        depth = root[len(folder):].count(os.sep)
        if depth >= 1:
            dirs[:] = []
        candidates.extend(files)
    sizes = sorted({int(m.group(1)) for m in (WORLD_SIZE_RE.search(name) for name in candidates) if m})
    return sizes[-1] if sizes else None


def latest_checkpoint(ckpt_dir):
    """Find the newest complete checkpoint of a job.

    verl writes ``latest_checkpointed_iteration.txt`` after a checkpoint is complete;
    its step is used when that folder exists, else the highest ``global_step_<N>``.

    :param ckpt_dir: str, the job's ``checkpoints`` folder.
    :returns: dict ``{"step": int, "path": str, "world_size": int or None}`` or None
        when the job saved no checkpoint.
    """
    try:
        names = os.listdir(ckpt_dir)
    except OSError:
        return None
    steps = sorted(int(m.group(1)) for m in (STEP_DIR_RE.match(n) for n in names) if m)
    if not steps:
        return None
    step = steps[-1]
    try:
        with open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt"), encoding="utf-8") as handle:
            marked = int(handle.read().strip())
        if marked in steps:
            step = marked
    except (OSError, ValueError):
        pass
    path = os.path.join(ckpt_dir, "global_step_%d" % step)
    return {"step": step, "path": path, "world_size": world_size_of(path)}


def read_run(job_dir, keys=None, with_series=True):
    """Read one job directory as a run.

    :param job_dir: str, ``<shared_root>/jobs/<submission_id>``.
    :param keys: metric names to read (None: all).
    :param with_series: bool, False returns only the last value per metric.
    :returns: dict with ``submission_id``, ``job_dir``, ``spec`` (job_spec.json or None),
        ``workload``, ``code_id``, ``model``, ``created`` (float, seconds since the
        epoch: when job_spec.json was written), ``recorded_status`` (status.json or
        None), ``last_step``, ``series`` (when asked), ``last`` ({metric: value}),
        ``checkpoint`` (``latest_checkpoint``) and ``resume_from`` (the spec's).
    """
    spec = _read_json(os.path.join(job_dir, SPEC_FILE))
    spec_dict = spec if isinstance(spec, dict) else {}
    try:
        created = os.stat(os.path.join(job_dir, SPEC_FILE)).st_mtime
    except OSError:
        created = None
    metrics = read_metrics(os.path.join(job_dir, METRICS_FILE), keys)
    run = {
        "submission_id": os.path.basename(os.path.normpath(job_dir)),
        "job_dir": job_dir,
        "spec": spec,
        "workload": spec_dict.get("workload"),
        "code_id": spec_dict.get("code_id"),
        "model": spec_dict.get("model"),
        "created": created,
        "recorded_status": _read_json(os.path.join(job_dir, STATUS_FILE)),
        "last_step": metrics["last_step"],
        "bad_lines": metrics["bad_lines"],
        "last": {key: points[-1][1] for key, points in metrics["series"].items()},
        "checkpoint": latest_checkpoint(os.path.join(job_dir, "checkpoints")),
        "resume_from": spec_dict.get("resume_from"),
        "repeat": spec_dict.get("repeat"),
    }
    if with_series:
        run["series"] = metrics["series"]
    return run


def list_job_dirs(jobs_dir):
    """Return ``[(submission_id, mtime of its job_spec.json)]`` of every job directory, newest first.

    Folders without ``config/job_spec.json`` (not made by submit.yml) are skipped.
    """
    found = []
    try:
        names = os.listdir(jobs_dir)
    except OSError:
        return found
    for name in names:
        try:
            found.append((name, os.stat(os.path.join(jobs_dir, name, SPEC_FILE)).st_mtime))
        except OSError:
            continue
    return sorted(found, key=lambda item: (-item[1], item[0]))
