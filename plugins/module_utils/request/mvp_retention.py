# -*- coding: utf-8 -*-
"""Checkpoint retention and room: verl's keep-last-k keys per workload, and whether k checkpoints fit.

Retention goes through verl's own settings, named per workload by the catalog's ``retention`` key
(``inventories/common/all/00-mvp-workloads.yml``): ``trainer.max_actor_ckpt_to_keep`` and
``trainer.max_critic_ckpt_to_keep`` for ``verl.trainer.main_ppo`` (ppo_trainer.yaml),
``trainer.max_ckpt_to_keep`` for ``verl.trainer.sft_trainer_ray`` (sft_trainer_engine.yaml). The
builder sets them to ``submit_job_checkpoints_keep`` unless the inventory's ``submit_job_site_overrides`` or the
request sets them (those win, and the job's notes say so).

verl's rules for these keys (verl 0.9.1, ``verl/utils/checkpoint/checkpoint_manager.py``
``ensure_checkpoint_capacity`` / ``register_checkpoint``, called by the FSDP and Megatron checkpoint
managers): only an ``int`` > 0 limits anything; ``null``, ``0``, a negative number and any value that
is not an ``int`` (``2.0``, ``"2"`` after Hydra kept it a string) keep every checkpoint. With k = 1 the
old checkpoint is removed only after the new one is written; with k >= 2 the oldest are removed
before a save, down to k - 1, so k exist while one is written. Only the checkpoints saved by the
same process are counted: a job that continues another (resume_from, a restart) never deletes the
earlier job's checkpoints, which stay in that job's directory.

The size of one checkpoint (bytes) is estimated as ``BYTES_PER_PARAM x parameters + the model's own
files`` per checkpointed model (the actor, and the critic when the job uses one): verl's FSDP engine
keeps the trained weights in fp32 (4 bytes) and AdamW keeps two fp32 moments, ``exp_avg`` and
``exp_avg_sq`` (8 bytes) - the 12 bytes of "Adam: fp32 weights + momentum + variance" in ZeRO
(Rajbhandari et al. 2020, section 3.1, without the fp16 copy and gradients, which are not saved);
verl saves them sharded per rank (``model_world_size_W_rank_R.pt``, ``optim_world_size_W_rank_R.pt``),
which sum to the whole. The model's files (weights and tokenizer, as on disk) cover the
``huggingface/`` folder verl writes beside them (config and tokenizer; the full weights too when
``checkpoint.save_contents`` has ``hf_model``) and pickling overhead. Measured on the local tiny
Qwen2 (361,600 parameters, 1.45 MB of model files): one SFT checkpoint of 2 ranks is 4.50 MB on
disk, the estimate 5.79 MB.
"""

from __future__ import annotations

import json
import math
import os
import struct

# Checkpoints kept when the inventory sets no submit_job_checkpoints_keep: the newest and the one before,
# so an automatic resume always has a complete checkpoint to fall back to.
DEFAULT_KEEP = 2
# The inventory setting that sets k (named in messages).
KEEP_SETTING = "submit_job_checkpoints_keep"
# fp32 weights (4) + AdamW's exp_avg (4) and exp_avg_sq (4), per parameter.
BYTES_PER_PARAM = 12
# Bytes per element of the dtypes of safetensors headers and of config.json's torch_dtype.
DTYPE_BYTES = {
    "F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
    "F8_E4M3": 1, "F8_E5M2": 1,
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float": 4, "half": 2,
}
# Weight files a Hugging Face model folder may hold besides safetensors (counted by size).
TORCH_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth")
# A safetensors header larger than this is not read (a corrupt file).
MAX_HEADER_BYTES = 100 * 1024 * 1024


class RetentionError(ValueError):
    """A retention value the builder refuses; ``args`` are (field, problem, fix)."""


def keep_setting(value):
    """Check ``submit_job_checkpoints_keep``: the number of checkpoints a job keeps (k).

    :param value: int >= 1, text of digits (``-e submit_job_checkpoints_keep=3``), or None / "" (keep every
        checkpoint: the builder then sets no retention key and verl keeps all).
    :returns: int >= 1, or None.
    :raises RetentionError: for 0, a negative number, or anything that is not a whole number.
    """
    if value is None or (isinstance(value, str) and value.strip() in ("", "null", "None")):
        return None
    number = _whole(value)
    if number is None or number < 1:
        raise RetentionError(KEEP_SETTING, "must be a whole number >= 1, got %r" % (value,),
                             "set it to the number of checkpoints each job keeps (%d keeps the newest and "
                             "the one before), or null to keep every checkpoint" % DEFAULT_KEEP)
    return number


def verl_keep(value, field):
    """What verl makes of a value of one of its ``max_*ckpt_to_keep`` keys.

    :param value: the override's value (None for a ``~key`` that removes it).
    :param field: str, the field named in messages.
    :returns: int >= 1 (verl keeps that many), or None (verl keeps every checkpoint: null, 0 or less).
    :raises RetentionError: for a value that is not a whole number: verl would silently keep every
        checkpoint (it limits only on an ``int``).
    """
    if value is None:
        return None
    number = _whole(value)
    if number is None:
        raise RetentionError(field, "%r is not a whole number: verl limits checkpoints only for an int and "
                                    "would keep every one" % (value,),
                             "give a whole number >= 1 (null keeps every checkpoint)")
    return number if number >= 1 else None


def _whole(value):
    """``value`` as an int when it is an int or text of digits with an optional sign, else None (bools too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    return None


def uses_critic(overrides):
    """Whether a PPO-family trainer trains a critic, by verl's rule (verl/trainer/ppo/utils.py need_critic).

    ``critic.enable`` when set, else ``algorithm.adv_estimator == gae`` (ppo_trainer.yaml's default
    estimator is gae).

    :param overrides: dict, the merged trainer overrides.
    :returns: bool.
    """
    plain = {key.lstrip("+~"): value for key, value in overrides.items()}
    enable = plain.get("critic.enable")
    if enable is not None:
        return enable is True or str(enable).lower() == "true"
    return str(plain.get("algorithm.adv_estimator", "gae")) == "gae"


def retention(entry, overrides, given, keep, notes):
    """Set verl's keep-last-k keys of a workload and say how many checkpoints each model keeps.

    :param entry: the workload's catalog entry; ``retention`` maps a checkpointed model (``model``,
        ``actor``, ``critic``) to verl's key for it. None or empty: the workload saves no verl checkpoint.
    :param overrides: dict, the merged trainer overrides; the keys nobody set are set to ``keep`` here.
    :param given: dict, key -> (source, field, value) for the retention keys the inventory or the
        request set themselves (source ``inventory`` or ``request``; value None for ``~key``).
    :param keep: int >= 1 or None, ``submit_job_checkpoints_keep`` as :func:`keep_setting` returns it.
    :param notes: list of str; a note is added when a request or the inventory sets a key, when a
        model keeps every checkpoint and when it keeps only one.
    :returns: dict ``{setting, models}`` (``models``: role -> ``{key, keep, source, field, counted}``,
        ``counted`` False for a critic the job does not train), or None for a workload without ``retention``.
    :raises RetentionError: for a given value verl would not read as a number.
    """
    keys = entry.get("retention") or {}
    if not keys:
        return None
    critic = uses_critic(overrides)
    models = {}
    for role in sorted(keys):
        key = keys[role]
        if key in given:
            source, field, value = given[key]
            count = verl_keep(value, field)
            notes.append("%s=%s from the %s wins over %s=%s" % (
                key, "null" if value is None else value, source, KEEP_SETTING, "null" if keep is None else keep))
        else:
            source, field, count = "project", KEEP_SETTING, keep
            if keep is not None:
                overrides[key] = keep
        counted = role != "critic" or critic
        models[role] = {"key": key, "keep": count, "source": source, "field": field, "counted": counted}
        if not counted:
            continue
        if count is None:
            notes.append("%s keeps every checkpoint (verl reads null, 0 and less as no limit): the room check "
                         "counts the saves trainer.total_training_steps allows, else only %d"
                         % (key, DEFAULT_KEEP))
        elif count == 1:
            notes.append("%s=1: verl removes the previous checkpoint once the new one is written, so a resume "
                         "has no older checkpoint to fall back to when the newest is incomplete" % key)
    return {"setting": keep, "models": models}


def model_size(model_dir):
    """Count a Hugging Face model folder's parameters, cheaply (headers and sizes only).

    In this order: the safetensors headers (``*.safetensors``: an 8-byte little-endian length, then a
    JSON header with each tensor's shape; exact, no tensor is read); else the size of
    ``*.bin``/``*.pt``/``*.pth`` files divided by the bytes of config.json's ``torch_dtype``/``dtype``
    (bf16 when none); else an estimate from config.json for a decoder-only transformer
    (:func:`params_from_config`).

    :param model_dir: str, the model folder (symlinks followed).
    :returns: dict ``{params, source, files_bytes}``: params int or None when nothing could be read,
        source (how it was counted, or why not), files_bytes (every file of the folder, bytes).
    """
    try:
        names = sorted(os.listdir(model_dir))
    except OSError as exc:
        return {"params": None, "source": "cannot list %s: %s" % (model_dir, exc.strerror), "files_bytes": 0}
    paths = [os.path.join(model_dir, name) for name in names if os.path.isfile(os.path.join(model_dir, name))]
    files_bytes = sum(os.path.getsize(path) for path in paths)
    tensors = [path for path in paths if path.endswith(".safetensors")]
    if tensors:
        try:
            return {"params": sum(safetensors_params(path) for path in tensors), "files_bytes": files_bytes,
                    "source": "safetensors headers (%d file%s)" % (len(tensors), "" if len(tensors) == 1 else "s")}
        except (OSError, ValueError) as exc:
            return {"params": None, "source": "unreadable safetensors header: %s" % exc, "files_bytes": files_bytes}
    config = _read_config(model_dir)
    weights = [path for path in paths if path.endswith(TORCH_WEIGHT_SUFFIXES)]
    if weights:
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        size = DTYPE_BYTES.get(dtype.replace("torch.", ""), 2)
        return {"params": sum(os.path.getsize(path) for path in weights) // size, "files_bytes": files_bytes,
                "source": "weight file sizes / %d bytes (%s)" % (size, dtype)}
    params = params_from_config(config)
    if params is None:
        return {"params": None, "files_bytes": files_bytes,
                "source": "no safetensors or weight files, and config.json does not describe a decoder"}
    return {"params": params, "source": "config.json (decoder-only estimate)", "files_bytes": files_bytes}


def safetensors_params(path):
    """Parameters of one safetensors file: the sum of its tensors' element counts, from the header only.

    :raises ValueError: when the header is not a safetensors header; OSError when unreadable.
    """
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) != 8:
            raise ValueError("%s is shorter than a safetensors header" % path)
        (length,) = struct.unpack("<Q", head)
        if length > MAX_HEADER_BYTES:
            raise ValueError("%s declares a %d-byte header" % (path, length))
        header = json.loads(handle.read(length).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("%s has no tensor table" % path)
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        total += math.prod(int(n) for n in info["shape"])
    return total


def _read_config(model_dir):
    try:
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def params_from_config(config):
    """Estimate a decoder-only transformer's parameters from its config.json (Llama / Qwen2 layout).

    Embeddings ``vocab x hidden`` (twice unless ``tie_word_embeddings``), per layer the attention
    projections (q and o ``hidden x hidden``, k and v ``hidden x kv_heads x head_dim``, with q/k/v biases),
    a gated MLP ``3 x hidden x intermediate`` and two norms, plus the final norm. For the local tiny
    Qwen2 it gives 361,600, the safetensors' exact count.

    :param config: dict, config.json (``text_config`` is used when present).
    :returns: int, or None without ``hidden_size``, ``num_hidden_layers``, ``vocab_size``.
    """
    config = config.get("text_config") or config
    try:
        hidden, layers, vocab = (int(config[k]) for k in ("hidden_size", "num_hidden_layers", "vocab_size"))
    except (KeyError, TypeError, ValueError):
        return None
    heads = int(config.get("num_attention_heads") or 1)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    inter = int(config.get("intermediate_size") or 4 * hidden)
    kv = kv_heads * head_dim
    attention = 2 * hidden * hidden + 2 * hidden * kv + hidden + 2 * kv
    per_layer = attention + 3 * hidden * inter + 2 * hidden
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    return embeddings + layers * per_layer + hidden


def checkpoint_bytes(params, files_bytes):
    """Estimated bytes of one checkpoint of one model: BYTES_PER_PARAM x params + the model's files."""
    return BYTES_PER_PARAM * int(params) + int(files_bytes)


def saves_at_most(overrides):
    """How many checkpoints a run can save at most, when trainer.total_training_steps says it, else None.

    verl saves every ``trainer.save_freq`` steps and at the last step: ceil(total / save_freq).
    """
    total = _whole(overrides.get("trainer.total_training_steps"))
    every = _whole(overrides.get("trainer.save_freq"))
    if total is None or total < 1 or every is None or every < 1:
        return None
    return -(-total // every)


def human(size):
    """Bytes as text with a binary unit (``5.8 MiB``)."""
    size = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(size) < 1024 or unit == "PiB":
            return ("%d %s" % (size, unit)) if unit == "B" else ("%.1f %s" % (size, unit))
        size /= 1024
    return "%.1f EiB" % size


def room_problem(room, checkpoints, overrides, shared_root):
    """Say why the shared storage has no room for the job's checkpoints ("" when it has, or cannot tell).

    Needed: for each checkpointed model (the actor, and the critic when the job trains one), one
    checkpoint's bytes (:func:`checkpoint_bytes`) x (k + 1): the k kept and the one being written
    (verl keeps the old one until the new one is complete when k is 1), at most the saves
    ``trainer.total_training_steps`` allows; a model keeping every checkpoint counts DEFAULT_KEEP
    when the number of steps is not given.

    :param room: dict from the head's look (``mvp_submit_check.look``: ``params``, ``files_bytes``, ``free_bytes``, ``path``,
        ``source``), or None when the head did not look.
    :param checkpoints: dict from :func:`retention` (the job spec's ``checkpoints``), or None.
    :param overrides: dict, the job's trainer overrides.
    :param shared_root: str, named in the message.
    :returns: str, the refusal naming the estimate per checkpoint, k, the bytes needed and free, and
        the setting to change; "" when everything fits, or when the parameters are unknown.
    """
    if not room or not checkpoints or room.get("params") is None or room.get("free_bytes") is None:
        return ""
    one = checkpoint_bytes(room["params"], room.get("files_bytes") or 0)
    saves = saves_at_most(overrides)
    parts, needed, fields = [], 0, []
    for role, model in sorted(checkpoints["models"].items()):
        if not model["counted"]:
            continue
        keep = model["keep"]
        if keep is None:
            count = saves if saves is not None else DEFAULT_KEEP
            why = "%s=null keeps every checkpoint: %s" % (
                model["key"], "%d saves in trainer.total_training_steps" % saves if saves is not None
                else "%d counted, the steps are not known before the data is loaded" % DEFAULT_KEEP)
        else:
            count = keep + 1 if saves is None else min(keep + 1, saves)
            why = "%s=%d kept + 1 being written%s" % (
                model["key"], keep, ", at most the %d saves of trainer.total_training_steps" % saves
                if saves is not None and saves < keep + 1 else "")
        needed += count * one
        parts.append("%s: %d x %s (%s)" % (role, count, human(one), why))
        if model["field"] not in fields:
            fields.append(model["field"])
    free = int(room["free_bytes"])
    if needed <= free:
        return ""
    # the largest k whose k + 1 checkpoints of every counted model fit
    fit = free // (one * len(parts)) - 1
    return ("no room on the shared storage for this job's checkpoints: one checkpoint is about %s (%s parameters "
            "x %d bytes - fp32 weights and AdamW's two moments - + %s of model files); %s; %s needed, %s has "
            "%s free. Fix: lower %s (%s), or free space under %s/jobs."
            % (human(one), "{:,}".format(room["params"]), BYTES_PER_PARAM, human(room.get("files_bytes") or 0),
               "; ".join(parts), human(needed), room.get("path") or shared_root, human(free),
               " and ".join(fields),
               "at most %d kept checkpoint%s fit" % (fit, "" if fit == 1 else "s") if fit >= 1
               else "not even one checkpoint besides the one being written fits", shared_root))
