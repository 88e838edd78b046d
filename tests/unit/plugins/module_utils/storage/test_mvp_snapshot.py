"""Unit tests of mvp_snapshot: a code snapshot's content record (MANIFEST.json)."""
import hashlib
import json
import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_snapshot import (
    MANIFEST_FILE, file_hashes, read_manifest, write_manifest)


def _snapshot(root, files):
    """A snapshot folder holding ``files`` ({relative path: bytes})."""
    for rel, data in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as handle:
            handle.write(data)
    return str(root)


FILES = {"verl/__init__.py": b"x = 1\n", "verl/trainer/config/ppo_trainer.yaml": b"lr: 1e-6\n",
         "verl/data/blob.bin": b"\x00\x01"}


def test_file_hashes_are_the_sha256_of_each_file_under_verl(tmp_path):
    snap = _snapshot(tmp_path, dict(FILES, **{"verl/__pycache__/a.cpython-311.pyc": b"c", "verl/b.pyc": b"c",
                                              "mvp_marker.py": b"MARKER = 'x'\n"}))
    assert file_hashes(snap) == {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}


def test_write_manifest_then_read_it_back_as_recorded(tmp_path):
    snap = _snapshot(tmp_path, FILES)
    assert write_manifest("verl-a", snap) == len(FILES)
    with open(os.path.join(snap, MANIFEST_FILE), encoding="utf-8") as handle:
        record = json.load(handle)
    assert record == {"code_id": "verl-a", "algorithm": "sha256",
                      "files": {rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()}}
    assert read_manifest(snap) == (record["files"], "recorded")


def test_a_snapshot_without_manifest_is_hashed_when_read(tmp_path):
    snap = _snapshot(tmp_path, FILES)
    assert read_manifest(snap) == ({rel: hashlib.sha256(data).hexdigest() for rel, data in FILES.items()},
                                   "computed")


def test_a_folder_without_verl_has_no_record(tmp_path):
    files, how = read_manifest(str(tmp_path / "gone"))
    assert files is None and "has no verl/ package" in how
