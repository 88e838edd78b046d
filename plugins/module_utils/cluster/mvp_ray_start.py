# -*- coding: utf-8 -*-
"""How a Ray node is started: the ``ray start`` command lines and Ray's reason for a failed start.

Used by the ``ray_head`` and ``ray_worker`` modules (Ray started over the connection, as on prod),
by the ``mvp_ray_node_settings`` filter (the settings a node container starts Ray with) and by the
node entrypoint ``mvp_ray_node.py`` that runs as the command of a docker-host node container (this
file is copied beside it, so it imports nothing but the standard library).
"""

from __future__ import annotations

import json
import os
import random
import re

# Lines that carry Ray's reason for a failed start: glog's fatal checks, Python errors, timeouts.
REASON_LINE = re.compile(r"Check failed|Timed out|Error|error:|failed|Failed")


def head_start_argv(ray, gcs_port, dashboard_host, dashboard_port, extra_args=()):
    """``ray start --head`` for a control-plane-only head.

    :param ray: str, path of the ``ray`` CLI.
    :param gcs_port: int, the GCS port (mvp_ray_gcs_port).
    :param dashboard_host: str, address the dashboard listens on.
    :param dashboard_port: int, the dashboard / Jobs API port (mvp_ray_dashboard_port).
    :param extra_args: iterable of str appended as given.
    :returns: list of str; the head offers no CPU and no GPU (``--num-cpus=0 --num-gpus=0``).
    """
    return [ray, "start", "--head", "--num-cpus=0", "--num-gpus=0", "--port=%d" % int(gcs_port),
            "--dashboard-host=%s" % dashboard_host, "--dashboard-port=%d" % int(dashboard_port),
            "--disable-usage-stats"] + [str(arg) for arg in extra_args]


def with_ray_on_path(env, ray):
    """``env`` with the folder of the ``ray`` CLI first on ``PATH`` (a copy).

    Over SSH, ``ray start`` inherits the session's minimal PATH, and every process Ray starts with it: the
    node agents then find no ``py-spy`` (installed beside ``ray`` in the node's Python), so the dashboard's
    stacks endpoint, which the hang watchdog reads, answers "py-spy is not installed".

    :param env: dict str -> str, the environment of ``ray start``.
    :param ray: str, the absolute path of the ``ray`` CLI (mvp_ray_bin_dir/ray); a bare name changes nothing.
    :returns: dict str -> str.
    """
    folder = os.path.dirname(ray)
    if not folder:
        return dict(env)
    parts = [p for p in str(env.get("PATH", "")).split(os.pathsep) if p and p != folder]
    return dict(env, PATH=os.pathsep.join([folder] + parts))


HEALTH_CHECK_KEYS = ("period_ms", "timeout_ms", "failure_threshold")
"""The head GCS's health checks of the nodes that can be set (Ray's ``RayConfig`` ``health_check_<key>``, read from
``RAY_health_check_<key>``; Ray's defaults 3000 ms, 10000 ms and 5: a lost node is declared dead about 30 s after
it went, and only then do its jobs fail)."""


def health_check_env(health_check):
    """``RAY_health_check_*`` variables for the head's GCS from a ``{period_ms, timeout_ms, failure_threshold}`` dict.

    :param health_check: dict or None; a missing or null key keeps Ray's default.
    :returns: dict str -> str.
    :raises ValueError: for an unknown key or a value that is not a whole number >= 1 (the message names it).
    """
    env = {}
    for key, value in (health_check or {}).items():
        if key not in HEALTH_CHECK_KEYS:
            raise ValueError("health_check.%s is not one of %s" % (key, ", ".join(HEALTH_CHECK_KEYS)))
        if value is None:
            continue
        if isinstance(value, bool) or not str(value).isdigit() or int(value) < 1:
            raise ValueError("health_check.%s must be a whole number >= 1, got %r" % (key, value))
        env["RAY_health_check_%s" % key] = str(int(value))
    return env


def head_start_env(gcs_storage_path="", profiling=False, health_check=None):
    """Environment variables the head's ``ray start`` needs besides the node's own.

    :param gcs_storage_path: str, folder where the GCS keeps its tables (RocksDB); '' keeps them in memory.
    :param profiling: bool, let the dashboard serve the stacks of Ray's processes (``/worker/traceback``).
    :param health_check: dict or None, the GCS's health checks of the nodes (:func:`health_check_env`).
    :returns: dict str -> str (``RAY_gcs_storage``, ``RAY_gcs_storage_path``,
        ``RAY_DASHBOARD_ENABLE_PROFILING``, ``RAY_health_check_*``, each only when asked for).
    :raises ValueError: for a bad ``health_check``.
    """
    env = health_check_env(health_check)
    if gcs_storage_path:
        env.update(RAY_gcs_storage="rocksdb", RAY_gcs_storage_path=str(gcs_storage_path))
    if profiling:
        env["RAY_DASHBOARD_ENABLE_PROFILING"] = "1"
    return env


def worker_start_argv(ray, gcs_address, resources, num_gpus, num_cpus="", node_ip="", extra_args=()):
    """``ray start`` that joins a worker to the head.

    :param ray: str, path of the ``ray`` CLI.
    :param gcs_address: str, the head's GCS ``host:port``.
    :param resources: dict name -> amount, the custom resources (``{"worker_node": 100}``).
    :param num_gpus: int, GPUs offered to Ray.
    :param num_cpus: str or int, CPUs offered to Ray ('' lets Ray count the cores).
    :param node_ip: str, the node IP to advertise ('' lets Ray pick it).
    :param extra_args: iterable of str appended as given.
    :returns: list of str.
    """
    argv = [ray, "start", "--address=%s" % gcs_address,
            "--resources=%s" % json.dumps(resources or {}, sort_keys=True),
            "--num-gpus=%d" % int(num_gpus), "--disable-usage-stats"]
    if str(num_cpus):
        argv.append("--num-cpus=%s" % num_cpus)
    if node_ip:
        argv.append("--node-ip-address=%s" % node_ip)
    return argv + [str(arg) for arg in extra_args]


def ray_reason(output, temp_dir, limit=3):
    """Ray's own reason for a failed ``ray start``.

    :param output: str, standard output and error of ``ray start``.
    :param temp_dir: str, Ray's temp dir; ``session_latest/logs/raylet.out`` there is read
        (the raylet's glog file: a fatal ``Check failed`` line is written there, not to
        ``ray start``'s output).
    :param limit: int, how many matching lines to keep from each source (the last ones); the raylet's
        periodic ``[state-dump]`` lines (counters such as ``process_failed_...: 0``) never count.
    :returns: str, the matching lines (each at most 300 characters) prefixed with their source,
        joined by `` | ``; the last line of *output* when nothing matched; '' when both are empty.
    """
    found = []
    sources = [("ray start", output or "")]
    try:
        with open(os.path.join(temp_dir, "session_latest", "logs", "raylet.out"), encoding="utf-8",
                  errors="replace") as handle:
            sources.append(("raylet.out", handle.read()[-200000:]))
    except OSError:
        pass
    for name, text in sources:
        lines = [line.strip() for line in text.splitlines()
                 if REASON_LINE.search(line) and "[state-dump]" not in line]
        found += ["%s: %s" % (name, line[:300]) for line in lines[-limit:]]
    if not found and (output or "").strip():
        found = ["ray start: %s" % output.strip().splitlines()[-1][:300]]
    return " | ".join(found)


def as_text(data):
    """Return ``data`` (str, bytes or None - TimeoutExpired holds bytes even with ``text=True``) as str."""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def retry_pause(attempt, delay, rand=random.random):
    """Seconds to wait before attempt ``attempt + 1`` (float): ``delay * attempt`` plus up to ``delay`` at random."""
    return delay * attempt + delay * rand()


def clean_env(env):
    """``env`` (dict) as the raylet gets it: names and values as str, ``None`` and empty values left out."""
    return {str(k): str(v) for k, v in (env or {}).items() if v is not None and str(v) != ""}


def secret_vars(secret, secret_env, more_secrets):
    """The secrets handed to the raylet's environment, name -> value (:func:`clean_env`; ``secret``
    as ``secret_env``, after ``more_secrets``)."""
    return clean_env(dict(more_secrets or {}, **({secret_env: secret} if secret else {})))


def check_gcs_address(gcs_address):
    """Refuse a worker's GCS address without a host (the head's address was not known yet).

    :param gcs_address: str, ``host:port`` of the head's GCS.
    :raises ValueError: naming ray_worker_head_ip and the fix, when the host part is empty.
    """
    host = str(gcs_address or "").rpartition(":")[0]
    if not host:
        raise ValueError("the head's address is unknown (gcs_address %r, ray_worker_head_ip is empty): the ray_head "
                         "role sets it, so run the Ray head play first (playbooks/cluster.yml without --tags, or "
                         "with the ray_head tag), or set ray_worker_head_ip" % (gcs_address,))


def node_settings(kind, options):
    """The settings file a docker-host node container starts Ray from (read by ``mvp_ray_node.py``).

    :param kind: str, ``head`` or ``worker``.
    :param options: dict. Both kinds: ``ray`` (path of the CLI), ``extra_args`` (list), ``env`` (dict
        of variables added to Ray's environment - the auth settings and the secrets), ``temp_dir``,
        ``timeout`` (seconds one start may take), ``attempts`` and ``retry_delay`` (seconds).
        Head: ``gcs_port``, ``dashboard_host``, ``dashboard_port``, ``gcs_storage_path`` ('' - in
        memory), ``profiling`` (bool), ``health_check`` (dict, :func:`health_check_env`). Worker: ``gcs_address`` (``host:port`` of the head),
        ``resources`` (dict), ``num_gpus``, ``num_cpus`` ('' - Ray counts), ``route_env`` (bool) and
        ``socket_ifname`` ('' - the route's interface).
    :returns: dict with ``kind``, ``argv`` (``ray start``; for a worker without
        ``--node-ip-address``: the entrypoint adds it), ``env`` (dict str -> str), ``makedirs`` (list),
        ``watch`` (the Ray programs whose end ends the node: ``raylet``, and ``gcs_server`` on the
        head), ``temp_dir``, ``timeout``, ``attempts``, ``retry_delay``, and for a worker
        ``gcs_address``, ``route_env`` and ``socket_ifname``.
    :raises ValueError: for another ``kind`` or a missing option (the message names it).
    """
    if kind not in ("head", "worker"):
        raise ValueError("kind must be head or worker, got %r" % (kind,))
    try:
        env = clean_env(options.get("env"))
        settings = {"kind": kind, "temp_dir": str(options.get("temp_dir") or "/tmp/ray"), "makedirs": [],
                    "watch": ["gcs_server", "raylet"] if kind == "head" else ["raylet"],
                    "timeout": int(options.get("timeout") or 120), "attempts": max(1, int(options.get("attempts") or 1)),
                    "retry_delay": float(options.get("retry_delay") or 0)}
        extra = list(options.get("extra_args") or [])
        if kind == "head":
            settings["argv"] = head_start_argv(options["ray"], options["gcs_port"], options["dashboard_host"],
                                               options["dashboard_port"], extra)
            storage = str(options.get("gcs_storage_path") or "")
            env.update(head_start_env(storage, bool(options.get("profiling")), options.get("health_check")))
            if storage:
                settings["makedirs"].append(storage)
        else:
            check_gcs_address(options["gcs_address"])
            settings["argv"] = worker_start_argv(options["ray"], options["gcs_address"], options.get("resources") or {},
                                                 options.get("num_gpus") or 0, options.get("num_cpus") or "", "",
                                                 extra)
            settings.update(gcs_address=str(options["gcs_address"]), route_env=bool(options.get("route_env", True)),
                            socket_ifname=str(options.get("socket_ifname") or ""))
    except KeyError as exc:
        raise ValueError("the %s settings need the option %s" % (kind, exc))
    settings["env"] = env
    return settings


def settings_text(settings):
    """The settings file's content for ``settings`` (str): JSON with sorted keys and a final newline."""
    return json.dumps(settings, sort_keys=True) + "\n"


def start_notes(results, attempts):
    """What the workers' starts of Ray have to say, one line per worker and fact (``ray_worker`` results).

    :param results: list of ``[host, result]`` pairs, ``result`` a ``ray_worker`` module result (keys
        ``reason``, ``attempts``, ``failed_attempts``); skipped or failed tasks' results are left out.
    :param attempts: int, the starts allowed per worker (ray_worker_start_attempts), shown as "of N".
    :returns: list of str: "<host>: <reason>" where Ray was (re)started for another reason than
        joining, and "<host> joined at attempt N of M; failed before: ..." where starts failed first.
    """
    notes = []
    for host, result in results:
        if not isinstance(result, dict) or "reason" not in result:
            continue
        if result["reason"] != "joined":
            notes.append("%s: %s" % (host, result["reason"]))
        failed = result.get("failed_attempts") or []
        if failed:
            notes.append("%s joined at attempt %s of %s; failed before: %s"
                         % (host, result.get("attempts"), attempts, "; ".join(failed)))
    return notes
