"""Issue 40: the resource pools verl's own code builds on the head, against the ALIVE workers (mvp_submit_problems).

The pools (``verl_check.resource_pools``) come from the snapshot's ``PPOTrainer._init_resource_pool_mgr`` or
the SFT trainer's ``RayResourcePool`` (plugins/module_utils/test_mvp_verl_rules.py builds them with verl when
MVP_TEST_VERL_PYTHON names a Python with torch); here the rule that compares them with the workers.
"""
import pytest

from mvp_jobspec import mvp_job_spec, mvp_submit_problems
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
