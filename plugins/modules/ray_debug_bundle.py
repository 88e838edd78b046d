#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: run diagnostic commands concurrently and save their output with a time stamp."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_debug_bundle
short_description: Save the output of diagnostic commands (ray status, ray job list, ...) into a folder
description:
  - With I(in_process) (the default), commands whose program is named C(ray) run one
    after another inside the module's process (its Python must import Ray) through Ray's own click CLI
    (C(ray.scripts.scripts.cli.main(args, standalone_mode=False))), so Ray is
    imported once instead of once per command (about a second of CPU each); their
    output is what the CLI prints, with terminal colour codes removed.
  - Other commands (and all of them with I(in_process=false)) start at once as
    subprocesses; the module waits for all of them and writes one file
    per command named C(<UTC time>-<stage>-<name>.txt) holding the command line,
    exit code, standard output and standard error.
  - A command that fails or times out is recorded in its file, never fatal - a
    bundle is most useful when things are broken.
  - Files are written to temporary names, then renamed. Check mode writes nothing.
options:
  dest:
    description: Folder receiving the files (must exist).
    type: path
    required: true
  stage:
    description: Stage name used in the file names (submit, placed, final, stop, collect).
    type: str
    required: true
  commands:
    description: Items C({name, argv}); C(name) becomes part of the file name.
    type: list
    elements: dict
    required: true
  timeout:
    description: Seconds each command may run before it is killed (in-process - abandoned).
    type: int
    default: 60
  in_process:
    description: Run C(ray) CLI commands inside the module's process (see above).
    type: bool
    default: true
  detach:
    description:
      - Return at once and take the snapshots in a detached process on the node (a
        double fork, as Ansible's own async wrapper does, without its file transfers) -
        the commands run while the play goes on, e.g. while the job is submitted.
      - When the detached process is done it writes I(record) (JSON - C(files), C(rcs),
        C(then_files), or C(failed) and C(msg)); wait for that file (C(ansible.builtin.wait_for)).
    type: bool
    default: false
  then:
    description:
      - A second snapshot of the same commands taken once a file appears, e.g. the
        placement record C(debug/placement.json) that C(ray_job) writes when the driver
        is placed. Started in the background before the submission, one call takes the
        submission and the placement snapshots while the job is submitted.
      - When the file does not appear within I(then.timeout) seconds the second
        snapshot is not taken (C(then_files) is empty); the module still succeeds.
    type: dict
    suboptions:
      stage:
        description: Stage name of the second snapshot.
        type: str
        required: true
      after_file:
        description: File whose appearance starts the second snapshot.
        type: path
        required: true
      timeout:
        description: Seconds to wait for I(then.after_file).
        type: int
        default: 300
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Bundle | Snapshot the cluster into the job's debug folder
  mvp.ray.ray_debug_bundle:
    dest: /private/jobs/selftest-20261121-120000-1a2b3c/debug
    stage: placed
    commands:
      - {name: ray_status, argv: [ray, status]}
      - {name: ray_job_list, argv: [ray, job, list, --address, "http://127.0.0.1:8265"]}

- name: Bundle | Snapshot at submission, and again once the driver is placed (started in the background)
  mvp.ray.ray_debug_bundle:
    dest: /private/jobs/selftest-20261121-120000-1a2b3c/debug
    stage: submit
    commands:
      - {name: ray_status, argv: [ray, status]}
    then:
      stage: placed
      after_file: /private/jobs/selftest-20261121-120000-1a2b3c/debug/placement.json
      timeout: 330
    detach: true
  register: bundle

- name: Bundle | Wait until both snapshots are written
  ansible.builtin.wait_for:
    path: "{{ bundle.record }}"
    timeout: 450
"""

RETURN = r"""
files:
  description: Paths written, in the order of I(commands).
  type: list
  elements: str
  returned: always
stamp:
  description: UTC time stamp shared by the files (C(%Y%m%dT%H%M%SZ)).
  type: str
  returned: always
rcs:
  description: Exit code per command name (null when it timed out or could not start).
  type: dict
  returned: always
record:
  description: File C(<dest>/<stamp>-<stage>-bundle.json) the detached process writes when it is done.
  type: str
  returned: when I(detach) is true
max_seconds:
  description: >-
    Upper bound, in seconds, of the detached work - every command at its I(timeout) in each
    snapshot plus the wait of I(then) - for whoever waits for I(record) (int).
  type: int
  returned: when I(detach) is true
then_files:
  description: Paths written by the second snapshot (I(then)); empty when its file never appeared.
  type: list
  elements: str
  returned: when I(then) is set
then_waited:
  description: Seconds waited for I(then.after_file) (float).
  type: float
  returned: when I(then) is set
"""

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.mvp_files import write_text_atomic


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


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            stage=dict(type="str", required=True),
            commands=dict(type="list", elements="dict", required=True),
            timeout=dict(type="int", default=60),
            in_process=dict(type="bool", default=True),
            detach=dict(type="bool", default=False),
            then=dict(type="dict", options=dict(
                stage=dict(type="str", required=True),
                after_file=dict(type="path", required=True),
                timeout=dict(type="int", default=300),
            )),
        ),
        supports_check_mode=True,
    )
    params = module.params
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    if module.check_mode:
        module.exit_json(changed=True, files=bundle_paths(params["dest"], stamp, params["stage"], params["commands"]),
                         stamp=stamp, rcs={})
    if not os.path.isdir(params["dest"]):
        module.fail_json(msg="debug folder %s does not exist" % params["dest"])
    if params["detach"]:
        record = os.path.join(params["dest"], "%s-%s-bundle.json" % (stamp, params["stage"]))
        detached(lambda: take(params, stamp), record)
        module.exit_json(changed=True, stamp=stamp, record=record, max_seconds=max_seconds(params),
                         files=bundle_paths(params["dest"], stamp, params["stage"], params["commands"]))
    module.exit_json(**take(params, stamp))


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
            later = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
            result["then_files"] = snapshot(params, cli, later, then["stage"])[0]
    return result


def detached(work, record):
    """Run ``work()`` in a detached grandchild process and return at once in the caller.

    The grandchild has its own session and /dev/null as stdin, stdout and stderr (the
    module's JSON channel stays clean and ``docker exec``/SSH do not wait for it); it
    writes ``work()``'s result, or ``{"failed": true, "msg": ...}``, as JSON to
    ``record`` (str path) and exits without running the parent's exit handlers.
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


if __name__ == "__main__":
    main()
