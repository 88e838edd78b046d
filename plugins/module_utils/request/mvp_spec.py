# -*- coding: utf-8 -*-
"""The job spec builder: a checked request -> one job spec, with the head check's inputs.

The job spec is the single source for everything ``submit_job`` writes and
submits: ``config/job_spec.json``, ``config/runtime_env.json``,
``config/submit_cmd.txt``, the ``ray_job`` module's arguments and, in ``check``, what the
head looks at before submission (``mvp_submit_check.look``), judged by ``mvp_refuse``.

The builder takes the request as ``mvp_request.check_request`` returns it (the ``ray_job_request``
action checks and normalises it, once): every request key typed, defaults filled in. It applies only
the rules that need what it adds: the paths it fills into the merged overrides, the run a resumed job
continues, the cluster's settings (queue, watchdog, retention, MLflow, W&B).
All validation errors raise ``JobSpecError`` (a ValueError) with a message naming the
field and the fix, before anything is written; the ``mvp_jobspec`` filters (a thin adapter)
turn it into Ansible's ``AnsibleFilterError``. Names of the job directory's files come from
``mvp_job`` (the job contract).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import (
    FILES, is_submission_id, job_dir as make_job_dir, job_paths)
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_queue, mvp_resume
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_copies import installed_names
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import (
    HYDRA_SUBDIR, as_list, env_strings, fail, is_positive, kind_of, merge_overrides, model_path, preemption,
    priority_of, ray_settings)
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_retention import (
    DEFAULT_KEEP, RetentionError, keep_setting, retention)


# Job tools (mvp_entry.py, selftest.py) on the shared storage: <shared_root>/<tools_subdir>
# (mvp_job_tools_subdir; this when the defaults name none).
TOOLS_SUBDIR = "common/code/mvp_tools"


# verl's file logger writes one JSON object per step ({"step": N, "data": {...}}) to
# $VERL_FILE_LOGGER_PATH (verl/utils/tracking.py FileLogger); the builder points it at the job's metrics file.
METRICS_FILE = FILES["metrics"]


# Override keys whose value is a path (by the last name of the key), and Hydra's own output keys:
# a job reads and writes inside the shared storage only, and Hydra writes inside the job directory.
PATH_KEY_SUFFIXES = ("_dir", "_path", "_file", "_files")


HYDRA_PATH_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.output_subdir",
                   "hydra.runtime.output_dir")


def hydra_value(value):
    """Render a Python value as a Hydra override value.

    :param value: bool, int, float, None, str, list or dict.
    :returns: str: ``true``/``false``, ``null``, numbers as-is, lists and dicts
        in Hydra's bracket syntax, strings unquoted unless they contain
        characters Hydra's grammar treats specially (then single-quoted).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        # keys cannot be quoted in Hydra's grammar: its special characters are escaped (verl's fsdp_plan
        # keys such as model.layers.{*})
        return "{" + ",".join("%s:%s" % (re.sub(r"([\\()\[\]{}:=, \t])", r"\\\1", str(k)), hydra_value(v))
                              for k, v in value.items()) + "}"
    text = str(value)
    # Hydra reads digits with underscores as one number ("0.5_5" -> 0.55, "1_5" -> 15), where verl's
    # "lower_upper" thresholds (verl/trainer/ppo/rollout_corr_helper.py) mean two: keep the text.
    if text == "" or re.search(r"[\s,\[\]{}()='\"\\:]", text) or (
            "_" in text and re.match(r"^[+-]?[\d_.]+([eE][+-]?[\d_]+)?$", text)):
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return text


def hydra_overrides(overrides):
    """Turn a dict of dotted keys to values into sorted ``key=value`` strings."""
    return ["%s=%s" % (key, hydra_value(overrides[key])) for key in sorted(overrides)]


def _shape(overrides, per_node_default=8):
    """A verl trainer's (trainer.nnodes, trainer.n_gpus_per_node) as ints (verl's defaults 1 and 8).

    :returns: tuple of two ints, or None when either is not a whole number (int or digits).
    """
    values = [overrides.get("trainer.nnodes", 1), overrides.get("trainer.n_gpus_per_node", per_node_default)]
    if not all((isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.isdigit())
               for v in values):
        return None
    return int(values[0]), int(values[1])


def _world_size(overrides):
    """Processes of a verl trainer: trainer.nnodes x trainer.n_gpus_per_node, or None (see _shape)."""
    shape = _shape(overrides)
    return shape[0] * shape[1] if shape else None


def _resume(request, entry, workload, overrides, shared_root, defaults, notes, job_dir):
    """Point a job at the newest checkpoint of the run named by ``resume_from``.

    Sets the catalog's ``resume`` keys (verl: ``trainer.resume_mode=resume_path``,
    ``trainer.resume_from_path=<job>/checkpoints/global_step_N``) in ``overrides``.

    The checkpoint is the newest complete one (mvp_runs.latest_checkpoint: every rank's shards,
    and verl's latest_checkpointed_iteration.txt not older) of that run, else of the runs it
    continued (``defaults['resume_parents']``), each skipped one named in ``notes``.

    When the checkpoint must not be loaded as saved (a known verl bug, ``mvp_resume.plan``: verl#7401's
    data-loader state at an epoch's end), the trainer is pointed at a view of it in this job's directory
    (``config/resume/global_step_N``, made by ``ray_job`` with the job directory from ``links``).

    :returns: dict ``{submission_id, step, path, world_size, checkpoint_of, skipped, loaded_from, adjusted,
        links}`` or None without resume_from (``checkpoint_of``: the run that saved the checkpoint; ``skipped``:
        the incomplete newer ones, ``{submission_id, step, path, why}``; ``path``: the checkpoint as saved;
        ``loaded_from``: what the trainer is given, ``path`` or the view; ``adjusted``: ``[{issue, url, what,
        why, left_out}]``, what was changed and why; ``links``: the view's links, link -> relative target).
    :raises JobSpecError: when the earlier run is unknown, of another workload,
        has no complete checkpoint or was trained with another world size (the request's own rules of
        ``resume_from`` are ``mvp_request``'s).
    """
    earlier = request["resume_from"]
    if earlier is None:
        return None
    keys = entry["resume"]
    run = defaults.get("resume_run")
    if not run:
        fail("resume_from", "no job directory %s/jobs/%s" % (shared_root, earlier),
             "give the submission_id of an earlier job (status.yml lists the job directories)")
    if run.get("workload") != workload:
        fail("resume_from", "%s is a %s job, this is %s" % (earlier, run.get("workload"), workload),
             "resume from a job of the same workload")
    ckpt, source, saver = _complete_checkpoint(run, defaults.get("resume_parents") or [], notes)
    if not ckpt:
        fail("resume_from", "%s saved no %scheckpoint (no %sglobal_step_N under %s/jobs/%s/checkpoints%s)"
             % (earlier, "complete " if run.get("checkpoint") else "", "complete " if run.get("checkpoint") else "",
                 shared_root, earlier, _skipped_text(run)),
             "resume from a job that reached trainer.save_freq steps, or lower save_freq in its next run")
    world = _world_size(overrides)
    if ckpt.get("world_size") and world and ckpt["world_size"] != world:
        fail("resume_from", "%s was trained with world size %s (checkpoint %s), this job has %s "
             "(trainer.nnodes x trainer.n_gpus_per_node)" % (earlier, ckpt["world_size"], ckpt["path"], world),
             "set trainer.nnodes and trainer.n_gpus_per_node so that their product is %d" % ckpt["world_size"])
    adjusted, resume_notes = mvp_resume.plan(
        keys.get("data_state"), ckpt, saver.get("epoch"), mvp_resume.restore_guarded(defaults.get("resume_restore_source")),
        job_paths(job_dir)["resume_view"])
    overrides[keys["mode_key"]] = "resume_path"
    overrides[keys["path_key"]] = adjusted["loaded_from"] if adjusted else ckpt["path"]
    notes.append("continues %s from the checkpoint at step %d%s (%s); it trains until trainer.total_epochs"
                 % (earlier, ckpt["step"], "" if source == earlier else " of " + source, ckpt["path"]))
    notes.extend(resume_notes)
    earlier_overrides = (run.get("spec") or {}).get("trainer_overrides") or {}
    if ckpt["step"] == run.get("last_step") and all(
            str(overrides.get(key)) == str(earlier_overrides.get(key))
            for key in ("trainer.total_epochs", "trainer.total_training_steps")):
        notes.append("%s ended at step %d with the same trainer.total_epochs and trainer.total_training_steps: "
                     "verl restores its data loader at the end, so this job has nothing left to train; "
                     "raise one of them to train further" % (earlier, ckpt["step"]))
    return {"submission_id": earlier, "step": ckpt["step"], "path": ckpt["path"],
            "world_size": ckpt.get("world_size"), "checkpoint_of": source,
            "loaded_from": adjusted["loaded_from"] if adjusted else ckpt["path"],
            "adjusted": [{key: adjusted[key] for key in ("issue", "url", "what", "why", "left_out")}] if adjusted else [],
            "links": adjusted["links"] if adjusted else {},
            "skipped": [dict(item, submission_id=rid) for rid, items in _skipped_by_run(run, defaults) for item in items]}


def _skipped_text(run):
    """'; skipped: global_step_8 (why)' for the checkpoints of ``run`` that were not complete."""
    skipped = (run.get("checkpoint") or {}).get("skipped") or []
    return "; skipped: " + "; ".join("global_step_%s (%s)" % (i["step"], i["why"]) for i in skipped) if skipped else ""


def _skipped_by_run(run, defaults):
    """[(submission_id, skipped checkpoints)] of the run and the runs it continued, where any were skipped."""
    out = []
    for each in [run] + list(defaults.get("resume_parents") or []):
        items = (each.get("checkpoint") or {}).get("skipped") or []
        if items:
            out.append((each.get("submission_id"), items))
    return out


def _complete_checkpoint(run, parents, notes):
    """The newest complete checkpoint of ``run``, else of the runs it continued (newest first).

    :param run: dict, a run as ``ray_job_runs`` returns it (``checkpoint`` from mvp_runs.latest_checkpoint,
        with ``skipped``: newer folders that were incomplete).
    :param parents: list of runs ``run`` continued, directly or not (``ray_job_runs`` ``parents``).
    :param notes: list of str, receives one note per skipped checkpoint.
    :returns: (checkpoint dict or None, submission id of the run that saved it, that run's dict or None).
    """
    by_id = {p.get("submission_id"): p for p in parents}
    current = run
    seen = set()
    while current and current.get("submission_id") not in seen:
        seen.add(current.get("submission_id"))
        ckpt = current.get("checkpoint") or {}
        for item in ckpt.get("skipped") or []:
            notes.append("skipped checkpoint global_step_%s of %s: %s"
                         % (item["step"], current.get("submission_id"), item["why"]))
        if ckpt.get("step") is not None:
            return ckpt, current.get("submission_id"), current
        parent = ((current.get("spec") or {}).get("resume_from") or {}).get("submission_id")
        if parent:
            notes.append("%s saved no complete checkpoint: looking at the run it continued, %s"
                         % (current.get("submission_id"), parent))
        current = by_id.get(parent)
    return None, None, None


def _retention(entry, overrides, merged, defaults, notes):
    """Set verl's keep-last-k keys (the catalog's ``retention``) to ``submit_job_checkpoints_keep``, unless given.

    The inventory's ``submit_job_site_overrides`` and the request win over the setting (mvp_retention.retention).

    :returns: dict ``{setting, models}`` (the job spec's ``checkpoints``) or None without ``retention``.
    :raises JobSpecError: for a setting that is not a whole number >= 1 (or null), or a given key whose
        value verl would not read as a number.
    """
    keys = set((entry.get("retention") or {}).values())
    given = {}
    for source, layer in (("inventory", merged["site_overrides"]), ("request", merged["user"])):
        for name, value in layer.items():
            bare = name.lstrip("+~")
            if bare in keys:
                given[bare] = (source, merged["field_of"](bare), None if name.startswith("~") else value)
    try:
        return retention(entry, overrides, given, keep_setting(defaults.get("checkpoints_keep", DEFAULT_KEEP)),
                         notes)
    except RetentionError as exc:
        fail(*exc.args)


def _is_path_key(key):
    """Whether an override key names a path: Hydra's output keys, or a last name ending in PATH_KEY_SUFFIXES."""
    bare = key.lstrip("+~")
    return bare in HYDRA_PATH_KEYS or bare.rsplit(".", 1)[-1].endswith(PATH_KEY_SUFFIXES)


def _check_paths(overrides, field_of, shared_root, job_dir):
    """Keep every path an override names where it belongs, before anything is written.

    Hydra's output keys (HYDRA_PATH_KEYS: ``hydra.run.dir`` is the builder's, the others) must
    stay inside the job directory (``hydra.output_subdir`` and ``hydra.sweep.subdir`` are
    relative to Hydra's run folder: no absolute path, no ``..``). Any other key whose last name
    ends in ``_dir``, ``_path``, ``_file`` or ``_files`` must be null, or an absolute path (or a
    list of them) inside ``shared_root``: the driver's working directory is ``/`` on a worker, so a
    relative path or one outside the shared storage lands on one node's disk or reads another
    machine's files. Interpolations (``${...}``) are left to verl.

    :param overrides: dict, the merged trainer overrides.
    :param field_of: function key -> the field named in messages.
    :param shared_root: str, normalised absolute shared root.
    :param job_dir: str, the job directory ``<shared_root>/jobs/<id>``.
    :raises JobSpecError: naming the key, the value and where it may point.
    """
    for key, value in overrides.items():
        bare = key.lstrip("+~")
        if key.startswith("~") or value is None or not _is_path_key(key):
            continue
        if bare.startswith("hydra."):
            if bare in ("hydra.output_subdir", "hydra.sweep.subdir"):
                text = str(value)
                if posixpath.isabs(text) or ".." in text.split("/"):
                    fail(field_of(bare), "%r would put Hydra's files outside its run folder" % (value,),
                         "drop it (Hydra's output goes to %s/%s) or give a plain sub-folder name"
                         % (job_dir, HYDRA_SUBDIR))
                continue
            text = posixpath.normpath(str(value)) if posixpath.isabs(str(value)) else None
            if text is None or not (text + "/").startswith(job_dir + "/"):
                fail(field_of(bare), "%r is outside the job directory %s: Hydra would write its files there, "
                     "on whichever worker runs the driver" % (value, job_dir),
                     "drop it; Hydra's output goes to %s/%s" % (job_dir, HYDRA_SUBDIR))
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            text = str(item)
            if "${" in text:
                continue
            if not posixpath.isabs(text) or not (posixpath.normpath(text) + "/").startswith(shared_root + "/"):
                where = "a relative path" if not posixpath.isabs(text) else "outside the shared storage"
                fail(field_of(bare), "%r is %s: a job reads and writes only inside the shared storage %s "
                     "(its own files under %s)" % (item, where, shared_root, job_dir),
                     "give an absolute path under %s, e.g. %s/%s" % (shared_root, job_dir, bare.rsplit(".", 1)[-1]))


def _dataset_columns(entry, overrides):
    """The columns every data file of a workload must have, from the catalog's ``dataset_columns``.

    :param entry: catalog entry; ``dataset_columns`` is a list of column names (``a.b`` names field
        ``b`` of struct column ``a``) or ``{key, default}``: the column the trainer override ``key``
        names (verl's ``data.prompt_key``, ``data.messages_key``), ``default`` when it is not set.
    :param overrides: dict, the merged trainer overrides.
    :returns: dict column -> why it is needed (the override naming it, or "read by the reward").
    """
    columns = {}
    for item in entry.get("dataset_columns") or []:
        if isinstance(item, dict):
            given = overrides.get(item["key"], overrides.get("+" + item["key"]))
            columns[str(given if isinstance(given, str) and given else item["default"])] = item["key"]
        else:
            columns[str(item)] = "read by verl's reward managers"
    return columns


def _watchdog(given):
    """The progress watchdog's limits from the inventory (``submit_job_watchdog``), or None when it is off.

    :param given: dict ``{first_step_s, floor_s, factor}`` (seconds, seconds, a multiple of the
        median step time) or None; ``first_step_s: 0`` turns the watchdog off.
    :returns: dict of three floats, or None.
    :raises JobSpecError: when a value is not a positive number.
    """
    if not given:
        return None
    if not isinstance(given, dict):
        fail("submit_job_watchdog", "is a %s, not a mapping" % kind_of(given), "give first_step_s, floor_s and factor")
    if given.get("first_step_s") in (0, "0", None):
        return None
    out = {}
    for key in ("first_step_s", "floor_s", "factor"):
        value = given.get(key)
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                pass
        if not is_positive(value):
            fail("submit_job_watchdog.%s" % key, "%r is not a positive number" % (value,),
                 "set submit_job_watchdog in the inventory (first_step_s: 0 turns the watchdog off)")
        out[key] = float(value)
    return out


def _entry_options(entry, metrics, watchdog, defaults, job_dir):
    """mvp_entry.py's options: the dashboard port and the metrics file (stamped into ``logs/steps.jsonl`` for the
    ledger); for a trainer with verl's file logger its metrics file and the watchdog's limits, for a script the job's
    ``logs/metrics.jsonl`` (a script that writes verl's lines there, such as the selftest playing phases, is stamped;
    no watchdog)."""
    if not entry.get("module"):
        metrics, watchdog = job_paths(job_dir)["metrics"], None
    options = ["--dashboard-port", str(defaults.get("dashboard_port") or 8265)]
    if metrics:
        options += ["--metrics", metrics]
        if watchdog:
            limits = (watchdog["first_step_s"], watchdog["floor_s"], watchdog["factor"])
            options += ["--watchdog", "%g,%g,%g" % limits]
    return options


def mvp_job_spec(request, catalog, defaults):
    """Build and validate the job spec of one submission.

    :param request: dict, the request as ``mvp_request.check_request`` returns it (every key of
        ``mvp_request.REQUEST_TABLE``, normalised: the ``ray_job_request`` action checked it); taken as given.
    :param catalog: dict, workload name -> catalog entry.
    :param defaults: dict with ``shared_root``, ``tools_subdir`` (optional), ``code_id``, ``python``,
        ``worker_resource``, ``address`` (this cluster's Jobs API, from
        ``mvp_ray_dashboard_port``), ``expect_workers`` (int) and optionally ``model``,
        ``snapshot_shares_device`` (bool: the snapshot's trainer passes the
        catalog's ``driver_device.key`` on to its worker group),
        ``site_overrides`` (the inventory's ``submit_job_site_overrides``: workload ->
        {trainer_overrides, env_vars}, applied between the catalog and the
        request), ``wandb_key_set`` (bool: a W&B key reaches the workers),
        ``resume_run`` (the earlier run named by the request's ``resume_from``, as
        ``ray_job_runs`` returns it, or None when it has no job directory) and
        ``repeat`` (``{group, index, count}`` of ``submit.yml -e repeat=N``, or None),
        ``ray_base`` (``submit_job_ray_base``: ray keys merged under the request's),
        ``priority_classes`` (``submit_job_priority_classes``: class name -> number),
        ``watchdog`` (``submit_job_watchdog``: {first_step_s, floor_s, factor} of the progress watchdog
        mvp_entry.py runs beside a trainer), ``dashboard_port`` (the head's dashboard port, where
        the watchdog asks for the stacks of the job's actors) and ``checkpoints_keep``
        (``submit_job_checkpoints_keep``: checkpoints each job keeps, k; DEFAULT_KEEP when absent, null: all).
    :returns: dict with submission_id, workload, shared_root, job_dir, code_id,
        code_path, entrypoint, runtime_env, entrypoint_resources,
        entrypoint_num_cpus, trainer_overrides, hydra_config, hydra_overrides
        (the ``key=value`` strings of the entrypoint), data_files, needs_gpus,
        gpus_requested, model, model_path, dataset, reward_fn_path, address,
        tools_dir (the job tools folder, ``<shared_root>/<tools_subdir>``),
        notes (list of str: decisions the user should know about),
        site_overrides (what the inventory added), metrics_file (verl's file
        logger output, ``<job_dir>/logs/metrics.jsonl``, or None), world_size
        (trainer.nnodes x trainer.n_gpus_per_node, None for scripts), resume_from
        (``{submission_id, step, path, world_size}`` of the checkpoint it continues,
        or None), repeat, driver_device (the catalog's ``driver_device`` when the
        builder set it itself - the head check then probes the snapshot - else None) and
        watchdog (the watchdog's limits when it runs: a trainer with verl's file logger, else None).
        Also dataset_columns (column -> why the workload reads it, from the catalog's
        ``dataset_columns``; checked on the head against the parquet schema) and hydra_dir
        (``<job_dir>/logs/hydra``, Hydra's output, passed as ``hydra.run.dir``; None for scripts),
        override_sources (override key without +/~ -> ``catalog``, ``inventory``, ``request`` or
        ``project``: where each trainer override came from; empty for scripts),
        checkpoints (``{setting, models}``: per checkpointed model verl's keep-last-k key, k and where
        it came from, see mvp_retention.retention; None for scripts), and paths (every file and folder of the job directory by its name in ``mvp_job.FILES``,
        plus ``job_dir``: tasks take paths from here instead of joining them), and cluster_lock
        (the catalog's ``cluster_lock`` the job takes through mvp_gate.py, see :func:`cluster_lock`; or None),
        and mlflow (``{experiment, run_name, port, ui_url, credentials_file}`` of the job's MLflow run, made by ray_job at
        submission; None for scripts or without a tracking server).
        Before returning, the rules that need what the builder adds are applied: every path of the overrides
        inside the shared storage and Hydra's inside the job (_check_paths), the run a resumed job continues
        (_resume), retention, W&B and MLflow loggers, the job's shape, the cluster's queue and watchdog settings.
    :raises JobSpecError: naming the field and the fix.
    """
    workload, submission_id, shared_root = request["workload"], request["submission_id"], request["shared_root"]
    entry, code_path, dataset, model = catalog[workload], request["code_path"], request["dataset"], request["model"]
    reward = request["reward_fn_path"]
    ray = ray_settings(request["ray"], defaults)
    job_dir = make_job_dir(shared_root, submission_id)
    tools = posixpath.join(shared_root, defaults.get("tools_subdir") or TOOLS_SUBDIR)

    merged = merge_overrides(entry, workload, request, defaults)
    overrides, site, explicit = merged["overrides"], merged["site"], merged["explicit"]
    data = _data_files(entry, shared_root, dataset)
    model_dir = model_path(shared_root, model)
    notes = []
    device_set = _driver_device(entry, explicit, defaults, overrides, notes)
    if entry.get("module"):
        _fill_trainer_overrides(overrides, entry, defaults, submission_id, job_dir, data, model_dir, reward)
    resumed = _resume(request, entry, workload, overrides, shared_root, defaults, notes, job_dir)
    checkpoints = _retention(entry, overrides, merged, defaults, notes) if entry.get("module") else None
    if entry.get("module"):
        _check_paths(overrides, merged["field_of"], shared_root, job_dir)
        _check_wandb(overrides, merged["field_of"], defaults)
    mlflow = _mlflow(entry, overrides, merged["field_of"], defaults, workload, submission_id)
    watchdog = _watchdog(defaults.get("watchdog")) if entry.get("module") else None
    metrics = (posixpath.join(job_dir, METRICS_FILE)
               if entry.get("module") and "file" in as_list(overrides.get("trainer.logger")) else None)
    shape = _job_shape(entry, overrides, merged["field_of"])
    job_priority = priority_of(request, defaults)
    entrypoint = _entrypoint(entry, overrides, defaults, tools, job_dir, shared_root, data, metrics, watchdog, shape,
                             job_priority["value"], (defaults.get("restart") or {}).get("queued_since"))
    if shape["pools"]:
        notes.append("queued by its whole shape, %s (%s): the trainer starts when it fits what is free and every "
                     "job submitted before it has started (mvp_gate.py: MVP_GATE_WAIT/MVP_GATE_GO in the driver log, "
                     "logs/queue.json; status.yml shows the queue)" % (mvp_queue.describe(shape), shape["rule"]))
    lock = cluster_lock(entry, overrides)
    if lock:
        notes.append("cluster lock %s: %s runs after any earlier job holding it (still PENDING or RUNNING) has "
                     "ended, waiting in its entrypoint (mvp_gate.py: MVP_GATE_WAIT/MVP_GATE_GO in the driver log); "
                     "%s" % (lock, submission_id, entry.get("cluster_lock_why") or "the jobs share cluster-wide state"))
    env_vars = _env_vars(entry, site, ray, request, metrics, code_path, tools, submission_id, job_dir)
    needs_gpus, gpus = _gpus(entry, overrides, explicit, notes)
    trainer = bool(entry.get("module"))
    spec = {
        "submission_id": submission_id,
        "dataset_columns": _dataset_columns(entry, overrides) if data else {},
        "hydra_dir": posixpath.join(job_dir, HYDRA_SUBDIR) if trainer else None,
        "workload": workload,
        "shared_root": shared_root,
        "job_dir": job_dir,
        "paths": job_paths(job_dir),
        "tools_dir": tools,
        "code_id": posixpath.basename(code_path),
        "code_path": code_path,
        "model": model,
        "model_path": model_dir if entry.get("model_key") else None,
        "dataset": dataset,
        "reward_fn_path": reward,
        "entrypoint": entrypoint,
        "cluster_lock": lock,
        "shape": shape,
        "runtime_env": dict(ray["runtime_env"], env_vars=env_vars),
        "entrypoint_resources": ray["entrypoint_resources"],
        "entrypoint_num_cpus": ray["entrypoint_num_cpus"],
        "trainer_overrides": overrides if trainer else {},
        "override_sources": _override_sources(overrides, entry, merged) if trainer else {},
        "hydra_config": entry.get("hydra_config"),
        "hydra_overrides": hydra_overrides(overrides) if trainer else [],
        "data_files": data,
        "needs_gpus": needs_gpus,
        "gpus_requested": gpus,
        "address": ray["address"],
        "notes": notes,
        "site_overrides": site,
        "metrics_file": metrics,
        "world_size": _world_size(overrides) if trainer else None,
        "resume_from": resumed,
        "checkpoints": checkpoints,
        "repeat": defaults.get("repeat") or None,
        "driver_device": device_set,
        "watchdog": watchdog if metrics else None,
        "max_restarts": request["max_restarts"],
        "priority": job_priority,
        "preemptible": preemption(request, job_priority, defaults),
        "owner": request.get("owner"),
        "team": request.get("team"),
        "project": request.get("project"),
        "restart": defaults.get("restart") or None,
        "mlflow": mlflow,
        "request": request,
        "accept_unsupported_release": request["accept_unsupported_release"],
    }
    spec["check"] = head_check(spec, entry, defaults, merged["field_of"])
    return spec


def _confined(spec, field_of):
    """Every path the job reads or writes, with the folder its resolved form must stay in (the head checks).

    The rules as written are the builder's (model under ``common/models``, reward under ``user/code``, every
    ``*_dir``/``*_path``/``*_file(s)`` override under the shared root, Hydra's under the job directory); a link
    can still lead elsewhere, so the head resolves each path (``os.path.realpath``) and compares it with the
    resolved folder here. Models are links into ``hf/`` made by ``ray_model``, so a model must resolve inside
    the shared root; the dataset inside ``datasets/``, the reward inside ``user/code``, the resume source
    inside ``jobs/``.

    :param spec: dict, the job spec being built.
    :param field_of: function override key -> the field named in messages.
    :returns: list of ``{field, path, root}`` (absolute paths; ``${...}`` interpolations left out).
    """
    root, job_dir = spec["shared_root"], spec["job_dir"]
    out = [{"field": "code_path", "path": spec["code_path"], "root": root}]
    if spec.get("model_path"):
        out.append({"field": "model", "path": spec["model_path"], "root": root})
    if spec.get("reward_fn_path"):
        out.append({"field": "reward_fn_path", "path": spec["reward_fn_path"],
                    "root": posixpath.join(root, "user/code")})
    for key, path in sorted((spec.get("data_files") or {}).items()):
        out.append({"field": "dataset (%s)" % key, "path": path,
                    "root": posixpath.join(root, "datasets") if spec.get("dataset") else root})
    if spec.get("resume_from"):
        out.append({"field": "resume_from", "path": spec["resume_from"]["path"], "root": posixpath.join(root, "jobs")})
    known = set(item["path"] for item in out)
    for key, value in sorted((spec.get("trainer_overrides") or {}).items()):
        bare = key.lstrip("+~")
        if key.startswith("~") or value is None or not _is_path_key(key):
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            text = str(item)
            if "${" in text or not posixpath.isabs(text) or posixpath.normpath(text) in known:
                continue
            known.add(posixpath.normpath(text))
            out.append({"field": field_of(bare), "path": posixpath.normpath(text),
                        "root": job_dir if bare.startswith("hydra.") else root})
    return out


def _reward_check(spec, entry, python):
    """The reward function the head imports before submission (mvp_reward_check), or None without one.

    verl reads the function's name and extra keyword arguments beside the path (``<prefix>.name``, default
    ``compute_score``; ``<prefix>.reward_kwargs``), where ``<prefix>`` is the catalog's ``reward_fn_key``
    without its last name.
    """
    if not spec.get("reward_fn_path") or not entry.get("module"):
        return None
    prefix = (entry.get("reward_fn_key") or "custom_reward_function.path").rsplit(".", 1)[0]
    plain = {key.lstrip("+~"): value for key, value in (spec.get("trainer_overrides") or {}).items()}
    name = plain.get(prefix + ".name") or "compute_score"
    kwargs = plain.get(prefix + ".reward_kwargs")
    return {"python": python, "snapshot": spec["code_path"], "path": spec["reward_fn_path"], "name": str(name),
            "name_key": prefix + ".name", "kwargs": kwargs if isinstance(kwargs, dict) else {}}


def head_check(spec, entry, defaults, field_of=None):
    """What the head looks at before the job is submitted (the ``ray_job`` module's ``check``), from the spec.

    :param spec: dict, the job spec (mvp_job_spec's result without ``check``).
    :param entry: dict, the workload's catalog entry.
    :param defaults: dict, the builder's defaults (``python``: the nodes' Python; ``verl_checks``:
        ``{enabled, timeout}`` of verl's own start-up checks, timeout in seconds).
    :param field_of: function override key -> the field named in messages (default: ``trainer_overrides.<key>``).
    :returns: dict with ``paths`` (name -> path that must exist: the snapshot's marker and package, the model,
        the reward, every job tool of ``mvp_copies``, the data files), ``hydra`` (the trainer config and its
        overrides, or None), ``datasets``, ``verl_checks``, ``room`` (each or None), ``resolved_config_file``,
        ``confine`` (see :func:`_confined`), ``reward`` (see :func:`_reward_check`) and ``release`` (the nodes'
        Python and the snapshot, for a verl trainer: mvp_release).
    """
    field_of = field_of or (lambda key: "trainer_overrides.%s" % key)
    code, tools = spec["code_path"], spec["tools_dir"]
    paths = {"mvp_marker.py": code + "/mvp_marker.py", "verl/__init__.py": code + "/verl/__init__.py",
             "model": spec.get("model_path"), "reward_fn_path": spec.get("reward_fn_path")}
    paths.update(("job_tools/%s" % name, posixpath.join(tools, name)) for name in installed_names("job_tools"))
    paths.update(spec.get("data_files") or {})
    hydra = ({"config_dir": code + "/verl/trainer/config", "config_name": spec["hydra_config"],
              "overrides": spec["hydra_overrides"]} if spec.get("hydra_config") else None)
    verl = defaults.get("verl_checks") or {}
    python = defaults.get("python") or "python"
    return {
        "paths": paths,
        "hydra": hydra,
        "datasets": ({"dir": spec["shared_root"] + "/datasets", "files": spec["data_files"]}
                     if spec.get("dataset_columns") else None),
        "verl_checks": ({"python": python, "snapshot": code, "timeout": int(verl.get("timeout") or 180)}
                        if hydra and verl.get("enabled") else None),
        "room": ({"model_path": spec["model_path"], "shared_root": spec["shared_root"]}
                 if spec.get("checkpoints") and spec.get("model_path") else None),
        "resolved_config_file": spec["paths"]["resolved_config"],
        "confine": _confined(spec, field_of),
        "reward": _reward_check(spec, entry, python),
        # A verl trainer: the snapshot's verl release against what the nodes' platform layer declares.
        "release": {"python": python, "snapshot": code} if entry.get("module") else None,
    }


def _override_sources(overrides, entry, merged):
    """Where each trainer override came from: key (without +/++/~) -> catalog, inventory, request or project.

    ``project`` is a key the builder set itself (paths, model, data, device, resume); report.yml names
    these sources when it explains why two runs' effective configurations differ.
    """
    sources = {}
    for key in overrides:
        if key in merged["user"]:
            source = "request"
        elif key in merged["site_overrides"]:
            source = "inventory"
        elif key in (entry.get("trainer_overrides") or {}) and overrides[key] == entry["trainer_overrides"][key]:
            source = "catalog"
        else:
            source = "project"
        sources[key.lstrip("+~")] = source
    return sources


def _data_files(entry, shared_root, dataset):
    """The workload's data files: catalog override key -> absolute path (under ``datasets/<dataset>`` if given)."""
    data = {key: posixpath.join(shared_root, path) for key, path in (entry.get("data_files") or {}).items()}
    if dataset:
        data = {key: posixpath.join(shared_root, "datasets", dataset, posixpath.basename(path))
                for key, path in data.items()}
    return data


def mvp_driver_device_probe(request, catalog, defaults):
    """The file of the snapshot to read before the spec is built: does its trainer pass the driver's device on?

    A catalog entry's ``driver_device`` (``key``, ``value``, ``probe_file``, ``probe_marker``) is set by the
    builder unless the request or the inventory sets that key, or the snapshot's trainer passes it on to its
    worker group (``probe_marker`` found in ``probe_file``): then the builder leaves the snapshot's default,
    which keeps training on the GPUs. The caller reads that file (on the head, where the snapshot is) and
    builds the spec once with ``defaults["snapshot_shares_device"]`` set to what it found.

    :param request: dict, the checked request (as for mvp_job_spec).
    :param catalog: dict, the workload catalog (mvp_workloads).
    :param defaults: dict, the builder's defaults.
    :returns: dict ``{"path": <absolute file of the snapshot>, "marker": str}``, or None when nothing is to read.
    """
    entry = catalog[request["workload"]]
    device = entry.get("driver_device")
    if not device or device["key"] in merge_overrides(entry, request["workload"], request, defaults)["explicit"]:
        return None
    return {"path": posixpath.join(request["code_path"], device["probe_file"]), "marker": device["probe_marker"]}


def mvp_resume_probe(request, catalog, defaults):
    """The file of the snapshot to read before a resumed job's spec is built: how does its trainer restore data?

    A catalog entry's ``resume.data_state.restore_file`` names the snapshot file whose code restores the data
    loader's saved state; ``mvp_resume.restore_guarded`` decides from its text whether it skips that state at
    an epoch boundary (verl#7401). The caller reads the file on the head and builds the spec once with
    ``defaults["resume_restore_source"]`` set to its text.

    :param request: dict, the checked request (as for mvp_job_spec).
    :param catalog: dict, the workload catalog (mvp_workloads).
    :param defaults: dict, the builder's defaults (unused: the probe needs only the request and the catalog).
    :returns: dict ``{"path": <absolute file of the snapshot>}``, or None without ``resume_from`` or a
        ``data_state`` in the workload's entry.
    """
    del defaults
    if not request["resume_from"]:
        return None
    state = (catalog[request["workload"]].get("resume") or {}).get("data_state")
    if not state or not state.get("restore_file"):
        return None
    return {"path": posixpath.join(request["code_path"], state["restore_file"])}


def _driver_device(entry, explicit, defaults, overrides, notes):
    """Set the catalog's ``driver_device`` override unless the snapshot passes it to its workers.

    :returns: the catalog's driver_device dict when the builder set it (the head check then probes
        the snapshot), else None (set by the request or the inventory, or left to the snapshot).
    """
    device = entry.get("driver_device")
    if not device or device["key"] in explicit:
        return None
    if defaults.get("snapshot_shares_device"):
        notes.append("%s left at the snapshot's default: %s passes it to the worker group, so %s "
                     "would move training off the GPUs" % (device["key"], device["probe_file"], device["value"]))
        return None
    overrides[device["key"]] = device["value"]
    return dict(device)


def _fill_trainer_overrides(overrides, entry, defaults, submission_id, job_dir, data, model_dir, reward):
    """Set the overrides the builder owns for a verl trainer: data, model, checkpoints, reward, Hydra's output."""
    overrides.update(data)
    for key in as_list(entry.get("model_key")):
        overrides[key] = model_dir
    overrides["trainer.default_local_dir"] = job_paths(job_dir)["checkpoints"]
    if reward:
        overrides[entry.get("reward_fn_key") or "custom_reward_function.path"] = reward
    if entry.get("worker_resource_key"):
        overrides.setdefault(entry["worker_resource_key"], defaults["worker_resource"])
    overrides.setdefault("trainer.experiment_name", submission_id)
    overrides["hydra.run.dir"] = posixpath.join(job_dir, HYDRA_SUBDIR)


def _check_wandb(overrides, field_of, defaults):
    """Refuse trainer.logger with wandb when no W&B API key reaches the workers."""
    if "wandb" in as_list(overrides.get("trainer.logger")) and not defaults.get("wandb_key_set"):
        fail(field_of("trainer.logger"), "asks for wandb but no W&B API key is configured",
             "set mvp_wandb_api_key (keep it in Ansible Vault; it reaches the workers' environment, "
             "never the job's files), or drop wandb from trainer.logger (console and file work offline)")


def _mlflow(entry, overrides, field_of, defaults, workload, submission_id):
    """Log a verl trainer to the head's MLflow tracking server: ``mlflow`` joins ``trainer.logger``.

    verl's ``mlflow`` logger (verl/utils/tracking.py) reads ``MLFLOW_TRACKING_URI`` and continues the
    run ``MLFLOW_RUN_ID`` names; ray_job sets both at submission, after it made (or found) the run.
    One experiment per workload; the run is named after the run's first submission id (a restarted
    attempt, ``defaults['restart']['run']``, continues it).

    :returns: dict ``experiment``, ``run_name``, ``port`` (int), ``ui_url`` (str, '' for the head's
        node IP), ``credentials_file`` (the server's basic-auth config on the head, '' without auth),
        ``service_dir`` (the server's service folder on the head: a server still starting there is waited for);
        None for a script or with ``defaults['mlflow']['enabled']`` false.
    :raises JobSpecError: trainer.logger asks for mlflow while the cluster runs no tracking server.
    """
    tracking = defaults.get("mlflow") or {}
    if not entry.get("module"):
        return None
    loggers = as_list(overrides.get("trainer.logger"))
    if not tracking.get("enabled"):
        if "mlflow" in loggers:
            fail(field_of("trainer.logger"), "asks for mlflow but the cluster runs no MLflow tracking server",
                 "set mvp_mlflow_enabled: true and run site.yml, or drop mlflow from trainer.logger")
        return None
    if "mlflow" not in loggers:
        overrides["trainer.logger"] = (loggers or ["console"]) + ["mlflow"]
    return {"experiment": workload, "run_name": (defaults.get("restart") or {}).get("run") or submission_id,
            "port": int(tracking.get("port") or 5000), "ui_url": tracking.get("ui_url") or "",
            "credentials_file": tracking.get("credentials_file") or "",
            "service_dir": tracking.get("service_dir") or ""}


def _entrypoint(entry, overrides, defaults, tools, job_dir, shared_root, data, metrics, watchdog, shape, rank=0,
                since=None):
    """The job's entrypoint: mvp_entry.py (driver log, watchdog) running the trainer or the project's script.

    :param rank: int, the job's priority number: the gate's ``--priority`` (mvp_queue.pool_options; 0 leaves it out).
    :param since: float or None, a continued run's place in the queue (its first attempt's submission time, seconds
        since the epoch: the gate's ``--since``); None for a first attempt.
    :returns: str, one shell-quoted command line.
    """
    python = defaults.get("python", "python")
    if entry.get("module"):
        program = [python, "-u", "-m", entry["module"]] + hydra_overrides(overrides)
    else:
        program = [python, "-u", posixpath.join(tools, entry["script"]),
                   "--job-dir", job_dir, "--shared-root", shared_root,
                   "--expect-workers", str(defaults.get("expect_workers", 1)),
                   "--worker-resource", defaults["worker_resource"]]
        for key in sorted(data):
            program += ["--data", "%s=%s" % (key, data[key])]
    gate = []
    lock = cluster_lock(entry, overrides)
    if shape["pools"] or lock:
        queue = _queue_settings(defaults.get("queue"))
        gate = ([python, "-u", posixpath.join(tools, GATE_TOOL)] + mvp_queue.pool_options(shape, rank, since)
                + (["--lock", lock] if lock else [])
                + ["--log", job_paths(job_dir)["driver_log"],
                   "--dashboard-port", str(defaults.get("dashboard_port") or 8265),
                   "--worker-resource", defaults["worker_resource"],
                   "--poll", "%g" % queue["poll_s"], "--max-wait", "%g" % queue["max_wait_s"],
                   "--unfit-wait", "%g" % queue["unfit_wait_s"], "--"])
    return " ".join(shlex.quote(p) for p in
                    gate + [python, "-u", posixpath.join(tools, "mvp_entry.py"),
                            "--log", job_paths(job_dir)["driver_log"]]
                    + _entry_options(entry, metrics, watchdog, defaults, job_dir) + ["--"] + program)


GATE_TOOL = mvp_queue.GATE_TOOL


"""The job tool that queues a job: its trainer starts when its shape fits and no earlier job waits."""


# The queue's settings when the inventory gives none (mvp_queue_*: seconds between two looks, the
# longest wait of any job, the longest wait while the ALIVE workers cannot hold the shape; 0: none).
QUEUE_DEFAULTS = {"poll_s": 2.0, "max_wait_s": 0.0, "unfit_wait_s": 900.0}


def _queue_settings(given):
    """The queue's settings (``defaults['queue']``, from ``mvp_queue_*``) over QUEUE_DEFAULTS.

    :returns: dict of three floats >= 0 (``poll_s`` > 0).
    :raises JobSpecError: naming the setting whose value is not a number >= 0.
    """
    out = dict(QUEUE_DEFAULTS)
    for key, value in (given or {}).items():
        if key not in out:
            fail("submit_job_queue.%s" % key, "is not a queue setting", "use %s" % ", ".join(sorted(out)))
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = -1.0
        if number < 0 or (key == "poll_s" and number == 0) or isinstance(value, bool):
            fail("submit_job_queue.%s" % key, "%r is not a number of seconds >= 0%s" % (
                value, " (> 0)" if key == "poll_s" else ""), "set submit_job_queue in the inventory (0: no bound)")
        out[key] = number
    return out


def _job_shape(entry, overrides, field_of):
    """The job's shape (mvp_queue.job_shape): the resource pools verl will ask Ray for, and the rule.

    :returns: dict with ``pools`` (empty for a script: it reserves nothing and is never queued).
    :raises JobSpecError: naming the key whose value is not a whole number >= 0.
    """
    try:
        shape = mvp_queue.job_shape(entry.get("module"), overrides)
    except ValueError as exc:
        key = str(exc).split(" ", 1)[0]
        fail(field_of(key), str(exc), "give a whole number, e.g. trainer.nnodes: 2, trainer.n_gpus_per_node: 8")
    if shape is None:
        return {"pools": [], "gpus": 0, "cpus": 0, "keys": [],
                "rule": "%s: a script that reserves no GPU and no placement group; never queued"
                        % (entry.get("script") or entry.get("module") or "the entrypoint")}
    return shape


def cluster_lock(entry, overrides):
    """The cluster-wide lock a job of this catalog entry takes (mvp_gate.py), or None.

    The catalog's ``cluster_lock`` names it (``transfer_queue`` for verl's PPO/GRPO trainer, whose
    TransferQueue controller is one named actor per Ray cluster); an entry may say which override
    turns the shared state off with ``cluster_lock_off`` (``{key: value}``, e.g.
    ``{trainer.use_v1: false}``: the legacy trainer uses no TransferQueue).

    :param entry: dict, the workload's catalog entry.
    :param overrides: dict, the job's merged trainer overrides.
    :returns: str or None.
    """
    lock = entry.get("cluster_lock")
    if not lock:
        return None
    for key, value in (entry.get("cluster_lock_off") or {}).items():
        if str(overrides.get(key, "")).lower() == str(value).lower():
            return None
    return str(lock)


def _env_vars(entry, site, ray, request, metrics, code_path, tools, submission_id, job_dir):
    """The job's environment: catalog, inventory, ray.runtime_env, request, then the variables the project owns.

    :returns: dict str -> str (runtime_env.env_vars).
    """
    env_vars = {str(k): str(v) for k, v in (entry.get("env_vars") or {}).items()}
    env_vars.update(env_strings(site.get("env_vars")))
    env_vars.update(ray["runtime_env"]["env_vars"])
    env_vars.update(request["env_vars"])
    if metrics:
        env_vars["VERL_FILE_LOGGER_PATH"] = metrics
    env_vars["PYTHONPATH"] = "%s:%s:${PYTHONPATH}" % (code_path, tools)
    env_vars["MVP_SUBMISSION_ID"] = submission_id
    env_vars["MVP_JOB_DIR"] = job_dir
    return env_vars


def _gpus(entry, overrides, explicit, notes):
    """Whether the job needs GPUs and how many (trainer.nnodes x trainer.n_gpus_per_node).

    :returns: tuple (bool, int); a GPU workload the request or inventory set to trainer.device=cpu needs none.
    :raises JobSpecError: when the shape is not whole numbers.
    """
    needs_gpus = bool(entry.get("needs_gpus"))
    if needs_gpus and overrides.get("trainer.device") == "cpu" and "trainer.device" in explicit:
        notes.append("trainer.device=cpu: the job trains on CPUs; its shape still counts the logical GPUs verl's "
                     "bundles ask for (the CPU platform names GPU when the workers advertise them)")
        return False, 0
    if not needs_gpus:
        return False, 0
    shape = _shape(overrides, per_node_default=1)
    if shape is None:
        fail("trainer_overrides.trainer.nnodes", "trainer.nnodes and trainer.n_gpus_per_node must be integers",
             "give whole numbers, e.g. trainer.nnodes: 2, trainer.n_gpus_per_node: 8")
    return True, shape[0] * shape[1]


def mvp_is_submission_id(value):
    """True when ``value`` is a str matching SUBMISSION_ID_RE (the one submission id pattern).

    Also used for report ids and resume_from; a job directory is ``<shared_root>/jobs/<id>``.
    """
    return is_submission_id(value)


def mvp_submit_cmd(spec):
    """Return the ``ray job submit`` command line equivalent to a job spec (one line).

    :param spec: dict from mvp_job_spec.
    :returns: str, shell-quoted; runnable on the head.
    """
    argv = ["ray", "job", "submit", "--address", spec["address"],
            "--submission-id", spec["submission_id"],
            "--entrypoint-num-cpus", str(spec["entrypoint_num_cpus"]),
            "--entrypoint-resources", json.dumps(spec["entrypoint_resources"], sort_keys=True),
            "--runtime-env-json", json.dumps(spec["runtime_env"], sort_keys=True),
            "--no-wait", "--"]
    return " ".join(shlex.quote(a) for a in argv) + " " + spec["entrypoint"]
