"""Unit tests of ray_text_files: the folder and files written in order, re-runs change nothing, the
checksums are copy's (sha1 of the content), check mode, bad names and modes."""
import hashlib
import os
import stat

from ray_text_files import main


def test_files_are_written_once_in_order_with_copys_checksums(tmp_path, run_module):
    dest = tmp_path / "node"
    files = {"mvp_ray_node.py": "print('node')\n", "mvp_files.py": "X = 1\n", "empty.txt": ""}
    first = run_module(main, {"dest": str(dest), "files": files, "mode": "0640", "dir_mode": "0750"})
    assert first["changed"] and first["written"] == list(files)
    assert [r["name"] for r in first["results"]] == list(files)
    for entry in first["results"]:
        content = files[entry["name"]]
        assert (dest / entry["name"]).read_text() == content
        assert entry["checksum"] == hashlib.sha1(content.encode()).hexdigest()
        assert stat.S_IMODE(os.stat(entry["path"]).st_mode) == 0o640
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o750
    again = run_module(main, {"dest": str(dest), "files": files})
    assert not again["changed"] and again["written"] == [] and again["results"] == first["results"]
    changed = run_module(main, {"dest": str(dest), "files": dict(files, **{"mvp_files.py": "X = 2\n"})})
    assert changed["changed"] and changed["written"] == ["mvp_files.py"]
    assert (dest / "mvp_files.py").read_text() == "X = 2\n"


def test_check_mode_writes_nothing(tmp_path, run_module):
    dest = tmp_path / "node"
    result = run_module(main, {"dest": str(dest), "files": {"a.py": "A\n"}}, check_mode=True)
    assert result["changed"] and result["written"] == ["a.py"] and not dest.exists()


def test_bad_names_and_modes_are_refused_before_anything_is_written(tmp_path, run_module):
    dest = tmp_path / "node"
    for bad in ("../escape.py", "sub/a.py", ".."):
        result = run_module(main, {"dest": str(dest), "files": {"ok.py": "A\n", bad: "B\n"}})
        assert result["failed"] and repr(bad) in result["msg"]
    result = run_module(main, {"dest": str(dest), "files": {"ok.py": "A\n"}, "mode": "rw-r--r--"})
    assert result["failed"] and "mode 'rw-r--r--'" in result["msg"]
    assert not dest.exists() and not (tmp_path / "escape.py").exists()
