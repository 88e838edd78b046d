# -*- coding: utf-8 -*-
"""The job request: its keys in one typed table, read strictly, and every rule its fields follow, applied once.

A request is a dict with the keys of ``REQUEST_TABLE`` (docs/jobs.md, "Request keys"), gathered by the
``ray_job_request`` action from a JobSpec file (:func:`mvp_parse_jobspec`, through the strict reader
``mvp_request_read``), the play's variables and ``-e`` - the same keys from each place, the table's. The
action calls :func:`check_request`, which applies every rule that needs only the request, the workload catalog
(``mvp_workloads``) and the builder's defaults, before any trip to the head, and returns the *normalised*
request: every key of the table, typed, with its default filled in. The builder (``mvp_spec.mvp_job_spec``)
takes that request as given; it applies only the rules that need what it adds (the paths it fills into the
overrides, the run a resumed job continues).

All refusals raise ``JobSpecError`` (a ValueError) naming the field and the fix, before anything is written.
"""

from __future__ import annotations

import collections
import getpass
import posixpath
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES, SUBMISSION_ID_RE, is_submission_id
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request_read import (
    RequestReadError, check_value, load_text)
from ansible_collections.mvp.ray.plugins.module_utils.notify.mvp_notify import NotifyError, check_endpoints

# Hydra's own output (.hydra/config.yaml, the trainer's log): set by the builder to <job_dir>/<HYDRA_SUBDIR>
# (without it Hydra writes to outputs/<date>/<time> under the driver's working directory, on the worker).
HYDRA_SUBDIR = FILES["hydra"]


class JobSpecError(ValueError):
    """A request the builder refuses; the message names the field and the fix."""


def fail(field, problem, fix):
    """Raise the refusal of one field: ``job spec field '<field>': <problem>. Fix: <fix>``.

    :param field: str, the request field (``trainer_overrides.trainer.nnodes``) or setting (``submit_job_queue``).
    :param problem: str, what is wrong, with the value given.
    :param fix: str, what to give instead.
    :raises JobSpecError: always.
    """
    raise JobSpecError("job spec field '%s': %s. Fix: %s" % (field, problem, fix))


RAY_KEYS = frozenset(["address", "entrypoint_resources", "entrypoint_num_cpus", "runtime_env"])


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
    "MVP_INTERNAL_TOKEN": "ray_worker_secret in the inventory (Vault): the token never goes into a job's files",
    "VERL_FILE_LOGGER_PATH": "trainer_overrides trainer.logger with `file`: metrics go to <job_dir>/logs/metrics.jsonl",
    "RAY_ADDRESS": "nothing: the driver connects to the cluster it was placed on",
    "RAY_AUTH_*": "mvp_ray_auth_token in the inventory (Vault): the token never goes into a job's files",
    "WANDB_API_KEY": "mvp_wandb_api_key in the inventory (Vault): the key never goes into a job's files",
    "MLFLOW_TRACKING_URI": "mvp_mlflow_enabled and mvp_mlflow_port: jobs log to the head's tracking server",
    "MLFLOW_RUN_ID": "nothing: the job's MLflow run is made (or, for a restart, continued) at submission",
}


# Hydra override keys: optional +, ++ or ~ prefix, then dotted names (verl's keys, `@` for packages).
OVERRIDE_KEY_RE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-@/]+)*\Z")


# Relative folder names under shared_root (dataset): no absolute path, no "..".
RELATIVE_RE = re.compile(r"^(?!/)(?!.*(^|/)\.\.(/|$))[A-Za-z0-9._/-]+\Z")


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


def as_list(value):
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
        fail(field, "is a %s, not a list of logger names" % kind_of(value), "give for example [console, file]")
    names = []
    for item in items:
        if not isinstance(item, str):
            fail(field, "%r is not a logger name" % (item,), "give names such as console, file, wandb")
        name = item.strip().strip("'\"").strip()
        if name and name not in names:
            names.append(name)
    if not names:
        fail(field, "names no logger", "give at least one, e.g. [console, file]")
    return names


def kind_of(value):
    """Name a value's type for messages the way YAML users call it (Ansible wraps values in its own classes)."""
    if value is None:
        return "null"
    for types, name in ((bool, "boolean"), ((int, float), "number"), (str, "text"), (dict, "mapping"),
                        ((list, tuple), "list")):
        if isinstance(value, types):
            return name
    return type(value).__name__


def is_positive(value):
    """True for a finite int or float > 0 that is not a bool (NaN and infinity are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def _owned_env(name):
    """Return the request field to use instead when ``name`` is an env var the builder owns, else None."""
    for owned, use in OWNED_ENV.items():
        if name == owned or (owned.endswith("*") and name.startswith(owned[:-1])):
            return use
    return None


def env_strings(env):
    """A mapping of environment variables as the job gets them: str -> str, booleans as ``true``/``false``.

    :param env: dict or None, already checked (:func:`check_request`: names, values that have a text form).
    :returns: dict str -> str ({} for None).
    """
    return {str(name): ("true" if value else "false") if isinstance(value, bool) else str(value)
            for name, value in (env or {}).items()}


def _check_env(env, field):
    """Check a mapping of environment variables from a request or the inventory.

    :param env: the value given (None allowed).
    :param field: str, the field for messages (``env_vars``, ``ray.runtime_env.env_vars``).
    :returns: dict str -> str (:func:`env_strings`).
    :raises JobSpecError: for a non-mapping, a name that is not an environment
        variable name, a value that is a list or mapping, or a variable the project owns.
    """
    if env is None:
        return {}
    if not isinstance(env, dict):
        fail(field, "is a %s, not a mapping" % kind_of(env), "give NAME: value pairs")
    for name, value in env.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            fail(field, "%r is not an environment variable name" % (name,),
                 "use letters, digits and '_', not starting with a digit")
        use = _owned_env(name)
        if use:
            fail("%s.%s" % (field, name), "is set by the project for every job", "drop it; use %s" % use)
        if isinstance(value, (dict, list)) or value is None:
            fail("%s.%s" % (field, name), "is a %s, not a text" % kind_of(value),
                 "give a string, number or boolean (a list or mapping has no environment form)")
    return env_strings(env)


def owned_overrides(entry):
    """Trainer override keys the builder fills in for a catalog entry: key -> request field to use instead."""
    owned = {"trainer.default_local_dir": "nothing: checkpoints go to <job_dir>/checkpoints"}
    if entry.get("module"):
        owned["hydra.run.dir"] = "nothing: Hydra's output goes to <job_dir>/%s" % HYDRA_SUBDIR
    for key in entry.get("data_files") or {}:
        owned[key] = "dataset (a folder under <shared_root>/datasets with the same file names)"
    for key in as_list(entry.get("model_key")):
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
        fail(field, "is a %s, not a mapping" % kind_of(overrides),
             "give dotted keys, e.g. trainer.total_epochs: 1")
    if overrides and not entry.get("module"):
        fail(field, "workload %s is a script of the project, not a verl trainer" % workload,
             "drop trainer_overrides for %s" % workload)
    owned = owned_overrides(entry)
    for key in overrides:
        if not isinstance(key, str) or not OVERRIDE_KEY_RE.fullmatch(key):
            fail(field, "%r is not a Hydra override key" % (key,),
                 "use dotted names such as trainer.total_epochs (+key adds one, ~key removes one)")
        bare = key.lstrip("+~")
        if bare in owned:
            fail("%s.%s" % (field, key), "is set by the job spec builder", "drop it; use %s" % owned[bare])
    return overrides


def _field_namer(site_overrides, user_overrides, workload):
    """Return a function naming where an override key came from: the request's field, else the inventory's."""
    def field_of(key):
        for given in (user_overrides, site_overrides):
            for name in given:
                if name.lstrip("+~") == key:
                    return ("trainer_overrides.%s" % name if given is user_overrides
                            else "submit_job_site_overrides.%s.trainer_overrides.%s" % (workload, name))
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
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
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
            fail(field_of(key), "must be a whole number >= 1, got %r" % (value,),
                 "set %s to 1 or more%s" % (key, " (or null to let verl derive it)" if key in NULLABLE_KEYS else ""))
    estimator = plain.get("algorithm.adv_estimator")
    rollouts = _whole(plain.get("actor_rollout_ref.rollout.n", 1))
    if isinstance(estimator, str) and estimator in GROUP_ESTIMATORS and rollouts is not None and rollouts < 2:
        fail(field_of("actor_rollout_ref.rollout.n"),
             "algorithm.adv_estimator=%s compares the responses to one prompt, but rollout.n is %d" % (estimator, rollouts),
             "set actor_rollout_ref.rollout.n to 2 or more (verl's GRPO examples use 5), or use adv_estimator gae")


def ray_settings(given, defaults):
    """The job's ray block: the request's ``ray`` keys over the inventory's ``submit_job_ray_base``, defaults filled.

    :param given: dict or None, the request's ``ray`` (checked by :func:`check_request`).
    :param defaults: dict, the builder's defaults (``ray_base``, ``address``: this cluster's Jobs API,
        ``worker_resource``).
    :returns: dict with address, entrypoint_resources (default ``{<worker_resource>: 1}``), entrypoint_num_cpus
        (default 1) and runtime_env (its env_vars as :func:`env_strings`).
    """
    ray = dict(defaults.get("ray_base") or {}, **(given or {}))
    resources = ray.get("entrypoint_resources")
    num_cpus = ray.get("entrypoint_num_cpus")
    runtime_env = dict(ray.get("runtime_env") or {})
    runtime_env["env_vars"] = env_strings(runtime_env.get("env_vars"))
    return {"address": defaults["address"],
            "entrypoint_resources": {defaults["worker_resource"]: 1} if resources is None else resources,
            "entrypoint_num_cpus": 1 if num_cpus is None else num_cpus, "runtime_env": runtime_env}


def _check_ray(given, defaults):
    """Check the request's ``ray`` block merged over the inventory's ``submit_job_ray_base``.

    :param given: dict or None, the request's ``ray``.
    :param defaults: builder defaults (``ray_base``, ``address``, ``worker_resource``).
    :raises JobSpecError: for a base that is not a mapping, unknown keys, another Jobs API address, resources
        that are not positive numbers or do not ask for the worker resource, a non-positive CPU count, or
        runtime_env keys that would shadow the code snapshot or change the Python (Ray's runtime_env keys).
    """
    base = defaults.get("ray_base") or {}
    if not isinstance(base, dict):
        fail("submit_job_ray_base", "is a %s, not a mapping" % kind_of(base),
             "give ray keys (%s) in the inventory or -e @jobspecs/ray-base.yaml" % ", ".join(sorted(RAY_KEYS)))
    ray = dict(base, **(given or {}))
    bad = sorted(set(ray) - RAY_KEYS, key=str)
    if bad:
        fail("ray.%s" % bad[0], "unknown key (known: %s)" % ", ".join(sorted(RAY_KEYS)), "remove or correct it")
    address = defaults["address"]
    if ray.get("address") is not None and (not isinstance(ray["address"], str)
                                           or ray["address"].rstrip("/") != address.rstrip("/")):
        fail("ray.address", "%r is not this cluster's Jobs API (%s)" % (ray["address"], address),
             "drop ray.address; the port comes from mvp_ray_dashboard_port in the inventory")
    resource = defaults["worker_resource"]
    resources = ray.get("entrypoint_resources")
    if resources is not None:
        if not isinstance(resources, dict) or not resources:
            fail("ray.entrypoint_resources", "must be a non-empty mapping of resource name -> amount",
                 "give for example {%s: 1}" % resource)
        for name, amount in resources.items():
            if not isinstance(name, str) or not is_positive(amount):
                fail("ray.entrypoint_resources", "%r: %r is not a resource name with a positive amount"
                     % (name, amount), "give names with numbers > 0, e.g. {%s: 1}" % resource)
        if resource not in resources:
            fail("ray.entrypoint_resources", "does not ask for %s, so the driver could land on the head" % resource,
                 "keep %s: 1 in it (the driver must run on a worker)" % resource)
    if ray.get("entrypoint_num_cpus") is not None and not is_positive(ray["entrypoint_num_cpus"]):
        fail("ray.entrypoint_num_cpus", "%r is not a positive number" % (ray["entrypoint_num_cpus"],),
             "give for example 1")
    runtime_env = ray.get("runtime_env")
    if runtime_env is None:
        return
    if not isinstance(runtime_env, dict):
        fail("ray.runtime_env", "is a %s, not a mapping" % kind_of(runtime_env), "give Ray runtime_env keys")
    for key in sorted(runtime_env, key=str):
        if key in RUNTIME_ENV_REFUSED:
            fail("ray.runtime_env.%s" % key, RUNTIME_ENV_REFUSED[key],
                 "drop it; jobs run the code snapshot (code_id) with the nodes' Python (build the image for packages)")
        if key not in RUNTIME_ENV_KEYS:
            fail("ray.runtime_env.%s" % key, "unknown or unsupported runtime_env key (allowed: %s)"
                 % ", ".join(sorted(RUNTIME_ENV_KEYS)), "remove or correct it")
    _check_env(runtime_env.get("env_vars"), "ray.runtime_env.env_vars")


AFTER_EACH_EPOCH = "after_each_epoch"
"""verl's SFT trainers' word for ``trainer.save_freq``: a checkpoint at each epoch's last step
(``sft_trainer_ray.py``); workloads whose catalog entry lists it in ``save_freq_words`` take it."""


def site_overrides_of(defaults, workload):
    """The inventory's additions for one workload (``submit_job_site_overrides.<workload>``), or {}."""
    return (defaults.get("site_overrides") or {}).get(workload) or {}


def merge_overrides(entry, workload, request, defaults):
    """Merge the trainer overrides: the catalog's, then the inventory's (submit_job_site_overrides), then the request's.

    Each layer was checked by :func:`check_request`; this only merges, and normalises ``trainer.logger``
    (:func:`mvp_loggers`).

    :returns: dict with overrides (merged), site (the inventory's entry for the workload), site_overrides (its
        trainer overrides), user (the request's overrides), explicit (set of keys the inventory or the request set)
        and field_of (key -> the field to name in messages).
    """
    overrides = dict(entry.get("trainer_overrides") or {})
    site = site_overrides_of(defaults, workload)
    site_overrides = dict(site.get("trainer_overrides") or {})
    user_overrides = dict(request.get("trainer_overrides") or {})
    overrides.update(site_overrides)
    overrides.update(user_overrides)
    field_of = _field_namer(site_overrides, user_overrides, workload)
    if entry.get("module") and overrides.get("trainer.logger") is not None:
        overrides["trainer.logger"] = mvp_loggers(overrides["trainer.logger"], field_of("trainer.logger"))
    return {"overrides": overrides, "site": site, "user": user_overrides, "site_overrides": site_overrides,
            "explicit": set(site_overrides) | set(user_overrides), "field_of": field_of}


def _check_merged(request, entry, workload, defaults):
    """The rules of the merged trainer overrides (catalog, inventory, request): the inventory's layer, loggers,
    sizes (:func:`_check_sizes`) and ``trainer.save_freq`` (a whole number >= 1, or AFTER_EACH_EPOCH where
    the catalog's ``save_freq_words`` has it).

    :raises JobSpecError: naming the field (the request's, else the inventory's) and the fix.
    """
    site = site_overrides_of(defaults, workload)
    _check_overrides(site.get("trainer_overrides"), "submit_job_site_overrides.%s.trainer_overrides" % workload,
                     entry, workload)
    _check_env(site.get("env_vars"), "submit_job_site_overrides.%s.env_vars" % workload)
    merged = merge_overrides(entry, workload, request, defaults)
    overrides, field_of = merged["overrides"], merged["field_of"]
    _check_sizes(overrides, field_of)
    words = entry.get("save_freq_words") or []
    save_freq = overrides.get("trainer.save_freq", 1)
    if save_freq == AFTER_EACH_EPOCH and AFTER_EACH_EPOCH not in words:
        fail(field_of("trainer.save_freq"), "%s is read by verl's SFT trainers only; %s's trainer compares "
             "save_freq with 0 and fails on a word (TypeError)" % (AFTER_EACH_EPOCH, workload),
             "give the steps of one epoch as a number")
    if save_freq != AFTER_EACH_EPOCH and (not isinstance(save_freq, int) or isinstance(save_freq, bool)
                                          or save_freq < 1):
        fail("trainer_overrides.trainer.save_freq", "must be an integer >= 1%s, got %r" % (
            " or %s" % AFTER_EACH_EPOCH if AFTER_EACH_EPOCH in words else "", save_freq),
            "set trainer.save_freq to 1 or more")


def model_path(shared_root, model):
    """The model folder: ``model`` under ``<shared_root>/common/models`` (a name) or as given (absolute), normalised.

    :returns: str, or None without a model.
    """
    if not model:
        return None
    return posixpath.normpath(model if posixpath.isabs(model) else posixpath.join(shared_root, "common/models", model))


def _priority_classes(defaults):
    """The cluster's priority classes (``defaults['priority_classes']``: the inventory's
    ``submit_job_priority_classes``, roles/submit_job/defaults/main.yml), checked.

    :returns: dict class name -> int.
    :raises JobSpecError: naming ``submit_job_priority_classes``: not a mapping, or a class whose number is not a
        whole number.
    """
    classes = defaults.get("priority_classes")
    if not isinstance(classes, dict) or not classes:
        fail("submit_job_priority_classes", "is %s, not a mapping of class name -> number"
             % ("an empty mapping" if isinstance(classes, dict) else "a %s" % kind_of(classes)),
             "give each class a whole number (higher goes first), e.g. {low: -100, normal: 0, high: 100}")
    for name, value in classes.items():
        whole = isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit())
        if isinstance(value, bool) or not whole:
            fail("submit_job_priority_classes", "class %s has %r, not a whole number" % (name, value),
                 "give each class a whole number (higher goes first), e.g. high: 100")
    return {name: int(value) for name, value in classes.items()}


def priority_of(request, defaults):
    """The job's priority class and its number (the queue starts waiting jobs of a higher number first).

    :param request: dict, the normalised request (its ``priority``: a class of the cluster).
    :param defaults: dict, the builder's defaults (``priority_classes``).
    :returns: dict ``{"class": str, "value": int}``.
    """
    return {"class": request["priority"], "value": int(defaults["priority_classes"][request["priority"]])}


def preemption(request, job_priority, defaults):
    """Whether the job may be preempted for a job of a higher priority (the job controller stops it right after its
    next complete checkpoint and continues it later; docs/jobs.md "Priorities and preemption").

    :param request: dict, the normalised request (its ``preemptible``: bool).
    :param job_priority: dict, :func:`priority_of`'s answer for the request.
    :param defaults: dict, the builder's defaults (``priority_classes``).
    :returns: dict ``{"value": bool, "why": str}``: false for ``preemptible: false`` and for a job of the highest
        class (nothing may preempt it).
    """
    top = max(int(v) for v in defaults["priority_classes"].values())
    if not request["preemptible"]:
        return {"value": False, "why": "submitted with preemptible: false"}
    if job_priority["value"] >= top:
        return {"value": False, "why": "of the highest priority class (%s)" % job_priority["class"]}
    return {"value": True, "why": "a job of a higher priority than %s (%d) may preempt it after its next complete "
                                  "checkpoint" % (job_priority["class"], job_priority["value"])}


class Setting(str):
    """A request key's default that comes from an inventory setting (through the builder's defaults): the str is
    the setting's name; the key's rule reads it."""


class Derived(str):
    """A request key's default that its rule derives (from the keys before it, or by the action): the str says how."""


class RequestKey(collections.namedtuple("RequestKey", "name type default rule check")):
    """One request key: ``name``; ``type`` (``str``, ``dict``, ``int``, ``bool`` or ``list``, as in an Ansible argument
    spec; a ``list`` key's rule may take a text too, ``notify``); ``default`` when the request gives none (a value,
    which the rule gets; or a :class:`Setting` or a :class:`Derived`, which the rule resolves); ``rule`` (str, what a value must be: docs/jobs.md shows it);
    ``check`` (function ``(value, request, checking) -> normalised value``: ``value`` already of ``type``, the
    table's default, or None; ``request`` the keys normalised before it; ``checking`` a :class:`_Checking`)."""


class _Checking:
    """What the rules of one request read besides its keys: the catalog, the builder's defaults, the request as
    given, and (once ``workload`` is checked) the workload's catalog entry."""

    def __init__(self, catalog, defaults, given):
        self.catalog, self.defaults, self.given = catalog, defaults, given
        self.entry = None


def _typed(key, value, checking):
    """``value`` as the key's type, None when absent (None, or "" for a text).

    Text from ``-e key=value`` counts for a whole number (digits) and for a boolean (Ansible's own words:
    ``true``, ``yes``, ``false``, ...).

    :raises JobSpecError: naming the key and its rule (the names to choose from, for a key in _CHOICES): a value
        of another type.
    """
    if value is None or (key.type == "str" and value == ""):
        return None
    if key.type == "str" and isinstance(value, str):
        return value
    if key.type == "dict" and isinstance(value, dict):
        return value
    if key.type == "list" and isinstance(value, (list, tuple, str)):
        return value if isinstance(value, str) else list(value)
    if key.type == "int":
        number = None if isinstance(value, bool) else _whole(value)
        if number is not None:
            return number
        fail(key.name, "%r is not a whole number" % (value,), "give %s: %s" % (key.name, key.rule))
    if key.type == "bool":
        try:  # Ansible's own rule: -e key=value gives the text 'false'
            return boolean(value, strict=True)
        except TypeError:
            fail(key.name, "%r is not true or false" % (value,), "give %s: %s" % (key.name, key.rule))
    if key.type == "dict":
        fail(key.name, "is a %s, not a mapping" % kind_of(value), "give %s" % key.rule)
    if key.type == "list":
        fail(key.name, "is a %s, not a list or a text" % kind_of(value), "give %s" % key.rule)
    choices = _CHOICES.get(key.name)
    fail(key.name, "%r is not a text" % (value,),
         "use one of %s" % ", ".join(choices(checking)) if choices else "give %s" % key.rule)


def _setting(checking, name, setting):
    """The builder's default ``name`` (the inventory's ``setting``) as a text, or None; refused when not a text."""
    value = checking.defaults.get(name)
    if value is not None and value != "" and not isinstance(value, str):
        fail(setting, "%r is not a text" % (value,), "set %s in the inventory" % setting)
    return value or None


def _check_site(defaults, workload):
    """Refuse an inventory's ``submit_job_site_overrides`` (or its entry for ``workload``) of another shape."""
    sites = defaults.get("site_overrides") or {}
    if not isinstance(sites, dict):
        fail("submit_job_site_overrides", "is a %s, not a mapping of workload -> additions" % kind_of(sites),
             "fix the inventory setting submit_job_site_overrides")
    site = sites.get(workload) or {}
    if not isinstance(site, dict) or set(site) - {"trainer_overrides", "env_vars", "reward_fn_path"}:
        fail("submit_job_site_overrides.%s" % workload,
             "must be a mapping with trainer_overrides, env_vars and/or reward_fn_path",
             "fix the inventory setting submit_job_site_overrides")


# The rules of the table's keys (RequestKey.check), in the table's order: each gets the value given (typed) or the
# table's default, the keys checked before it and the _Checking; it returns the normalised value or refuses it.

def _rule_workload(value, _request, checking):
    if value not in checking.catalog:
        fail("workload", "unknown workload %r" % (value,),
             "use one of %s (exactly as written)" % ", ".join(sorted(checking.catalog)))
    checking.entry = checking.catalog[value]
    _check_site(checking.defaults, value)
    return value


def _rule_submission_id(value, _request, _checking):
    if not is_submission_id(value):
        fail("submission_id", "%r does not match %s" % (value, SUBMISSION_ID_RE.pattern),
             "use letters, digits, '.', '_' or '-', starting with a letter or digit; "
             "no '/', no spaces, at most 128 characters")
    return value


def _rule_shared_root(value, _request, checking):
    shared_root = value or _setting(checking, "shared_root", "mvp_shared_root")
    if not shared_root or not posixpath.isabs(shared_root):
        fail("shared_root", "%r is not an absolute path" % (shared_root,), "use for example /private")
    return posixpath.normpath(shared_root)


def _rule_code_id(value, _request, checking):
    if value is None and checking.given.get("code_path"):
        return None
    code_id = value or _setting(checking, "code_id", "submit_job_code_id")
    if code_id is None or not SUBMISSION_ID_RE.fullmatch(code_id):
        fail("code_id" if value else "submit_job_code_id", "%r is not valid" % (code_id,),
             "give a snapshot name under <shared_root>/common/code/verl/ (letters, digits, '.', '_', '-')")
    return code_id


def _rule_code_path(value, request, _checking):
    shared_root = request["shared_root"]
    code_path = posixpath.normpath(value or posixpath.join(shared_root, "common/code/verl", request["code_id"]))
    if not code_path.startswith(shared_root + "/"):
        fail("code_path", "%s is outside shared_root %s" % (code_path, shared_root),
             "point it at a snapshot under %s/common/code/verl/" % shared_root)
    return code_path


def _rule_model(value, request, checking):
    model = value or _setting(checking, "model", "submit_job_model")
    models_dir = posixpath.join(request["shared_root"], "common/models")
    path = model_path(request["shared_root"], model)
    if path and not path.startswith(models_dir + "/"):
        fail("model", "%r leads to %s, outside %s" % (model, path, models_dir),
             "give a folder name under %s (prepare_data puts models there), without '..'" % models_dir)
    if checking.entry.get("model_key") and not path:
        fail("model", "workload %s needs a model" % request["workload"],
             "set model to a folder name under %s, or submit_job_model in the inventory" % models_dir)
    return model


def _rule_dataset(value, _request, _checking):
    if value is not None and not RELATIVE_RE.fullmatch(value):
        fail("dataset", "%r is not valid" % (value,),
             "give a folder name under <shared_root>/datasets (no absolute path, no '..')")
    return value


def _rule_reward_fn_path(value, request, checking):
    workload = request["workload"]
    field = "reward_fn_path" if value else "submit_job_site_overrides.%s.reward_fn_path" % workload
    reward = value or site_overrides_of(checking.defaults, workload).get("reward_fn_path") or None
    code_dir = posixpath.join(request["shared_root"], "user/code")
    if reward is not None and not (isinstance(reward, str) and posixpath.isabs(reward)
                                   and posixpath.normpath(reward).startswith(code_dir + "/")):
        fail(field, "%s is outside %s" % (reward, code_dir),
             "put the reward function under %s/ and give its absolute path" % code_dir)
    return reward


def _rule_ray(value, _request, checking):
    _check_ray(value, checking.defaults)
    return dict(value or {})


def _rule_trainer_overrides(value, request, checking):
    return dict(_check_overrides(value, "trainer_overrides", checking.entry, request["workload"]))


def _rule_env_vars(value, _request, _checking):
    return _check_env(value, "env_vars")


def _rule_resume_from(value, request, checking):
    if value is None:
        return None
    if not is_submission_id(value):
        fail("resume_from", "%r is not a submission id" % (value,),
             "give the submission_id of an earlier job of this workload (status.yml lists them)")
    keys = checking.entry.get("resume")
    if not checking.entry.get("module") or not keys:
        fail("resume_from", "workload %s cannot continue from a checkpoint" % request["workload"],
             "drop resume_from (only workloads with `resume` keys in the catalog resume)")
    for key in (keys["mode_key"], keys["path_key"]):
        if key in request["trainer_overrides"]:
            fail("trainer_overrides.%s" % key, "is set by resume_from",
                 "drop it from trainer_overrides, resume_from picks the checkpoint")
    return value


def _rule_max_restarts(value, request, checking):
    default = checking.defaults.get("max_restarts", 0)
    number = value if value is not None else (None if isinstance(default, bool) else _whole(default))
    if number is None or number < 0:
        fail("max_restarts" if value is not None else "submit_job_max_restarts",
             "%r is not a whole number >= 0" % (value if value is not None else default,),
             "give 0 (never restart) or the restarts allowed, e.g. 2")
    if number and not (checking.entry.get("module") and checking.entry.get("resume")):
        if value is not None:
            fail("max_restarts", "workload %s cannot continue from a checkpoint" % request["workload"],
                 "drop max_restarts (only workloads with `resume` keys in the catalog restart)")
        return 0
    return number


def _rule_priority(value, _request, checking):
    classes = _priority_classes(checking.defaults)
    if value not in classes:
        fail("priority", "%r is not a priority class of this cluster" % (value,),
             "use one of %s (submit_job_priority_classes)" % ", ".join("%s (%s)" % item for item in classes.items()))
    return value


# A who/what label of a run (owner, team, project): letters, digits, '.', '_', '-', at most 64 characters.
LABEL_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")


def _label(name, value):
    """A run's label as given (None stays None), or refused naming the field."""
    if value is not None and not LABEL_RE.fullmatch(value):
        fail(name, "%r is not a label" % (value,), "use at most 64 letters, digits, '.', '_' or '-' (no spaces)")
    return value


def _rule_owner(value, _request, checking):
    """The run's owner: as given, else the builder's default ``owner`` (the ``ray_job_request`` action fills it with
    the Ansible controller's user, ``getpass.getuser()``), else this process's user."""
    if value is not None:
        return _label("owner", value)
    owner = checking.defaults.get("owner") or getpass.getuser()
    if not LABEL_RE.fullmatch(str(owner)):
        fail("owner", "the submitting user's name %r is not a label" % (owner,),
             "give owner: <name> (at most 64 letters, digits, '.', '_' or '-')")
    return str(owner)


def _rule_team(value, _request, _checking):
    return _label("team", value)


def _rule_project(value, _request, _checking):
    return _label("project", value)


def _rule_notify(value, _request, _checking):
    try:
        return check_endpoints(value, "notify", allow_secret=False)
    except NotifyError as exc:
        fail(exc.field, exc.problem, exc.fix)


def _rule_as_given(value, _request, _checking):
    """The rule of a key whose type is its whole rule (a boolean): the value given, else the table's default."""
    return value


# Text keys whose value is one of the names the cluster defines: a value of another type is refused listing them.
_CHOICES = {"workload": lambda checking: sorted(checking.catalog),
            "priority": lambda checking: list(_priority_classes(checking.defaults))}


# The priority class of a request that names none (the classes are the inventory's submit_job_priority_classes).
DEFAULT_PRIORITY = "normal"


# Every request key, in the order its rule runs (a rule reads the keys before it, normalised). The JobSpec file,
# the play's variables and -e take exactly these keys; docs/jobs.md ("Request keys") and the ray_job_request
# action's documentation (RETURN request) list them with the same type and default (tests/unit/plugins/
# module_utils/request/test_mvp_request.py compares them).
REQUEST_TABLE = (
    RequestKey("workload", "str", Derived("none (required)"), "a workload of the catalog (mvp_workloads), exactly as written",
               _rule_workload),
    RequestKey("submission_id", "str", Derived("generated: <workload>-<YYYYmmdd-HHMMSS>-<6 hex>"),
               "letters, digits, '.', '_', '-', starting with a letter or digit, at most 128 characters "
               "(SUBMISSION_ID_RE); the job directory is <shared_root>/jobs/<submission_id>", _rule_submission_id),
    RequestKey("shared_root", "str", Setting("mvp_shared_root"), "an absolute path", _rule_shared_root),
    RequestKey("code_id", "str", Setting("submit_job_code_id"),
               "a snapshot under <shared_root>/common/code/verl/ (a name: letters, digits, '.', '_', '-'); "
               "none when code_path is given", _rule_code_id),
    RequestKey("code_path", "str", Derived("<shared_root>/common/code/verl/<code_id>"), "a folder under shared_root",
               _rule_code_path),
    RequestKey("model", "str", Setting("submit_job_model"),
               "a folder name under <shared_root>/common/models, or an absolute path there; a verl workload needs one",
               _rule_model),
    RequestKey("dataset", "str", None, "a folder under <shared_root>/datasets (no absolute path, no '..') holding "
               "the workload's data files", _rule_dataset),
    RequestKey("reward_fn_path", "str", Setting("submit_job_site_overrides.<workload>.reward_fn_path"),
               "an absolute path under <shared_root>/user/code/", _rule_reward_fn_path),
    RequestKey("ray", "dict", {}, "keys among address (this cluster's Jobs API only), entrypoint_resources "
               "(must ask for the worker resource), entrypoint_num_cpus, runtime_env (env_vars, config, "
               "worker_process_setup_hook, nsight), over submit_job_ray_base", _rule_ray),
    RequestKey("trainer_overrides", "dict", {}, "Hydra dotted keys -> values, e.g. {trainer.total_epochs: 1}; not "
               "the keys the builder sets, none for a script workload", _rule_trainer_overrides),
    RequestKey("env_vars", "dict", {}, "NAME: value pairs (a text, number or boolean); not the variables the "
               "project sets", _rule_env_vars),
    RequestKey("resume_from", "str", None, "the submission id of an earlier job of the same workload, whose "
               "newest complete checkpoint the job continues", _rule_resume_from),
    RequestKey("max_restarts", "int", Setting("submit_job_max_restarts"),
               "a whole number >= 0 of automatic restarts (0 for a workload that cannot resume)", _rule_max_restarts),
    RequestKey("priority", "str", DEFAULT_PRIORITY, "a class of submit_job_priority_classes", _rule_priority),
    RequestKey("preemptible", "bool", True, "false: nothing may stop the job for a more urgent one",
               _rule_as_given),
    RequestKey("accept_unsupported_release", "bool", False, "true: submit a snapshot whose verl release the "
               "nodes' platform layer does not declare", _rule_as_given),
    RequestKey("owner", "str", Derived("the submitting user's name (the Ansible controller's user)"),
               "who the run is for: at most 64 letters, digits, '.', '_', '-' (the GPU-hour ledger adds runs up by it)",
               _rule_owner),
    RequestKey("team", "str", None, "a label: at most 64 letters, digits, '.', '_', '-' (the ledger's team)",
               _rule_team),
    RequestKey("project", "str", None, "a label: at most 64 letters, digits, '.', '_', '-' (the ledger's project)",
               _rule_project),
    RequestKey("notify", "list", [], "webhooks told what happens to the run: a URL (http/https; the controller's "
               "host, 127.0.0.1, allowed), or a list of {url, format (json, slack), events, checkpoint_every, name}; "
               "no secret (job_controller_webhooks holds signed ones)", _rule_notify),
)

REQUEST_KEYS = frozenset(key.name for key in REQUEST_TABLE)


def mvp_parse_jobspec(data, path):
    """Read a JobSpec file's content into a request dict, strictly and within bounds (``mvp_request_read``).

    :param data: bytes or str, the file's content (bytes are checked to be UTF-8).
    :param path: str, the file's path (for messages).
    :returns: dict (an empty file gives {}).
    :raises JobSpecError: naming the file, and the field, line and limit where one is passed: larger than the size
        limit, not UTF-8, not YAML, an anchor, alias or merge key, a key given twice in one mapping, too deep, too
        many keys or scalars, or not a mapping.
    """
    try:
        return load_text(data, "jobspec %s" % path)
    except RequestReadError as exc:
        raise JobSpecError(str(exc))


def check_bounds(value, source):
    """Refuse a value given outside a JobSpec file (``-e``, the play, the inventory) that passes the reader's limits.

    :param value: any value Ansible parsed.
    :param source: str, where it was given, for messages (``-e trainer_overrides``, ``submit_job_site_overrides``).
    :raises JobSpecError: naming the field and the limit (mvp_request_read.check_value).
    """
    try:
        check_value(value, source)
    except RequestReadError as exc:
        raise JobSpecError(str(exc))


def check_request(request, catalog, defaults):
    """Apply every rule of the request (REQUEST_TABLE, in its order, then the merged trainer overrides' rules) once,
    and return the normalised request the builder takes as given.

    Called by the ``ray_job_request`` action once the request is gathered, before any task talks to the head.

    :param request: dict, the gathered request (keys in REQUEST_KEYS; absent keys take the table's default).
    :param catalog: dict, workload name -> catalog entry (``mvp_workloads``).
    :param defaults: dict, the builder's defaults (as for ``mvp_spec.mvp_job_spec``: ``shared_root``, ``code_id``,
        ``model``, ``max_restarts``, ``priority_classes``, ``ray_base``, ``address``, ``worker_resource``;
        ``site_overrides`` is the inventory's ``submit_job_site_overrides``, bounded here too).
    :returns: dict with every key of REQUEST_TABLE: texts (or None), ``ray``, ``trainer_overrides`` and ``env_vars``
        as dicts (env_vars' values as text), ``max_restarts`` an int, ``preemptible`` and
        ``accept_unsupported_release`` bools; ``shared_root`` and ``code_path`` normalised absolute paths, and the
        defaults from the inventory filled in (``shared_root``, ``code_id`` unless ``code_path`` is given,
        ``model``, ``reward_fn_path``, ``max_restarts``, ``priority``). Checking it again gives it back unchanged.
    :raises JobSpecError: naming the field and the fix.
    """
    check_bounds(defaults.get("site_overrides"), "submit_job_site_overrides")
    if not isinstance(request, dict):
        fail("job spec", "is a %s, not a mapping" % kind_of(request),
             "give key: value pairs (a JobSpec YAML file or -e variables)")
    unknown = sorted(set(request) - REQUEST_KEYS, key=str)
    if unknown:
        fail(unknown[0], "unknown key (known: %s)" % ", ".join(sorted(REQUEST_KEYS)), "remove or correct it")
    checking = _Checking(catalog, defaults, request)
    checked = {}
    for key in REQUEST_TABLE:
        value = _typed(key, request.get(key.name), checking)
        if value is None and not isinstance(key.default, (Setting, Derived)):
            value = type(key.default)(key.default) if isinstance(key.default, (dict, list)) else key.default
        checked[key.name] = key.check(value, checked, checking)
    _check_merged(checked, checking.entry, checked["workload"], defaults)
    return checked


def default_words(key):
    """A request key's default as the docs write it: ``the inventory's <setting>``, ``none``, ``true``/``false``,
    ``{}``, the value, or the text of how it is derived (docs/jobs.md, the ray_job_request action's documentation).

    :param key: RequestKey, a row of REQUEST_TABLE.
    :returns: str.
    """
    if key.default is None:
        return "none"
    if isinstance(key.default, bool):
        return "true" if key.default else "false"
    if isinstance(key.default, dict):
        return "{}"
    if isinstance(key.default, list):
        return "[]"
    if isinstance(key.default, Setting):
        return "the inventory's %s" % key.default
    return str(key.default)
