"""Unit tests of the model helper functions with real files."""
import json
import os

import pytest

from ray_model import RECORD, complete, file_sizes, link, write_record


def make_model(root):
    os.makedirs(os.path.join(root, "sub"), exist_ok=True)
    with open(os.path.join(root, "config.json"), "w") as handle:
        json.dump({"model_type": "tiny"}, handle)
    with open(os.path.join(root, "sub", "weights.bin"), "wb") as handle:
        handle.write(b"\0" * 1000)


def test_record_makes_a_model_complete_until_a_file_changes(tmp_path):
    root = str(tmp_path / "m")
    make_model(root)
    assert not complete(root)
    write_record(root, "test")
    assert complete(root)
    assert file_sizes(root) == {"config.json": os.path.getsize(os.path.join(root, "config.json")),
                                os.path.join("sub", "weights.bin"): 1000}
    with open(os.path.join(root, "sub", "weights.bin"), "wb") as handle:
        handle.write(b"\0" * 10)
    assert not complete(root)
    assert RECORD not in file_sizes(root)


def test_link_is_idempotent_and_never_replaces_a_real_folder(tmp_path):
    target, path = str(tmp_path / "t"), str(tmp_path / "link")
    os.makedirs(target)
    assert link(path, target) is True
    assert link(path, target) is False
    assert os.readlink(path) == target
    real = str(tmp_path / "real")
    os.makedirs(real)
    with pytest.raises(ValueError, match="not a link"):
        link(real, target)
