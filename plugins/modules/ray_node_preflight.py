#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read what a Ray node offers (shared storage, Python/Ray versions, GPUs) in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_node_preflight
short_description: Inspect a Ray node before Ray starts on it, in one call
description:
  - Looks at the shared storage (exists, directory, writable, filesystem type from
    C(/proc/self/mountinfo)), reads the Python and Ray versions of I(ray_python)
    without importing Ray (the package is located with C(importlib.util.find_spec)
    and its C(_version.py) or C(__init__.py) is parsed with C(ast)), reads the size of
    C(/dev/shm) and the free space of I(disk_paths), and, when I(count_gpus) is true,
    lists the GPUs and the processes holding their memory with nvidia-smi's CSV queries
    (module_utils C(mvp_gpu)); processes of Ray (C(raylet), C(ray::*) workers, the
    C(ray) package) are not foreign.
  - With I(probe_dir), I(probe_name) and I(probe), writes the file
    C(<probe_dir>/<probe_name>) holding I(probe) (write then rename; the head does this),
    so that the other nodes can then check that they see the same filesystem (see
    I(expect_probes)).
  - With I(expect_probes), reads C(<probe_dir>/<name>) for every name and reports
    which ones are missing or hold another content (C(mismatched_probes)).
  - With I(read_files), returns the content of each of those files as C(ansible.builtin.slurp) would
    (the head reads the interconnect baseline and the latest measurement this way, in the same call).
  - Never fails on what it finds; the preflight role turns the facts into messages
    that name the inventory variable to fix. Fails only on bad module arguments.
  - Check mode reads but writes no probe.
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.attributes.platform_linux
attributes:
  check_mode:
    support: partial
    details:
      - Reads everything, but writes no probe file (I(probe_name)), so the other nodes' read-back (I(expect_probes))
        names it as missing.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state (its probe file is a scratch marker; C(changed) is always false).
options:
  shared_root:
    description: Shared storage path seen by the node (mvp_shared_root).
    type: path
    required: true
  ray_python:
    description: Python interpreter that runs Ray on this node (mvp_ray_python).
    type: path
    required: true
  read_versions:
    description: Read the Python and Ray versions of I(ray_python) (false - C(python_version) and C(ray_version) are empty).
    type: bool
    default: true
  count_gpus:
    description: Query nvidia-smi for the GPUs (C(gpus), C(gpu_list)) and the non-Ray processes holding their memory (C(gpu_foreign)).
    type: bool
    default: false
  disk_paths:
    description: Mapping variable name -> path whose filesystem's free space is returned in C(free_bytes) (the nearest existing parent is measured).
    type: dict
    default: {}
  probe_dir:
    description: Folder under the shared storage for probe files (created when missing).
    type: path
  probe_name:
    description: File name of this node's probe (normally the inventory hostname).
    type: str
  probe:
    description: Content written to this node's probe file.
    type: str
  expect_probes:
    description: Mapping probe name -> expected content to read back from I(probe_dir).
    type: dict
    default: {}
  read_files:
    description: Files to read and return in C(files) (small ones; a missing or unreadable file is no failure).
    type: list
    elements: path
    default: []
  ports:
    description:
      - Mapping variable name -> TCP port that Ray needs on this node (the head's
        mvp_ray_gcs_port and mvp_ray_dashboard_port). A port held by a process that is
        not Ray's (Ray's are C(gcs_server), C(raylet) and Python processes running files of
        the C(ray) package) is reported in C(ports_taken), and then no probe file is written.
    type: dict
    default: {}
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Preflight | Inspect the node and write its probe file
  mvp.ray.ray_node_preflight:
    shared_root: /private
    ray_python: /opt/mvp/venv/bin/python
    probe_dir: /private/ray/preflight
    probe_name: "{{ inventory_hostname }}"
    probe: "{{ run_token }}"
  register: preflight_node

- name: Preflight | On the head, read every node's probe back
  mvp.ray.ray_node_preflight:
    shared_root: /private
    ray_python: /opt/mvp/venv/bin/python
    probe_dir: /private/ray/preflight
    expect_probes: {mvp-ray-worker-0: "{{ run_token }}"}
"""

RETURN = r"""
shared_root:
  description: What the node sees at I(shared_root).
  type: dict
  returned: always
  contains:
    exists: {description: the path exists, type: bool}
    isdir: {description: it is a directory, type: bool}
    writable: {description: the module's user may write into it (os.access W_OK), type: bool}
    fstype: {description: "filesystem type of the mount holding it (e.g. nfs4, ext4, overlay)", type: str}
python_version:
  description: Version of I(ray_python) (C(sys.version), first word).
  type: str
  returned: always
ray_version:
  description: Ray's version as installed for I(ray_python), or the reason it could not be read.
  type: str
  returned: always
versions:
  description: C("python <python_version>, ray <ray_version>") - compared across nodes.
  type: str
  returned: always
gpus:
  description: GPUs listed by nvidia-smi, or -1 when it failed (see gpu_error).
  type: int
  returned: when count_gpus is true
gpu_list:
  description: One dict per GPU - index, uuid, name, used_mib, total_mib (MiB; null when nvidia-smi prints N/A).
  type: list
  elements: dict
  returned: when count_gpus is true
gpu_foreign:
  description: Processes that are not Ray's holding GPU memory - gpu (index), pid, process, used_mib.
  type: list
  elements: dict
  returned: when count_gpus is true
shm_bytes:
  description: Size of the C(/dev/shm) filesystem in bytes (0 when there is none).
  type: int
  returned: always
free_bytes:
  description: Variable name from I(disk_paths) -> free bytes for unprivileged users on that path's filesystem.
  type: dict
  returned: always
gpu_error:
  description: nvidia-smi's error output when it failed.
  type: str
  returned: when count_gpus is true
ports_taken:
  description: Variable name -> C({port, owner}) for the I(ports) another program listens on.
  type: dict
  returned: always
files:
  description:
    - Path from I(read_files) -> what C(ansible.builtin.slurp) returns for it (C(content) base64, C(encoding),
      C(source)), or C({failed, msg}) when it is missing or cannot be read.
  type: dict
  returned: always
mismatched_probes:
  description: Names from I(expect_probes) whose file is missing or holds another content.
  type: list
  elements: str
  returned: always
"""

import base64
import os
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_gpu import read_gpus
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_proc import describe, listening_pids

# Run by ray_python: prints the Python version and Ray's version without importing Ray
# (importing Ray takes about a second of CPU per node).
VERSION_PROBE = r"""
import ast, importlib.util, os, sys
def ray_version():
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.origin:
        return "not installed"
    folder = os.path.dirname(spec.origin)
    for name, key in (("_version.py", "version"), ("__init__.py", "__version__")):
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == key for t in node.targets):
                try:
                    return str(ast.literal_eval(node.value))
                except ValueError:
                    pass
    return "unknown"
print(sys.version.split()[0], ray_version())
"""


def mount_fstype(path, mountinfo="/proc/self/mountinfo"):
    """Return the filesystem type of the mount that holds ``path``.

    :param path: str, an existing path.
    :param mountinfo: str, the mountinfo file (format: proc(5), fields split by `` - ``).
    :returns: str, e.g. ``nfs4`` or ``ext4``; ``unknown`` when mountinfo cannot be read.
    """
    real = os.path.realpath(path)
    best, fstype = "", "unknown"
    try:
        with open(mountinfo, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return fstype
    for line in lines:
        head, _sep, tail = line.partition(" - ")
        fields = head.split()
        if len(fields) < 5 or not tail:
            continue
        mount_point = fields[4].replace("\\040", " ")
        inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, fstype = mount_point, tail.split()[0]
    return fstype


def read_versions(ray_python):
    """Return (python_version, ray_version) of ``ray_python``; errors become the version text."""
    try:
        proc = subprocess.run([ray_python, "-c", VERSION_PROBE], capture_output=True, text=True, timeout=60,
                              check=False)
    except OSError as exc:
        return "not runnable (%s)" % exc, "unknown"
    words = proc.stdout.split()
    if proc.returncode or len(words) < 2:
        return "failed (%s)" % (proc.stderr.strip().splitlines() or ["rc=%d" % proc.returncode])[-1], "unknown"
    return words[0], " ".join(words[1:])


def fs_size(path, free=False):
    """Return the size (or, with ``free``, the space free for unprivileged users) in bytes of the
    filesystem holding ``path`` or its nearest existing parent; 0 when none can be read."""
    while path and not os.path.exists(path):
        parent = os.path.dirname(path.rstrip("/"))
        path = parent if parent != path else ""
    try:
        stat = os.statvfs(path or "/")
    except OSError:
        return 0
    return (stat.f_bavail if free else stat.f_blocks) * stat.f_frsize


def foreign_ports(ports):
    """Return {variable: {port, owner}} for the ports a non-Ray process listens on."""
    taken = {}
    for var, port in sorted(ports.items()):
        for pid in listening_pids(int(port)):
            is_ray, text = describe(pid)
            if not is_ray:
                taken[var] = {"port": int(port), "owner": text}
                break
    return taken


def read_file(path):
    """Return ``path`` as ``ansible.builtin.slurp`` does (``content`` base64, ``encoding``, ``source``),
    or ``{"failed": True, "msg": ...}`` when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return {"failed": True, "msg": "cannot read %s: %s" % (path, exc.strerror or exc), "source": path}
    return {"content": base64.b64encode(data).decode("ascii"), "encoding": "base64", "source": path}


def write_probe(folder, name, content):
    """Write ``content`` and a newline to ``folder/name`` (atomically; the folder is created when missing)."""
    write_text_atomic(os.path.join(folder, name), content + "\n")


def mismatched(folder, expected):
    """Return the sorted names whose probe file in ``folder`` is missing or differs from ``expected``."""
    bad = []
    for name, content in expected.items():
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                ok = handle.read().strip() == str(content)
        except OSError:
            ok = False
        if not ok:
            bad.append(name)
    return sorted(bad)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            shared_root=dict(type="path", required=True),
            ray_python=dict(type="path", required=True),
            read_versions=dict(type="bool", default=True),
            count_gpus=dict(type="bool", default=False),
            disk_paths=dict(type="dict", default={}),
            probe_dir=dict(type="path"),
            probe_name=dict(type="str"),
            probe=dict(type="str", no_log=False),
            expect_probes=dict(type="dict", default={}),
            ports=dict(type="dict", default={}),
            read_files=dict(type="list", elements="path", default=[]),
        ),
        required_together=[("probe_name", "probe")],
        supports_check_mode=True,
    )
    params = module.params
    root = params["shared_root"]
    isdir = os.path.isdir(root)
    storage = {"exists": os.path.exists(root), "isdir": isdir, "writable": isdir and os.access(root, os.W_OK),
               "fstype": mount_fstype(root) if os.path.exists(root) else ""}
    python_version, ray_version = read_versions(params["ray_python"]) if params["read_versions"] else ("", "")
    result = dict(changed=False, shared_root=storage, python_version=python_version, ray_version=ray_version,
                  versions="python %s, ray %s" % (python_version, ray_version), mismatched_probes=[],
                  ports_taken=foreign_ports(params["ports"]),
                  shm_bytes=fs_size("/dev/shm") if os.path.isdir("/dev/shm") else 0,
                  free_bytes={name: fs_size(str(path), free=True) for name, path in params["disk_paths"].items()},
                  files={path: read_file(path) for path in params["read_files"]})
    if params["count_gpus"]:
        result.update(read_gpus(describe))
    if params["probe_name"] and storage["writable"] and not result["ports_taken"] and not module.check_mode:
        if not params["probe_dir"]:
            module.fail_json(msg="probe_dir is required with probe_name", **result)
        try:
            write_probe(params["probe_dir"], params["probe_name"], params["probe"])
        except OSError as exc:
            storage["writable"] = False
            result["probe_error"] = str(exc)
    if params["expect_probes"]:
        if not params["probe_dir"]:
            module.fail_json(msg="probe_dir is required with expect_probes", **result)
        result["mismatched_probes"] = mismatched(params["probe_dir"], params["expect_probes"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
