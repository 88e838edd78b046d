"""Issue 40: the resource pools verl's own code builds on the head, against the ALIVE workers (mvp_submit_problems).

The pools (``verl_check.resource_pools``) come from the snapshot's ``PPOTrainer._init_resource_pool_mgr`` or
the SFT trainer's ``RayResourcePool`` (plugins/module_utils/request/test_mvp_verl_rules.py builds them with verl when
MVP_TEST_VERL_PYTHON names a Python with torch); here the rule that compares them with the workers.
"""
import json

import pytest

from mvp_jobspec import mvp_submit_problems
from request_then_spec import mvp_job_spec
from test_mvp_jobspec_submit_problems import healthy


@pytest.fixture
def gpu_spec(catalog, spec_defaults):
    """grpo on GPUs: 1 node of 1 GPU in the job's own shape (what the builder and mvp_queue see)."""
    return mvp_job_spec(dict(workload="grpo", submission_id="job-1",
                             trainer_overrides={"trainer.device": "cuda", "trainer.nnodes": 1,
                                                "trainer.n_gpus_per_node": 1}), catalog, spec_defaults)


def with_pools(check, pools):
    return dict(check, verl_check={"resource_pools": pools, "skipped": None})


def test_pools_the_workers_hold_give_no_problem(gpu_spec):
    check = with_pools(healthy(gpu_spec, gpus_per_worker=2), {"global_pool": [2], "reward_pool": [2]})
    assert mvp_submit_problems(check, gpu_spec, "worker_node") == []


def test_more_gpus_than_the_workers_have_is_verls_own_message(gpu_spec):
    # verl's pools ask for 2 x 2 + 1 GPUs (a reward pool the job's own shape does not know); the workers have 2 x 2
    pools = {"global_pool": [2, 2], "reward_pool": [1]}
    (problem,) = mvp_submit_problems(with_pools(healthy(gpu_spec, gpus_per_worker=2), pools), gpu_spec,
                                     "worker_node")
    wanted = sum(sum(nodes) for nodes in pools.values())
    assert ("Total available GPUs %g is less than total desired GPUs %d" % (2 * 2, wanted)) in problem
    assert '"reward_pool": [1]' in problem and "trainer.nnodes / trainer.n_gpus_per_node" in problem


def test_an_entry_no_single_worker_holds_is_refused(gpu_spec):
    # 4 GPUs in all, but one STRICT_PACK entry of 4 and workers of 2 each
    (problem,) = mvp_submit_problems(with_pools(healthy(gpu_spec, gpus_per_worker=2), {"global_pool": [4]}),
                                     gpu_spec, "worker_node")
    assert "can never be placed" in problem and "10.0.0.2: 2 GPU" in problem


def test_cpu_runs_on_workers_without_gpus_and_check_gpus_false_are_not_compared(spec_defaults, catalog, gpu_spec):
    cpu = mvp_job_spec(dict(workload="grpo", submission_id="job-1", trainer_overrides={"trainer.device": "cpu"}),
                       catalog, spec_defaults)
    check = with_pools(healthy(cpu, gpus_per_worker=0), {"global_pool": [8, 8, 8]})
    assert mvp_submit_problems(check, cpu, "worker_node") == []
    check = with_pools(healthy(gpu_spec, gpus_per_worker=2), {"global_pool": [4]})
    assert mvp_submit_problems(check, gpu_spec, "worker_node", check_gpus=False) == []


def test_no_pools_from_verl_no_problem(gpu_spec):
    # a head without torch: verl_check skipped, no pools
    check = dict(healthy(gpu_spec, gpus_per_worker=2), verl_check={"skipped": "torch cannot be imported"})
    assert mvp_submit_problems(check, gpu_spec, "worker_node") == []


# Issue 51: the placement groups the snapshot's own code asks Ray for (``verl_check.placement_requests``, recorded
# from verl's RayResourcePool.get_placement_groups on the head), compared whole with the ALIVE nodes' offers.
def with_requests(check, requests, offers=None):
    """``check`` with recorded placement groups and the nodes' offers (default: the healthy look's workers and an
    empty head)."""
    if offers is None:
        offers = {w["node_ip"]: dict(w["resources_total"]) for w in check["summary"]["alive_workers"]}
        offers["10.0.0.1"] = {}
    return dict(check, verl_check={"resource_pools": {"sft": [1] * len(requests)}, "skipped": None,
                                   "placement_requests": requests}, offers=offers)


def request(bundle, count=1, pool="sft"):
    return {"pool": pool, "strategy": "STRICT_PACK", "name": "", "bundles": [dict(bundle) for _ in range(count)]}


def test_a_resource_no_node_offers_is_refused_naming_it_the_amount_and_the_offers(spec_defaults, catalog):
    # verl 0.8.0 on a CPU platform: bundles name the device 'cpu' as a Ray resource, which no node has
    sft = mvp_job_spec(dict(workload="sft", submission_id="job-1", trainer_overrides={
        "trainer.device": "cpu", "trainer.nnodes": 2, "trainer.n_gpus_per_node": 1}), catalog, spec_defaults)
    asked = {"CPU": 3.0, "cpu": 1.0}
    check = with_requests(healthy(sft, gpus_per_worker=1), [request(asked)] * 2)
    (problem,) = mvp_submit_problems(check, sft, "worker_node")
    assert problem.startswith("the snapshot's own code asks Ray for resource 'cpu' (per bundle: cpu %g;" % asked["cpu"])
    assert "no ALIVE node offers" in problem and "10.0.0.2: {" in problem and "10.0.0.1: {}" in problem
    assert "add nodes that offer 'cpu'" in problem
    # a resource nobody offers is refused even when the shape check is turned off: no node could ever run it
    assert mvp_submit_problems(check, sft, "worker_node", check_gpus=False) == [problem]


def test_a_group_no_node_holds_is_refused_with_the_rule_of_the_placement_deadline(gpu_spec):
    # two bundles of 1 GPU and 10 CPUs on one node (STRICT_PACK); each worker offers 1 GPU
    check = with_requests(healthy(gpu_spec, gpus_per_worker=1), [request({"CPU": 10.0, "GPU": 1.0}, count=2)])
    check["verl_check"]["resource_pools"] = {}  # the pools alone would not tell (the rule of issue 40 is silent)
    (problem,) = mvp_submit_problems(check, gpu_spec, "worker_node")
    needed = {"CPU": 2 * 10.0, "GPU": 2 * 1.0}
    assert "can never be placed: STRICT_PACK needs %s on one node" % json.dumps(needed, sort_keys=True) in problem
    assert mvp_submit_problems(check, gpu_spec, "worker_node", check_gpus=False) == []


def test_groups_the_nodes_hold_give_no_problem(gpu_spec):
    check = with_requests(healthy(gpu_spec, gpus_per_worker=2), [request({"CPU": 3.0, "GPU": 1.0}, count=2)] * 2)
    assert mvp_submit_problems(check, gpu_spec, "worker_node") == []
    # no recorded groups (a head without torch, or a snapshot whose code could not be followed): nothing compared
    assert mvp_submit_problems(dict(check, verl_check={"skipped": "torch cannot be imported"}), gpu_spec,
                               "worker_node") == []
