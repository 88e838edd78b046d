"""mvp_retention: verl's keep-last-k values, the checkpointed models of a job, a model's parameter count read
cheaply from its folder, the size of one checkpoint and the refusal when k + 1 of them do not fit."""
import json
import math
import struct

import pytest

from mvp_retention import (
    BYTES_PER_PARAM, DEFAULT_KEEP, KEEP_SETTING, RetentionError, checkpoint_bytes, human, keep_setting,
    model_size, params_from_config, retention, room_problem, safetensors_params, saves_at_most, uses_critic,
    verl_keep)

# The local inventory's tiny Qwen2 (inventories/local prepare_data_models), as config.json describes it.
TINY = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
        "intermediate_size": 256, "vocab_size": 512, "tie_word_embeddings": True}


def qwen2_tensors(config):
    """The tensor shapes of a Qwen2 decoder as transformers names them (tied embeddings: no lm_head)."""
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    kv = config["num_key_value_heads"] * hidden // config["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": [config["vocab_size"], hidden], "model.norm.weight": [hidden]}
    for layer in range(config["num_hidden_layers"]):
        prefix = "model.layers.%d." % layer
        shapes.update({
            prefix + "self_attn.q_proj.weight": [hidden, hidden], prefix + "self_attn.q_proj.bias": [hidden],
            prefix + "self_attn.k_proj.weight": [kv, hidden], prefix + "self_attn.k_proj.bias": [kv],
            prefix + "self_attn.v_proj.weight": [kv, hidden], prefix + "self_attn.v_proj.bias": [kv],
            prefix + "self_attn.o_proj.weight": [hidden, hidden],
            prefix + "mlp.gate_proj.weight": [inter, hidden], prefix + "mlp.up_proj.weight": [inter, hidden],
            prefix + "mlp.down_proj.weight": [hidden, inter],
            prefix + "input_layernorm.weight": [hidden], prefix + "post_attention_layernorm.weight": [hidden]})
    return shapes


def write_safetensors(path, shapes, dtype="F32", size=4):
    """A safetensors file: the 8-byte header length, the JSON header, then zero-filled tensor data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape in sorted(shapes.items()):
        length = math.prod(shape) * size
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + length]}
        offset += length
    text = json.dumps(header).encode("utf-8")
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"\0" * offset)
    return sum(math.prod(shape) for shape in shapes.values())


@pytest.mark.parametrize("value, expected", [(2, 2), ("3", 3), (1, 1), (None, None), ("", None), ("null", None)])
def test_the_setting_is_a_whole_number_or_null(value, expected):
    assert keep_setting(value) == expected


@pytest.mark.parametrize("value", [0, -1, "0", 1.5, "two", True])
def test_a_setting_below_one_or_not_whole_is_refused_naming_it(value):
    with pytest.raises(RetentionError) as err:
        keep_setting(value)
    field, problem, fix = err.value.args
    assert field == KEEP_SETTING and repr(value) in problem and "null" in fix


@pytest.mark.parametrize("value, expected", [(3, 3), ("4", 4), (1, 1), (None, None), (0, None), (-1, None)])
def test_verl_keeps_every_checkpoint_for_null_zero_and_less(value, expected):
    # verl/utils/checkpoint/checkpoint_manager.py: only an int > 0 limits the checkpoints kept.
    assert verl_keep(value, "f") == expected


@pytest.mark.parametrize("value", [2.0, "two", True, [2]])
def test_a_value_verl_would_not_read_as_an_int_is_refused(value):
    with pytest.raises(RetentionError) as err:
        verl_keep(value, "trainer_overrides.trainer.max_ckpt_to_keep")
    assert err.value.args[0] == "trainer_overrides.trainer.max_ckpt_to_keep"
    assert "would keep every one" in err.value.args[1]


@pytest.mark.parametrize("overrides, expected", [
    ({}, True),  # ppo_trainer.yaml's default estimator is gae
    ({"algorithm.adv_estimator": "gae"}, True),
    ({"algorithm.adv_estimator": "grpo"}, False),
    ({"algorithm.adv_estimator": "grpo", "critic.enable": True}, True),
    ({"algorithm.adv_estimator": "gae", "+critic.enable": "false"}, False),
])
def test_the_critic_follows_verls_need_critic(overrides, expected):
    assert uses_critic(overrides) is expected


def test_every_catalog_trainer_names_its_retention_keys(catalog):
    trainers = {name: entry for name, entry in catalog.items() if entry.get("module")}
    assert trainers and all(entry.get("retention") for entry in trainers.values())
    assert catalog["sft"]["retention"] == {"model": "trainer.max_ckpt_to_keep"}
    for name in ("ppo", "grpo"):
        assert catalog[name]["retention"] == {"actor": "trainer.max_actor_ckpt_to_keep",
                                              "critic": "trainer.max_critic_ckpt_to_keep"}
    assert not catalog["selftest"].get("retention")


def test_retention_keys_exist_in_verls_own_configs(catalog, verl_tree):
    for entry in catalog.values():
        if not entry.get("retention"):
            continue
        with open("%s/verl/trainer/config/%s.yaml" % (verl_tree, entry["hydra_config"]), encoding="utf-8") as handle:
            text = handle.read()
        for key in entry["retention"].values():
            assert "\n  %s:" % key.split(".", 1)[1] in text, (key, entry["hydra_config"])


def test_the_setting_fills_every_key_nobody_set():
    entry = {"retention": {"actor": "a.keep", "critic": "c.keep"}}
    overrides, notes = {"algorithm.adv_estimator": "grpo"}, []
    result = retention(entry, overrides, {}, 3, notes)
    assert overrides["a.keep"] == 3 and overrides["c.keep"] == 3
    assert result["models"]["actor"] == {"key": "a.keep", "keep": 3, "source": "project", "field": KEEP_SETTING,
                                         "counted": True}
    assert result["models"]["critic"]["counted"] is False  # GRPO trains no critic
    assert result["setting"] == 3 and notes == []


def test_a_given_key_wins_over_the_setting_and_is_noted():
    entry = {"retention": {"model": "k"}}
    overrides, notes = {"k": 5}, []
    result = retention(entry, overrides, {"k": ("request", "trainer_overrides.k", 5)}, 2, notes)
    assert overrides["k"] == 5
    assert result["models"]["model"]["keep"] == 5 and result["models"]["model"]["source"] == "request"
    assert notes == ["k=5 from the request wins over %s=2" % KEEP_SETTING]


def test_keeping_all_or_one_is_noted_and_null_sets_no_key():
    overrides, notes = {}, []
    result = retention({"retention": {"model": "k"}}, overrides, {}, None, notes)
    assert "k" not in overrides and result["models"]["model"]["keep"] is None
    assert "keeps every checkpoint" in notes[0]
    notes = []
    retention({"retention": {"model": "k"}}, {}, {}, 1, notes)
    assert "k=1" in notes[0] and "no older checkpoint to fall back to" in notes[0]


def test_a_workload_without_retention_gets_none():
    assert retention({}, {}, {}, 2, []) is None


def test_safetensors_headers_give_the_exact_parameter_count(tmp_path):
    shapes = qwen2_tensors(TINY)
    expected = write_safetensors(tmp_path / "model.safetensors", shapes)
    (tmp_path / "config.json").write_text(json.dumps(TINY))
    size = model_size(str(tmp_path))
    assert size["params"] == expected and size["source"] == "safetensors headers (1 file)"
    assert size["files_bytes"] == sum(p.stat().st_size for p in tmp_path.iterdir())


def test_sharded_safetensors_are_summed(tmp_path):
    names = sorted(qwen2_tensors(TINY))
    half = len(names) // 2
    shapes = qwen2_tensors(TINY)
    first = write_safetensors(tmp_path / "model-00001-of-00002.safetensors", {n: shapes[n] for n in names[:half]})
    second = write_safetensors(tmp_path / "model-00002-of-00002.safetensors", {n: shapes[n] for n in names[half:]},
                               dtype="BF16", size=2)
    assert model_size(str(tmp_path))["params"] == first + second


def test_the_config_estimate_matches_the_tensors_of_a_qwen2_decoder():
    assert params_from_config(TINY) == sum(math.prod(s) for s in qwen2_tensors(TINY).values())
    untied = dict(TINY, tie_word_embeddings=False)
    assert params_from_config(untied) == params_from_config(TINY) + TINY["vocab_size"] * TINY["hidden_size"]
    assert params_from_config({"text_config": TINY}) == params_from_config(TINY)
    assert params_from_config({"model_type": "x"}) is None


def test_pytorch_weights_count_by_size_and_dtype_then_config_then_nothing(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(dict(TINY, torch_dtype="float32")))
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 4000)
    assert model_size(str(tmp_path))["params"] == 1000
    (tmp_path / "pytorch_model.bin").unlink()
    size = model_size(str(tmp_path))
    assert size["params"] == params_from_config(TINY) and size["source"].startswith("config.json")
    (tmp_path / "config.json").write_text("{}")
    assert model_size(str(tmp_path))["params"] is None
    assert model_size(str(tmp_path / "absent"))["params"] is None


def test_a_corrupt_safetensors_header_gives_no_count(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 10 ** 12))
    size = model_size(str(tmp_path))
    assert size["params"] is None and "header" in size["source"]
    with pytest.raises(ValueError):
        safetensors_params(str(tmp_path / "model.safetensors"))


def test_one_checkpoint_is_twelve_bytes_per_parameter_plus_the_model_files():
    assert BYTES_PER_PARAM == 12  # fp32 weights + AdamW exp_avg + exp_avg_sq, 4 bytes each
    assert checkpoint_bytes(1000, 500) == 1000 * 12 + 500


@pytest.mark.parametrize("overrides, expected", [
    ({"trainer.total_training_steps": 4, "trainer.save_freq": 2}, 2),
    ({"trainer.total_training_steps": 5, "trainer.save_freq": 2}, 3),  # and the last step
    ({"trainer.total_training_steps": None, "trainer.save_freq": 2}, None),
    ({"trainer.save_freq": 2}, None),
])
def test_the_saves_a_run_can_make(overrides, expected):
    assert saves_at_most(overrides) == expected


def checkpoints(keep, roles=("model",), counted=True, field=KEEP_SETTING):
    return {"setting": keep, "models": {role: {"key": "trainer.%s_keep" % role, "keep": keep, "source": "project",
                                               "field": field, "counted": counted or role != "critic"}
                                        for role in roles}}


def room(params=1000000, files=4000000, free=10 ** 9):
    return {"params": params, "files_bytes": files, "free_bytes": free, "path": "/private/jobs"}


def test_enough_room_gives_no_problem():
    one = checkpoint_bytes(1000000, 4000000)
    assert room_problem(room(free=3 * one), checkpoints(2), {}, "/private") == ""


def test_too_little_room_names_the_estimate_k_needed_free_and_the_setting():
    one = checkpoint_bytes(1000000, 4000000)
    free = 3 * one - 1
    problem = room_problem(room(free=free), checkpoints(2), {}, "/private")
    assert problem.startswith("no room on the shared storage for this job's checkpoints")
    assert "one checkpoint is about %s (1,000,000 parameters x 12 bytes" % human(one) in problem
    assert "model: 3 x %s (trainer.model_keep=2 kept + 1 being written)" % human(one) in problem
    assert "%s needed, /private/jobs has %s free" % (human(3 * one), human(free)) in problem
    assert "Fix: lower %s (at most 1 kept checkpoint fit)" % KEEP_SETTING in problem


def test_the_critic_doubles_the_need_only_when_trained():
    one = checkpoint_bytes(1000000, 4000000)
    assert room_problem(room(free=3 * one), checkpoints(2, ("actor", "critic"), counted=False), {}, "/p") == ""
    problem = room_problem(room(free=3 * one), checkpoints(2, ("actor", "critic")), {}, "/p")
    assert "actor: 3 x" in problem and "critic: 3 x" in problem and "%s needed" % human(6 * one) in problem


def test_the_saves_of_total_training_steps_cap_the_count():
    one = checkpoint_bytes(1000000, 4000000)
    overrides = {"trainer.total_training_steps": 4, "trainer.save_freq": 2}
    assert room_problem(room(free=2 * one), checkpoints(100), overrides, "/p") == ""
    assert "2 x" in room_problem(room(free=2 * one - 1), checkpoints(100), overrides, "/p")


def test_keeping_every_checkpoint_counts_the_default_and_names_the_request_field():
    one = checkpoint_bytes(1000000, 4000000)
    field = "trainer_overrides.trainer.max_ckpt_to_keep"
    problem = room_problem(room(free=DEFAULT_KEEP * one - 1), checkpoints(None, field=field), {}, "/p")
    assert "%d x" % DEFAULT_KEEP in problem and "Fix: lower %s" % field in problem


def test_unknown_parameters_or_free_space_skip_the_check():
    assert room_problem(room(params=None, free=0), checkpoints(2), {}, "/p") == ""
    assert room_problem(dict(room(), free_bytes=None), checkpoints(2), {}, "/p") == ""
    assert room_problem(None, checkpoints(2), {}, "/p") == ""
    assert room_problem(room(free=0), None, {}, "/p") == ""


def test_human_sizes():
    assert human(512) == "512 B" and human(1536) == "1.5 KiB" and human(5 * 1024 ** 3) == "5.0 GiB"


def test_verl_limits_only_on_a_positive_int(verl_tree):
    # verl_keep mirrors these conditions of the pinned release's checkpoint manager.
    with open("%s/verl/utils/checkpoint/checkpoint_manager.py" % verl_tree, encoding="utf-8") as handle:
        source = handle.read()
    assert "max_ckpt_to_keep and isinstance(max_ckpt_to_keep, int) and max_ckpt_to_keep > 0" in source
    assert "max_ckpt_to_keep and isinstance(max_ckpt_to_keep, int) and max_ckpt_to_keep > 1" in source
