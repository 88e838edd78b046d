#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: install, start and stop the job controller (module_utils mvp_controller) on its host."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_controller
short_description: Run the job controller that follows every run, started once and kept
description:
  - Runs on the controller host (the inventory group C(job_controller)). Writes the controller's configuration
    C(<state_dir>/settings.json) (mode 0600 - it holds the Ray auth token and the inventory's secrets, which are
    never logged) and keeps one controller process (module_utils C(mvp_controller) C(run)) running for this
    inventory.
  - On a host whose init is systemd (C(/run/systemd/system) exists) it writes the unit
    C(/etc/systemd/system/<name>.service) with C(Restart=always) and enables and starts it. Elsewhere (a
    container, this project's CI) a keeper process (C(mvp_controller keep), module_utils C(mvp_service)) starts
    the controller again within seconds whenever it dies; the keeper itself is started again by the next
    C(site.yml).
  - Idempotent by the configuration and the command - unchanged and running reports C(changed=false); a changed
    configuration restarts the controller (runs are picked up where they were, as their state is in the job
    directories).
  - With I(state=stopped) the controller (and its keeper or unit) is stopped; runs it followed stay as they are
    in their job directories and are picked up by the next controller.
version_added: 0.2.0
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  name:
    description: The controller's name (its service, unit and folder); letters, digits, C(.), C(_), C(-).
    type: str
    required: true
  state:
    description: C(started) keeps the controller running; C(stopped) stops it.
    type: str
    choices: [started, stopped]
    default: started
  state_dir:
    description: The controller's folder on this host (configuration, log, ansible-runner artifacts); made 0700.
    type: path
    required: true
  python:
    description: The Python of the controller's virtual environment (ansible-core, ansible-runner, docker SDK).
    type: path
  collections_path:
    description: The folder holding C(ansible_collections/mvp/ray) (the collection the controller imports).
    type: path
  config:
    description: The controller's configuration (module_utils C(mvp_controller.load_config) names every key), without secrets.
    type: dict
  secrets:
    description:
      - The configuration's secret keys (C(ray_auth_token), C(env)), merged into it, and C(webhook_addresses) - the
        C(url) and C(secret) of each webhook of I(config.webhooks), by position (a chat webhook's URL is its token);
        never shown in Ansible output.
    type: dict
    default: {}
  init:
    description: C(auto) uses systemd where it is the init, else the keeper; C(systemd) or C(keeper) force one.
    type: str
    choices: [auto, systemd, keeper]
    default: auto
  timeout:
    description: Seconds to wait for the controller's first heartbeat after a start.
    type: int
    default: 60
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Controller | Keep the job controller running
  mvp.ray.ray_job_controller:
    name: mvp-controller-local
    state_dir: /var/lib/mvp-controller/local
    python: /opt/mvp-controller/venv/bin/python
    collections_path: /work/main/collections
    config: "{{ job_controller_config }}"
    secrets:
      ray_auth_token: "{{ job_controller_ray_auth_token }}"
      env: "{{ job_controller_env }}"
"""

RETURN = r"""
init:
  description: How the controller is kept - C(systemd) or C(keeper).
  type: str
  returned: always
pid:
  description: The controller's process id (null when stopped).
  type: int
  returned: always
log:
  description: The controller's log file (keeper) or C(journalctl -u <name>) (systemd).
  type: str
  returned: always
heartbeat:
  description: The heartbeat file the controller writes every pass (C(<shared_dir>/controller/heartbeat.json)).
  type: str
  returned: with I(state=started)
reason:
  description: Why it was started, restarted or left alone.
  type: str
  returned: always
"""

import json
import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import differs, write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import is_submission_id
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_service import (
    log_tail, paths, read_spec, running_pid, start, stop)
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_run_state import heartbeat_file
from ansible_collections.mvp.ray.plugins.module_utils.notify.mvp_notify import NotifyError, check_endpoints

MODULE = "ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_controller"
SERVICE = "controller"
KEEPER = "keeper"


def service_spec(params, config_file, log):
    """The controller's service dict (argv, env, log, cwd) for ``mvp_service``."""
    return {"argv": [params["python"], "-m", MODULE, "run", "--config", config_file],
            "env": {"PYTHONPATH": params["collections_path"], "PYTHONUNBUFFERED": "1"},
            "log": log, "cwd": params["state_dir"]}


def unit_text(name, spec):
    """A systemd unit running ``spec`` with ``Restart=always`` (str)."""
    env = " ".join('"%s=%s"' % (k, v) for k, v in sorted(spec["env"].items()))
    return ("[Unit]\nDescription=mvp job controller %s (follows every run of its Ray cluster)\n"
            "After=network-online.target docker.service\n\n[Service]\nType=simple\nExecStart=%s\n"
            "Environment=%s\nWorkingDirectory=%s\nRestart=always\nRestartSec=3\nUMask=0077\n\n"
            "[Install]\nWantedBy=multi-user.target\n" % (name, " ".join(spec["argv"]), env, spec["cwd"]))


def heartbeat_since(path, since, content=None):
    """True when the heartbeat file ``path`` was written at or after ``since`` (seconds since the epoch) by a
    controller running ``content`` (dict ``{"hash", ...}`` from the configuration; None: any)."""
    try:
        with open(path, encoding="utf-8") as handle:
            beat = json.load(handle)
        fresh = float(beat.get("at") or 0) >= since
    except (OSError, ValueError, AttributeError, TypeError):
        return False
    return fresh and (not content or (beat.get("content") or {}).get("hash") == content.get("hash"))


def tail_text(log):
    """``": <the log's last 8 lines>"`` for a failure message, or '' (str)."""
    tail = log_tail(log, lines=8, limit=2000)
    return (": " + tail) if tail else ""


def systemctl(*args):
    """Run systemctl; return (rc, output)."""
    done = subprocess.run(["systemctl"] + list(args), capture_output=True, text=True, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            state=dict(type="str", default="started", choices=["started", "stopped"]),
            state_dir=dict(type="path", required=True),
            python=dict(type="path"),
            collections_path=dict(type="path"),
            config=dict(type="dict"),
            secrets=dict(type="dict", default={}, no_log=True),
            init=dict(type="str", default="auto", choices=["auto", "systemd", "keeper"]),
            timeout=dict(type="int", default=60),
        ),
        required_if=[("state", "started", ["python", "collections_path", "config"])],
        supports_check_mode=True,
    )
    params = module.params
    name = params["name"]
    if not is_submission_id(name):
        module.fail_json(msg="ray_job_controller: name %r must be letters, digits, '.', '_' or '-' "
                             "(set job_controller_name)." % name)
    state_dir = params["state_dir"]
    services = os.path.join(state_dir, "services")
    where, keeper = paths(services, SERVICE), paths(services, KEEPER)
    init = params["init"]
    if init == "auto":
        init = "systemd" if os.path.isdir("/run/systemd/system") else "keeper"
    unit = "/etc/systemd/system/%s.service" % name
    log = os.path.join(state_dir, "controller.log")
    result = dict(init=init, log=log if init == "keeper" else "journalctl -u %s" % name)

    if params["state"] == "stopped":
        running = running_pid(where["pid"]) is not None or running_pid(keeper["pid"]) is not None
        if init == "systemd" and os.path.exists(unit):
            running = running or systemctl("is-active", name)[0] == 0
        if module.check_mode or not running:
            module.exit_json(changed=running, pid=None, reason="running" if running else "not running", **result)
        if init == "systemd":
            systemctl("disable", "--now", name)
        stop(services, KEEPER)
        stop(services, SERVICE)
        module.exit_json(changed=True, pid=None, reason="stopped (runs stay in their job directories)", **result)

    config = dict(params["config"], name=name, state_dir=state_dir)
    config.update({k: params["secrets"][k] for k in ("ray_auth_token", "env") if k in params["secrets"]})
    addresses = params["secrets"].get("webhook_addresses")
    if addresses is not None:  # each webhook's url and secret, by position (they never show in Ansible's output)
        hooks = list(config.get("webhooks") or [])
        if not isinstance(addresses, list) or len(addresses) != len(hooks):
            module.fail_json(msg="ray_job_controller: secrets.webhook_addresses must list one {url, secret} per "
                                 "webhook of config.webhooks (the role job_controller writes both from "
                                 "job_controller_webhooks)", **result)
        config["webhooks"] = [dict(hook, **(address or {})) for hook, address in zip(hooks, addresses)]
    try:
        check_endpoints(config.get("webhooks"), "job_controller_webhooks")
    except NotifyError as exc:
        module.fail_json(msg="ray_job_controller: %s" % exc, **result)
    for key in ("shared_dir", "project_dir"):
        if not os.path.isdir(str(config.get(key) or "")):
            module.fail_json(msg="ray_job_controller: config.%s %r is not a folder on this host: the controller host "
                                 "must see the shared storage (job_controller_shared_dir) and the checkout "
                                 "(job_controller_project_dir)." % (key, config.get(key)), **result)
    if not os.access(params["python"], os.X_OK):
        module.fail_json(msg="ray_job_controller: python %s is missing: the role job_controller makes its venv "
                             "(job_controller_venv)." % params["python"], **result)
    config_file = os.path.join(state_dir, "settings.json")
    config_text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    spec = service_spec(params, config_file, log)
    heartbeat = heartbeat_file(config["shared_dir"])
    result["heartbeat"] = heartbeat
    changed_config = differs(config_file, config_text)
    if init == "systemd":
        changed_unit = differs(unit, unit_text(name, spec))
        active = systemctl("is-active", name)[0] == 0
        if not (changed_config or changed_unit) and active:
            module.exit_json(changed=False, pid=None, reason="running, unchanged", **result)
        if module.check_mode:
            module.exit_json(changed=True, pid=None, reason="would start", **result)
        os.makedirs(state_dir, mode=0o700, exist_ok=True)
        write_text_atomic(config_file, config_text, mode=0o600)
        write_text_atomic(unit, unit_text(name, spec), mode=0o644)
        systemctl("daemon-reload")
        since = time.time()
        rc, out = systemctl("enable", name)
        rc, out = systemctl("restart", name) if rc == 0 else (rc, out)
        if rc != 0:
            module.fail_json(msg="systemctl could not start %s: %s" % (name, out), **result)
    else:
        pid, keeper_pid = running_pid(where["pid"]), running_pid(keeper["pid"])
        same = read_spec(where["spec"]) == spec
        keeper_spec = {"argv": [params["python"], "-m", MODULE, "keep", "--dir", services],
                       "env": spec["env"], "log": os.path.join(state_dir, "keeper.log"), "cwd": state_dir}
        keeper_file = os.path.join(state_dir, "keeper.json")
        keeper_same = read_spec(keeper_file) == keeper_spec
        if not changed_config and same and keeper_same and pid is not None and keeper_pid is not None:
            module.exit_json(changed=False, pid=pid, reason="running, unchanged", **result)
        reason = (("its code changed" if not same else "settings changed")
                  if pid is not None and not (same and not changed_config)
                  else "not running" if pid is None else "its keeper was not running or its code changed")
        if module.check_mode:
            module.exit_json(changed=True, pid=pid, reason=reason, **result)
        for folder in (state_dir, services):
            os.makedirs(folder, mode=0o700, exist_ok=True)
            os.chmod(folder, 0o700)
        write_text_atomic(config_file, config_text, mode=0o600)
        if keeper_pid is not None and not keeper_same:
            stop(services, KEEPER)
            keeper_pid = None
        if pid is not None and (changed_config or not same):
            stop(services, SERVICE)
            pid = None
        since = time.time()
        write_text_atomic(where["spec"], json.dumps(spec, sort_keys=True) + "\n", mode=0o600)
        # A running keeper starts the controller from its service file within seconds; starting it here too
        # would make two (the second would wait for the first's lock).
        if pid is None and keeper_pid is None:
            try:
                start(spec, where["pid"])
            except OSError as exc:
                module.fail_json(msg="the controller could not start: %s" % exc, **result)
        if keeper_pid is None:
            write_text_atomic(keeper_file, json.dumps(keeper_spec, sort_keys=True) + "\n", mode=0o600)
            start(keeper_spec, keeper["pid"])
        result["reason"] = reason
    deadline = time.time() + params["timeout"]
    while not heartbeat_since(heartbeat, since - 1, config.get("content")):
        if time.time() > deadline:
            module.fail_json(msg="the job controller did not answer (no heartbeat in %s from the content it was "
                             "started with within %d s); its log: %s%s" % (
                                 heartbeat, params["timeout"], result["log"], tail_text(log)), changed=True, **result)
        time.sleep(0.5)
    result.setdefault("reason", "started")
    module.exit_json(changed=True, pid=running_pid(where["pid"]), **result)


if __name__ == "__main__":
    main()
