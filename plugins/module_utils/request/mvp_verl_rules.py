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
   ``verl.utils.tracking.Tracking.supported_backend``. Then the trainers' own start-up
   steps that need no GPU and no weights (docs/jobs.md, What verl does before the
   weights): the model folder as verl reads it (``HFModelConfig``: HF config, generation
   config, tokenizer, processor), the resource pools verl will ask Ray for
   (``PPOTrainer._init_resource_pool_mgr`` / the SFT trainer's ``RayResourcePool``;
   returned in ``resource_pools`` and compared with the ALIVE workers by
   ``mvp_refuse.mvp_submit_problems``), and the data files within a bound: the parquet
   metadata (row count against the train dataloader's batch) and verl's own dataset
   class (``create_rl_dataset`` / ``create_sft_dataset``) on the first
   :data:`SAMPLE_ROWS` rows, item 0 built. verl's config classes import
   torch: on a node without torch this layer reports itself skipped (naming
   :data:`CHECKS`), it never fails.
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
import re
import subprocess
import tempfile
import time

RESULT_MARK = "MVP_VERL_CHECK_RESULT="

# What :data:`CHILD` runs, named in its ``skipped`` when it cannot run (docs/jobs.md: What verl does before the weights).
CHECKS = ("verl.utils.config.validate_config and the config classes", "verl.utils.tracking logger names",
          "the model folder (verl.workers.config.HFModelConfig: HF config and tokenizer)",
          "the resource pools (PPOTrainer._init_resource_pool_mgr / RayResourcePool)",
          "the data files (schema, row count, verl's dataset class on the first rows)")

# Rows of each data file verl's own dataset class is run on (the schema and row count come from the metadata).
SAMPLE_ROWS = 16

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

def run(name, call, fix=""):
    try:
        return call()
    except Exception as exc:  # verl raises ValueError, AssertionError, TypeError, OSError...
        text = " ".join(str(exc).split())[:600] or type(exc).__name__
        result["errors"].append("%s: %s: %s%s" % (name, type(exc).__name__, text, (". Fix: " + fix) if fix else ""))
        return None

with contextlib.redirect_stdout(sys.stderr):
    try:
        import torch  # noqa: F401 - verl's config classes import it
    except Exception as exc:
        result["skipped"] = "torch cannot be imported by %s (%s); not run: %s" % (
            sys.executable, exc, ", ".join(args.get("checks") or []))
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
        for section in ("engine", "optim", "checkpoint", "profiler"):
            if cfg.get(section) is not None and "_target_" in cfg[section]:
                run("%s (%s)" % (section, cfg[section]._target_),
                    lambda section=section: omega_conf_to_dataclass(cfg[section]))
        if "trainer" in cfg and cfg.trainer.get("profile_interval") is not None:
            def profile_interval():
                import types
                from verl.trainer.sft_trainer_ray import SFTTrainer
                SFTTrainer._validate_profiler_interval(types.SimpleNamespace(
                    profiler_interval=cfg.trainer.profile_interval))
            run("trainer.profile_interval=%s (verl.trainer.sft_trainer_ray.SFTTrainer._validate_profiler_interval)"
                % list(cfg.trainer.profile_interval), profile_interval,
                fix="give [start, end] with end >= start (both negative: no profiling)")
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
    # The trainers' own start-up steps before a worker loads weights (docs/jobs.md: What verl does before
    # the weights): the model folder as verl reads it, the resource pools, a bounded sample of the data.
    import copy, os, shutil, tempfile, types
    ppo = "actor_rollout_ref" in cfg
    model_key = "actor_rollout_ref.model" if ppo else "model"
    model_cfg = cfg.actor_rollout_ref.model if ppo else cfg.get("model")
    model = None
    if model_cfg is not None and "_target_" in model_cfg:
        model = run("%s.path=%s: verl.workers.config.HFModelConfig (its HF config, generation config, tokenizer and "
                    "processor; no weights)" % (model_key, model_cfg.get("path")),
                    lambda: omega_conf_to_dataclass(model_cfg),
                    fix="set model to a folder with the model's config.json and its tokenizer (as "
                        "transformers' save_pretrained writes them)")
    result["seconds"]["model"] = round(time.time() - start, 2)

    built = {}

    def ppo_pools():
        if not cfg.trainer.get("use_v1", False):
            return None  # the legacy TaskRunner builds its pools inside a Ray actor
        from verl.trainer.ppo.v1 import get_trainer_cls
        holder = types.SimpleNamespace(config=copy.deepcopy(cfg))
        get_trainer_cls(cfg.trainer.v1.trainer_mode)._init_resource_pool_mgr(holder)
        built["manager"] = holder.resource_pool_manager
        return {name: list(nodes) for name, nodes in holder.resource_pool_manager.resource_pool_spec.items()}

    def sft_pools():
        from verl.single_controller.ray import RayResourcePool
        built["pools"] = {"sft": RayResourcePool(process_on_nodes=[cfg.trainer.n_gpus_per_node] * cfg.trainer.nnodes)}
        return {"sft": list(built["pools"]["sft"].store)}

    def placement_requests():
        # The placement groups verl's own RayResourcePool.get_placement_groups asks Ray for, recorded instead of
        # made: its placement_group call is replaced by a recorder, and Ray answers as the cluster the job meets
        # (args["cluster_resources"], the ALIVE nodes' totals: a platform may name its Ray resource after it).
        import ray
        from verl.single_controller.ray import base as ray_base
        asked = []

        class Recorded:
            def __init__(self, bundles):
                self.bundle_specs, self.bundle_count = bundles, len(bundles)

            def ready(self):
                return None

        def record(bundles, strategy="PACK", name="", lifetime=None, **_kwargs):
            asked.append({"bundles": [dict(b) for b in bundles], "strategy": strategy, "name": name})
            return Recorded(bundles)

        cluster = dict(args.get("cluster_resources") or {})
        patches = [(ray_base, "placement_group", record), (ray_base, "sort_placement_group_by_node_ip", list),
                   (ray, "get", lambda refs, *a, **k: refs), (ray, "is_initialized", lambda: True),
                   (ray, "cluster_resources", lambda: dict(cluster)), (ray, "available_resources", lambda: dict(cluster))]
        saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _new in patches if hasattr(owner, attr)]
        try:
            for owner, attr, new in patches:
                setattr(owner, attr, new)
            pools = built.get("pools")
            if pools is None and built.get("manager") is not None:
                manager = built["manager"]
                manager._check_resource_available = lambda: None  # Ray's live view: the queue's business
                manager.create_resource_pool()
                pools = manager.resource_pool_dict
            device = cfg.trainer.get("device") or __import__("verl.utils.device", fromlist=["x"]).get_device_name()
            for name, pool in sorted((pools or {}).items()):
                before = len(asked)
                # RayWorkerGroup's default bin_pack: STRICT_PACK, with the trainer's device name
                pool.get_placement_groups(strategy="STRICT_PACK", device_name=device)
                for item in asked[before:]:
                    item["pool"] = name
        finally:
            for owner, attr, old in saved:
                setattr(owner, attr, old)
        return asked

    if "trainer" in cfg and "nnodes" in cfg.trainer:
        result["resource_pools"] = run(
            "resource pools (%s)" % ("verl.trainer.ppo.v1.trainer_base.PPOTrainer._init_resource_pool_mgr" if ppo
                                     else "verl.single_controller.ray.RayResourcePool"),
            ppo_pools if ppo else sft_pools, fix="correct the pool sizes verl names in trainer_overrides")
        if result["resource_pools"] and args.get("cluster_resources") is not None:
            # never a refusal of its own: a snapshot whose code differs is said, and judged by the pools above
            try:
                result["placement_requests"] = placement_requests()
            except Exception as exc:
                result["placement_requests_skipped"] = "%s: %s" % (type(exc).__name__, " ".join(str(exc).split())[:300])
    result["seconds"]["pools"] = round(time.time() - start, 2)
    # the data step only when the caller names its bound (tests/reliability/catalog_checks.py checks the
    # catalog's sizes against the local inventory's small dataset: it does not)
    if model is not None and cfg.get("data") is not None and args.get("sample_rows"):
        sample_rows = int(args["sample_rows"])
        work = tempfile.mkdtemp(prefix="mvp-verl-check-")
        os.environ["HF_DATASETS_CACHE"] = os.path.join(work, "hf-datasets")
        try:
            import pyarrow.parquet as pq

            def files_of(value):
                return [str(v) for v in ([value] if isinstance(value, str) else list(value or []))]

            def sample(key, paths):
                rows, out = 0, []
                for index, path in enumerate(paths):
                    meta = pq.ParquetFile(path)
                    rows += meta.metadata.num_rows
                    target = os.path.join(work, "%s-%d.parquet" % (key.replace(".", "_"), index))
                    first = next(meta.iter_batches(batch_size=sample_rows), None)
                    table = (meta.schema_arrow.empty_table() if first is None else
                             __import__("pyarrow").Table.from_batches([first]))
                    pq.write_table(table, target)
                    out.append(target)
                return rows, out

            def loader_batch():
                """The train dataloader's batch size as the trainer sets it (None: 1 prompt per fetch)."""
                if not ppo:
                    return "data.train_batch_size", cfg.data.get("train_batch_size")
                groups = cfg.get("algorithm", {}).get("filter_groups") or {}
                v1 = cfg.trainer.get("v1") or {}
                if (v1.get("trainer_mode", "sync") != "sync" or groups.get("enable", False)
                        or (v1.get("sampler") or {}).get("sync_refill_failed_groups", False)):
                    return "data.gen_batch_size", None  # verl sets it to 1
                if cfg.data.get("gen_batch_size"):
                    return "data.gen_batch_size", cfg.data.get("gen_batch_size")
                return "data.train_batch_size", cfg.data.get("train_batch_size")

            for key in ("data.train_files", "data.val_files"):
                paths = files_of(cfg.data.get(key.split(".")[1]))
                if not paths:
                    continue
                counted = run("%s: pyarrow.parquet.ParquetFile (schema and the first %d rows)" % (key, sample_rows),
                              lambda paths=paths, key=key: sample(key, paths),
                              fix="point %s at parquet files (set dataset to a prepared one)" % key)
                if counted is None:
                    continue
                rows, paths_ = counted
                batch_key, batch = loader_batch()
                if key == "data.train_files" and isinstance(batch, int) and 0 < rows < batch:
                    result["errors"].append(
                        "%s=%d: %s hold %d rows (parquet metadata), fewer than one batch: verl's train dataloader "
                        "(StatefulDataLoader, drop_last=True; %s) yields no batch and the job trains nothing. Fix: "
                        "lower %s to %d or less, or use a larger dataset"
                        % (batch_key, batch, key, rows, "PPOTrainer._init_dataloader" if ppo else
                           "SFTTrainer._build_dataloader", batch_key, rows))
                if ppo:
                    from verl.trainer.ppo.utils import create_rl_dataset
                    build = lambda paths_=paths_, key=key: create_rl_dataset(
                        paths_, cfg.data, model.tokenizer, model.processor, is_train=key.endswith("train_files"))
                    name = "verl.trainer.ppo.utils.create_rl_dataset"
                else:
                    from verl.trainer.sft_trainer_ray import create_sft_dataset
                    build = lambda paths_=paths_: create_sft_dataset(paths_, cfg.data, model.tokenizer,
                                                                     processor=model.processor)
                    name = "verl.trainer.sft_trainer_ray.create_sft_dataset"
                fix = ("make %s's rows fit the workload (the keys verl names under data.*, e.g. data.prompt_key, "
                       "data.max_prompt_length) or set dataset to a prepared one" % key)
                dataset = run("%s (%s on its first %d rows)" % (key, name, sample_rows), build, fix=fix)
                if dataset is None:
                    continue
                if len(dataset) == 0:
                    result["errors"].append(
                        "%s: %s keeps none of its first %d rows (filtered, e.g. longer than data.max_prompt_length). "
                        "Fix: %s" % (key, name, sample_rows, fix))
                else:
                    run("%s (%s, item 0 of its first %d rows)" % (key, type(dataset).__name__, sample_rows),
                        lambda dataset=dataset: dataset[0], fix=fix)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"]["data"] = round(time.time() - start, 2)
finish()
'''


def _input_stamps(overrides, job_dir=""):
    """The size and time of every existing absolute path an override names (outside the job's own folder), and
    of the entries of such a folder: a model folder or data file changed since decides the checks anew."""
    stamps = []
    for override in overrides:
        for path in re.findall(r"/[^\s,\[\]'\"=]+", override.partition("=")[2]):
            if job_dir and (path == job_dir or path.startswith(job_dir + "/")):
                continue
            try:
                info = os.stat(path)
            except OSError:
                stamps.append([path, None])
                continue
            entries = []
            if os.path.isdir(path):
                try:
                    for name in sorted(os.listdir(path))[:200]:
                        sub = os.stat(os.path.join(path, name))
                        entries.append([name, sub.st_size, sub.st_mtime_ns])
                except OSError:
                    pass
            stamps.append([path, info.st_size, info.st_mtime_ns, entries])
    return stamps


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
                      [general(o) for o in overrides], _input_stamps(overrides, job_dir)], sort_keys=True)
    return os.path.join(cache_dir, hashlib.sha256(key.encode("utf-8")).hexdigest() + ".json")


def start_snapshot_checks(python, snapshot_root, config_dir, config_name, overrides, timeout=180,
                          cache_dir=None, job_dir="", submission_id="", sample_rows=None, cluster_resources=None):
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
    :param sample_rows: int or None, the rows of each data file verl's dataset class reads (None:
        :data:`SAMPLE_ROWS`; 0: the data files are not read; part of the cache key).
    :param cluster_resources: dict or None, resource name -> total of the ALIVE nodes (Ray's
        ``cluster_resources()`` as the job will see it; part of the cache key). With it the result has
        ``placement_requests``: every placement group the snapshot's own ``RayResourcePool.get_placement_groups``
        asks Ray for (list of ``{pool, strategy, bundles, name}``), or ``placement_requests_skipped`` (str).
    :returns: a handle for :func:`finish_snapshot_checks`.
    """
    overrides = list(overrides)
    if cluster_resources is not None:
        cluster_resources = {str(k): float(v) for k, v in sorted(cluster_resources.items())}
    handle = {"start": time.time(), "timeout": timeout, "cache": None, "proc": None, "result": None}
    if cache_dir:
        try:
            handle["cache"] = _cache_file(cache_dir, python, snapshot_root, config_dir, config_name,
                                          (overrides if sample_rows is None else overrides + ["<sample_rows>=%s"
                                                                                              % sample_rows])
                                          + ([] if cluster_resources is None else
                                             ["<cluster>=%s" % json.dumps(cluster_resources, sort_keys=True)]),
                                          job_dir, submission_id)
            with open(handle["cache"], encoding="utf-8") as stream:
                handle["result"] = dict(json.load(stream), cached=True)
            return handle
        except (OSError, ValueError):
            pass
    env = dict(os.environ, PYTHONPATH=snapshot_root + (":" + os.environ["PYTHONPATH"]
                                                       if os.environ.get("PYTHONPATH") else ""),
               CUDA_VISIBLE_DEVICES="", TOKENIZERS_PARALLELISM="false",
               # the snapshot is on the shared storage: a check writes nothing there (no __pycache__), nor
               # into HF_HOME's datasets cache (verl's dataset class, on a bounded sample, caches through the
               # datasets library, which reads this variable once, when verl first imports it)
               PYTHONDONTWRITEBYTECODE="1",
               HF_DATASETS_CACHE=os.path.join(tempfile.gettempdir(), "mvp-verl-check-hf-datasets"))
    payload = json.dumps({"config_dir": config_dir, "config_name": config_name, "overrides": overrides,
                          "checks": list(CHECKS), "cluster_resources": cluster_resources,
                          "sample_rows": SAMPLE_ROWS if sample_rows is None else int(sample_rows)})
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


def run_snapshot_checks(python, snapshot_root, config_dir, config_name, overrides, timeout=180, cache_dir=None,
                        sample_rows=None, cluster_resources=None):
    """:func:`start_snapshot_checks`, :func:`finish_snapshot_checks`, :func:`save_snapshot_checks`
    (same parameters and result)."""
    handle = start_snapshot_checks(python, snapshot_root, config_dir, config_name, overrides, timeout, cache_dir,
                                   sample_rows=sample_rows, cluster_resources=cluster_resources)
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
    actor_strategy = _get(config, "actor_rollout_ref.actor.strategy")
    if _get(config, "actor_rollout_ref.actor.checkpoint.async_save") is True and actor_strategy != "megatron":
        problems.append("actor_rollout_ref.actor.checkpoint.async_save=true with actor_rollout_ref.actor.strategy=%s: "
                        "verl's PPO trainers then skip writing latest_checkpointed_iteration.txt, which only "
                        "Megatron's checkpoint manager writes itself, so no checkpoint is ever marked complete and a "
                        "continued run starts from an older step or from 0 (verl#7952, "
                        "https://github.com/verl-project/verl/issues/7952; mirrors ray_trainer.py and "
                        "ppo/v1/trainer_base.py _save_checkpoint). Set async_save to false (with %s the save is "
                        "synchronous anyway)" % (actor_strategy, actor_strategy))
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

    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import _compose

    try:
        config = OmegaConf.to_container(_compose(config_dir, config_name, list(overrides)), resolve=True)
    except (HydraException, OmegaConfBaseException, ValueError, KeyError):
        return []
    return mirrored_problems(config)
