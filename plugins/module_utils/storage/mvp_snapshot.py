# -*- coding: utf-8 -*-
"""The content record of a verl code snapshot: one sha256 per file of its ``verl/`` package.

A snapshot ``<shared_root>/common/code/verl/<code_id>/`` (``ray_verl_snapshot``) holds
``verl/``, ``mvp_marker.py``, ``SNAPSHOT.json`` and, from this version on, ``MANIFEST.json``::

    {"code_id": "verl-0.9.1", "algorithm": "sha256",
     "files": {"verl/__init__.py": "<hex digest>", "verl/trainer/config/ppo_trainer.yaml": "...", ...}}

Paths are relative to the snapshot folder, ``/``-separated; ``__pycache__`` folders and
``*.pyc`` files are left out, as in the snapshot's ``content_hash``. Snapshots made before
the manifest existed get it computed from their files when read (``read_manifest``): they
are immutable, so both give the same record. report.yml compares two snapshots' records
to list the files that differ (``mvp_report.code_diff``).

Standard library only.
"""

from __future__ import annotations

import json
import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import read_json, sha256_file

MANIFEST_FILE = "MANIFEST.json"
SNAPSHOT_FILE = "SNAPSHOT.json"
PACKAGE = "verl"


def file_hashes(snapshot):
    """The sha256 of every file of a snapshot's package.

    :param snapshot: str, the snapshot folder (holding ``verl/``).
    :returns: dict ``{"verl/<relative path>": hex digest}`` (empty when ``verl/`` is missing).
    """
    files = {}
    package = os.path.join(snapshot, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = os.path.join(dirpath, name)
            files[os.path.relpath(path, snapshot).replace(os.sep, "/")] = sha256_file(path)
    return files


def manifest(code_id, snapshot):
    """The MANIFEST.json content of a snapshot folder (dict, see the module docstring)."""
    return {"code_id": code_id, "algorithm": "sha256", "files": file_hashes(snapshot)}


def write_manifest(code_id, snapshot):
    """Write ``<snapshot>/MANIFEST.json``; return the number of files recorded."""
    record = manifest(code_id, snapshot)
    with open(os.path.join(snapshot, MANIFEST_FILE), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")
    return len(record["files"])


def read_manifest(snapshot):
    """A snapshot's content record: MANIFEST.json when it has one, else computed from its files.

    :param snapshot: str, the snapshot folder.
    :returns: tuple (files dict or None, how): how is ``recorded`` (MANIFEST.json),
        ``computed`` (hashed now: a snapshot made before manifests) or an error text
        (files None) when the folder has no ``verl/`` package.
    """
    recorded = read_json(os.path.join(snapshot, MANIFEST_FILE)).get("files")
    if isinstance(recorded, dict) and recorded:
        return recorded, "recorded"
    if not os.path.isdir(os.path.join(snapshot, PACKAGE)):
        return None, "%s has no %s/ package (deleted, or not a snapshot)" % (snapshot, PACKAGE)
    return file_hashes(snapshot), "computed"
