"""The ray_text_files action plugin, run by a real ansible-playbook on localhost: the files written in the controller's
process with their modes and checksums, a second run writes nothing, a bad name fails naming it."""
import hashlib
import os
import stat

from test_ray_auth_token_file_action import run_tasks

FILES = {"mvp_ray_node.py": "print('node')\n", "mvp_files.py": "# files\n", "empty.txt": ""}


def write(dest, files, **more):
    return {"mvp.ray.ray_text_files": dict({"dest": str(dest), "files": files, "mode": "0640", "dir_mode": "0750"},
                                           **more)}


def test_written_in_process_with_modes_and_checksums_then_left_alone(tmp_path):
    dest = tmp_path / "node" / "files"
    results, rc, _ = run_tasks(tmp_path, [write(dest, FILES), write(dest, FILES)])
    first, again = results
    assert rc == 0
    assert first["changed"] and first["written"] == list(FILES)
    assert not again["changed"] and again["written"] == []
    assert [r["checksum"] for r in first["results"]] == [hashlib.sha1(t.encode()).hexdigest() for t in FILES.values()]
    assert [r["path"] for r in first["results"]] == [str(dest / n) for n in FILES]
    for name, text in FILES.items():
        assert (dest / name).read_text() == text
        assert stat.S_IMODE(os.stat(dest / name).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o750


def test_a_name_with_a_folder_or_a_bad_mode_fails_naming_it(tmp_path):
    dest = tmp_path / "out"
    results, rc, _ = run_tasks(tmp_path, [write(dest, {"../escape.py": "x"}), write(dest, FILES, mode="rw")])
    assert rc == 0  # ignore_errors: both results are read
    assert results[0]["failed"] and results[0]["msg"] == "files: file names must not hold a folder part: '../escape.py'"
    assert results[1]["failed"] and results[1]["msg"].startswith("mode ")
    assert not (tmp_path / "escape.py").exists()


def test_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "out"
    results, rc, _ = run_tasks(tmp_path, [write(dest, FILES)], check=True)
    assert rc == 0 and results[0]["changed"] and results[0]["written"] == list(FILES)
    assert not dest.exists()
