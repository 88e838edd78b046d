# -*- coding: utf-8 -*-
"""The job request: read strictly, and every rule a request's fields must follow on their own.

A request is a dict with the keys in ``REQUEST_KEYS`` (docs/jobs.md, "Submitting jobs"), gathered by the
``ray_job_request`` action from a JobSpec file (:func:`mvp_parse_jobspec`, through the strict reader
``mvp_request_read``), the play's request keys and ``-e``. :func:`check_request` applies every rule that
needs only the request, the workload catalog (``mvp_workloads``) and the builder's defaults: the action
calls it, so a bad field fails before any trip to the head; the builder (``mvp_spec.mvp_job_spec``) calls
the same functions again.

All refusals raise ``JobSpecError`` (a ValueError) naming the field and the fix, before anything is written.
"""

from __future__ import annotations

import posixpath
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.mvp.ray.plugins.module_utils.mvp_job import FILES, SUBMISSION_ID_RE, is_submission_id
from ansible_collections.mvp.ray.plugins.module_utils.mvp_request_read import RequestReadError, check_value, load_text

# Hydra's own output (.hydra/config.yaml, the trainer's log): set by the builder to <job_dir>/<HYDRA_SUBDIR>
# (without it Hydra writes to outputs/<date>/<time> under the driver's working directory, on the worker).
HYDRA_SUBDIR = FILES["hydra"]


class JobSpecError(ValueError):
    """A request the builder refuses; the message names the field and the fix."""


REQUEST_KEYS = frozenset([
    "submission_id", "workload", "shared_root", "code_id", "code_path", "reward_fn_path",
    "model", "dataset", "ray", "trainer_overrides", "env_vars", "resume_from", "max_restarts",
    "accept_unsupported_release", "priority", "preemptible",
])

# The priority class of a request that names none, and the classes when the builder's defaults give none.
DEFAULT_PRIORITY = "normal"
PRIORITY_CLASSES = {"low": -100, "normal": 0, "high": 100}


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
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
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
        if not isinstance(key, str) or not OVERRIDE_KEY_RE.fullmatch(key):
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
            _fail(field_of(key), "must be a whole number >= 1, got %r" % (value,),
                  "set %s to 1 or more%s" % (key, " (or null to let verl derive it)" if key in NULLABLE_KEYS else ""))
    estimator = plain.get("algorithm.adv_estimator")
    rollouts = _whole(plain.get("actor_rollout_ref.rollout.n", 1))
    if isinstance(estimator, str) and estimator in GROUP_ESTIMATORS and rollouts is not None and rollouts < 2:
        _fail(field_of("actor_rollout_ref.rollout.n"),
              "algorithm.adv_estimator=%s compares the responses to one prompt, but rollout.n is %d" % (estimator, rollouts),
              "set actor_rollout_ref.rollout.n to 2 or more (verl's GRPO examples use 5), or use adv_estimator gae")


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


def _check_text(request, key, pattern=None, hint=""):
    """Return request[key] when it is None or a non-empty string (matching ``pattern``), else fail naming it."""
    value = request.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        _fail(key, "%r is not %s" % (value, "a text" if pattern is None else "valid"),
              hint or "give a string")
    return value


def _max_restarts(request, entry, workload, defaults):
    """How often a run may be continued automatically after a retryable failure (submit_job).

    :returns: int >= 0: the request's ``max_restarts``, else ``defaults['max_restarts']``
        (``submit_job_max_restarts``), 0 for a workload that cannot resume (no catalog ``resume`` keys).
    :raises JobSpecError: for a value that is not a whole number >= 0, or > 0 for such a workload.
    """
    given = request.get("max_restarts")
    value = defaults.get("max_restarts", 0) if given is None else given
    if isinstance(value, bool) or not ((isinstance(value, int) and value >= 0)
                                       or (isinstance(value, str) and value.isdigit())):
        _fail("max_restarts" if given is not None else "submit_job_max_restarts",
              "%r is not a whole number >= 0" % (value,), "give 0 (never restart) or the restarts allowed, e.g. 2")
    value = int(value)
    if value and not (entry.get("module") and entry.get("resume")):
        if given is not None:
            _fail("max_restarts", "workload %s cannot continue from a checkpoint" % workload,
                  "drop max_restarts (only workloads with `resume` keys in the catalog restart)")
        return 0
    return value


def priority(request, defaults):
    """The job's priority class and its number (the queue starts waiting jobs of a higher number first).

    :param request: dict, the request (its ``priority``: a class name; absent - ``normal``).
    :param defaults: dict, the builder's defaults (``priority_classes``: name -> whole number, the inventory's
        ``submit_job_priority_classes``; absent - ``PRIORITY_CLASSES``).
    :returns: dict ``{"class": str, "value": int}``.
    :raises JobSpecError: a class the inventory does not define (naming the classes), or a class whose number is
        not a whole number (naming ``submit_job_priority_classes``).
    """
    classes = defaults.get("priority_classes") or PRIORITY_CLASSES
    if not isinstance(classes, dict):
        _fail("submit_job_priority_classes", "is a %s, not a mapping of class name -> number" % _kind(classes),
              "give e.g. {low: -100, normal: 0, high: 100}")
    name = request.get("priority")
    name = DEFAULT_PRIORITY if name is None or name == "" else name
    if not isinstance(name, str) or name not in classes:
        _fail("priority", "%r is not a priority class of this cluster" % (name,),
              "use one of %s (submit_job_priority_classes)" % ", ".join("%s (%s)" % (k, v) for k, v in classes.items()))
    value = classes[name]
    whole = isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit())
    if isinstance(value, bool) or not whole:
        _fail("submit_job_priority_classes", "class %s has %r, not a whole number" % (name, value),
              "give each class a whole number (higher goes first), e.g. high: 100")
    return {"class": name, "value": int(value)}


def preemptible(request, job_priority, defaults):
    """Whether the job may be preempted for a job of a higher priority (the job controller stops it right after its
    next complete checkpoint and continues it later; docs/jobs.md "Priorities and preemption").

    :param request: dict, the request (its ``preemptible``: a boolean; absent - true).
    :param job_priority: dict, :func:`priority`'s answer for the request.
    :param defaults: dict, the builder's defaults (``priority_classes``).
    :returns: dict ``{"value": bool, "why": str}``: false for ``preemptible: false`` and for a job of the highest
        class (nothing may preempt it).
    :raises JobSpecError: ``preemptible`` is not a boolean.
    """
    given = request.get("preemptible")
    if given is not None:
        try:  # Ansible's own rule, as for accept_unsupported_release: -e key=value gives the text 'false'
            given = boolean(given, strict=True)
        except TypeError:
            _fail("preemptible", "is %r, not true or false" % (given,),
                  "give preemptible: false for a run nothing may stop for a more urgent one (default true)")
    classes = defaults.get("priority_classes") or PRIORITY_CLASSES
    top = max(int(v) for v in classes.values()) if classes else 0
    if given is False:
        return {"value": False, "why": "submitted with preemptible: false"}
    if job_priority["value"] >= top:
        return {"value": False, "why": "of the highest priority class (%s)" % job_priority["class"]}
    return {"value": True, "why": "a job of a higher priority than %s (%d) may preempt it after its next complete "
                                  "checkpoint" % (job_priority["class"], job_priority["value"])}


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


def _check_request_ray(given_ray, defaults):
    """The request's ``ray`` keys merged over the inventory's ``submit_job_ray_base``, then checked (_check_ray)."""
    base = defaults.get("ray_base") or {}
    if not isinstance(base, dict):
        _fail("submit_job_ray_base", "is a %s, not a mapping" % _kind(base),
              "give ray keys (%s) in the inventory or -e @jobspecs/ray-base.yaml" % ", ".join(sorted(RAY_KEYS)))
    return _check_ray(dict(base, **given_ray) if isinstance(given_ray, dict) else (given_ray or dict(base)), defaults)


AFTER_EACH_EPOCH = "after_each_epoch"
"""verl's SFT trainers' word for ``trainer.save_freq``: a checkpoint at each epoch's last step
(``sft_trainer_ray.py``); workloads whose catalog entry lists it in ``save_freq_words`` take it."""


def _merge_overrides(entry, workload, request, defaults):
    """Merge the trainer overrides: the catalog's, then the inventory's (submit_job_site_overrides), then the request's.

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
        _fail("submit_job_site_overrides.%s" % workload,
              "must be a mapping with trainer_overrides, env_vars and/or reward_fn_path",
              "fix the inventory setting submit_job_site_overrides")
    site_overrides = dict(_check_overrides(site.get("trainer_overrides"),
                                           "submit_job_site_overrides.%s.trainer_overrides" % workload, entry, workload))
    overrides.update(site_overrides)
    user_overrides = _check_overrides(request.get("trainer_overrides"), "trainer_overrides", entry, workload)
    overrides.update(user_overrides)
    field_of = _field_namer(site_overrides, user_overrides, workload)
    if entry.get("module") and overrides.get("trainer.logger") is not None:
        overrides["trainer.logger"] = mvp_loggers(overrides["trainer.logger"], field_of("trainer.logger"))
    _check_sizes(overrides, field_of)
    save_freq = overrides.get("trainer.save_freq", 1)
    if save_freq == AFTER_EACH_EPOCH and AFTER_EACH_EPOCH not in (entry.get("save_freq_words") or []):
        _fail(field_of("trainer.save_freq"), "%s is read by verl's SFT trainers only; %s's trainer compares "
              "save_freq with 0 and fails on a word (TypeError)" % (AFTER_EACH_EPOCH, workload),
              "give the steps of one epoch as a number")
    if save_freq != AFTER_EACH_EPOCH and (not isinstance(save_freq, int) or isinstance(save_freq, bool)
                                          or save_freq < 1):
        _fail("trainer_overrides.trainer.save_freq", "must be an integer >= 1%s, got %r" % (
            " or %s" % AFTER_EACH_EPOCH if AFTER_EACH_EPOCH in (entry.get("save_freq_words") or []) else "",
            save_freq), "set trainer.save_freq to 1 or more")
    return {"overrides": overrides, "site": site, "user": user_overrides, "site_overrides": site_overrides,
            "explicit": set(site_overrides) | set(user_overrides), "field_of": field_of}


def mvp_parse_jobspec(data, path):
    """Read a JobSpec file's content into a request dict, strictly and within bounds (``mvp_request_read``).

    :param data: bytes or str, the file's content (bytes are checked to be UTF-8).
    :param path: str, the file's path (for messages).
    :returns: dict (an empty file gives {}).
    :raises JobSpecError: naming the file, and the field and limit where one is passed: larger than the size
        limit, not UTF-8, not YAML, a key given twice in one mapping, too deep or too many keys or scalars
        once aliases are resolved, or not a mapping.
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


def accept_unsupported_release(request):
    """The request's ``accept_unsupported_release``: submit a snapshot outside the platform layer's releases.

    :returns: bool (absent: False).
    :raises JobSpecError: for anything but true or false.
    """
    value = request.get("accept_unsupported_release")
    if value is None:
        return False
    try:  # Ansible's own rule: -e key=value gives the text 'true'
        return boolean(value, strict=True)
    except TypeError:
        _fail("accept_unsupported_release", "%r is not true or false" % (value,),
              "give true to submit a snapshot the platform layer does not declare, else leave it out")


def check_request(request, catalog, defaults):
    """Apply every rule that needs only the request, the catalog and the builder's defaults.

    Called by the ``ray_job_request`` action once the request is gathered, before any task talks to the
    head; ``mvp_spec.mvp_job_spec`` applies the same rules again when it builds the spec.

    :param request: dict, the gathered request (keys in REQUEST_KEYS).
    :param catalog: dict, workload name -> catalog entry (``mvp_workloads``).
    :param defaults: dict, the builder's defaults (as for ``mvp_spec.mvp_job_spec``; ``site_overrides`` is the
        inventory's ``submit_job_site_overrides``, bounded here too).
    :returns: dict with workload, submission_id, shared_root and code_path (as :func:`_check_identity`).
    :raises JobSpecError: naming the field and the fix.
    """
    check_bounds(defaults.get("site_overrides"), "submit_job_site_overrides")
    identity = _check_identity(request, catalog, defaults)
    _check_text(request, "dataset", RELATIVE_RE,
                "give a folder name under <shared_root>/datasets (no absolute path, no '..')")
    _check_text(request, "model")
    _check_text(request, "reward_fn_path")
    earlier = request.get("resume_from")
    if earlier is not None and not is_submission_id(earlier):
        _fail("resume_from", "%r is not a submission id" % (earlier,),
              "give the submission_id of an earlier job of this workload (status.yml lists them)")
    _check_request_ray(request.get("ray"), defaults)
    accept_unsupported_release(request)
    _merge_overrides(identity["entry"], identity["workload"], request, defaults)
    _check_env(request.get("env_vars"), "env_vars")
    _max_restarts(request, identity["entry"], identity["workload"], defaults)
    preemptible(request, priority(request, defaults), defaults)
    return {key: identity[key] for key in ("workload", "submission_id", "shared_root", "code_path")}
