#!/usr/bin/env python3
"""Rank the settings verl's own example launch scripts change, by how many scripts set them.

The variation matrix (``tests/matrix/cases.yml``) takes its cases from what verl users change first:
the settings verl's example scripts of the snapshot's release pass to its trainers. This script reads
those scripts from a verl git directory (the ``fetch`` tool's bare clone of github:verl-project/verl)
at a tag, resolves each trainer call's Hydra overrides with ``tests/data/extract_verl_examples.py``
(it runs every script in a sandbox where no real program is reachable; see its docstring), and counts,
for every ``key=value`` setting and every key, the number of *scripts* whose trainer calls set it.

Left out of the ranking, since a CPU matrix sets them itself or they say nothing about what trains:
sizes (batch and micro-batch sizes, lengths, node and GPU counts, steps, epochs, frequencies,
parallel sizes, token budgets), paths (data, model, checkpoint, reward files), logging and naming
(logger, project and experiment names), Megatron's keys and GPU memory knobs
(``gpu_memory_utilization``, ``max_num_batched_tokens``...). Values are normalised (``True``/``true``
and ``False``/``false`` count as one; a leading ``+``/``++`` is dropped from the key).

Which release: verl 0.9.1 is the snapshot (``verl_snapshot_sources``), but the mirror has no ``v0.9.1``
tag; ``v0.9.0`` is the closest release tag (``tests/data/extract_verl_examples.py`` explains how the
mirror and the wheel compare). The output records the tag, the commit it resolves to, and the counts.

Usage::

    python3 tests/matrix/derive.py --git-dir /work/.mirror/verl-project+verl/repo --tag v0.9.0 \\
        [--out tests/matrix/verl_examples_counts.json] [--top 40]
    python3 tests/matrix/derive.py --check tests/matrix/cases.yml   # each case's count still matches

Output (JSON): ``{"tag", "commit", "scripts", "trainer_calls", "modules": {module: scripts},
"left_out": the rules, "settings": [{"setting": "key=value", "scripts": N}, ...] (most first),
"keys": [{"key", "scripts", "values": {value: scripts}}, ...]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "data"))

import extract_verl_examples  # noqa: E402  pylint: disable=wrong-import-position

DEFAULT_OUT = os.path.join(HERE, "verl_examples_counts.json")
# Leaf names (the last part of a dotted key) that are sizes, lengths, counts or frequencies.
SIZE_LEAF = re.compile(
    r"(batch_size|_per_gpu|_length|length$|nnodes|n_gpus_per_node|total_epochs|total_training_steps|_freq$|"
    r"_size$|_len$|token_len|_tokens|num_workers|max_num_seqs|^n$|^lr$|lr_warmup|warmup_steps|_steps$|"
    r"ppo_epochs|_parallel|seed$|^max_|^min_|resume_|timeout|ratio$|_ratio$|clip_grad|weight_decay|"
    r"temperature|top_p|top_k|entropy_coeff|kl_coef$|kl_loss_coef|cliprange|clip_ratio)")
# Keys that are paths, logging and naming, Megatron's, or GPU memory knobs.
LEFT_OUT_KEY = re.compile(
    r"(_files?$|_path$|_dir$|\.path$|\.dir$|logger|project_name|experiment_name|log_val|validation_data_dir|"
    r"megatron|^hydra\.|gpu_memory_utilization|max_num_batched_tokens|ray_kwargs|"
    r"ray_init|prompt_key|response_key|messages_key|multiturn|reward_manager|custom_reward_function|"
    r"_name$|filter_overlong|truncation|return_raw_chat|trust_remote_code|dtype$|val_kwargs|"
    r"save_contents|load_contents|\.hf_model|checkpoint\.)")
LEFT_OUT = ("sizes: leaf names matching %s" % SIZE_LEAF.pattern,
            "paths, logging, naming, Megatron, GPU memory and data-format keys: %s" % LEFT_OUT_KEY.pattern)


def normalise(override):
    """``(key, value)`` of one Hydra override with ``+``/``~`` dropped and booleans lower-cased, or None."""
    if "=" not in override:
        return None
    key, value = override.split("=", 1)
    key = key.lstrip("+~")
    value = value.strip().strip("'\"")
    if value in ("True", "False", "TRUE", "FALSE"):
        value = value.lower()
    return key, value


def counted(key, value):
    """True when ``key=value`` belongs in the ranking (not a size, path, log, Megatron or GPU memory key)."""
    leaf = key.rsplit(".", 1)[-1]
    if SIZE_LEAF.search(leaf) or LEFT_OUT_KEY.search(key):
        return False
    return not value.startswith(("UNRESOLVED_", "$", "/")) and "UNRESOLVED_" not in value


def rank(entries):
    """The counts of a corpus (``extract_verl_examples.extract``'s entries): see the module docstring."""
    per_script = defaultdict(set)
    modules = defaultdict(set)
    for entry in entries:
        modules[entry["module"]].add(entry["script"])
        for override in entry["overrides"]:
            pair = normalise(override)
            if pair and counted(*pair):
                per_script[entry["script"]].add(pair)
    settings, keys, values = Counter(), Counter(), defaultdict(Counter)
    for pairs in per_script.values():
        for key, value in pairs:
            settings["%s=%s" % (key, value)] += 1
            values[key][value] += 1
        for key in {k for k, _v in pairs}:
            keys[key] += 1
    order = lambda item: (-item[1], item[0])  # noqa: E731 - most scripts first, then by name
    return {
        "scripts": len({e["script"] for e in entries}),
        "trainer_calls": len(entries),
        "modules": {m: len(s) for m, s in sorted(modules.items(), key=lambda i: (-len(i[1]), i[0]))},
        "left_out": list(LEFT_OUT),
        "settings": [{"setting": s, "scripts": n} for s, n in sorted(settings.items(), key=order)],
        "keys": [{"key": k, "scripts": n, "values": dict(sorted(values[k].items(), key=order))}
                 for k, n in sorted(keys.items(), key=order)],
    }


def lookup(counts, setting):
    """Scripts that set ``setting`` (``key=value``, or a bare key: scripts setting it to anything)."""
    if "=" in setting:
        key, value = normalise(setting)
        return next((s["scripts"] for s in counts["settings"] if s["setting"] == "%s=%s" % (key, value)), 0)
    return next((k["scripts"] for k in counts["keys"] if k["key"] == setting.lstrip("+")), 0)


def check_cases(cases_path, counts_path):
    """Problems of a cases file against the counts: each case's ``count`` must equal the counted scripts."""
    import yaml  # pylint: disable=import-outside-toplevel

    with open(counts_path, encoding="utf-8") as handle:
        counts = json.load(handle)
    with open(cases_path, encoding="utf-8") as handle:
        cases = yaml.safe_load(handle)["cases"]
    problems = []
    for case in cases:
        if case.get("counted") is None:
            continue
        found = lookup(counts, case["counted"])
        if found != case.get("count"):
            problems.append("%s: %s is set in %d scripts of %s, cases.yml says %s"
                            % (case["name"], case["counted"], found, counts["tag"], case.get("count")))
    return problems


def main(argv=None):
    """Command line: derive the counts (``--git-dir``, ``--tag``), or ``--check`` a cases file against them."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--git-dir", help="bare git directory of verl-project/verl")
    parser.add_argument("--tag", default="v0.9.0", help="release tag (or commit) whose examples to read")
    parser.add_argument("--out", default=DEFAULT_OUT, help="JSON file to write")
    parser.add_argument("--top", type=int, default=40, help="settings to print")
    parser.add_argument("--check", metavar="CASES_YML", help="check a cases file's counts against --out")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_cases(args.check, args.out)
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1 if problems else 0
    if not args.git_dir:
        parser.error("--git-dir is required to derive the counts")
    commit = extract_verl_examples.git(args.git_dir, "rev-parse", args.tag + "^{commit}").strip()
    entries = extract_verl_examples.extract(args.git_dir, commit)
    counts = dict({"tag": args.tag, "commit": commit}, **rank(entries))
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(counts, handle, indent=1)
        handle.write("\n")
    print("%s (%s): %d trainer calls in %d scripts" % (args.tag, commit[:10], counts["trainer_calls"],
                                                       counts["scripts"]))
    for item in counts["settings"][:args.top]:
        print("%4d  %s" % (item["scripts"], item["setting"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
