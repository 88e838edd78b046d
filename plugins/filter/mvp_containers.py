# -*- coding: utf-8 -*-
"""Jinja2 filter that plans the Ray node containers of a docker host.

The plan is the exact parameter set handed to ``community.docker.docker_container``
for each node, so it can be unit-tested (GPU device requests of the dev
inventory) without a GPU machine.
"""

from __future__ import annotations


def mvp_container_plan(nodes, hostvars, settings):
    """Return one docker_container parameter dict per Ray node.

    :param nodes: list of inventory hostnames (the ray_nodes group).
    :param hostvars: mapping hostname -> its variables; a node may set
        ``mvp_container_name`` (default: the hostname) and ``mvp_container_gpus``
        (list of GPU indexes, passed as an NVIDIA device request).
    :param settings: dict with ``image``, ``network``, ``host_shared_dir``,
        ``shared_root``, ``shm_size``, ``env`` (dict) and ``extra_volumes`` (list of str).
    :returns: list of dicts with name, hostname, image, command, init, shm_size, env,
        networks, volumes and, for nodes with GPUs, device_requests
        ([{"driver": "nvidia", "device_ids": ["0", ...], "capabilities": [["gpu"]]}]).
    """
    plan = []
    for node in nodes:
        node_vars = hostvars[node]
        name = node_vars.get("mvp_container_name") or node
        item = {
            "name": name,
            "hostname": name,
            "image": settings["image"],
            "command": ["sleep", "infinity"],
            "init": True,
            "shm_size": settings["shm_size"],
            "env": dict(settings.get("env") or {}),
            "networks": [{"name": settings["network"]}],
            "volumes": ["%s:%s" % (settings["host_shared_dir"], settings["shared_root"])]
                       + list(settings.get("extra_volumes") or []),
        }
        gpus = node_vars.get("mvp_container_gpus") or []
        if gpus:
            item["device_requests"] = [{"driver": "nvidia", "device_ids": [str(g) for g in gpus],
                                        "capabilities": [["gpu"]]}]
        plan.append(item)
    return plan


class FilterModule(object):
    """Container planning filter: mvp_container_plan."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_container_plan": mvp_container_plan}
