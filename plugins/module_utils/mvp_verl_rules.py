# -*- coding: utf-8 -*-
"""verl's own start-up rules, run before submission on the head, without GPUs.

verl's trainers check their config only once they run on the cluster: ``main_ppo``
calls ``verl.utils.config.validate_config`` first thing, but that is already on a
worker, after the job was submitted; other checks sit inside the trainers and run
after the model is loaded. Two layers bring them before submission:

1. :data:`CHILD`, run by :func:`run_snapshot_checks` in a subprocess of the nodes'
   Python with ``PYTHONPATH=<snapshot>``: composes the job's config with Hydra as the
   trainer's ``@hydra.main`` does, then calls the snapshot's own code on it -
   ``verl.utils.config.validate_config`` with ``need_reference_policy`` /
   ``need_critic`` (what ``verl.trainer.main_ppo.main`` runs; it builds the actor and
   critic config classes, whose ``__post_init__``/``validate`` check batch sizes
   against the world size and micro batches), the algorithm's config class, the
   SFT trainer's engine/optimizer/checkpoint config classes (as
   ``verl.trainer.sft_trainer_ray.SFTTrainer._build_config`` builds them; not the
   model's, which loads the tokenizer), and the logger names against
   ``verl.utils.tracking.Tracking.supported_backend``. verl's config classes import
   torch: on a node without torch this layer reports itself skipped, it never fails.
2. :func:`mirrored_problems`: checks that exist in verl only inside a trainer and
   cannot be called alone, mirrored in this project's words on the composed config
   (plain Python, no torch); each message names the verl function it mirrors.

Both return messages that start with the key verl names (or the function) and carry
verl's own text.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time

RESULT_MARK = "MVP_VERL_CHECK_RESULT="

# Run as `python -c CHILD ARGS` with PYTHONPATH=<snapshot>; ARGS is {config_dir, config_name, overrides}
# as JSON; prints RESULT_MARK + JSON {errors, skipped, seconds} as its last stdout line.
# verl prints progress on stdout: everything else goes to stderr.
CHILD = r'''
import contextlib, json, sys, time
start = time.time()
args = json.loads(sys.argv[1])
result = {"errors": [], "skipped": None, "seconds": {}}
out = sys.stdout

def finish():
    result["seconds"]["total"] = round(time.time() - start, 2)
    out.write("MVP_VERL_CHECK_RESULT=" + json.dumps(result) + "\n")
    out.flush()

def run(name, call):
    try:
        call()
    except Exception as exc:  # verl raises ValueError, AssertionError, TypeError...
        text = " ".join(str(exc).split()) or type(exc).__name__
        result["errors"].append("%s: %s: %s" % (name, type(exc).__name__, text))

with contextlib.redirect_stdout(sys.stderr):
    try:
        import torch  # noqa: F401 - verl's config classes import it
    except Exception as exc:
        result["skipped"] = "torch cannot be imported by %s (%s)" % (sys.executable, exc)
        finish()
        sys.exit(0)
    result["seconds"]["import_torch"] = round(time.time() - start, 2)
    from hydra import compose, initialize_config_dir
    try:
        with initialize_config_dir(config_dir=args["config_dir"], version_base=None):
            cfg = compose(config_name=args["config_name"], overrides=list(args["overrides"]))
    except Exception as exc:
        result["skipped"] = "the overrides do not compose (%s)" % " ".join(str(exc).split())[:300]
        finish()
        sys.exit(0)
    result["seconds"]["compose"] = round(time.time() - start, 2)
    from verl.utils.config import omega_conf_to_dataclass
    if "actor_rollout_ref" in cfg:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config
        run("verl.utils.config.validate_config", lambda: validate_config(
            config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)))
        if cfg.get("algorithm") is not None and "_target_" in cfg.algorithm:
            run("algorithm (%s)" % cfg.algorithm._target_, lambda: omega_conf_to_dataclass(cfg.algorithm))
    else:
        for section in ("engine", "optim", "checkpoint"):
            if cfg.get(section) is not None and "_target_" in cfg[section]:
                run("%s (%s)" % (section, cfg[section]._target_),
                    lambda section=section: omega_conf_to_dataclass(cfg[section]))
    loggers = cfg.trainer.get("logger") if "trainer" in cfg else None
    if loggers is not None:
        from verl.utils.tracking import Tracking
        supported = list(getattr(Tracking, "supported_backend", []) or [])
        names = [loggers] if isinstance(loggers, str) else list(loggers)
        unknown = [str(n) for n in names if supported and n not in supported]
        if unknown:
            result["errors"].append("trainer.logger: %s not supported by verl.utils.tracking.Tracking "
                                    "(supported: %s)" % (", ".join(unknown), ", ".join(supported)))
    result["seconds"]["checks"] = round(time.time() - start, 2)
finish()
'''


def _cache_file(cache_dir, python, snapshot_root, config_dir, config_name, overrides, job_dir, submission_id):
    """Where the result for this config is cached: the overrides with the job's own directory (paths under it)
    and id (an override whose whole value it is: trainer.experiment_name) replaced - they differ per job and
    decide no check -, the Python, the snapshot and its config files' times."""
    def general(text):
        text = text.replace(job_dir + "/", "<job_dir>/") if job_dir else text
        key, sep, value = text.partition("=")
        return key + sep + "<id>" if submission_id and value == submission_id else text
    stamps = []
    for folder, _subdirs, files in os.walk(config_dir):
        stamps.extend((os.path.relpath(os.path.join(folder, f), config_dir),
                       os.stat(os.path.join(folder, f)).st_mtime_ns) for f in sorted(files))
    init = os.path.join(snapshot_root, "verl", "__init__.py")
    key = json.dumps([python, snapshot_root, config_name, sorted(stamps),
                      os.stat(init).st_mtime_ns if os.path.exists(init) else None,
                      [general(o) for o in overrides]], sort_keys=True)
    return os.path.join(cache_dir, hashlib.sha256(key.encode("utf-8")).hexdigest() + ".json")


def start_snapshot_checks(python, snapshot_root, config_dir, config_name, overrides, timeout=180,
                          cache_dir=None, job_dir="", submission_id=""):
    """Start the snapshot's own start-up checks (:data:`CHILD`) in a subprocess; see :func:`finish_snapshot_checks`.

    :param python: str, the nodes' Python (``mvp_ray_python``; needs hydra-core, and torch for the checks).
    :param snapshot_root: str, the code snapshot (put first on ``PYTHONPATH``).
    :param config_dir: str, ``<snapshot>/verl/trainer/config``.
    :param config_name: str, ``ppo_trainer`` or ``sft_trainer_engine``.
    :param overrides: list of str, the entrypoint's Hydra overrides.
    :param timeout: int, seconds before the child is stopped (reported as skipped).
    :param cache_dir: str or None, a folder on the node where results are kept per config (importing
        verl and torch costs several seconds; the same config of another job is then answered at once).
    :param job_dir: str and ``submission_id``: str, replaced in the overrides for the cache key.
    :returns: a handle for :func:`finish_snapshot_checks`.
    """
    overrides = list(overrides)
    handle = {"start": time.time(), "timeout": timeout, "cache": None, "proc": None, "result": None}
    if cache_dir:
        try:
            handle["cache"] = _cache_file(cache_dir, python, snapshot_root, config_dir, config_name, overrides,
                                          job_dir, submission_id)
            with open(handle["cache"], encoding="utf-8") as stream:
                handle["result"] = dict(json.load(stream), cached=True)
            return handle
        except (OSError, ValueError):
            pass
    env = dict(os.environ, PYTHONPATH=snapshot_root + (":" + os.environ["PYTHONPATH"]
                                                       if os.environ.get("PYTHONPATH") else ""),
               CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false",
               # the snapshot is on the shared storage: a check writes nothing there (no __pycache__)
               PYTHONDONTWRITEBYTECODE="1")
    payload = json.dumps({"config_dir": config_dir, "config_name": config_name, "overrides": overrides})
    handle["stderr"] = tempfile.TemporaryFile(mode="w+")  # verl's output; a pipe could fill while we wait
    try:
        handle["proc"] = subprocess.Popen([python, "-c", CHILD, payload], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=handle["stderr"], text=True, env=env,
                                          cwd=snapshot_root)
    except OSError as exc:
        handle["result"] = {"errors": [], "skipped": "verl's own checks did not start (%s)" % exc, "seconds": {}}
    return handle


def finish_snapshot_checks(handle):
    """Wait for the checks started by :func:`start_snapshot_checks` and return their result.

    :returns: dict ``{errors: [str], skipped: str or None, seconds: {total, import_torch, ...},
        wall: float, cached: bool}``; ``errors`` read ``<verl function>: <exception type>: <verl's
        message>``. Never raises for what the child finds: a child that cannot start, times out or
        prints no result is reported in ``skipped`` with the end of its stderr.
    """
    result = handle["result"]
    proc = handle["proc"]
    if result is None:
        left = max(1.0, handle["timeout"] - (time.time() - handle["start"]))
        try:
            stdout = proc.communicate(timeout=left)[0]
            handle["stderr"].seek(0)
            stderr = handle["stderr"].read()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            stdout, stderr = "", "timed out after %s s" % handle["timeout"]
        handle["stderr"].close()
        for line in reversed(stdout.splitlines()):
            if line.startswith(RESULT_MARK):
                result = json.loads(line[len(RESULT_MARK):])
                break
        else:
            tail = " ".join(stderr.strip().splitlines()[-3:])[-500:]
            result = {"errors": [], "skipped": "verl's own checks printed no result (exit %s): %s"
                      % (proc.returncode, tail), "seconds": {}}
    result.setdefault("cached", False)
    result["wall"] = round(time.time() - handle["start"], 2)
    return result


def save_snapshot_checks(handle, result):
    """Keep ``result`` (with anything the caller added, e.g. the mirrored problems) in the handle's cache
    file, unless it came from there or the checks were skipped (a timeout or a missing torch is not a verdict)."""
    if not handle.get("cache") or result.get("cached") or result.get("skipped"):
        return
    try:
        os.makedirs(os.path.dirname(handle["cache"]), exist_ok=True)
        partial = handle["cache"] + ".%d" % os.getpid()
        with open(partial, "w", encoding="utf-8") as stream:
            json.dump({k: v for k, v in result.items() if k not in ("wall", "cached")}, stream)
        os.replace(partial, handle["cache"])
    except OSError:
        pass


def run_snapshot_checks(python, snapshot_root, config_dir, config_name, overrides, timeout=180, cache_dir=None):
    """:func:`start_snapshot_checks`, :func:`finish_snapshot_checks`, :func:`save_snapshot_checks`
    (same parameters and result)."""
    handle = start_snapshot_checks(python, snapshot_root, config_dir, config_name, overrides, timeout, cache_dir)
    result = finish_snapshot_checks(handle)
    save_snapshot_checks(handle, result)
    return result


def _get(config, dotted, default=None):
    """Value at a dotted key of nested dicts, or ``default``."""
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


# verl's group-relative estimators (verl.trainer.ppo.core_algos.AdvantageEstimator)
_GROUP_ESTIMATORS = ("grpo", "grpo_passk", "grpo_vectorized", "rloo", "rloo_vectorized", "opo", "gdpo")


def mirrored_problems(config):
    """Checks verl runs only inside a trainer, mirrored on a composed, resolved config.

    :param config: dict, the job's config as plain containers (``OmegaConf.to_container(cfg,
        resolve=True)``), either ``ppo_trainer`` (has ``actor_rollout_ref``) or ``sft_trainer_engine``.
    :returns: list of str, each naming the key, the rule and the verl function it mirrors.
    """
    problems = []
    trainer = config.get("trainer") or {}
    for key in ("nnodes", "n_gpus_per_node", "total_epochs"):
        value = trainer.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            problems.append("trainer.%s=%d: must be >= 1 (mirrors the fit loops of verl.trainer.ppo.v1.trainer_base "
                            "and verl.trainer.sft_trainer_ray.SFTTrainer.fit, which train nothing, and "
                            "verl.single_controller.ray.base.RayResourcePool, which fails on no process)"
                            % (key, value))
    steps = trainer.get("total_training_steps")
    if isinstance(steps, int) and not isinstance(steps, bool) and steps < 1:
        problems.append("trainer.total_training_steps=%d: must be null or >= 1 (mirrors the step counts of "
                        "verl.trainer.ppo.v1.trainer_base and verl.trainer.sft_trainer_ray.SFTTrainer)" % steps)
    batch = _get(config, "data.train_batch_size")
    if isinstance(batch, int) and not isinstance(batch, bool) and batch < 1:
        problems.append("data.train_batch_size=%d: must be >= 1 (mirrors the data loaders of both trainers)" % batch)
    if "actor_rollout_ref" not in config:
        return problems
    estimator = _get(config, "algorithm.adv_estimator")
    n = _get(config, "actor_rollout_ref.rollout.n", 1)
    if estimator in _GROUP_ESTIMATORS and isinstance(n, int) and n < 2:
        problems.append("actor_rollout_ref.rollout.n=%s with algorithm.adv_estimator=%s: a group-relative "
                        "advantage needs at least 2 responses per prompt (mirrors "
                        "verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage, which falls back to the raw "
                        "score for a group of one). Set actor_rollout_ref.rollout.n to 2 or more" % (n, estimator))
    groups = _get(config, "algorithm.filter_groups") or {}
    if isinstance(groups, dict) and groups.get("enable") and not groups.get("metric"):
        problems.append("algorithm.filter_groups.metric must be set when group filtering is enabled (mirrors "
                        "verl.trainer.ppo.v1.trainer_base.PPOTrainer._resolve_filter_groups_metric)")
    if trainer.get("resume_mode") == "resume_path":
        path = trainer.get("resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:
            problems.append("trainer.resume_from_path=%r: with trainer.resume_mode=resume_path it must name a "
                            "global_step_N folder (mirrors verl.trainer.ppo.v1.trainer_base.PPOTrainer's "
                            "checkpoint loading)" % (path,))
    return problems


def composed_problems(config_dir, config_name, overrides):
    """Compose the job's config (hydra-core and omegaconf only) and run :func:`mirrored_problems` on it.

    :returns: list of str; empty when the overrides do not compose (the compose check reports that)
        or an interpolation cannot be resolved on the head (``${oc.env:...}`` of the workers).
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    from hydra.errors import HydraException

    from ansible_collections.mvp.ray.plugins.module_utils.mvp_hydra import _compose

    try:
        config = OmegaConf.to_container(_compose(config_dir, config_name, list(overrides)), resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError, KeyError):
        return []
    return mirrored_problems(config)
