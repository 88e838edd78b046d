"""Unit tests of the shared tree's plan (module_utils mvp_shared_tree, used by the module ray_shared_tree and its action
plugin): the folders to create, files in the way, paths that escape."""
import pytest

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_shared_tree import plan


def test_shared_tree_plan_lists_missing_folders_and_refuses_escapes(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "hf").write_text("a file in the way")
    missing, in_the_way = plan(str(tmp_path), ["jobs", "hf", "common/code"])
    assert missing == [str(tmp_path / "common/code")]
    assert in_the_way == [str(tmp_path / "hf")]
    for bad in ("../x", "/abs"):
        with pytest.raises(ValueError):
            plan(str(tmp_path), [bad])
