"""Unit tests of ray_auth_token_file: folder and file made with their modes, re-runs change nothing,
the token never in the result, check mode, a bad mode and an unwritable folder."""
import os
import stat

from ray_auth_token_file import main

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_secret_file import TOKEN_MODE


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


def test_generate_writes_a_random_token_once_and_keeps_it(tmp_path, run_module):
    path = tmp_path / "secrets" / "ray_auth_token"
    first = run_module(main, {"path": str(path), "generate": True, "dir_mode": "0700"})
    token = path.read_text()
    assert first["changed"] and first["written"]
    assert len(token) >= 43 and token not in repr(first)  # 32 random bytes, URL-safe base64
    assert mode_of(path) == TOKEN_MODE and mode_of(path.parent) == 0o700
    again = run_module(main, {"path": str(path), "generate": True, "dir_mode": "0700"})
    assert not again["changed"] and path.read_text() == token
    other = tmp_path / "other" / "ray_auth_token"
    run_module(main, {"path": str(other), "generate": True})
    assert other.read_text() != token


def test_generate_in_check_mode_writes_nothing(tmp_path, run_module):
    path = tmp_path / "secrets" / "ray_auth_token"
    result = run_module(main, {"path": str(path), "generate": True}, check_mode=True)
    assert result["changed"] and not path.parent.exists()


def test_generate_refuses_a_token_file_others_may_read_naming_it(tmp_path, run_module):
    path = tmp_path / "ray_auth_token"
    path.write_text("kept-token-value-0815")
    for mode in (0o644, 0o640, 0o400):
        os.chmod(path, mode)
        refused = run_module(main, {"path": str(path), "generate": True})
        assert refused["failed"], oct(mode)
        assert "%s has mode %04o" % (path, mode) in refused["msg"] and "chmod 0600 %s" % path in refused["msg"]
        assert mode_of(path) == mode and path.read_text() == "kept-token-value-0815"
    os.chmod(path, 0o600)
    path.write_text("")
    empty = run_module(main, {"path": str(path), "generate": True})
    assert empty["failed"] and "%s is empty" % path in empty["msg"]
    folder = tmp_path / "a-folder"
    folder.mkdir()
    not_file = run_module(main, {"path": str(folder), "generate": True})
    assert not_file["failed"] and "%s is not a regular file" % folder in not_file["msg"]


def test_generate_takes_no_token(tmp_path, run_module):
    both = run_module(main, {"path": str(tmp_path / "t"), "token": "a-longer-token-4711", "generate": True})
    assert both["failed"] and "mutually exclusive" in both["msg"]
