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

from mvp_jobspec import mvp_job_spec
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


@pytest.mark.skipif(not verl_python(), reason="MVP_TEST_VERL_PYTHON (a Python with torch and verl's dependencies) unset")
def test_the_catalog_passes_verls_own_checks_as_gpu_inventories_build_it(verl_config_dir, gpu_request, catalog,
                                                                          spec_defaults):
    _, request_ = gpu_request
    result = mvp_job_spec(dict(request_, submission_id="j"), catalog, spec_defaults)
    root = os.path.dirname(os.path.dirname(os.path.dirname(verl_config_dir)))
    report = run_snapshot_checks(verl_python(), root, verl_config_dir, result["hydra_config"],
                                 result["hydra_overrides"], timeout=300)
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
