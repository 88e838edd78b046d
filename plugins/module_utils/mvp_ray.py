# -*- coding: utf-8 -*-
"""Helpers shared by the project's Ray modules (ray_cluster_info, ray_job).

They wrap Ray's public Python APIs (``ray.util.state`` for the node table,
``ray.job_submission.JobSubmissionClient`` for jobs) so the modules never parse
CLI output. Ray is imported lazily: the modules report a clear error when the
interpreter that runs them (``ansible_python_interpreter`` on the head) has no
Ray installed.
"""

from __future__ import annotations

import os

TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "STOPPED")


def import_ray(module):
    """Import ray's job and state APIs or fail the module with a clear message.

    :param module: the AnsibleModule.
    :returns: tuple (JobSubmissionClient class, ray.util.state module).
    """
    try:
        from ray.job_submission import JobSubmissionClient
        import ray.util.state as state
    except ImportError as exc:  # pragma: no cover - depends on the node image
        module.fail_json(
            msg="Ray is not importable by %s (%s); set ansible_python_interpreter "
            "to the Python that has ray installed (mvp_ray_python)." % (os.sys.executable, exc)
        )
    return JobSubmissionClient, state


def job_info_or_none(client, submission_id):
    """Return Ray's JobDetails for ``submission_id``, or None when Ray has no such job.

    :param client: a ``JobSubmissionClient``.
    :param submission_id: str.
    :raises RuntimeError: what ``get_job_info`` raises for anything but an unknown id
        (Ray reports that one as a RuntimeError saying "does not exist", or an HTTP 404).
    """
    try:
        return client.get_job_info(submission_id)
    except RuntimeError as exc:
        if "does not exist" in str(exc) or "404" in str(exc):
            return None
        raise


def auth_headers(token):
    """Return HTTP headers for Ray token authentication.

    :param token: str or None, the Ray auth token (Ray 2.52+ ``RAY_AUTH_MODE=token``).
    :returns: dict, ``{"Authorization": "Bearer <token>"}`` or ``{}``.
    """
    return {"Authorization": "Bearer %s" % token} if token else {}


def node_to_dict(node):
    """Convert a ``ray.util.state.common.NodeState`` to a plain dict.

    :param node: NodeState (or any object with the same attributes, or a dict).
    :returns: dict with node_id, node_ip, node_name, is_head_node, state,
        resources_total (dict of resource name -> float).
    """
    get = node.get if isinstance(node, dict) else (lambda k, d=None: getattr(node, k, d))
    return {
        "node_id": get("node_id"),
        "node_ip": get("node_ip"),
        "node_name": get("node_name"),
        "is_head_node": bool(get("is_head_node")),
        "state": get("state"),
        "resources_total": dict(get("resources_total") or {}),
    }


def list_nodes(state_module, address, timeout=30):
    """List the cluster's nodes through Ray's state API.

    :param state_module: ``ray.util.state``.
    :param address: str, dashboard URL such as ``http://127.0.0.1:8265``.
    :param timeout: int, seconds for the state API call.
    :returns: list of dicts (see node_to_dict).
    :raises: whatever ray.util.state raises when the dashboard is unreachable.
    """
    nodes = state_module.list_nodes(address=address, timeout=timeout, limit=10000,
                                    raise_on_missing_output=False)
    return [node_to_dict(n) for n in nodes]


def summarize(nodes, resource):
    """Summarize ALIVE nodes: the head, the workers carrying ``resource``, GPUs.

    :param nodes: list of node dicts (module_utils.mvp_ray.node_to_dict).
    :param resource: str, worker marker resource name.
    :returns: dict with head, alive_workers, worker_ips, total_gpus.
    """
    alive = [n for n in nodes if n["state"] == "ALIVE"]
    heads = [n for n in alive if n["is_head_node"]]
    workers = [n for n in alive if n["resources_total"].get(resource, 0) > 0]
    return {
        "head": heads[0] if heads else None,
        "alive_workers": workers,
        "worker_ips": sorted(n["node_ip"] for n in workers),
        "total_gpus": float(sum(n["resources_total"].get("GPU", 0) for n in alive)),
    }


def node_ip_for(nodes, node_id):
    """Return the IP of the node whose id is ``node_id`` or None.

    :param nodes: list of node dicts (see node_to_dict).
    :param node_id: str, hex Ray node id (``JobDetails.driver_node_id``).
    """
    for node in nodes:
        if node_id and node["node_id"] == node_id:
            return node["node_ip"]
    return None
