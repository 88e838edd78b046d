# -*- coding: utf-8 -*-
"""How far a running job got, and the one line the plays print about it (issue 42).

The play that waits for a job (``submit.yml``, ``collect.yml -e wait=true``, through the action
plugin ``ray_job_follow``) and ``status.yml`` show, for each running job, one line:

    sft-20261126-031500-1a2b3c: RUNNING step 5/8 | train/loss 6.234 -> 5.25 | 2.1 s/step | ETA 6s
    | restarts 0 of 2 | watchdog: hang after 300s without a new step (quiet 3s)

:func:`read_progress` reads it on the head from the job directory (no Ray): verl's file logger
output ``logs/metrics.jsonl`` (module_utils ``mvp_runs.read_metrics``), the step count verl
planned from the driver log (``mvp_verdict.planned_steps``, the verdict rules' own reading),
the restart chain and the watchdog's limits from ``config/job_spec.json``.
:func:`progress_line` turns that into the line; the watchdog's bound is the watchdog's own rule
(``mvp_verdict.hang_bound``) applied to the measured step time.

Seconds per step, best source first: verl's own ``timing_s/step`` (PPO/GRPO log it; the median),
the play's own observations of the step count (``history``: the metrics file's modification time
at each step count seen, so the rate is measured over the steps logged while the play waited),
else, once the attempt logged :data:`AVG_MIN_STEPS` steps, the average since it started (Ray's
``start_time``; it holds the start-up, so it is an upper bound; the line says ``avg since start``).
"""

from __future__ import annotations

import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import read_json
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_ledger import goodput_so_far
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import read_metrics
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import hang_bound, median, planned_steps

STEP_TIME_KEY = "timing_s/step"
"""verl's seconds per training step (ray_trainer.py's timing metrics)."""

FALLBACK_METRICS = ("train/loss", "critic/score/mean", "val/loss")
"""The metric shown when the caller names none: the first of these the job logged."""

AVG_MIN_STEPS = 5
"""Steps an attempt must have logged before its average since the start stands for its step time (it holds the start-up)."""

LOG_HEAD_BYTES = 8 * 1024 * 1024
"""Bytes of the driver log read for the planned step count (verl prints it before the first step)."""


def planned_from_log(path):
    """The step count verl planned, from the head of its driver log (int or None)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(LOG_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    return planned_steps(text)


def read_progress(job_dir, metric="", planned=None):
    """Read a job's progress from its job directory.

    :param job_dir: str, ``<shared_root>/jobs/<submission_id>`` as the reader sees it.
    :param metric: str, the workload's key metric (verl's name, ``train/loss``); empty: the first
        of :data:`FALLBACK_METRICS` the job logged.
    :param planned: int or None, the planned step count when the caller knows it already (the
        driver log is then not read).
    :returns: dict ``{"submission_id", "job_dir", "last_step" (0: none), "metric" (str or None),
        "first" and "last" ([step, value] of the metric, or None), "planned" (int or None),
        "step_time_s" (median of verl's timing_s/step, or None), "metrics_mtime" (float seconds
        since the epoch, or None), "resumed_step" (the checkpoint step the attempt continues from,
        0 for a fresh start), "restart_attempt" (int), "max_restarts" (int), "watchdog"
        ({first_step_s, floor_s, factor} or None when off), "goodput" (float or None: the run's goodput so far,
        from ``logs/ledger.json`` of the run's first attempt, which the job controller keeps)}``.
    """
    spec = read_json(os.path.join(job_dir, FILES["job_spec"]))
    keys = [metric] if metric else list(FALLBACK_METRICS)
    metrics_path = os.path.join(job_dir, FILES["metrics"])
    metrics = read_metrics(metrics_path, keys + [STEP_TIME_KEY])
    series = metrics["series"]
    shown = next((key for key in keys if series.get(key)), metric or None)
    points = series.get(shown) or []
    try:
        mtime = os.stat(metrics_path).st_mtime
    except OSError:
        mtime = None
    if planned is None:
        planned = planned_from_log(os.path.join(job_dir, FILES["driver_log"]))
    restart = spec.get("restart") if isinstance(spec.get("restart"), dict) else {}
    resumed = spec.get("resume_from") if isinstance(spec.get("resume_from"), dict) else {}
    times = [value for _step, value in series.get(STEP_TIME_KEY) or []]
    watchdog = spec.get("watchdog") if isinstance(spec.get("watchdog"), dict) else None
    run = restart.get("run") or spec.get("submission_id") or os.path.basename(os.path.normpath(job_dir))
    ledger = read_json(os.path.join(os.path.dirname(os.path.normpath(job_dir)), run, FILES["ledger"]))
    return {
        "submission_id": spec.get("submission_id") or os.path.basename(os.path.normpath(job_dir)),
        "job_dir": job_dir,
        "last_step": metrics["last_step"],
        "metric": shown,
        "first": points[0] if points else None,
        "last": points[-1] if points else None,
        "planned": planned,
        "step_time_s": median(times) if times else None,
        "metrics_mtime": mtime,
        "resumed_step": int(resumed.get("step") or 0),
        # Restarts counted against max_restarts (a preemption is not one; older records have only "attempt").
        "restart_attempt": int(restart.get("restarts") if restart.get("restarts") is not None
                               else restart.get("attempt") or 0),
        "preemptions": int(restart.get("preemptions") or 0),
        "max_restarts": int(spec.get("max_restarts") or restart.get("max_restarts") or 0),
        "watchdog": watchdog,
        "goodput": ledger.get("goodput") if ledger.get("state") == "running" else None,
    }


def key_metric(workloads, workload):
    """The workload's key metric: the first of its C(metrics) in the catalog (``mvp_workloads``), or "".

    :param workloads: dict workload name -> catalog entry (``metrics``: list of {key, ...}).
    :param workload: str or None, the job's workload.
    """
    entry = (workloads or {}).get(workload) or {}
    metrics = entry.get("metrics") if isinstance(entry, dict) else None
    first = metrics[0] if isinstance(metrics, list) and metrics else {}
    return str(first.get("key") or "") if isinstance(first, dict) else ""


def step_time(progress, history=(), start_ms=None):
    """Seconds per step and where the figure comes from.

    :param progress: dict of :func:`read_progress`.
    :param history: list of ``[metrics_mtime, last_step]`` pairs the caller saw, oldest first.
    :param start_ms: int or None, when the attempt started (Ray's ``start_time``, ms since the epoch).
    :returns: (float or None, str source: ``verl``, ``measured``, ``avg`` or ``""``).
    """
    if progress.get("step_time_s"):
        return float(progress["step_time_s"]), "verl"
    seen = [(float(t), int(s)) for t, s in history or [] if t is not None and s]
    if seen and progress.get("metrics_mtime") and progress.get("last_step"):
        seen.append((float(progress["metrics_mtime"]), int(progress["last_step"])))
        first_t, first_s = seen[0]
        last_t, last_s = seen[-1]
        if last_s > first_s and last_t > first_t:
            return (last_t - first_t) / (last_s - first_s), "measured"
    done = (progress.get("last_step") or 0) - (progress.get("resumed_step") or 0)
    if start_ms and progress.get("metrics_mtime") and done >= AVG_MIN_STEPS:
        elapsed = float(progress["metrics_mtime"]) - float(start_ms) / 1000.0
        if elapsed > 0:
            return elapsed / done, "avg"
    return None, ""


def duration(seconds):
    """Seconds as a short text: ``45s``, ``3m20s``, ``2h05m``."""
    seconds = int(round(max(float(seconds), 0.0)))
    if seconds < 60:
        return "%ds" % seconds
    if seconds < 3600:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%dh%02dm" % (seconds // 3600, (seconds % 3600) // 60)


def _number(value):
    """A metric value, short."""
    return "%.4g" % value


def progress_line(progress, status="RUNNING", now=None, history=(), start_ms=None):
    """The one line a play prints about a running job.

    :param progress: dict of :func:`read_progress`.
    :param status: str, Ray's status of the job.
    :param now: float seconds since the epoch (how long ago the last step came); None leaves that out.
    :param history: see :func:`step_time`.
    :param start_ms: see :func:`step_time`.
    :returns: str ``<id>: <status> step N/M | <metric> first -> last | s/step | ETA | restarts | watchdog``, then
        ``| goodput so far NN%`` when the run's ledger says it (``progress["goodput"]``).
    """
    last = progress.get("last_step") or 0
    planned = progress.get("planned")
    parts = ["%s: %s step %d/%s" % (progress.get("submission_id"), status, last, planned if planned else "?")]
    if progress.get("first") and progress.get("last"):
        parts.append("%s %s -> %s" % (progress["metric"], _number(progress["first"][1]), _number(progress["last"][1])))
    else:
        parts.append("%s: none logged yet" % (progress.get("metric") or "metrics"))
    seconds, source = step_time(progress, history, start_ms)
    parts.append(("%.3g s/step%s" % (seconds, " (avg since start)" if source == "avg" else ""))
                 if seconds else "s/step ?")
    if seconds and planned:
        parts.append("ETA %s" % duration(max(planned - last, 0) * seconds))
    else:
        parts.append("ETA ?")
    parts.append("restarts %d of %d" % (progress.get("restart_attempt") or 0, progress.get("max_restarts") or 0)
                 + (", preempted %d time(s)" % progress["preemptions"] if progress.get("preemptions") else ""))
    parts.append(watchdog_text(progress, seconds, now))
    goodput = goodput_so_far({"goodput": progress.get("goodput")})
    if goodput:
        parts.append(goodput)
    return " | ".join(parts)


def watchdog_text(progress, seconds=None, now=None):
    """The watchdog's bound as the job stands: the seconds without a new step after which it stops the job.

    :param progress: dict of :func:`read_progress`. :param seconds: float or None, seconds per step.
    :param now: float or None, for how long the metrics file has been quiet.
    """
    limits = progress.get("watchdog")
    if not limits:
        return "watchdog off"
    seen = max((progress.get("last_step") or 0) - (progress.get("resumed_step") or 0), 0)
    durations = [seconds] * (seen - 1) if seconds and seen > 1 else []
    bound, _how = hang_bound(seen, durations, limits.get("first_step_s"), limits.get("floor_s"), limits.get("factor"))
    if not seen:
        text = "watchdog: first step within %s" % duration(bound)
    else:
        text = "watchdog: hang after %s without a new step" % duration(bound)
    if now is not None and progress.get("metrics_mtime") and seen:
        text += " (quiet %s)" % duration(now - progress["metrics_mtime"])
    return text
