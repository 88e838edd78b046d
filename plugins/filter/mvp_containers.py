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
        ``shared_root``, ``shm_size``, ``env`` (dict), ``extra_volumes`` (list of str) and
        optionally ``ipc_mode`` (str, e.g. ``host``; empty: Docker's default) and
        ``ulimits`` (list of docker ``name:soft:hard`` strings, e.g. ``memlock:-1:-1``),
        ``command`` (list of str; default ``["sleep", "infinity"]``: a node whose Ray the playbook starts
        over the connection) and ``revision`` (str, e.g. the checksums of the node entrypoint's files;
        only recorded, so that a new revision changes the plan and its label).
    :returns: list of dicts with name, hostname, image, command, init, shm_size, env,
        networks, volumes, ipc_mode, ulimits and revision when set, and, for nodes with GPUs,
        device_requests ([{"driver": "nvidia", "device_ids": ["0", ...], "capabilities": [["gpu"]]}]).
    :raises ValueError: for an ulimit that is not ``name:soft:hard`` (or ``name:value``).
    """
    plan = []
    for node in nodes:
        node_vars = hostvars[node]
        name = node_vars.get("mvp_container_name") or node
        item = {
            "name": name,
            "hostname": name,
            "image": settings["image"],
            "command": [str(arg) for arg in (settings.get("command") or ["sleep", "infinity"])],
            "init": True,
            "shm_size": settings["shm_size"],
            "env": dict(settings.get("env") or {}),
            "networks": [{"name": settings["network"]}],
            "volumes": (["%s:%s" % (settings["host_shared_dir"], settings["shared_root"])]
                        + list(settings.get("extra_volumes") or [])),
        }
        if settings.get("revision"):
            item["revision"] = str(settings["revision"])
        if settings.get("ipc_mode"):
            item["ipc_mode"] = settings["ipc_mode"]
        ulimits = list(settings.get("ulimits") or [])
        for limit in ulimits:
            parts = str(limit).split(":")
            if len(parts) not in (2, 3) or not parts[0] or not all(p.lstrip("-").isdigit() for p in parts[1:]):
                raise ValueError("containers_ulimits: %r is not name:soft:hard (e.g. memlock:-1:-1, "
                                 "stack:67108864:67108864)" % (limit,))
        if ulimits:
            item["ulimits"] = [str(limit) for limit in ulimits]
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
