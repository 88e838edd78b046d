"""The node entrypoint of docker-host containers (roles/containers/files/mvp_ray_node.py) against a
stand-in for the ``ray`` CLI: a shell script, since what is tested is the entrypoint's own loop (wait
for settings, retries with Ray's reason, restart on new settings, exit when Ray dies). Real Ray in
real containers is tested by molecule (local: verify/node_start.yml)."""
import importlib.util
import json
import os
import stat
import sys
import threading
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
# The module_utils the entrypoint imports by their bare names (mvp_copies.COPIES["node_entrypoint"]).
for package in ("cluster", "storage"):
    sys.path.insert(0, os.path.join(ROOT, "plugins", "module_utils", package))

# Stand-in for `ray`: `start` records its arguments and environment and, unless FAIL is set, starts a
# background program named $WATCH (as the raylet would be) and returns 0; `stop` kills that program.
FAKE_RAY = """#!/bin/bash
dir=$(dirname "$0")
if [ "$1" = stop ]; then
  [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null
  exit 0
fi
echo "$@" >> "$dir/starts"
echo "MVP_INTERNAL_TOKEN=$MVP_INTERNAL_TOKEN" >> "$dir/env"
if [ -n "$FAIL" ]; then echo "F1124 raylet.cc:1] Check failed: $FAIL"; exit 1; fi
(exec -a "$WATCH" sleep 600) > /dev/null 2>&1 &
echo $! > "$dir/pid"
# As `ray start` returns only once the raylet runs: wait until the program carries its name.
until tr '\\0' ' ' < /proc/$!/cmdline 2>/dev/null | grep -q -- "$WATCH"; do sleep 0.01; done
echo "Ray runtime started."
"""


@pytest.fixture
def entry(monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "mvp_ray_node", os.path.join(ROOT, "roles", "containers", "files", "mvp_ray_node.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "POLL_S", 0.05)
    return module


@pytest.fixture
def fake_ray(tmp_path, monkeypatch):
    # A program name no real process has (the host's /proc also shows the containers' raylets).
    monkeypatch.setenv("WATCH", "mvp-fake-raylet-%d" % os.getpid())
    path = tmp_path / "ray"
    path.write_text(FAKE_RAY)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def write_settings(path, fake_ray, **extra):
    settings = {"kind": "head", "argv": [str(fake_ray), "start", "--head"], "env": {"MVP_INTERNAL_TOKEN": "tok-1"},
                "watch": [os.environ["WATCH"]],
                "temp_dir": str(path.parent / "ray-temp"), "timeout": 10, "attempts": 2, "retry_delay": 0}
    settings.update(extra)
    path.write_text(json.dumps(settings))


def status_of(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def wait_for(check, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def run_in_thread(node):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("code", node.run_once()), daemon=True)
    thread.start()
    return thread, box


def test_waits_for_settings_then_runs_ray_with_the_secret_in_its_environment_only(entry, fake_ray, tmp_path):
    settings, status = tmp_path / "mvp_node.json", tmp_path / "status.json"
    node = entry.Node(str(settings), str(status))
    thread, box = run_in_thread(node)
    assert wait_for(lambda: status_of(status).get("state") == "waiting for settings")
    write_settings(settings, fake_ray)
    assert wait_for(lambda: status_of(status).get("state") == "running")
    assert (tmp_path / "starts").read_text().split() == ["start", "--head"]
    assert (tmp_path / "env").read_text().strip() == "MVP_INTERNAL_TOKEN=tok-1"
    import hashlib
    assert status_of(status)["settings_sha256"] == hashlib.sha256(settings.read_bytes()).hexdigest()
    # The watched program dies: the entrypoint exits 1 (for the restart policy), naming it.
    pid = int((tmp_path / "pid").read_text())
    os.kill(pid, 9)
    thread.join(10)
    assert box["code"] == 1
    got = status_of(status)
    assert got["state"] == "exited" and "%s (pid %d) ended" % (os.environ["WATCH"], pid) in got["reason"]


def run_then_new_settings(entry, fake_ray, tmp_path):
    """A node that ran Ray from settings with tok-1 and returned for a new start after new ones (tok-2) came.

    :returns: (node, settings path, status path).
    """
    settings, status = tmp_path / "mvp_node.json", tmp_path / "status.json"
    write_settings(settings, fake_ray)
    node = entry.Node(str(settings), str(status))
    thread, box = run_in_thread(node)
    assert wait_for(lambda: status_of(status).get("state") == "running")
    write_settings(settings, fake_ray, env={"MVP_INTERNAL_TOKEN": "tok-2"})
    thread.join(20)
    assert not thread.is_alive() and box["code"] is None
    return node, settings, status


def test_new_settings_stop_ray_and_ask_for_a_new_start(entry, fake_ray, tmp_path):
    node, _settings, status = run_then_new_settings(entry, fake_ray, tmp_path)
    thread, box = run_in_thread(node)
    assert wait_for(lambda: status_of(status).get("state") == "running"
                    and "tok-2" in (tmp_path / "env").read_text())
    os.kill(int((tmp_path / "pid").read_text()), 9)
    thread.join(10)
    assert box["code"] == 1


def test_failed_starts_are_retried_then_the_entrypoint_exits_naming_rays_reason(entry, fake_ray, tmp_path, monkeypatch):
    monkeypatch.setenv("FAIL", "agent port")
    settings, status = tmp_path / "mvp_node.json", tmp_path / "status.json"
    write_settings(settings, fake_ray, attempts=2)
    code = entry.Node(str(settings), str(status)).run_once()
    assert code == 1
    got = status_of(status)
    assert got["state"] == "failed"
    assert len(got["failed_attempts"]) == 2
    assert all("rc=1" in line and "Check failed: agent port" in line for line in got["failed_attempts"])
    assert len((tmp_path / "starts").read_text().splitlines()) == 2


def test_a_worker_waits_for_the_heads_gcs_port(entry, fake_ray, tmp_path):
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    settings, status = tmp_path / "mvp_node.json", tmp_path / "status.json"
    write_settings(settings, fake_ray, kind="worker", gcs_address="127.0.0.1:%d" % port, route_env=False,
                   argv=[str(fake_ray), "start", "--address=127.0.0.1:%d" % port])
    node = entry.Node(str(settings), str(status))
    thread, box = run_in_thread(node)
    assert wait_for(lambda: status_of(status).get("state") == "waiting for the head")
    assert not (tmp_path / "starts").exists()
    listener.listen(1)
    assert wait_for(lambda: status_of(status).get("state") == "running")
    listener.close()
    os.kill(int((tmp_path / "pid").read_text()), 9)
    thread.join(10)
    assert box["code"] == 1


def test_the_status_never_says_running_with_new_settings_before_ray_was_started_from_them(entry, fake_ray, tmp_path):
    """The roles wait for state running with the settings file's hash: every status the entrypoint writes
    between reading new settings and Ray's new start must say something else (the race made a worker's
    wait return with no node IP, and the play found one worker fewer)."""
    import hashlib
    node, settings, status = run_then_new_settings(entry, fake_ray, tmp_path)
    new_sha = hashlib.sha256(settings.read_bytes()).hexdigest()
    seen, started = [], []
    real_set, real_start = node.status.set, node.start

    def recording_set(**values):
        real_set(**values)
        seen.append((dict(node.status.data), bool(started)))

    def recording_start(*args):
        started.append(True)
        return real_start(*args)

    node.status.set, node.start = recording_set, recording_start
    thread, box = run_in_thread(node)
    assert wait_for(lambda: status_of(status).get("state") == "running" and started)
    early = [data for data, after_start in seen if not after_start and data["settings_sha256"] == new_sha]
    assert early and all(data["state"] != "running" for data in early), early
    os.kill(int((tmp_path / "pid").read_text()), 9)
    thread.join(10)
