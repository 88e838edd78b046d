"""ray_job_info against a fake of Ray's dashboard (Jobs REST API, State API): it reads a job's status and placement,
waits for a terminal status, and fails with ``stalled: true`` (leaving the job as it is) when the job
stays PENDING or one of its placement groups does past the deadline. It writes nothing: saving the
job's record is ray_job_record (test_ray_job_record.py).
"""
import json

import pytest

from ansible_collections.mvp.ray.plugins.modules.ray_job_info import main

ADDRESS = "http://127.0.0.1:8265"


def args(**options):
    return dict({"address": ADDRESS, "submission_id": "job-1"}, **options)


def alive_worker_ips(nodes):
    return sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE" and n["resources_total"].get("worker_node"))


# ---- reading ----

def test_reads_the_status_and_where_the_driver_runs(fake_ray, clock, run_module, cluster_nodes):
    driver, head = cluster_nodes[1], cluster_nodes[0]
    fake_ray.add_job("job-1", "RUNNING", driver_node_id=driver["node_id"], job_id="02000000")

    result = run_module(main, args(auth_token="s3cret"))

    assert result["changed"] is False
    assert result["job"]["status"] == "RUNNING" and result["job"]["driver_node_ip"] == driver["node_ip"]
    assert result["placement"] == {"submission_id": "job-1", "status": "RUNNING", "driver_node_id": driver["node_id"],
                                   "driver_node_ip": driver["node_ip"], "head_node_ip": head["node_ip"],
                                   "worker_ips": alive_worker_ips(cluster_nodes)}
    assert fake_ray.clients and {auth for _path, auth in fake_ray.clients} == {"Bearer s3cret"}
    assert fake_ray.calls == []  # reading changes nothing


def test_a_job_without_a_driver_node_has_no_placement(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "PENDING")

    result = run_module(main, args())

    assert result["job"]["status"] == "PENDING" and "placement" not in result


def test_an_unknown_id_is_no_job(fake_ray, clock, run_module):
    result = run_module(main, args(wait="terminal"))

    assert result == dict(result, changed=False, job=None) and "placement" not in result


# ---- waiting ----

def test_waits_until_the_job_is_terminal(fake_ray, clock, run_module, cluster_nodes):
    driver = cluster_nodes[2]
    fake_ray.add_job("job-1", "PENDING")
    reads = ["PENDING", {"status": "RUNNING", "driver_node_id": driver["node_id"]}, "RUNNING",
             {"status": "SUCCEEDED", "driver_exit_code": 0}]
    fake_ray.then("job-1", *reads)
    options = args(wait="terminal", poll_interval=3)

    result = run_module(main, options)

    assert result["job"]["status"] == "SUCCEEDED" and result["job"]["driver_exit_code"] == 0
    assert result["placement"]["driver_node_ip"] == driver["node_ip"]
    # the first read, then one per poll until SUCCEEDED
    assert fake_ray.info_reads == len(reads) and clock.elapsed == (len(reads) - 1) * options["poll_interval"]
    assert fake_ray.calls == []


def test_pending_past_the_deadline_fails_as_stalled_and_leaves_the_job(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "PENDING")
    options = args(wait="terminal", pending_timeout=20, poll_interval=5)

    result = run_module(main, options)

    assert result["failed"] and result["stalled"] is True
    assert "Ray job job-1 still PENDING after %ss" % options["pending_timeout"] in result["msg"]
    assert "It was left as it is" in result["msg"]
    assert options["pending_timeout"] < clock.elapsed <= options["pending_timeout"] + options["poll_interval"]
    assert fake_ray.calls == [] and fake_ray.status_of("job-1") == "PENDING"  # never stopped


def test_running_past_running_timeout_fails_and_leaves_the_job(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")
    options = args(wait="terminal", running_timeout=60, poll_interval=10)

    result = run_module(main, options)

    assert result["failed"] and "stalled" not in result
    assert result["msg"].startswith("Ray job job-1 still RUNNING after running_timeout=%ss" % options["running_timeout"])
    assert clock.elapsed > options["running_timeout"] and fake_ray.calls == []


@pytest.mark.parametrize("wait", ["none", "terminal"])
def test_a_placement_group_pending_past_its_deadline_fails_as_stalled(fake_ray, clock, run_module, cluster_nodes, wait):
    fake_ray.add_job("job-1", "RUNNING", job_id="02000000", driver_node_id=cluster_nodes[1]["node_id"])
    unit, count, strategy, waited = {"GPU": 1, "CPU": 10}, 2, "STRICT_PACK", 700
    created_ns = int((clock.now - waited) * 1e9)
    ours = {"placement_group_id": "pg-ours", "name": "actor_rollout", "creator_job_id": "02000000", "state": "PENDING",
            "bundles": [{"bundle_id": i, "node_id": None, "unit_resources": unit} for i in range(count)],
            "strategy": strategy, "stats": {"creation_request_received_ns": created_ns,
                                            "scheduling_state": "INFEASIBLE"}}
    other_job = dict(ours, placement_group_id="pg-other", name="other", creator_job_id="03000000")
    placed = dict(ours, placement_group_id="pg-placed", name="placed", state="CREATED")
    fake_ray.placement_groups = [other_job, ours, placed]
    options = args(wait=wait, pg_pending_timeout=600)

    result = run_module(main, options)

    assert result["failed"] and result["stalled"] is True
    shape = "%d x %s (%s)" % (count, json.dumps(unit, sort_keys=True), strategy)
    assert result["stalled_placement_groups"] == [{"name": "actor_rollout", "placement_group_id": "pg-ours",
                                                   "shape": shape, "waited_s": float(waited),
                                                   "scheduling_state": "INFEASIBLE"}]
    assert "actor_rollout waited %d s for %s" % (waited, shape) in result["msg"]
    assert "longer than %d s" % options["pg_pending_timeout"] in result["msg"]
    assert fake_ray.calls == []


def test_young_placement_groups_and_a_pg_deadline_of_zero_pass(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING", job_id="02000000")
    fake_ray.placement_groups = [{"placement_group_id": "pg", "name": "pg", "creator_job_id": "02000000",
                                  "state": "PENDING", "bundles": [], "strategy": "PACK",
                                  "stats": {"creation_request_received_ns": int((clock.now - 100) * 1e9),
                                            "scheduling_state": "INFEASIBLE"}}]

    assert not run_module(main, args(pg_pending_timeout=600)).get("failed")
    assert not run_module(main, args(pg_pending_timeout=0)).get("failed")
    fake_ray.placement_groups[0]["stats"]["creation_request_received_ns"] = int((clock.now - 10000) * 1e9)
    assert not run_module(main, args(pg_pending_timeout=0)).get("failed")
    assert run_module(main, args(pg_pending_timeout=600))["stalled"] is True


def test_a_group_waiting_for_a_busy_cluster_is_reported_never_stalled(fake_ray, clock, run_module, cluster_nodes):
    # wrk2 offers 2 GPUs; job-0 holds both, job-1 asks for one: it fits, it waits (Ray: NO_RESOURCES).
    fake_ray.add_job("job-0", "RUNNING", job_id="01000000")
    fake_ray.add_job("job-1", "RUNNING", job_id="02000000")
    unit, waited, timeout = {"CPU": 2, "GPU": 1}, 5000, 600
    held = {"placement_group_id": "pg-0", "name": "held", "creator_job_id": "01000000", "state": "CREATED",
            "bundles": [{"bundle_id": 0, "node_id": "wrk2", "unit_resources": {"CPU": 2, "GPU": 2}}],
            "strategy": "PACK", "stats": {"scheduling_state": "FINISHED"}}
    ours = {"placement_group_id": "pg-1", "name": "actor_rollout", "creator_job_id": "02000000",
            "state": "PENDING", "bundles": [{"bundle_id": 0, "node_id": None, "unit_resources": unit}],
            "strategy": "PACK", "stats": {"creation_request_received_ns": int((clock.now - waited) * 1e9),
                                          "scheduling_state": "NO_RESOURCES"}}
    fake_ray.placement_groups = [held, ours]

    result = run_module(main, args(pg_pending_timeout=timeout))

    assert not result.get("failed") and waited > timeout
    shape = "1 x %s (PACK)" % json.dumps(unit, sort_keys=True)
    assert result["waiting_placement_groups"] == [{
        "name": "actor_rollout", "placement_group_id": "pg-1", "shape": shape, "waited_s": float(waited),
        "scheduling_state": "NO_RESOURCES",
        "waits_for": [{"submission_id": "job-0", "job_id": "01000000", "status": "RUNNING",
                       "holds": ['1 x {"CPU": 2, "GPU": 2} (PACK)']}]}]
    assert "job-1 is waiting" in result["waiting_msg"] and "job-0 (RUNNING" in result["waiting_msg"]
    assert fake_ray.calls == []

    # The same wait while waiting for the end: the job ends SUCCEEDED, never stalled.
    fake_ray.then("job-1", "RUNNING", "RUNNING", "SUCCEEDED")
    result = run_module(main, args(pg_pending_timeout=timeout, wait="terminal", pg_check_interval=0.0))
    assert not result.get("failed") and result["job"]["status"] == "SUCCEEDED"


def test_a_shape_bigger_than_every_node_stalls_without_a_scheduling_state(fake_ray, clock, run_module, cluster_nodes):
    # No node offers 3 GPUs (wrk2 has 2): infeasible from the nodes' totals alone.
    fake_ray.add_job("job-1", "RUNNING", job_id="02000000")
    gpus = max(n["resources_total"].get("GPU", 0) for n in cluster_nodes) + 1
    fake_ray.placement_groups = [{
        "placement_group_id": "pg-1", "name": "big", "creator_job_id": "02000000", "state": "PENDING",
        "bundles": [{"bundle_id": 0, "unit_resources": {"GPU": gpus}}], "strategy": "PACK",
        "stats": {"creation_request_received_ns": int((clock.now - 700) * 1e9)}}]

    result = run_module(main, args(pg_pending_timeout=600))

    assert result["stalled"] is True and result["waiting_placement_groups"] == []
    assert result["stalled_placement_groups"][0]["scheduling_state"] is None
