# -*- coding: utf-8 -*-
"""What a submission is checked against, read in one go on the head (the ray_job module's ``check``):
the paths that are missing, the job directory, a Ray job with the same id, the ALIVE nodes, the Hydra compose of the trainer overrides, the data files'
parquet columns, verl's own start-up checks and the room for the checkpoints.

:func:`look` returns the dict that ``mvp_refuse.mvp_submit_problems`` judges.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    alive_offers, cluster_totals, job_info_or_none, list_nodes, status_name, summarize)
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_retention import model_size


class SubmitCheckError(Exception):
    """The look could not be finished; ``result`` holds what was found so far (dict)."""

    def __init__(self, message, result):
        super(SubmitCheckError, self).__init__(message)
        self.result = result


# Results of verl's start-up checks per config, on the node (see mvp_verl_rules.start_snapshot_checks).
CACHE_DIR = os.path.join(tempfile.gettempdir(), "mvp-verl-checks")


def missing_paths(paths):
    """Return {name: path} for the non-empty paths of ``paths`` that do not exist."""
    return {name: path for name, path in sorted(paths.items()) if path and not os.path.lexists(str(path))}


def _leaving_link(path, real_root):
    """The first link on ``path`` whose target resolves outside ``real_root`` (else the first link): (link, target)."""
    first, current = (None, None), ""
    for part in [p for p in path.split("/") if p]:
        current += "/" + part
        if os.path.islink(current):
            found = (current, os.readlink(current))
            first = first if first[0] else found
            resolved = os.path.realpath(current)
            if resolved != real_root and not resolved.startswith(real_root.rstrip("/") + "/"):
                return found
    return first


def escaped_paths(confine):
    """The paths whose resolved form (``os.path.realpath``: every link followed) leaves the folder they must stay in.

    :param confine: list of ``{field, path, root}`` (the spec's ``check.confine``, module_utils mvp_spec), absolute
        paths; a path that does not exist yet is resolved as far as it exists.
    :returns: list of ``{field, path, root, resolved, link, target}``: ``link`` is the link on the path that leads
        out (its ``target`` as written in it), None when the root itself was reached another way.
    """
    out = []
    for item in confine or []:
        path, root = str(item.get("path") or ""), str(item.get("root") or "")
        if not os.path.isabs(path) or not os.path.isabs(root):
            continue
        resolved, real_root = os.path.realpath(path), os.path.realpath(root)
        if resolved == real_root or resolved.startswith(real_root.rstrip("/") + "/"):
            continue
        link, target = _leaving_link(path, real_root)
        out.append(dict(item, resolved=resolved, link=link, target=target))
    return out


def start_reward_check(reward):
    """Import the reward file in the nodes' Python while the rest is looked at (mvp_reward_check.check_reward).

    :param reward: dict ``{python, snapshot, path, name, kwargs, timeout}`` (the spec's ``check.reward``) or None.
    :returns: a handle for :func:`finish_reward_check`, or None.
    """
    if not reward or not os.path.isfile(str(reward.get("path") or "")):
        return None  # a missing file is named by the paths that must exist
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_reward_check import check_reward

    handle = {"problem": "", "start": time.time()}

    def run():
        handle["problem"] = check_reward(reward.get("python") or sys.executable, reward["snapshot"], reward["path"],
                                         name=reward.get("name") or "compute_score",
                                         reward_kwargs=reward.get("kwargs") or {},
                                         timeout=int(reward.get("timeout") or 60))
    handle["thread"] = threading.Thread(target=run, daemon=True)
    handle["thread"].start()
    return handle


def finish_reward_check(handle):
    """Wait for :func:`start_reward_check`; return (problem str, seconds) - ("", None) without a handle."""
    if handle is None:
        return "", None
    handle["thread"].join()
    return handle["problem"], round(time.time() - handle["start"], 2)


def hydra_errors(hydra, composed_out=None):
    """Compose ``hydra`` (config_dir, config_name, overrides) and return the problems (list of str).

    ``composed_out`` (dict) receives ``yaml``, the composed config, when the overrides compose.

    :raises SubmitCheckError: when hydra-core or omegaconf cannot be imported on the head.
    """
    if not hydra:
        return []
    config = os.path.join(hydra["config_dir"], hydra["config_name"] + ".yaml")
    if not os.path.isfile(config):
        return ["%s does not exist: the code snapshot has no such trainer config" % config]
    try:
        from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import validate_overrides
        return validate_overrides(hydra["config_dir"], hydra["config_name"], list(hydra.get("overrides") or []),
                                  composed_out=composed_out)
    except ImportError as exc:
        raise SubmitCheckError("hydra-core/omegaconf missing on the head (%s)" % exc, {})


def _column_names(schema):
    """Column names of a pyarrow schema, plus ``a.b`` for each field ``b`` of a struct column ``a``."""
    names = []
    for field in schema:
        names.append(field.name)
        if hasattr(field.type, "num_fields") and field.type.__class__.__name__ == "StructType":
            names.extend("%s.%s" % (field.name, field.type.field(i).name) for i in range(field.type.num_fields))
    return names


def dataset_columns(datasets):
    """Read the columns of ``datasets["files"]`` and of the same file names in each folder of ``datasets["dir"]``.

    :returns: tuple (columns: name -> list or None, prepared: folder -> {basename -> list}, skipped: str or None).
    """
    if not datasets:
        return {}, {}, None
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        return {}, {}, "pyarrow is not importable on the head (%s)" % exc

    def columns(path):
        try:
            return _column_names(pq.read_schema(path))
        except Exception:  # missing, unreadable or not parquet: the existence check reports it
            return None

    files = datasets.get("files") or {}
    found = {name: columns(path) for name, path in sorted(files.items())}
    prepared = {}
    root = datasets.get("dir")
    bases = sorted({os.path.basename(path) for path in files.values()})
    if root and os.path.isdir(root):
        for folder in sorted(os.listdir(root)):
            paths = [os.path.join(root, folder, base) for base in bases]
            if all(os.path.isfile(path) for path in paths):
                prepared[folder] = {base: columns(path) for base, path in zip(bases, paths)}
    return found, prepared, None


def storage_room(room):
    """The model's size and the shared storage's free bytes, for the checkpoint room check (or None).

    :param room: dict ``{model_path, shared_root}`` or None.
    :returns: dict ``{params, source, files_bytes, free_bytes, total_bytes, path}``; ``params`` None when
        the model is missing or unreadable (the missing model is reported on its own), ``free_bytes`` None
        when the file system cannot be read.
    """
    if not room:
        return None
    result = {"params": None, "source": "no model", "files_bytes": 0}
    if room.get("model_path") and os.path.isdir(room["model_path"]):
        result = model_size(room["model_path"])
    root = room["shared_root"]
    path = os.path.join(root, "jobs") if os.path.isdir(os.path.join(root, "jobs")) else root
    try:
        stat = os.statvfs(path)
        free, total = stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize
    except OSError:
        free = total = None
    return dict(result, free_bytes=free, total_bytes=total, path=path)


def start_verl_check(hydra, verl_checks, job_dir, submission_id, cluster_resources=None):
    """Start the snapshot's start-up checks (a subprocess) so they run while the rest is looked at.

    :param cluster_resources: dict or None, the ALIVE nodes' resource totals (mvp_ray.cluster_totals): the
        snapshot's placement groups are then recorded as its code would ask Ray for them (``placement_requests``).
    :returns: a handle for :func:`finish_verl_check`, or None without I(hydra) or I(verl_checks).
    """
    if not hydra or not verl_checks:
        return None
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_verl_rules import start_snapshot_checks

    config_dir, name = hydra["config_dir"], hydra["config_name"]
    if not os.path.isfile(os.path.join(config_dir, name + ".yaml")):
        return {"result": {"errors": [], "skipped": "no trainer config %s.yaml" % name, "seconds": {}}, "proc": None,
                "start": time.time(), "cache": None}
    return start_snapshot_checks(verl_checks.get("python") or sys.executable, verl_checks["snapshot"], config_dir,
                                 name, list(hydra.get("overrides") or []), int(verl_checks.get("timeout") or 180),
                                 cache_dir=verl_checks.get("cache_dir") or CACHE_DIR, job_dir=job_dir,
                                 submission_id=submission_id, sample_rows=verl_checks.get("sample_rows"),
                                 cluster_resources=cluster_resources)


def finish_verl_check(handle, hydra):
    """Wait for the snapshot's checks, run the mirrored trainer checks; return (errors, report)."""
    if handle is None:
        return [], None
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_verl_rules import (
        composed_problems, finish_snapshot_checks, save_snapshot_checks)

    mirrored = (handle.get("result") or {}).get("mirrored")  # kept with a cached result
    seconds = None
    if mirrored is None:  # composed here while the snapshot's checks still run
        start = time.time()
        mirrored = composed_problems(hydra["config_dir"], hydra["config_name"], list(hydra.get("overrides") or []))
        seconds = round(time.time() - start, 2)
    report = finish_snapshot_checks(handle)
    report["mirrored"] = mirrored
    if seconds is not None:
        report.setdefault("seconds", {})["mirrored"] = seconds
    save_snapshot_checks(handle, report)
    return list(report.pop("errors", [])) + list(report.pop("mirrored")), report


def look(options, client, state, address):
    """Everything a submission is checked against, in one go (ray_job's ``check`` option).

    :param options: dict with ``submission_id``, ``job_dir``, ``paths`` (name -> path), ``resource``, and
        optionally ``hydra``, ``datasets``, ``verl_checks``, ``room``, ``confine``, ``reward`` (see ray_job's
        ``check``; the builder makes them: mvp_spec.head_check).
    :param client: mvp_ray_rest.JobsClient; state: mvp_ray_rest.StateClient; address: str, the dashboard URL.
    :returns: dict with ``missing``, ``escaped`` (:func:`escaped_paths`), ``reward_problem`` (str, '' when the
        reward file imports and its function takes verl's arguments), ``reward_seconds``, ``job_dir_exists``, ``hydra_errors``,
        ``resolved_config``, ``dataset_columns``, ``prepared_datasets``, ``dataset_schema_skipped``, ``room``,
        ``summary``, ``existing_job``, ``verl_errors``, ``verl_check`` (``skipped``, ``seconds``, ``cached``,
        ``resource_pools``: the pools verl's own code built, compared with ``summary`` by mvp_submit_problems).
    :raises SubmitCheckError: naming the address when Ray's nodes or the job cannot be read, or when
        hydra cannot be imported (``result``: what was found before).
    """
    composed = {}
    reward = start_reward_check(options.get("reward"))
    # Ray's nodes first: verl's checks record the placement groups its code asks for on this cluster.
    try:
        nodes, nodes_error = list_nodes(state, address, timeout=10), None
    except Exception as exc:  # Ray raises several types for an unreachable dashboard
        nodes, nodes_error = None, exc
    result = dict(missing=missing_paths(options.get("paths") or {}),
                  escaped=escaped_paths(options.get("confine")),
                  job_dir_exists=os.path.lexists(options["job_dir"]),
                  hydra_errors=hydra_errors(options.get("hydra"), composed))
    result["resolved_config"] = composed.get("yaml")
    # verl's own checks only on overrides that compose (else hydra_errors already names the key);
    # they run in a subprocess while the datasets and Ray are looked at.
    hydra = options.get("hydra") if not result["hydra_errors"] else None
    verl = start_verl_check(hydra, options.get("verl_checks"), options["job_dir"], options["submission_id"],
                            None if nodes is None else cluster_totals(nodes))
    columns, prepared, skipped = dataset_columns(options.get("datasets"))
    result.update(dataset_columns=columns, prepared_datasets=prepared, dataset_schema_skipped=skipped)
    # A model that leads out of the shared storage is refused by name: its folder is not walked for its size.
    model_out = any(item.get("field") == "model" for item in result["escaped"])
    result["room"] = storage_room(None if model_out else options.get("room"))
    if nodes is None:
        raise SubmitCheckError("Cannot list Ray nodes at %s: %s. Is the cluster up (site.yml)?" % (address, nodes_error),
                               result)
    result["summary"] = summarize(nodes, options.get("resource") or "worker_node")
    result["offers"] = alive_offers(nodes)
    try:
        details = job_info_or_none(client, options["submission_id"])
    except (RuntimeError, OSError) as exc:
        raise SubmitCheckError("Cannot read Ray job %s at %s: %s" % (options["submission_id"], address, exc), result)
    result["existing_job"] = status_name(details.get("status")) if details is not None else None
    errors, report = finish_verl_check(verl, hydra)
    result.update(verl_errors=errors, verl_check=report)
    result["reward_problem"], result["reward_seconds"] = finish_reward_check(reward)
    result["release"] = release_look(options.get("release"))
    return result


def release_look(release):
    """The snapshot's verl version and the platform layers the nodes' Python declares (module_utils mvp_release).

    :param release: dict ``{python, snapshot}`` or None.
    :returns: dict ``{version, platforms}`` or None.
    """
    if not release:
        return None
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_release import platform_layers, snapshot_version

    return {"version": snapshot_version(release["snapshot"]),
            "platforms": platform_layers(release.get("python") or sys.executable)}


def verl_skipped_note(check):
    """`` verl's own start-up checks did not run: <why>`` when they were skipped on the head, else ''."""
    report = check.get("verl_check")
    if isinstance(report, dict) and isinstance(report.get("skipped"), str):
        return " verl's own start-up checks did not run: " + report["skipped"]
    return ""
