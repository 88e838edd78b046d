#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: put a model under shared storage once and link it as common/models/<name>."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_model
short_description: Provide a model under shared storage (Hugging Face download, local copy or a tiny random model)
description:
  - With I(repo_id), downloads a Hugging Face model repository with
    C(huggingface_hub.snapshot_download) into I(hf_home)C(/hub) (the HF_HOME cache
    layout), so later C(from_pretrained) calls with C(HF_HOME) set find it too.
  - With I(src), copies a local folder (on the target host) to I(hf_home)C(/local/<name>).
  - With I(tiny), builds a tiny random-weight Qwen2 (C(Qwen2ForCausalLM)) and a byte-level
    BPE tokenizer trained locally with the C(tokenizers) library on GSM8K-format text,
    with a ChatML chat template, into I(hf_home)C(/local/<name>), plus C(MANIFEST.json)
    (source C(tiny), the settings, parameter count, sha256 of every file). Nothing is
    downloaded; needs torch, transformers and tokenizers on the target. A model of that
    name built with other settings is refused (nothing is overwritten).
  - Either way links C(<models_dir>/<name>) to the files and writes
    C(.submit_job_model.json) (source, files and sizes) beside them. A model whose record
    matches the files on disk is C(skip - exists); a partial copy is redone.
  - Copies go to a temporary folder renamed into place. Check mode supported.
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: partial
    details:
      - Nothing is downloaded, copied or built, and C(changed=true) when it would be; for a model already complete,
        a missing link under C(common/models) is not made and not reported as a change.
  diff_mode:
    support: none
options:
  name:
    description: Folder name under I(models_dir) (letters, digits, '.', '_' or '-').
    type: str
    required: true
  repo_id:
    description: Hugging Face repository id (for example C(Qwen/Qwen2.5-0.5B-Instruct)).
    type: str
  revision:
    description: Revision of I(repo_id).
    type: str
  src:
    description: Local folder holding the model files (config.json, weights, tokenizer).
    type: path
  tiny:
    description:
      - Settings of a tiny random model (every key optional, integers), see
        C(module_utils/data/mvp_tiny_model.DEFAULT_SPEC) - C(hidden_size) 128,
        C(intermediate_size) 256, C(num_hidden_layers) 2, C(num_attention_heads) 2,
        C(num_key_value_heads) 1, C(vocab_size) 512 (the tokenizer's target size),
        C(max_position_embeddings) 1024, C(seed) 0 (weights), C(corpus_rows) 2000 (sample
        rows the tokenizer is trained on).
    type: dict
  hf_home:
    description: HF_HOME on the shared storage (C(<shared_root>/hf)).
    type: path
    required: true
  models_dir:
    description: Folder of the model links (C(<shared_root>/common/models)).
    type: path
    required: true
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Models | A tiny random Qwen2 for smoke tests
  mvp.ray.ray_model:
    name: tiny-qwen2
    tiny: {hidden_size: 128, num_hidden_layers: 2, seed: 0}
    hf_home: /private/hf
    models_dir: /private/common/models

- name: Models | Copy an offline model folder
  mvp.ray.ray_model:
    name: tiny
    src: /data/models/tiny
    hf_home: /private/hf
    models_dir: /private/common/models
"""

RETURN = r"""
path:
  description: The link C(<models_dir>/<name>).
  type: str
  returned: always
target:
  description: Where the files are.
  type: str
  returned: always
manifest:
  description: With I(tiny), the content of C(MANIFEST.json) (source, tiny settings, parameters, files with sha256).
  type: dict
  returned: when tiny is given
msg:
  description: C(skip - exists ...), C(copied ...), C(built ...) or C(downloaded ...).
  type: str
  returned: always
"""

import json
import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import NAME_RE
from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_gsm8k import sample_rows, sha256_file
from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_tiny_model import (
    build_in_subprocess, corpus, normalize_spec, read_spec)

RECORD = ".submit_job_model.json"
MANIFEST = "MANIFEST.json"


def file_sizes(root):
    """Return {relative path: size in bytes} of the regular files under ``root`` (record excluded)."""
    sizes = {}
    for dirpath, _dirs, files in os.walk(root, followlinks=True):
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel != RECORD:
                sizes[rel] = os.path.getsize(path)
    return sizes


def complete(target):
    """Say whether ``target`` holds every file its record lists, with the recorded sizes."""
    try:
        with open(os.path.join(target, RECORD), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return False
    return bool(record.get("files")) and file_sizes(target) == record["files"]


def write_record(target, source):
    """Write the completeness record of ``target``."""
    with open(os.path.join(target, RECORD), "w", encoding="utf-8") as handle:
        json.dump({"source": source, "files": file_sizes(target)}, handle, indent=2, sort_keys=True)


def link(path, target):
    """Point the symlink ``path`` at ``target`` (atomically); return True when it changed."""
    if os.path.islink(path) and os.readlink(path) == target:
        return False
    if os.path.exists(path) and not os.path.islink(path):
        raise ValueError("%s exists and is not a link made by ray_model; move it away" % path)
    tmp = path + ".tmp-link"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.rename(tmp, path)
    return True


def stage_into(target, fill, source):
    """Fill a temporary folder beside *target* with ``fill(folder)``, record it, rename it to *target*.

    :param target: str, final folder (an incomplete earlier one is replaced).
    :param fill: callable taking the staging folder.
    :param source: str, the source written to the completeness record.
    """
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".%s." % os.path.basename(target), dir=os.path.dirname(target))
    try:
        fill(staging)
        write_record(staging, source)
        os.chmod(staging, 0o755)
        if os.path.exists(target):
            shutil.rmtree(target)  # an incomplete earlier copy (complete() said so)
        os.rename(staging, target)
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


def provide_tiny(module, params, path, result):
    """Build (or skip) the tiny model of ``params['tiny']`` and exit the module."""
    try:
        spec = normalize_spec(params["tiny"])
    except ValueError as exc:
        module.fail_json(msg="prepare_data_models item %s: %s. Fix the item's tiny settings." % (params["name"], exc),
                         **result)
    target = os.path.join(params["hf_home"], "local", params["name"])
    result["target"] = target
    if complete(target):
        recorded = read_spec(target, MANIFEST)
        if recorded != spec:
            module.fail_json(msg="model %s exists at %s with other tiny settings (on disk %s, asked %s). "
                                 "Nothing was changed: give the new settings another name in prepare_data_models, "
                                 "or delete %s to rebuild it." % (params["name"], target,
                                                                  json.dumps(recorded, sort_keys=True),
                                                                  json.dumps(spec, sort_keys=True), target),
                             **result)
        with open(os.path.join(target, MANIFEST), encoding="utf-8") as handle:
            result["manifest"] = json.load(handle)
        changed = False if module.check_mode else link(path, target)
        module.exit_json(changed=changed, msg="skip: exists %s -> %s" % (path, target), **result)
    if module.check_mode:
        module.exit_json(changed=True, msg="would build the tiny model %s in %s" % (params["name"], target),
                         **result)

    def fill(folder):
        info = build_in_subprocess(folder, spec, corpus(sample_rows(spec["corpus_rows"], spec["seed"])))
        files = {}
        for rel in sorted(file_sizes(folder)):
            files[rel] = {"bytes": os.path.getsize(os.path.join(folder, rel)),
                          "sha256": sha256_file(os.path.join(folder, rel))}
        manifest = {"source": "tiny", "name": params["name"], "tiny": spec, "architecture": "Qwen2ForCausalLM",
                    "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
        manifest.update(info)
        with open(os.path.join(folder, MANIFEST), "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=2, sort_keys=True)
        result["manifest"] = manifest

    try:
        stage_into(target, fill, "tiny %s" % json.dumps(spec, sort_keys=True))
    except RuntimeError as exc:
        module.fail_json(msg=str(exc), **result)
    except ImportError as exc:
        module.fail_json(msg="building the tiny model %s needs torch, transformers and tokenizers on %s (%s): "
                             "use a node image that carries them (images/verl-cpu)."
                             % (params["name"], params["hf_home"], exc), **result)
    os.makedirs(params["models_dir"], exist_ok=True)
    link(path, target)
    module.exit_json(changed=True, msg="built the tiny model %s (%d parameters) in %s"
                     % (params["name"], result["manifest"]["parameters"], target), **result)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            repo_id=dict(type="str"),
            revision=dict(type="str"),
            src=dict(type="path"),
            tiny=dict(type="dict"),
            hf_home=dict(type="path", required=True),
            models_dir=dict(type="path", required=True),
        ),
        required_one_of=[("repo_id", "src", "tiny")],
        mutually_exclusive=[("repo_id", "src", "tiny")],
        supports_check_mode=True,
    )
    params = module.params
    name = params["name"]
    if not NAME_RE.fullmatch(name):
        module.fail_json(msg="model name %r is invalid: use letters, digits, '.', '_' or '-'" % name)
    path = os.path.join(params["models_dir"], name)
    result = dict(path=path)
    if params["tiny"] is not None:
        provide_tiny(module, params, path, result)
    if params["src"]:
        if not os.path.isfile(os.path.join(params["src"], "config.json")):
            module.fail_json(msg="model source %s has no config.json: point src at a model folder"
                             % params["src"], **result)
        target = os.path.join(params["hf_home"], "local", name)
        result["target"] = target
        if complete(target):
            changed = False if module.check_mode else link(path, target)
            module.exit_json(changed=changed, msg="skip: exists %s -> %s" % (path, target), **result)
        if module.check_mode:
            module.exit_json(changed=True, msg="would copy %s to %s" % (params["src"], target), **result)
        stage_into(target, lambda folder: shutil.copytree(params["src"], folder, dirs_exist_ok=True),
                   "local %s" % params["src"])
        os.makedirs(params["models_dir"], exist_ok=True)
        link(path, target)
        module.exit_json(changed=True, msg="copied %s to %s" % (params["src"], target), **result)

    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        module.fail_json(msg="repo_id %s needs huggingface_hub on the head; install it in the node image, "
                             "or give the model as src (a local folder)" % params["repo_id"], **result)
    cache_dir = os.path.join(params["hf_home"], "hub")
    try:
        target = snapshot_download(params["repo_id"], revision=params["revision"], cache_dir=cache_dir,
                                   local_files_only=True)
        result["target"] = target
        changed = False if module.check_mode else link(path, target)
        module.exit_json(changed=changed, msg="skip: exists %s -> %s" % (path, target), **result)
    except Exception:  # not in the cache yet (LocalEntryNotFoundError and friends)
        pass
    if module.check_mode:
        module.exit_json(changed=True, msg="would download %s into %s" % (params["repo_id"], cache_dir), **result)
    try:
        target = snapshot_download(params["repo_id"], revision=params["revision"], cache_dir=cache_dir)
    except Exception as exc:
        module.fail_json(msg="downloading %s failed (%s); offline sites give the model as src instead"
                             % (params["repo_id"], exc), **result)
    result["target"] = target
    os.makedirs(params["models_dir"], exist_ok=True)
    link(path, target)
    module.exit_json(changed=True, msg="downloaded %s to %s" % (params["repo_id"], target), **result)


if __name__ == "__main__":
    main()
