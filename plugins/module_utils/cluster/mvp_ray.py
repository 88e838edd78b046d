# -*- coding: utf-8 -*-
"""Helpers shared by the project's Ray modules (ray_cluster_info, ray_head, ray_job, ray_job_info,
ray_job_record).

They talk to Ray's Jobs API and State API on the dashboard over HTTP (module_utils.cluster.mvp_ray_rest:
the methods of ``JobSubmissionClient`` and ``ray.util.state`` with the same names), so the modules
never parse CLI output and never pay ``import ray`` (about 0.85 s of CPU per call).
"""

from __future__ import annotations

import json
import os

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_rest import (
    JobsClient, RayUnreachable, StateClient)

TERMINAL_STATUSES = ("SUCCEEDED", "FAILED", "STOPPED")


def clients(address, token=None, environ=None):
    """Return the Jobs and State API clients of the dashboard at ``address``; nothing is contacted yet.

    :param address: str, dashboard URL such as ``http://127.0.0.1:8265``.
    :param token: str or None, the Ray auth token (see request_headers).
    :param environ: mapping read for Ray's own token lookup (``os.environ`` by default).
    :returns: tuple (mvp_ray_rest.JobsClient, mvp_ray_rest.StateClient).
    """
    headers = request_headers(token, environ)
    return JobsClient(address, headers=headers), StateClient(address, headers=headers)


def job_info_or_none(client, submission_id):
    """Return Ray's JobDetails for ``submission_id``, or None when Ray has no such job.

    :param client: a ``JobsClient`` (or Ray's ``JobSubmissionClient``).
    :param submission_id: str.
    :raises RuntimeError: what ``get_job_info`` raises for anything but an unknown id
        (Ray reports that one as an HTTP 404 saying "does not exist").
    """
    try:
        return client.get_job_info(submission_id)
    except RuntimeError as exc:
        if "does not exist" in str(exc) or "404" in str(exc):
            return None
        raise


JOB_FIELDS = ("submission_id", "status", "start_time", "end_time", "driver_node_id",
              "driver_exit_code", "message", "entrypoint", "metadata")


def status_name(status):
    """Return Ray's job status as its plain name: ``JobStatus.RUNNING`` or ``RUNNING`` -> ``RUNNING``.

    :param status: a ``ray.job_submission.JobStatus``, its str, or None (gives "").
    """
    return str(status or "").rsplit(".", maxsplit=1)[-1]


def job_row(details):
    """Reduce a Ray JobDetails to the JOB_FIELDS, with the status as a plain string.

    :param details: dict of Ray's JobDetails fields (``JobsClient.list_jobs``/``get_job_info``), or
        Ray's JobDetails object.
    :returns: dict; ``start_time``/``end_time`` in milliseconds since the epoch (Ray's unit).
    """
    get = _getter(details)
    row = {field: get(field) for field in JOB_FIELDS}
    row["status"] = status_name(row["status"])
    return row


CONNECTION_ARGS = dict(
    address=dict(type="str", required=True),
    auth_token=dict(type="str", no_log=True),
)
"""argument_spec entries of the doc fragment mvp.ray.connection (address, auth_token)."""


def request_headers(token=None, environ=None):
    """Return the HTTP headers that authenticate a request to the dashboard, as Ray's clients send them.

    :param token: str or None; a token given wins. Without one, Ray's own lookup when
        ``RAY_AUTH_MODE=token``: ``RAY_AUTH_TOKEN``, then the file ``RAY_AUTH_TOKEN_PATH``, then
        ``~/.ray/auth_token`` (the roles set ``RAY_AUTH_MODE`` and ``RAY_AUTH_TOKEN_PATH`` in the
        task's environment, mvp_ray_auth_env).
    :param environ: mapping to read (``os.environ`` by default; tests pass a dict).
    :returns: dict, ``{"Authorization": "Bearer <token>"}`` or ``{}``.
    :raises OSError: never; an unreadable token file gives no header (Ray then answers 401,
        which mvp_ray_rest.RayHttpError explains).
    """
    environ = os.environ if environ is None else environ
    if not token and str(environ.get("RAY_AUTH_MODE", "")).lower() == "token":
        token = environ.get("RAY_AUTH_TOKEN")
        for path in ([] if token else [environ.get("RAY_AUTH_TOKEN_PATH"), os.path.expanduser("~/.ray/auth_token")]):
            try:
                with open(path) as handle:
                    token = handle.read().strip()
                break
            except (TypeError, OSError):
                continue
    return auth_headers(token)


def auth_headers(token):
    """Return HTTP headers for Ray token authentication.

    :param token: str or None, the Ray auth token (Ray 2.52+ ``RAY_AUTH_MODE=token``).
    :returns: dict, ``{"Authorization": "Bearer <token>"}`` or ``{}``.
    """
    return {"Authorization": "Bearer %s" % token} if token else {}


def _getter(obj):
    """Return ``get(key, default=None)`` over a dict or an object's attributes (Ray's state dataclasses)."""
    return obj.get if isinstance(obj, dict) else (lambda k, d=None: getattr(obj, k, d))


def schedulable_resources(resources):
    """Drop the resources no job asks for (``node:<ip>`` markers, memory, object store) from a mapping.

    :param resources: dict resource name -> amount (a node's ``resources_total``).
    :returns: dict, the same without those keys.
    """
    return {k: v for k, v in resources.items()
            if not k.startswith("node:") and k not in ("memory", "object_store_memory")}


def alive_offers(nodes):
    """What each ALIVE node offers a job: node IP -> :func:`schedulable_resources` of its total (dict).

    :param nodes: list of node dicts (:func:`node_to_dict`).
    """
    return {n["node_ip"]: schedulable_resources(n["resources_total"]) for n in nodes if n["state"] == "ALIVE"}


def cluster_totals(nodes):
    """The ALIVE nodes' schedulable resources summed: Ray's ``cluster_resources()`` as a job asks it (dict name -> float).

    :param nodes: list of node dicts (:func:`node_to_dict`).
    """
    totals = {}
    for node in nodes:
        if node["state"] == "ALIVE":
            for key, value in schedulable_resources(node["resources_total"]).items():
                totals[key] = totals.get(key, 0.0) + float(value)
    return totals


def node_to_dict(node):
    """Convert a node row (a dict from the State API, or Ray's ``NodeState``) to a plain dict.

    :param node: NodeState (or any object with the same attributes, or a dict).
    :returns: dict with node_id, node_ip, node_name, is_head_node, state,
        resources_total (dict of resource name -> float), state_message and end_time_ms
        (why and when a DEAD node died; None unless listed with detail).
    """
    get = _getter(node)
    return {
        "node_id": get("node_id"),
        "node_ip": get("node_ip"),
        "node_name": get("node_name"),
        "is_head_node": bool(get("is_head_node")),
        "state": get("state"),
        "resources_total": dict(get("resources_total") or {}),
        "state_message": get("state_message"),
        "end_time_ms": get("end_time_ms"),
    }


def list_nodes(state_module, address, timeout=30, detail=False):
    """List the cluster's nodes through Ray's state API.

    :param state_module: mvp_ray_rest.StateClient (or ``ray.util.state``, same functions).
    :param address: str, dashboard URL such as ``http://127.0.0.1:8265``.
    :param timeout: int, seconds for the state API call.
    :param detail: bool, also read why and when DEAD nodes died.
    :returns: list of dicts (see node_to_dict).
    :raises mvp_ray_rest.RayUnreachable: the dashboard does not answer; RuntimeError: it refused the list.
    """
    nodes = state_module.list_nodes(address=address, timeout=timeout, limit=10000, detail=detail,
                                    raise_on_missing_output=False)
    return [node_to_dict(n) for n in nodes]


def list_job_actors(state_module, address, job_id, nodes, timeout=30):
    """The actors of one Ray job with their state, pid, node IP and death cause (state API).

    :param job_id: str, Ray's job id (hex, ``JobDetails.job_id``).
    :param nodes: list of node dicts (node_to_dict) to name each actor's node IP.
    :returns: list of dicts (actor_id, class_name, state, pid, node_id, node_ip, death_cause).
    """
    ips = {n["node_id"]: n["node_ip"] for n in nodes}
    actors = state_module.list_actors(address=address, filters=[("job_id", "=", job_id)], detail=True,
                                      timeout=timeout, limit=10000, raise_on_missing_output=False)
    out = []
    for actor in actors:
        get = _getter(actor)
        out.append({"actor_id": get("actor_id"), "class_name": get("class_name"), "state": get("state"),
                    "pid": get("pid"), "node_id": get("node_id"), "node_ip": ips.get(get("node_id")),
                    "death_cause": json.loads(json.dumps(get("death_cause"), default=str))})
    return out


def summarize(nodes, resource):
    """Summarize ALIVE nodes: the head, the workers carrying ``resource``, GPUs.

    :param nodes: list of node dicts (module_utils.cluster.mvp_ray.node_to_dict).
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


def bundle_shapes(group):
    """Describe a placement group's bundles, e.g. ``2 x {"CPU": 10, "GPU": 1} (STRICT_PACK)``.

    :param group: dict from :func:`list_placement_groups`.
    :returns: str; identical bundles are counted, distinct ones listed in order.
    """
    import json

    shapes = []
    for bundle in group.get("bundles") or []:
        unit = bundle.get("unit_resources", bundle) if isinstance(bundle, dict) else {}
        text = json.dumps({k: unit[k] for k in sorted(unit)})
        if shapes and shapes[-1][1] == text:
            shapes[-1][0] += 1
        else:
            shapes.append([1, text])
    body = ", ".join("%d x %s" % (count, text) for count, text in shapes) or "no bundles"
    return body + (" (%s)" % group["strategy"] if group.get("strategy") else "")


def stalled_placement_groups(groups, job_id, now, timeout, nodes, first_seen=None):
    """Pick the PENDING placement groups of one job that no node can ever hold and that waited past ``timeout``.

    A group that fits the cluster but waits for resources other jobs hold is never stalled
    (:func:`is_infeasible`); it is reported as waiting (:func:`waiting_message`).

    :param groups: list of dicts from :func:`list_placement_groups` (or the PENDING ones only).
    :param job_id: str, the job's hex Ray job id (``JobDetails.job_id``); None gives [].
    :param now: float, current wall-clock time in seconds.
    :param timeout: float, seconds an infeasible placement group may stay PENDING (a node that
        offers the shape may still join, e.g. a lost worker coming back).
    :param nodes: list of node dicts (:func:`node_to_dict`), what the cluster offers.
    :param first_seen: dict placement_group_id -> seconds, updated in place: when
        Ray's stats carry no ``creation_request_received_ns``, the age counts
        from the first time this function saw the group.
    :returns: list of (group, age_seconds) pairs, oldest first.
    """
    return [(group, age) for group, age in pending_groups(groups, job_id, now, first_seen)
            if age > timeout and is_infeasible(group, nodes)]


def list_placement_groups(state_module, address, timeout=30):
    """List every placement group Ray knows (all states: PENDING, CREATED, REMOVED, RESCHEDULING).

    :param state_module: mvp_ray_rest.StateClient (or ``ray.util.state``, same functions).
    :param address: str, dashboard URL such as ``http://127.0.0.1:8265``.
    :param timeout: int, seconds for the state API call.
    :returns: list of dicts with placement_group_id, name, creator_job_id (hex), state,
        bundles (list of {"bundle_id", "node_id", "unit_resources"}), strategy and stats
        (Ray's PlacementGroupStats as a dict: among others ``creation_request_received_ns``,
        wall clock in nanoseconds, and ``scheduling_state``: QUEUED, REMOVED,
        SCHEDULING_STARTED, NO_RESOURCES, INFEASIBLE, FAILED_TO_COMMIT_RESOURCES or FINISHED).
    :raises mvp_ray_rest.RayUnreachable: the dashboard does not answer; RuntimeError: it refused the list.
    """
    groups = state_module.list_placement_groups(address=address, detail=True, timeout=timeout, limit=10000,
                                                raise_on_missing_output=False)
    result = []
    for group in groups:
        get = _getter(group)
        result.append({
            "placement_group_id": get("placement_group_id"),
            "name": get("name") or "",
            "creator_job_id": get("creator_job_id"),
            "state": get("state"),
            "bundles": list(get("bundles") or []),
            "strategy": get("strategy") or get("topology_strategy") or "",
            "stats": dict(get("stats") or {}),
        })
    return result


def _units(group):
    """The resource dicts of a group's bundles (``unit_resources``), zero amounts dropped."""
    units = []
    for bundle in group.get("bundles") or []:
        unit = bundle.get("unit_resources", bundle) if isinstance(bundle, dict) else {}
        units.append({k: float(v) for k, v in unit.items() if v})
    return units


def _holds(offer, unit):
    """Whether a resource mapping ``offer`` holds ``unit`` (every amount at least as large)."""
    return all(offer.get(k, 0.0) + 1e-9 >= v for k, v in unit.items())


def never_fits_reason(group, nodes):
    """Why no ALIVE node could ever hold the group, judged from the nodes' total resources, or None.

    Only conditions that are certain: a bundle bigger than every node, a STRICT_PACK group bigger
    than every node, a STRICT_SPREAD group with more bundles than nodes able to hold one, or a group
    bigger than the whole cluster. A shape that passes may still be infeasible (Ray then says
    ``INFEASIBLE``); what other jobs use right now is never counted.

    :param group: dict from :func:`list_placement_groups`.
    :param nodes: list of node dicts (:func:`node_to_dict`); only ALIVE ones count.
    :returns: str or None.
    """
    offers = [schedulable_resources(n["resources_total"]) for n in nodes if n["state"] == "ALIVE"]
    units = _units(group)
    if not units:
        return None
    strategy = group.get("strategy") or ""
    for unit in units:
        if not any(_holds(offer, unit) for offer in offers):
            return "bundle %s is bigger than every ALIVE node" % json.dumps(unit, sort_keys=True)
    needed = {}
    for unit in units:
        for key, value in unit.items():
            needed[key] = needed.get(key, 0.0) + value
    if strategy == "STRICT_PACK" and not any(_holds(offer, needed) for offer in offers):
        return "STRICT_PACK needs %s on one node" % json.dumps(needed, sort_keys=True)
    if strategy == "STRICT_SPREAD":
        able = sum(1 for offer in offers if any(_holds(offer, unit) for unit in units))
        if able < len(units):
            return "STRICT_SPREAD needs %d nodes, %d can hold a bundle" % (len(units), able)
    cluster = cluster_totals(nodes)
    if not _holds(cluster, needed):
        return "the group needs %s, the cluster has %s in total" % (
            json.dumps(needed, sort_keys=True), json.dumps(cluster, sort_keys=True))
    return None


def is_infeasible(group, nodes):
    """Whether a PENDING group can never be placed on these nodes (not merely busy).

    Ray's ``stats.scheduling_state`` decides when it has one: ``INFEASIBLE`` (the GCS found no node
    whose total resources hold it) is infeasible, ``NO_RESOURCES`` (it fits, the resources are in
    use) is not. Any other state (``QUEUED``, ``SCHEDULING_STARTED``, none) falls back on
    :func:`never_fits_reason`.

    :param group: dict from :func:`list_placement_groups`.
    :param nodes: list of node dicts (:func:`node_to_dict`).
    :returns: bool.
    """
    state = (group.get("stats") or {}).get("scheduling_state")
    if state == "INFEASIBLE":
        return True
    if state == "NO_RESOURCES":
        return False
    return never_fits_reason(group, nodes) is not None


def pending_groups(groups, job_id, now, first_seen=None):
    """The PENDING placement groups of one job with their age.

    :param groups: list of dicts from :func:`list_placement_groups`.
    :param job_id: str, the job's hex Ray job id; None gives [].
    :param now: float, wall-clock seconds.
    :param first_seen: dict placement_group_id -> seconds, updated in place: without Ray's
        ``creation_request_received_ns`` the age counts from the first time a group was seen.
    :returns: list of (group, age_seconds) pairs, oldest first.
    """
    if not job_id:
        return []
    first_seen = {} if first_seen is None else first_seen
    out = []
    for group in groups:
        if group.get("creator_job_id") != job_id or group.get("state") != "PENDING":
            continue
        created_ns = (group.get("stats") or {}).get("creation_request_received_ns")
        if created_ns:
            age = now - float(created_ns) / 1e9
        else:
            age = now - first_seen.setdefault(group["placement_group_id"], now)
        out.append((group, age))
    return sorted(out, key=lambda pair: -pair[1])


def resource_holders(groups, jobs, job_id):
    """The other jobs whose placed (CREATED) placement groups hold resources now.

    :param groups: list of dicts from :func:`list_placement_groups`.
    :param jobs: list of job rows (:func:`job_row`, with ``job_id``) to name each creator by its
        submission id; a creator not among them is named by its Ray job id.
    :param job_id: str, the waiting job's Ray job id (its own groups are left out).
    :returns: list of dicts {submission_id, job_id, status, holds (list of shapes, :func:`bundle_shapes`)},
        one per job, in the order first seen.
    """
    by_id = {row.get("job_id"): row for row in jobs if row.get("job_id")}
    holders = {}
    for group in groups:
        creator = group.get("creator_job_id")
        if group.get("state") != "CREATED" or not creator or creator == job_id:
            continue
        row = by_id.get(creator, {})
        entry = holders.setdefault(creator, {"submission_id": row.get("submission_id"), "job_id": creator,
                                             "status": status_name(row.get("status")) or None, "holds": []})
        entry["holds"].append(bundle_shapes(group))
    return list(holders.values())


def waiting_message(submission_id, waiting, holders):
    """Say that a job's placement groups wait for resources in use, and for whom.

    :param submission_id: str.
    :param waiting: list of (group, age) pairs (feasible PENDING groups, :func:`pending_groups`).
    :param holders: list from :func:`resource_holders`.
    :returns: str.
    """
    groups = "; ".join("%s for %.0f s for %s%s" % (
        group.get("name") or group.get("placement_group_id"), age, bundle_shapes(group),
        (", Ray says %s" % group["stats"]["scheduling_state"]) if (group.get("stats") or {}).get(
            "scheduling_state") else "") for group, age in waiting)
    if holders:
        whom = ", ".join("%s (%s, holds %s)" % (h["submission_id"] or "Ray job %s" % h["job_id"],
                                                h["status"] or "not a submitted job", "; ".join(h["holds"]))
                         for h in holders)
    else:
        whom = "no other job's placement group (the resources are used outside placement groups: see ray status)"
    return ("Ray job %s is waiting: its placement groups fit the cluster but the resources are in use: "
            "waiting %s. They are held by %s. It starts when they are released; the placement-group "
            "deadline does not apply to a shape the cluster can hold." % (submission_id, groups, whom))


def stalled_message(submission_id, stalled, nodes, timeout):
    """Say which placement group shape no node offers (for a job whose infeasible groups stalled).

    :param submission_id: str.
    :param stalled: list of (group, age) pairs from :func:`stalled_placement_groups`.
    :param nodes: list of node dicts (:func:`node_to_dict`).
    :param timeout: float, the deadline that passed, in seconds.
    :returns: str naming each group's bundles, Ray's scheduling state, and what
        every ALIVE node offers in total.
    """
    import json

    groups = "; ".join(
        "%s waited %.0f s for %s%s" % (
            group.get("name") or group.get("placement_group_id"), age, bundle_shapes(group),
            (", Ray says %s" % group["stats"]["scheduling_state"]) if (group.get("stats") or {}).get(
                "scheduling_state") else "")
        for group, age in stalled)
    offered = ", ".join(
        "%s %s" % (n["node_ip"], json.dumps(schedulable_resources(n["resources_total"]), sort_keys=True))
        for n in nodes if n["state"] == "ALIVE")
    return ("Ray job %s asked for placement groups that stayed PENDING longer than %s s (the "
            "placement-group deadline): %s. No ALIVE node offers that shape, busy or not (nodes: %s). Fix the "
            "trainer's resources (trainer.nnodes, trainer.n_gpus_per_node) or start workers that offer them."
            % (submission_id, int(timeout), groups, offered))


def details_to_dict(details):
    """Turn a job (a dict from JobsClient, or Ray's JobDetails) into a JSON-safe dict (None stays None)."""
    if details is None:
        return None
    if isinstance(details, dict):
        data = details
    elif hasattr(details, "model_dump"):
        data = details.model_dump()
    elif hasattr(details, "dict"):
        data = details.dict()
    else:  # pragma: no cover - older Ray
        data = dict(details.__dict__)
    return json.loads(json.dumps(data, default=str))


def placement(state_module, address, job, worker_resource, nodes=None):
    """Return where a job's driver runs, from Ray's node table (one State API call, none with ``nodes``).

    :param job: dict from details_to_dict with ``driver_node_id``; sets ``job["driver_node_ip"]``.
    :param worker_resource: str, the custom resource that marks worker nodes.
    :param nodes: list of node dicts (:func:`list_nodes`) read already, or None (read now).
    :returns: dict with ``submission_id``, ``status``, ``driver_node_id``, ``driver_node_ip``,
        ``head_node_ip`` (None without an ALIVE head) and ``worker_ips`` (list of str) - the
        format of ``debug/placement.json``; None when the job has no driver node yet.
    """
    if not job or not job.get("driver_node_id"):
        return None
    if nodes is None:
        nodes = list_nodes(state_module, address)
    job["driver_node_ip"] = node_ip_for(nodes, job["driver_node_id"])
    summary = summarize(nodes, worker_resource)
    return {"submission_id": job.get("submission_id"), "status": status_name(job.get("status")),
            "driver_node_id": job["driver_node_id"], "driver_node_ip": job["driver_node_ip"],
            "head_node_ip": summary["head"]["node_ip"] if summary["head"] else None,
            "worker_ips": summary["worker_ips"]}


def pending_message(job, timeout, nodes, outcome):
    """Say why a job is still PENDING after ``timeout`` s: what its driver asks vs what ALIVE nodes offer.

    :param job: dict with ``submission_id`` and what the driver asked for, ``entrypoint_resources``
        and ``entrypoint_num_cpus`` (the submitter's parameters; Ray's JobDetails may lack them,
        then the message says what the nodes offer only).
    :param nodes: list of node dicts (list_nodes).
    :param outcome: str appended, what was done about it and how to fix it.
    :returns: str.
    """
    offered = cluster_totals(nodes)
    if job.get("entrypoint_resources") is None and job.get("entrypoint_num_cpus") is None:
        asked = "what its driver asks for"
    else:
        asked = "entrypoint_resources=%s with entrypoint_num_cpus=%s" % (
            json.dumps(job.get("entrypoint_resources") or {}, sort_keys=True), job.get("entrypoint_num_cpus"))
    return ("Ray job %s still PENDING after %ss: no ALIVE node offers %s (ALIVE nodes offer %s). %s"
            % (job.get("submission_id"), timeout, asked, json.dumps(offered, sort_keys=True), outcome))


def pending_stop(job, timeout, nodes, outcome):
    """What the stop of a job PENDING past its deadline says, in its ``logs/stopped_by.json`` (mvp_verdict reads it).

    The one rule for every deadline on PENDING (the job controller's ``pending_timeout_s``, ``ray_job``'s
    I(pending_timeout)): the entrypoint's resources as one bundle; the cause is ``infeasible`` when no ALIVE node could
    ever hold it (:func:`never_fits_reason`, the rule of the placement-group deadline), else the stop's note says why
    only (the verdict stays ``stopped``).

    :param job: dict with ``submission_id``, ``entrypoint_resources`` (dict or None) and ``entrypoint_num_cpus``
        (float or None): what the driver asked for (see :func:`pending_message`).
    :param timeout: int, the deadline's seconds. :param nodes: list of node dicts (:func:`list_nodes`).
    :param outcome: str, what was done about it and how to fix it (the message's end).
    :returns: dict ``{"why": str (:func:`pending_message`), "demand": [the bundle as JSON], "offers": dict node IP ->
        resources (:func:`alive_offers`)}`` and ``"cause": "infeasible"`` when nothing could hold it.
    """
    demand = dict(job.get("entrypoint_resources") or {})
    demand["CPU"] = demand.get("CPU", 0) + (job.get("entrypoint_num_cpus") or 0)
    note = {"why": pending_message(job, timeout, nodes, outcome), "demand": [json.dumps(demand, sort_keys=True)],
            "offers": alive_offers(nodes)}
    if never_fits_reason({"bundles": [{"unit_resources": demand}]}, nodes) is not None:
        note["cause"] = "infeasible"
    return note


def connect(module):
    """Open the Jobs and State API clients for a module with the mvp.ray.connection options.

    :param module: AnsibleModule whose params hold ``address`` and ``auth_token``.
    :returns: tuple (mvp_ray_rest.JobsClient, mvp_ray_rest.StateClient); an unreachable dashboard
        shows at the first call (mvp_ray_rest.RayUnreachable).
    """
    return clients(module.params["address"], module.params["auth_token"])


class JobModule(object):
    """What ray_job, ray_job_info and ray_job_record share: one submission id on one cluster.

    :param module: AnsibleModule with the mvp.ray.connection options and ``submission_id``.
    Attributes: ``module``, ``params``, ``client`` (mvp_ray_rest.JobsClient), ``state_api``
    (mvp_ray_rest.StateClient, the ``ray.util.state`` functions the modules use).
    """

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.client, self.state_api = connect(module)

    def info(self):
        """Return the job as a JSON-safe dict (details_to_dict), or None when Ray does not know the id.

        Fails the module, naming the address, with ``head_unreachable=True`` when the dashboard does not answer
        (a fact the callers test, never the message).
        """
        try:
            return details_to_dict(job_info_or_none(self.client, self.params["submission_id"]))
        except RayUnreachable as exc:
            self.module.fail_json(msg="Cannot reach the Ray Jobs API at %s: %s" % (self.params["address"], exc),
                                  head_unreachable=True)
