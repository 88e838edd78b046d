"""Unit tests of ray_auth_token_file: folder and file made with their modes, re-runs change nothing,
the token never in the result, check mode, a bad mode and an unwritable folder."""
import os
import stat

from ray_auth_token_file import TOKEN_MODE, main


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_first_run_writes_folder_and_file_and_a_rerun_changes_nothing(tmp_path, run_module):
    path = tmp_path / "ray" / "auth_token"
    token = "s3cret-token-value"
    first = run_module(main, {"path": str(path), "token": token, "dir_mode": "0777"})
    assert first["changed"] and first["written"]
    assert path.read_text() == token
    assert mode_of(path) == TOKEN_MODE
    assert mode_of(path.parent) == 0o777
    assert token not in repr(first)
    again = run_module(main, {"path": str(path), "token": token})
    assert not again["changed"] and not again["written"]


def test_another_token_or_a_loose_mode_is_put_right(tmp_path, run_module):
    path = tmp_path / "auth_token"
    path.write_text("old")
    os.chmod(path, 0o644)
    os.chmod(tmp_path, 0o777)
    replaced = run_module(main, {"path": str(path), "token": "new"})
    assert replaced["changed"] and replaced["written"] and path.read_text() == "new"
    assert mode_of(path) == TOKEN_MODE
    os.chmod(path, 0o644)
    mode_only = run_module(main, {"path": str(path), "token": "new"})
    assert mode_only["changed"] and not mode_only["written"] and mode_of(path) == TOKEN_MODE


def test_check_mode_says_what_would_change_and_writes_nothing(tmp_path, run_module):
    path = tmp_path / "ray" / "auth_token"
    result = run_module(main, {"path": str(path), "token": "t"}, check_mode=True)
    assert result["changed"] and result["written"]
    assert not path.parent.exists()


def test_bad_input_is_named(tmp_path, run_module):
    empty = run_module(main, {"path": str(tmp_path / "t"), "token": ""})
    assert empty["failed"] and "mvp_ray_auth_token" in empty["msg"]
    bad_mode = run_module(main, {"path": str(tmp_path / "t"), "token": "t", "dir_mode": "rwx"})
    assert bad_mode["failed"] and "'rwx'" in bad_mode["msg"]
    blocked = tmp_path / "a-file"
    blocked.write_text("in the way")
    # (a token of one letter would be masked in every message: no_log hides its value everywhere)
    unwritable = run_module(main, {"path": str(blocked / "auth_token"), "token": "a-longer-token-4711"})
    assert unwritable["failed"] and "(mvp_ray_auth_token_path)" in unwritable["msg"]
    assert not (tmp_path / "t").exists()
