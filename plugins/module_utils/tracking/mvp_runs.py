# -*- coding: utf-8 -*-
"""Read job directories (``<shared_root>/jobs/<submission_id>/``) as training runs.

Used on the head by ``ray_job_runs`` (status.yml, report.yml, ``resume_from``) and
by the tests. Pure file reading, no Ray: the job directory outlives the cluster.

Formats read, all written by this project or by verl into the job directory:

- ``config/job_spec.json``: the job spec (``mvp_job_spec`` filter), written once at submit.
- ``logs/status.json``: Ray's last known state of the job (``ray_job_record``):
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
- ``config/resolved_config.yaml``: the trainer's effective configuration, composed on the
  head at submission (the snapshot's Hydra config plus every override; interpolations kept
  as ``${...}``, secret-like values ``<redacted>``). Scripts and older jobs have none.

``compare_runs`` reads what differs between runs for report.yml: their effective
configurations and, when their code snapshots differ, the snapshots' files
(``<code_path>/MANIFEST.json``, ``mvp_snapshot``); the comparison itself is ``mvp_report``'s.
"""

from __future__ import annotations

import json
import math
import os
import re

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_report import (
    DIFF_MAX_BYTES, DIFF_MAX_LINES, code_diff, config_diff, default_files, flatten_config)
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_snapshot import read_manifest

STEP_DIR_RE = re.compile(r"^global_step_(\d+)$")
WORLD_SIZE_RE = re.compile(r"_world_size_(\d+)_rank_\d+")
SPEC_FILE = FILES["job_spec"]
STATUS_FILE = FILES["status"]
METRICS_FILE = FILES["metrics"]
RESOLVED_CONFIG_FILE = FILES["resolved_config"]
# The snapshot's Hydra configs, where a default comes from.
CONFIG_SUBDIR = "verl/trainer/config"
# YAML 1.2 floats without a dot (1e-6): OmegaConf, and so Hydra and verl, read them as floats; PyYAML does not.
_FLOAT_RE = re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                           |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                           |\.[0-9_]+(?:[eE][-+][0-9]+)?
                           |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                           |[-+]?\.(?:inf|Inf|INF)
                           |\.(?:nan|NaN|NAN))$""", re.X)


def _read_json(path):
    """Return the JSON object in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def read_metrics(path, keys=None, prefixes=(), start=0):
    """Read verl's metrics file into one series per metric, streaming it line by line.

    :param path: str, a ``metrics.jsonl`` file (missing: no metrics).
    :param keys: iterable of metric names to keep, or None for every metric (unless ``prefixes`` is given).
    :param prefixes: iterable of str: metrics whose name starts with one of them are kept too (``("val/",)``);
        given alone (``keys`` None), only those are kept.
    :param start: int, the byte offset to start reading at (``end`` of an earlier call: a follower reads only
        what was added since).
    :returns: dict with ``series`` ({metric: [[step, value], ...]} sorted by step; a
        step logged twice keeps its last value; non-finite and non-numeric values are
        dropped), ``last_step`` (int, highest step of any line, 0 without metrics),
        ``bad_lines`` (int, lines that are not a ``{"step", "data"}`` object, e.g. the
        half-written last line of a running job) and ``end`` (int, the byte offset after the last complete line
        read: a half-written last line is read again from there next time).
    """
    wanted = None if keys is None else set(keys)
    prefixes = tuple(prefixes or ())
    if wanted is None and prefixes:
        wanted = set()
    values = {}
    last_step = 0
    bad = 0
    end = start
    try:
        handle = open(path, "rb")
    except OSError:
        return {"series": {}, "last_step": 0, "bad_lines": 0, "end": start}
    with handle:
        handle.seek(start)
        for raw in handle:
            if raw.endswith(b"\n"):
                end += len(raw)
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8", "replace"))
                step = int(record["step"])
                data = record["data"]
                if not isinstance(data, dict):
                    raise TypeError("data is not an object")
            except (ValueError, KeyError, TypeError):
                bad += 1
                continue
            last_step = max(last_step, step)
            for key, value in data.items():
                if wanted is not None and key not in wanted and not (prefixes and str(key).startswith(prefixes)):
                    continue
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    continue
                values.setdefault(key, {})[step] = float(value)
    series = {key: [[step, by_step[step]] for step in sorted(by_step)] for key, by_step in values.items()}
    return {"series": series, "last_step": last_step, "bad_lines": bad, "end": end}


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


SHARD_RE = re.compile(r"^(?P<kind>\w+?)_world_size_(?P<world>\d+)_rank_(?P<rank>\d+)\.pt$")
TRACKER_FILE = "latest_checkpointed_iteration.txt"


def checkpoint_problems(folder, world_size=None):
    """Say why a verl checkpoint folder is not complete; an empty list when it is.

    verl's FSDP checkpoint manager (``verl/utils/checkpoint/fsdp_checkpoint_manager.py``) has
    every rank write ``model_``, ``optim_`` and ``extra_state_world_size_<W>_rank_<R>.pt``, in the
    step folder (SFT) or in ``actor/`` / ``critic/`` below it (main_ppo). Complete means: in each
    folder holding shards, every kind present has one non-empty file per rank 0..W-1, a single W,
    and W equal to ``world_size`` when it is given (the world size the job will resume with).

    :param folder: str, a ``global_step_<N>`` folder.
    :param world_size: int or None, the world size the shards must have been written with.
    :returns: list of str, one problem each (file names relative to ``folder``).
    """
    shards = {}
    for root, dirs, files in os.walk(folder):
        rel = os.path.relpath(root, folder)
        if rel != "." and rel.count(os.sep) >= 1:
            dirs[:] = []
            continue
        for name in files:
            match = SHARD_RE.match(name)
            if match:
                size = os.path.getsize(os.path.join(root, name))
                shards.setdefault(rel, {}).setdefault((match.group("kind"), int(match.group("world"))), {})[
                    int(match.group("rank"))] = size
    if not shards:
        return ["no sharded file (*_world_size_<W>_rank_<R>.pt): never written, or removed by verl's keep-last-k"]
    problems = []
    for rel, kinds in sorted(shards.items()):
        where = "" if rel == "." else rel + "/"
        worlds = sorted({world for _kind, world in kinds})
        if len(worlds) > 1:
            problems.append("%s holds shards of world sizes %s" % (where or "the step folder",
                                                                   ", ".join(map(str, worlds))))
        if world_size and any(world != world_size for world in worlds):
            problems.append("%sshards were written with world size %s, the job has %d"
                            % (where, "/".join(map(str, worlds)), world_size))
        for (kind, world), ranks in sorted(kinds.items()):
            missing = [r for r in range(world) if r not in ranks]
            empty = sorted(r for r, size in ranks.items() if size == 0)
            if missing:
                problems.append("%s%s_world_size_%d_rank_{%s}.pt missing" % (
                    where, kind, world, ",".join(map(str, missing))))
            if empty:
                problems.append("%s%s_world_size_%d_rank_{%s}.pt empty" % (
                    where, kind, world, ",".join(map(str, empty))))
    return problems


def latest_checkpoint(ckpt_dir, world_size=None):
    """Find the newest complete checkpoint of a job, and say which newer ones were skipped.

    verl writes ``latest_checkpointed_iteration.txt`` after a checkpoint is complete: a folder
    newer than the step it names was being written when the job died, and is skipped. The
    newest remaining folder must also pass :func:`checkpoint_problems`; a folder that does not is
    skipped for the one before it.

    :param ckpt_dir: str, the job's ``checkpoints`` folder.
    :param world_size: int or None, the world size the job will resume with (checked on the shards).
    :returns: dict ``{"step": int, "path": str, "world_size": int or None, "skipped": [{"step",
        "path", "why"}], "tracker": int or None, "entries": [names in the folder]}`` or None when the job
        saved no checkpoint at all; ``step`` is None when checkpoints exist but none is complete (``skipped``
        says why). ``entries`` lets a resume leave a file out (mvp_resume.plan).
    """
    try:
        names = os.listdir(ckpt_dir)
    except OSError:
        return None
    steps = sorted(int(m.group(1)) for m in (STEP_DIR_RE.match(n) for n in names) if m)
    if not steps:
        return None
    try:
        with open(os.path.join(ckpt_dir, TRACKER_FILE), encoding="utf-8") as handle:
            tracker = int(handle.read().strip())
    except (OSError, ValueError):
        tracker = None
    skipped = []
    for step in reversed(steps):
        path = os.path.join(ckpt_dir, "global_step_%d" % step)
        if tracker is not None and step > tracker:
            why = "newer than %s (%d): verl had not finished writing it" % (TRACKER_FILE, tracker)
        elif tracker is None and step == steps[-1] and len(steps) > 1:
            why = "no %s: the newest folder may be half written" % TRACKER_FILE
        else:
            why = "; ".join(checkpoint_problems(path, world_size))
        if why:
            skipped.append({"step": step, "path": path, "why": why})
            continue
        return {"step": step, "path": path, "world_size": world_size_of(path), "skipped": skipped,
                "tracker": tracker, "entries": sorted(os.listdir(path))}
    return {"step": None, "path": None, "world_size": None, "skipped": skipped, "tracker": tracker, "entries": []}


def _mlflow_record(job_dir):
    """The job's MLflow run as recorded at submission (``config/mlflow_run.json``): its ids and addresses, or None."""
    record = _read_json(os.path.join(job_dir, FILES["mlflow_run"]))
    if not isinstance(record, dict) or not record.get("run_id"):
        return None
    return {key: record.get(key) for key in ("run_id", "experiment_id", "tracking_uri", "ui_url")}


def read_run(job_dir, keys=None, with_series=True):
    """Read one job directory as a run.

    :param job_dir: str, ``<shared_root>/jobs/<submission_id>``.
    :param keys: metric names to read (None: all).
    :param with_series: bool, False returns only the last value per metric.
    :returns: dict with ``submission_id``, ``job_dir``, ``spec`` (job_spec.json or None),
        ``workload``, ``code_id``, ``model``, ``created`` (float, seconds since the
        epoch: when job_spec.json was written), ``recorded_status`` (status.json or
        None), ``last_step``, ``series`` (when asked), ``last`` ({metric: value}),
        ``checkpoint`` (``latest_checkpoint``), ``resume_from`` (the spec's), ``mlflow`` (``{run_id,
        experiment_id, tracking_uri, ui_url}`` of its MLflow run, from ``config/mlflow_run.json``; None for an
        untracked job), ``preemption`` (:func:`preemption_text`, '' when none) and ``ledger`` (:func:`read_ledger`).
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
        "checkpoint": latest_checkpoint(os.path.join(job_dir, FILES["checkpoints"]), spec_dict.get("world_size")),
        "resume_from": spec_dict.get("resume_from"),
        "repeat": spec_dict.get("repeat"),
        "mlflow": _mlflow_record(job_dir),
        "preemption": preemption_text(*(_read_json(os.path.join(job_dir, FILES[name])) for name in (
            "preempt", "preempting", "restart", "queue"))),
        "ledger": read_ledger(job_dir),
    }
    if with_series:
        run["series"] = metrics["series"]
    return run


LEDGER_MAX_BYTES = 1 << 20
"""A ledger.json larger than this (bytes) is not read (a run's ledger is a few KiB)."""


def read_ledger(job_dir):
    """The GPU-hour ledger of the run this attempt belongs to, or None (no ledger: a run older than the ledger).

    The ledger is ``logs/ledger.json`` of the run's first attempt (issue 63; the job controller writes it): this
    attempt's own, or for a later attempt the one of ``config/controller.json``'s ``run`` beside it. A file over
    LEDGER_MAX_BYTES, not JSON or without ``version`` counts as none.

    :param job_dir: str, ``<shared_root>/jobs/<submission_id>``. :returns: dict (the ledger.json) or None.
    """
    handed = _read_json(os.path.join(job_dir, FILES["controller"]))
    run = handed.get("run") if isinstance(handed, dict) else None
    first = job_dir
    if isinstance(run, str) and run and "/" not in run and run not in (".", ".."):
        first = os.path.join(os.path.dirname(os.path.normpath(job_dir)), run)
    path = os.path.join(first, FILES["ledger"])
    try:
        if os.stat(path).st_size > LEDGER_MAX_BYTES:
            return None
    except OSError:
        return None
    ledger = _read_json(path)
    return ledger if isinstance(ledger, dict) and "version" in ledger else None


def preemption_text(preempt, preempting, restart=None, queue=None):
    """What preemption did to a job, in one phrase for ``status.yml`` ('' when nothing).

    :param preempt: dict or None, the job's ``logs/preempt.json`` (the job controller preempts it: ``by``,
        ``by_priority``, ``priority``, ``state``, ``step``, ``decided_at_s``, ``stopped_at_s``, ``deadline_s``).
    :param preempting: dict or None, its ``logs/preempting.json`` (``preemptions``: the jobs preempted for it).
    :param restart: dict or None, its ``logs/restart.json`` (``next``: the attempt that continues it).
    :param queue: dict or None, its ``logs/queue.json`` (``admitted_at_s``: when its program started).
    :returns: str.
    """
    parts = []
    if isinstance(preempt, dict) and preempt.get("by"):
        who = "%s (priority %s over %s)" % (preempt["by"], preempt.get("by_priority"), preempt.get("priority"))
        if preempt.get("state") == "stopped":
            parts.append("preempted by %s at step %s, %.1f s after the decision%s" % (
                who, preempt.get("step"), float(preempt.get("stopped_at_s") or 0) - float(preempt.get("decided_at_s") or 0),
                "; continues as %s from that checkpoint, queued at its priority with its first submission time"
                % restart["next"] if isinstance(restart, dict) and restart.get("next") else ""))
        elif preempt.get("state") == "cancelled":
            parts.append("preemption by %s cancelled: %s" % (who, preempt.get("why")))
        else:
            parts.append("being preempted by %s: stops right after its next complete checkpoint (grace %s s)"
                         % (who, preempt.get("grace_s")))
    for item in (preempting or {}).get("preemptions") or [] if isinstance(preempting, dict) else []:
        stopped = item.get("stopped") or {}
        victims = ", ".join("%s%s" % (sid, " (stopped at step %s after %.1f s)" % (
            stopped[sid].get("step"), float(stopped[sid].get("waited_s") or 0)) if sid in stopped else " (awaited)")
            for sid in item.get("victims") or [])
        started = (queue or {}).get("admitted_at_s") if isinstance(queue, dict) else None
        parts.append("preempted %s; started %s" % (victims, "%.1f s after the decision" % (
            float(started) - float(item.get("decided_at_s") or 0)) if started else "not yet"))
    return "; ".join(parts)


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


def read_yaml(path):
    """Parse a YAML file as Hydra does (``1e-6`` is a float).

    :returns: tuple (value, error): (parsed value, None), or (None, error text) when the file is
        missing (``missing``), unreadable or not YAML.
    """
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # pylint: disable=too-many-ancestors
        """SafeLoader (libyaml's parser when PyYAML has it) plus OmegaConf's float rule."""

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_RE, list("-+0123456789."))
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.load(handle, Loader=Loader), None  # nosec B506 - a SafeLoader subclass
    except FileNotFoundError:
        return None, "missing"
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return None, ("%s" % exc).splitlines()[0]


def read_resolved_config(job_dir):
    """A job's effective configuration (``config/resolved_config.yaml``).

    :returns: tuple (mapping or None, error or None): (None, "missing") for a job without one
        (a script, or a job from before the file was kept).
    """
    value, error = read_yaml(os.path.join(job_dir, RESOLVED_CONFIG_FILE))
    if error is None and not isinstance(value, dict):
        return None, "not a mapping"
    return value, error


def snapshot_config_files(code_path):
    """Every Hydra config file of a snapshot, flattened: ``{"verl/trainer/config/<file>.yaml": {path: value}}``.

    Unreadable files are left out.
    """
    root = os.path.join(code_path, CONFIG_SUBDIR)
    files = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".yaml", ".yml")):
                value, error = read_yaml(os.path.join(dirpath, name))
                if error is None:
                    rel = os.path.relpath(os.path.join(dirpath, name), code_path).replace(os.sep, "/")
                    files[rel] = flatten_config(value)
    return files


def snapshot_reader(code_path):
    """A callable: a snapshot-relative path (``verl/...``) -> the file's bytes (OSError when unreadable
    or outside the snapshot)."""

    def read(rel):
        if os.path.isabs(rel) or os.path.normpath(rel).split(os.sep)[0] == "..":
            raise OSError("%s is outside the snapshot" % rel)
        with open(os.path.join(code_path, rel), "rb") as handle:
            return handle.read()

    return read


def compare_runs(runs, baseline_id=None, max_lines=DIFF_MAX_LINES, max_bytes=DIFF_MAX_BYTES):
    """What differs between runs: their effective configurations and their code snapshots.

    :param runs: list of runs (``read_run``), in report order.
    :param baseline_id: str or None (the first run); an id that is not a run counts as None.
    :param max_lines: int, lines of the inline code diff.
    :param max_bytes: int, its bytes.
    :returns: tuple (config_diff, code_diff summary, full diff text):
        config_diff of ``mvp_report.config_diff`` plus ``errors`` ({id: why its
        resolved_config.yaml could not be read}, a missing file is not an error); a default's
        file is looked up in that run's snapshot, preferring files that differ from the
        baseline's snapshot. code_diff of ``mvp_report.code_diff``, one pair per snapshot
        (``spec.code_path``) other than the baseline's, plus ``baseline``,
        ``baseline_code_id`` and ``records`` ({code_id: ``recorded`` (MANIFEST.json) or
        ``computed`` (hashed now, a snapshot older than manifests)}). The full diff text is
        empty when the snapshots hold the same files.
    """
    if not runs:
        configs, (summary, full) = config_diff([]), code_diff([])
        configs["errors"] = {}
        summary.update(baseline=None, baseline_code_id=None, records={})
        return configs, summary, full
    base = next((r for r in runs if r["submission_id"] == baseline_id), runs[0])

    def code_path_of(run):
        spec = run.get("spec") if isinstance(run.get("spec"), dict) else {}
        return spec.get("code_path")

    def code_id_of(path):
        return os.path.basename(os.path.normpath(path)) if path else None

    records, manifests = {}, {}

    def manifest_of(path):
        if path not in manifests:
            manifests[path] = read_manifest(path)
            if manifests[path][0] is not None:
                records[code_id_of(path)] = manifests[path][1]
        return manifests[path]

    base_path = code_path_of(base)
    groups = {}
    for run in runs:
        groups.setdefault(code_path_of(run), []).append(run["submission_id"])
    pairs = []
    for path, ids in groups.items():
        if path == base_path:
            continue
        pair = {"from": code_id_of(base_path), "to": code_id_of(path), "runs": ids, "old": None, "new": None,
                "read_old": snapshot_reader(base_path or ""), "read_new": snapshot_reader(path or ""), "error": None,
                "path": path}
        if not base_path or not path:
            pair["error"] = "no code_path in the job spec of %s" % (base["submission_id"] if not base_path else ids[0])
        else:
            (pair["old"], how_old), (pair["new"], how_new) = manifest_of(base_path), manifest_of(path)
            if pair["old"] is None or pair["new"] is None:
                pair["error"] = how_old if pair["old"] is None else how_new
        pairs.append(pair)
    summary, full = code_diff(pairs, max_lines, max_bytes)
    summary.update(baseline=base["submission_id"], baseline_code_id=code_id_of(base_path), records=records)

    # Files that differ from the baseline's snapshot, per snapshot: where a changed default is found first.
    changed = {}
    for pair, entry in zip(pairs, summary["pairs"]):
        names = {r["path"] for kind in ("changed", "added", "removed") for r in entry[kind]}
        changed.setdefault(pair["path"], set()).update(names)
        changed.setdefault(base_path, set()).update(names)
    config_files = {}
    paths = {run["submission_id"]: code_path_of(run) for run in runs}

    def locate(rid, key_path, value):
        path = paths.get(rid)
        if not path:
            return []
        if path not in config_files:
            config_files[path] = snapshot_config_files(path)
        return default_files(key_path, value, config_files[path], changed.get(path, ()))

    entries, errors = [], {}
    for run in runs:
        config, error = read_resolved_config(run["job_dir"])
        if error and error != "missing":
            errors[run["submission_id"]] = error
        spec = run.get("spec") if isinstance(run.get("spec"), dict) else {}
        entries.append({"submission_id": run["submission_id"], "config": config,
                        "override_sources": spec.get("override_sources") or {},
                        "code_id": spec.get("code_id") or code_id_of(paths[run["submission_id"]])})
    configs = config_diff(entries, locate)
    configs["errors"] = errors
    return configs, summary, full
