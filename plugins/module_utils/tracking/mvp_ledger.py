# -*- coding: utf-8 -*-
"""Where a run's GPU-hours went: the closed ledger of one run, from its attempts' files alone (no Ray call).

A *run* is the chain of attempts ``<run>``, ``<run>-r1``, ... (``mvp_run_state.run_state``). The job controller
writes :func:`compute_ledger`'s answer to ``logs/ledger.json`` of the run's first attempt while the run goes on and
once more at its end (``mvp_controller``); the format is the contract docs/jobs.md ("Where the GPU-hours went")
shows: ``version`` 1, the run's labels, ``gpu_seconds_held``, ``buckets`` (:data:`BUCKETS`, GPU-seconds),
``goodput``, ``no_gpu``, ``steps``, ``estimates`` and one entry per attempt with the same buckets.

Files read per attempt (``mvp_job.FILES``):

* ``config/job_spec.json``: ``gpus`` = ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` of its trainer overrides
  (else its ``world_size``, else ``gpus_requested``, else 0); ``trainer.save_freq``, ``trainer.test_freq``;
  ``owner``, ``team``, ``project``, ``workload``, ``code_id``, ``priority``; ``resume_from.step`` (the checkpoint
  step the attempt continued from).
* ``logs/queue.json`` (mvp_gate.py): ``gate_started_s``, ``admitted_at_s``.
* ``logs/status.json`` (``ray_job_record``, once the attempt ended): Ray's ``start_time``/``end_time`` (ms),
  ``verdict``, ``cause``, ``steps.resumed``/``steps.planned``.
* ``logs/steps.jsonl`` (mvp_entry.py's stamper): ``{"step", "at"}`` when each step first appeared in
  ``logs/metrics.jsonl``, ``{"event": "start"|"trainer_exit", "at"}``.
* ``logs/metrics.jsonl`` (verl): ``timing_s/step``, ``timing_s/save_checkpoint``, ``timing_s/testing`` and
  ``val/*`` per step, read incrementally (:class:`LedgerCache`, ``mvp_runs.read_metrics`` from an offset).
* ``checkpoints/global_step_N`` (verl): which steps this attempt saved, and their files' modification times;
  the newest complete one (``mvp_runs.latest_checkpoint``).
* ``logs/restart.json`` / ``logs/continued.json`` (job controller): the next attempt, ``heal_s``;
  ``logs/stopped_by.json`` (``cause`` preempted, node_lost, ...), ``logs/watchdog.json`` (a hang);
  ``logs/run_end.json`` of the first attempt: the run ended (its verdict).

The rules (every figure is GPU-seconds = wall seconds x the attempt's ``gpus``):

* **held**: an attempt holds its GPUs from the gate's admission (``queue.json`` ``admitted_at_s``: its trainer may
  start; the wait before it is ``no_gpu.queue_wait_s``), else Ray's ``start_time``, else the entrypoint's ``start``
  stamp; until the trainer's exit stamp (its GPUs are free then: what the entrypoint does after it - its verdict,
  which waits up to 45 s for Ray to declare a node dead - holds none), else Ray's ``end_time``, else
  ``continued.json``'s ``ended_at``; the earlier of the exit stamp and ``end_time`` when both exist; a running
  attempt until ``now``. An attempt with neither start held nothing.
* **startup**: held start -> the first step's stamp, minus that first step's own duration (``timing_s/step`` of
  that step when verl logged it, else the median of the attempt's plain step intervals: an estimate); the checkpoint
  load and verl's validation before training (its metrics line of step 0, which gets no step of its own) are in it.
* **each step interval** (stamp k-1 -> stamp k; the first step's is its duration above): ``checkpoint`` is
  ``timing_s/save_checkpoint`` of step k when the run logs it (PPO/GRPO save inside the step, before its line);
  otherwise (SFT saves after step k-1's line) the interval's excess over the median plain interval when a
  checkpoint of step k-1 exists in this attempt or ``save_freq`` expects one (an estimate). ``validation``
  likewise: ``timing_s/testing`` of step k, or the excess when step k-1 logged ``val/*`` or ``test_freq`` expects
  it (both expected and untimed: the excess is split in halves, an estimate). The rest is the step's training:
  ``productive`` when the run keeps the step - its number is <= the step the NEXT attempt resumed from (its job
  spec's ``resume_from.step``, else its ``status.json`` ``steps.resumed``; a decided next attempt not started yet
  resumes from this attempt's newest complete checkpoint) and > the step this attempt itself resumed from;
  ``recomputed`` when it is trained again by the next attempt (beyond that step; or at or below this attempt's own
  resume step); ``lost`` for the LAST attempt of a run that ended without ``trained``: steps after its newest
  complete checkpoint (or after its own resume step when it saved none). A running run's steps are productive.
* **after the last step** (last stamp -> end): an ended attempt that saved a checkpoint of its last step after that
  step's line (runs that do not log ``timing_s/save_checkpoint``) first counts ``checkpoint`` up to the newest file
  modification time in that checkpoint's folder (an estimate); the rest is ``hang`` (the watchdog stopped it:
  ``logs/watchdog.json``), ``preemption`` (``stopped_by.json`` cause ``preempted``: the hand-over from its last
  step, right after the checkpoint it was stopped at, to Ray's end), ``shutdown`` (the attempt's verdict is
  ``trained``/``succeeded``), else ``failure_gap`` (a fault or a stop). A running attempt's time since its last
  step is the step under way: ``productive`` until known.
* **an attempt with no step at all**: its whole held time is ``startup`` (it never got past starting, whether it
  then failed or not), except ``hang`` when the watchdog stopped it and ``preemption`` when it was preempted.
* ``unaccounted`` = held - the sum of the others (rounding only, when the stamps lie inside the held time).
* ``no_gpu``: ``queue_wait_s`` = ``admitted_at_s`` - ``gate_started_s`` per attempt (a waiting attempt: to
  ``now``), ``heal_s`` = ``continued.json`` ``heal_s``, both summed over the attempts (wall seconds).

Cost: :class:`LedgerCache` keeps each file's parsed content by its (size, mtime) and reads only the bytes added to
``metrics.jsonl`` and ``steps.jsonl``; :func:`run_signature` (a few ``stat`` calls per attempt) says whether a
run's files changed at all. Standard library and this collection only.
"""

from __future__ import annotations

import json
import os
import statistics

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_run_state
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import mtime
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import (
    STEP_DIR_RE, latest_checkpoint, read_metrics)

VERSION = 1
"""The ledger file's format version (docs/jobs.md, "Where the GPU-hours went")."""

LAST_STEP = "__last_step__"
"""The key under which :meth:`LedgerCache.metrics` keeps the highest step of any metrics line ({0: step})."""

BUCKETS = ("startup", "productive", "checkpoint", "validation", "recomputed", "lost", "failure_gap", "hang",
           "preemption", "shutdown", "unaccounted")
"""The buckets every held GPU-second goes into, in this order (the contract's key names)."""

STEP_KEY, SAVE_KEY, TEST_KEY = "timing_s/step", "timing_s/save_checkpoint", "timing_s/testing"
"""verl's timing metrics (seconds) the ledger reads from ``metrics.jsonl``."""

VAL_PREFIX = "val/"
"""verl's validation metrics: a step that logged one ran a validation."""

ATTEMPT_FILES = ("job_spec", "queue", "status", "steps", "metrics", "restart", "continued", "stopped_by",
                 "watchdog", "checkpoints")
"""The files of an attempt whose (size, mtime) make :func:`run_signature`."""

TRAINED = ("trained", "succeeded")
"""Verdicts of an attempt that ended normally."""


def _num(value):
    """``value`` as a float, or None when it is not a number (bool excluded)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _stat(path):
    """(size, mtime_ns) of ``path``, or None when it does not exist."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_size, info.st_mtime_ns)


def run_signature(jobs_dir, run):
    """What changes when any file the ledger of ``run`` reads changes (tuple; cheap: a few ``stat`` per attempt).

    :param jobs_dir: str, the jobs folder on this host. :param run: str, the run's first attempt's id.
    :returns: tuple of (attempt, file name, (size, mtime_ns) or None), plus the run's end file.
    """
    state = mvp_run_state.run_state(jobs_dir, run)
    sig = [(run, "run_end", tuple(_stat(p) for p in mvp_run_state.run_end_files(jobs_dir, run)))]
    for sid in state["attempts"]:
        for name in ATTEMPT_FILES:
            sig.append((sid, name, _stat(mvp_run_state.attempt_file(jobs_dir, sid, name))))
    return tuple(sig)


class LedgerCache(object):
    """Parsed files kept between two computations: JSON files by their (size, mtime), the stamps and metrics files
    followed from the byte offset they were read to (a file that shrank or was replaced is read again whole).

    One instance lives in the job controller; :func:`compute_ledger` without one reads every file once.
    """

    def __init__(self):
        self.json = {}
        self.follow = {}

    def forget(self, folders):
        """Drop what is kept of the files under ``folders`` (iterable of job directories: an ended run's)."""
        prefixes = tuple(os.path.join(folder, "") for folder in folders)
        for table in (self.json, self.follow):
            for path in [p for p in table if p.startswith(prefixes)]:
                del table[path]

    def read_json(self, path):
        """The JSON object in ``path`` (dict; {} when missing, unreadable or not an object)."""
        sig = _stat(path)
        hit = self.json.get(path)
        if hit and hit[0] == sig:
            return hit[1]
        value = {}
        if sig is not None:
            try:
                with open(path, encoding="utf-8") as handle:
                    loaded = json.load(handle)
                value = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError):
                value = {}
        self.json[path] = (sig, value)
        return value

    def _followed(self, path, kind):
        """The follow state of ``path`` (dict with ``end``, ``ino``), reset when the file shrank or was replaced."""
        try:
            info = os.stat(path)
        except OSError:
            self.follow.pop(path, None)
            return None, None
        state = self.follow.get(path)
        if state is None or state["kind"] != kind or state["ino"] != info.st_ino or info.st_size < state["end"]:
            state = {"kind": kind, "ino": info.st_ino, "end": 0, "data": None}
            self.follow[path] = state
        return state, info.st_size

    def metrics(self, path):
        """verl's timing and validation metrics of ``path``: dict metric -> {step: value} (only the new bytes are
        read: ``mvp_runs.read_metrics`` from the offset reached last time)."""
        state, size = self._followed(path, "metrics")
        if state is None:
            return {}
        if state["data"] is None:
            state["data"] = {}
        if size > state["end"]:
            got = read_metrics(path, keys=(STEP_KEY, SAVE_KEY, TEST_KEY), prefixes=(VAL_PREFIX,), start=state["end"])
            for key, points in got["series"].items():
                state["data"].setdefault(key, {}).update((step, value) for step, value in points)
            # the highest step of any line (the key LAST_STEP, not a metric of verl's)
            last = max(state["data"].get(LAST_STEP, {}).get(0, 0), got["last_step"])
            state["data"][LAST_STEP] = {0: last}
            state["end"] = got["end"]
        return state["data"]

    def stamps(self, path):
        """The stamps of ``logs/steps.jsonl``: dict ``{"start": at or None, "exit": at or None, "exit_code",
        "steps": [[step, at], ...]}`` in the order they were written (a step once: its first stamp)."""
        state, size = self._followed(path, "stamps")
        if state is None:
            return {"start": None, "exit": None, "exit_code": None, "steps": []}
        if state["data"] is None:
            state["data"] = {"start": None, "exit": None, "exit_code": None, "steps": [], "seen": set()}
        data = state["data"]
        if size > state["end"]:
            with open(path, "rb") as handle:
                handle.seek(state["end"])
                for raw in handle:
                    if not raw.endswith(b"\n"):
                        break  # half written: read again next time
                    state["end"] += len(raw)
                    try:
                        row = json.loads(raw.decode("utf-8", "replace"))
                    except ValueError:
                        continue
                    at = _num(row.get("at")) if isinstance(row, dict) else None
                    if at is None:
                        continue
                    step = row.get("step")
                    if isinstance(step, int) and not isinstance(step, bool):
                        if step not in data["seen"]:
                            data["seen"].add(step)
                            data["steps"].append([step, at])
                    elif row.get("event") == "start" and data["start"] is None:
                        data["start"] = at
                    elif row.get("event") == "trainer_exit":
                        data["exit"], data["exit_code"] = at, row.get("code")
        return data


def checkpoint_steps(folder):
    """The steps with a ``global_step_N`` folder in ``folder`` (set of int; empty when it cannot be read)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return set()
    return {int(m.group(1)) for m in (STEP_DIR_RE.match(n) for n in names) if m}


def newest_mtime(folder):
    """The newest modification time (s since the epoch) of the files in ``folder`` and one level below, or None."""
    newest = None
    for root, dirs, files in os.walk(folder):
        if root[len(folder):].count(os.sep) >= 1:
            dirs[:] = []
        for name in files:
            try:
                mtime = os.stat(os.path.join(root, name)).st_mtime
            except OSError:
                continue
            newest = mtime if newest is None else max(newest, mtime)
    return newest


def gpus_of(spec):
    """The GPUs an attempt holds: ``trainer.nnodes`` x ``trainer.n_gpus_per_node`` of its job spec's trainer
    overrides, else its ``world_size``, else ``gpus_requested``, else 0 (int)."""
    overrides = spec.get("trainer_overrides") or {}
    try:
        if "trainer.n_gpus_per_node" in overrides:
            return int(overrides.get("trainer.nnodes", 1)) * int(overrides["trainer.n_gpus_per_node"])
    except (TypeError, ValueError):
        pass
    for key in ("world_size", "gpus_requested"):
        value = spec.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def _freq(spec, key):
    """``trainer.<key>`` of a job spec as a positive int, or 0 (not set, verl's ``after_each_epoch``, or <= 0)."""
    try:
        value = int((spec.get("trainer_overrides") or {}).get(key))
    except (TypeError, ValueError):
        return 0
    return value if value > 0 else 0


def _resumed(spec, status):
    """The checkpoint step an attempt continued from (int, 0 for a fresh one): its job spec's ``resume_from.step``,
    else its status's ``steps.resumed``."""
    step = (spec.get("resume_from") or {}).get("step") if isinstance(spec.get("resume_from"), dict) else None
    if step is None:
        step = (status.get("steps") or {}).get("resumed")
    try:
        return int(step or 0)
    except (TypeError, ValueError):
        return 0


def _label(spec, key):
    """A who/what label of the job spec (``owner``, ``team``, ``project``): top level, else its request's; or None."""
    value = spec.get(key)
    if value is None:
        value = (spec.get("request") or {}).get(key)
    return value if isinstance(value, str) and value else None


def _empty():
    return {name: 0.0 for name in BUCKETS}


def _end_kind(watchdog, stopped_by, verdict):
    """The bucket of an ended attempt's time after its last step (see the module's rules)."""
    if watchdog.get("hang"):
        return "hang"
    if stopped_by.get("cause") == "preempted":
        return "preemption"
    if verdict in TRAINED:
        return "shutdown"
    return "failure_gap"


def attempt_ledger(view, now, fate, notes):
    """The ledger of one attempt (see the module's rules).

    :param view: dict of what its files say: ``sid``, ``spec``, ``status``, ``queue``, ``stamps``
        (:meth:`LedgerCache.stamps`), ``metrics`` (:meth:`LedgerCache.metrics`), ``saved`` (set of checkpoint
        steps of its own folder), ``checkpoints`` (its folder), ``stopped_by``, ``watchdog``, ``continued``,
        ``running`` (bool), ``ended_at`` (float or None).
    :param now: float, seconds since the epoch. :param fate: dict: ``kept_upto`` (int or None: the step the next
        attempt resumed from), ``lost_after`` (int or None: the last attempt of a run that did not end trained:
        steps after it are lost). :param notes: set of str, the estimates made (added to).
    :returns: dict, the contract's attempt entry (``buckets`` in GPU-seconds).
    """
    spec, status, queue, stamps = view["spec"], view["status"], view["queue"], view["stamps"]
    metrics = view["metrics"]
    gpus = gpus_of(spec)
    start_ms, end_ms = _num(status.get("start_time")), _num(status.get("end_time"))
    started = _num(queue.get("admitted_at_s")) or (start_ms / 1000.0 if start_ms else None) or stamps["start"]
    ended = view["ended_at"]
    gate = _num(queue.get("gate_started_s"))
    admitted = _num(queue.get("admitted_at_s"))
    queue_wait = (admitted - gate) if gate is not None and admitted is not None else (
        now - gate if gate is not None and view["running"] else 0.0)
    own = _resumed(spec, status)
    verdict = status.get("verdict")
    entry = {"submission_id": view["sid"], "gpus": gpus, "started_at": started, "ended_at": ended,
             "seconds_held": 0.0, "gpu_seconds_held": 0.0, "buckets": _empty(), "seconds": _empty(),
             "queue_wait_s": max(0.0, queue_wait or 0.0), "heal_s": _num(view["continued"].get("heal_s")) or 0.0,
             "verdict": verdict if not view["running"] else None, "cause": status.get("cause"),
             "steps": {"first": None, "last": None, "resumed": own, "productive": 0, "recomputed": 0, "lost": 0}}
    if started is None:
        return entry
    until = now if view["running"] or ended is None else ended
    held = max(0.0, until - started)
    wall = _empty()
    # step 0 is verl's validation before training (val_before_train), not a step: it stays in the start-up
    steps = [(n, min(max(at, started), until)) for n, at in stamps["steps"] if n > 0]
    if not view["running"] and view.get("metrics_mtime"):
        # Steps verl logged after the stamper's last look (it looks every 0.25 s; a node killed right after a line
        # leaves that step unstamped): stamped at the metrics file's last write, an estimate.
        last = steps[-1][0] if steps else 0
        logged = list(range(last + 1, int(metrics.get(LAST_STEP, {}).get(0, 0)) + 1))
        if logged:
            at = min(max(view["metrics_mtime"], steps[-1][1] if steps else started), until)
            steps += [(n, at) for n in logged]
            notes.add("%s: step(s) %s logged after the last stamp: stamped at the metrics file's last write (an "
                      "estimate)" % (view["sid"], ", ".join(str(n) for n in logged)))
    end_kind = "productive" if view["running"] else _end_kind(view["watchdog"], view["stopped_by"], verdict)
    if not steps:
        wall["hang" if end_kind == "hang" else "preemption" if end_kind == "preemption" else "startup"] = held
    else:
        entry["steps"].update(first=steps[0][0], last=steps[-1][0])
        timed_save, timed_test = SAVE_KEY in metrics, TEST_KEY in metrics
        save_freq, test_freq = _freq(spec, "trainer.save_freq"), _freq(spec, "trainer.test_freq")
        validated = set()
        for key, points in metrics.items():
            if key.startswith(VAL_PREFIX):
                validated.update(points)

        def expected(prev):
            """(checkpoint expected, validation expected) in the interval after step ``prev``'s line (untimed)."""
            save = not timed_save and (prev in view["saved"] or bool(save_freq and prev % save_freq == 0))
            test = not timed_test and (prev in validated or bool(test_freq and prev % test_freq == 0))
            return save, test

        intervals = []
        for i in range(1, len(steps)):
            save, test = expected(steps[i - 1][0])
            timed = (metrics.get(SAVE_KEY, {}).get(steps[i][0], 0) or 0) + (
                metrics.get(TEST_KEY, {}).get(steps[i][0], 0) or 0)
            intervals.append((steps[i][1] - steps[i - 1][1], save or test or timed > 0))
        plain = [d for d, busy in intervals if not busy] or [d for d, _busy in intervals]
        median = statistics.median(plain) if plain else None
        first = metrics.get(STEP_KEY, {}).get(steps[0][0])
        if first is None:
            if median is None:
                first = 0.0
                notes.add("startup: %s logged one step and no timing_s/step: that step's time is counted as "
                          "start-up" % view["sid"])
            else:
                first = median
                notes.add("startup: the first step's own duration is the median step interval (no timing_s/step "
                          "logged): an estimate")
        first = min(first, steps[0][1] - started)
        wall["startup"] = steps[0][1] - started - first

        def fate_of(n):
            if own and n <= own:
                return "recomputed"
            if fate.get("kept_upto") is not None:
                return "productive" if n <= fate["kept_upto"] else "recomputed"
            if fate.get("lost_after") is not None and n > fate["lost_after"]:
                return "lost"
            return "productive"

        for i, (n, at) in enumerate(steps):
            duration = first if i == 0 else at - steps[i - 1][1]
            save_s, test_s = 0.0, 0.0
            if timed_save:
                save_s = min(metrics[SAVE_KEY].get(n, 0.0), duration)
            if timed_test:
                test_s = min(metrics[TEST_KEY].get(n, 0.0), duration - save_s)
            if i > 0 and median is not None:
                save, test = expected(steps[i - 1][0])
                excess = max(0.0, duration - median - save_s - test_s)
                if save and test:
                    save_s, test_s = save_s + excess / 2, test_s + excess / 2
                    notes.add("checkpoint, validation: a step interval with both, untimed, splits its excess over "
                              "the median step interval in halves: an estimate")
                elif save:
                    save_s += excess
                    notes.add("checkpoint: the step interval's excess over the median step interval (no "
                              "timing_s/save_checkpoint logged): an estimate")
                elif test:
                    test_s += excess
                    notes.add("validation: the step interval's excess over the median step interval (no "
                              "timing_s/testing logged): an estimate")
            wall["checkpoint"] += save_s
            wall["validation"] += test_s
            kind = fate_of(n)
            wall[kind] += duration - save_s - test_s
            entry["steps"][kind] += 1
        tail = until - steps[-1][1]
        last = steps[-1][0]
        if not view["running"] and not timed_save and last in view["saved"] and tail > 0:
            newest = newest_mtime(os.path.join(view["checkpoints"], "global_step_%d" % last))
            if newest is not None:
                save_s = min(max(0.0, newest - steps[-1][1]), tail)
                wall["checkpoint"] += save_s
                tail -= save_s
                notes.add("checkpoint: the save after the last step's line ends at its folder's newest file "
                          "(modification time): an estimate")
        wall[end_kind] += tail
    wall["unaccounted"] = held - sum(wall[name] for name in BUCKETS if name != "unaccounted")
    entry["seconds_held"] = held
    entry["gpu_seconds_held"] = held * gpus
    entry["buckets"] = {name: wall[name] * gpus for name in BUCKETS}
    entry["seconds"] = {name: wall[name] for name in BUCKETS}  # wall seconds: a job of no GPU has them too
    return entry


def _ended_at(view):
    """When an ended attempt ended (s since the epoch) from its files, or None (see the module's rules)."""
    end_ms = _num(view["status"].get("end_time"))
    exit_at = view["stamps"]["exit"]
    if end_ms:
        return min(end_ms / 1000.0, exit_at) if exit_at is not None else end_ms / 1000.0
    if exit_at is not None:
        return exit_at
    ended = _num(view["continued"].get("ended_at"))
    if ended:
        return ended / 1000.0 if ended > 1e11 else ended  # Ray's end_time is in ms
    return None


def compute_ledger(jobs_dir, run, now, cache=None):
    """The ledger of ``run`` (the contract: docs/jobs.md, "Where the GPU-hours went"; the rules: this module).

    :param jobs_dir: str, the jobs folder on this host (``<shared>/jobs``).
    :param run: str, the run's first attempt's id (its job directory must exist).
    :param now: float, seconds since the epoch (``computed_at``; the end of a running attempt).
    :param cache: :class:`LedgerCache` or None (every file read once).
    :returns: dict (``version``, ``run``, ``state``, ..., ``attempts``); all times seconds since the epoch, all
        buckets GPU-seconds.
    :raises ValueError: ``run`` has no job directory under ``jobs_dir``.
    """
    if not os.path.isdir(os.path.join(jobs_dir, run)):
        raise ValueError("run %s has no job directory under %s" % (run, jobs_dir))
    cache = cache or LedgerCache()
    state = mvp_run_state.run_state(jobs_dir, run)
    ended = state["ended"] or None
    views = []
    for sid in state["attempts"]:
        def path(name, sid=sid):
            return mvp_run_state.attempt_file(jobs_dir, sid, name)
        status = cache.read_json(path("status"))
        views.append({"sid": sid, "spec": cache.read_json(path("job_spec")), "status": status,
                      "queue": cache.read_json(path("queue")), "stamps": cache.stamps(path("steps")),
                      "metrics": cache.metrics(path("metrics")), "checkpoints": path("checkpoints"),
                      "metrics_mtime": mtime(path("metrics")),
                      "saved": checkpoint_steps(path("checkpoints")),
                      "stopped_by": cache.read_json(path("stopped_by")),
                      "watchdog": cache.read_json(path("watchdog")), "continued": cache.read_json(path("continued"))})
    notes = set()
    attempts = []
    last_verdict = None
    for i, view in enumerate(views):
        is_last = i == len(views) - 1
        link = state["restarts"].get(view["sid"])
        view["running"] = is_last and not ended and not link and not _num(view["status"].get("end_time"))
        view["ended_at"] = None if view["running"] else _ended_at(view)
        if not view["running"] and view["ended_at"] is None:
            view["ended_at"] = now  # ended, but no file says when (no status.json end_time, no exit stamp)
            notes.add("%s: no end time in its files: held until now" % view["sid"])
        fate = {}
        if not is_last:
            nxt = views[i + 1]
            step = (nxt["spec"].get("resume_from") or {}).get("step") if isinstance(
                nxt["spec"].get("resume_from"), dict) else None
            if step is None and nxt["status"]:
                step = _resumed(nxt["spec"], nxt["status"])
            fate["kept_upto"] = int(step or 0)
        elif link:  # decided, its next attempt not started yet: it resumes from this one's newest checkpoint
            newest = latest_checkpoint(view["checkpoints"]) or {}
            fate["kept_upto"] = newest.get("step") if newest.get("step") is not None else _resumed(
                view["spec"], view["status"])
        elif ended and not ((ended.get("trained")) or (view["status"].get("verdict") in TRAINED)):
            newest = latest_checkpoint(view["checkpoints"]) or {}
            fate["lost_after"] = newest.get("step") if newest.get("step") is not None else _resumed(
                view["spec"], view["status"])
        attempts.append(attempt_ledger(view, now, fate, notes))
        if view["status"].get("verdict"):
            last_verdict = view["status"]
    first_spec, first_queue = views[0]["spec"], views[0]["queue"]
    buckets = _empty()
    for entry in attempts:
        for name in BUCKETS:
            buckets[name] += entry["buckets"][name]
    held = sum(entry["gpu_seconds_held"] for entry in attempts)
    seconds = {name: sum(entry["seconds"][name] for entry in attempts) for name in BUCKETS}
    end_verdict = (ended or {}).get("verdict")
    verdict = cause = None
    if ended:
        verdict = (end_verdict or {}).get("verdict") if isinstance(end_verdict, dict) else end_verdict
        cause = (end_verdict or {}).get("cause") if isinstance(end_verdict, dict) else None
        if ended.get("state") == "stopped" and not verdict:
            verdict = "stopped"
        verdict = verdict or (last_verdict or {}).get("verdict")
    planned = None
    for view in views:
        planned = (view["status"].get("steps") or {}).get("planned") or planned
    first_status = views[0]["status"]
    submitted = _num(first_queue.get("gate_started_s")) or (
        _num(first_status.get("start_time")) / 1000.0 if _num(first_status.get("start_time")) else None) or (
        views[0]["stamps"]["start"])
    priority = first_spec.get("priority")
    return {
        "version": VERSION, "run": run, "state": "ended" if ended else "running", "verdict": verdict, "cause": cause,
        "owner": _label(first_spec, "owner"), "team": _label(first_spec, "team"),
        "project": _label(first_spec, "project"), "workload": first_spec.get("workload"),
        "code_id": first_spec.get("code_id"),
        "priority": priority.get("class") if isinstance(priority, dict) else priority,
        "gpus": gpus_of(first_spec), "submitted_at": submitted,
        "ended_at": attempts[-1]["ended_at"] if ended else None, "computed_at": now,
        "gpu_seconds_held": held, "buckets": buckets, "seconds": seconds,
        "seconds_held": sum(entry["seconds_held"] for entry in attempts), "goodput": buckets["productive"] / held if held > 0 else None,
        "no_gpu": {"queue_wait_s": sum(e["queue_wait_s"] for e in attempts),
                   "heal_s": sum(e["heal_s"] for e in attempts)},
        "steps": {"productive": sum(e["steps"]["productive"] for e in attempts),
                  "recomputed": sum(e["steps"]["recomputed"] for e in attempts),
                  "lost": sum(e["steps"]["lost"] for e in attempts), "planned": planned},
        "estimates": sorted(notes), "attempts": attempts,
    }


SUMMARY_ORDER = ("productive", "startup", "checkpoint", "validation", "recomputed", "lost", "failure_gap", "hang",
                 "preemption", "shutdown", "unaccounted")
SUMMARY_WORDS = {"productive": "productive", "startup": "start-up", "checkpoint": "checkpoint",
                 "validation": "validation", "recomputed": "recomputed", "lost": "lost", "failure_gap": "failure gap",
                 "hang": "hang", "preemption": "preemption", "shutdown": "shutdown", "unaccounted": "unaccounted"}


def _minutes(gpu_seconds, gpus):
    """GPU-seconds as wall minutes of the run's GPUs, as text (``41 min``; ``0.5 min`` below one minute)."""
    wall = gpu_seconds / 60.0 / (gpus or 1)
    return "%.0f min" % wall if abs(wall) >= 1 else "%.1f min" % wall


def summary_line(ledger):
    """The ledger in one line: ``goodput 86%: 41 min productive, 4 min start-up, 3 min recomputed, ...``.

    Minutes are wall minutes (the ledger's ``seconds``: GPU-seconds / ``gpus``); buckets under 0.05 s are left out, the
    productive one first, then the largest first; the GPU-hours held and the time without GPUs (queue, heal) end it.
    A run of no GPU (a script job) says ``no GPU held: ...`` with its wall minutes and no GPU-hours.

    :param ledger: dict, :func:`compute_ledger`'s answer (or a ``logs/ledger.json``).
    :returns: str.
    """
    gpus = ledger.get("gpus") or 0
    # wall seconds per bucket (``seconds``; a ledger written before them: GPU-seconds over the GPUs)
    wall = ledger.get("seconds") or {name: value / (gpus or 1) for name, value in (ledger.get("buckets") or {}).items()}
    goodput = ledger.get("goodput")
    head = ("goodput %s" % ("%.0f%%" % (100 * goodput) if goodput is not None else "-")) if gpus else "no GPU held"
    parts = ["%s %s" % (_minutes(wall.get("productive", 0.0), 1), SUMMARY_WORDS["productive"])]
    rest = sorted((name for name in SUMMARY_ORDER[1:] if abs(wall.get(name) or 0.0) >= 0.05),
                  key=lambda name: -abs(wall[name]))
    parts += ["%s %s" % (_minutes(wall[name], 1), SUMMARY_WORDS[name]) for name in rest]
    no_gpu = ledger.get("no_gpu") or {}
    tail = "; %.2f GPU-h held by %d GPU(s)" % ((ledger.get("gpu_seconds_held") or 0.0) / 3600.0, gpus) if gpus else ""
    waits = [("queue", no_gpu.get("queue_wait_s") or 0.0), ("heal", no_gpu.get("heal_s") or 0.0)]
    if any(value >= 1 for _name, value in waits):
        tail += "; no GPU: %s" % ", ".join("%.1f min %s" % (value / 60.0, name) for name, value in waits if value >= 1)
    return "%s: %s%s" % (head, ", ".join(parts), tail)


def goodput_so_far(ledger):
    """``goodput so far NN%`` for a running run's status line ('' when nothing was held yet) (str)."""
    goodput = (ledger or {}).get("goodput")
    return "" if goodput is None else "goodput so far %.0f%%" % (100 * goodput)
