# -*- coding: utf-8 -*-
"""The preflight's rules: what ``ray_node_preflight`` found on the nodes, as failure texts.

Each text names the node, what is wrong and the inventory variable (or the action) that fixes
it. The preflight role runs them once, on the controller, over every node's inspection (filter
``mvp.ray.mvp_preflight_problems``): one check task for the whole play instead of one per
node, since at 64 nodes each task costs the controller about 50 ms per host even when it is
skipped (docs/benchmarks.md, "8 to 64 nodes over SSH").
"""

from __future__ import annotations

from ansible.module_utils.common.text.formatters import human_to_bytes
from ansible.module_utils.parsing.convert_bool import boolean

GIB = 1073741824

EXPECT_KEYS = ("shared_root", "require_nfs", "expected_gpus", "min_shm_size", "min_free_gb", "disk_paths", "head",
               "probe_dir", "gpu_workers")


def _gib(value):
    """``value`` bytes as GiB with one decimal (str)."""
    return "%.1f" % (value / GIB)


def node_problems(host, found, expect):
    """The failure texts of one node's inspection.

    :param host: str, the node's inventory hostname.
    :param found: dict, the ``ray_node_preflight`` result of that node (its RETURN keys; ``gpus``
        and the shm/disk figures are judged only where ``gpus`` is present, i.e. on GPU workers).
    :param expect: dict with the keys of ``EXPECT_KEYS``: ``shared_root`` (str, mvp_shared_root),
        ``require_nfs`` (bool), ``expected_gpus`` (int, GPUs per worker), ``min_shm_size`` (str, a
        size such as ``8g``, Ansible's ``human_to_bytes`` format), ``min_free_gb`` (float, GiB),
        ``disk_paths`` (dict variable name -> path), ``head`` (str, the head's hostname),
        ``probe_dir`` (str, where the head wrote its probe file).
    :returns: list of str, empty when the node passes.
    """
    problems = []
    root = expect["shared_root"]
    taken = found.get("ports_taken") or {}
    if taken:
        problems.append("".join("Port %s (%s) is already taken on the head by %s. " % (item["port"], var, item["owner"])
                                for var, item in taken.items())
                        + "Stop that program, or set the variable to a free port.")
    storage = found.get("shared_root") or {}
    if not (storage.get("isdir") and storage.get("writable")):
        problems.append("%s: %s (mvp_shared_root) is %s. Mount the shared storage there (read-write) on every node."
                        % (host, root, "missing" if not storage.get("exists") else "not a writable directory"))
    fstype = storage.get("fstype") or "unknown"
    if boolean(expect["require_nfs"], strict=False) and not fstype.startswith("nfs"):
        problems.append("%s: %s is %s, not NFS (preflight_require_nfs is true). Mount the NFS export there, or set "
                        "preflight_require_nfs=false." % (host, root, fstype))
    if found.get("mismatched_probes"):
        problems.append("%s does not see the head's %s: the probe file the head (%s) just wrote under %s is missing or "
                        "different here. Every node must mount the same shared storage at %s (mvp_shared_root)."
                        % (host, root, expect["head"], expect["probe_dir"], root))
    if "gpus" not in found:
        return problems
    gpus, wanted = int(found["gpus"]), int(expect["expected_gpus"])
    if gpus != wanted:
        problems.append("%s sees %s GPUs (%s), the inventory expects %s (mvp_ray_worker_gpus)."
                        % (host, gpus if gpus >= 0 else "no", found.get("gpu_error") or "nvidia-smi ok", wanted))
    foreign = found.get("gpu_foreign") or []
    if foreign:
        listed = "; ".join("GPU %s pid %s %s (%s MiB)" % (app["gpu"], app["pid"], app["process"], app["used_mib"])
                           for app in foreign)
        problems.append("%s: GPU memory is held by processes that are not Ray's: %s. A job would run out of memory or "
                        "wait: stop them (nvidia-smi shows them) before bringing Ray up here." % (host, listed))
    if int(found.get("shm_bytes") or 0) < human_to_bytes(str(expect["min_shm_size"])):
        problems.append("%s: /dev/shm is %s GiB, below %s (preflight_min_shm_size): Ray's object store and NCCL "
                        "need it. Raise containers_shm_size (containers made here) or the platform's shm size."
                        % (host, _gib(int(found.get("shm_bytes") or 0)), expect["min_shm_size"]))
    free = found.get("free_bytes") or {}
    low = [var for var in expect["disk_paths"] if int(free.get(var, 0)) < float(expect["min_free_gb"]) * GIB]
    if low:
        template = ("%s: %s (%s) has %s GiB free, below %s GiB (preflight_min_free_gb): spilled objects, logs and "
                    "checkpoints fill it. Free space or lower the setting.")
        problems.append(" ".join(template % (host, expect["disk_paths"][var], var, _gib(int(free.get(var, 0))),
                                             expect["min_free_gb"]) for var in low))
    return problems


def cluster_problems(nodes, expect):
    """The failure texts of the whole cluster: every node's (:func:`node_problems`), then what differs between nodes.

    :param nodes: list of ``[host, found]`` pairs in inventory order (``found``: a ``ray_node_preflight``
        result; a skipped or failed task's result, without ``versions``, is left out).
    :param expect: dict, as for :func:`node_problems`, plus ``gpu_workers`` (list of str: the hosts
        whose GPU counts must agree; empty when the workers have no physical GPUs).
    :returns: list of str, empty when the cluster passes.
    """
    nodes = [(host, found) for host, found in nodes if isinstance(found, dict) and "versions" in found]
    problems = [text for host, found in nodes for text in node_problems(host, found, expect)]
    versions = [(host, found["versions"]) for host, found in nodes if found.get("versions")]
    if len({version for _host, version in versions}) > 1:
        problems.append("Python/Ray versions differ across the Ray nodes: %s. Install the same Python and Ray on every "
                        "node (mvp_ray_python names the interpreter)."
                        % "; ".join("%s has %s" % pair for pair in versions))
    gpu_workers = set(expect.get("gpu_workers") or [])
    counts = [(host, found["gpus"]) for host, found in nodes if host in gpu_workers and "gpus" in found]
    if len({count for _host, count in counts}) > 1:
        problems.append("The GPU workers offer different GPU counts (%s): verl puts trainer.n_gpus_per_node GPUs on "
                        "each of trainer.nnodes nodes, so the smallest one decides. Give every worker the same GPUs "
                        "(mvp_ray_worker_gpus, mvp_container_gpus)." % ", ".join("%s: %s" % pair for pair in counts))
    return problems
