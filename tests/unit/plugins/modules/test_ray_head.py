"""Unit tests of ray_head's pure parts: the GCS port of the running cluster."""
from ray_head import current_gcs_port


def test_current_gcs_port_reads_ray_current_cluster(tmp_path):
    assert current_gcs_port(str(tmp_path)) is None
    (tmp_path / "ray_current_cluster").write_text("172.18.0.2:6380\n")
    assert current_gcs_port(str(tmp_path)) == 6380


import hashlib  # noqa: E402
import json  # noqa: E402

from ray_head import main, wait_problem  # noqa: E402
from ray_dashboard_fake import node  # noqa: E402


def summary(head=True, worker_ips=()):
    return {"head": {"node_ip": "10.0.0.1"} if head else None, "worker_ips": list(worker_ips)}


def test_wait_problem_names_what_is_still_missing():
    sha = "a" * 64
    running = {"state": "running", "settings_sha256": sha}
    assert wait_problem(summary(), None, "", 0) == ""
    assert "not started Ray from these settings" in wait_problem(summary(), {"state": "running"}, sha, 0)
    assert "says failed" in wait_problem(summary(), {"state": "failed", "settings_sha256": sha}, sha, 0)
    assert "does not list the head" in wait_problem(summary(head=False), running, sha, 0)
    assert wait_problem(summary(worker_ips=["10.0.0.2"]), running, sha, 2) == "1 of 2 workers ALIVE (10.0.0.2)"
    assert wait_problem(summary(worker_ips=["10.0.0.2", "10.0.0.3"]), running, sha, 2) == ""


def write_settings(tmp_path, state, attempts=()):
    settings = tmp_path / "mvp_node.json"
    settings.write_text('{"argv": ["ray", "start", "--head"]}')
    sha = hashlib.sha256(settings.read_bytes()).hexdigest()
    status = tmp_path / "mvp_node_status.json"
    status.write_text(json.dumps({"state": state, "settings_sha256": sha, "failed_attempts": list(attempts)}))
    return str(settings), str(status)


def test_start_false_returns_unchanged_once_the_container_runs_ray_and_the_workers_are_alive(
        fake_ray, clock, run_module, tmp_path):
    settings, status = write_settings(tmp_path, "running")
    result = run_module(main, {"ray": "/no/ray", "start": False, "settings_path": settings, "status_path": status,
                               "workers": 2})
    assert result["changed"] is False and result["started"] is False
    assert sorted(result["summary"]["worker_ips"]) == ["10.0.0.2", "10.0.0.3"]
    assert clock.elapsed == 0


def test_start_false_fails_at_the_timeout_quoting_the_failed_starts(fake_ray, clock, run_module, tmp_path):
    settings, status = write_settings(tmp_path, "failed", ["attempt 1: rc=1 - raylet.out: Check failed: x"])
    result = run_module(main, {"ray": "/no/ray", "start": False, "settings_path": settings, "status_path": status,
                               "ready_timeout": 30})
    assert result["failed"]
    assert "Waited 30s (ray_head_ready_timeout)" in result["msg"]
    assert "attempt 1: rc=1 - raylet.out: Check failed: x" in result["msg"]
    assert clock.elapsed >= 30


def test_start_false_waits_for_more_workers_than_are_alive(fake_ray, clock, run_module):
    fake_ray.nodes = [node("head0", "10.0.0.1", head=True, CPU=0.0),
                      node("wrk1", "10.0.0.2", CPU=8.0, worker_node=100.0)]
    result = run_module(main, {"ray": "/no/ray", "start": False, "workers": 2, "ready_timeout": 10})
    assert result["failed"] and "1 of 2 workers ALIVE (10.0.0.2)" in result["msg"]


def test_start_false_writes_the_token_file_before_it_reads_the_cluster(fake_ray, clock, run_module, tmp_path):
    import os
    import stat

    settings, status = write_settings(tmp_path, "running")
    token_path = tmp_path / "ray" / "mvp_auth_token"
    args = {"ray": "/no/ray", "start": False, "settings_path": settings, "status_path": status, "workers": 2,
            "auth_token": "head-token-xyz", "auth_token_path": str(token_path)}
    first = run_module(main, args)
    assert first["changed"] is True and first["auth_token_written"] is True and first["started"] is False
    assert token_path.read_text() == "head-token-xyz" and stat.S_IMODE(os.stat(token_path).st_mode) == 0o600
    assert "head-token-xyz" not in json.dumps(first)
    again = run_module(main, args)
    assert again["changed"] is False and again["auth_token_written"] is False
