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
