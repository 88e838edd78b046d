"""The catalog's overrides compose against a real verl release's Hydra configs.

The verl wheel is downloaded at test time (pip download --no-deps; pure Python,
about 1.5 MB) and only its verl/trainer/config tree is unpacked.
"""
import json
import os
import subprocess
import sys
import zipfile

import pytest
import yaml

from ansible_collections.mvp.ray.plugins.module_utils.mvp_hydra import validate_overrides
from mvp_jobspec import mvp_job_spec

VERL = os.environ.get("MVP_TEST_VERL", "verl==0.9.1")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, "inventories/common/all/00-mvp-workloads.yml")) as handle:
    CATALOG = yaml.safe_load(handle)["mvp_workloads"]
DEFAULTS = {"shared_root": "/private", "code_id": "verl-0.9.1", "python": "python",
            "worker_resource": "worker_node", "expect_workers": 2, "model": "Qwen2.5-0.5B-Instruct",
            "address": "http://127.0.0.1:8265"}


@pytest.fixture(scope="session")
def config_dir(tmp_path_factory):
    where = tmp_path_factory.mktemp("verl")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                    "--disable-pip-version-check", "--dest", str(where), VERL], check=True)
    wheel = [f for f in os.listdir(where) if f.endswith(".whl")][0]
    with zipfile.ZipFile(os.path.join(where, wheel)) as archive:
        archive.extractall(where, [m for m in archive.namelist() if m.startswith("verl/trainer/config/")])
    return str(where / "verl" / "trainer" / "config")


def overrides_of(workload, **extra):
    spec = mvp_job_spec(dict({"workload": workload, "submission_id": "j"}, **extra), CATALOG, DEFAULTS)
    return spec["hydra_config"], spec["hydra_overrides"]


@pytest.mark.parametrize("workload", ["ppo", "grpo", "sft"])
def test_catalog_overrides_compose(config_dir, workload):
    name, overrides = overrides_of(workload)
    assert overrides, "a GPU workload must pass overrides"
    assert validate_overrides(config_dir, name, overrides) == []


def test_misspelled_key_is_named(config_dir):
    name, overrides = overrides_of("grpo", trainer_overrides={"trainer.total_epoch": 1})
    errors = validate_overrides(config_dir, name, overrides)
    assert len(errors) == 1 and "trainer.total_epoch'" in errors[0]


def test_wrong_type_is_named(config_dir):
    name, overrides = overrides_of("ppo", trainer_overrides={"trainer.total_epochs": "many"})
    errors = validate_overrides(config_dir, name, overrides)
    assert len(errors) == 1 and "'trainer.total_epochs' expects int" in errors[0]


def test_reward_function_path_reaches_the_custom_reward_override(config_dir):
    name, overrides = overrides_of("grpo", reward_fn_path="/private/user/code/reward.py")
    # verl 0.9.1 reads reward.custom_reward_function (the top-level key is a legacy alias)
    assert "reward.custom_reward_function.path=/private/user/code/reward.py" in overrides
    assert validate_overrides(config_dir, name, overrides) == []


@pytest.mark.parametrize("workload", ["ppo", "grpo", "sft"])
def test_local_inventory_cpu_overrides_compose(config_dir, workload):
    with open(os.path.join(ROOT, "inventories/local/group_vars/all/10-local.yml")) as handle:
        # the one Jinja expression there is the shared root
        site = json.loads(json.dumps(yaml.safe_load(handle)["mvp_job_overrides"]).replace(
            "{{ mvp_shared_root }}", DEFAULTS["shared_root"]))
    assert workload in site
    spec = mvp_job_spec({"workload": workload, "submission_id": "j"}, CATALOG, dict(DEFAULTS, site_overrides=site))
    assert validate_overrides(config_dir, spec["hydra_config"], spec["hydra_overrides"]) == []


def test_ppo_critic_starts_from_the_model_and_helpers_avoid_the_head():
    _, overrides = overrides_of("ppo")
    model = "/private/common/models/%s" % DEFAULTS["model"]
    assert "critic.model.path=%s" % model in overrides and "actor_rollout_ref.model.path=%s" % model in overrides
    assert "+transfer_queue.backend.SimpleStorage.required_node_resource=%s" % DEFAULTS["worker_resource"] in overrides
