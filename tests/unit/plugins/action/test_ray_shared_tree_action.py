"""The ray_shared_tree action plugin, run by a real ansible-playbook on localhost: the folders made in the controller's
process with their mode, a second run makes none, a file in the way or a missing root is refused, nothing replaced."""
import os
import stat

from test_ray_auth_token_file_action import run_tasks

DIRS = ["jobs", "common/code", "user/code"]


def tree(root, dirs=DIRS, mode="0770"):
    return {"mvp.ray.ray_shared_tree": {"root": str(root), "dirs": dirs, "mode": mode}}


def test_made_in_process_with_their_mode_then_left_alone(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    results, rc, _ = run_tasks(tmp_path, [tree(root), tree(root)])
    first, again = results
    assert rc == 0
    assert first["changed"] and first["created"] == [str(root / d) for d in DIRS]
    assert not again["changed"] and again["created"] == []
    for rel in DIRS:
        assert stat.S_IMODE(os.stat(root / rel).st_mode) == 0o770


def test_a_file_in_the_way_or_no_root_is_refused_and_nothing_replaced(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    (root / "jobs").write_text("a file in the way")
    missing = tmp_path / "not-mounted"
    results, rc, _ = run_tasks(tmp_path, [tree(root), tree(missing), tree(root, ["../escape"])])
    assert rc == 0  # ignore_errors: all three results are read
    assert results[0]["failed"] and results[0]["msg"] == (
        "Not folders, refusing to replace them: %s. Move them away and re-run." % (root / "jobs"))
    assert (root / "jobs").read_text() == "a file in the way" and not (root / "common").exists()
    assert results[1]["failed"] and results[1]["msg"].startswith("%s (mvp_shared_root; on a docker host "
                                                                 "mvp_host_shared_dir) is not a folder" % missing)
    assert results[2]["failed"] and "'../escape' is not a folder relative to" in results[2]["msg"]
    assert not (tmp_path / "escape").exists()
