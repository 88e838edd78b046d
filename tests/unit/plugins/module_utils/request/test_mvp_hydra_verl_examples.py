"""verl's own example launch calls pass the override validator; wrong ones are still refused.

The corpus ``tests/data/verl_examples_0.9.1.json`` holds the Hydra overrides of every
``python3 -m verl.trainer.<module>`` call in verl's ``examples/`` (extracted by
``tests/data/extract_verl_examples.py``, which says how shell variables were resolved).
The git mirror has no 0.9.1 tag or version bump, so the corpus comes from the newest
commit there (main, recorded in each entry), which the 0.9.1 wheel is a little ahead of.
The config tree is the released ``verl==0.9.1`` wheel (pure Python, about 1.7 MB), the shared
fixture ``verl_tree`` (tests/unit/conftest.py: downloaded once into ``~/.cache/mvp-tests/`` and
unpacked whole; the validator reads the dataclass sources next to ``verl/trainer/config``).

A handful of calls are refused and must stay refused (``REFUSED``): five that verl
fails on too, and two whose config group option comes from the separately installed
verl_mlite plugin, which the snapshot does not hold. One key disappeared between the corpus commit and
0.9.1 (``REMOVED_IN_0_9_1``): it is dropped before the call is checked, and
:func:`test_key_removed_in_0_9_1_is_refused` checks that keeping it is refused.
"""
import copy
import json
import os

import pytest
from omegaconf import OmegaConf

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import validate_overrides

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
CORPUS_FILE = os.path.join(ROOT, "tests", "data", "verl_examples_0.9.1.json")
with open(CORPUS_FILE) as _handle:
    CORPUS = json.load(_handle)

# Hydra keys of the corpus commit that 0.9.1 no longer has (its param_offload now also
# releases the gradient buffers; see engine/megatron.yaml in the wheel).
REMOVED_IN_0_9_1 = ("actor_rollout_ref.actor.megatron.grad_offload",
                    "actor_rollout_ref.ref.megatron.grad_offload",
                    "critic.megatron.grad_offload")

# script -> (text the first error must contain, why verl refuses the call too)
REFUSED = {
    "examples/grpo_trainer/run_gpt_oss_20b_fsdp.sh": (
        "'actor_rollout_ref.actor.fsdp_config.model_dtype'",
        "'+' adds a key that already exists (needs '++' or no prefix); also fails at the corpus commit"),
    "examples/tuning/lora/run_qwen3_8b_merge_fsdp.sh": (
        "'actor_rollout_ref.model.lora.merge'",
        "'+' adds a key that already exists; also fails at the corpus commit"),
    "examples/router_replay/run_qwen3_30b_a3b_megatron.sh": (
        "'actor_rollout_ref.actor.model_engine'",
        "no such key (the group is the top-level model_engine); also fails at the corpus commit"),
    "examples/tuning/scaling/run_qwen2_5_32b_megatron.sh": (
        "'actor_rollout_ref.actor.model_engine'",
        "no such key (the group is the top-level model_engine); also fails at the corpus commit"),
    "examples/grpo_trainer/run_kimi_k2_6_glm5_1_megatron_lite.sh": (
        "actor/mlite_actor",
        "the config group option comes from the verl_mlite plugin (hydra.searchpath pkg://), not from verl"),
    "examples/grpo_trainer/run_qwen3_5_35b_megatron_lite.sh": (
        "actor/mlite_actor",
        "the config group option comes from the verl_mlite plugin (hydra.searchpath pkg://), not from verl"),
    "examples/sft/gsm8k/run_qwen3_5_397b_a17b_megatron.sh": (
        "'optim.betas' expects tuple[float, float]",
        "the quotes survive inside a shell string, so Hydra gets the string '[0.9,0.95]'"),
}


def _key(override):
    return override.split("=", 1)[0].lstrip("+~")


def _entry_id(entry):
    return entry["script"] + ("#%d" % entry["call"] if entry["call"] else "")


@pytest.fixture(scope="module")
def config_dir(verl_tree):
    """``verl/trainer/config`` of the 0.9.1 wheel, with YAML parsing memoised while this module runs.

    Every compose re-reads the same two dozen YAML files; OmegaConf.load returns a deep copy
    of the first load of an unchanged file instead, which halves the time of each check
    without changing what Hydra sees.
    """
    original = OmegaConf.load
    loaded = {}

    def load(file_):
        name = getattr(file_, "name", file_)
        if not isinstance(name, str) or not os.path.isfile(name):
            return original(file_)
        stat = os.stat(name)
        key = (os.path.abspath(name), stat.st_mtime_ns, stat.st_size)
        if key not in loaded:
            loaded[key] = original(file_)
        return copy.deepcopy(loaded[key])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(OmegaConf, "load", staticmethod(load))
        yield os.path.join(verl_tree, "verl", "trainer", "config")


def _entry(script):
    matches = [e for e in CORPUS if e["script"] == script]
    assert matches, "%s is not in the corpus" % script
    return matches[0]


def test_corpus_shape():
    assert len(CORPUS) >= 100
    assert {e["module"] for e in CORPUS} >= {"verl.trainer.main_ppo", "verl.trainer.sft_trainer"}
    for entry in CORPUS:
        assert set(entry) >= {"script", "commit", "module", "config_name", "overrides"}
        assert entry["overrides"] and all("=" in o for o in entry["overrides"])
    assert set(REFUSED) <= {e["script"] for e in CORPUS}


@pytest.mark.filterwarnings("ignore:provider=hydra.searchpath in command-line")
@pytest.mark.parametrize("entry", CORPUS, ids=_entry_id)
def test_example_call(config_dir, entry):
    if entry["config_name"] is None:
        pytest.skip(entry.get("note", "no Hydra config"))
    overrides = [o for o in entry["overrides"] if _key(o) not in REMOVED_IN_0_9_1]
    errors = validate_overrides(config_dir, entry["config_name"], overrides)
    if entry["script"] in REFUSED:
        needle, why = REFUSED[entry["script"]]
        assert errors and needle in errors[0], "%s should be refused (%s): %s" % (entry["script"], why, errors)
    else:
        assert errors == []


def test_key_removed_in_0_9_1_is_refused(config_dir):
    entry = _entry("examples/grpo_trainer/run_qwen3_8b_megatron.sh")
    key = REMOVED_IN_0_9_1[0]
    errors = validate_overrides(config_dir, entry["config_name"], entry["overrides"] + ["%s=True" % key])
    assert len(errors) == 1 and "'%s'" % key in errors[0]


PPO_BASE = "examples/grpo_trainer/run_qwen3_8b_fsdp.sh"
SFT_BASE = "examples/sft/gsm8k/run_qwen2_5_0_5b_fsdp.sh"
BAD = [
    # (corpus entry the bad override is appended to, override, text the error must hold besides the key)
    (PPO_BASE, "trainer.total_epoch=1", "Could not override"),
    (PPO_BASE, "actor_rollout_ref.actor.optim.lr=fast", "expects float"),
    (PPO_BASE, "actor_rollout_ref.actor.optim.lr='1e-6'", "expects float"),
    (PPO_BASE, "actor_rollout_ref.actor.optim.lr=[1e-6,2e-6]", "expects float"),
    (PPO_BASE, "actor_rollout_ref.rollout.temperature={t:1}", "expects float"),
    (PPO_BASE, "data.max_prompt_length={a:1}", "expects int or float"),
    (PPO_BASE, "actor_rollout_ref.actor.use_kl_loss=maybe", "expects bool"),
    (PPO_BASE, "trainer.val_before_train=sometimes", "expects bool"),
    (PPO_BASE, "actor_rollout_ref.actor.ppo_epochs=1.5", "expects int"),
    (PPO_BASE, "actor_rollout_ref.rollout.name=[vllm]", "expects Optional[str]"),
    (PPO_BASE, "actor_rollout_ref.actor.optim=5", "expects OptimizerConfig"),
    (PPO_BASE, "trainer.total_epochs=many", "expects int or float"),
    (SFT_BASE, "optim.lr=fast", "expects float"),
    (SFT_BASE, "trainer.total_epoch=1", "Could not override"),
]


@pytest.mark.parametrize("base, bad, text", BAD, ids=[b[1] for b in BAD])
def test_wrong_override_is_refused(config_dir, base, bad, text):
    entry = _entry(base)
    errors = validate_overrides(config_dir, entry["config_name"], entry["overrides"] + [bad])
    key = _key(bad)
    assert len(errors) == 1, errors
    assert "'%s'" % key in errors[0] and text in errors[0]


GOOD = [
    "actor_rollout_ref.actor.optim.lr=${oc.env:MVP_TEST_UNSET_VARIABLE}",  # resolved on the workers
    "trainer.total_epochs=${trainer.nnodes}",  # interpolation resolving to an int
    "actor_rollout_ref.rollout.top_p=1",  # int for float
    "trainer.logger=console",  # one logger for the list
    "data.train_files=[a.parquet,b.parquet]",  # list of files for one path
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null",  # Optional[int]
    "trainer.experiment_name=2024",  # number for a string
    "actor_rollout_ref.actor.use_kl_loss=1",  # int for bool
    "algorithm.rollout_correction.rollout_is_threshold=0.5_4.0",  # str | float
]


@pytest.mark.parametrize("good", GOOD)
def test_accepted_override(config_dir, good):
    entry = _entry(PPO_BASE)
    assert validate_overrides(config_dir, entry["config_name"], entry["overrides"] + [good]) == []
