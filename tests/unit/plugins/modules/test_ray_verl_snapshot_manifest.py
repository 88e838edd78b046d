"""Unit tests of ray_verl_snapshot's content record: MANIFEST.json written with each new snapshot."""
import hashlib
import json
import os

from ray_verl_snapshot import main


def test_a_new_snapshot_records_the_sha256_of_every_file(tmp_path, run_module):
    src = tmp_path / "src"
    files = {"verl/__init__.py": b"x = 1\n", "verl/trainer/config/ppo_trainer.yaml": b"lr: 1e-6\n"}
    for rel, data in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_bytes(data)
    (src / "verl" / "__pycache__").mkdir()
    (src / "verl" / "__pycache__" / "x.pyc").write_bytes(b"c")
    result = run_module(main, {"code_id": "verl-t", "src": str(src), "dest_root": str(tmp_path / "code")})
    assert result["changed"]
    with open(os.path.join(result["path"], "MANIFEST.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    assert record == {"code_id": "verl-t", "algorithm": "sha256",
                      "files": {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}}
