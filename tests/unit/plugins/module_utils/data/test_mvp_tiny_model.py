"""Unit tests of the tiny model settings (module_utils/data/mvp_tiny_model.normalize_spec)."""
import pytest

from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_tiny_model import (
    DEFAULT_SPEC, CHAT_TEMPLATE, normalize_spec)


def test_defaults_fill_missing_keys_and_keep_given_ones():
    spec = normalize_spec({"hidden_size": 256, "num_attention_heads": 4})
    assert spec["hidden_size"] == 256 and spec["num_attention_heads"] == 4
    assert {k: v for k, v in spec.items() if k not in ("hidden_size", "num_attention_heads")} == {
        k: v for k, v in DEFAULT_SPEC.items() if k not in ("hidden_size", "num_attention_heads")}


def test_default_head_dim_is_64():
    spec = normalize_spec({})
    assert spec["hidden_size"] // spec["num_attention_heads"] == 64


@pytest.mark.parametrize("bad, key", [
    ({"hidden": 1}, "hidden"),
    ({"hidden_size": 0}, "hidden_size"),
    ({"seed": -1}, "seed"),
    ({"num_hidden_layers": "2"}, "num_hidden_layers"),
    ({"num_hidden_layers": True}, "num_hidden_layers"),
    ({"hidden_size": 100, "num_attention_heads": 3}, "hidden_size"),
    ({"num_attention_heads": 2, "num_key_value_heads": 3}, "num_attention_heads"),
    ({"vocab_size": 100}, "vocab_size"),
])
def test_bad_settings_name_the_key(bad, key):
    with pytest.raises(ValueError) as err:
        normalize_spec(bad)
    assert repr(key) in str(err.value)


def test_chat_template_is_chatml():
    assert "<|im_start|>" in CHAT_TEMPLATE and "<|im_end|>" in CHAT_TEMPLATE
    assert "add_generation_prompt" in CHAT_TEMPLATE
