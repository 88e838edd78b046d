# -*- coding: utf-8 -*-
"""Run a playbook of this collection from a play, through ansible-runner (what AWX runs playbooks with).

The restart loop heals the cluster by running the cluster playbook again (``submit_job`` heal.yml) and
``submit.yml -e wait=false`` starts a supervisor (``supervise.yml``) in the background: both are a playbook
started by the controller from inside a play. ansible-runner runs it and records every event as JSON
(``<private_data_dir>/artifacts/<ident>/job_events/``); the result is read from those events - the
``playbook_on_stats`` event's per-host counts and the ``runner_on_failed``/``runner_on_unreachable``
events' task names and messages - never from the recap text.

Used by the action plugin ``ray_playbook`` (plugins/action/ray_playbook.py) on the controller.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
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


def run(playbook, inventories, private_data_dir, ident, extra_vars=None, envvars=None, project_dir=None):
    """Run ``playbook`` to its end with ansible-runner; return what its events say.

    :param playbook: str, a playbook path or a collection playbook's FQCN (``mvp.ray.cluster``).
    :param inventories: list of str, the inventory sources (``-i``), as the play that runs this has them.
    :param private_data_dir: str, ansible-runner's folder (its artifacts land in ``artifacts/<ident>``).
    :param ident: str, the run's name under ``artifacts/``.
    :param extra_vars: dict or None, given with ``-e``.
    :param envvars: dict str -> str (``runner_env``).
    :param project_dir: str or None, the folder the playbook runs in (the play's configuration folder).
    :returns: dict ``{"rc": int, "status": str ("successful", "failed", "timeout", "canceled"),
        "hosts": recap(), "changed": bool, "failed_tasks": failed_tasks(), "artifacts": str}``.
    :raises PlaybookRunError: when ansible-runner is not installed (the controller's requirements.txt has it).
    """
    try:
        import ansible_runner  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise PlaybookRunError("ansible-runner is not installed in the controller's Python (%s): install the "
                               "controller requirements (make setup, requirements.txt)." % sys.executable)
    cmdline = " ".join("-i %s" % shlex.quote(i) for i in inventories)
    os.makedirs(private_data_dir, exist_ok=True)
    kwargs = {"private_data_dir": private_data_dir, "playbook": playbook, "ident": ident, "quiet": True,
              "envvars": envvars or {}, "cmdline": cmdline, "extravars": dict(extra_vars or {})}
    if project_dir:
        kwargs["project_dir"] = project_dir
    runner = ansible_runner.run(**kwargs)
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


def start_background(playbook, inventories, private_data_dir, ident, extra_vars=None, envvars=None, project_dir=None):
    """Start ``playbook`` detached from this play with ``ansible-runner start`` (a daemon); do not wait.

    The daemon keeps its pid in ``<private_data_dir>/pid`` while it runs (removed when it ends; a pid file that
    outlives its process means it was killed without a word), the playbook's output in
    ``artifacts/<ident>/stdout`` and its events in ``artifacts/<ident>/job_events/``.

    :returns: dict ``{"pid_file", "stdout", "artifacts"}`` (str paths).
    :raises PlaybookRunError: when ansible-runner cannot be started or exits with an error.
    """
    os.makedirs(os.path.join(private_data_dir, "env"), exist_ok=True)
    with open(os.path.join(private_data_dir, "env", "extravars"), "w", encoding="utf-8") as handle:
        json.dump(dict(extra_vars or {}), handle)
    with open(os.path.join(private_data_dir, "env", "envvars"), "w", encoding="utf-8") as handle:
        json.dump(dict(envvars or {}), handle)
    with open(os.path.join(private_data_dir, "env", "cmdline"), "w", encoding="utf-8") as handle:
        handle.write(" ".join("-i %s" % shlex.quote(i) for i in inventories))
    argv = [sys.executable, "-m", "ansible_runner", "start", private_data_dir, "-p", playbook, "--ident", ident]
    if project_dir:
        argv += ["--project-dir", project_dir]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                              env=dict(os.environ, **(envvars or {})), start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PlaybookRunError("ansible-runner start %s failed: %s" % (playbook, exc))
    if done.returncode != 0:
        raise PlaybookRunError("ansible-runner start %s exited %d: %s" % (
            playbook, done.returncode, (done.stderr or done.stdout).strip()[-2000:]))
    artifacts = os.path.join(private_data_dir, "artifacts", ident)
    return {"pid_file": os.path.join(private_data_dir, "pid"), "stdout": os.path.join(artifacts, "stdout"),
            "artifacts": artifacts}
