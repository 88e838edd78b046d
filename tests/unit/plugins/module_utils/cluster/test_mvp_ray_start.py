"""Unit tests of module_utils mvp_ray_start: the ray start command lines, the node settings, Ray's reason,
the workers' start notes (and their filter's input checks)."""
import json

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.mvp.ray.plugins.filter.mvp_ray_start_filters import mvp_ray_start_notes
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import (
    check_gcs_address, head_start_argv, head_start_env, node_settings, ray_reason, retry_pause, start_notes,
    worker_start_argv)


def test_head_argv_is_a_control_plane_only_head_with_the_given_ports():
    argv = head_start_argv("/r/ray", 6380, "0.0.0.0", 8266, ["--x=1"])
    assert argv[:3] == ["/r/ray", "start", "--head"]
    assert "--num-cpus=0" in argv and "--num-gpus=0" in argv
    assert "--port=6380" in argv and "--dashboard-port=8266" in argv and "--dashboard-host=0.0.0.0" in argv
    assert argv[-1] == "--x=1"


def test_head_env_only_holds_what_was_asked_for():
    assert head_start_env() == {}
    assert head_start_env("/t/gcs", True) == {"RAY_gcs_storage": "rocksdb", "RAY_gcs_storage_path": "/t/gcs",
                                             "RAY_DASHBOARD_ENABLE_PROFILING": "1"}


def test_the_heads_health_checks_reach_rays_config_variables():
    # each key becomes RAY_health_check_<key> (Ray's RayConfig reads them); a null key keeps Ray's own value
    env = head_start_env(health_check={"period_ms": 1000, "timeout_ms": 2000, "failure_threshold": None})
    assert env == {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "2000"}
    settings = node_settings("head", {"ray": "/r/ray", "gcs_port": 6379, "dashboard_host": "0.0.0.0",
                                      "dashboard_port": 8265, "health_check": {"failure_threshold": 3}})
    assert settings["env"]["RAY_health_check_failure_threshold"] == "3"


@pytest.mark.parametrize("bad, named", [({"period": 1}, "health_check.period"), ({"timeout_ms": 0}, "timeout_ms"),
                                        ({"period_ms": "1s"}, "period_ms"), ({"period_ms": True}, "period_ms")])
def test_a_bad_health_check_is_refused_naming_the_key(bad, named):
    with pytest.raises(ValueError, match=named):
        head_start_env(health_check=bad)


def test_worker_argv_carries_resources_gpus_cpus_and_node_ip_only_when_given():
    resources = {"worker_node": 100, "a": 1}
    argv = worker_start_argv("/r/ray", "h:6379", resources, 2)
    assert argv[:3] == ["/r/ray", "start", "--address=h:6379"]
    assert "--resources=%s" % json.dumps(resources, sort_keys=True) in argv
    assert "--num-gpus=2" in argv
    assert not [a for a in argv if a.startswith(("--num-cpus", "--node-ip-address"))]
    argv = worker_start_argv("/r/ray", "h:6379", resources, 0, "8", "10.0.0.5", ["--y"])
    assert "--num-cpus=8" in argv and "--node-ip-address=10.0.0.5" in argv and argv[-1] == "--y"


def test_worker_settings_keep_secrets_in_env_only_and_drop_empty_values():
    options = {"ray": "/r/ray", "gcs_address": "10.0.0.1:6379", "resources": {"worker_node": 100}, "num_gpus": 1,
               "num_cpus": "", "env": {"MVP_INTERNAL_TOKEN": "tok-123", "WANDB_API_KEY": ""},
               "timeout": 30, "attempts": 0, "retry_delay": 2, "socket_ifname": "ib0"}
    settings = node_settings("worker", options)
    assert settings["env"] == {"MVP_INTERNAL_TOKEN": "tok-123"}
    assert not any("tok-123" in arg for arg in settings["argv"])
    assert settings["argv"] == worker_start_argv("/r/ray", "10.0.0.1:6379", {"worker_node": 100}, 1)
    assert settings["gcs_address"] == "10.0.0.1:6379" and settings["socket_ifname"] == "ib0"
    assert settings["route_env"] is True and settings["attempts"] == 1 and settings["timeout"] == 30


def test_head_settings_create_the_gcs_folder_and_set_its_environment():
    settings = node_settings("head", {"ray": "/r/ray", "gcs_port": 6379, "dashboard_host": "0.0.0.0",
                                      "dashboard_port": 8265, "gcs_storage_path": "/tmp/ray/gcs", "profiling": True,
                                      "env": {"RAY_AUTH_MODE": "token"}})
    assert settings["makedirs"] == ["/tmp/ray/gcs"]
    assert settings["env"] == dict(head_start_env("/tmp/ray/gcs", True), RAY_AUTH_MODE="token")
    assert settings["argv"] == head_start_argv("/r/ray", 6379, "0.0.0.0", 8265)
    assert "gcs_address" not in settings


@pytest.mark.parametrize("kind, options, named", [
    ("driver", {}, "head or worker"),
    ("worker", {"ray": "/r/ray"}, "gcs_address"),
    ("head", {"ray": "/r/ray", "gcs_port": 1}, "dashboard_host"),
])
def test_settings_refuse_an_unknown_kind_or_a_missing_option_naming_it(kind, options, named):
    with pytest.raises(ValueError, match=named):
        node_settings(kind, options)


def test_ray_reason_skips_the_raylets_state_dump_counters(tmp_path):
    logs = tmp_path / "session_latest" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text("[state-dump] - process_failed_rate_limited: 0\n"
                                     "F1124 raylet.cc:1] Check failed: agent port\n")
    reason = ray_reason("[state-dump] - process_failed_pending_registration: 0\n", str(tmp_path))
    assert "state-dump" not in reason
    assert "raylet.out: F1124 raylet.cc:1] Check failed: agent port" in reason


def test_retry_pause_stays_within_one_delay_above_the_attempt():
    assert retry_pause(2, 5, rand=lambda: 0.0) == 10
    assert retry_pause(2, 5, rand=lambda: 0.999) < 15


def test_start_notes_say_restarts_and_failed_attempts_and_leave_out_the_rest():
    failed = ["attempt 1: Check failed: metrics_agent_port", "attempt 2: RPC error: Deadline Exceeded"]
    results = [["w0", {"reason": "joined", "attempts": 1, "failed_attempts": []}],
               ["w1", {"reason": "joined", "attempts": 3, "failed_attempts": failed}],
               ["w2", {"reason": "its raylet belonged to another head", "attempts": 1, "failed_attempts": []}],
               ["w3", {"skipped": True, "changed": False}]]
    assert start_notes(results, 3) == [
        "w1 joined at attempt 3 of 3; failed before: %s" % "; ".join(failed),
        "w2: its raylet belonged to another head"]
    assert start_notes(results[:1], 3) == []


def test_start_notes_filter_refuses_another_shape():
    with pytest.raises(AnsibleFilterError, match="list of \\[host, result\\] pairs"):
        mvp_ray_start_notes({"w0": {}}, 3)
    with pytest.raises(AnsibleFilterError, match="attempts must be a whole number"):
        mvp_ray_start_notes([], "three")


@pytest.mark.parametrize("address", [":6379", "", None])
def test_a_worker_without_the_heads_address_is_refused_naming_the_variable(address):
    with pytest.raises(ValueError, match="ray_worker_head_ip is empty"):
        check_gcs_address(address)
    options = {"ray": "/r/ray", "gcs_address": address, "temp_dir": "/tmp/ray"}
    with pytest.raises(ValueError, match="run the Ray head play first"):
        node_settings("worker", options)
    check_gcs_address("10.0.0.1:6379")  # a host: no error


def test_ray_start_over_ssh_finds_the_tools_beside_the_ray_cli():
    """py-spy lives beside `ray` in the node's Python: its folder goes first on PATH, once, nothing else is lost."""
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import with_ray_on_path
    env = {"PATH": "/usr/bin:/opt/mvp/venv/bin:/bin", "HOME": "/root"}
    changed = with_ray_on_path(env, "/opt/mvp/venv/bin/ray")
    assert changed["PATH"].split(":") == ["/opt/mvp/venv/bin", "/usr/bin", "/bin"] and changed["HOME"] == "/root"
    assert env["PATH"] == "/usr/bin:/opt/mvp/venv/bin:/bin"  # a copy
    assert with_ray_on_path({}, "/opt/x/bin/ray")["PATH"] == "/opt/x/bin"
    assert with_ray_on_path(env, "ray") == env
