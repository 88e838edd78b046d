# -*- coding: utf-8 -*-
"""A long-running program of a node kept beside Ray (the head's MLflow tracking server).

A service is described by a JSON file, ``<service_dir>/<name>.json``, written 0600 by the module
that starts it (``ray_mlflow_server``):

* ``argv`` (list of str): the program and its arguments;
* ``env`` (dict str -> str): variables added to the environment it inherits;
* ``log`` (str): the file its stdout and stderr are appended to;
* ``cwd`` (str, optional): its working folder (``/`` when absent).

Its process id is kept in ``<service_dir>/<name>.pid`` with the process's start time (``<pid> <start>``,
the clock ticks since boot of ``/proc/<pid>/stat``), so a pid the kernel gave to another program after a
container restart is not taken for the service. The program runs in a session of its own
(``setsid``), with no terminal and no inherited descriptors, so the module or the shell that
started it may end (an Ansible task over ``docker exec`` or SSH) and the program keeps running.

On docker hosts the node container's command (``mvp_ray_node.py``, where this file is copied
beside it) calls :func:`keep` while Ray runs: a service whose process ended (a restarted
container, a crash) is started again from its file. Removing the file first (:func:`stop`) is
how a service is stopped for good. On nodes reached over SSH nothing watches it; ``site.yml``
starts it again when it does not answer.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time

try:
    from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import write_text_atomic
except ImportError:  # copied beside the node container's command (mvp_ray_node.py), with mvp_files.py
    from mvp_files import write_text_atomic  # type: ignore[no-redef]

SERVICE_DIR = "mvp-services"
"""Folder under the node's Ray temp dir (``mvp_ray_temp_dir``) holding the service files."""


def paths(service_dir, name):
    """Return ``{"spec": <name>.json, "pid": <name>.pid}`` under ``service_dir`` (str paths)."""
    return {"spec": os.path.join(service_dir, name + ".json"), "pid": os.path.join(service_dir, name + ".pid")}


def read_spec(path):
    """Return the service file's dict, or None when it is missing or not a JSON object with ``argv``."""
    try:
        with open(path, encoding="utf-8") as handle:
            spec = json.load(handle)
    except (OSError, ValueError):
        return None
    return spec if isinstance(spec, dict) and spec.get("argv") else None


def running_pid(pid_file, proc_root="/proc"):
    """Return the pid (int) recorded in ``pid_file`` while that process runs, else None.

    A zombie (state ``Z`` or ``X`` in ``/proc/<pid>/stat``, proc(5)) counts as ended, and so does a
    process whose start time differs from the recorded one (the pid was reused, e.g. after a restart).
    """
    try:
        with open(pid_file, encoding="ascii") as handle:
            fields = handle.read().split()
        pid = int(fields[0])
    except (OSError, ValueError, IndexError):
        return None
    state = _stat(pid, proc_root)
    if state is None or state[0] in ("Z", "X"):
        return None
    if len(fields) > 1 and fields[1] != state[19]:
        return None
    return pid


def alive(pid, proc_root="/proc"):
    """True while the process ``pid`` exists and is not a zombie (its state in ``/proc/<pid>/stat``)."""
    state = _stat(pid, proc_root)
    return state is not None and state[0] not in ("Z", "X")


def _stat(pid, proc_root="/proc"):
    """The fields of ``/proc/<pid>/stat`` after the command name (state first, start time at index 19), or None."""
    try:
        with open(os.path.join(proc_root, str(pid), "stat"), encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields if len(fields) > 19 else None


def start(spec, pid_file):
    """Start the service described by ``spec`` (see the module's docstring) detached; return its pid (int).

    Its stdout and stderr are appended to ``spec["log"]`` (the folder is made), stdin is /dev/null.
    :raises OSError: the program cannot be started (missing, not executable).
    """
    os.makedirs(os.path.dirname(spec["log"]) or ".", exist_ok=True)
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (spec.get("env") or {}).items()})
    with open(spec["log"], "ab") as log, open(os.devnull, "rb") as devnull:
        # It outlives this process: no context manager.
        proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [str(a) for a in spec["argv"]], stdin=devnull, stdout=log, stderr=subprocess.STDOUT,
            cwd=spec.get("cwd") or "/", env=env, close_fds=True, start_new_session=True)
    state = _stat(proc.pid)
    write_text_atomic(pid_file, "%d %s\n" % (proc.pid, state[19] if state else ""))
    return proc.pid


def stop(service_dir, name, timeout=30.0):
    """Stop a service for good: remove its file (so :func:`keep` leaves it down), then end its session.

    SIGTERM to its process group, SIGKILL after ``timeout`` seconds. Returns True when a process ran.
    """
    where = paths(service_dir, name)
    try:
        os.unlink(where["spec"])
    except OSError:
        pass
    pid = running_pid(where["pid"])
    if pid is None:
        return False
    _signal_group(pid, signal.SIGTERM)
    deadline = time.time() + timeout
    while alive(pid) and time.time() < deadline:
        _reap()
        time.sleep(0.2)
    if alive(pid):
        _signal_group(pid, signal.SIGKILL)
    try:
        os.unlink(where["pid"])
    except OSError:
        pass
    return True


def keep(service_dir, say=None):
    """Start again every service of ``service_dir`` whose process ended; return the names started (list of str).

    Also reaps ended children (the node container's command is their parent after a restart).
    :param say: callable(str) for one line per start or failure, or None.
    """
    _reap()
    started = []
    try:
        names = sorted(f[:-5] for f in os.listdir(service_dir) if f.endswith(".json"))
    except OSError:
        return started
    for name in names:
        where = paths(service_dir, name)
        spec = read_spec(where["spec"])
        if spec is None or running_pid(where["pid"]) is not None:
            continue
        try:
            pid = start(spec, where["pid"])
        except OSError as exc:
            if say:
                say("service %s could not start: %s" % (name, exc))
            continue
        started.append(name)
        if say:
            say("service %s started (pid %d, log %s)" % (name, pid, spec["log"]))
    return started


def _signal_group(pid, signum):
    """Send ``signum`` to the process group led by ``pid`` (its session), or to ``pid`` alone."""
    try:
        os.killpg(pid, signum)
    except OSError:
        try:
            os.kill(pid, signum)
        except OSError:
            pass


def _reap():
    """Collect the exit status of ended children, so they do not stay zombies."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except OSError as exc:
            if exc.errno == errno.ECHILD:
                return
            raise
        if pid == 0:
            return


def log_tail(path, lines=5, limit=1500):
    """The last ``lines`` non-empty lines of the text file ``path`` joined by " | ", at most ``limit`` characters of
    them (str; '' when the file cannot be read or is empty). Reads at most ``8 * limit`` bytes from its end."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8 * limit))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return " | ".join(line for line in text.splitlines()[-lines:] if line.strip())[-limit:]
