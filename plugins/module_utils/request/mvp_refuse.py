# -*- coding: utf-8 -*-
"""The refusals before submission: the head's look at a job (``mvp_submit_check.look``) judged against its spec.

:func:`mvp_submit_problems` returns every problem, in a fixed order, each naming the field or setting to
change; the ``ray_job`` module fails on the first before anything is written.
"""

from __future__ import annotations

import json
import posixpath

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_queue
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import bundle_shapes, never_fits_reason
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_release import release_problem
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_retention import room_problem


def mvp_gpu_shape_problem(spec, workers):
    """Say why the ALIVE workers can never hold the job's shape, or return "" when they can.

    verl asks Ray for each resource pool as one STRICT_PACK placement group per node entry
    (``trainer.nnodes`` groups of ``trainer.n_gpus_per_node`` bundles ``{CPU: k, GPU: 1}``, and the
    reward or teacher pool when enabled): every group must fit ONE worker, not only the GPUs in
    total (else some groups are placed, reserve their GPUs, and the rest stay PENDING forever,
    holding the GPUs every later job needs; verl issues 2596 and 1182). The shape is the spec's
    ``shape`` (mvp_queue.job_shape); CPU-device runs count the logical GPUs their bundles ask for
    too, unless no worker advertises any GPU (the verl CPU platform then asks for CPUs only).

    :param spec: dict from mvp_job_spec (``shape``, ``trainer_overrides``).
    :param workers: list of ALIVE worker node dicts (``node_ip``, ``resources_total`` with ``GPU``
        and ``CPU``), as the submitting call's look returns them in ``summary.alive_workers``.
    :returns: str, empty when the shape fits or reserves nothing; else the message, naming the
        shape, each worker's resources and the keys to change.
    """
    shape = spec.get("shape") or {}
    if not shape.get("pools"):
        return ""
    totals = mvp_queue.worker_totals(workers)
    cpu_device = str((spec.get("trainer_overrides") or {}).get("trainer.device", "")).lower() == "cpu"
    if cpu_device and totals and not any(res["GPU"] for res in totals.values()):
        return ""
    return mvp_queue.shape_problem(shape, totals)


def _verl_pools_problem(check, spec):
    """Say why the ALIVE workers cannot hold the resource pools verl itself builds from the config ("" when they can).

    The pools are the ones the snapshot's own code computed on the head (``verl_check.resource_pools``:
    ``PPOTrainer._init_resource_pool_mgr``'s ``resource_pool_spec``, or the SFT trainer's ``RayResourcePool``):
    pool name -> processes per node entry, one STRICT_PACK placement group of that many GPU bundles per
    entry. The total is verl's own ``ResourcePoolManager._check_resource_available`` rule (its message);
    each entry must also fit one worker. CPU-device runs on workers without GPUs ask Ray for CPUs only:
    nothing to compare. Not repeated when the job's shape (``mvp_gpu_shape_problem``) already refused.

    :param check: dict from ``mvp_submit_check.look`` (``verl_check``, ``summary.alive_workers``).
    :param spec: dict from mvp_job_spec (``trainer_overrides``, ``module``, ``shape``).
    :returns: str, the message naming verl's pools, the workers and the keys to change; or "".
    """
    pools = ((check.get("verl_check") or {}).get("resource_pools")) or {}
    workers = (check.get("summary") or {}).get("alive_workers") or []
    if not isinstance(pools, dict) or not pools or not workers:
        return ""
    totals = mvp_queue.worker_totals(workers)
    cpu_device = str((spec.get("trainer_overrides") or {}).get("trainer.device", "")).lower() == "cpu"
    if cpu_device and not any(res["GPU"] for res in totals.values()):
        return ""
    per_gpu = (mvp_queue.TRAINERS.get(spec.get("module") or "") or {}).get("cpus_per_gpu", 0)
    entries = [(name, int(n)) for name, nodes in sorted(pools.items()) for n in nodes or [] if int(n) > 0]
    wanted = sum(entry[1] for entry in entries)
    available = sum(res["GPU"] for res in totals.values())
    keys = "trainer.nnodes / trainer.n_gpus_per_node (and the reward or teacher pool's nnodes / n_gpus_per_node)"
    if available < wanted:
        return ("verl's resource pools %s (built by the snapshot's own code on the head) refuse this cluster: "
                "ResourcePoolManager._check_resource_available: ValueError: Total available GPUs %g is less than "
                "total desired GPUs %d. Fix: lower %s in trainer_overrides, or add workers (site.yml)."
                % (json.dumps(pools, sort_keys=True), available, wanted, keys))
    shape = {"pools": [{"name": name, "nodes": 1, "gpus_per_node": n, "cpus_per_node": n * per_gpu}
                       for name, n in entries]}
    shape.update(gpus=wanted, cpus=sum(p["cpus_per_node"] for p in shape["pools"]))
    if mvp_queue.pack(shape, totals) is not None:
        return ""
    return ("verl's resource pools %s (built by the snapshot's own code on the head) can never be placed: each "
            "entry is one STRICT_PACK placement group that must fit one worker, and the ALIVE workers have %s; "
            "verl would reserve part of them and wait forever. Fix: lower %s in trainer_overrides so that each "
            "entry fits one worker, or add workers (site.yml)."
            % (json.dumps(pools, sort_keys=True), "; ".join("%s: %g GPU, %g CPU" % (node, res["GPU"], res["CPU"])
                                                            for node, res in sorted(totals.items())), keys))


def placement_request_problem(check, check_gpus=True):
    """The first placement group the snapshot's own code will ask Ray for that no ALIVE node can ever hold ('' if none).

    The groups are ``verl_check.placement_requests``: what verl's ``RayResourcePool.get_placement_groups`` passes
    to Ray's ``placement_group`` for this config on this cluster, recorded on the head (mvp_verl_rules) - every
    resource it names (GPUs, CPUs, a device name such as ``cpu``, an accelerator type). They are compared
    whole with each ALIVE node's total resources (``offers``, from mvp_submit_check.look): a resource no
    node offers at all is named with the amount asked; with ``check_gpus``, a group no node could hold
    (mvp_ray.never_fits_reason, the rule of the placement-group deadline) is named with the nodes' offers.

    :param check: dict from ``mvp_submit_check.look``. :param check_gpus: bool (submit_job_check_gpus).
    :returns: str.
    """
    requests = (check.get("verl_check") or {}).get("placement_requests") or []
    offers = check.get("offers") or {}
    if not isinstance(requests, list) or not offers:
        return ""
    text = "; ".join("%s: %s" % (ip, json.dumps(res, sort_keys=True)) for ip, res in sorted(offers.items()))
    offered = {key for res in offers.values() for key, value in res.items() if value > 0}
    nodes = [{"state": "ALIVE", "node_ip": ip, "resources_total": res} for ip, res in offers.items()]
    for request in requests:
        group = {"bundles": [{"unit_resources": bundle} for bundle in request.get("bundles") or []],
                 "strategy": request.get("strategy") or ""}
        shape = bundle_shapes(group)
        missing = sorted({key for bundle in request.get("bundles") or [] for key, value in bundle.items()
                          if value > 0 and key not in offered})
        if missing:
            amounts = ", ".join("%s %g" % (key, max(b.get(key, 0) for b in request["bundles"])) for key in missing)
            return ("the snapshot's own code asks Ray for resource %s (per bundle: %s; pool %s, %s, from verl's "
                    "RayResourcePool.get_placement_groups), which no ALIVE node offers (%s): Ray would keep the job "
                    "waiting for it forever. Fix: use a verl release the node image's platform runs (its release "
                    "range), a trainer.device the nodes have, or add nodes that offer %s (site.yml)."
                    % (", ".join("'%s'" % key for key in missing), amounts, request.get("pool") or "?", shape, text,
                       " and ".join("'%s'" % key for key in missing)))
        reason = never_fits_reason(group, nodes) if check_gpus else None
        if reason:
            return ("the placement group the snapshot's own code asks Ray for in pool %s (%s, from verl's "
                    "RayResourcePool.get_placement_groups) can never be placed: %s; the ALIVE nodes offer %s. Fix: "
                    "lower trainer.nnodes / trainer.n_gpus_per_node (and the reward or teacher pool's) in "
                    "trainer_overrides so that each group fits one node, or add nodes (site.yml); "
                    "submit_job_check_gpus=false submits anyway." % (request.get("pool") or "?", shape, reason, text))
    return ""


def _dataset_problem(check, spec):
    """Say which columns the job's data files lack and which prepared datasets have them ("" when all fit).

    :param check: dict from ``mvp_submit_check.look`` (``dataset_columns``: override key -> columns or None;
        ``prepared_datasets``: folder -> {file base name -> columns}).
    :param spec: dict from mvp_job_spec (``dataset_columns``: column -> why, ``data_files``, ``dataset``).
    """
    needed = spec.get("dataset_columns") or {}
    found = check.get("dataset_columns") or {}
    lacking = {}
    for key, path in sorted((spec.get("data_files") or {}).items()):
        columns = found.get(key)
        if columns is not None:
            gaps = [column for column in needed if column not in columns]
            if gaps:
                lacking[path] = gaps
    if not lacking:
        return ""
    fits = sorted(name for name, files in (check.get("prepared_datasets") or {}).items()
                  if files and all(cols is not None and all(c in cols for c in needed) for cols in files.values()))
    paths = sorted(lacking)
    dataset = spec.get("dataset") or posixpath.basename(posixpath.dirname(paths[0]))
    return ("dataset %s does not fit workload %s: %s. Fix: set dataset to one that has them (%s), or prepare the "
            "data with those columns." % (
                dataset, spec.get("workload"),
                "; ".join("%s has no column %s" % (path, ", ".join(
                    "%s (%s)" % (column, needed[column]) for column in lacking[path])) for path in paths),
                "prepared datasets that fit: " + ", ".join(fits) if fits else
                "no dataset under %s/datasets fits" % spec["shared_root"]))


def escape_problem(item):
    """Say that a path the job uses leads, through a link, outside the folder it must stay in.

    :param item: dict from ``mvp_submit_check.escaped_paths`` (``field``, ``path``, ``root``, ``resolved``,
        ``link``, ``target``).
    :returns: str naming the field, the link and where it leads, and the fix.
    """
    how = ("%s is a link to %s" % (item["link"], item["target"]) if item.get("link") else
           "a link on the way")
    return ("%s %s resolves to %s, outside %s (%s): the rule holds for the resolved path, since every node opens "
            "the file the link leads to. Fix: put the file itself under %s (copy it, do not link it), or point %s "
            "at a path there." % (item["field"], item["path"], item["resolved"], item["root"], how, item["root"],
                                  item["field"]))


def mvp_submit_problems(check, spec, worker_resource, check_gpus=True):
    """Return what stops a job from being submitted, from the head's look at it (list of str).

    One message per problem, in this order, each naming the field or setting to change:
    the code snapshot incomplete, its verl release outside what the platform layer declares
    (mvp_release.release_problem, unless the request accepts it), trainer overrides Hydra refused, the model or reward
    function missing, a path that leads through a link outside its folder (:func:`escape_problem`),
    the reward file that does not import or lacks its function (mvp_reward_check), a dataset without the columns the workload reads (naming the prepared
    datasets that have them), a dataset file missing, verl's own start-up checks (or the mirrored
    trainer checks) refusing the composed config, no room on the shared storage for the checkpoints the
    job keeps (mvp_retention.room_problem), the submission id taken (job directory or Ray
    job), more GPUs than Ray reports or a per-node GPU shape no workers give (both only with
    ``check_gpus`` and a GPU workload), else the resource pools verl's own code built on the head
    (``verl_check.resource_pools``) that the ALIVE workers cannot hold (only with ``check_gpus``), else
    the placement groups that code asks Ray for compared whole with the ALIVE nodes' offers
    (:func:`placement_request_problem`: a resource no node offers always, a group no node holds only with
    ``check_gpus``), no ALIVE worker carrying the entrypoint resource.

    :param check: dict returned by ``mvp_submit_check.look`` (ray_job's ``check``; ``missing`` path name ->
        path, ``hydra_errors``, ``dataset_columns``, ``prepared_datasets``, ``verl_errors``, ``job_dir_exists``, ``existing_job``, ``summary`` with
        ``total_gpus`` and ``alive_workers``, ``room`` with the model's ``params`` and ``files_bytes`` and
        the shared storage's ``free_bytes``).
    :param spec: dict from mvp_job_spec.
    :param worker_resource: str, the custom resource every worker carries (mvp_ray_worker_resource).
    :param check_gpus: bool, compare the GPUs asked with the cluster's (submit_job_check_gpus).
    :returns: list of str; empty when the job can be submitted.
    """
    missing = check.get("missing") or {}
    summary = check.get("summary") or {}
    root = spec["shared_root"]
    problems = []
    tools = sorted(name for name in missing if name.startswith("job_tools/"))
    if tools:
        problems.append("the job tools %s are missing from %s. Install them with site.yml (the verl_snapshot "
                        "role puts them there with the code snapshots)."
                        % (", ".join(name.split("/", 1)[1] for name in tools), spec["tools_dir"]))
    if "mvp_marker.py" in missing or "verl/__init__.py" in missing:
        problems.append("code_path %s is not a code snapshot (needs mvp_marker.py and verl/__init__.py). Create it "
                        "with site.yml (verl_snapshot_sources) or pick an existing code_id under %s/common/code/verl/."
                        % (spec["code_path"], root))
    release = release_problem(check.get("release"), spec.get("code_id"), bool(spec.get("accept_unsupported_release")))
    if release:
        problems.append(release)
    if check.get("hydra_errors"):
        problems.append("trainer_overrides do not fit %s/verl/trainer/config/%s.yaml: %s. Fix: correct the key or "
                        "value in trainer_overrides." % (spec["code_path"], spec.get("hydra_config"),
                                                         "; ".join(check["hydra_errors"])))
    if "model" in missing:
        problems.append("model %s does not exist on the shared storage. Prepare the model with site.yml (models) "
                        "or set model to a folder under %s/common/models." % (missing["model"], root))
    if "reward_fn_path" in missing:
        problems.append("reward_fn_path %s does not exist on the shared storage. Copy the reward function under "
                        "%s/user/code/." % (missing["reward_fn_path"], root))
    for item in check.get("escaped") or []:
        problems.append(escape_problem(item))
    if check.get("reward_problem"):
        problems.append(check["reward_problem"])
    # A dataset of another kind lacks columns (and often a file name): the columns say more.
    columns = _dataset_problem(check, spec)
    if columns:
        problems.append(columns)
    for key, path in sorted((spec.get("data_files") or {}).items()):
        if key in missing:
            problems.append("dataset file %s (%s) does not exist. Prepare it with site.yml (prepare_data) or set "
                            "`dataset` to a folder under %s/datasets/." % (path, key, root))
    if check.get("verl_errors"):
        problems.append("verl's own start-up checks (snapshot %s, run on the head before submission) refuse the "
                        "config: %s. Fix: set the key verl names in trainer_overrides (the workload's defaults: "
                        "mvp_workloads / submit_job_site_overrides)." % (spec["code_path"], "; ".join(check["verl_errors"])))
    room = room_problem(check.get("room"), spec.get("checkpoints"), spec.get("trainer_overrides") or {}, root)
    if room:
        problems.append(room)
    taken = []
    if check.get("job_dir_exists"):
        taken.append("job directory %s exists" % spec["job_dir"])
    if check.get("existing_job"):
        taken.append("Ray has a job with that id, status %s" % check["existing_job"])
    if taken:
        problems.append("submission_id '%s' is taken (%s). Job directories are never reused: choose another "
                        "submission_id or omit it to get a fresh one." % (spec["submission_id"], "; ".join(taken)))
    if check_gpus and (spec.get("shape") or {}).get("pools"):
        total = summary.get("total_gpus") or 0
        if spec.get("needs_gpus") and spec.get("gpus_requested", 0) > total:
            problems.append("trainer.nnodes * trainer.n_gpus_per_node = %s GPUs, but Ray reports %d. Lower "
                            "trainer_overrides trainer.nnodes / trainer.n_gpus_per_node, or set "
                            "submit_job_check_gpus=false to submit anyway."
                            % (spec.get("gpus_requested"), int(total)))
        elif summary.get("alive_workers"):
            shape = mvp_gpu_shape_problem(spec, summary.get("alive_workers") or [])
            if shape:
                problems.append(shape)
    shaped = problems and problems[-1].startswith(("trainer.nnodes * trainer.n_gpus_per_node", "the job's shape"))
    pools = _verl_pools_problem(check, spec) if check_gpus and not shaped else ""
    if pools:
        problems.append(pools)
    if not pools and not shaped:
        request = placement_request_problem(check, check_gpus)
        if request:
            problems.append(request)
    if not summary.get("alive_workers"):
        problems.append("No ALIVE node carries '%s', so the driver could never be placed. Run site.yml to start "
                        "the workers." % worker_resource)
    return problems
