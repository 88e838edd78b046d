# -*- coding: utf-8 -*-
"""The job spec builder: a user's job request -> one validated job spec (and the head check's problems).

The job spec is the single source for everything ``submit_job`` writes and
submits: ``config/job_spec.json``, ``config/runtime_env.json``,
``config/submit_cmd.txt`` and the ``ray_job`` module's arguments.

Format of a request (docs/jobs.md, "Submitting jobs"): a dict with the keys in
``REQUEST_KEYS``; ``workload`` names an entry of the workload catalog
(``mvp_workloads`` in ``inventories/common/all/00-mvp-workloads.yml``).

All validation errors raise ``JobSpecError`` (a ValueError) with a message naming the
field and the fix, before anything is written; the ``mvp_jobspec`` filters (a thin adapter)
turn it into Ansible's ``JobSpecError``. Names of the job directory's files come from
``mvp_job`` (the job contract).
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex

from ansible_collections.mvp.ray.plugins.module_utils.mvp_job import (
    FILES, SUBMISSION_ID_RE, is_submission_id, job_dir as make_job_dir, job_paths)
from ansible_collections.mvp.ray.plugins.module_utils import mvp_queue
from ansible_collections.mvp.ray.plugins.module_utils.mvp_retention import (
    DEFAULT_KEEP, RetentionError, keep_setting, retention, room_problem)


class JobSpecError(ValueError):
    """A request the builder refuses; the message names the field and the fix."""


REQUEST_KEYS = frozenset([
    "submission_id", "workload", "shared_root", "code_id", "code_path", "reward_fn_path",
    "model", "dataset", "ray", "trainer_overrides", "env_vars", "resume_from", "max_restarts",
])
RAY_KEYS = frozenset(["address", "entrypoint_resources", "entrypoint_num_cpus", "runtime_env"])
# Job tools (mvp_entry.py, selftest.py) on the shared storage: <shared_root>/<tools_subdir>
# (mvp_job_tools_subdir; this when the defaults name none).
TOOLS_SUBDIR = "common/code/mvp_tools"
# runtime_env keys a request may set (Ray's runtime_env reference, ray.runtime_env.RuntimeEnv).
RUNTIME_ENV_KEYS = frozenset(["env_vars", "config", "worker_process_setup_hook", "nsight"])
# runtime_env keys that would replace the code snapshot or the nodes' Python: refused, with the reason.
RUNTIME_ENV_REFUSED = {
    "working_dir": "would upload a folder as the job's code, shadowing the code snapshot",
    "py_modules": "would put other modules before the code snapshot",
    "excludes": "only applies to working_dir, which is refused",
    "pip": "would install packages into a per-job virtualenv, changing the nodes' Python",
    "uv": "would install packages into a per-job virtualenv, changing the nodes' Python",
    "conda": "would run the job in another Python environment",
    "container": "would run the job in another image",
    "image_uri": "would run the job in another image",
    "py_executable": "would run the job with another Python",
    "java_jars": "would add Java code to the job",
}
# env_vars the builder or the cluster sets: name (or prefix ending in "*") -> request field to use instead.
OWNED_ENV = {
    "PYTHONPATH": "code_id (or code_path): the snapshot comes first on PYTHONPATH, then the job tools",
    "MVP_SUBMISSION_ID": "submission_id",
    "MVP_JOB_DIR": "submission_id (the job directory is <shared_root>/jobs/<submission_id>)",
    "MVP_INTERNAL_TOKEN": "mvp_internal_token in the inventory (Vault): the token never goes into a job's files",
    "VERL_FILE_LOGGER_PATH": "trainer_overrides trainer.logger with `file`: metrics go to <job_dir>/logs/metrics.jsonl",
    "RAY_ADDRESS": "nothing: the driver connects to the cluster it was placed on",
    "RAY_AUTH_*": "mvp_ray_auth_token in the inventory (Vault): the token never goes into a job's files",
    "WANDB_API_KEY": "mvp_wandb_api_key in the inventory (Vault): the key never goes into a job's files",
    "MLFLOW_TRACKING_URI": "mvp_mlflow_enabled and mvp_mlflow_port: jobs log to the head's tracking server",
    "MLFLOW_RUN_ID": "nothing: the job's MLflow run is made (or, for a restart, continued) at submission",
}
# Hydra override keys: optional +, ++ or ~ prefix, then dotted names (verl's keys, `@` for packages).
OVERRIDE_KEY_RE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-@/]+)*$")
# Relative folder names under shared_root (dataset): no absolute path, no "..".
RELATIVE_RE = re.compile(r"^(?!/)(?!.*(^|/)\.\.(/|$))[A-Za-z0-9._/-]+$")
# verl's file logger writes one JSON object per step ({"step": N, "data": {...}}) to
# $VERL_FILE_LOGGER_PATH (verl/utils/tracking.py FileLogger); the builder points it at the job's metrics file.
METRICS_FILE = FILES["metrics"]
# Hydra's own output (.hydra/config.yaml, the trainer's log): set by the builder to <job_dir>/<HYDRA_SUBDIR>
# (without it Hydra writes to outputs/<date>/<time> under the driver's working directory, on the worker).
HYDRA_SUBDIR = FILES["hydra"]
# Override keys whose value is a path (by the last name of the key), and Hydra's own output keys:
# a job reads and writes inside the shared storage only, and Hydra writes inside the job directory.
PATH_KEY_SUFFIXES = ("_dir", "_path", "_file", "_files")
HYDRA_PATH_KEYS = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.output_subdir",
                   "hydra.runtime.output_dir")
# Sizes that must be whole numbers >= 1 when given (verl would fail late, or train nothing, on 0 or less).
POSITIVE_KEYS = (
    "trainer.nnodes", "trainer.n_gpus_per_node", "trainer.total_epochs", "trainer.total_training_steps",
    "data.train_batch_size", "data.micro_batch_size_per_gpu", "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.actor.ppo_mini_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.actor.ppo_epochs", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "critic.ppo_mini_batch_size",
    "critic.ppo_micro_batch_size_per_gpu", "critic.ppo_epochs",
)
# Of these, the ones that may be null (verl then derives them or takes the other spelling).
NULLABLE_KEYS = frozenset([
    "trainer.total_training_steps", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "critic.ppo_micro_batch_size_per_gpu",
    "critic.ppo_mini_batch_size",
])
# verl's group-relative advantage estimators (verl.trainer.ppo.core_algos.AdvantageEstimator): they compare
# the responses of one prompt, so actor_rollout_ref.rollout.n must be 2 or more.
GROUP_ESTIMATORS = frozenset(["grpo", "grpo_passk", "grpo_vectorized", "rloo", "rloo_vectorized", "opo", "gdpo"])


def _as_list(value):
    """Return a value that may be None, one string or a list as a list of str.

    Used for catalog keys (``model_key``) and verl's ``trainer.logger`` (Hydra
    accepts a single string there too).
    """
    if not value:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def mvp_loggers(value, field="trainer_overrides.trainer.logger"):
    """Normalise verl's ``trainer.logger`` in any spelling to one list of logger names.

    verl reads ``trainer.logger`` as a list, or wraps one string (verl/utils/tracking.py
    ``Tracking``); users also write Hydra's list syntax as text (``"[console,wandb]"``, from
    ``-e`` or a shell habit), which Hydra would then pass as one quoted string.

    :param value: None, a str (``console``, ``console,file``, ``[console, 'wandb']``) or a list of str.
    :param field: str, the field named in messages.
    :returns: list of str (no empty names, order kept, duplicates dropped), or None for None.
    :raises JobSpecError: for a mapping, a number, or a list item that is not a name.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        items = text.split(",")
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        _fail(field, "is a %s, not a list of logger names" % _kind(value), "give for example [console, file]")
    names = []
    for item in items:
        if not isinstance(item, str):
            _fail(field, "%r is not a logger name" % (item,), "give names such as console, file, wandb")
        name = item.strip().strip("'\"").strip()
        if name and name not in names:
            names.append(name)
    if not names:
        _fail(field, "names no logger", "give at least one, e.g. [console, file]")
    return names


def _fail(field, problem, fix):
    raise JobSpecError("job spec field '%s': %s. Fix: %s" % (field, problem, fix))


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


def _resume(request, entry, workload, overrides, user_overrides, shared_root, defaults, notes):
    """Point a job at the newest checkpoint of the run named by ``resume_from``.

    Sets the catalog's ``resume`` keys (verl: ``trainer.resume_mode=resume_path``,
    ``trainer.resume_from_path=<job>/checkpoints/global_step_N``) in ``overrides``.

    The checkpoint is the newest complete one (mvp_runs.latest_checkpoint: every rank's shards,
    and verl's latest_checkpointed_iteration.txt not older) of that run, else of the runs it
    continued (``defaults['resume_parents']``), each skipped one named in ``notes``.

    :returns: dict ``{submission_id, step, path, world_size, checkpoint_of, skipped}`` or None
        without resume_from (``checkpoint_of``: the run that saved the checkpoint; ``skipped``:
        the incomplete newer ones, ``{submission_id, step, path, why}``).
    :raises JobSpecError: when the earlier run is unknown, of another workload,
        has no complete checkpoint or was trained with another world size, or when the request
        sets the resume keys itself.
    """
    earlier = request.get("resume_from")
    if earlier is None:
        return None
    if not is_submission_id(earlier):
        _fail("resume_from", "%r is not a submission id" % (earlier,),
              "give the submission_id of an earlier job of this workload (status.yml lists them)")
    keys = entry.get("resume")
    if not entry.get("module") or not keys:
        _fail("resume_from", "workload %s cannot continue from a checkpoint" % workload,
              "drop resume_from (only workloads with `resume` keys in the catalog resume)")
    run = defaults.get("resume_run")
    if not run:
        _fail("resume_from", "no job directory %s/jobs/%s" % (shared_root, earlier),
              "give the submission_id of an earlier job (status.yml lists the job directories)")
    if run.get("workload") != workload:
        _fail("resume_from", "%s is a %s job, this is %s" % (earlier, run.get("workload"), workload),
              "resume from a job of the same workload")
    ckpt, source = _complete_checkpoint(run, defaults.get("resume_parents") or [], notes)
    if not ckpt:
        _fail("resume_from", "%s saved no %scheckpoint (no %sglobal_step_N under %s/jobs/%s/checkpoints%s)"
              % (earlier, "complete " if run.get("checkpoint") else "", "complete " if run.get("checkpoint") else "",
                 shared_root, earlier, _skipped_text(run)),
              "resume from a job that reached trainer.save_freq steps, or lower save_freq in its next run")
    world = _world_size(overrides)
    if ckpt.get("world_size") and world and ckpt["world_size"] != world:
        _fail("resume_from", "%s was trained with world size %s (checkpoint %s), this job has %s "
              "(trainer.nnodes x trainer.n_gpus_per_node)" % (earlier, ckpt["world_size"], ckpt["path"], world),
              "set trainer.nnodes and trainer.n_gpus_per_node so that their product is %d" % ckpt["world_size"])
    for key in (keys["mode_key"], keys["path_key"]):
        if key in user_overrides:
            _fail("trainer_overrides.%s" % key, "is set by resume_from",
                  "drop it from trainer_overrides, resume_from picks the checkpoint")
    overrides[keys["mode_key"]] = "resume_path"
    overrides[keys["path_key"]] = ckpt["path"]
    notes.append("continues %s from the checkpoint at step %d%s (%s); it trains until trainer.total_epochs"
                 % (earlier, ckpt["step"], "" if source == earlier else " of " + source, ckpt["path"]))
    earlier_overrides = (run.get("spec") or {}).get("trainer_overrides") or {}
    if ckpt["step"] == run.get("last_step") and all(
            str(overrides.get(key)) == str(earlier_overrides.get(key))
            for key in ("trainer.total_epochs", "trainer.total_training_steps")):
        notes.append("%s ended at step %d with the same trainer.total_epochs and trainer.total_training_steps: "
                     "verl restores its data loader at the end, so this job has nothing left to train; "
                     "raise one of them to train further" % (earlier, ckpt["step"]))
    return {"submission_id": earlier, "step": ckpt["step"], "path": ckpt["path"],
            "world_size": ckpt.get("world_size"), "checkpoint_of": source,
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
    :returns: (checkpoint dict or None, submission id of the run that saved it).
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
            return ckpt, current.get("submission_id")
        parent = ((current.get("spec") or {}).get("resume_from") or {}).get("submission_id")
        if parent:
            notes.append("%s saved no complete checkpoint: looking at the run it continued, %s"
                         % (current.get("submission_id"), parent))
        current = by_id.get(parent)
    return None, None


def _retention(entry, overrides, merged, defaults, notes):
    """Set verl's keep-last-k keys (the catalog's ``retention``) to ``mvp_checkpoints_keep``, unless given.

    The inventory's ``mvp_job_overrides`` and the request win over the setting (mvp_retention.retention).

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
        _fail(*exc.args)


def _kind(value):
    """Name a value's type for messages the way YAML users call it (Ansible wraps values in its own classes)."""
    if value is None:
        return "null"
    for types, name in ((bool, "boolean"), ((int, float), "number"), (str, "text"), (dict, "mapping"),
                        ((list, tuple), "list")):
        if isinstance(value, types):
            return name
    return type(value).__name__


def _is_positive(value):
    """True for a finite int or float > 0 that is not a bool (NaN and infinity are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def _owned_env(name):
    """Return the request field to use instead when ``name`` is an env var the builder owns, else None."""
    for owned, use in OWNED_ENV.items():
        if name == owned or (owned.endswith("*") and name.startswith(owned[:-1])):
            return use
    return None


def _check_env(env, field):
    """Check a mapping of environment variables from a request or the inventory.

    :param env: the value given (None allowed).
    :param field: str, the request field for messages (``env_vars``).
    :returns: dict str -> str (numbers and booleans as text: ``true``/``false``).
    :raises JobSpecError: for a non-mapping, a name that is not an environment
        variable name, a value that is a list or mapping, or a variable the project owns.
    """
    if env is None:
        return {}
    if not isinstance(env, dict):
        _fail(field, "is a %s, not a mapping" % _kind(env), "give NAME: value pairs")
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            _fail(field, "%r is not an environment variable name" % (name,),
                  "use letters, digits and '_', not starting with a digit")
        use = _owned_env(name)
        if use:
            _fail("%s.%s" % (field, name), "is set by the project for every job", "drop it; use %s" % use)
        if isinstance(value, (dict, list)) or value is None:
            _fail("%s.%s" % (field, name), "is a %s, not a text" % _kind(value),
                  "give a string, number or boolean (a list or mapping has no environment form)")
        out[name] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _owned_overrides(entry):
    """Trainer override keys the builder fills in for a catalog entry: key -> request field to use instead."""
    owned = {"trainer.default_local_dir": "nothing: checkpoints go to <job_dir>/checkpoints"}
    if entry.get("module"):
        owned["hydra.run.dir"] = "nothing: Hydra's output goes to <job_dir>/%s" % HYDRA_SUBDIR
    for key in entry.get("data_files") or {}:
        owned[key] = "dataset (a folder under <shared_root>/datasets with the same file names)"
    for key in _as_list(entry.get("model_key")):
        owned[key] = "model (a folder under <shared_root>/common/models, or an absolute path)"
    if entry.get("reward_fn_key"):
        owned[entry["reward_fn_key"]] = "reward_fn_path"
    if entry.get("resume"):
        owned[entry["resume"]["path_key"]] = "resume_from (the submission id of the job to continue)"
    return owned


def _check_overrides(overrides, field, entry, workload):
    """Check trainer overrides from a request or the inventory.

    :param overrides: the value given (None allowed).
    :param field: str, the field for messages (``trainer_overrides``).
    :param entry: the workload's catalog entry.
    :returns: dict (the overrides, unchanged).
    :raises JobSpecError: for a non-mapping, a key that is not a Hydra override key,
        overrides for a script workload, or a key the builder owns (naming the field to use).
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        _fail(field, "is a %s, not a mapping" % _kind(overrides),
              "give dotted keys, e.g. trainer.total_epochs: 1")
    if overrides and not entry.get("module"):
        _fail(field, "workload %s is a script of the project, not a verl trainer" % workload,
              "drop trainer_overrides for %s" % workload)
    owned = _owned_overrides(entry)
    for key in overrides:
        if not isinstance(key, str) or not OVERRIDE_KEY_RE.match(key):
            _fail(field, "%r is not a Hydra override key" % (key,),
                  "use dotted names such as trainer.total_epochs (+key adds one, ~key removes one)")
        bare = key.lstrip("+~")
        if bare in owned:
            _fail("%s.%s" % (field, key), "is set by the job spec builder", "drop it; use %s" % owned[bare])
    return overrides


def _field_namer(site_overrides, user_overrides, workload):
    """Return a function naming where an override key came from: the request's field, else the inventory's."""
    def field_of(key):
        for given in (user_overrides, site_overrides):
            for name in given:
                if name.lstrip("+~") == key:
                    return ("trainer_overrides.%s" % name if given is user_overrides
                            else "mvp_job_overrides.%s.trainer_overrides.%s" % (workload, name))
        return "trainer_overrides.%s" % key
    return field_of


def _whole(value):
    """``value`` as an int when it is a whole number (int, or text of digits with an optional sign), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.match(r"^[+-]?\d+$", value.strip()):
        return int(value)
    return None


def _check_sizes(overrides, field_of):
    """Refuse sizes, counts, steps and epochs that are not whole numbers >= 1 (POSITIVE_KEYS).

    verl itself fails on them only after the model is loaded (``trainer.nnodes: 0`` dies in its
    resource pool, verl.single_controller.ray.base.RayResourcePool) or trains nothing and
    succeeds (``trainer.total_epochs: -1``: the fit loop ``range(total_epochs)`` is empty). A
    group-relative advantage estimator (GROUP_ESTIMATORS) needs ``actor_rollout_ref.rollout.n``
    >= 2: with one response per prompt verl's compute_grpo_outcome_advantage uses the raw score
    and RLOO's leave-one-out baseline has nothing to leave out.

    :param overrides: dict, the merged trainer overrides (catalog, inventory, request).
    :param field_of: function key -> the field named in messages (see _field_namer).
    :raises JobSpecError: naming the key and the fix. Values that are not numbers (text,
        interpolations ``${...}``) are left to the head's type check (mvp_hydra.validate_overrides).
    """
    plain = {key.lstrip("+~"): value for key, value in overrides.items()}
    for key in POSITIVE_KEYS:
        if key not in plain:
            continue
        value = plain[key]
        if value is None and key in NULLABLE_KEYS:
            continue
        number = _whole(value)
        if number is None and not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            continue  # not a number at all: the head's type check names what the key expects
        if number is None or number < 1:
            _fail(field_of(key), "must be a whole number >= 1, got %r" % (value,),
                  "set %s to 1 or more%s" % (key, " (or null to let verl derive it)" if key in NULLABLE_KEYS else ""))
    estimator = plain.get("algorithm.adv_estimator")
    rollouts = _whole(plain.get("actor_rollout_ref.rollout.n", 1))
    if isinstance(estimator, str) and estimator in GROUP_ESTIMATORS and rollouts is not None and rollouts < 2:
        _fail(field_of("actor_rollout_ref.rollout.n"),
              "algorithm.adv_estimator=%s compares the responses to one prompt, but rollout.n is %d" % (estimator, rollouts),
              "set actor_rollout_ref.rollout.n to 2 or more (verl's GRPO examples use 5), or use adv_estimator gae")


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
                    _fail(field_of(bare), "%r would put Hydra's files outside its run folder" % (value,),
                          "drop it (Hydra's output goes to %s/%s) or give a plain sub-folder name"
                          % (job_dir, HYDRA_SUBDIR))
                continue
            text = posixpath.normpath(str(value)) if posixpath.isabs(str(value)) else None
            if text is None or not (text + "/").startswith(job_dir + "/"):
                _fail(field_of(bare), "%r is outside the job directory %s: Hydra would write its files there, "
                      "on whichever worker runs the driver" % (value, job_dir),
                      "drop it; Hydra's output goes to %s/%s" % (job_dir, HYDRA_SUBDIR))
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            text = str(item)
            if "${" in text:
                continue
            if not posixpath.isabs(text) or not (posixpath.normpath(text) + "/").startswith(shared_root + "/"):
                where = "a relative path" if not posixpath.isabs(text) else "outside the shared storage"
                _fail(field_of(bare), "%r is %s: a job reads and writes only inside the shared storage %s "
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


def _check_ray(ray, defaults):
    """Check the request's ``ray`` block.

    :param ray: the value given (None allowed).
    :param defaults: builder defaults (``address``, ``worker_resource``).
    :returns: dict with address, entrypoint_resources, entrypoint_num_cpus, runtime_env.
    :raises JobSpecError: for unknown keys, another Jobs API address, resources
        that are not positive numbers or do not ask for the worker resource, a
        non-positive CPU count, or runtime_env keys that would shadow the code snapshot
        or change the Python (Ray's runtime_env keys).
    """
    if ray is None:
        ray = {}
    if not isinstance(ray, dict):
        _fail("ray", "is a %s, not a mapping" % _kind(ray),
              "give keys among %s" % ", ".join(sorted(RAY_KEYS)))
    bad = sorted(set(ray) - RAY_KEYS, key=str)
    if bad:
        _fail("ray.%s" % bad[0], "unknown key (known: %s)" % ", ".join(sorted(RAY_KEYS)), "remove or correct it")
    address = defaults["address"]
    given = ray.get("address")
    if given is not None and (not isinstance(given, str) or given.rstrip("/") != address.rstrip("/")):
        _fail("ray.address", "%r is not this cluster's Jobs API (%s)" % (given, address),
              "drop ray.address; the port comes from mvp_ray_dashboard_port in the inventory")
    resource = defaults["worker_resource"]
    resources = ray.get("entrypoint_resources")
    if resources is None:
        resources = {resource: 1}
    if not isinstance(resources, dict) or not resources:
        _fail("ray.entrypoint_resources", "must be a non-empty mapping of resource name -> amount",
              "give for example {%s: 1}" % resource)
    for name, amount in resources.items():
        if not isinstance(name, str) or not _is_positive(amount):
            _fail("ray.entrypoint_resources", "%r: %r is not a resource name with a positive amount" % (name, amount),
                  "give names with numbers > 0, e.g. {%s: 1}" % resource)
    if resource not in resources:
        _fail("ray.entrypoint_resources", "does not ask for %s, so the driver could land on the head" % resource,
              "keep %s: 1 in it (the driver must run on a worker)" % resource)
    num_cpus = ray.get("entrypoint_num_cpus")
    num_cpus = 1 if num_cpus is None else num_cpus
    if not _is_positive(num_cpus):
        _fail("ray.entrypoint_num_cpus", "%r is not a positive number" % (num_cpus,), "give for example 1")
    runtime_env = ray.get("runtime_env")
    if runtime_env is None:
        runtime_env = {}
    if not isinstance(runtime_env, dict):
        _fail("ray.runtime_env", "is a %s, not a mapping" % _kind(runtime_env), "give Ray runtime_env keys")
    for key in sorted(runtime_env, key=str):
        if key in RUNTIME_ENV_REFUSED:
            _fail("ray.runtime_env.%s" % key, RUNTIME_ENV_REFUSED[key],
                  "drop it; jobs run the code snapshot (code_id) with the nodes' Python (build the image for packages)")
        if key not in RUNTIME_ENV_KEYS:
            _fail("ray.runtime_env.%s" % key, "unknown or unsupported runtime_env key (allowed: %s)"
                  % ", ".join(sorted(RUNTIME_ENV_KEYS)), "remove or correct it")
    runtime_env = dict(runtime_env)
    runtime_env["env_vars"] = _check_env(runtime_env.get("env_vars"), "ray.runtime_env.env_vars")
    return {"address": address, "entrypoint_resources": resources, "entrypoint_num_cpus": num_cpus,
            "runtime_env": runtime_env}


def _watchdog(given):
    """The progress watchdog's limits from the inventory (``mvp_watchdog``), or None when it is off.

    :param given: dict ``{first_step_s, floor_s, factor}`` (seconds, seconds, a multiple of the
        median step time) or None; ``first_step_s: 0`` turns the watchdog off.
    :returns: dict of three floats, or None.
    :raises JobSpecError: when a value is not a positive number.
    """
    if not given:
        return None
    if not isinstance(given, dict):
        _fail("mvp_watchdog", "is a %s, not a mapping" % _kind(given), "give first_step_s, floor_s and factor")
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
        if not _is_positive(value):
            _fail("mvp_watchdog.%s" % key, "%r is not a positive number" % (value,),
                  "set mvp_watchdog in the inventory (first_step_s: 0 turns the watchdog off)")
        out[key] = float(value)
    return out


def _entry_options(entry, metrics, watchdog, defaults):
    """mvp_entry.py's options for a trainer: its metrics file, the watchdog's limits, the dashboard port."""
    if not entry.get("module"):
        return []
    options = ["--dashboard-port", str(defaults.get("dashboard_port") or 8265)]
    if metrics:
        options += ["--metrics", metrics]
        if watchdog:
            limits = (watchdog["first_step_s"], watchdog["floor_s"], watchdog["factor"])
            options += ["--watchdog", "%g,%g,%g" % limits]
    return options


def _check_text(request, key, pattern=None, hint=""):
    """Return request[key] when it is None or a non-empty string (matching ``pattern``), else fail naming it."""
    value = request.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or (pattern is not None and not pattern.match(value)):
        _fail(key, "%r is not %s" % (value, "a text" if pattern is None else "valid"),
              hint or "give a string")
    return value


def mvp_job_spec(request, catalog, defaults):
    """Build and validate the job spec of one submission.

    :param request: dict, the user's request (keys in REQUEST_KEYS).
    :param catalog: dict, workload name -> catalog entry.
    :param defaults: dict with ``shared_root``, ``tools_subdir`` (optional), ``code_id``, ``python``,
        ``worker_resource``, ``address`` (this cluster's Jobs API, from
        ``mvp_ray_dashboard_port``), ``expect_workers`` (int) and optionally ``model``,
        ``snapshot_shares_device`` (bool: the snapshot's trainer passes the
        catalog's ``driver_device.key`` on to its worker group),
        ``site_overrides`` (the inventory's ``mvp_job_overrides``: workload ->
        {trainer_overrides, env_vars}, applied between the catalog and the
        request), ``wandb_key_set`` (bool: a W&B key reaches the workers),
        ``resume_run`` (the earlier run named by the request's ``resume_from``, as
        ``ray_job_runs`` returns it, or None when it has no job directory) and
        ``repeat`` (``{group, index, count}`` of ``submit.yml -e repeat=N``, or None),
        ``ray_base`` (``mvp_ray_base``: ray keys merged under the request's, then checked),
        ``watchdog`` (``mvp_watchdog``: {first_step_s, floor_s, factor} of the progress watchdog
        mvp_entry.py runs beside a trainer), ``dashboard_port`` (the head's dashboard port, where
        the watchdog asks for the stacks of the job's actors) and ``checkpoints_keep``
        (``mvp_checkpoints_keep``: checkpoints each job keeps, k; DEFAULT_KEEP when absent, null: all).
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
        Before returning, the merged overrides are checked: loggers normalised (mvp_loggers),
        sizes >= 1 and GRPO's ``rollout.n`` >= 2 (_check_sizes), every path inside the shared
        storage and Hydra's inside the job (_check_paths); the model under ``common/models``,
        the reward function under ``user/code``.
    :raises JobSpecError: naming the field and the fix.
    """
    identity = _check_identity(request, catalog, defaults)
    workload, entry, shared_root = identity["workload"], identity["entry"], identity["shared_root"]
    submission_id, code_path = identity["submission_id"], identity["code_path"]
    dataset = _check_text(request, "dataset", RELATIVE_RE,
                          "give a folder name under <shared_root>/datasets (no absolute path, no '..')")
    model = _check_text(request, "model") or defaults.get("model")
    reward = _check_text(request, "reward_fn_path")
    ray = _check_request_ray(request.get("ray"), defaults)
    job_dir = make_job_dir(shared_root, submission_id)
    tools = posixpath.join(shared_root, defaults.get("tools_subdir") or TOOLS_SUBDIR)

    merged = _merge_overrides(entry, workload, request, defaults)
    overrides, site, explicit = merged["overrides"], merged["site"], merged["explicit"]
    data = _data_files(entry, shared_root, dataset)
    model_path = _model_path(entry, workload, model, shared_root)
    reward = _reward_path(request, site, workload, reward, shared_root)
    notes = []
    device_set = _driver_device(entry, explicit, defaults, overrides, notes)
    if entry.get("module"):
        _fill_trainer_overrides(overrides, entry, defaults, submission_id, job_dir, data, model_path, reward)
    resumed = _resume(request, entry, workload, overrides, merged["user"], shared_root, defaults, notes)
    checkpoints = _retention(entry, overrides, merged, defaults, notes) if entry.get("module") else None
    if entry.get("module"):
        _check_paths(overrides, merged["field_of"], shared_root, job_dir)
        _check_wandb(overrides, merged["field_of"], defaults)
    mlflow = _mlflow(entry, overrides, merged["field_of"], defaults, workload, submission_id)
    watchdog = _watchdog(defaults.get("watchdog")) if entry.get("module") else None
    metrics = (posixpath.join(job_dir, METRICS_FILE)
               if entry.get("module") and "file" in _as_list(overrides.get("trainer.logger")) else None)
    shape = _job_shape(entry, overrides, merged["field_of"])
    entrypoint = _entrypoint(entry, overrides, defaults, tools, job_dir, shared_root, data, metrics, watchdog, shape)
    if shape["pools"]:
        notes.append("queued by its whole shape, %s (%s): the trainer starts when it fits what is free and every "
                     "job submitted before it has started (mvp_gate.py: MVP_GATE_WAIT/MVP_GATE_GO in the driver log, "
                     "logs/queue.json; status.yml shows the queue)" % (mvp_queue.describe(shape), shape["rule"]))
    lock = cluster_lock(entry, overrides)
    if lock:
        notes.append("cluster lock %s: %s runs after any earlier job holding it (still PENDING or RUNNING) has "
                     "ended, waiting in its entrypoint (mvp_gate.py: MVP_GATE_WAIT/MVP_GATE_GO in the driver log); "
                     "%s" % (lock, submission_id, entry.get("cluster_lock_why") or "the jobs share cluster-wide state"))
    env_vars = _env_vars(entry, site, workload, ray, request, metrics, code_path, tools, submission_id, job_dir)
    needs_gpus, gpus = _gpus(entry, overrides, explicit, notes)
    trainer = bool(entry.get("module"))
    max_restarts = _max_restarts(request, entry, workload, defaults)
    return {
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
        "model_path": model_path if entry.get("model_key") else None,
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
        "max_restarts": max_restarts,
        "restart": defaults.get("restart") or None,
        "mlflow": mlflow,
        "request": request,
    }


def _max_restarts(request, entry, workload, defaults):
    """How often a run may be continued automatically after a retryable failure (submit_job).

    :returns: int >= 0: the request's ``max_restarts``, else ``defaults['max_restarts']``
        (``mvp_max_restarts``), 0 for a workload that cannot resume (no catalog ``resume`` keys).
    :raises JobSpecError: for a value that is not a whole number >= 0, or > 0 for such a workload.
    """
    given = request.get("max_restarts")
    value = defaults.get("max_restarts", 0) if given is None else given
    if isinstance(value, bool) or not ((isinstance(value, int) and value >= 0)
                                       or (isinstance(value, str) and value.isdigit())):
        _fail("max_restarts" if given is not None else "mvp_max_restarts",
              "%r is not a whole number >= 0" % (value,), "give 0 (never restart) or the restarts allowed, e.g. 2")
    value = int(value)
    if value and not (entry.get("module") and entry.get("resume")):
        if given is not None:
            _fail("max_restarts", "workload %s cannot continue from a checkpoint" % workload,
                  "drop max_restarts (only workloads with `resume` keys in the catalog restart)")
        return 0
    return value


def _check_identity(request, catalog, defaults):
    """Check the request as a whole and the keys that place the job: workload, id, shared root, code.

    :returns: dict with workload, entry (its catalog entry), submission_id, shared_root (normalised)
        and code_path (the snapshot, ``<shared_root>/common/code/verl/<code_id>`` unless given).
    :raises JobSpecError: for a request that is not a mapping, an unknown key, an unknown workload,
        a bad submission id, a relative shared root, or a code path outside it.
    """
    if not isinstance(request, dict):
        _fail("job spec", "is a %s, not a mapping" % _kind(request),
              "give key: value pairs (a JobSpec YAML file or -e variables)")
    unknown = sorted(set(request) - REQUEST_KEYS, key=str)
    if unknown:
        _fail(unknown[0], "unknown key (known: %s)" % ", ".join(sorted(REQUEST_KEYS)),
              "remove or correct it")
    workload = request.get("workload")
    if not isinstance(workload, str) or workload not in catalog:
        _fail("workload", "unknown workload %r" % (workload,),
              "use one of %s (exactly as written)" % ", ".join(sorted(catalog)))
    submission_id = request.get("submission_id")
    if not is_submission_id(submission_id):
        _fail("submission_id", "%r does not match %s" % (submission_id, SUBMISSION_ID_RE.pattern),
              "use letters, digits, '.', '_' or '-', starting with a letter or digit; "
              "no '/', no spaces, at most 128 characters")
    shared_root = _check_text(request, "shared_root") or defaults["shared_root"]
    if not posixpath.isabs(shared_root):
        _fail("shared_root", "%r is not an absolute path" % shared_root, "use for example /private")
    shared_root = posixpath.normpath(shared_root)
    code_id = _check_text(request, "code_id", SUBMISSION_ID_RE,
                          "give a snapshot name under <shared_root>/common/code/verl/ (letters, digits, '.', '_', '-')")
    code_id = code_id or defaults["code_id"]
    code_path = _check_text(request, "code_path") or posixpath.join(shared_root, "common/code/verl", code_id)
    code_path = posixpath.normpath(code_path)
    if not code_path.startswith(shared_root + "/"):
        _fail("code_path", "%s is outside shared_root %s" % (code_path, shared_root),
              "point it at a snapshot under %s/common/code/verl/" % shared_root)
    return {"workload": workload, "entry": catalog[workload], "submission_id": submission_id,
            "shared_root": shared_root, "code_path": code_path}


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


def _check_request_ray(given_ray, defaults):
    """The request's ``ray`` keys merged over the inventory's ``mvp_ray_base``, then checked (_check_ray)."""
    base = defaults.get("ray_base") or {}
    if not isinstance(base, dict):
        _fail("mvp_ray_base", "is a %s, not a mapping" % _kind(base),
              "give ray keys (%s) in the inventory or -e @jobspecs/ray-base.yaml" % ", ".join(sorted(RAY_KEYS)))
    return _check_ray(dict(base, **given_ray) if isinstance(given_ray, dict) else (given_ray or dict(base)), defaults)


def _merge_overrides(entry, workload, request, defaults):
    """Merge the trainer overrides: the catalog's, then the inventory's (mvp_job_overrides), then the request's.

    Checks each layer (_check_overrides), normalises the loggers, and refuses sizes below 1 and a
    save_freq that is not a whole number >= 1.

    :returns: dict with overrides (merged), site (the inventory's entry for the workload), user (the
        request's overrides), explicit (set of keys the inventory or the request set) and field_of
        (key -> the field to name in messages).
    :raises JobSpecError: naming the field and the fix.
    """
    overrides = dict(entry.get("trainer_overrides") or {})
    site = (defaults.get("site_overrides") or {}).get(workload) or {}
    if not isinstance(site, dict) or set(site) - {"trainer_overrides", "env_vars", "reward_fn_path"}:
        _fail("mvp_job_overrides.%s" % workload,
              "must be a mapping with trainer_overrides, env_vars and/or reward_fn_path",
              "fix the inventory setting mvp_job_overrides")
    site_overrides = dict(_check_overrides(site.get("trainer_overrides"),
                                           "mvp_job_overrides.%s.trainer_overrides" % workload, entry, workload))
    overrides.update(site_overrides)
    user_overrides = _check_overrides(request.get("trainer_overrides"), "trainer_overrides", entry, workload)
    overrides.update(user_overrides)
    field_of = _field_namer(site_overrides, user_overrides, workload)
    if entry.get("module") and overrides.get("trainer.logger") is not None:
        overrides["trainer.logger"] = mvp_loggers(overrides["trainer.logger"], field_of("trainer.logger"))
    _check_sizes(overrides, field_of)
    save_freq = overrides.get("trainer.save_freq", 1)
    if not isinstance(save_freq, int) or isinstance(save_freq, bool) or save_freq < 1:
        _fail("trainer_overrides.trainer.save_freq", "must be an integer >= 1, got %r" % (save_freq,),
              "set trainer.save_freq to 1 or more")
    return {"overrides": overrides, "site": site, "user": user_overrides, "site_overrides": site_overrides,
            "explicit": set(site_overrides) | set(user_overrides), "field_of": field_of}


def _data_files(entry, shared_root, dataset):
    """The workload's data files: catalog override key -> absolute path (under ``datasets/<dataset>`` if given)."""
    data = {key: posixpath.join(shared_root, path) for key, path in (entry.get("data_files") or {}).items()}
    if dataset:
        data = {key: posixpath.join(shared_root, "datasets", dataset, posixpath.basename(path))
                for key, path in data.items()}
    return data


def _model_path(entry, workload, model, shared_root):
    """The model folder: a name under ``<shared_root>/common/models`` or an absolute path inside it, or None.

    :raises JobSpecError: when it leads outside ``common/models``, or the workload needs a model and has none.
    """
    models_dir = posixpath.join(shared_root, "common/models")
    model_path = None
    if model:
        model_path = posixpath.normpath(model if posixpath.isabs(model) else posixpath.join(models_dir, model))
        if not model_path.startswith(models_dir + "/"):
            _fail("model", "%r leads to %s, outside %s" % (model, model_path, models_dir),
                  "give a folder name under %s (prepare_data puts models there), without '..'" % models_dir)
    if entry.get("model_key") and not model_path:
        _fail("model", "workload %s needs a model" % workload,
              "set model to a folder name under %s, or mvp_model in the inventory" % models_dir)
    return model_path


def _reward_path(request, site, workload, reward, shared_root):
    """The reward function: the request's, else the inventory's for this workload; it must be under user/code.

    :raises JobSpecError: naming the field that gave a path outside ``<shared_root>/user/code``.
    """
    reward = reward or site.get("reward_fn_path")
    code_dir = posixpath.join(shared_root, "user/code")
    if reward and not (posixpath.isabs(reward) and posixpath.normpath(reward).startswith(code_dir + "/")):
        _fail("reward_fn_path" if request.get("reward_fn_path") else "mvp_job_overrides.%s.reward_fn_path" % workload,
              "%s is outside %s" % (reward, code_dir), "put the reward function under %s/ and give its absolute path"
              % code_dir)
    return reward


def mvp_driver_device_probe(request, catalog, defaults):
    """The file of the snapshot to read before the spec is built: does its trainer pass the driver's device on?

    A catalog entry's ``driver_device`` (``key``, ``value``, ``probe_file``, ``probe_marker``) is set by the
    builder unless the request or the inventory sets that key, or the snapshot's trainer passes it on to its
    worker group (``probe_marker`` found in ``probe_file``): then the builder leaves the snapshot's default,
    which keeps training on the GPUs. The caller reads that file (on the head, where the snapshot is) and
    builds the spec once with ``defaults["snapshot_shares_device"]`` set to what it found.

    :param request: dict, the request (as for mvp_job_spec).
    :param catalog: dict, the workload catalog (mvp_workloads).
    :param defaults: dict, the builder's defaults.
    :returns: dict ``{"path": <absolute file of the snapshot>, "marker": str}``, or None when nothing is to read.
    :raises JobSpecError: for the request errors mvp_job_spec would raise first (workload, id, code path).
    """
    identity = _check_identity(request, catalog, defaults)
    device = identity["entry"].get("driver_device")
    if not device:
        return None
    if device["key"] in _merge_overrides(identity["entry"], identity["workload"], request, defaults)["explicit"]:
        return None
    return {"path": posixpath.join(identity["code_path"], device["probe_file"]), "marker": device["probe_marker"]}


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


def _fill_trainer_overrides(overrides, entry, defaults, submission_id, job_dir, data, model_path, reward):
    """Set the overrides the builder owns for a verl trainer: data, model, checkpoints, reward, Hydra's output."""
    overrides.update(data)
    for key in _as_list(entry.get("model_key")):
        overrides[key] = model_path
    overrides["trainer.default_local_dir"] = job_paths(job_dir)["checkpoints"]
    if reward:
        overrides[entry.get("reward_fn_key") or "custom_reward_function.path"] = reward
    if entry.get("worker_resource_key"):
        overrides.setdefault(entry["worker_resource_key"], defaults["worker_resource"])
    overrides.setdefault("trainer.experiment_name", submission_id)
    overrides["hydra.run.dir"] = posixpath.join(job_dir, HYDRA_SUBDIR)


def _check_wandb(overrides, field_of, defaults):
    """Refuse trainer.logger with wandb when no W&B API key reaches the workers."""
    if "wandb" in _as_list(overrides.get("trainer.logger")) and not defaults.get("wandb_key_set"):
        _fail(field_of("trainer.logger"), "asks for wandb but no W&B API key is configured",
              "set mvp_wandb_api_key (keep it in Ansible Vault; it reaches the workers' environment, "
              "never the job's files), or drop wandb from trainer.logger (console and file work offline)")


def _mlflow(entry, overrides, field_of, defaults, workload, submission_id):
    """Log a verl trainer to the head's MLflow tracking server: ``mlflow`` joins ``trainer.logger``.

    verl's ``mlflow`` logger (verl/utils/tracking.py) reads ``MLFLOW_TRACKING_URI`` and continues the
    run ``MLFLOW_RUN_ID`` names; ray_job sets both at submission, after it made (or found) the run.
    One experiment per workload; the run is named after the run's first submission id (a restarted
    attempt, ``defaults['restart']['run']``, continues it).

    :returns: dict ``experiment``, ``run_name``, ``port`` (int), ``ui_url`` (str, '' for the head's
        node IP), ``credentials_file`` (the server's basic-auth config on the head, '' without auth);
        None for a script or with ``defaults['mlflow']['enabled']`` false.
    :raises JobSpecError: trainer.logger asks for mlflow while the cluster runs no tracking server.
    """
    tracking = defaults.get("mlflow") or {}
    if not entry.get("module"):
        return None
    loggers = _as_list(overrides.get("trainer.logger"))
    if not tracking.get("enabled"):
        if "mlflow" in loggers:
            _fail(field_of("trainer.logger"), "asks for mlflow but the cluster runs no MLflow tracking server",
                  "set mvp_mlflow_enabled: true and run site.yml, or drop mlflow from trainer.logger")
        return None
    if "mlflow" not in loggers:
        overrides["trainer.logger"] = (loggers or ["console"]) + ["mlflow"]
    return {"experiment": workload, "run_name": (defaults.get("restart") or {}).get("run") or submission_id,
            "port": int(tracking.get("port") or 5000), "ui_url": tracking.get("ui_url") or "",
            "credentials_file": tracking.get("credentials_file") or ""}


def _entrypoint(entry, overrides, defaults, tools, job_dir, shared_root, data, metrics, watchdog, shape):
    """The job's entrypoint: mvp_entry.py (driver log, watchdog) running the trainer or the project's script.

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
        gate = ([python, "-u", posixpath.join(tools, GATE_TOOL)] + mvp_queue.pool_options(shape)
                + (["--lock", lock] if lock else [])
                + ["--log", job_paths(job_dir)["driver_log"],
                   "--dashboard-port", str(defaults.get("dashboard_port") or 8265),
                   "--worker-resource", defaults["worker_resource"],
                   "--poll", "%g" % queue["poll_s"], "--max-wait", "%g" % queue["max_wait_s"],
                   "--unfit-wait", "%g" % queue["unfit_wait_s"], "--"])
    return " ".join(shlex.quote(p) for p in
                    gate + [python, "-u", posixpath.join(tools, "mvp_entry.py"),
                            "--log", job_paths(job_dir)["driver_log"]]
                    + _entry_options(entry, metrics, watchdog, defaults) + ["--"] + program)


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
            _fail("mvp_queue.%s" % key, "is not a queue setting", "use %s" % ", ".join(sorted(out)))
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = -1.0
        if number < 0 or (key == "poll_s" and number == 0) or isinstance(value, bool):
            _fail("mvp_queue.%s" % key, "%r is not a number of seconds >= 0%s" % (
                value, " (> 0)" if key == "poll_s" else ""), "set it in 00-mvp-jobs.yml (0: no bound)")
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
        _fail(field_of(key), str(exc), "give a whole number, e.g. trainer.nnodes: 2, trainer.n_gpus_per_node: 8")
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


def _env_vars(entry, site, workload, ray, request, metrics, code_path, tools, submission_id, job_dir):
    """The job's environment: catalog, inventory, ray.runtime_env, request, then the variables the project owns.

    :returns: dict str -> str (runtime_env.env_vars).
    :raises JobSpecError: for a variable the project owns or a value with no environment form.
    """
    env_vars = {str(k): str(v) for k, v in (entry.get("env_vars") or {}).items()}
    env_vars.update(_check_env(site.get("env_vars"), "mvp_job_overrides.%s.env_vars" % workload))
    env_vars.update(ray["runtime_env"]["env_vars"])
    env_vars.update(_check_env(request.get("env_vars"), "env_vars"))
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
        _fail("trainer_overrides.trainer.nnodes", "trainer.nnodes and trainer.n_gpus_per_node must be integers",
              "give whole numbers, e.g. trainer.nnodes: 2, trainer.n_gpus_per_node: 8")
    return True, shape[0] * shape[1]


def mvp_parse_jobspec(text, path):
    """Parse a JobSpec YAML document into a request dict.

    :param text: str, the file's content.
    :param path: str, the file's path (for messages).
    :returns: dict (an empty file gives {}).
    :raises JobSpecError: naming the file when it is not YAML or not a mapping.
    """
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise JobSpecError("jobspec %s is not valid YAML (%s). Fix the file; nothing was written."
                           % (path, " ".join(str(exc).split())))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise JobSpecError("jobspec %s holds a %s, not a mapping of job spec keys (%s)."
                           % (path, type(data).__name__, ", ".join(sorted(REQUEST_KEYS))))
    return data


def mvp_is_submission_id(value):
    """True when ``value`` is a str matching SUBMISSION_ID_RE (the one submission id pattern).

    Also used for report ids and resume_from; a job directory is ``<shared_root>/jobs/<id>``.
    """
    return is_submission_id(value)


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


def mvp_submit_problems(check, spec, worker_resource, check_gpus=True):
    """Return what stops a job from being submitted, from the head's look at it (list of str).

    One message per problem, in this order, each naming the field or setting to change:
    the code snapshot incomplete, trainer overrides Hydra refused, the model or reward
    function missing, a dataset without the columns the workload reads (naming the prepared
    datasets that have them), a dataset file missing, verl's own start-up checks (or the mirrored
    trainer checks) refusing the composed config, no room on the shared storage for the checkpoints the
    job keeps (mvp_retention.room_problem), the submission id taken (job directory or Ray
    job), more GPUs than Ray reports or a per-node GPU shape no workers give (both only with
    ``check_gpus`` and a GPU workload), else the resource pools verl's own code built on the head
    (``verl_check.resource_pools``) that the ALIVE workers cannot hold (only with ``check_gpus``),
    no ALIVE worker carrying the entrypoint resource.

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
                        "with site.yml (mvp_verl_snapshots) or pick an existing code_id under %s/common/code/verl/."
                        % (spec["code_path"], root))
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
                        "mvp_workloads / mvp_job_overrides)." % (spec["code_path"], "; ".join(check["verl_errors"])))
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
    if check_gpus and not shaped:
        pools = _verl_pools_problem(check, spec)
        if pools:
            problems.append(pools)
    if not summary.get("alive_workers"):
        problems.append("No ALIVE node carries '%s', so the driver could never be placed. Run site.yml to start "
                        "the workers." % worker_resource)
    return problems


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
