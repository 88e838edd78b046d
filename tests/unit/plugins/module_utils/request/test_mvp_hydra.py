"""The catalog's overrides compose against a real verl release's Hydra configs (module_utils mvp_hydra).

The release is the cached verl wheel of the shared fixtures (``verl_release``: downloaded once,
pure Python, about 1.7 MB); MVP_TEST_VERL names another release to check against (a pip
requirement, e.g. ``verl==0.9.0``).
"""
import os

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import validate_overrides
from request_then_spec import mvp_job_spec


@pytest.fixture(scope="session")
def config_dir(verl_release):
    """``verl/trainer/config`` of MVP_TEST_VERL's release (the pinned one when unset)."""
    return os.path.join(verl_release(os.environ.get("MVP_TEST_VERL")), "verl", "trainer", "config")


@pytest.fixture
def overrides_of(catalog, spec_defaults):
    """The Hydra config name and overrides of a job of ``workload`` (request fields in ``extra``)."""
    def build(workload, **extra):
        spec = mvp_job_spec(dict({"workload": workload, "submission_id": "j"}, **extra), catalog, spec_defaults)
        return spec["hydra_config"], spec["hydra_overrides"]
    return build


@pytest.mark.parametrize("workload", ["ppo", "grpo", "sft"])
def test_catalog_overrides_compose(config_dir, workload, overrides_of):
    name, overrides = overrides_of(workload)
    assert overrides, "a GPU workload must pass overrides"
    assert validate_overrides(config_dir, name, overrides) == []


def test_misspelled_key_is_named(config_dir, overrides_of):
    name, overrides = overrides_of("grpo", trainer_overrides={"trainer.total_epoch": 1})
    errors = validate_overrides(config_dir, name, overrides)
    assert len(errors) == 1 and "trainer.total_epoch'" in errors[0]


def test_wrong_type_is_named(config_dir, overrides_of):
    name, overrides = overrides_of("ppo", trainer_overrides={"trainer.total_epochs": "many"})
    errors = validate_overrides(config_dir, name, overrides)
    assert len(errors) == 1 and "'trainer.total_epochs' expects int" in errors[0]


def test_verls_sft_word_for_a_checkpoint_every_epoch_fits_and_another_word_does_not(config_dir, overrides_of):
    # sft_trainer_ray.py reads save_freq "after_each_epoch" as one epoch's steps; its YAML default is a number
    name, good = overrides_of("sft", trainer_overrides={"trainer.save_freq": "after_each_epoch"})
    assert "trainer.save_freq=after_each_epoch" in good
    assert validate_overrides(config_dir, name, good) == []
    bad = [o.replace("after_each_epoch", "every_epoch") for o in good]
    (error,) = validate_overrides(config_dir, name, bad)
    assert "'trainer.save_freq' expects int" in error


def test_reward_function_path_reaches_the_custom_reward_override(config_dir, overrides_of):
    name, overrides = overrides_of("grpo", reward_fn_path="/private/user/code/reward.py")
    # verl 0.9.1 reads reward.custom_reward_function (the top-level key is a legacy alias)
    assert "reward.custom_reward_function.path=/private/user/code/reward.py" in overrides
    assert validate_overrides(config_dir, name, overrides) == []


@pytest.mark.parametrize("workload", ["ppo", "grpo", "sft"])
def test_local_inventory_cpu_overrides_compose(config_dir, workload, catalog, spec_defaults, local_job_overrides):
    site = local_job_overrides  # its one Jinja expression, the shared root, rendered
    assert workload in site
    spec = mvp_job_spec({"workload": workload, "submission_id": "j"}, catalog, dict(spec_defaults, site_overrides=site))
    assert validate_overrides(config_dir, spec["hydra_config"], spec["hydra_overrides"]) == []


def test_ppo_critic_starts_from_the_model_and_helpers_avoid_the_head(spec_defaults, overrides_of):
    _, overrides = overrides_of("ppo")
    model = "/private/common/models/%s" % spec_defaults["model"]
    assert "critic.model.path=%s" % model in overrides and "actor_rollout_ref.model.path=%s" % model in overrides
    helpers = "+transfer_queue.backend.SimpleStorage.required_node_resource=%s" % spec_defaults["worker_resource"]
    assert helpers in overrides


# verl's string forms of numbers, against the pinned release (the builder's side:
# plugins/filter/test_mvp_jobspec_submit_rules.py)
@pytest.mark.parametrize("key, value", [
    ("algorithm.rollout_correction.rollout_is_threshold", "0.5_5"),
    ("algorithm.rollout_correction.rollout_is_threshold", "0.5_4.0"),
    ("algorithm.rollout_correction.rollout_is_threshold", 2.0),
    ("algorithm.rollout_correction.rollout_rs_threshold", "0.999_1.001"),
    ("algorithm.rollout_correction.rollout_rs_threshold", "0.6_1.6,2.5"),
])
def test_verls_lower_upper_forms_pass_through_the_builder_and_the_head_check(verl_config_dir, key, value, catalog,
                                                                             spec_defaults):
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import _compose
    result = mvp_job_spec({"workload": "grpo", "submission_id": "job-1", "trainer_overrides": {key: value}},
                          catalog, spec_defaults)
    assert validate_overrides(verl_config_dir, result["hydra_config"], result["hydra_overrides"]) == []
    composed = _compose(verl_config_dir, result["hydra_config"], result["hydra_overrides"])
    # verl receives what was written (rollout_corr_helper splits text at "_"; a number stays a number)
    assert composed.algorithm.rollout_correction[key.rsplit(".", 1)[-1]] == value
