# -*- coding: utf-8 -*-
"""The restart decision: does a run continue after its attempt ended, and as which next attempt.

A run is a chain of attempts ``<run>``, ``<run>-r1``, ``<run>-r2`` ... Each attempt is judged by its
verdict (``mvp_verdict.classify``). The run continues when the attempt's cause is retryable
(``mvp_verdict.RETRYABLE_CAUSES``: the cluster or the machine failed, never the request) and one of
those the site restarts (``job_controller_restart_causes``), while the run's ``max_restarts`` allow. The next attempt
repeats the run's request with its own id and ``resume_from`` the attempt that ended (its newest complete
checkpoint, or one of the attempts before it), unless no attempt of the run ever trained: then it starts
afresh. An attempt the job controller preempted (cause ``preempted``: stopped right after a complete
checkpoint for a job of a higher priority) always continues, whatever ``job_controller_restart_causes`` says, and
is not counted against ``max_restarts``. Every next attempt keeps the run's place in the queue: its
first attempt's submission time (``info["queued_since"]``, the gate's ``--since``). The job controller
(``mvp_controller``) asks ``decide`` once per ended attempt.
"""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import RETRYABLE_CAUSES, one_line

# The value of job_controller_restart_causes that restarts every retryable cause.
ALL_RETRYABLE = "retryable"
# The cause of an attempt the job controller stopped for a job of a higher priority: always continued, not counted.
PREEMPTED = "preempted"


def restart_causes(setting):
    """The causes a site restarts, from its setting ``job_controller_restart_causes``.

    :param setting: ``"retryable"`` (every cause in ``mvp_verdict.RETRYABLE_CAUSES``) or a list of some of them.
    :returns: tuple of str.
    :raises ValueError: for a cause that is not retryable (a restart cannot fix the request), naming the setting.
    """
    if setting in (None, "", ALL_RETRYABLE):
        return tuple(RETRYABLE_CAUSES)
    if isinstance(setting, str) or not all(isinstance(c, str) for c in setting):
        raise ValueError("job_controller_restart_causes must be %r or a list of causes from %s (got %r)."
                         % (ALL_RETRYABLE, ", ".join(RETRYABLE_CAUSES), setting))
    wrong = [c for c in setting if c not in RETRYABLE_CAUSES]
    if wrong:
        raise ValueError("job_controller_restart_causes: %s cannot be restarted (a restart repeats the same request; only "
                         "%s can be). Fix: remove them, or set job_controller_restart_causes: %s."
                         % (", ".join(wrong), ", ".join(RETRYABLE_CAUSES), ALL_RETRYABLE))
    return tuple(setting)


def verdict_line(submission_id, verdict):
    """``<id>: <the verdict's one line>`` (``mvp_verdict.one_line``), an entry of the run's history (str)."""
    return "%s: %s" % (submission_id, one_line(verdict or None))


def decide(spec, verdict, causes=ALL_RETRYABLE):
    """Decide whether the run of ``spec``'s attempt continues, and as what.

    :param spec: dict, the ended attempt's job spec (``config/job_spec.json``): ``submission_id``, ``request``,
        ``max_restarts``, ``resume_from`` (dict or None) and ``restart`` (None for a run's first attempt, else
        ``{"run", "attempt", "max_restarts", "history"}``).
    :param verdict: dict or None, the attempt's verdict (``cause``, ``verdict``, ``summary``, ``steps.last``).
    :param causes: the site's ``job_controller_restart_causes`` (``restart_causes``).
    :returns: dict ``{"restart": bool, "why": str, "history": [str], "next": None or {"submission_id",
        "request", "info"}}``; ``history`` is every attempt of the run so far, this one last.
    :raises ValueError: for a bad ``causes`` setting (``restart_causes``).
    """
    allowed = restart_causes(causes)
    verdict = verdict or {}
    record = spec.get("restart") or {}
    attempt = int(record.get("attempt") or 0)
    counted = int(record.get("restarts") if record.get("restarts") is not None else attempt)
    max_restarts = int(record.get("max_restarts") if record.get("max_restarts") is not None
                       else spec.get("max_restarts") or 0)
    earlier = list(record.get("history") or [])
    history = [h["line"] for h in earlier] + [verdict_line(spec["submission_id"], verdict)]
    cause = verdict.get("cause")
    result = {"restart": False, "history": history, "next": None}
    if verdict.get("verdict") in ("trained", "succeeded"):
        return dict(result, why="the attempt %s" % verdict["verdict"])
    preempted = cause == PREEMPTED
    if cause not in allowed and not preempted:
        return dict(result, why="cause %s is not restarted (job_controller_restart_causes: %s)" % (cause, ", ".join(allowed)))
    if counted >= max_restarts and not preempted:
        return dict(result, why="the run used its %d restart(s) (max_restarts)" % max_restarts)
    run = record.get("run") or spec["submission_id"]
    trained = bool(spec.get("resume_from")) or (verdict.get("steps") or {}).get("last") is not None
    if preempted and "checkpoint_step" in verdict and verdict["checkpoint_step"] is None and not spec.get("resume_from"):
        trained = False  # stopped before it saved any checkpoint (it saves none, or the grace time passed first)
    following = "%s-r%d" % (run, attempt + 1)
    request = dict(spec.get("request") or {}, submission_id=following)
    if trained:
        request["resume_from"] = spec["submission_id"]
    else:
        request.pop("resume_from", None)
    since = record.get("queued_since") or ((verdict.get("start_time") or 0) / 1000.0) or None
    info = {"run": run, "attempt": attempt + 1, "max_restarts": max_restarts,
            "restarts": counted + (0 if preempted else 1), "queued_since": since,
            "preemptions": int(record.get("preemptions") or 0) + (1 if preempted else 0),
            "previous": spec["submission_id"], "previous_cause": cause,
            "history": earlier + [{"submission_id": spec["submission_id"], "cause": cause,
                                   "last_step": (verdict.get("steps") or {}).get("last"),
                                   "line": history[-1]}]}
    how = "from the newest complete checkpoint" if trained else "afresh (no attempt of the run trained)"
    if preempted:
        why = ("preempted for a job of a higher priority: continued as %s %s, queued again at its priority with "
               "its first submission time (preemption %d, not counted against max_restarts)"
               % (following, how, info["preemptions"]))
    else:
        why = "cause %s is retryable: restart %d of %d, as %s %s" % (cause, counted + 1, max_restarts, following, how)
    return dict(result, restart=True, why=why, next={"submission_id": following, "request": request, "info": info})
