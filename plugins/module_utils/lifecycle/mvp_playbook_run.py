# -*- coding: utf-8 -*-
"""Run a playbook of this collection from a program, through ansible-runner (what AWX runs playbooks with).

The job controller (module_utils ``mvp_controller``) heals the cluster, records ended attempts and starts
the next attempt of a run by running the cluster, record and submit playbooks. ansible-runner runs each and
records every event as JSON
(``<private_data_dir>/artifacts/<ident>/job_events/``); the result is read from those events - the
``playbook_on_stats`` event's per-host counts and the ``runner_on_failed``/``runner_on_unreachable``
events' task names and messages - never from the recap text.

No task starts a playbook: only the controller program does, with an environment it sets itself (no
``ANSIBLE_*`` variable of its own reaches the playbook: docs/how-it-works.md#playbooks-run-from-a-program).
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time

# The counts of ansible-runner's stats (the playbook_on_stats event), by the names the recap prints.
STATS_KEYS = {"ok": "ok", "changed": "changed", "failures": "failed", "dark": "unreachable",
              "skipped": "skipped", "rescued": "rescued", "ignored": "ignored"}


class PlaybookRunError(Exception):
    """ansible-runner is missing, or the playbook could not be started (the message says which and the fix)."""


def recap(stats):
    """Per-host counts from ansible-runner's stats, as the recap names them.

    :param stats: dict as ``Runner.stats`` gives it (``{"ok": {host: n}, "changed": {...}, "failures": {...},
        "dark": {...}, ...}``, from the ``playbook_on_stats`` event), or None (the playbook never ended a play).
    :returns: dict host -> {"ok": n, "changed": n, "failed": n, "unreachable": n, "skipped": n, ...} (ints).
    """
    hosts = {}
    for key, name in STATS_KEYS.items():
        for host, count in ((stats or {}).get(key) or {}).items():
            hosts.setdefault(host, {n: 0 for n in STATS_KEYS.values()})[name] = int(count)
    return hosts


def recap_lines(hosts):
    """One line per host, ``<host> : ok=N changed=N unreachable=N failed=N`` (what the play shows)."""
    return ["%s : ok=%d changed=%d unreachable=%d failed=%d" % (
        host, counts["ok"], counts["changed"], counts["unreachable"], counts["failed"])
        for host, counts in sorted(hosts.items())]


def failed_tasks(events, limit=10):
    """The tasks that failed or found their host unreachable, from ansible-runner's events.

    :param events: iterable of event dicts (``Runner.events``: ``event``, ``event_data`` with ``host``,
        ``task`` and ``res``).
    :param limit: int, at most this many (the last ones: the failure that ended the playbook comes last).
    :returns: list of dicts ``{"host", "task", "msg", "unreachable"}``; an ignored failure is left out.
    """
    found = []
    for event in events or ():
        kind = event.get("event")
        data = event.get("event_data") or {}
        if kind not in ("runner_on_failed", "runner_on_unreachable") or data.get("ignore_errors"):
            continue
        res = data.get("res") or {}
        found.append({"host": data.get("host", "?"), "task": data.get("task", "?"),
                      "msg": str(res.get("msg") or res.get("stderr") or "")[:2000],
                      "unreachable": kind == "runner_on_unreachable"})
    return found[-limit:]


def runner_env(config_file, extra=None):
    """The environment of the playbook ansible-runner starts: this controller's Python first on PATH.

    :param config_file: str or None, the ansible.cfg of the play (``ansible_config_file``), so the playbook
        reads the same configuration (collections path, connection settings).
    :param extra: dict str -> str, more variables.
    :returns: dict str -> str (ansible-runner adds it to a copy of ``os.environ``).
    """
    env = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
           "ANSIBLE_FORCE_COLOR": "0"}
    if config_file:
        env["ANSIBLE_CONFIG"] = config_file
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    return env


def run(playbook, inventories, private_data_dir, ident, extra_vars=None, envvars=None, project_dir=None,
        keep_artifacts=20):
    """Run ``playbook`` to its end with ansible-runner; return what its events say.

    :param playbook: str, a playbook path or a collection playbook's FQCN (``mvp.ray.cluster``).
    :param inventories: list of str, the inventory sources (``-i``), as the play that runs this has them.
    :param private_data_dir: str, ansible-runner's folder (its artifacts land in ``artifacts/<ident>``).
    :param ident: str, the run's name under ``artifacts/``.
    :param extra_vars: dict or None, given with ``-e``.
    :param envvars: dict str -> str (``runner_env``).
    :param project_dir: str or None, the folder the playbook runs in (the play's configuration folder).
    :param keep_artifacts: int, how many runs' artifacts ansible-runner keeps in the folder (it removes older ones).
        What ansible-runner writes of the environment (``artifacts/<ident>/command``, ``env/envvars``: every
        variable, secrets included) is removed once the run ends.
    :returns: dict ``{"rc": int, "status": str ("successful", "failed", "timeout", "canceled"),
        "hosts": recap(), "changed": bool, "failed_tasks": failed_tasks(), "artifacts": str}``.
    :raises PlaybookRunError: when ansible-runner is not installed (``roles/job_controller/files/requirements.txt``
        has it).
    """
    try:
        import ansible_runner  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise PlaybookRunError("ansible-runner is not installed in this Python (%s): install "
                               "roles/job_controller/files/requirements.txt into it (site.yml does for the job "
                               "controller's virtual environment, make setup for the checkout's .venv)."
                               % sys.executable)
    cmdline = " ".join("-i %s" % shlex.quote(i) for i in inventories)
    os.makedirs(private_data_dir, exist_ok=True)
    kwargs = {"private_data_dir": private_data_dir, "playbook": playbook, "ident": ident, "quiet": True,
              "envvars": envvars or {}, "cmdline": cmdline, "extravars": dict(extra_vars or {}),
              "rotate_artifacts": int(keep_artifacts)}
    if project_dir:
        kwargs["project_dir"] = project_dir
    # ansible-runner installs its own SIGTERM and SIGINT handlers; the program that runs it keeps its own.
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        runner = ansible_runner.run(**kwargs)
    finally:
        for signum, handler in handlers.items():
            if handler is not None:
                signal.signal(signum, handler)
    for leftover in (os.path.join("artifacts", ident, "command"), os.path.join("artifacts", ident, "env.list"),
                     os.path.join("env", "envvars")):
        try:
            os.unlink(os.path.join(private_data_dir, leftover))
        except OSError:
            pass
    hosts = recap(runner.stats)
    return {"rc": runner.rc, "status": runner.status, "hosts": hosts,
            "changed": any(c["changed"] > 0 for c in hosts.values()),
            "failed_tasks": failed_tasks(runner.events),
            "artifacts": os.path.join(private_data_dir, "artifacts", ident)}


def run_until_success(within, delay, attempt, sleep=time.sleep, clock=time.monotonic):
    """Call ``attempt()`` until its result's ``rc`` is 0 or ``within`` seconds have passed.

    :param within: float, seconds from the first call after which no new attempt starts (0: one attempt).
    :param delay: float, seconds between the end of one attempt and the next.
    :param attempt: callable returning a dict with ``rc`` (``run``'s result).
    :returns: the last attempt's dict with ``attempts`` (int) added.
    """
    start, count = clock(), 0
    while True:
        count += 1
        result = attempt()
        if result.get("rc") == 0 or clock() - start + delay > within:
            result["attempts"] = count
            return result
        sleep(delay)
