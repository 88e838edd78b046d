#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: prepare GSM8K RL and SFT parquet datasets under shared storage."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_gsm8k_dataset
short_description: Prepare GSM8K parquet datasets for verl (RL and SFT) once
description:
  - Reads GSM8K-format rows (C({"question", "answer"}) JSON lines, as in the
    original release) and writes verl's RL parquet (C(train.parquet),
    C(test.parquet)) and the SFT parquet with a C(messages) column
    (C(train.parquet), C(val.parquet)).
  - Each dataset folder gets C(MANIFEST.json) (source, row counts, sha256 of
    each file). A folder whose manifest is complete and whose checksums match
    is left alone and reported as C(skip - exists); otherwise it is rebuilt and
    C(msg) says why.
  - With I(source=sample) the module first writes the project's own small
    GSM8K-format sample (deterministic) to I(sample_dir).
  - Files are written to temporary names and renamed. Needs pyarrow on the node.
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  source:
    description:
      - C(sample) (the project's generated rows), C(hub) (download I(hub_repo)
        with C(huggingface_hub) into I(hf_home)), or a folder on the target holding
        C(train.jsonl)/C(test.jsonl) (original release), C(train.parquet)/C(test.parquet),
        or the hub layout C(main/train-*.parquet). All give the same files.
    type: str
    default: sample
  hub_repo:
    description: Hugging Face dataset repository (with I(source=hub)).
    type: str
    default: openai/gsm8k
  hub_config:
    description: Configuration (sub-folder) of I(hub_repo).
    type: str
    default: main
  hf_home:
    description: HF_HOME for I(source=hub) downloads (C(<shared_root>/hf)).
    type: path
  rl_dir:
    description: Output folder of the RL dataset.
    type: path
    required: true
  sft_dir:
    description: Output folder of the SFT dataset.
    type: path
    required: true
  sample_dir:
    description: Folder for the generated sample's JSON lines (I(source=sample)).
    type: path
  sample_rows:
    description: Rows of the generated sample as [train, test].
    type: list
    elements: int
    default: [64, 16]
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Data | Prepare GSM8K from the built-in sample
  mvp.ray.ray_gsm8k_dataset:
    source: sample
    sample_dir: /private/common/datasets/gsm8k_sample
    rl_dir: /private/datasets/gsm8k
    sft_dir: /private/datasets/gsm8k_sft
"""

RETURN = r"""
msg:
  description: One line per dataset - C(skip - exists ...) or C(built ...) with the reason.
  type: str
  returned: always
datasets:
  description: Per dataset (rl, sft) its folder, status (exists/built) and rows per file.
  type: dict
  returned: always
rejected:
  description: Source rows left out, per split, as {"index", "reason"}.
  type: dict
  returned: when rebuilt
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_gsm8k import (
    check_manifest, convert_rows, load_split, sample_rows, write_manifest, write_parquet_atomic)

RL_FILES = {"train": "train.parquet", "test": "test.parquet"}
SFT_FILES = {"train": "train.parquet", "test": "val.parquet"}


def write_sample(directory, counts):
    """Write the generated sample as train.jsonl / test.jsonl; return the folder."""
    os.makedirs(directory, exist_ok=True)
    for split, count, seed in (("train", counts[0], 1), ("test", counts[1], 2)):
        path = os.path.join(directory, split + ".jsonl")
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            for row in sample_rows(count, seed):
                handle.write(json.dumps(row) + "\n")
        os.rename(tmp, path)
    return directory


def download_hub(module):
    """Download the GSM8K parquet files of hub_repo/hub_config; return the local folder."""
    params = module.params
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        module.fail_json(msg="prepare_data_gsm8k_source=hub needs huggingface_hub on the head; install it in the "
                             "node image, or give a folder of GSM8K jsonl/parquet files instead.")
    try:
        return snapshot_download(params["hub_repo"], repo_type="dataset",
                                 allow_patterns=["%s/*.parquet" % params["hub_config"]],
                                 cache_dir=os.path.join(params["hf_home"], "hub"))
    except Exception as exc:
        module.fail_json(msg="downloading %s from the Hugging Face hub failed (%s); offline sites set "
                             "prepare_data_gsm8k_source to a folder of GSM8K jsonl or parquet files."
                             % (params["hub_repo"], exc))


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="sample"),
            rl_dir=dict(type="path", required=True),
            sft_dir=dict(type="path", required=True),
            sample_dir=dict(type="path"),
            sample_rows=dict(type="list", elements="int", default=[64, 16]),
            hub_repo=dict(type="str", default="openai/gsm8k"),
            hub_config=dict(type="str", default="main"),
            hf_home=dict(type="path"),
        ),
        required_if=[("source", "sample", ("sample_dir",)), ("source", "hub", ("hf_home",))],
        supports_check_mode=True,
    )
    params = module.params
    targets = {"rl": (params["rl_dir"], RL_FILES), "sft": (params["sft_dir"], SFT_FILES)}
    status, lines, todo = {}, [], []
    for name, (directory, files) in targets.items():
        ok, reason = check_manifest(directory, list(files.values()))
        if ok:
            status[name] = {"dir": directory, "status": "exists"}
            lines.append("skip: exists %s (%s)" % (directory, reason))
        else:
            todo.append(name)
            lines.append("build %s: %s" % (directory, reason))
    if not todo or module.check_mode:
        module.exit_json(changed=bool(todo), msg="; ".join(lines), datasets=status)

    if params["source"] == "sample":
        source_dir = write_sample(params["sample_dir"], params["sample_rows"])
        source_name = "sample (generated GSM8K-format rows) %s" % source_dir
    elif params["source"] == "hub":
        source_dir = download_hub(module)
        source_name = "hub %s/%s" % (params["hub_repo"], params["hub_config"])
    else:
        source_dir = params["source"]
        source_name = "folder %s" % source_dir
    converted, rejected = {}, {}
    for split in ("train", "test"):
        try:
            path, rows = load_split(source_dir, split)
        except (OSError, ValueError) as exc:
            module.fail_json(msg="GSM8K source: %s. Set prepare_data_gsm8k_source to 'sample', 'hub' or a folder "
                                 "in one of those layouts." % exc)
        converted[split] = convert_rows(rows, split)
        rejected[split] = converted[split][2]
        if not converted[split][0]:
            module.fail_json(msg="No usable GSM8K rows in %s (every answer lacks '#### N')." % path,
                             rejected=rejected)
    for name in todo:
        directory, files = targets[name]
        os.makedirs(directory, exist_ok=True)
        counts = {}
        for split, filename in files.items():
            records = converted[split][0] if name == "rl" else converted[split][1]
            counts[filename] = write_parquet_atomic(records, os.path.join(directory, filename))
        write_manifest(directory, source_name, counts)
        status[name] = {"dir": directory, "status": "built", "rows": counts}
    lines.append("rejected rows: %s" % {k: len(v) for k, v in rejected.items()})
    module.exit_json(changed=True, msg="; ".join(lines), datasets=status, rejected=rejected)


if __name__ == "__main__":
    main()
