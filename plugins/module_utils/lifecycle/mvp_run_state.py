# -*- coding: utf-8 -*-
"""A run's state and the job controller's heartbeat, read one way by the job controller and by the plays.

The job controller (module_utils ``mvp_controller``) keeps no state of its own: what it decided is in the job
directories (``mvp_job.FILES``), and ``<shared>/controller/heartbeat.json`` says which controller follows which runs.
This module reads both, for the controller (files on its host) and for the plays that watch a run (the action
``ray_job_follow``, which reads the files on the head through modules, and the filter ``mvp_controller_line``), so
that a rule - which attempt is current, where a run's end is, when a controller counts as alive - is written once.

Reading goes through a :class:`Files` object: :data:`LOCAL` reads this host's files; a caller that reads another
host's files (an action plugin) passes its own subclass. Standard library and ``mvp_job`` only.
"""

from __future__ import annotations

import json
import os
import posixpath

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES, file_names, is_submission_id
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import jobs_dir as _jobs_dir

CONTROLLER_SUBDIR = "controller"
"""Folder under the shared storage with the job controller's heartbeat (``heartbeat.json``)."""

HEARTBEAT_NAME = "heartbeat.json"
"""The heartbeat's file name in ``CONTROLLER_SUBDIR``."""

ALIVE_PASSES = 3
"""A controller is alive while its last pass is younger than this many of its passes (``poll_s``) plus ALIVE_SLACK_S."""

ALIVE_SLACK_S = 15
"""Seconds added to the heartbeat's age bound: the controller's host and the reader's clock may differ a little."""


class Files(object):
    """Where the state files are read: a subclass implements :meth:`text` and :meth:`isdir`; :meth:`json` follows."""

    def text(self, path):
        """The text of the file ``path`` (str), '' when it is missing or cannot be read."""
        raise NotImplementedError

    def isdir(self, path):
        """Whether ``path`` is a folder (bool)."""
        raise NotImplementedError

    def json(self, path):
        """The JSON object in the file ``path`` (dict), {} when it is missing, unreadable or not an object."""
        text = self.text(path)
        if not text:
            return {}
        try:
            value = json.loads(text)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


class LocalFiles(Files):
    """The files of this host."""

    def text(self, path):
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except (OSError, ValueError):
            return ""

    def isdir(self, path):
        return os.path.isdir(path)


LOCAL = LocalFiles()
"""The files of this host (the default of every reader here)."""


def jobs_dir(shared):
    """The jobs folder under the shared storage ``shared`` (str, a path on the host that reads it)."""
    return _jobs_dir(shared)


def heartbeat_file(shared):
    """The job controller's heartbeat under the shared storage ``shared``: ``<shared>/controller/heartbeat.json``."""
    return posixpath.join(shared, CONTROLLER_SUBDIR, HEARTBEAT_NAME)


def attempt_file(jobs, submission_id, name):
    """The path of the file ``name`` (a key of ``mvp_job.FILES``) of attempt ``submission_id`` under the jobs folder
    ``jobs`` (str; KeyError for an unknown name)."""
    return posixpath.join(jobs, submission_id, FILES[name])


def run_end_files(jobs, run):
    """The paths the end of ``run`` may be in, ``logs/run_end.json`` first (``mvp_job.file_names``; list of str)."""
    return [posixpath.join(jobs, run, name) for name in file_names("run_end")]


def run_state(jobs, run, files=LOCAL):
    """What the job directories say about ``run``: its attempts, the current one, the decided next one, its end.

    The attempts are chained by each one's ``logs/restart.json`` (``next``, written by the job controller before it
    heals the cluster and starts that attempt); the run's end is ``logs/run_end.json`` of its first attempt (or the
    name older versions gave it, ``logs/supervisor.json``).

    :param jobs: str, the jobs folder (:func:`jobs_dir`). :param run: str, the run's first attempt's id.
    :param files: :class:`Files` to read them with (:data:`LOCAL`).
    :returns: dict ``{"run", "attempts": [ids], "current": id, "next": id or None (decided, no job directory yet),
        "restarts": {id: that attempt's logs/restart.json}, "ended": dict or None}``.
    """
    attempts, current, following, restarts = [run], run, None, {}
    while True:
        link = files.json(attempt_file(jobs, current, "restart"))
        nxt = link.get("next")
        if not is_submission_id(nxt) or nxt in attempts:
            break
        restarts[current] = link
        if not files.isdir(posixpath.join(jobs, nxt)):
            following = nxt
            break
        attempts.append(nxt)
        current = nxt
    ended = None
    for path in run_end_files(jobs, run):
        ended = files.json(path)
        if ended:
            break
    return {"run": run, "attempts": attempts, "current": current, "next": following, "restarts": restarts,
            "ended": ended or None}


def heartbeat_state(text, now):
    """Whether the job controller is alive, from its heartbeat file's text.

    :param text: str, ``<shared>/controller/heartbeat.json`` ('' when missing; :func:`heartbeat_file`).
    :param now: float, seconds since the epoch (the reader's clock: the controller's host may differ by a few seconds).
    :returns: dict ``{"alive": bool, "age_s": float or None, "name", "host", "pid", "activity", "runs", "content"
        (``{"source", "version", "hash"}`` it runs), "keeper" (``{"failures", "next_start_at", "why"}`` while its
        keeper backs off from a controller that keeps dying, else None)}``; alive while the last pass is younger than
        ALIVE_PASSES passes (its ``poll_s``) and ALIVE_SLACK_S, or while the controller said it is busy
        (``busy_until``: a heal).
    """
    try:
        beat = json.loads(text) if text else {}
    except ValueError:
        beat = {}
    if not isinstance(beat, dict):
        beat = {}
    keeper_word = beat.get("keeper") if isinstance(beat.get("keeper"), dict) else None
    if not beat.get("at"):
        return {"alive": False, "age_s": None, "name": None, "host": None, "pid": None, "activity": None, "runs": [],
                "content": {}, "keeper": keeper_word}
    age = max(0.0, float(now) - float(beat["at"]))
    alive = (age <= ALIVE_PASSES * float(beat.get("poll_s") or 0) + ALIVE_SLACK_S
             or float(now) <= float(beat.get("busy_until") or 0))
    if keeper_word and float(keeper_word.get("at") or 0) < float(beat["at"]):
        keeper_word = None  # the controller ran a pass since the keeper spoke
    return {"alive": alive, "age_s": round(age, 1), "name": beat.get("name"), "host": beat.get("host"),
            "pid": beat.get("pid"), "activity": beat.get("activity"), "runs": list(beat.get("runs") or []),
            "content": beat.get("content") if isinstance(beat.get("content"), dict) else {}, "keeper": keeper_word}


def controller_line(runs, text, now):
    """One line saying who follows ``runs`` (list of ids; None: the runs the heartbeat names) now, from the
    heartbeat's text (see :func:`heartbeat_state`; str)."""
    beat = heartbeat_state(text, now)
    ids = ", ".join(beat["runs"] if runs is None else runs)
    content = beat["content"]
    runs_what = (" running mvp.ray %s (content %s)" % (content.get("version") or "?", content.get("hash"))
                 if content.get("hash") else " running the checkout %s" % content["source"] if content.get("source")
                 else "")
    if beat["alive"] and not ids:
        return ("the job controller %s on %s (pid %s)%s is alive (its last pass %.0f s ago) and follows no run now"
                % (beat["name"], beat["host"], beat["pid"], runs_what, beat["age_s"]))
    ids = ids or "no run"
    if beat["alive"]:
        return ("%s: followed by the job controller %s on %s (pid %s)%s: it judges each attempt and continues the run "
                "after a retryable failure, with nobody waiting. Watch: ansible-playbook collect.yml -e "
                "submission_id=<id> -e wait=true; status.yml lists the runs."
                % (ids, beat["name"], beat["host"], beat["pid"], runs_what))
    if beat["keeper"]:
        return ("%s: NOT supervised - the job controller keeps dying: %s; its keeper starts it again in %.0f s. Fix "
                "the cause, then site.yml (or playbooks/controller.yml)." % (
                    ids, beat["keeper"].get("why"), max(0.0, float(beat["keeper"].get("next_start_at") or 0) - now)))
    if beat["age_s"] is None:
        return ("%s: NOT supervised - no job controller has run for this cluster (no heartbeat under the shared "
                "storage's controller/). Start it with site.yml (or playbooks/controller.yml)." % ids)
    return ("%s: NOT supervised now - the job controller %s on %s was last seen %.0f s ago. It picks the runs up "
            "where they are when it runs again: site.yml (or playbooks/controller.yml) starts it."
            % (ids, beat["name"], beat["host"], beat["age_s"]))
