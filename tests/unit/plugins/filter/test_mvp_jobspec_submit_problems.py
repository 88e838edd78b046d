"""mvp_submit_problems: every reason a built job spec cannot be submitted, from the head's look."""
import pytest

from mvp_jobspec import mvp_submit_problems
from request_then_spec import mvp_job_spec


@pytest.fixture
def spec_of(catalog, spec_defaults):
    """Build job-1 of ``workload`` with the shared defaults."""
    def build(workload="selftest", **request):
        return mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), catalog, spec_defaults)
    return build


def healthy(spec, gpus_per_worker=0, workers=2):
    """What the head's look (mvp_submit_check.look, ray_job's check) returns when everything is in place."""
    alive = [{"node_ip": "10.0.0.%d" % (i + 2), "resources_total": {"worker_node": 100, "GPU": gpus_per_worker, "CPU": 96}}
             for i in range(workers)]
    return {"missing": {}, "hydra_errors": [], "job_dir_exists": False, "existing_job": None,
            "summary": {"total_gpus": gpus_per_worker * workers, "alive_workers": alive}}


def test_nothing_in_the_way_gives_no_problem(spec_of):
    spec = spec_of()
    assert mvp_submit_problems(healthy(spec), spec, "worker_node") == []


@pytest.mark.parametrize("name", ["mvp_marker.py", "verl/__init__.py"])
def test_an_incomplete_snapshot_is_named_with_its_path(name, spec_of):
    spec = spec_of()
    check = healthy(spec)
    check["missing"] = {name: spec["code_path"] + "/" + name}
    (problem,) = mvp_submit_problems(check, spec, "worker_node")
    assert problem.startswith("code_path %s is not a code snapshot" % spec["code_path"])
    assert spec["shared_root"] + "/common/code/verl/" in problem


def test_missing_model_reward_and_dataset_each_name_the_path_and_the_fix(spec_of):
    spec = spec_of()
    key, path = sorted(spec["data_files"].items())[0]
    check = healthy(spec)
    check["missing"] = {"model": "/private/common/models/m", "reward_fn_path": "/private/user/code/r.py", key: path}
    problems = mvp_submit_problems(check, spec, "worker_node")
    assert problems[0].startswith("model /private/common/models/m does not exist")
    assert problems[1].startswith("reward_fn_path /private/user/code/r.py does not exist")
    assert problems[2].startswith("dataset file %s (%s) does not exist" % (path, key))


def test_a_taken_id_names_the_directory_and_the_ray_job(spec_of):
    spec = spec_of()
    check = dict(healthy(spec), job_dir_exists=True, existing_job="RUNNING")
    (problem,) = mvp_submit_problems(check, spec, "worker_node")
    assert problem.startswith("submission_id 'job-1' is taken (job directory %s exists; "
                              "Ray has a job with that id, status RUNNING)" % spec["job_dir"])


def test_hydra_errors_are_joined(spec_of):
    spec = spec_of()
    check = dict(healthy(spec), hydra_errors=["a is unknown", "b expects int"])
    (problem,) = mvp_submit_problems(check, spec, "worker_node")
    assert "a is unknown; b expects int. Fix: correct the key or value in trainer_overrides." in problem


def test_gpu_total_then_shape_only_for_gpu_jobs_and_only_when_asked(spec_of):
    spec = spec_of("grpo", model="m")
    nodes, per_node = (spec["trainer_overrides"]["trainer.nnodes"], spec["trainer_overrides"]["trainer.n_gpus_per_node"])
    assert spec["needs_gpus"] and spec["gpus_requested"] == nodes * per_node
    too_few = healthy(spec, gpus_per_worker=0)
    (problem,) = mvp_submit_problems(too_few, spec, "worker_node")
    assert problem.startswith("trainer.nnodes * trainer.n_gpus_per_node = %d GPUs, but Ray reports 0" % (nodes * per_node))
    assert mvp_submit_problems(too_few, spec, "worker_node", check_gpus=False) == []
    # Enough in total, but spread so that no worker holds a node's share: the shape rule speaks.
    spread = healthy(spec, gpus_per_worker=per_node - 1, workers=nodes * per_node)
    (problem,) = mvp_submit_problems(spread, spec, "worker_node")
    assert "can never fit this cluster's ALIVE workers" in problem
    assert "(%d GPUs in all)" % (nodes * per_node) in problem
    assert mvp_submit_problems(healthy(spec, gpus_per_worker=per_node, workers=nodes), spec, "worker_node") == []


def test_no_alive_worker_names_the_resource(spec_of):
    spec = spec_of()
    check = healthy(spec, workers=0)
    (problem,) = mvp_submit_problems(check, spec, "gpu_box")
    assert problem.startswith("No ALIVE node carries 'gpu_box'")


def test_missing_job_tools_name_each_file_and_site_yml(spec_of):
    spec = spec_of()
    check = healthy(spec)
    check["missing"] = {"job_tools/selftest.py": spec["tools_dir"] + "/selftest.py",
                        "job_tools/mvp_entry.py": spec["tools_dir"] + "/mvp_entry.py"}
    (problem,) = mvp_submit_problems(check, spec, "worker_node")
    assert problem.startswith("the job tools mvp_entry.py, selftest.py are missing from %s" % spec["tools_dir"])
    assert "site.yml" in problem


def test_the_tools_folder_follows_the_setting_and_the_request_shared_root(catalog, spec_defaults):
    spec = mvp_job_spec(dict(workload="selftest", submission_id="job-1", shared_root="/other"), catalog,
                        dict(spec_defaults, tools_subdir="opt/tools"))
    assert spec["tools_dir"] == "/other/opt/tools"
    words = spec["entrypoint"].split()
    assert words[2] == "/other/opt/tools/mvp_entry.py" and "/other/opt/tools/selftest.py" in words


def test_a_path_leading_out_through_a_link_and_a_bad_reward_file_are_refused_by_name(spec_of):
    spec = spec_of()
    look = dict(healthy(spec), escaped=[{
        "field": "reward_fn_path", "path": "/private/user/code/r.py", "root": "/private/user/code",
        "resolved": "/etc/r.py", "link": "/private/user/code/r.py", "target": "/etc/r.py"}],
        reward_problem="reward_fn_path /private/user/code/r.py: SyntaxError at line 3. Nothing was written.")
    problems = mvp_submit_problems(look, spec, "worker_node")
    assert len(problems) == 2
    assert problems[0].startswith("reward_fn_path /private/user/code/r.py resolves to /etc/r.py, outside "
                                  "/private/user/code (/private/user/code/r.py is a link to /etc/r.py)")
    assert problems[1] == look["reward_problem"]
