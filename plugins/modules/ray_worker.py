#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: make sure a Ray worker's raylet has joined the current head, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_worker
short_description: Start Ray on a worker unless its raylet already belongs to the current head
description:
  - Finds the running raylet by scanning C(/proc/*/cmdline) and decides that the
    worker has joined when all hold - the raylet was started with
    C(--gcs-address=<gcs_address>); its C(--node-ip-address) is among I(alive_ips)
    (the nodes the head lists ALIVE - a restarted head forgets its old workers); the
    fingerprint in C(<temp_dir>/mvp_secret.sha256) is the sha256 of I(secret) (and of the
    other variables it hands the raylet); with I(route_env), the raylet's node IP is the
    source address of the route to the head.
  - With I(route_env) (the default), before anything else the route to the head is read
    (C(ip -o route get <head ip>), module_utils C(mvp_net)); a route leaving from a
    link-local address or through C(docker0) fails the module naming the interface
    (unless I(socket_ifname) is set). Ray is started with C(--node-ip-address=<source>)
    and C(NCCL_SOCKET_IFNAME) and C(GLOO_SOCKET_IFNAME) set to the route's interface (or
    I(socket_ifname)) in the raylet's environment, so every actor and driver inherits them.
  - When it has joined, changes nothing. Otherwise stops a raylet that runs
    (C(ray stop --force)), writes the fingerprint and runs C(ray start
    --address=<gcs_address> --resources=<resources> --num-gpus=<num_gpus> ...) with
    I(secret) exported as I(secret_env) in the environment of C(ray start) only (so the
    raylet, the job supervisors and the drivers inherit it; it never reaches a command
    line, a file or the result).
  - C(ray start) returns only once the GCS lists the new node (Ray 2.60,
    C(ray/_private/node.py), C(Node.__init__) - "Wait for the node info to be available
    in the GCS"), so a zero exit status means the worker has joined; it may run for at
    most I(timeout) seconds.
  - A failed C(ray start) (non-zero exit or past I(timeout)) is retried up to I(attempts)
    times in all, after C(ray stop --force) and a pause of I(retry_delay) seconds times the
    attempt number plus a random part of up to I(retry_delay) (so workers that failed
    together do not start together again). Under load a raylet can die while starting
    (measured with 16 workers on 2 cores - C(Check failed ... Timed out waiting for file
    .../metrics_agent_port_*), as Ray waits a fixed time for its dashboard agent); a later
    attempt usually succeeds. Each failure is returned in I(failed_attempts) with Ray's own
    reason (the C(Check failed)/error lines of C(ray start)'s output and of
    C(<temp_dir>/session_latest/logs/raylet.out)).
  - The environment of the task reaches C(ray start) (e.g. C(RAY_AUTH_MODE)).
  - Check mode reports C(changed) and C(reason) without stopping or starting anything.
  - With I(start=false) (a docker-host node container starts Ray itself from the settings file the
    ray_worker role writes, see the containers role's C(mvp_ray_node.py)), it starts and stops nothing.
    It waits, for at most I(timeout) seconds, until the status file I(status_path) says Ray runs
    (C(state=running)) from the settings file I(settings_path) as it is now (the sha256 of its bytes).
    It returns that node's IP, with C(changed=true) only when it wrote new I(settings). When time runs
    out, it fails and quotes the state and the failed starts, each with Ray's reason. Every other
    option is ignored then.
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.node_token
  - mvp.ray.attributes.platform_linux
attributes:
  check_mode:
    support: full
    details:
      - Stops and starts nothing and writes no settings; C(changed) and C(reason) say whether Ray would be (re)started.
  diff_mode:
    support: none
options:
  start:
    description:
      - Start Ray over this connection when the raylet has not joined.
      - False - wait for the container's own start (see the description).
    type: bool
    default: true
  settings_path:
    description: With I(start=false), the settings file the node's entrypoint starts Ray from.
    type: path
  settings:
    description:
      - With I(start=false), the settings to write into I(settings_path) first (mode 0600, atomically, only when
        they differ; the filter P(mvp.ray.mvp_ray_node_settings#filter) builds them). Writing and waiting in one call
        lets the role pace the starts with C(throttle).
      - Without the secrets - I(secret) (as I(secret_env)) and I(more_secrets) are added to their C(env) here, so
        only the secrets' values are masked in the output (were the whole settings C(no_log), every word in them
        would be, C(start) included).
    type: dict
  status_path:
    description: With I(start=false), the status file the node's entrypoint keeps (JSON).
    type: path
  ray:
    description: Path of the C(ray) CLI on the worker.
    type: path
    required: true
  gcs_address:
    description: The head's GCS address C(<ip>:<port>).
    type: str
    required: true
  alive_ips:
    description: IPs of the worker nodes the head lists ALIVE (from ray_head).
    type: list
    elements: str
    default: []
  resources:
    description: Custom resources of the worker (C(ray start --resources), as JSON).
    type: dict
    default: {}
  num_gpus:
    description: GPUs the worker offers.
    type: int
    default: 0
  num_cpus:
    description: CPUs the worker offers; empty lets Ray detect them.
    type: str
    default: ""
  extra_args:
    description: Extra C(ray start) arguments.
    type: list
    elements: str
    default: []
  temp_dir:
    description: Ray's temp dir on the worker (holds the secret's fingerprint).
    type: path
    default: /tmp/ray
  secret:
    description: Secret given to the raylet's environment (empty - none).
    type: str
    default: ""
  more_secrets:
    description:
      - More secrets for the raylet's environment, variable name to value (for example
        C(WANDB_API_KEY)), handled like I(secret) - on no command line, in no file; a
        change restarts the raylet. Empty values are ignored.
    type: dict
    default: {}
  secret_env:
    description: Name of the environment variable that carries I(secret).
    type: str
    default: MVP_INTERNAL_TOKEN
  timeout:
    description: Seconds C(ray start) may take (it is killed after that and the module fails).
    type: int
    default: 120
  attempts:
    description: How many times C(ray start) may be tried in all (1 - no retry).
    type: int
    default: 3
  retry_delay:
    description: Seconds of the pause before a retry, times the attempt number, plus a random part of up to this.
    type: float
    default: 5
  route_env:
    description: Start Ray with the route to the head's source address and interface (see above).
    type: bool
    default: true
  socket_ifname:
    description: Interface for C(NCCL_SOCKET_IFNAME)/C(GLOO_SOCKET_IFNAME) instead of the route's (empty - the route's).
    type: str
    default: ""
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Worker | Start Ray and join the head unless already joined
  mvp.ray.ray_worker:
    ray: /opt/mvp/venv/bin/ray
    gcs_address: 172.18.0.2:6379
    alive_ips: [172.18.0.3]
    resources: {worker_node: 100}
    secret: "{{ ray_worker_secret }}"
"""

RETURN = r"""
auth_token_written:
  description: Whether this call wrote (or in check mode would write) the node's token file I(auth_token_path).
  type: bool
  returned: success
node_status:
  description: With I(start=false), the node entrypoint's status file (state, settings_sha256, failed_attempts, ...).
  type: dict
  returned: with start=false
reason:
  description: Why Ray was (or would be) started, or C(joined) when nothing changed.
  type: str
  returned: always
  sample: raylet belongs to 172.18.0.9:6379, not 172.18.0.2:6379
node_ip:
  description: Node IP of the raylet running after the call (empty when none runs).
  type: str
  returned: always
route:
  description: The route to the head - dev, src, via (empty with I(route_env) false).
  type: dict
  returned: always
socket_ifname:
  description: The interface given to NCCL and Gloo (empty with I(route_env) false).
  type: str
  returned: always
start_output:
  description: Standard output and error of C(ray start) when it ran.
  type: str
  returned: when Ray was started
attempts:
  description: How many times C(ray start) ran (0 when Ray was not started).
  type: int
  returned: always
failed_attempts:
  description: One line per failed C(ray start) - attempt number, what happened and Ray's reason.
  type: list
  elements: str
  returned: always
  sample: ["attempt 1: rc=1 - raylet.out: Check failed: ... Timed out waiting for file .../metrics_agent_port_..."]
"""

import hashlib
import json
import os
import subprocess
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_net import head_network
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_proc import find_argv
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import (
    read_json, sha256_file, write_text_if_changed)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_secret_file import NODE_TOKEN_ARGS, write_node_token
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import (
    as_text, check_gcs_address, ray_reason, retry_pause, secret_vars, settings_text, with_ray_on_path,
    worker_start_argv)


def find_raylet():
    """Return the argv (list of str) of the running raylet, or None."""
    return find_argv("raylet")


def flag(argv, name):
    """Return the value of ``--name=value`` (or ``--name value``) in ``argv``, or ''.

    Dashes and underscores in ``name`` are interchangeable: the raylet takes
    ``--node_ip_address`` while ``ray start`` passes ``--gcs-address``.
    """
    names = {name, "--" + name[2:].replace("-", "_"), "--" + name[2:].replace("_", "-")}
    for i, arg in enumerate(argv):
        key, sep, value = arg.partition("=")
        if key in names and sep:
            return value
        if arg in names and i + 1 < len(argv):
            return argv[i + 1]
    return ""


def fingerprint(secret):
    """Return the sha256 hex digest of ``secret``, or '' for an empty secret (format of mvp_secret.sha256)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest() if secret else ""


def secrets_fingerprint(secret, secret_env, more_secrets):
    """Fingerprint of every secret the raylet gets (format of mvp_secret.sha256).

    :param secret: str, the main secret (ray_worker_secret).
    :param secret_env: str, its variable name.
    :param more_secrets: dict variable name -> value (e.g. WANDB_API_KEY); empty
        values are ignored.
    :returns: str, :func:`fingerprint` of *secret* alone when there are no more
        secrets (so an upgrade restarts no raylet), else the sha256 of all of them.
    """
    more = {str(k): str(v) for k, v in (more_secrets or {}).items() if v}
    if not more:
        return fingerprint(secret)
    more[secret_env] = secret or ""
    return fingerprint(json.dumps(more, sort_keys=True))


def decide(raylet_argv, gcs_address, alive_ips, seen_fingerprint, wanted_fingerprint, wanted_node_ip=""):
    """Return (joined, reason) for a worker.

    :param raylet_argv: list of str or None, the raylet's command line.
    :param gcs_address: str, ``ip:port`` of the head's GCS.
    :param alive_ips: list of str, worker IPs the head lists ALIVE.
    :param seen_fingerprint: str, content of mvp_secret.sha256 ('' when missing).
    :param wanted_fingerprint: str, fingerprint of the current secret and raylet environment.
    :param wanted_node_ip: str, the node IP the raylet must have ('' - any).
    """
    if not raylet_argv:
        return False, "no raylet runs"
    gcs = flag(raylet_argv, "--gcs-address")
    if gcs != gcs_address:
        return False, "raylet belongs to %s, not %s" % (gcs or "an unknown head", gcs_address)
    node_ip = flag(raylet_argv, "--node-ip-address")
    if node_ip not in alive_ips:
        return False, "the head does not list %s ALIVE (it restarted or lost this worker)" % (node_ip or "this node")
    if wanted_node_ip and node_ip != wanted_node_ip:
        return False, "the raylet runs as %s, the route to the head leaves from %s" % (node_ip, wanted_node_ip)
    if seen_fingerprint != wanted_fingerprint:
        return False, "the raylet holds another secret or environment (the internal token or the interface changed)"
    return True, "joined"


def wait_started(module):
    """I(start=false): wait until the node's entrypoint runs Ray from the current settings file."""
    params = module.params
    if not params["settings_path"] or not params["status_path"]:
        module.fail_json(msg="start=false needs settings_path and status_path")
    changed = False
    if params["settings"] is not None:
        settings = dict(params["settings"])
        settings["env"] = dict(settings.get("env") or {},
                               **secret_vars(params["secret"], params["secret_env"], params["more_secrets"]))
        try:
            changed = write_text_if_changed(params["settings_path"], settings_text(settings), 0o600,
                                            module.check_mode)
        except OSError as exc:
            module.fail_json(msg="Cannot write the node settings %s: %s" % (params["settings_path"], exc))
    deadline = time.time() + params["timeout"]
    while True:
        wanted = sha256_file(params["settings_path"], missing="")
        status = read_json(params["status_path"])
        if wanted and status.get("settings_sha256") == wanted and status.get("state") == "running":
            module.exit_json(changed=changed, reason="started from new settings" if changed else "joined",
                             node_ip=status.get("node_ip", ""),
                             socket_ifname=status.get("socket_ifname", ""), attempts=status.get("attempt", 0),
                             failed_attempts=status.get("failed_attempts") or [], node_status=status)
        if module.check_mode or time.time() > deadline:
            if module.check_mode:
                module.exit_json(changed=True, reason="the container has not started Ray from these settings",
                                 node_ip="", attempts=0, failed_attempts=[], node_status=status)
            module.fail_json(
                msg="This node's container has not started Ray from its settings within %ds (ray_worker_ready_timeout): "
                    "%s%s; failed starts: %s. See `docker logs` of this node's container and Ray's logs under "
                    "%s/session_latest/logs." % (
                        params["timeout"],
                        "state '%s'" % status.get("state") if status else "no status file %s" % params["status_path"],
                        "" if status.get("settings_sha256") in (wanted, None) else " (from older settings)",
                        "; ".join(status.get("failed_attempts") or []) or "none", params["temp_dir"]),
                reason=status.get("state", ""), node_ip=status.get("node_ip", ""),
                attempts=status.get("attempt", 0), failed_attempts=status.get("failed_attempts") or [],
                node_status=status)
        time.sleep(0.5)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            NODE_TOKEN_ARGS,
            ray=dict(type="path", required=True),
            gcs_address=dict(type="str", required=True),
            alive_ips=dict(type="list", elements="str", default=[]),
            resources=dict(type="dict", default={}),
            num_gpus=dict(type="int", default=0),
            num_cpus=dict(type="str", default=""),
            extra_args=dict(type="list", elements="str", default=[]),
            temp_dir=dict(type="path", default="/tmp/ray"),
            secret=dict(type="str", default="", no_log=True),
            secret_env=dict(type="str", default="MVP_INTERNAL_TOKEN", no_log=False),
            more_secrets=dict(type="dict", default={}, no_log=True),
            timeout=dict(type="int", default=120),
            attempts=dict(type="int", default=3),
            retry_delay=dict(type="float", default=5),
            route_env=dict(type="bool", default=True),
            socket_ifname=dict(type="str", default=""),
            start=dict(type="bool", default=True),
            settings_path=dict(type="path"),
            settings=dict(type="dict", no_log=False),
            status_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    write_node_token(module)
    try:
        check_gcs_address(params["gcs_address"])
    except ValueError as exc:
        module.fail_json(msg="%s." % exc)
    if not params["start"]:
        wait_started(module)
    raylet = find_raylet()
    marker = os.path.join(params["temp_dir"], "mvp_secret.sha256")
    try:
        with open(marker, encoding="ascii") as handle:
            seen = handle.read().strip()
    except OSError:
        seen = ""
    route, ifname, net_env, node_ip_wanted = {}, "", {}, ""
    if params["route_env"]:
        head_ip, _sep, port = params["gcs_address"].rpartition(":")
        try:
            net = head_network(head_ip, int(port or 6379), params["socket_ifname"])
        except RuntimeError as exc:
            module.fail_json(msg="This worker cannot reach the head: %s." % exc)
        route = net["route"]
        if net["problem"]:
            module.fail_json(msg="This worker: %s. Ray and NCCL would advertise an address the other nodes "
                                 "cannot reach. Give the node a route to the head over the cluster network, or set "
                                 "ray_worker_socket_ifname to the interface to use." % net["problem"], route=route)
        # A chosen interface leaves the node IP to Ray; else it is the route's source address.
        ifname, net_env, node_ip_wanted = net["ifname"], net["env"], net["node_ip"]
    wanted = secrets_fingerprint(params["secret"], params["secret_env"], dict(params["more_secrets"], **net_env))
    joined, reason = decide(raylet, params["gcs_address"], params["alive_ips"], seen, wanted, node_ip_wanted)
    node_ip = flag(raylet, "--node-ip-address") if raylet else ""
    if joined or module.check_mode:
        module.exit_json(changed=not joined, reason=reason, node_ip=node_ip, route=route, socket_ifname=ifname,
                         attempts=0, failed_attempts=[])

    if raylet:
        stop = subprocess.run([params["ray"], "stop", "--force"], capture_output=True, text=True, check=False)
        if stop.returncode:
            module.fail_json(msg="`ray stop --force` failed (rc=%d): %s" % (stop.returncode, stop.stderr[-1000:]),
                             reason=reason, node_ip=node_ip)
    os.makedirs(params["temp_dir"], exist_ok=True)
    with open(marker, "w", encoding="ascii") as handle:
        handle.write(wanted)
    env = with_ray_on_path(os.environ, params["ray"])
    for name in [params["secret_env"]] + list(params["more_secrets"]):
        env.pop(name, None)
    env.update(secret_vars(params["secret"], params["secret_env"], params["more_secrets"]))
    env.update(net_env)
    argv = worker_start_argv(params["ray"], params["gcs_address"], params["resources"], params["num_gpus"],
                             params["num_cpus"], node_ip_wanted, params["extra_args"])
    failed = []
    output = ""
    for attempt in range(1, max(1, params["attempts"]) + 1):
        if attempt > 1:
            time.sleep(retry_pause(attempt - 1, params["retry_delay"]))
            subprocess.run([params["ray"], "stop", "--force"], capture_output=True, text=True, check=False)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False,
                                  timeout=params["timeout"])
        except subprocess.TimeoutExpired as exc:
            output = (as_text(exc.stdout) + as_text(exc.stderr)).strip()
            failed.append("attempt %d: did not join %s within %ds (ray_worker_ready_timeout) - %s" % (
                attempt, params["gcs_address"], params["timeout"],
                ray_reason(output, params["temp_dir"]) or "no output"))
            continue
        output = (proc.stdout + proc.stderr).strip()
        if proc.returncode == 0:
            break
        failed.append("attempt %d: rc=%d - %s" % (attempt, proc.returncode,
                                                  ray_reason(output, params["temp_dir"]) or "no output"))
    else:
        module.fail_json(msg="`ray start` on this worker (node IP %s) failed %d times (%s); %s. Ray's logs: "
                             "%s/session_latest/logs on this node. Command: %s"
                         % (node_ip_wanted or node_ip or "unknown", len(failed), reason, "; ".join(failed),
                            params["temp_dir"], " ".join(argv)),
                         reason=reason, node_ip=node_ip, start_output=output[-2000:], attempts=len(failed),
                         failed_attempts=failed)
    raylet = find_raylet()
    module.exit_json(changed=True, reason=reason, node_ip=flag(raylet, "--node-ip-address") if raylet else "",
                     start_output=output, route=route, socket_ifname=ifname, attempts=len(failed) + 1,
                     failed_attempts=failed)


if __name__ == "__main__":
    main()
