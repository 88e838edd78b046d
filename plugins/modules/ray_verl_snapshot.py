#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: create an immutable verl code snapshot under shared storage."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_verl_snapshot
short_description: Create an immutable verl code snapshot C(<dest_root>/<code_id>/)
description:
  - Takes the C(verl/) package from I(src) - a directory that contains
    C(verl/), a verl wheel (C(.whl)) or a tarball (C(.tar.gz)) - and makes
    C(<dest_root>/<code_id>/verl/...) plus C(mvp_marker.py) (C(MARKER = "<code_id>"))
    and C(SNAPSHOT.json) (source, version, content hash, creation time) and
    C(MANIFEST.json) (the sha256 of every file of C(verl/), C({code_id, algorithm, files})) -
    the content record report.yml compares to list the files two snapshots differ in.
  - Snapshots are immutable. The same code_id with the same content is C(ok)
    (changed=false, C(skip - exists)); different content fails with both hashes
    unless I(force) is set, in which case the old snapshot is kept beside it as
    C(<code_id>.replaced-<UTC time>) and the new one takes its name.
  - The snapshot is built beside the target and renamed into place, so a job
    never imports half a snapshot. Full check mode.
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  code_id:
    description:
      - Snapshot name; follows the submission id rule (C(SUBMISSION_ID_RE) of
        C(plugins/module_utils/storage/mvp_job.py)) - letters, digits, C(.), C(_), C(-), starting with a letter or
        digit, at most 128 characters.
    type: str
    required: true
  src:
    description:
      - Path on the target host of a directory containing C(verl/), a wheel or a tarball.
      - Omitted - only look. When the snapshot exists with its C(mvp_marker.py) and
        SNAPSHOT.json records exactly I(source_label) as its source, return
        C(skip - exists) with C(exists=true) (meant for pinned pip sources such as
        C(pip verl==0.9.1), whose content a re-download cannot change); otherwise
        return C(exists=false). Never writes.
    type: path
  dest_root:
    description: Folder holding the snapshots (C(<shared_root>/common/code/verl)).
    type: path
    required: true
  source_label:
    description: Human description of the source recorded in SNAPSHOT.json (for example C(pip verl==0.9.1)).
    type: str
  commit:
    description: Git commit of the source, recorded in SNAPSHOT.json.
    type: str
  force:
    description: Replace a snapshot whose content differs (the old one is kept under another name).
    type: bool
    default: false
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Snapshot | Make verl-0.9.1 from a downloaded wheel
  mvp.ray.ray_verl_snapshot:
    code_id: verl-0.9.1
    src: /tmp/mvp-verl/verl-0.9.1-py3-none-any.whl
    dest_root: /private/common/code/verl
    source_label: pip verl==0.9.1
"""

RETURN = r"""
path:
  description: The snapshot folder.
  type: str
  returned: always
content_hash:
  description: sha256 over the sorted relative paths and bytes of C(verl/).
  type: str
  returned: always
version:
  description: verl version read from the wheel metadata or C(verl/version/version), when found.
  type: str
  returned: always
exists:
  description: Without I(src) - the snapshot exists from the same I(source_label).
  type: bool
  returned: when src is omitted
msg:
  description: C(skip - exists ...), C(created ...) or C(replaced ...).
  type: str
  returned: always
"""

import hashlib
import json
import os
import shutil
import tarfile
import tempfile
import time
import zipfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import NAME_RE as CODE_ID_RE
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_snapshot import write_manifest


def tree_hash(root):
    """Return the sha256 of a tree: sorted relative paths and file bytes.

    :param root: str, folder to hash (the snapshot's ``verl/``).
    :returns: str, hex digest. Byte-identical trees give the same digest.
    """
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = os.path.join(dirpath, name)
            digest.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def extract_verl(src, staging):
    """Put ``src``'s ``verl/`` package into ``staging/verl``; return the version found or None.

    :raises ValueError: when src holds no ``verl/`` package or is of an unknown kind.
    """
    version = None
    if os.path.isdir(src):
        package = os.path.join(src, "verl")
        if not os.path.isfile(os.path.join(package, "__init__.py")):
            raise ValueError("%s has no verl/__init__.py" % src)
        shutil.copytree(package, os.path.join(staging, "verl"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    elif src.endswith(".whl"):
        with zipfile.ZipFile(src) as wheel:
            members = [m for m in wheel.namelist() if m.startswith("verl/")]
            if "verl/__init__.py" not in members:
                raise ValueError("wheel %s has no verl/__init__.py" % src)
            wheel.extractall(staging, members)
            for name in wheel.namelist():
                if name.endswith(".dist-info/METADATA"):
                    for line in wheel.read(name).decode("utf-8", "replace").splitlines():
                        if line.startswith("Version:"):
                            version = line.split(":", 1)[1].strip()
    elif src.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(src) as tar:
            # Regular files and folders under verl/ only; no links, no '..' (the
            # extraction filters of Python >= 3.11.4 are not on every node).
            members = [m for m in tar.getmembers()
                       if m.name.lstrip("./").startswith("verl/") and (m.isfile() or m.isdir())
                       and ".." not in m.name.split("/")]
            if not any(m.name.lstrip("./") == "verl/__init__.py" for m in members):
                raise ValueError("tarball %s has no verl/__init__.py at its top" % src)
            for member in members:
                member.mode = 0o755 if member.isdir() else 0o644
                tar.extract(member, staging)
    else:
        raise ValueError("%s is neither a directory, a .whl nor a .tar.gz" % src)
    version_file = os.path.join(staging, "verl", "version", "version")
    if version is None and os.path.isfile(version_file):
        with open(version_file, encoding="utf-8") as handle:
            version = handle.read().strip() or None
    return version


def read_snapshot_json(path):
    """Return the parsed SNAPSHOT.json of a snapshot folder, or {} when absent or unreadable."""
    try:
        with open(os.path.join(path, "SNAPSHOT.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            code_id=dict(type="str", required=True),
            src=dict(type="path"),
            dest_root=dict(type="path", required=True),
            source_label=dict(type="str"),
            commit=dict(type="str"),
            force=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    code_id = params["code_id"]
    if not CODE_ID_RE.fullmatch(code_id):
        module.fail_json(msg="code_id %r is invalid: use letters, digits, '.', '_' or '-' "
                             "(pattern %s), no '/'." % (code_id, CODE_ID_RE.pattern))
    target = os.path.join(params["dest_root"], code_id)
    if not params["src"]:
        recorded = read_snapshot_json(target)
        same = (recorded.get("source") == params["source_label"] and bool(params["source_label"])
                and os.path.isfile(os.path.join(target, "mvp_marker.py")))
        module.exit_json(changed=False, exists=same, path=target, content_hash=recorded.get("content_hash"),
                         version=recorded.get("version"),
                         msg="skip: exists %s (source %s, content %s)"
                         % (target, params["source_label"], str(recorded.get("content_hash"))[:12])
                         if same else "no snapshot %s from %s yet" % (target, params["source_label"]))
    if not os.path.exists(params["src"]):
        module.fail_json(msg="snapshot source %s does not exist on the head" % params["src"])
    target = os.path.join(params["dest_root"], code_id)
    if not module.check_mode:
        os.makedirs(params["dest_root"], exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".staging-%s-" % code_id,
                               dir=None if module.check_mode else params["dest_root"])
    try:
        try:
            version = extract_verl(params["src"], staging)
        except (ValueError, zipfile.BadZipFile, tarfile.TarError) as exc:
            module.fail_json(msg="cannot make snapshot %s: %s" % (code_id, exc))
        content_hash = tree_hash(os.path.join(staging, "verl"))
        result = dict(path=target, content_hash=content_hash, version=version)
        replaced = None
        if os.path.exists(target):
            old_hash = read_snapshot_json(target).get("content_hash")
            if old_hash == content_hash and os.path.isfile(os.path.join(target, "mvp_marker.py")):
                module.exit_json(changed=False, msg="skip: exists %s (content %s)"
                                 % (target, content_hash[:12]), **result)
            if not params["force"]:
                module.fail_json(
                    msg="snapshot %s already exists with different content (existing %s, new %s); "
                        "snapshots are immutable: pick another code_id, or set "
                        "verl_snapshot_force=true to replace it (the old one is kept aside)."
                        % (target, old_hash, content_hash), **result)
            replaced = "%s.replaced-%s" % (target, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
        if module.check_mode:
            module.exit_json(changed=True, msg="would create %s" % target, **result)
        with open(os.path.join(staging, "mvp_marker.py"), "w", encoding="utf-8") as handle:
            handle.write('"""Marker of the verl code snapshot %s (written by ray_verl_snapshot)."""\n'
                         'MARKER = "%s"\n' % (code_id, code_id))
        with open(os.path.join(staging, "SNAPSHOT.json"), "w", encoding="utf-8") as handle:
            json.dump({"code_id": code_id, "source": params["source_label"] or params["src"],
                       "version": version, "commit": params["commit"], "content_hash": content_hash,
                       "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                      handle, indent=2, sort_keys=True)
        write_manifest(code_id, staging)
        os.chmod(staging, 0o755)
        if replaced:
            os.rename(target, replaced)
        os.rename(staging, target)
        msg = "created %s" % target if not replaced else "replaced %s (old kept at %s)" % (target, replaced)
        module.exit_json(changed=True, msg=msg, replaced=replaced, **result)
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)


if __name__ == "__main__":
    main()
