# -*- coding: utf-8 -*-
"""Action plugin ray_job_follow: wait for a Ray job's end in chunks, printing its progress between them.

Documented in plugins/modules/ray_job_follow.py (Ansible reads an action plugin's documentation there).
Runs on the controller; each chunk is one call of the module mvp.ray.ray_job_info on the task's host
(the head), which polls the Jobs API as a single call would and returns after I(progress_interval)
seconds with the job's progress read from its job directory (module_utils mvp_progress).
"""

from __future__ import annotations

import os
import signal

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.mvp.ray.plugins.module_utils.mvp_progress import progress_line

display = Display()

INFO_MODULE = "mvp.ray.ray_job_info"

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


class ActionModule(ActionBase):
    """Follow one job (see plugins/modules/ray_job_follow.py)."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        """Call ray_job_info once (no wait, or no interval) or in chunks until the job ends or the module fails."""
        super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        interval = float(args.pop("progress_interval", 30) or 0)
        if args.get("wait", "none") != "terminal" or interval <= 0:
            return self._info(args, task_vars)
        submission_id = args.get("submission_id")
        hint = ("%s: waiting for its end, a progress line every %gs. Ctrl-C leaves the job running; follow it again "
                "with: %s" % (submission_id, interval, follow_again_command(submission_id)))
        previous = signal.getsignal(signal.SIGINT)

        def interrupted(signum, frame):
            note = ("%s: the play was interrupted; the job runs on. Follow it again with: %s"
                    % (submission_id, follow_again_command(submission_id)))
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
