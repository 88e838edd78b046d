#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: put a model under shared storage once and link it as common/models/<name>."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mvp_model
short_description: Provide a model under shared storage (Hugging Face download or local copy)
description:
  - With I(repo_id), downloads a Hugging Face model repository with
    C(huggingface_hub.snapshot_download) into I(hf_home)C(/hub) (the HF_HOME cache
    layout), so later C(from_pretrained) calls with C(HF_HOME) set find it too.
  - With I(src), copies a local folder (on the target host) to I(hf_home)C(/local/<name>).
  - Either way links C(<models_dir>/<name>) to the files and writes
    C(.mvp_model.json) (source, files and sizes) beside them. A model whose record
    matches the files on disk is C(skip - exists); a partial copy is redone.
  - Copies go to a temporary folder renamed into place. Check mode supported.
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
  hf_home:
    description: HF_HOME on the shared storage (C(<shared_root>/hf)).
    type: path
    required: true
  models_dir:
    description: Folder of the model links (C(<shared_root>/common/models)).
    type: path
    required: true
author: MVP project
"""

EXAMPLES = r"""
- name: Models | Copy an offline model folder
  mvp_model:
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
msg:
  description: C(skip - exists ...), C(copied ...) or C(downloaded ...).
  type: str
  returned: always
"""

import json
import os
import re
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
RECORD = ".mvp_model.json"


def file_sizes(root):
    """Return {relative path: size in bytes} of the regular files under ``root`` (record excluded)."""
    sizes = {}
    for dirpath, _, files in os.walk(root, followlinks=True):
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
        raise ValueError("%s exists and is not a link made by mvp_model; move it away" % path)
    tmp = path + ".tmp-link"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.rename(tmp, path)
    return True


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            repo_id=dict(type="str"),
            revision=dict(type="str"),
            src=dict(type="path"),
            hf_home=dict(type="path", required=True),
            models_dir=dict(type="path", required=True),
        ),
        required_one_of=[("repo_id", "src")],
        mutually_exclusive=[("repo_id", "src")],
        supports_check_mode=True,
    )
    params = module.params
    name = params["name"]
    if not NAME_RE.match(name):
        module.fail_json(msg="model name %r is invalid: use letters, digits, '.', '_' or '-'" % name)
    path = os.path.join(params["models_dir"], name)
    result = dict(path=path)
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
        os.makedirs(os.path.dirname(target), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".%s." % name, dir=os.path.dirname(target))
        try:
            shutil.copytree(params["src"], staging, dirs_exist_ok=True)
            write_record(staging, "local %s" % params["src"])
            os.chmod(staging, 0o755)
            if os.path.exists(target):
                shutil.rmtree(target)  # an incomplete earlier copy (complete() said so)
            os.rename(staging, target)
        finally:
            if os.path.isdir(staging):
                shutil.rmtree(staging, ignore_errors=True)
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
