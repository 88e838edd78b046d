#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: make sure the Ray head runs (control plane only) and answers, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_head
short_description: Start the Ray head unless it already answers, then wait until it lists itself ALIVE
description:
  - Reads the node table through Ray's state API (the State API's node list over HTTP) at
    C(http://127.0.0.1:<dashboard_port>). When an ALIVE head is listed, checks that
    it serves the GCS on I(gcs_port) (from C(<temp_dir>/ray_current_cluster)) and
    changes nothing.
  - Otherwise checks that I(gcs_port) and I(dashboard_port) are free on the node
    (a bind test; the owner is looked up in C(/proc/net/tcp*) and C(/proc/*/fd)),
    runs C(ray start --head --num-cpus=0 --num-gpus=0 ...) and polls the node table
    until the head is ALIVE, for at most I(ready_timeout) seconds.
  - The environment of the task reaches C(ray start) (e.g. C(RAY_AUTH_MODE)).
  - Error messages name the inventory variables to change (mvp_ray_gcs_port,
    mvp_ray_dashboard_port, ray_head_ready_timeout).
  - Check mode reads only and reports C(changed) when the head would be started.
  - With I(start=false) (a docker-host node container starts Ray itself, from the settings file
    the ray_head role writes, see the containers role's C(mvp_ray_node.py)), never starts or stops
    anything. It waits, for at most I(ready_timeout) seconds, until the head is listed ALIVE, the
    node's status file I(status_path) says Ray runs from the settings file I(settings_path) as it is
    now (the sha256 of its bytes), and at least I(workers) workers carrying I(resource) are ALIVE. It
    reports C(changed) only when it wrote new I(settings). When time runs out, it fails and quotes the status file (the failed
    starts, each with Ray's reason) and the workers it found.
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.node_token
  - mvp.ray.attributes.platform_linux
attributes:
  check_mode:
    support: full
    details:
      - Reads the node table and the ports only; C(changed) says whether the head would be started or its
        settings file rewritten.
  diff_mode:
    support: none
options:
  start:
    description:
      - Start the head with C(ray start --head) when none answers.
      - False - only wait for a head that the node's container starts (see the description).
    type: bool
    default: true
  workers:
    description: With I(start=false), how many workers carrying I(resource) must be ALIVE before the call returns.
    type: int
    default: 0
  status_path:
    description:
      - With I(start=false), the node entrypoint's status file (JSON with C(state), C(settings_sha256),
        C(failed_attempts)). Not read when empty.
    type: path
  settings_path:
    description: With I(start=false) and I(status_path), the settings file Ray must run from.
    type: path
  settings:
    description:
      - With I(start=false), the settings to write into I(settings_path) first (mode 0600, atomically, only when
        they differ; the filter P(mvp.ray.mvp_ray_node_settings#filter) builds them). The call then reports C(changed).
    type: dict
  ray:
    description: Path of the C(ray) CLI on the head.
    type: path
    required: true
  gcs_port:
    description: GCS port (C(ray start --port)).
    type: int
    default: 6379
  dashboard_port:
    description: Dashboard and Jobs/State API port.
    type: int
    default: 8265
  dashboard_host:
    description: Dashboard listen address.
    type: str
    default: 0.0.0.0
  extra_args:
    description: Extra C(ray start) arguments.
    type: list
    elements: str
    default: []
  ready_timeout:
    description: Seconds to wait for the head to list itself ALIVE after C(ray start).
    type: int
    default: 120
  resource:
    description: Custom resource that marks worker nodes (for C(summary)).
    type: str
    default: worker_node
  temp_dir:
    description: Ray's temp dir on the head (holds C(ray_current_cluster)).
    type: path
    default: /tmp/ray
  gcs_storage_path:
    description:
      - Folder on the head where the GCS keeps its tables in RocksDB
        (C(RAY_gcs_storage=rocksdb), C(RAY_gcs_storage_path); Ray's GCS fault tolerance
        without Redis, alpha in Ray 2.60). A head started again on the same folder
        reloads the job table and the node table, and the workers' raylets reconnect
        (within Ray's C(gcs_rpc_server_reconnect_timeout_s)). Created when missing.
      - Empty - the GCS keeps everything in memory (lost when the head restarts).
    type: path
  health_check:
    description:
      - The GCS's health checks of the nodes, passed as C(RAY_health_check_<key>) (module_utils
        C(mvp_ray_start.health_check_env)) - C(period_ms) between two checks, C(timeout_ms) to answer one,
        C(failure_threshold) failed checks in a row before a node is declared dead; a missing or null key keeps
        Ray's own value (3000, 10000, 5). Only when this call starts the head.
    type: dict
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Head | Start the Ray head (control plane only) unless it answers
  mvp.ray.ray_head:
    ray: /opt/mvp/venv/bin/ray
    gcs_port: 6379
    dashboard_port: 8265
  register: head
"""

RETURN = r"""
auth_token_written:
  description: Whether this call wrote (or in check mode would write) the node's token file I(auth_token_path).
  type: bool
  returned: success
started:
  description: True when this call ran C(ray start --head).
  type: bool
  returned: always
nodes:
  description: The node table after the call (see ray_cluster_info).
  type: list
  elements: dict
  returned: always
summary:
  description: ALIVE nodes (head, alive_workers, worker_ips, total_gpus), as ray_cluster_info returns it.
  type: dict
  returned: always
node_status:
  description: With I(start=false), the last content of I(status_path) (empty when it was not read).
  type: dict
  returned: always
start_output:
  description: Standard output and error of C(ray start) when it ran.
  type: str
  returned: when started
"""

import os
import socket
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_proc import describe, listening_pids
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import clients, list_nodes, summarize
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import (
    read_json, sha256_file, write_text_if_changed)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_secret_file import NODE_TOKEN_ARGS, write_node_token
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import (
    head_start_argv, head_start_env, settings_text, with_ray_on_path)


def port_owner(port):
    """Return who listens on TCP ``port``: ``<comm> (pid <pid>: <command line>)``, or ``an unknown process``."""
    found = listening_pids(port)
    return describe(found[0])[1] if found else "an unknown process"


def port_taken(port):
    """Return True when TCP ``port`` cannot be bound on all addresses (something listens there).

    SO_REUSEADDR is set as Ray's servers set it, so connections still in TIME_WAIT after a
    ``ray stop`` do not count; only a listening socket does.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("0.0.0.0", port))
    except OSError:
        return True
    finally:
        sock.close()
    return False


def current_gcs_port(temp_dir):
    """Return the GCS port written by ``ray start`` in ``<temp_dir>/ray_current_cluster`` (``ip:port``), or None."""
    try:
        with open(os.path.join(temp_dir, "ray_current_cluster"), encoding="utf-8") as handle:
            return int(handle.read().strip().rsplit(":", 1)[1])
    except (OSError, ValueError, IndexError):
        return None


def read_nodes(state, address, timeout=5):
    """Return (nodes, error text) from the state API; nodes is [] when the dashboard does not answer."""
    try:
        return list_nodes(state, address, timeout), ""
    except Exception as exc:  # Ray raises several types for an unreachable dashboard
        return [], str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def wait_problem(summary, status, settings_sha256, workers):
    """What the wait of I(start=false) still waits for (str), or '' when the cluster is ready.

    :param summary: dict from ``summarize`` (``head``, ``worker_ips``).
    :param status: dict, the node entrypoint's status ({} when not read).
    :param settings_sha256: str, the settings Ray must run from ('' - any).
    :param workers: int, how many workers must be ALIVE.
    """
    if status is not None and settings_sha256:
        if status.get("settings_sha256") != settings_sha256:
            return "the node's entrypoint has not started Ray from these settings yet (status: %s)" % (
                status.get("state") or "no status file")
        if status.get("state") != "running":
            return "the node's entrypoint says %s" % (status.get("state") or "nothing")
    if summary["head"] is None:
        return "the dashboard does not list the head ALIVE"
    if len(summary["worker_ips"]) < workers:
        return "%d of %d workers ALIVE (%s)" % (len(summary["worker_ips"]), workers,
                                                ", ".join(summary["worker_ips"]) or "none")
    return ""


def wait_only(module, state, address):
    """I(start=false): wait until the head (and I(workers) workers) started by the node's container are ALIVE."""
    params = module.params
    changed = False
    if params["settings"] is not None:
        if not params["settings_path"]:
            module.fail_json(msg="settings needs settings_path")
        try:
            changed = write_text_if_changed(params["settings_path"], settings_text(params["settings"]), 0o600,
                                            module.check_mode)
        except OSError as exc:
            module.fail_json(msg="Cannot write the node settings %s: %s" % (params["settings_path"], exc))
    deadline = time.time() + params["ready_timeout"]
    while True:
        nodes, error = read_nodes(state, address)
        summary = summarize(nodes, params["resource"])
        status = read_json(params["status_path"]) if params["status_path"] else None
        problem = wait_problem(summary, status, sha256_file(params["settings_path"] or "", missing=""),
                               params["workers"])
        if not problem:
            module.exit_json(changed=changed, started=False, nodes=nodes, summary=summary, node_status=status or {})
        if module.check_mode:
            module.exit_json(changed=True, started=False, nodes=nodes, summary=summary, node_status=status or {},
                             waiting_for=problem)
        if time.time() > deadline:
            failed = "; ".join((status or {}).get("failed_attempts") or []) or "none recorded"
            module.fail_json(msg="Waited %ds (ray_head_ready_timeout) for the Ray cluster started by the node "
                             "containers: %s%s. Failed starts on the head: %s. Check the node's Ray logs under "
                             "%s/session_latest/logs and `docker logs` of its container."
                             % (params["ready_timeout"], problem, " (%s)" % error if error else "", failed,
                                params["temp_dir"]),
                             nodes=nodes, summary=summary, node_status=status or {})
        time.sleep(0.5)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            NODE_TOKEN_ARGS,
            ray=dict(type="path", required=True),
            gcs_port=dict(type="int", default=6379),
            dashboard_port=dict(type="int", default=8265),
            dashboard_host=dict(type="str", default="0.0.0.0"),
            extra_args=dict(type="list", elements="str", default=[]),
            ready_timeout=dict(type="int", default=120),
            resource=dict(type="str", default="worker_node"),
            temp_dir=dict(type="path", default="/tmp/ray"),
            gcs_storage_path=dict(type="path"),
            health_check=dict(type="dict"),
            start=dict(type="bool", default=True),
            workers=dict(type="int", default=0),
            status_path=dict(type="path"),
            settings_path=dict(type="path"),
            settings=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    write_node_token(module)
    address = "http://127.0.0.1:%d" % params["dashboard_port"]
    # The State API over HTTP (no Ray import); the token as Ray's own lookup finds it (the task's environment).
    state = clients(address)[1]
    if not params["start"]:
        wait_only(module, state, address)
    nodes, error = [], "nothing listens on port %d" % params["dashboard_port"]
    if port_taken(params["dashboard_port"]):
        nodes, error = read_nodes(state, address)
    summary = summarize(nodes, params["resource"])
    if summary["head"] is not None:
        running = current_gcs_port(params["temp_dir"])
        if running is not None and running != params["gcs_port"]:
            module.fail_json(msg="The Ray head already runs with its GCS on port %d, but mvp_ray_gcs_port is %d. "
                             "Set mvp_ray_gcs_port=%d, or run down.yml (stops Ray) and re-run site.yml."
                             % (running, params["gcs_port"], running), nodes=nodes, summary=summary)
        module.exit_json(changed=False, started=False, nodes=nodes, summary=summary)

    for port, var in ((params["dashboard_port"], "mvp_ray_dashboard_port"), (params["gcs_port"], "mvp_ray_gcs_port")):
        if port_taken(port):
            module.fail_json(msg="Port %d (%s) is already taken on the head by %s, and no Ray head answers at %s "
                             "(%s). Free the port (stop that process, or `ray stop` for a Ray without its dashboard) "
                             "or set %s to a free port." % (port, var, port_owner(port), address, error, var))
    if module.check_mode:
        module.exit_json(changed=True, started=False, nodes=nodes, summary=summary)

    argv = head_start_argv(params["ray"], params["gcs_port"], params["dashboard_host"], params["dashboard_port"],
                           params["extra_args"])
    env = with_ray_on_path(os.environ, params["ray"])
    if params["gcs_storage_path"]:
        os.makedirs(params["gcs_storage_path"], exist_ok=True)
    try:
        env.update(head_start_env(params["gcs_storage_path"] or "", health_check=params["health_check"]))
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    except OSError as exc:
        module.fail_json(msg="Cannot run %s: %s (mvp_ray_bin_dir)" % (params["ray"], exc))
    output = proc.communicate()[0].strip()
    if proc.returncode:
        module.fail_json(msg="`%s` failed with rc=%d: %s" % (" ".join(argv), proc.returncode, output[-2000:]),
                         start_output=output)
    deadline = time.time() + params["ready_timeout"]
    while True:
        nodes, error = read_nodes(state, address)
        summary = summarize(nodes, params["resource"])
        if summary["head"] is not None:
            break
        if time.time() > deadline:
            module.fail_json(msg="Waited %ds (ray_head_ready_timeout) for the Ray head's dashboard at %s to list the "
                             "head ALIVE after `ray start --head`: %s. Check %s/session_latest/logs on the head."
                             % (params["ready_timeout"], address, error or "no head node", params["temp_dir"]),
                             start_output=output, nodes=nodes)
        time.sleep(0.5)
    module.exit_json(changed=True, started=True, nodes=nodes, summary=summary, start_output=output)


if __name__ == "__main__":
    main()
