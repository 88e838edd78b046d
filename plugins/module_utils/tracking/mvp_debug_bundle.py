# -*- coding: utf-8 -*-
"""Debug bundles: timestamped snapshots of the cluster (``ray status``, ``ray job list``, ...) into a folder.

Shared by the modules ``ray_debug_bundle`` (a snapshot on its own) and ``ray_job`` (the
submission and placement snapshots started in the background by the submitting call).
Each command's output becomes ``<dest>/<UTC stamp>-<stage>-<name>.txt`` (command line,
exit code, stdout, stderr); a command that fails or times out is recorded, never raised.
Commands named ``ray`` run inside the caller's process through Ray's click CLI when Ray
imports (one import instead of one per command).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import threading
import time

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import write_text_atomic


# The options of one snapshot, as AnsibleModule argument_spec entries (ray_debug_bundle's options,
# and the suboptions of ray_job's debug_bundle; documented there).
BUNDLE_OPTIONS = dict(
    dest=dict(type="path", required=True),
    stage=dict(type="str", required=True),
    commands=dict(type="list", elements="dict", required=True),
    timeout=dict(type="int", default=60),
    in_process=dict(type="bool", default=True),
    then=dict(type="dict", options=dict(
        stage=dict(type="str", required=True),
        after_file=dict(type="path", required=True),
        timeout=dict(type="int", default=300),
    )),
)


def stamp_now():
    """The UTC time stamp of a snapshot's file names (str, ``%Y%m%dT%H%M%SZ``)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def record_path(dest, stamp, stage):
    """The file a detached snapshot writes when done: ``<dest>/<stamp>-<stage>-bundle.json`` (str)."""
    return os.path.join(dest, "%s-%s-bundle.json" % (stamp, stage))


def start_detached(params, stamp=None):
    """Start the snapshot(s) of ``params`` in a detached process and return at once.

    :param params: dict with ``dest`` (existing folder), ``stage``, ``commands`` (items ``{name, argv}``),
        ``timeout`` (int s per command), ``in_process`` (bool) and ``then`` (None or ``{stage, after_file,
        timeout}``).
    :param stamp: str or None (now).
    :returns: dict ``{stamp, record, max_seconds, files}``: the detached process writes ``record`` (JSON,
        ``take()``'s result or ``{failed, msg}``) within ``max_seconds`` (int).
    :raises OSError: when the process cannot be forked.
    """
    stamp = stamp or stamp_now()
    record = record_path(params["dest"], stamp, params["stage"])
    detached(lambda: take(params, stamp), record)
    return dict(stamp=stamp, record=record, max_seconds=max_seconds(params),
                files=bundle_paths(params["dest"], stamp, params["stage"], params["commands"]))


def run_all(commands, timeout):
    """Run ``commands`` concurrently; return a list of (rc, stdout, stderr) in the same order.

    :param commands: list of dicts with ``argv`` (list of str).
    :param timeout: int, seconds per command; a command still running is killed (rc None).
    """
    procs = []
    for command in commands:
        try:
            procs.append(subprocess.Popen(command["argv"], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        except OSError as exc:
            procs.append(exc)
    deadline = time.time() + timeout
    results = []
    for proc in procs:
        if isinstance(proc, OSError):
            results.append((None, "", "could not start: %s" % proc))
            continue
        try:
            out, err = proc.communicate(timeout=max(1, deadline - time.time()))
            results.append((proc.returncode, out, err))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            results.append((None, out, (err or "") + "\n(killed after %ss)" % timeout))
    return results


ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def ray_cli():
    """Return Ray's click command group (``ray.scripts.scripts.cli``) or None when Ray does not import."""
    try:
        from ray.scripts.scripts import cli
    except Exception:  # pragma: no cover - depends on the interpreter
        return None
    return cli


def run_in_process(cli, args, timeout):
    """Run one Ray CLI command in this process; return (rc, stdout, stderr).

    :param cli: click group from ray_cli().
    :param args: list of str, the arguments after ``ray``.
    :param timeout: int, seconds; a command still running then is abandoned (rc None).
    """
    out, err, box = io.StringIO(), io.StringIO(), {}

    def target():
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                cli.main(args=list(args), standalone_mode=False, prog_name="ray")
                box["rc"] = 0
            except SystemExit as exc:
                box["rc"] = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception as exc:  # recorded in the bundle file, never fatal
                err.write("%s: %s\n" % (type(exc).__name__, exc))
                box["rc"] = 1

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return None, "", "(abandoned after %ss)" % timeout
    return box.get("rc", 1), ANSI_RE.sub("", out.getvalue()), ANSI_RE.sub("", err.getvalue())


def render(command, rc, out, err, stamp, host):
    """Return the text of one bundle file."""
    text = "# %s\n# rc=%s at %s on %s\n%s" % (
        " ".join(shlex.quote(a) for a in command["argv"]), rc, stamp, host, out)
    if err:
        text += "\n# stderr\n" + err
    return text if text.endswith("\n") else text + "\n"


def max_seconds(params):
    """Return the most seconds (int) a detached run of ``params`` can take.

    Commands run in Ray's process one after the other, so a snapshot is bounded by every
    command at its ``timeout``; I(then) adds its wait for the file and a second snapshot.
    """
    one = len(params["commands"]) * params["timeout"]
    then = params.get("then")
    return one + (one + then["timeout"] if then else 0)


def take(params, stamp):
    """Take the snapshot (and the I(then) one); return the module result (dict)."""
    cli = ray_cli() if params["in_process"] else None
    paths, rcs = snapshot(params, cli, stamp, params["stage"])
    result = dict(changed=True, files=paths, stamp=stamp, rcs=rcs)
    then = params["then"]
    if then:
        waited = wait_for_file(then["after_file"], then["timeout"])
        result["then_waited"] = waited
        result["then_files"] = []
        if waited is not None:
            result["then_files"] = snapshot(params, cli, stamp_now(), then["stage"])[0]
    return result


# Niceness of the detached snapshot process: the snapshots (a Ray import, four CLI calls) yield the
# CPU to the job they watch starting, instead of slowing its start on a small head.
DETACHED_NICENESS = 10


def detached(work, record, niceness=DETACHED_NICENESS):
    """Run ``work()`` in a detached grandchild process and return at once in the caller.

    The grandchild has its own session, /dev/null as stdin, stdout and stderr (the
    module's JSON channel stays clean and ``docker exec``/SSH do not wait for it) and
    ``niceness`` (int, added with ``os.nice``); it writes ``work()``'s result, or
    ``{"failed": true, "msg": ...}``, as JSON to ``record`` (str path) and exits without
    running the parent's exit handlers.
    :raises OSError: when the process cannot be forked.
    """
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        return
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        try:
            os.nice(niceness)
            outcome = work()
        except BaseException as exc:  # recorded for whoever waits, never raised into the void
            outcome = {"failed": True, "msg": "%s: %s" % (type(exc).__name__, exc)}
        write_text_atomic(record, json.dumps(outcome, indent=1, sort_keys=True) + "\n")
    finally:
        os._exit(0)


def bundle_paths(dest, stamp, stage, commands):
    """Return the file path of each command's output: ``<dest>/<stamp>-<stage>-<name>.txt`` (list of str)."""
    return [os.path.join(dest, "%s-%s-%s.txt" % (stamp, stage, c["name"])) for c in commands]


def snapshot(params, cli, stamp, stage):
    """Run every command once and write its file; return (paths, {name: rc}).

    :param params: the module parameters (dest, commands, timeout).
    :param cli: Ray's click group (ray_cli()) or None to run every command as a subprocess.
    """
    commands = params["commands"]
    paths = bundle_paths(params["dest"], stamp, stage, commands)
    inside = [bool(cli) and os.path.basename(c["argv"][0]) == "ray" for c in commands]
    outside = run_all([c for c, i in zip(commands, inside) if not i], params["timeout"])
    results = [run_in_process(cli, c["argv"][1:], params["timeout"]) if i else outside.pop(0)
               for c, i in zip(commands, inside)]
    host = os.uname()[1]
    for command, path, (rc, out, err) in zip(commands, paths, results):
        write_text_atomic(path, render(command, rc, out, err, stamp, host))
    return paths, {c["name"]: r[0] for c, r in zip(commands, results)}


def wait_for_file(path, timeout, interval=0.2):
    """Wait until ``path`` exists; return the seconds waited (float), or None after ``timeout`` seconds."""
    start = time.time()
    while not os.path.exists(path):
        if time.time() - start >= timeout:
            return None
        time.sleep(interval)
    return round(time.time() - start, 2)
