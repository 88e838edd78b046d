"""Which values of a composed config are hidden as secrets (mvp_hydra.redact, the job's config/resolved_config.yaml,
report.yml's comparison): only text under a secret-like name. Checked against every key of verl's real composed
configs - every top-level config of the pinned snapshot - where data.balance_dp_token (a boolean) was hidden (issue 42).
"""
import glob
import os

import pytest
import yaml

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import (
    REDACTED, SECRET_KEY_RE, _compose, is_secret, redact, validate_overrides)


@pytest.fixture(scope="session")
def config_dir(verl_release):
    """``verl/trainer/config`` of the pinned verl release (shared fixture)."""
    return os.path.join(verl_release(os.environ.get("MVP_TEST_VERL")), "verl", "trainer", "config")


@pytest.fixture(scope="session")
def composed(config_dir):
    """Every top-level config of the snapshot, composed without overrides, as plain Python (interpolations kept)."""
    from omegaconf import OmegaConf

    names = sorted(os.path.basename(path)[:-len(".yaml")] for path in glob.glob(os.path.join(config_dir, "*.yaml")))
    assert "ppo_trainer" in names and "sft_trainer_engine" in names
    return {name: OmegaConf.to_container(_compose(config_dir, name, []), resolve=False) for name in names}


def leaves(value, path=()):
    """(dotted key path, last name, value) of every leaf of a plain config."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from leaves(child, path + (str(key),))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from leaves(child, path + (str(index),))
    else:
        yield ".".join(path), (path[-1] if path else ""), value


def test_verl_s_own_configs_hold_no_secret_and_nothing_is_hidden(composed):
    for name, config in composed.items():
        assert redact(config) == config, name


def test_every_secret_like_name_in_verl_s_configs_holds_a_setting_that_is_not_text(composed):
    named = {(name, key): value for name, config in composed.items() for key, last, value in leaves(config)
             if SECRET_KEY_RE.search(last)}
    # the report of two SFT runs showed this one hidden: it is a boolean
    assert named[("sft_trainer_engine", "data.balance_dp_token")] is False
    assert all(not isinstance(value, str) for value in named.values()), named
    assert not any(is_secret(key.rsplit(".", 1)[-1], value) for (_name, key), value in named.items())


def test_the_saved_config_of_an_sft_job_shows_balance_dp_token(config_dir):
    out = {}
    assert validate_overrides(config_dir, "sft_trainer_engine", ["data.balance_dp_token=true"], composed_out=out) == []
    assert yaml.safe_load(out["yaml"])["data"]["balance_dp_token"] is True
    assert REDACTED not in out["yaml"]


def test_text_under_a_secret_like_name_is_hidden_anywhere_in_a_real_config(composed):
    config = composed["ppo_trainer"]
    secrets = {"hf_token": "hf_abc", "wandb_api_key": "0123", "password": "p"}
    config = dict(config, trainer=dict(config["trainer"], **secrets), extra=[{"api_key": "k", "n": 1}])

    got = redact(config)

    assert {key: got["trainer"][key] for key in secrets} == {key: REDACTED for key in secrets}
    assert got["extra"] == [{"api_key": REDACTED, "n": 1}]
    hidden = [key for key, _last, value in leaves(got) if value == REDACTED]
    assert sorted(hidden) == sorted(["trainer.%s" % key for key in secrets] + ["extra.0.api_key"])


@pytest.mark.parametrize("key,value,hidden", [
    ("hf_token", "hf_x", True), ("balance_dp_token", False, False), ("max_new_token", 512, False),
    ("api_key", 0.5, False), ("hf_token", None, False), ("hf_token", "", False), ("tokenizer", "t", False),
    ("secret", "${oc.env:S}", True)])
def test_the_rule(key, value, hidden):
    assert is_secret(key, value) is hidden
