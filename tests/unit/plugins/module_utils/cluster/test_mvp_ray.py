"""Unit tests of the pure parts of the Ray modules (no cluster needed)."""
import pytest

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    auth_headers, node_ip_for, node_to_dict, pending_message, status_name, summarize, request_headers)

NODES = [
    node_to_dict({"node_id": "h", "node_ip": "10.0.0.1", "is_head_node": True, "state": "ALIVE",
                  "resources_total": {"memory": 1.0, "node:__internal_head__": 1.0}}),
    node_to_dict({"node_id": "w0", "node_ip": "10.0.0.2", "is_head_node": False, "state": "ALIVE",
                  "resources_total": {"CPU": 2.0, "GPU": 4.0, "worker_node": 100.0}}),
    node_to_dict({"node_id": "w1", "node_ip": "10.0.0.3", "is_head_node": False, "state": "DEAD",
                  "resources_total": {"CPU": 2.0, "GPU": 4.0, "worker_node": 100.0}}),
]


def test_summary_counts_alive_workers_and_gpus_only():
    summary = summarize(NODES, "worker_node")
    assert summary["head"]["node_ip"] == "10.0.0.1"
    assert summary["worker_ips"] == ["10.0.0.2"]
    assert summary["total_gpus"] == 4.0


def test_driver_node_id_maps_to_ip():
    assert node_ip_for(NODES, "w0") == "10.0.0.2"
    assert node_ip_for(NODES, "missing") is None
    assert node_ip_for(NODES, None) is None


def test_status_strings_from_enum_or_plain():
    assert status_name("JobStatus.RUNNING") == "RUNNING"
    assert status_name("PENDING") == "PENDING"


def test_pending_message_names_the_missing_resource():
    job = {"submission_id": "j1", "entrypoint_resources": {"gpu_node": 1}, "entrypoint_num_cpus": 1}
    msg = pending_message(job, 30, NODES, "The job was stopped.")
    assert "j1" in msg and '{"gpu_node": 1}' in msg and '"worker_node": 100.0' in msg and "after 30s" in msg
    assert "node:__internal_head__" not in msg
    assert msg.endswith("The job was stopped.")
    unknown = pending_message({"submission_id": "j2"}, 30, NODES, "Left as it is.")
    assert "what its driver asks for" in unknown and '"worker_node": 100.0' in unknown


def test_a_given_token_wins_over_rays_own_lookup():
    environ = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "from-env"}
    assert request_headers("t0k", environ) == {"Authorization": "Bearer t0k"}
    assert environ == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "from-env"}  # nothing written


def test_without_a_token_rays_lookup_order_applies_only_in_token_mode(tmp_path):
    token_file = tmp_path / "mvp_auth_token"
    token_file.write_text("from-file\n")
    assert request_headers(None, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "from-env",
                                  "RAY_AUTH_TOKEN_PATH": str(token_file)}) == {"Authorization": "Bearer from-env"}
    assert request_headers(None, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token_file)}) == {
        "Authorization": "Bearer %s" % token_file.read_text().strip()}
    # Not in token mode: Ray sends nothing, whatever the variables say.
    assert request_headers(None, {"RAY_AUTH_TOKEN": "from-env", "RAY_AUTH_TOKEN_PATH": str(token_file)}) == {}


def test_an_unreadable_token_file_gives_no_header(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token either
    environ = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(tmp_path / "absent")}
    assert request_headers(None, environ) == {}


def test_placement_maps_the_driver_node_and_lists_the_alive_workers():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import placement

    class State(object):  # stands in for ray.util.state: pure logic under test
        @staticmethod
        def list_nodes(address, limit=None, timeout=None, raise_on_missing_output=None, detail=None):
            return NODES

    job = {"submission_id": "j1", "status": "JobStatus.RUNNING", "driver_node_id": "w0"}
    where = placement(State, "http://h:8265", job, "worker_node")
    assert where == {"submission_id": "j1", "status": "RUNNING", "driver_node_id": "w0",
                     "driver_node_ip": NODES[1]["node_ip"], "head_node_ip": NODES[0]["node_ip"],
                     "worker_ips": [n["node_ip"] for n in NODES if n["state"] == "ALIVE" and not n["is_head_node"]]}
    assert job["driver_node_ip"] == NODES[1]["node_ip"]
    assert placement(State, "http://h:8265", {"submission_id": "j2", "driver_node_id": None}, "worker_node") is None


def test_auth_header_only_with_a_token():
    assert auth_headers(None) == {}
    assert auth_headers("t0k") == {"Authorization": "Bearer t0k"}


def test_job_info_or_none_maps_an_unknown_id_to_none_and_raises_other_errors():
    import pytest

    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import job_info_or_none

    class Client(object):
        def __init__(self, error=None):
            self.error = error

        def get_job_info(self, submission_id):
            if self.error:
                raise self.error
            return {"submission_id": submission_id}

    assert job_info_or_none(Client(), "a") == {"submission_id": "a"}
    assert job_info_or_none(Client(RuntimeError("Job a does not exist")), "a") is None
    assert job_info_or_none(Client(RuntimeError("Request failed with status code 404")), "a") is None
    with pytest.raises(RuntimeError):
        job_info_or_none(Client(RuntimeError("Request failed with status code 500")), "a")


def _group(pg_id, job, created_s=None, bundles=None, state="PENDING", strategy="STRICT_PACK",
           scheduling_state="INFEASIBLE"):
    stats = {"scheduling_state": scheduling_state} if scheduling_state else {}
    if created_s is not None:
        stats["creation_request_received_ns"] = int(created_s * 1e9)
    return {"placement_group_id": pg_id, "name": "pool_%s" % pg_id, "creator_job_id": job, "state": state,
            "bundles": bundles or [{"unit_resources": {"CPU": 10.0, "GPU": 1.0}}], "strategy": strategy,
            "stats": stats}


# Two ALIVE workers (16 CPU, 1 GPU each, as the local inventory starts them), a head without
# CPUs and a DEAD worker whose resources no longer count.
PG_NODES = [{"node_ip": "10.0.0.1", "state": "ALIVE", "resources_total": {"CPU": 0.0, "node:10.0.0.1": 1.0}},
         {"node_ip": "10.0.0.2", "state": "ALIVE", "resources_total": {"CPU": 16.0, "GPU": 1.0, "memory": 9.0}},
         {"node_ip": "10.0.0.3", "state": "ALIVE", "resources_total": {"CPU": 16.0, "GPU": 1.0}},
         {"node_ip": "10.0.0.4", "state": "DEAD", "resources_total": {"CPU": 64.0, "GPU": 8.0}}]


@pytest.mark.parametrize("strategy,bundles,fits", [
    # one {"CPU": 10, "GPU": 1} per worker: both fit, side by side or packed where possible
    ("PACK", [{"CPU": 10.0, "GPU": 1.0}] * 2, True),
    ("STRICT_SPREAD", [{"CPU": 10.0, "GPU": 1.0}] * 2, True),
    # two GPUs on one node: no ALIVE node has two (the DEAD one does not count)
    ("STRICT_PACK", [{"CPU": 10.0, "GPU": 1.0}] * 2, False),
    # three GPU bundles on a cluster of two GPUs, however spread
    ("PACK", [{"CPU": 1.0, "GPU": 1.0}] * 3, False),
    ("STRICT_SPREAD", [{"CPU": 1.0}] * 3, False),
    # one bundle bigger than every node
    ("SPREAD", [{"CPU": 17.0}], False),
    ("PACK", [{"TPU": 1.0}], False),
])
def test_never_fits_reason_judges_the_shape_against_the_alive_nodes_totals(strategy, bundles, fits):
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import is_infeasible, never_fits_reason

    group = _group("g", "01", bundles=[{"unit_resources": b} for b in bundles], strategy=strategy,
                   scheduling_state=None)
    reason = never_fits_reason(group, PG_NODES)
    assert (reason is None) is fits, reason
    assert is_infeasible(group, PG_NODES) is (not fits)


def test_rays_scheduling_state_decides_before_the_shape():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import is_infeasible

    small = [{"unit_resources": {"CPU": 1.0}}]
    huge = [{"unit_resources": {"GPU": 99.0}}]
    assert is_infeasible(_group("a", "01", bundles=small, scheduling_state="INFEASIBLE"), PG_NODES) is True
    assert is_infeasible(_group("b", "01", bundles=huge, scheduling_state="NO_RESOURCES"), PG_NODES) is False
    assert is_infeasible(_group("c", "01", bundles=huge, scheduling_state="QUEUED"), PG_NODES) is True
    assert is_infeasible(_group("d", "01", bundles=small, scheduling_state="SCHEDULING_STARTED"), PG_NODES) is False


def test_resource_holders_name_other_jobs_placed_groups_by_submission_id():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import resource_holders, waiting_message

    unit = {"CPU": 10.0, "GPU": 1.0}
    groups = [_group("mine-placed", "03", state="CREATED"), _group("mine", "03", scheduling_state="NO_RESOURCES"),
              _group("a1", "01", state="CREATED", bundles=[{"unit_resources": unit}]),
              _group("a2", "01", state="CREATED", bundles=[{"unit_resources": {"CPU": 1.0}}]),
              _group("gone", "02", state="REMOVED"), _group("anon", "0a", state="CREATED")]
    jobs = [{"submission_id": "grpo-a", "job_id": "01", "status": "RUNNING"},
            {"submission_id": "grpo-b", "job_id": "02", "status": "SUCCEEDED"}]
    holders = resource_holders(groups, jobs, "03")
    assert holders == [
        {"submission_id": "grpo-a", "job_id": "01", "status": "RUNNING",
         "holds": ['1 x {"CPU": 10.0, "GPU": 1.0} (STRICT_PACK)', '1 x {"CPU": 1.0} (STRICT_PACK)']},
        {"submission_id": None, "job_id": "0a", "status": None,
         "holds": ['1 x {"CPU": 10.0, "GPU": 1.0} (STRICT_PACK)']}]
    msg = waiting_message("grpo-c", [(groups[1], 42.0)], holders)
    assert msg.startswith("Ray job grpo-c is waiting")
    assert "pool_mine for 42 s for 1 x" in msg and "Ray says NO_RESOURCES" in msg
    assert "grpo-a (RUNNING, holds" in msg and "Ray job 0a" in msg
    assert "no other job" in waiting_message("grpo-c", [(groups[1], 1.0)], [])


def test_bundle_shapes_count_identical_bundles_and_name_the_strategy():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import bundle_shapes

    group = _group("a", "01", bundles=[{"unit_resources": {"GPU": 1.0, "CPU": 10.0}}] * 4
                   + [{"unit_resources": {"CPU": 1.0}}])
    assert bundle_shapes(group) == '4 x {"CPU": 10.0, "GPU": 1.0}, 1 x {"CPU": 1.0} (STRICT_PACK)'


def test_only_this_jobs_groups_pending_past_the_deadline_are_stalled():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import stalled_placement_groups

    now = 1000.0
    groups = [_group("old", "01", created_s=now - 200), _group("young", "01", created_s=now - 10),
              _group("other-job", "02", created_s=now - 500), _group("placed", "01", created_s=now - 900,
                                                                     state="CREATED")]
    stalled = stalled_placement_groups(groups, "01", now, 120, PG_NODES)
    assert [(g["placement_group_id"], round(age)) for g, age in stalled] == [("old", 200)]
    assert stalled_placement_groups(groups, None, now, 120, PG_NODES) == []
    # The same old group, waiting for resources in use (Ray: NO_RESOURCES): never stalled.
    busy = [dict(groups[0], stats=dict(groups[0]["stats"], scheduling_state="NO_RESOURCES"))]
    assert stalled_placement_groups(busy, "01", now, 120, PG_NODES) == []


def test_groups_without_a_creation_time_age_from_first_sight():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import stalled_placement_groups

    seen = {}
    group = _group("x", "01")
    assert stalled_placement_groups([group], "01", 100.0, 30, PG_NODES, seen) == []
    assert seen == {"x": 100.0}
    assert stalled_placement_groups([group], "01", 120.0, 30, PG_NODES, seen) == []
    assert [round(a) for _, a in stalled_placement_groups([group], "01", 131.0, 30, PG_NODES, seen)] == [31]


def test_stalled_message_names_shape_scheduling_state_and_offers():
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import stalled_message

    nodes = [{"node_ip": "10.0.0.2", "state": "ALIVE", "resources_total": {"CPU": 8.0, "worker_node": 100.0,
                                                                          "node:10.0.0.2": 1.0, "memory": 5.0}},
             {"node_ip": "10.0.0.9", "state": "DEAD", "resources_total": {"CPU": 8.0}}]
    msg = stalled_message("sft-1", [(_group("a", "01"), 181.0)], nodes, 180)
    assert "sft-1" in msg and "180 s" in msg and "181 s" in msg
    assert '1 x {"CPU": 10.0, "GPU": 1.0} (STRICT_PACK)' in msg and "INFEASIBLE" in msg
    assert '10.0.0.2 {"CPU": 8.0, "worker_node": 100.0}' in msg and "10.0.0.9" not in msg
    assert "trainer.n_gpus_per_node" in msg
