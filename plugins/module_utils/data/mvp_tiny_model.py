# -*- coding: utf-8 -*-
"""Build a tiny random-weight Qwen2 causal LM with a locally trained tokenizer.

A smoke-test model for real verl training on any cluster, CPU-only ones
included: nothing is downloaded. The tokenizer is a byte-level BPE trained with
the ``tokenizers`` library on GSM8K-format text (the project's own sample,
``mvp_gsm8k.sample_rows``), wrapped as a ``transformers`` fast tokenizer with
ChatML special tokens and a chat template, so ``apply_chat_template`` (verl's
SFT and RL datasets) works. The model is ``Qwen2ForCausalLM`` built from a
``Qwen2Config`` with seeded random weights, saved with ``save_pretrained``
(safetensors).

The same spec and seed give the same files (the same sha256 for the weights
and the tokenizer), so two clusters can compare runs of "the same" tiny model.

Needs ``torch``, ``transformers`` and ``tokenizers`` in the Python that runs
it (the node image), imported only inside :func:`build`.
"""

from __future__ import annotations

import json
import os

# Defaults of every setting (prepare_data_models item ``tiny:``); head_dim is
# hidden_size / num_attention_heads (64 here: vLLM's CPU attention refuses 16;
# docs/training-on-cpu.md, the tiny model).
DEFAULT_SPEC = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 512,
    "max_position_embeddings": 1024,
    "seed": 0,
    "corpus_rows": 2000,
}
INT_KEYS = tuple(DEFAULT_SPEC)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
PAD_TOKEN, EOS_TOKEN = "<|endoftext|>", "<|im_end|>"
# ChatML, as Qwen2 instruct models use it (without a default system prompt).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def normalize_spec(spec):
    """Merge *spec* over :data:`DEFAULT_SPEC` and check it.

    :param spec: dict or None, any subset of :data:`DEFAULT_SPEC`'s keys (ints).
    :returns: dict with every key of :data:`DEFAULT_SPEC`.
    :raises ValueError: naming the key, for an unknown key, a value that is not
        a positive int (``seed`` may be 0), a hidden size not divisible by the
        head count, a head count not divisible by the KV head count, or a
        vocabulary smaller than 300 (the 256 byte symbols, the special tokens
        and some merges).
    """
    spec = dict(spec or {})
    unknown = sorted(set(spec) - set(DEFAULT_SPEC))
    if unknown:
        raise ValueError("tiny model setting %r is unknown (known: %s)" % (unknown[0], ", ".join(INT_KEYS)))
    merged = dict(DEFAULT_SPEC, **spec)
    for key in INT_KEYS:
        value = merged[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "seed" else 1):
            raise ValueError("tiny model setting %r must be an integer >= %d, got %r"
                             % (key, 0 if key == "seed" else 1, value))
    if merged["hidden_size"] % merged["num_attention_heads"]:
        raise ValueError("tiny model setting 'hidden_size' (%d) must be divisible by num_attention_heads (%d)"
                         % (merged["hidden_size"], merged["num_attention_heads"]))
    if merged["num_attention_heads"] % merged["num_key_value_heads"]:
        raise ValueError("tiny model setting 'num_attention_heads' (%d) must be divisible by "
                         "num_key_value_heads (%d)" % (merged["num_attention_heads"], merged["num_key_value_heads"]))
    if merged["vocab_size"] < 300:
        raise ValueError("tiny model setting 'vocab_size' must be at least 300 (256 bytes, special tokens "
                         "and merges), got %d" % merged["vocab_size"])
    return merged


def corpus(rows):
    """GSM8K-format text the tokenizer is trained on: questions, answers and chat markup.

    :param rows: list of {"question", "answer"} dicts (``mvp_gsm8k.sample_rows``).
    :returns: list of str.
    """
    from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_gsm8k import INSTRUCTION

    texts = []
    for row in rows:
        texts.append("<|im_start|>user\n%s %s<|im_end|>\n" % (row["question"], INSTRUCTION))
        texts.append("<|im_start|>assistant\n%s<|im_end|>\n" % row["answer"])
    return texts


def build(dest, spec, texts):
    """Write a tiny Qwen2 model and its tokenizer into the folder *dest*.

    :param dest: str, an existing empty folder.
    :param spec: dict from :func:`normalize_spec`.
    :param texts: list of str, the tokenizer's training text (:func:`corpus`).
    :returns: dict ``{"parameters": int, "vocab_size": int, "head_dim": int}``.
    :raises ImportError: when torch, transformers or tokenizers is missing.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=spec["vocab_size"], special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2,
                                  show_progress=False)
    bpe.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN,
                                        additional_special_tokens=[t for t in SPECIAL_TOKENS
                                                                   if t not in (EOS_TOKEN, PAD_TOKEN)],
                                        model_max_length=spec["max_position_embeddings"])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(dest)

    vocab = len(tokenizer)
    torch.manual_seed(spec["seed"])
    config = Qwen2Config(
        vocab_size=vocab,
        hidden_size=spec["hidden_size"],
        intermediate_size=spec["intermediate_size"],
        num_hidden_layers=spec["num_hidden_layers"],
        num_attention_heads=spec["num_attention_heads"],
        num_key_value_heads=spec["num_key_value_heads"],
        max_position_embeddings=spec["max_position_embeddings"],
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        eos_token_id=tokenizer.convert_tokens_to_ids(EOS_TOKEN),
        pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(dest, safe_serialization=True)
    return {"parameters": int(sum(p.numel() for p in model.parameters())), "vocab_size": vocab,
            "head_dim": spec["hidden_size"] // spec["num_attention_heads"]}


def build_in_subprocess(dest, spec, texts, python=None, timeout=1800):
    """Run :func:`build` in a fresh Python process and return its result.

    torch cannot be imported inside an Ansible module process (Ansible patches
    ``sys.intern``, which torch's dynamo refuses), so the module hands this
    file's source and the arguments (JSON on standard input) to a child Python.

    :param dest: str, an existing empty folder.
    :param spec: dict from :func:`normalize_spec`.
    :param texts: list of str (:func:`corpus`).
    :param python: str, the interpreter (default: the current one).
    :param timeout: int, seconds.
    :returns: dict from :func:`build`.
    :raises RuntimeError: with the child's last output lines when it fails;
        ImportError when it reports a missing package.
    """
    import inspect
    import subprocess
    import sys

    source = inspect.getsource(sys.modules[__name__])
    program = source + (
        "\nimport json as _j, sys as _s\n_a = _j.load(_s.stdin)\n"
        "print('MVP_TINY_RESULT=' + _j.dumps(build(_a['dest'], _a['spec'], _a['texts'])))\n")
    proc = subprocess.run([python or sys.executable, "-c", program], input=json.dumps(
        {"dest": dest, "spec": spec, "texts": texts}), capture_output=True, text=True, timeout=timeout,
        check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("MVP_TINY_RESULT="):
            return json.loads(line.split("=", 1)[1])
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
    if "ModuleNotFoundError" in tail or "ImportError" in tail:
        raise ImportError(tail)
    raise RuntimeError("building the tiny model failed (rc=%s): %s" % (proc.returncode, tail))


def read_spec(target, manifest_name):
    """Return the ``tiny`` spec recorded in *target*'s manifest, or None when there is none."""
    try:
        with open(os.path.join(target, manifest_name), encoding="utf-8") as handle:
            return json.load(handle).get("tiny")
    except (OSError, ValueError):
        return None
