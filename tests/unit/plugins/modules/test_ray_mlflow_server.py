"""Unit tests of ray_mlflow_server's pure parts: what to do with the server, and its auth config file."""
import os
import stat

import pytest

from ray_mlflow_server import age_of, decide, write_auth_config

TIMEOUT = 120


@pytest.mark.parametrize("pid, answers, same, wait, age, expected", [
    # none of ours runs: whoever holds the port is looked at, then it starts
    (None, False, False, True, None, "check port"),
    (None, True, True, False, None, "check port"),
    # ours answers from this command: kept
    (42, True, True, True, 5.0, "keep"),
    (42, True, True, False, 500.0, "keep"),
    # ours, this command, started a moment ago and not answering yet: waited for, or left to start
    (42, False, True, True, 3.0, "wait"),
    (42, False, True, False, 3.0, "starting"),
    (42, False, True, False, None, "starting"),
    # ours, this command, but started longer ago than a start may take: restarted
    (42, False, True, False, TIMEOUT + 1.0, "restart"),
    (42, False, True, True, TIMEOUT, "restart"),
    # ours with other settings: restarted, answering or not
    (42, True, False, True, 1.0, "restart"),
    (42, False, False, False, 1.0, "restart"),
])
def test_decide(pid, answers, same, wait, age, expected):
    assert decide(pid, answers, same, wait, age, TIMEOUT) == expected


def test_write_auth_config_writes_0600_in_a_0700_folder_then_leaves_the_same_text(tmp_path):
    path = str(tmp_path / "services" / "mlflow_auth.ini")
    text = "[mlflow]\nadmin_password = s3cret\n"
    assert write_auth_config(path, text, check_mode=False) is True
    with open(path) as handle:
        assert handle.read() == text
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) & 0o077 == 0
    assert write_auth_config(path, text, check_mode=False) is False
    # a wider mode is put right, even with the same text
    os.chmod(path, 0o644)
    assert write_auth_config(path, text, check_mode=False) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_write_auth_config_in_check_mode_says_it_would_write_and_writes_nothing(tmp_path):
    path = str(tmp_path / "services" / "mlflow_auth.ini")
    assert write_auth_config(path, "x", check_mode=True) is True
    assert not os.path.exists(os.path.dirname(path))
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as handle:
        handle.write("old")
    assert write_auth_config(path, "new", check_mode=True) is True
    with open(path) as handle:
        assert handle.read() == "old"


def test_age_of(tmp_path):
    assert age_of(str(tmp_path / "missing")) is None
    path = tmp_path / "pid"
    path.write_text("1\n")
    os.utime(str(path), (os.stat(str(path)).st_atime, os.stat(str(path)).st_mtime - 30))
    assert 29.0 <= age_of(str(path)) < 60.0
