#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: run the MLflow tracking server on the Ray head, started once and kept."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_mlflow_server
short_description: Run the MLflow tracking server on this node, idempotently (by its port and its command)
description:
  - With I(state=started), makes sure C(mlflow server) answers C(GET /health) on I(port), started from
    this module's command line. Its SQLite backend store (C(<store_dir>/mlflow.db)) and its artifacts
    (C(<store_dir>/artifacts), served through the server's proxy) live on the shared storage, so the
    runs outlive the node.
  - A server that answers and was started with the same command, environment and log is left alone
    (C(changed=false)). One started with other settings is stopped and started again. A port held by
    another program fails, naming it and I(port).
  - The server runs detached in a session of its own (module_utils C(mvp_service)); its command is kept
    in C(<service_dir>/mlflow.json) (mode 0600) and its pid in C(<service_dir>/mlflow.pid). On docker
    hosts the node container's command starts it again from that file when it ends (a restarted
    container). MLflow's job-execution workers are off (C(MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false) -
    seven more Python processes, about 0.9 GiB, that tracking does not use).
  - With I(state=stopped), removes the service file and ends the server's session; the store is kept.
version_added: "0.1.0"
author: MVP project (@mvp)
extends_documentation_fragment: [mvp.ray.attributes]
attributes:
  check_mode:
    support: full
    details: Says whether it would start or stop the server; starts, stops and writes nothing.
  diff_mode:
    support: none
options:
  state:
    description: C(started) or C(stopped).
    type: str
    default: started
    choices: [started, stopped]
  mlflow:
    description: The C(mlflow) program of the server's own venv.
    type: path
    default: /opt/mvp/mlflow/bin/mlflow
  store_dir:
    description: Folder (on the shared storage) of the backend store and the artifacts. Required with I(state=started).
    type: path
  host:
    description: Address the server listens on.
    type: str
    default: 0.0.0.0
  port:
    description: Port the server listens on.
    type: int
    default: 5000
  workers:
    description: Server worker processes (C(mlflow server --workers)).
    type: int
    default: 1
  service_dir:
    description: Folder of the service file and the pid file (under the node's Ray temp dir).
    type: path
    required: true
  log:
    description: File the server's output is appended to. Default C(<store_dir>/logs/server.log).
    type: path
  env:
    description: Variables added to the server's environment (kept in the 0600 service file, never returned).
    type: dict
    default: {}
  extra_args:
    description: More C(mlflow server) arguments (for example C(--app-name basic-auth)).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds the server may take to answer C(/health) after its start.
    type: int
    default: 120
  wait:
    description:
      - Wait until the server answers C(/health) after starting it. C(false) returns once it is started
        (C(answered=false)), so the play goes on while it starts; a later call with the same settings and
        C(wait=true) waits for that start (a server still starting from the same command is given
        I(timeout) seconds before it counts as not answering) - C(changed=false) once it answers.
      - With C(false), a server still starting from the same command (started less than I(timeout) seconds ago)
        is left to start (C(changed=false), C(answered=false), C(reason=starting)) - a play can look once
        whether it answers yet without waiting.
    type: bool
    default: true
  auth_config_path:
    description:
      - File the server's basic-auth config is written to (C(MLFLOW_AUTH_CONFIG_PATH) in I(env)), mode 0600, in
        the same call, before the server is looked at; its folder is made (0700, as I(service_dir)). Rewritten only
        when its text differs. Empty - no file is written.
    type: path
    default: ""
  auth_config_text:
    description: The basic-auth config's text (MLflow's C(basic_auth.ini) format; it holds the password - never shown).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Start the tracking server on the head
  mvp.ray.ray_mlflow_server:
    store_dir: /private/mlflow
    port: 5000
    service_dir: /tmp/ray/mvp-services

- name: Stop it (its runs stay in /private/mlflow)
  mvp.ray.ray_mlflow_server:
    state: stopped
    service_dir: /tmp/ray/mvp-services
"""

RETURN = r"""
url:
  description: The server as this node reaches it (C(http://127.0.0.1:<port>)).
  returned: state=started
  type: str
pid:
  description: Process id of the server (None in check mode when it would start).
  returned: state=started
  type: int
started:
  description: True when this call started the server (or, in check mode, would).
  returned: state=started
  type: bool
answered:
  description: True when the server answered C(/health) before this call returned (false with I(wait=false) after a start).
  returned: state=started
  type: bool
auth_config_changed:
  description: True when this call wrote (or, in check mode, would write) I(auth_config_path).
  returned: state=started
  type: bool
reason:
  description: >-
    Why it was started or left alone (C(answers), C(starting), C(not running), C(not answering),
    C(settings changed)).
  returned: always
  type: str
log:
  description: The server's log file.
  returned: state=started
  type: str
store_dir:
  description: The backend store and artifacts folder.
  returned: state=started
  type: str
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import MlflowClient
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_proc import describe, listening_pids
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_service import (
    paths, read_spec, running_pid, start, stop)

NAME = "mlflow"
FIXED_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def server_spec(params):
    """The service file's dict (argv, env, log) for these module parameters."""
    store = params["store_dir"]
    argv = [params["mlflow"], "server", "--backend-store-uri", "sqlite:///" + os.path.join(store, "mlflow.db"),
            "--artifacts-destination", os.path.join(store, "artifacts"), "--host", params["host"],
            "--port", str(params["port"]), "--workers", str(params["workers"])] + list(params["extra_args"])
    env = dict(FIXED_ENV, **{str(k): str(v) for k, v in params["env"].items()})
    return {"argv": argv, "env": env, "log": params["log"] or os.path.join(store, "logs", "server.log"),
            "cwd": store}


def decide(pid, answers, same, wait, age, timeout):
    """What to do with the server, from what this call found.

    :param pid: int or None, the server this module started (its pid file), while it runs.
    :param answers: bool, ``/health`` answered on the port.
    :param same: bool, the service file holds this call's command, environment and log.
    :param wait: bool, the I(wait) option.
    :param age: float or None, seconds since that server was started (its pid file's age).
    :param timeout: int, seconds a start may take (I(timeout)).
    :returns: str, one of ``keep`` (it answers from this command), ``wait`` (it is starting from this command:
        wait for it), ``starting`` (the same, but the caller does not wait: leave it), ``check port`` (none of
        ours runs: see who holds the port, then start), ``restart`` (ours runs with other settings, or does
        not answer after ``timeout``).
    """
    if pid is None:
        return "check port"
    if same and answers:
        return "keep"
    if same and (age is None or age < timeout):
        return "wait" if wait else "starting"
    return "restart"


def write_auth_config(path, text, check_mode):
    """Write the basic-auth config ``text`` to ``path`` (0600; folder 0700) unless it already holds it.

    :returns: bool, whether it was (or in check mode would be) written.
    :raises OSError: the folder or the file cannot be written.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            if handle.read() == text and (os.stat(path).st_mode & 0o777) == 0o600:
                return False
    except (OSError, UnicodeDecodeError):
        pass
    if not check_mode:
        folder = os.path.dirname(path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        write_text_atomic(path, text, mode=0o600)
    return True


def age_of(path):
    """Seconds since ``path`` was last written (float), None when it is missing."""
    try:
        return max(0.0, time.time() - os.stat(path).st_mtime)
    except OSError:
        return None


def log_tail(path, lines=20):
    """The last lines of the server's log (str), '' when unreadable."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 8192))
            return "\n".join(handle.read().decode("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return ""


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="started", choices=["started", "stopped"]),
            mlflow=dict(type="path", default="/opt/mvp/mlflow/bin/mlflow"),
            store_dir=dict(type="path"),
            host=dict(type="str", default="0.0.0.0"),
            port=dict(type="int", default=5000),
            workers=dict(type="int", default=1),
            service_dir=dict(type="path", required=True),
            log=dict(type="path"),
            env=dict(type="dict", default={}, no_log=True),
            extra_args=dict(type="list", elements="str", default=[]),
            timeout=dict(type="int", default=120),
            wait=dict(type="bool", default=True),
            auth_config_path=dict(type="path", default=""),
            auth_config_text=dict(type="str", default="", no_log=True),
        ),
        required_if=[("state", "started", ["store_dir"])],
        supports_check_mode=True,
    )
    params = module.params
    where = paths(params["service_dir"], NAME)
    if params["state"] == "stopped":
        pid = running_pid(where["pid"])
        if module.check_mode or pid is None:
            module.exit_json(changed=pid is not None, reason="running" if pid else "not running")
        stop(params["service_dir"], NAME)
        module.exit_json(changed=True, reason="stopped (its store is kept)")

    if not os.access(params["mlflow"], os.X_OK):
        module.fail_json(msg="%s is not on this node: the node image has no MLflow server venv. Rebuild the node "
                             "image from images/ (site.yml does it on docker hosts), or set mvp_mlflow_enabled: false."
                         % params["mlflow"])
    spec = server_spec(params)
    client = MlflowClient("http://127.0.0.1:%d" % params["port"], headers={})
    result = dict(url=client.address, log=spec["log"], store_dir=params["store_dir"], auth_config_changed=False)
    if params["auth_config_path"]:
        try:
            result["auth_config_changed"] = write_auth_config(params["auth_config_path"], params["auth_config_text"],
                                                              module.check_mode)
        except OSError as exc:
            module.fail_json(msg="Could not write the tracking server's auth config %s: %s"
                             % (params["auth_config_path"], exc), **result)
    pid = running_pid(where["pid"])
    answers = client.healthy()
    same = read_spec(where["spec"]) == spec
    action = decide(pid, answers, same, params["wait"] and not module.check_mode, age_of(where["pid"]),
                    params["timeout"])
    if action == "wait":
        # started from this command a moment ago (wait=false) and still starting: its start is waited for
        answers = wait_healthy(client, where["pid"], time.time() + params["timeout"])
        action = "keep" if answers else "restart"
    changed = result["auth_config_changed"]
    if action == "keep":
        module.exit_json(changed=changed, started=False, answered=True, pid=pid, reason="answers", **result)
    if action == "starting":
        module.exit_json(changed=changed, started=False, answered=False, pid=pid, reason="starting", **result)
    if pid is None:
        holders = [describe(p)[1] for p in listening_pids(params["port"])]
        if holders or answers:
            module.fail_json(msg="Port %d is taken by %s, not by the tracking server this module started: set "
                                 "mvp_mlflow_port to a free port, or stop that program."
                             % (params["port"], "; ".join(holders) or "a server that answers /health"), **result)
    reason = "settings changed" if pid is not None and not same else "not answering" if pid else "not running"
    if module.check_mode:
        module.exit_json(changed=True, started=True, answered=False, pid=None, reason=reason, **result)
    if pid is not None:
        stop(params["service_dir"], NAME)
    for folder in (params["store_dir"], os.path.join(params["store_dir"], "artifacts"), params["service_dir"]):
        os.makedirs(folder, exist_ok=True)
    os.chmod(params["service_dir"], 0o700)
    try:
        pid = start(spec, where["pid"])
    except OSError as exc:
        module.fail_json(msg="%s could not start: %s" % (params["mlflow"], exc), **result)
    write_text_atomic(where["spec"], json.dumps(spec, sort_keys=True) + "\n", mode=0o600)
    if not params["wait"]:
        module.exit_json(changed=True, started=True, answered=False, pid=pid, reason=reason, **result)
    if not wait_healthy(client, where["pid"], time.time() + params["timeout"]):
        problem = "exited" if running_pid(where["pid"]) is None else "did not answer within %ds" % params["timeout"]
        stop(params["service_dir"], NAME)
        module.fail_json(msg="The MLflow tracking server %s. The end of its log %s:\n%s"
                         % (problem, spec["log"], log_tail(spec["log"])), changed=True, **result)
    module.exit_json(changed=True, started=True, answered=True, pid=pid, reason=reason, **result)


def wait_healthy(client, pid_file, deadline):
    """Poll ``/health`` every 0.5 s until it answers (True), the process of ``pid_file`` is gone or ``deadline``
    (seconds since the epoch) passed (False)."""
    while not client.healthy(timeout=2):
        if running_pid(pid_file) is None or time.time() > deadline:
            return False
        time.sleep(0.5)
    return True


if __name__ == "__main__":
    main()
