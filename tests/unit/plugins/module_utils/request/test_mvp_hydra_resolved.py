"""The composed config a job keeps (config/resolved_config.yaml): mvp_hydra.validate_overrides(composed_out=)."""
import os

import pytest
import yaml

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import REDACTED, redact, validate_overrides
from request_then_spec import mvp_job_spec


@pytest.fixture(scope="session")
def config_dir(verl_release):
    """``verl/trainer/config`` of the pinned verl release (shared fixture)."""
    return os.path.join(verl_release(os.environ.get("MVP_TEST_VERL")), "verl", "trainer", "config")


def _get(config, dotted):
    for part in dotted.split("."):
        config = config[part]
    return config


@pytest.mark.parametrize("workload", ["grpo", "sft"])
def test_the_composed_config_holds_every_override_and_the_snapshot_defaults(config_dir, workload, catalog,
                                                                             spec_defaults):
    spec = mvp_job_spec({"workload": workload, "submission_id": "j", "trainer_overrides": {"trainer.total_epochs": 3}},
                        catalog, spec_defaults)
    out = {}
    assert validate_overrides(config_dir, spec["hydra_config"], spec["hydra_overrides"], composed_out=out) == []
    config = yaml.safe_load(out["yaml"])
    assert _get(config, "trainer.total_epochs") == 3
    assert _get(config, "trainer.default_local_dir") == spec["paths"]["checkpoints"]
    assert "hydra" not in config  # Hydra's own node is Hydra's output (logs/hydra), not the trainer's config
    with open(os.path.join(config_dir, spec["hydra_config"] + ".yaml")) as handle:
        own = yaml.safe_load(handle)
    # a top-level key of the snapshot's own YAML that no override touched keeps its value
    untouched = [k for k, v in own.items() if not isinstance(v, (dict, list)) and k != "defaults"
                 and not any(o.split("=")[0].lstrip("+~") == k for o in spec["hydra_overrides"])]
    for key in untouched:
        assert config[key] == own[key] or isinstance(own[key], str) and own[key].startswith("${")


def test_nothing_is_composed_for_overrides_that_do_not_compose(config_dir, catalog, spec_defaults):
    spec = mvp_job_spec({"workload": "grpo", "submission_id": "j", "trainer_overrides": {"trainer.total_epoch": 1}},
                        catalog, spec_defaults)
    out = {}
    assert validate_overrides(config_dir, spec["hydra_config"], spec["hydra_overrides"], composed_out=out)
    assert out == {}


def test_secret_like_values_are_redacted_and_nothing_else():
    config = {"trainer": {"wandb_api_key": "abc", "hf_token": "t", "total_epochs": 2, "tokenizer": "/m/tok",
                          "max_new_tokens": 8},
              "a": [{"password": "p", "name": "x"}], "secret_dir": {"nested": 1}, "db_password": ""}
    got = redact(config)
    assert got["trainer"] == {"wandb_api_key": REDACTED, "hf_token": REDACTED, "total_epochs": 2,
                              "tokenizer": "/m/tok", "max_new_tokens": 8}
    assert got["a"] == [{"password": REDACTED, "name": "x"}]
    assert got["secret_dir"] == {"nested": 1} and got["db_password"] == ""
    assert config["trainer"]["wandb_api_key"] == "abc"  # the input is not changed
