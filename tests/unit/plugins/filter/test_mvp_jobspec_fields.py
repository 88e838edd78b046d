"""Unit tests of the job spec builder's field checks: every request field typed, owned keys refused.

Each bad request must raise before anything is built, with one message naming the
field (``job spec field '<field>'``) and the fix; each good one must pass.
"""
import pytest

from mvp_jobspec import OWNED_ENV, RUNTIME_ENV_REFUSED, owned_overrides
from request_then_spec import mvp_job_spec


@pytest.fixture
def build(catalog, spec_defaults):
    """Build a job spec (an sft job-1 unless the request says otherwise) with ``defaults`` or the shared ones."""
    def build_(defaults=None, **request):
        request.setdefault("submission_id", "job-1")
        request.setdefault("workload", "sft")
        return mvp_job_spec(request, catalog, defaults or spec_defaults)
    return build_


@pytest.fixture
def refused(build):
    """Build, expect a refusal and return its message after checking it names ``field``."""
    def refused_(field, defaults=None, **request):
        with pytest.raises(Exception) as err:
            build(defaults, **request)
        message = str(err.value)
        assert "job spec field '%s'" % field in message, message
        assert "Fix:" in message
        return message
    return refused_


@pytest.fixture
def address(spec_defaults):
    """The cluster's Jobs API address the builder accepts (the defaults')."""
    return spec_defaults["address"]


@pytest.fixture
def worker_resource(spec_defaults):
    """The custom resource that marks worker nodes (the defaults')."""
    return spec_defaults["worker_resource"]


# Stands for the worker resource (the fixture worker_resource) in the parameters below.
WORKER = "<worker resource>"


def _named(value, worker_resource):
    """``value`` with WORKER replaced by the worker resource's name (keys of a mapping, items of a list)."""
    if isinstance(value, dict):
        return {worker_resource if key == WORKER else key: item for key, item in value.items()}
    if isinstance(value, list):
        return [worker_resource if item == WORKER else item for item in value]
    return value


# ---- workload and plain text fields ----

@pytest.mark.parametrize("workload", ["SFT", " sft", ["sft"], {"name": "sft"}, 3])
def test_workload_must_be_a_catalog_name_exactly(workload, catalog, refused):
    message = refused("workload", workload=workload)
    for name in catalog:
        assert name in message


@pytest.mark.parametrize("field, value", [
    ("code_id", "../../etc"), ("code_id", "a/b"), ("code_id", 7), ("code_id", ["v1"]),
    ("dataset", "/etc"), ("dataset", "../secrets"), ("dataset", "gsm8k/../../etc"), ("dataset", {"x": 1}),
    ("model", ["a", "b"]), ("reward_fn_path", {"path": "x"}), ("code_path", 3), ("shared_root", ["/private"]),
    ("resume_from", 12),
])
def test_text_fields_of_the_wrong_type_or_shape_are_refused(field, value, refused):
    refused(field, **{field: value})


def test_a_dataset_in_a_subfolder_is_accepted(catalog, build):
    result = build(dataset="gsm8k_sft/v2")
    names = [path.rsplit("/", 1)[1] for path in catalog["sft"]["data_files"].values()]
    assert sorted(result["data_files"].values()) == sorted("/private/datasets/gsm8k_sft/v2/" + n for n in names)


# ---- the ray block ----

@pytest.mark.parametrize("ray", ["fast", ["address"], 1])
def test_ray_must_be_a_mapping(ray, refused):
    refused("ray", ray=ray)


def test_ray_address_must_be_this_cluster_jobs_api(build, refused, address):
    assert build(ray={"address": address + "/"})["address"] == address
    message = refused("ray.address", ray={"address": "http://10.0.0.9:8265"})
    assert address in message and "mvp_ray_dashboard_port" in message


def test_the_address_comes_from_the_defaults(spec_defaults, build, refused, address):
    other = dict(spec_defaults, address="http://127.0.0.1:18265")
    result = build(other)
    assert result["address"] == other["address"]
    refused("ray.address", other, ray={"address": address})


@pytest.mark.parametrize("resources", [
    {}, {"GPU": 1}, {WORKER: 0}, {WORKER: -1}, {WORKER: "1"}, {WORKER: True},
    {WORKER: 1, "GPU": 0}, {WORKER: float("nan")}, [WORKER], "worker_node",
])
def test_entrypoint_resources_must_be_positive_and_ask_for_a_worker(resources, refused, worker_resource):
    resources = _named(resources, worker_resource)
    refused("ray.entrypoint_resources", ray={"entrypoint_resources": resources})


def test_more_entrypoint_resources_are_kept(build, worker_resource):
    asked = {worker_resource: 1, "GPU": 0.5}
    assert build(ray={"entrypoint_resources": asked})["entrypoint_resources"] == asked


@pytest.mark.parametrize("cpus", [0, -1, "1", True, None, float("inf")])
def test_entrypoint_num_cpus_must_be_positive(cpus, build, refused):
    if cpus is None:  # null means "not given": the default of 1 applies
        assert build(ray={"entrypoint_num_cpus": None})["entrypoint_num_cpus"] == 1
        return
    refused("ray.entrypoint_num_cpus", ray={"entrypoint_num_cpus": cpus})


@pytest.mark.parametrize("key", sorted(RUNTIME_ENV_REFUSED))
def test_runtime_env_keys_that_shadow_the_snapshot_or_the_python_are_refused(key, refused):
    message = refused("ray.runtime_env.%s" % key, ray={"runtime_env": {key: "/etc"}})
    assert RUNTIME_ENV_REFUSED[key] in message


def test_unknown_runtime_env_keys_are_refused_and_known_ones_kept(build, refused):
    refused("ray.runtime_env.workingdir", ray={"runtime_env": {"workingdir": "/etc"}})
    result = build(ray={"runtime_env": {"config": {"setup_timeout_seconds": 60}, "env_vars": {"A": 1}}})
    assert result["runtime_env"]["config"] == {"setup_timeout_seconds": 60}
    assert result["runtime_env"]["env_vars"]["A"] == "1"


# ---- env_vars ----

def _owned_names():
    """One concrete variable per owned name or prefix."""
    return [name[:-1] + "X" if name.endswith("*") else name for name in sorted(OWNED_ENV)]


@pytest.mark.parametrize("name", _owned_names())
@pytest.mark.parametrize("where", ["env_vars", "ray.runtime_env.env_vars"])
def test_env_vars_the_project_owns_are_refused_not_replaced(name, where, refused):
    request = ({"env_vars": {name: "mine"}} if where == "env_vars"
               else {"ray": {"runtime_env": {"env_vars": {name: "mine"}}}})
    refused("%s.%s" % (where, name), **request)


def test_env_vars_the_inventory_sets_follow_the_same_rules(spec_defaults, refused):
    site = dict(spec_defaults, site_overrides={"sft": {"env_vars": {"PYTHONPATH": "/x"}}})
    refused("submit_job_site_overrides.sft.env_vars.PYTHONPATH", site)


@pytest.mark.parametrize("env, field", [
    ("A=1", "env_vars"), ({"1A": "x"}, "env_vars"), ({"A B": "x"}, "env_vars"),
    ({"A": [1, 2]}, "env_vars.A"), ({"A": {"b": 1}}, "env_vars.A"), ({"A": None}, "env_vars.A"),
])
def test_env_vars_must_be_names_with_scalar_values(env, field, refused):
    refused(field, env_vars=env)


def test_scalar_env_values_become_text(build):
    env = build(env_vars={"N": 3, "F": 0.5, "B": True, "S": "x"})["runtime_env"]["env_vars"]
    assert (env["N"], env["F"], env["B"], env["S"]) == ("3", "0.5", "true", "x")


# ---- trainer_overrides ----

@pytest.mark.parametrize("workload", ["sft", "grpo", "ppo"])
def test_trainer_override_keys_the_builder_owns_are_refused_naming_the_field_to_use(workload, catalog, refused):
    owned = owned_overrides(catalog[workload])
    assert "trainer.default_local_dir" in owned
    for key, use in owned.items():
        for given in (key, "+" + key, "++" + key):
            message = refused("trainer_overrides.%s" % given, workload=workload,
                              trainer_overrides={given: "/somewhere"})
            assert use in message


def test_inventory_overrides_follow_the_same_rules(spec_defaults, refused):
    site = dict(spec_defaults, site_overrides={"sft": {"trainer_overrides": {"trainer.default_local_dir": "/x"}}})
    refused("submit_job_site_overrides.sft.trainer_overrides.trainer.default_local_dir", site)


@pytest.mark.parametrize("key", ["", "trainer total_epochs", "=x", 3, "trainer..x", ".x"])
def test_trainer_override_keys_must_be_hydra_keys(key, refused):
    refused("trainer_overrides", trainer_overrides={key: 1})


@pytest.mark.parametrize("value", ["fast", ["a"], 1])
def test_trainer_overrides_must_be_a_mapping(value, refused):
    refused("trainer_overrides", trainer_overrides=value)


def test_a_script_workload_takes_no_trainer_overrides(refused):
    message = refused("trainer_overrides", workload="selftest", trainer_overrides={"trainer.total_epochs": 1})
    assert "selftest" in message


@pytest.mark.parametrize("nodes", ["two", 1.5, [2]])
def test_gpu_shape_must_be_whole_numbers(nodes, refused):
    refused("trainer_overrides.trainer.nnodes", workload="ppo", trainer_overrides={"trainer.nnodes": nodes})


def test_hydra_prefixes_and_package_keys_are_accepted(build):
    result = build(workload="grpo", trainer_overrides={"+actor_rollout_ref.extra": 1, "~trainer.val_before_train": None,
                                                       "++trainer.project_name": "p"})
    assert "+actor_rollout_ref.extra=1" in result["hydra_overrides"]
    assert "++trainer.project_name=p" in result["hydra_overrides"]


# ---- GPU shape against the workers (verl's per-node groups) ----

def _workers(worker_resource, *gpus, cpus=96):
    return [{"node_ip": "10.0.0.%d" % (i + 1), "resources_total": {"GPU": float(g), "CPU": float(cpus),
                                                                     worker_resource: 100.0}}
            for i, g in enumerate(gpus)]


@pytest.mark.parametrize("nnodes, per_node, gpus, fits", [
    (2, 4, (4, 4), True),
    (2, 4, (8, 4, 0), True),
    (2, 4, (8,), True),         # both node groups of the pool fit one 8-GPU worker
    (1, 8, (4, 4), False),      # 8 in total, but no single worker offers 8
    (3, 2, (2, 2), False),      # more groups than workers can hold
    (2, 4, (4, 2, 2), False),   # 8 in total, only one worker with 4
    (2, 2, (), False),
])
def test_gpu_shape_needs_every_node_group_on_one_worker(nnodes, per_node, gpus, fits, build, worker_resource):
    from mvp_refuse import mvp_gpu_shape_problem
    job = build(workload="ppo", trainer_overrides={"trainer.nnodes": nnodes, "trainer.n_gpus_per_node": per_node})
    assert [(p["nodes"], p["gpus_per_node"]) for p in job["shape"]["pools"]] == [(nnodes, per_node)]
    problem = mvp_gpu_shape_problem(job, _workers(worker_resource, *gpus))
    assert (problem == "") == fits
    if not fits:
        assert "%d node%s x %d GPUs" % (nnodes, "s" if nnodes > 1 else "", per_node) in problem
        assert "(%g GPUs in all)" % (nnodes * per_node) in problem
        assert "trainer.nnodes / trainer.n_gpus_per_node" in problem
        for i, g in enumerate(gpus):
            assert "10.0.0.%d: %g GPU, 96 CPU" % (i + 1, g) in problem


def test_gpu_shape_counts_the_cpus_of_verls_bundles(build, worker_resource):
    """verl's PPO bundles ask {CPU: 3, GPU: 1} per process: 8 GPUs on a worker with 16 CPUs cannot hold one group."""
    from mvp_refuse import mvp_gpu_shape_problem
    job = build(workload="ppo", trainer_overrides={"trainer.nnodes": 1, "trainer.n_gpus_per_node": 8})
    assert job["shape"]["pools"][0]["cpus_per_node"] == 8 * 3
    assert mvp_gpu_shape_problem(job, _workers(worker_resource, 8, cpus=16)) != ""
    assert mvp_gpu_shape_problem(job, _workers(worker_resource, 8, cpus=24)) == ""


def test_cpu_device_runs_reserve_logical_gpus_too(build, worker_resource):
    """The selftest reserves nothing; a trainer told trainer.device=cpu still asks for the logical GPUs of its
    bundles (the verl CPU platform names GPU when workers advertise them), unless no worker has any."""
    from mvp_refuse import mvp_gpu_shape_problem
    assert mvp_gpu_shape_problem(build(workload="selftest"), []) == ""
    assert build(workload="selftest")["shape"]["pools"] == []
    assert mvp_gpu_shape_problem(build(workload="sft"), []) != ""
    cpu = build(workload="sft", trainer_overrides={"trainer.device": "cpu", "trainer.nnodes": 8,
                                                   "trainer.n_gpus_per_node": 1})
    problem = mvp_gpu_shape_problem(cpu, _workers(worker_resource, 1, 1, cpus=16))
    assert "8 nodes x 1 GPU (10 CPUs each)" in problem and "(8 GPUs in all)" in problem
    assert mvp_gpu_shape_problem(cpu, _workers(worker_resource, 0, 0, cpus=16)) == ""


def test_job_inputs_named_mvp_star_that_the_project_does_not_set_pass(build):
    """The selftest's own inputs (MVP_SELFTEST_*) are job settings, not the project's."""
    env = build(workload="selftest", env_vars={"MVP_SELFTEST_HOLD_SECONDS": "600",
                                               "MVP_SELFTEST_REQUIRE_TOKEN": 1})["runtime_env"]["env_vars"]
    assert (env["MVP_SELFTEST_HOLD_SECONDS"], env["MVP_SELFTEST_REQUIRE_TOKEN"]) == ("600", "1")
