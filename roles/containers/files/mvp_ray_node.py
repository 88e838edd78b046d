# -*- coding: utf-8 -*-
"""Command of a docker-host Ray node container: start Ray from a settings file and keep it running.

The containers role makes this file (with ``mvp_files.py``, ``mvp_net.py``, ``mvp_proc.py``, ``mvp_ray_start.py`` and ``mvp_service.py`` beside it) the
command of every node container on a docker host; the ray_head and ray_worker roles write the node's
settings file. Started as::

    python mvp_ray_node.py --settings /tmp/ray/mvp_node.json --status /tmp/ray/mvp_node_status.json

What it does, in a loop:

1. Waits until the settings file exists (a fresh container waits for the cluster play; a restarted
   one finds the file it had) and reads it. The file is JSON written 0600 by the roles:
   ``argv`` (``ray start``), ``watch`` (Ray's programs to watch), ``env`` (variables added to Ray's environment: the
   internal token, the W&B key and the Ray auth settings travel here, never on a command line or in
   ``docker inspect``), ``makedirs``, ``temp_dir``, ``attempts``, ``retry_delay`` and ``timeout``
   (seconds), and for a worker ``gcs_address`` (``host:port`` of the head), ``route_env`` and
   ``socket_ifname``.
2. A worker waits until the head's GCS port accepts connections, then reads the route to it
   (``mvp_net.head_network``): Ray is started with ``--node-ip-address=<source of that route>`` and
   ``NCCL_SOCKET_IFNAME``/``GLOO_SOCKET_IFNAME`` set to its interface, as the ray_worker module does.
3. Runs ``ray start`` (it returns once the node is registered with the GCS) and says ``running``
   in the status file. A start that fails or takes longer than ``timeout`` seconds is retried after
   ``ray stop --force`` and a pause (``mvp_ray_start.retry_pause``), up to ``attempts`` times; then
   this process exits 1 and the container's restart policy starts it again.
4. While Ray runs, it watches Ray's programs named in ``watch`` (``raylet``; ``gcs_server`` on the
   head) through ``/proc``, as ``ray start --block`` watches its children, without keeping a Python
   with Ray imported alive (``--block`` would: about 70 MiB per node). When one ends, it stops what is
   left (``ray stop --force``) and exits 1, so Docker restarts the container and Ray with it. When the
   settings file changes, Ray is stopped and started again from the new settings.
   Every ``SERVICE_POLL_S`` seconds it also starts again each service of ``<temp_dir>/mvp-services/``
   whose process ended (``mvp_service.keep``: the head's MLflow tracking server, after a container
   restart or a crash), and reaps them.
5. SIGTERM (``docker stop``) stops Ray (``ray stop``) and exits 0.

The status file (JSON, replaced atomically) holds ``state`` (``waiting for settings``,
``waiting for the head``, ``starting``, ``running``, ``failed``, ``exited``), ``settings_sha256``
(sha256 of the settings file's bytes), ``attempt``, ``failed_attempts`` (one line per failed start
with Ray's reason, ``mvp_ray_start.ray_reason``), ``node_ip``, ``socket_ifname`` and ``updated``
(UTC, ISO 8601). The roles wait on it and quote it when a node does not come up.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mvp_files import write_text_atomic  # noqa: E402  (copied beside this file)
from mvp_net import head_network  # noqa: E402
from mvp_proc import argv_of, pids  # noqa: E402
from mvp_ray_start import ray_reason, retry_pause  # noqa: E402
from mvp_service import SERVICE_DIR, keep  # noqa: E402

# Seconds between looks at the settings file, the head's port and the Ray process (a stat and a poll).
POLL_S = 0.2
# Seconds between looks at the services beside Ray (a listdir and a /proc read per service).
SERVICE_POLL_S = 5.0


def log(message):
    """Print one line to the container's log (``docker logs``)."""
    print("mvp_ray_node: %s" % message, flush=True)


def read_settings(path):
    """Return (settings dict, sha256 hex of the file's bytes), or (None, '') while missing or unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        settings = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return None, ""
    if not isinstance(settings, dict) or not settings.get("argv"):
        return None, ""
    return settings, hashlib.sha256(data).hexdigest()


class Status(object):
    """The status file: every update rewrites it atomically (write to a temp name, rename)."""

    def __init__(self, path):
        self.path = path
        self.data = {"state": "waiting for settings", "settings_sha256": "", "attempt": 0,
                     "failed_attempts": [], "node_ip": "", "socket_ifname": ""}

    def set(self, **values):
        """Update the given keys, stamp ``updated`` and write the file."""
        self.data.update(values)
        self.data["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        write_text_atomic(self.path, json.dumps(self.data, sort_keys=True) + "\n")


def head_reachable(gcs_address, timeout=2.0):
    """True when a TCP connection to ``host:port`` succeeds."""
    host, _sep, port = gcs_address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout).close()
        return True
    except (OSError, ValueError):
        return False


def network(settings):
    """Return (extra argv, extra env, node_ip, ifname) from the route to the head, for a worker
    (``mvp_net.head_network``, as the ray_worker module reads it).

    :raises RuntimeError: when the head cannot be resolved or routed to, or the route is unusable
        (link-local, docker0) and no ``socket_ifname`` is set.
    """
    if not settings.get("route_env") or not settings.get("gcs_address"):
        return [], {}, "", ""
    host, _sep, port = settings["gcs_address"].rpartition(":")
    try:
        head_ip = socket.gethostbyname(host)
    except OSError as exc:
        raise RuntimeError("cannot resolve the head %s: %s" % (host, exc))
    net = head_network(head_ip, int(port or 6379), settings.get("socket_ifname") or "")
    if net["problem"]:
        raise RuntimeError("%s; Ray and NCCL would advertise an address the other nodes cannot reach "
                           "(set ray_worker_socket_ifname)" % net["problem"])
    return (["--node-ip-address=%s" % net["node_ip"]] if net["node_ip"] else [], net["env"], net["node_ip"],
            net["ifname"])


def find_pids(names, proc_root="/proc"):
    """Return {pid: program name} of the running processes whose program's file name is in ``names``."""
    found = {}
    for pid in pids(proc_root):
        argv = argv_of(pid, proc_root)
        if argv and os.path.basename(argv[0]) in names:
            found[pid] = os.path.basename(argv[0])
    return found


def alive(pid, proc_root="/proc"):
    """True while ``pid`` runs (a zombie has no command line and counts as ended)."""
    return bool(argv_of(pid, proc_root))


class Node(object):
    """One node: the settings it runs from, Ray's watched programs and the status file."""

    def __init__(self, settings_path, status_path):
        self.settings_path = settings_path
        self.status = Status(status_path)
        self.output = ""
        self.stopping = False
        self.watched = {}

    def ray_stop(self, settings, force=True):
        """Run ``ray stop`` (``--force``: SIGKILL) with the node's Ray; never raises."""
        ray = settings["argv"][0]
        try:
            subprocess.run([ray, "stop"] + (["--force"] if force else []), capture_output=True, timeout=120,
                           check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            log("ray stop failed: %s" % exc)

    def start(self, settings, env, argv):
        """Run ``ray start``; return None when the node is up, else what went wrong (str)."""
        timeout = float(settings.get("timeout") or 120)
        try:
            proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  errors="replace", timeout=timeout, check=False)
            self.output = proc.stdout or ""
        except subprocess.TimeoutExpired as exc:
            self.output = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            sys.stdout.write(self.output)
            return "not up within %ss (ray_head_ready_timeout, ray_worker_ready_timeout)" % settings.get("timeout")
        sys.stdout.write(self.output)
        sys.stdout.flush()
        if proc.returncode:
            return "rc=%s" % proc.returncode
        names = set(settings.get("watch") or [])
        self.watched = find_pids(names)
        missing = sorted(names - set(self.watched.values()))
        if missing:
            return "ray start returned 0 but %s is not running" % ", ".join(missing)
        return None

    # --- the loop ------------------------------------------------------------------
    def wait_settings(self):
        """Block until the settings file can be read; return (settings, sha256)."""
        said = False
        while True:
            settings, sha = read_settings(self.settings_path)
            if settings is not None:
                return settings, sha
            if not said:
                self.status.set(state="waiting for settings")
                log("waiting for %s (written by the cluster playbook)" % self.settings_path)
                said = True
            time.sleep(POLL_S)

    def run_once(self):
        """Start Ray from the current settings and watch it; return an exit code, or None to start again."""
        settings, sha = self.wait_settings()
        env = dict(os.environ)
        env.update({str(k): str(v) for k, v in (settings.get("env") or {}).items()})
        for folder in settings.get("makedirs") or []:
            os.makedirs(folder, exist_ok=True)
        temp_dir = settings.get("temp_dir") or "/tmp/ray"
        attempts = max(1, int(settings.get("attempts") or 1))
        delay = float(settings.get("retry_delay") or 5)
        failed = []
        # A new state with the new settings' hash: the old "running" beside the new hash would tell the roles, which
        # wait for both, that Ray already runs from these settings (and with no node IP) before it was restarted.
        self.status.set(state="starting", settings_sha256=sha, attempt=0, failed_attempts=[], node_ip="",
                        socket_ifname="", reason="")
        if settings.get("gcs_address"):
            said = False
            while not head_reachable(settings["gcs_address"]):
                if not said:
                    self.status.set(state="waiting for the head")
                    log("waiting for the head's GCS at %s" % settings["gcs_address"])
                    said = True
                if read_settings(self.settings_path)[1] != sha:
                    return None
                time.sleep(POLL_S)
        for attempt in range(1, attempts + 1):
            try:
                extra_argv, net_env, node_ip, ifname = network(settings)
            except RuntimeError as exc:
                failed.append("attempt %d: %s" % (attempt, exc))
                self.status.set(state="failed", attempt=attempt, failed_attempts=failed)
                log(failed[-1])
                time.sleep(retry_pause(attempt, delay))
                continue
            env.update(net_env)
            self.status.set(state="starting", attempt=attempt, node_ip=node_ip, socket_ifname=ifname)
            problem = self.start(settings, env, list(settings["argv"]) + extra_argv)
            if problem is None:
                break
            failed.append("attempt %d: %s - %s" % (attempt, problem, ray_reason(self.output, temp_dir) or "no output"))
            log(failed[-1])
            self.ray_stop(settings)
            self.status.set(state="failed", failed_attempts=failed)
            if self.stopping:
                return 0
            if attempt < attempts:
                time.sleep(retry_pause(attempt, delay))
        else:
            log("Ray did not start in %d attempts; exiting (the restart policy starts the container again)" % attempts)
            return 1
        self.status.set(state="running", failed_attempts=failed)
        log("Ray runs (settings %s; watching %s)" % (sha[:12], ", ".join(
            "%s %s" % (name, pid) for pid, name in sorted(self.watched.items()))))
        services = os.path.join(temp_dir, SERVICE_DIR)
        next_service_look = 0.0
        while True:
            if time.time() >= next_service_look:
                keep(services, say=log)
                next_service_look = time.time() + SERVICE_POLL_S
            ended = sorted("%s (pid %s)" % (name, pid) for pid, name in self.watched.items() if not alive(pid))
            if ended:
                if self.stopping:
                    return 0
                reason = ray_reason("", temp_dir)
                self.status.set(state="exited", reason="%s ended - %s" % (", ".join(ended), reason or "no reason logged"))
                log("%s ended (%s); stopping the rest and exiting" % (", ".join(ended), reason or "no reason logged"))
                self.ray_stop(settings)
                return 1
            if read_settings(self.settings_path)[1] not in (sha, ""):
                log("the settings changed: stopping Ray to start it from the new ones")
                self.ray_stop(settings, force=False)
                return None
            time.sleep(POLL_S)

    def terminate(self, _signum, _frame):
        """SIGTERM: stop Ray and let the loop exit 0."""
        self.stopping = True
        settings, _sha = read_settings(self.settings_path)
        if settings is not None and self.watched:
            self.ray_stop(settings, force=False)
        sys.exit(0)


def main(argv=None):
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", required=True, help="settings file written by the ray_head/ray_worker role")
    parser.add_argument("--status", required=True, help="status file this process keeps")
    args = parser.parse_args(argv)
    node = Node(args.settings, args.status)
    signal.signal(signal.SIGTERM, node.terminate)
    while True:
        code = node.run_once()
        if code is not None:
            return code


if __name__ == "__main__":
    sys.exit(main())
