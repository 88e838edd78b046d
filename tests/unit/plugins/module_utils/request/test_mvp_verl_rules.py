"""verl's own start-up checks before submission: the mirrored ones and the snapshot's (module_utils mvp_verl_rules).

The mirrored checks run on the config the catalog's overrides compose to against the pinned
verl release's Hydra configs (the cached wheel, fixture ``verl_config_dir``); the snapshot's
own run in a subprocess of a Python with torch (MVP_TEST_VERL_PYTHON), skipped, not failed,
without it.
"""
import os
import subprocess
import sys

import pytest

from request_then_spec import mvp_job_spec
from mvp_verl_rules import composed_problems, mirrored_problems, run_snapshot_checks


@pytest.fixture
def spec(catalog, spec_defaults):
    """Build job-1 of ``workload`` with the shared defaults."""
    def build(workload="grpo", **request):
        return mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), catalog, spec_defaults)
    return build


def test_mirrored_checks_name_the_key_and_the_verl_function():
    base = {"trainer": {"nnodes": 1, "n_gpus_per_node": 1, "total_epochs": 1}, "data": {"train_batch_size": 4},
            "actor_rollout_ref": {"rollout": {"n": 1}}, "algorithm": {"adv_estimator": "gae"}}
    assert mirrored_problems(base) == []
    grpo = dict(base, algorithm={"adv_estimator": "grpo"})
    (problem,) = mirrored_problems(grpo)
    assert problem.startswith("actor_rollout_ref.rollout.n=1 with algorithm.adv_estimator=grpo")
    assert "compute_grpo_outcome_advantage" in problem
    epochs = dict(base, trainer=dict(base["trainer"], total_epochs=-1))
    (problem,) = mirrored_problems(epochs)
    assert problem.startswith("trainer.total_epochs=-1: must be >= 1")
    groups = dict(base, algorithm={"adv_estimator": "gae", "filter_groups": {"enable": True, "metric": None}})
    assert "_resolve_filter_groups_metric" in mirrored_problems(groups)[0]
    resume = dict(base, trainer=dict(base["trainer"], resume_mode="resume_path", resume_from_path="/private/jobs/x"))
    assert mirrored_problems(resume)[0].startswith("trainer.resume_from_path='/private/jobs/x'")


def test_the_catalog_passes_the_mirrored_checks_as_gpu_inventories_build_it(verl_config_dir, gpu_request, catalog,
                                                                             spec_defaults):
    _, request_ = gpu_request
    result = mvp_job_spec(dict(request_, submission_id="j"), catalog, spec_defaults)
    assert result["needs_gpus"] and result["gpus_requested"] == 8
    assert composed_problems(verl_config_dir, result["hydra_config"], result["hydra_overrides"]) == []


@pytest.mark.parametrize("workload", ["grpo", "ppo"])
@pytest.mark.parametrize("strategy, refused", [("fsdp", True), ("fsdp2", True), ("megatron", False)])
def test_async_save_on_fsdp_is_refused_before_submission_naming_verl_7952(verl_config_dir, spec, workload, strategy,
                                                                          refused):
    # verl#7952: the PPO trainers skip latest_checkpointed_iteration.txt with async_save, and only Megatron's
    # checkpoint manager writes it: composed from verl's own config, the request is refused on FSDP only.
    result = spec(workload, trainer_overrides={"actor_rollout_ref.actor.checkpoint.async_save": True,
                                               "actor_rollout_ref.actor.strategy": strategy})
    problems = [p for p in composed_problems(verl_config_dir, result["hydra_config"], result["hydra_overrides"])
                if "async_save" in p]
    if refused:
        (problem,) = problems
        assert problem.startswith("actor_rollout_ref.actor.checkpoint.async_save=true with "
                                  "actor_rollout_ref.actor.strategy=%s" % strategy)
        assert "verl#7952" in problem and "Set async_save to false" in problem
    else:
        assert problems == []
    off = spec(workload, trainer_overrides={"actor_rollout_ref.actor.checkpoint.async_save": False})
    assert not [p for p in composed_problems(verl_config_dir, off["hydra_config"], off["hydra_overrides"])
                if "async_save" in p]


def test_grpo_without_n_fails_the_mirrored_check_on_verls_default(verl_config_dir, spec):
    # the builder refuses this already (test_a_group_estimator_with_one_rollout_is_refused); the head's
    # mirrored check sees verl's default n=1 on the composed config too
    result = spec("ppo")
    overrides = [o.replace("algorithm.adv_estimator=gae", "algorithm.adv_estimator=grpo")
                 for o in result["hydra_overrides"]]
    assert "algorithm.adv_estimator=grpo" in overrides
    (problem,) = composed_problems(verl_config_dir, result["hydra_config"], overrides)
    assert problem.startswith("actor_rollout_ref.rollout.n=1 with algorithm.adv_estimator=grpo")


def verl_python():
    """A Python that can run verl's own checks (torch and verl's dependencies): MVP_TEST_VERL_PYTHON."""
    return os.environ.get("MVP_TEST_VERL_PYTHON")


def test_the_snapshots_checks_are_skipped_not_failed_without_torch(verl_config_dir, spec):
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("this Python has torch")
    result = spec()
    report = run_snapshot_checks(sys.executable, os.path.dirname(os.path.dirname(os.path.dirname(verl_config_dir))),
                                 verl_config_dir, "ppo_trainer", result["hydra_overrides"], timeout=120)
    assert report["errors"] == [] and report["skipped"].startswith("torch cannot be imported by %s" % sys.executable)
    # it names every check it did not run (issue 40): the model folder, the pools and the data among them
    from mvp_verl_rules import CHECKS
    assert report["skipped"].endswith("; not run: " + ", ".join(CHECKS))


@pytest.mark.skipif(not verl_python(), reason="MVP_TEST_VERL_PYTHON (a Python with torch and verl's dependencies) unset")
def test_the_catalog_passes_verls_own_checks_as_gpu_inventories_build_it(verl_config_dir, gpu_request, catalog,
                                                                          spec_defaults):
    _, request_ = gpu_request
    # as tests/reliability/catalog_checks.py: a model folder this machine has (its size enters no batch check;
    # verl reads it as the critic's and the actor's), and no data file read (the GPU batch sizes against the
    # local inventory's 64-row dataset)
    request_ = {k: v for k, v in request_.items() if k != "model"}
    result = mvp_job_spec(dict(request_, submission_id="j"), catalog, dict(spec_defaults, model="tiny-qwen2"))
    root = os.path.dirname(os.path.dirname(os.path.dirname(verl_config_dir)))
    report = run_snapshot_checks(verl_python(), root, verl_config_dir, result["hydra_config"],
                                 result["hydra_overrides"], timeout=300, sample_rows=0)
    assert report["skipped"] is None and report["errors"] == []


def test_a_result_is_kept_per_config_and_the_jobs_own_id_and_folder_do_not_count(tmp_path, verl_config_dir, spec):
    """A stand-in Python that answers like CHILD and counts its runs: the second job with the same
    config (another id and job directory) is answered from the cache without running it again."""
    from mvp_verl_rules import finish_snapshot_checks, save_snapshot_checks, start_snapshot_checks
    runs = tmp_path / "runs"
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho run >> %s\necho 'verl prints progress'\n"
                    "echo 'MVP_VERL_CHECK_RESULT={\"errors\": [\"verl.utils.config.validate_config: ValueError: x\"], "
                    "\"skipped\": null, \"seconds\": {\"total\": 1.0}}'\n" % runs)
    fake.chmod(0o755)
    root = os.path.dirname(os.path.dirname(os.path.dirname(verl_config_dir)))

    def check(job):
        overrides = [
            o.replace("job-1", job) for o in spec()["hydra_overrides"]]
        handle = start_snapshot_checks(str(fake), root, verl_config_dir, "ppo_trainer", overrides, 60,
                                       cache_dir=str(tmp_path / "cache"), job_dir="/private/jobs/" + job,
                                       submission_id=job)
        result = finish_snapshot_checks(handle)
        save_snapshot_checks(handle, dict(result, mirrored=["m"]))
        return result

    first, second = check("job-a"), check("job-b")
    assert first["errors"] == second["errors"] == ["verl.utils.config.validate_config: ValueError: x"]
    assert (first["cached"], second["cached"]) == (False, True) and second["mirrored"] == ["m"]
    assert runs.read_text().count("run") == 1
    check_other = start_snapshot_checks(str(fake), root, verl_config_dir, "ppo_trainer", ["trainer.total_epochs=2"],
                                        60, cache_dir=str(tmp_path / "cache"))
    assert not finish_snapshot_checks(check_other)["cached"] and runs.read_text().count("run") == 2


# Issue 40: verl's own start-up steps before the weights, with real verl objects (MVP_TEST_VERL_PYTHON: a Python with
# torch and verl's dependencies whose file system shows the controller's paths and /private, e.g. a wrapper that
# runs `docker exec -i -w "$(pwd)" -e PYTHONPATH=... <container of mvp-verl-cpu> python "$@"`, the container
# started with /srv/mvp/private mounted on /private and on itself, ~/.cache/mvp-tests and /tmp on themselves).
needs_verl = pytest.mark.skipif(not verl_python(), reason="MVP_TEST_VERL_PYTHON (a Python with torch and verl's "
                                                          "dependencies) unset")


def snapshot_of(verl_config_dir):
    return os.path.dirname(os.path.dirname(os.path.dirname(verl_config_dir)))


def with_override(overrides, key, value):
    """``overrides`` with ``key`` set to ``value`` (replaced or added)."""
    return [o for o in overrides if o.partition("=")[0].lstrip("+") != key] + ["%s=%s" % (key, value)]


TINY_MODEL = "/srv/mvp/private/hf/local/tiny-qwen2"  # the local inventory's model (common/models/tiny-qwen2)
GSM8K = "/srv/mvp/private/datasets/gsm8k"  # the local inventory's prepared dataset


@pytest.fixture
def tiny_model(tmp_path):
    """The local inventory's tiny model without its weights (config, generation config, tokenizer)."""
    import shutil
    if not os.path.isdir(TINY_MODEL) or not os.path.isdir(GSM8K):
        pytest.skip("the local inventory's tiny model or gsm8k dataset is not on this machine")
    model = tmp_path / "config-and-tokenizer-only"
    model.mkdir()
    for name in os.listdir(TINY_MODEL):
        if not name.endswith(".safetensors"):
            shutil.copy(os.path.join(TINY_MODEL, name), str(model / name))
    return str(model)


def local(result, model, **overrides):
    """The job's overrides on the local inventory's sizes: the tiny model, gsm8k, one process, batch 8."""
    changed = result["hydra_overrides"]
    sizes = {"trainer.nnodes": 1, "trainer.n_gpus_per_node": 1, "trainer.device": "cpu"}
    if result["hydra_config"] == "ppo_trainer":
        sizes.update({"actor_rollout_ref.model.path": model, "data.train_batch_size": 8,
                      "actor_rollout_ref.actor.ppo_mini_batch_size": 4,
                      "data.train_files": GSM8K + "/train.parquet", "data.val_files": GSM8K + "/test.parquet"})
    else:
        sizes.update({"model.path": model})
    for key, value in dict(sizes, **overrides).items():
        changed = with_override(changed, key, str(value).lower() if isinstance(value, bool) else value)
    return changed


def verl_run(verl_config_dir, result, overrides=None, **kwargs):
    return run_snapshot_checks(verl_python(), snapshot_of(verl_config_dir), verl_config_dir, result["hydra_config"],
                               result["hydra_overrides"] if overrides is None else overrides, timeout=300, **kwargs)


@needs_verl
def test_a_model_folder_without_its_tokenizer_is_refused_with_hfmodelconfigs_message(tmp_path, tiny_model,
                                                                                       verl_config_dir, spec):
    result = spec()
    empty = tmp_path / "no-model"
    empty.mkdir()
    report = verl_run(verl_config_dir, result, local(result, str(empty)))
    assert report["skipped"] is None
    (error,) = report["errors"]
    assert error.startswith("actor_rollout_ref.model.path=%s: verl.workers.config.HFModelConfig" % empty)
    assert "tokenizer" in error and "Fix: set model to a folder" in error


@needs_verl
def test_a_model_folder_is_read_as_verl_reads_it_without_the_weights(tiny_model, verl_config_dir, spec):
    result = spec()
    report = verl_run(verl_config_dir, result, local(result, tiny_model))
    assert report["skipped"] is None and report["errors"] == []


@needs_verl
@pytest.mark.parametrize("workload, overrides, pools", [
    ("grpo", {"trainer.nnodes": 2, "trainer.n_gpus_per_node": 3}, {"global_pool": [3, 3]}),
    ("grpo", {"trainer.nnodes": 1, "trainer.n_gpus_per_node": 2, "reward.reward_model.enable_resource_pool": True,
              "reward.reward_model.enable": True, "reward.reward_model.nnodes": 1,
              "reward.reward_model.n_gpus_per_node": 1}, {"global_pool": [2], "reward_pool": [1]}),
    ("sft", {"trainer.nnodes": 2, "trainer.n_gpus_per_node": 1}, {"sft": [1, 1]}),
])
def test_the_resource_pools_are_the_ones_verls_own_code_builds(tiny_model, verl_config_dir, spec, workload, overrides,
                                                               pools):
    result = spec(workload)
    report = verl_run(verl_config_dir, result, local(result, tiny_model, **overrides))
    assert report["skipped"] is None
    assert report["resource_pools"] == pools


@needs_verl
@pytest.mark.parametrize("workload, nnodes, per_node", [("sft", 2, 1), ("grpo", 1, 2)])
def test_the_placement_groups_are_recorded_as_verls_own_code_asks_for_them(tiny_model, verl_config_dir, spec,
                                                                           workload, nnodes, per_node):
    # Issue 51: one STRICT_PACK group per node entry of each pool, one bundle per process, each bundle naming
    # CPUs and the platform's Ray resource; nothing is made (no Ray connection in the child)
    result = spec(workload)
    cluster = {"CPU": 32.0, "GPU": 2.0, "worker_node": 200.0}
    report = verl_run(verl_config_dir, result, local(result, tiny_model, **{"trainer.nnodes": nnodes,
                                                                             "trainer.n_gpus_per_node": per_node}),
                      cluster_resources=cluster)
    assert report["skipped"] is None and "placement_requests_skipped" not in report, report
    groups = report["placement_requests"]
    assert [len(g["bundles"]) for g in groups] == [per_node] * nnodes
    assert all(g["strategy"] == "STRICT_PACK" and g["pool"] for g in groups)
    assert all(b.get("CPU", 0) >= 1 and len(b) >= 1 for g in groups for b in g["bundles"])


@needs_verl
def test_a_data_file_whose_rows_lack_the_prompt_key_is_refused_by_verls_dataset(tiny_model, verl_config_dir, spec):
    result = spec()
    report = verl_run(verl_config_dir, result, local(result, tiny_model, **{"data.prompt_key": "nope"}))
    assert report["skipped"] is None
    assert any(e.startswith("data.train_files (RLHFDataset, item 0 of its first") and "KeyError: 'nope'" in e
               for e in report["errors"]), report["errors"]


@needs_verl
def test_fewer_rows_than_one_batch_is_refused_from_the_parquet_metadata(tmp_path, tiny_model, verl_config_dir, spec):
    import pyarrow.parquet as pq
    result = spec()
    small = tmp_path / "small.parquet"
    pq.write_table(pq.read_table(GSM8K + "/train.parquet").slice(0, 3), str(small))
    report = verl_run(verl_config_dir, result, local(result, tiny_model, **{"data.train_files": str(small)}))
    assert ("data.train_batch_size=8: data.train_files hold 3 rows (parquet metadata), fewer than one batch"
            in " ".join(report["errors"])), report["errors"]


@needs_verl
def test_an_sft_profile_interval_verl_refuses_is_refused_with_its_own_function(tiny_model, verl_config_dir, spec):
    result = spec("sft")
    report = verl_run(verl_config_dir, result, local(result, tiny_model, **{"trainer.profile_interval": "[5,2]"}))
    assert report["skipped"] is None
    assert any(e.startswith("trainer.profile_interval=[5, 2] (verl.trainer.sft_trainer_ray.SFTTrainer."
                            "_validate_profiler_interval): AssertionError") for e in report["errors"]), report["errors"]


def test_a_changed_model_folder_or_data_file_is_checked_anew(tmp_path, verl_config_dir, spec):
    """The cache key counts the files the overrides name (not the job's own folder): a model folder given its
    tokenizer after a refusal is not answered from the cache."""
    from mvp_verl_rules import _cache_file
    model = tmp_path / "model"
    model.mkdir()
    overrides = ["actor_rollout_ref.model.path=%s" % model, "trainer.default_local_dir=/private/jobs/j/checkpoints"]
    args = ("python", snapshot_of(verl_config_dir), verl_config_dir, "ppo_trainer", overrides, "/private/jobs/j", "j")
    before = _cache_file(str(tmp_path / "cache"), *args)
    assert _cache_file(str(tmp_path / "cache"), *args) == before
    (model / "tokenizer.json").write_text("{}")
    assert _cache_file(str(tmp_path / "cache"), *args) != before
