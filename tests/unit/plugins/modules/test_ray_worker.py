"""Unit tests of ray_worker's pure parts: the raylet's flags, the secrets' fingerprint, the restart decision."""
import hashlib

import pytest

from ray_worker import decide, fingerprint, flag


RAYLET = ["/opt/mvp/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet",
          "--node_ip_address=172.18.0.3", "--python_worker_command=python ... --node-ip-address=9.9.9.9",
          "--gcs-address=172.18.0.2:6379"]


def test_flag_accepts_dashes_or_underscores_and_ignores_nested_command_lines():
    assert flag(RAYLET, "--node-ip-address") == "172.18.0.3"
    assert flag(RAYLET, "--gcs-address") == "172.18.0.2:6379"
    assert flag(["raylet", "--gcs-address", "1.2.3.4:1"], "--gcs-address") == "1.2.3.4:1"
    assert flag(RAYLET, "--absent") == ""


def test_fingerprint_is_sha256_or_empty():
    assert fingerprint("") == ""
    assert fingerprint("s3cret") == hashlib.sha256(b"s3cret").hexdigest()


@pytest.mark.parametrize("raylet, gcs, alive, seen, joined, reason", [
    (None, "172.18.0.2:6379", [], "", False, "no raylet runs"),
    (RAYLET, "172.18.0.9:6379", ["172.18.0.3"], "", False, "raylet belongs to 172.18.0.2:6379, not 172.18.0.9:6379"),
    (RAYLET, "172.18.0.2:6379", ["172.18.0.4"], "", False, "the head does not list 172.18.0.3 ALIVE"),
    (RAYLET, "172.18.0.2:6379", ["172.18.0.3"], "old", False, "holds another secret"),
    (RAYLET, "172.18.0.2:6379", ["172.18.0.3"], "", True, "joined"),
])
def test_worker_decision(raylet, gcs, alive, seen, joined, reason):
    got_joined, got_reason = decide(raylet, gcs, alive, seen, "")
    assert got_joined is joined
    assert reason in got_reason


def test_worker_restarts_when_the_route_to_the_head_leaves_from_another_address():
    joined, reason = decide(RAYLET, "172.18.0.2:6379", ["172.18.0.3"], "", "", wanted_node_ip="10.0.0.5")
    assert not joined and "172.18.0.3" in reason and "10.0.0.5" in reason
    assert decide(RAYLET, "172.18.0.2:6379", ["172.18.0.3"], "", "", wanted_node_ip="172.18.0.3") == (True, "joined")


def test_more_secrets_change_the_fingerprint_only_when_given():
    import hashlib

    from ray_worker import secrets_fingerprint

    alone = secrets_fingerprint("tok", "MVP_INTERNAL_TOKEN", {})
    assert alone == hashlib.sha256(b"tok").hexdigest()
    assert secrets_fingerprint("tok", "MVP_INTERNAL_TOKEN", {"WANDB_API_KEY": ""}) == alone
    with_key = secrets_fingerprint("tok", "MVP_INTERNAL_TOKEN", {"WANDB_API_KEY": "k1"})
    assert with_key != alone
    assert with_key != secrets_fingerprint("tok", "MVP_INTERNAL_TOKEN", {"WANDB_API_KEY": "k2"})
    assert "k1" not in with_key


def test_ray_reason_reads_the_raylets_fatal_check_and_the_start_output(tmp_path):
    from ray_worker import ray_reason

    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    fatal = "[2026-11-23 10:00:00,000 C 42 42] (raylet) agent_manager.cc:1: Check failed: Timed out waiting for file"
    (logs / "raylet.out").write_text("started\n" + fatal + "\n")
    out = "Local node IP: 172.18.0.3\nRuntimeError: Failed to start the raylet"
    reason = ray_reason(out, str(tmp_path))
    assert "raylet.out: " + fatal in reason
    assert "ray start: RuntimeError: Failed to start the raylet" in reason
    assert "Local node IP" not in reason


def test_ray_reason_falls_back_to_the_last_output_line_and_to_nothing(tmp_path):
    from ray_worker import ray_reason

    assert ray_reason("one\ntwo", str(tmp_path)) == "ray start: two"
    assert ray_reason("", str(tmp_path)) == ""


def test_retry_pause_grows_with_the_attempt_and_stays_within_one_delay_of_it():
    from ray_worker import retry_pause

    delay = 5.0
    for attempt in (1, 2, 3):
        assert retry_pause(attempt, delay, rand=lambda: 0.0) == delay * attempt
        assert retry_pause(attempt, delay, rand=lambda: 0.999) < delay * (attempt + 1)
    assert retry_pause(1, 0, rand=lambda: 0.5) == 0


def test_as_text_decodes_timeout_bytes():
    from ray_worker import as_text

    assert as_text(b"ab\xff") == "ab\ufffd"
    assert as_text(None) == "" and as_text("x") == "x"


def test_start_false_waits_for_the_status_of_the_current_settings(clock, run_module, tmp_path):
    import json

    from ray_worker import main

    settings = tmp_path / "mvp_node.json"
    settings.write_text('{"argv": ["ray", "start"], "env": {"MVP_INTERNAL_TOKEN": "t"}}')
    status = tmp_path / "mvp_node_status.json"
    old = {"state": "running", "settings_sha256": "0" * 64, "node_ip": "10.0.0.9", "failed_attempts": []}
    status.write_text(json.dumps(old))
    args = {"ray": "/no/ray", "gcs_address": "10.0.0.1:6379", "start": False, "settings_path": str(settings),
            "status_path": str(status), "timeout": 20}
    result = run_module(main, args)
    assert result["failed"] and "(from older settings)" in result["msg"] and clock.elapsed >= 20
    sha = hashlib.sha256(settings.read_bytes()).hexdigest()
    status.write_text(json.dumps(dict(old, settings_sha256=sha, state="failed",
                                      failed_attempts=["attempt 1: rc=1 - ray start: Timed out"])))
    result = run_module(main, args)
    assert result["failed"] and "state 'failed'" in result["msg"] and "attempt 1: rc=1 - ray start: Timed out" in result["msg"]
    status.write_text(json.dumps(dict(old, settings_sha256=sha)))
    result = run_module(main, args)
    assert not result.get("failed") and result["changed"] is False and result["node_ip"] == "10.0.0.9"


def test_start_false_writes_new_settings_and_reports_changed_only_then(clock, run_module, tmp_path):
    import json

    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import settings_text
    from ray_worker import main

    settings_path = tmp_path / "mvp_node.json"
    status = tmp_path / "mvp_node_status.json"
    settings = {"argv": ["ray", "start"], "env": {"RAY_AUTH_MODE": "token"}}
    secrets = {"secret": "tok-secret-123", "secret_env": "MVP_INTERNAL_TOKEN",
               "more_secrets": {"WANDB_API_KEY": "wandb-key-456", "EMPTY": ""}}
    args = dict(secrets, ray="/no/ray", gcs_address="10.0.0.1:6379", start=False, settings=settings,
                settings_path=str(settings_path), status_path=str(status), timeout=5)
    result = run_module(main, args)
    # Written, but no entrypoint ran Ray from it: the wait fails at the timeout, naming the missing status.
    assert result["failed"] and "no status file" in result["msg"]
    # The secrets join the settings' env in the file (empty values left out), and never the result.
    expected_env = dict(settings["env"], MVP_INTERNAL_TOKEN=secrets["secret"],
                        WANDB_API_KEY=secrets["more_secrets"]["WANDB_API_KEY"])
    assert json.loads(settings_path.read_text()) == dict(settings, env=expected_env)
    assert secrets["secret"] not in json.dumps(result) and "wandb-key-456" not in json.dumps(result)
    sha = hashlib.sha256(settings_path.read_bytes()).hexdigest()
    status.write_text(json.dumps({"state": "running", "settings_sha256": sha, "node_ip": "10.0.0.2"}))
    result = run_module(main, args)
    assert result["changed"] is False and result["node_ip"] == "10.0.0.2"
    # A new secret: new settings, and the reason is readable (only the secrets' values are masked).
    new_text = settings_text(dict(settings, env=dict(expected_env, MVP_INTERNAL_TOKEN="tok-secret-789")))
    status.write_text(json.dumps({"state": "running", "node_ip": "10.0.0.2",
                                  "settings_sha256": hashlib.sha256(new_text.encode()).hexdigest()}))
    result = run_module(main, dict(args, secret="tok-secret-789"))
    assert result["changed"] is True and result["reason"] == "started from new settings"
    assert settings_path.read_text() == new_text


def test_start_false_writes_the_token_file_first_in_the_same_call(clock, run_module, tmp_path):
    import json
    import os
    import stat

    from ray_worker import main

    settings_path, status = tmp_path / "mvp_node.json", tmp_path / "mvp_node_status.json"
    token_path = tmp_path / "ray" / "mvp_auth_token"
    settings_path.write_text('{"argv": ["ray", "start"]}')
    sha = hashlib.sha256(settings_path.read_bytes()).hexdigest()
    status.write_text(json.dumps({"state": "running", "settings_sha256": sha, "node_ip": "10.0.0.3"}))
    args = {"ray": "/no/ray", "gcs_address": "10.0.0.1:6379", "start": False, "settings_path": str(settings_path),
            "status_path": str(status), "timeout": 5, "auth_token": "cluster-token-abc",
            "auth_token_path": str(token_path)}
    first = run_module(main, args)
    # Ray already runs from these settings: the token file alone is the change.
    assert first["changed"] is True and first["auth_token_written"] is True and first["node_ip"] == "10.0.0.3"
    assert token_path.read_text() == "cluster-token-abc"
    assert stat.S_IMODE(os.stat(token_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(token_path.parent).st_mode) == 0o777
    assert "cluster-token-abc" not in json.dumps(first)
    again = run_module(main, args)
    assert again["changed"] is False and again["auth_token_written"] is False
    # A path without a token (the controller's file never generated) is refused, naming the fix.
    refused = run_module(main, dict(args, auth_token=""))
    assert refused["failed"] and "set mvp_ray_auth_token" in refused["msg"]
    # No path: token auth off, nothing written, nothing said about it.
    off = run_module(main, dict(args, auth_token_path="", auth_token=""))
    assert off["changed"] is False and off["auth_token_written"] is False
