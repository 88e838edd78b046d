# -*- coding: utf-8 -*-
"""Action plugin ray_job_follow: wait for a Ray job's end in chunks, printing its progress between them.

Documented in plugins/modules/ray_job_follow.py (Ansible reads an action plugin's documentation there).
Runs on the controller; each chunk is one call of the module mvp.ray.ray_job_info on the task's host
(the head), which polls the Jobs API as a single call would and returns after I(progress_interval)
seconds with the job's progress read from its job directory (module_utils mvp_progress).
"""

from __future__ import annotations

import os
import posixpath
import signal
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_progress import progress_line
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_run_state import (
    Files, attempt_file, heartbeat_file, heartbeat_state, run_state)

display = Display()

INFO_MODULE = "mvp.ray.ray_job_info"
SLURP_MODULE = "ansible.builtin.slurp"
STAT_MODULE = "ansible.builtin.stat"

DECISION_POLL_S = 2.0
"""Seconds between two looks for the job controller's decision once an attempt has ended (run mode)."""

FIRST_CHUNK_S = 5.0
"""The first chunk's length (at most): a job still running shows its first line soon, one already ended none."""


def follow_again_command(submission_id):
    """The one command that follows a job again after the play was interrupted (str)."""
    return "ansible-playbook collect.yml -e submission_id=%s -e wait=true" % submission_id


def to_controller_output(text):
    """Write ``text`` to the output of the ansible-playbook process directly; False when that cannot be done.

    Ansible's worker processes are detached from the terminal (their output goes through a queue the
    main process reads); on Ctrl-C the main process closes that queue at once, so a line sent through
    it then is lost. On Linux the main process's stdout is ``/proc/<its pid>/fd/1``.
    """
    try:
        handle = os.open("/proc/%d/fd/1" % os.getppid(), os.O_WRONLY | os.O_APPEND)
    except OSError:
        return False
    try:
        os.write(handle, (text + "\n").encode("utf-8"))
    except OSError:
        return False
    finally:
        os.close(handle)
    return True


def observe(history, progress):
    """Add ``[metrics_mtime, last_step]`` to ``history`` when the step count moved (the rate's samples).

    :param history: list of pairs, changed in place. :param progress: dict of ray_job_info's C(progress) or None.
    :returns: the same list.
    """
    if progress and progress.get("last_step") and progress.get("metrics_mtime"):
        if not history or history[-1][1] != progress["last_step"]:
            history.append([progress["metrics_mtime"], progress["last_step"]])
    return history


class HostFiles(Files):
    """The files of the task's host (the head, where the shared storage is), read through modules (module_utils
    ``mvp_run_state.Files``): slurp for a file's text, stat for a folder."""

    def __init__(self, action, task_vars):
        self.action, self.task_vars = action, task_vars

    def text(self, path):
        return self.action._read_text(path, self.task_vars)  # pylint: disable=protected-access

    def isdir(self, path):
        return self.action._is_dir(path, self.task_vars)  # pylint: disable=protected-access


class ActionModule(ActionBase):
    """Follow one job (see plugins/modules/ray_job_follow.py)."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        """Call ray_job_info once (no wait, or no interval) or in chunks until the job ends or the module fails;
        with I(run), follow the run's attempts until the job controller wrote the run's end."""
        super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        interval = float(args.pop("progress_interval", 30) or 0)
        run, jobs_dir = bool(args.pop("run", False)), args.pop("jobs_dir", "")
        run_timeout = float(args.pop("run_timeout", 0) or 0)
        if run:
            return self._follow_run(args, task_vars, interval, jobs_dir, run_timeout)
        if args.get("wait", "none") != "terminal" or interval <= 0:
            return self._info(args, task_vars)
        return self._follow(args, task_vars, interval)

    def _follow_run(self, args, task_vars, interval, jobs_dir, run_timeout):
        """Follow a run: each attempt to its end (:meth:`_follow`), then the job controller's decision - the next
        attempt (``logs/restart.json``) or the run's end (``logs/run_end.json`` of its first attempt), as
        module_utils ``mvp_run_state`` reads them for the job controller too (here on the task's host)."""
        run = current = args["submission_id"]
        files = HostFiles(self, task_vars)
        deadline = time.time() + (run_timeout or 86400 * 30)
        # The controller owns the deadlines (it stops a stalled attempt and records why); this only watches.
        args.update(wait="terminal", pending_timeout=int(run_timeout or 86400 * 30),
                    running_timeout=int(run_timeout or 86400 * 30), pg_pending_timeout=0)
        said, lines, calls, requests, result, ended_at = set(), [], 0, 0, {}, None

        def say(key, text):
            if key not in said:
                said.add(key)
                display.display(text)
        while True:
            if time.time() > deadline:
                return dict(result, failed=True, msg="run %s did not end within %d s (run_timeout); the job controller "
                            "still follows it: status.yml" % (run, run_timeout), progress_lines=lines)
            result = self._follow(dict(args, submission_id=current), task_vars, interval, run=run)
            lines += result.get("progress_lines") or []
            calls += int(result.get("module_calls") or 1)
            requests += int(result.get("http_requests") or 0)
            if result.get("unreachable") or result.get("failed"):
                say("head-" + current, "%s: the Ray head does not answer (%s): the job controller heals the cluster; "
                    "waiting for it" % (current, str(result.get("msg") or "")[:300]))
                time.sleep(max(interval, DECISION_POLL_S))
                continue
            while True:
                state = run_state(jobs_dir, run, files)
                if state["ended"]:
                    end = state["ended"]
                    last = (end.get("attempts") or state["attempts"])[-1]
                    status = files.json(attempt_file(jobs_dir, last, "status"))
                    return dict(result, changed=False, failed=False, submission_id=last, run_end=end, status=status,
                                progress_lines=lines, module_calls=calls, http_requests=requests)
                link = state["restarts"].get(current)
                if link:
                    say("next-" + current, "%s ended (%s: %s); the job controller continues run %s as %s: %s" % (
                        current, link.get("cause"), str(link.get("summary") or "")[:300], run, link["next"],
                        link.get("why") or ""))
                if state["current"] != current:
                    current, ended_at = state["current"], None
                    break
                if not link:
                    self._no_decision_yet(run, current, jobs_dir, files, ended_at, say)
                ended_at = ended_at or time.time()
                if time.time() > deadline:
                    break
                time.sleep(DECISION_POLL_S)

    def _no_decision_yet(self, run, current, jobs_dir, files, ended_at, say):
        """Say, once, why no decision on the ended attempt ``current`` came yet: no job controller is alive (its
        heartbeat), or the alive one does not follow ``run`` (a minute after the attempt ended)."""
        beat = heartbeat_state(files.text(heartbeat_file(posixpath.dirname(jobs_dir))), time.time())
        if not beat["alive"]:
            say("gone-" + current, "%s ended and no job controller judges it: %s" % (
                current, "its heartbeat is %s s old" % beat["age_s"] if beat["age_s"] is not None
                else "none has run for this cluster (site.yml starts it)"))
        elif run not in beat["runs"] and ended_at and time.time() - ended_at > 60:
            say("unfollowed-" + current, "%s ended and the job controller %s does not follow run %s (its first "
                "attempt's config/controller.json is missing or unreadable); its log on %s says why"
                % (current, beat["name"], run, beat["host"]))

    def _read_text(self, path, task_vars):
        """The text of ``path`` on the task's host ('' when missing or unreadable), with ansible.builtin.slurp."""
        got = self._execute_module(module_name=SLURP_MODULE, module_args={"src": path}, task_vars=task_vars)
        if got.get("failed") or got.get("unreachable") or not got.get("content"):
            return ""
        import base64  # pylint: disable=import-outside-toplevel
        return base64.b64decode(got["content"]).decode("utf-8", "replace")

    def _is_dir(self, path, task_vars):
        """Whether ``path`` is a folder on the task's host, with ansible.builtin.stat (False when it cannot be read)."""
        got = self._execute_module(module_name=STAT_MODULE, module_args={"path": path, "get_checksum": False},
                                   task_vars=task_vars)
        return bool((got.get("stat") or {}).get("isdir")) and not got.get("failed")

    def _follow(self, args, task_vars, interval, run=None):
        """Wait for one job's end in chunks of ``interval`` seconds, printing its progress line between them."""
        submission_id = args.get("submission_id")
        hint = ("%s: waiting for its end, a progress line every %gs. Ctrl-C leaves the job running%s; follow it again "
                "with: %s" % (submission_id, interval, " and the job controller following the run" if run else "",
                              follow_again_command(run or submission_id)))
        previous = signal.getsignal(signal.SIGINT)

        def interrupted(signum, frame):
            note = ("%s: the play was interrupted; the job runs on%s. Follow it again with: %s"
                    % (submission_id, ", followed by the job controller" if run else "",
                       follow_again_command(run or submission_id)))
            if not to_controller_output(note):
                display.display(note)
            signal.signal(signal.SIGINT, previous)
            if callable(previous):
                previous(signum, frame)
            raise KeyboardInterrupt()

        signal.signal(signal.SIGINT, interrupted)
        history, lines, state, planned, chunks, requests = [], [], {}, 0, 0, 0
        try:
            while True:
                chunks += 1
                result = self._info(dict(args, wait_at_most=min(interval, FIRST_CHUNK_S) if chunks == 1 else interval,
                                         wait_state=state, progress=True, progress_planned=planned), task_vars)
                requests += int(result.get("http_requests") or 0)
                if result.get("failed") or result.get("unreachable") or result.get("done", True):
                    break
                state = result.get("wait_state") or {}
                progress = result.get("progress")
                if not progress:
                    continue
                planned = progress.get("planned") or 0
                line = progress_line(progress, (result.get("job") or {}).get("status") or "RUNNING",
                                     progress.get("read_at"), observe(history, progress),
                                     (result.get("job") or {}).get("start_time"))
                if not lines:
                    display.display(hint)
                lines.append(line)
                display.display(line)
        finally:
            signal.signal(signal.SIGINT, previous)
        result.update(progress_lines=lines, module_calls=chunks, http_requests=requests)
        return result

    def _info(self, args, task_vars):
        """One call of ray_job_info with ``args`` on the task's host."""
        return self._execute_module(module_name=INFO_MODULE, module_args=args, task_vars=task_vars)
