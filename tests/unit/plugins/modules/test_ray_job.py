"""ray_job against a fake of Ray's dashboard (Jobs REST API, State API): submit (placed, PENDING deadline, an existing id),
stop (waits for a terminal status), delete, check mode, an unreachable Jobs API.

Each test describes the cluster (``fake_ray``: nodes, jobs and how their status moves on) and runs
the module's main() with its options; the expected values come from that description.
"""
import json
import time

import pytest

from ansible_collections.mvp.ray.plugins.modules.ray_job import main

ADDRESS = "http://127.0.0.1:8265"


def args(**options):
    return dict({"address": ADDRESS, "submission_id": "job-1"}, **options)


def alive_worker_ips(nodes):
    return sorted(n["node_ip"] for n in nodes if n["state"] == "ALIVE" and n["resources_total"].get("worker_node"))


def offered(nodes):
    """What the ALIVE nodes offer jobs in total: their resources without node:<ip>, memory and object store."""
    total = {}
    for n in nodes:
        if n["state"] == "ALIVE":
            for key, value in n["resources_total"].items():
                if not key.startswith("node:") and key not in ("memory", "object_store_memory"):
                    total[key] = total.get(key, 0) + value
    return total


# ---- submit ----

def test_submit_waits_until_placed_and_saves_the_placement(fake_ray, clock, run_module, cluster_nodes, tmp_path):
    driver = cluster_nodes[2]
    head = cluster_nodes[0]
    fake_ray.then("job-1", "PENDING", "PENDING", {"status": "RUNNING", "driver_node_id": driver["node_id"]})
    dest = tmp_path / "debug" / "placement.json"
    options = args(entrypoint="python -u /private/common/code/mvp_tools/selftest.py",
                   runtime_env={"env_vars": {"PYTHONPATH": "/private/common/code/verl/verl-0.9.1:${PYTHONPATH}"}},
                   entrypoint_resources={"worker_node": 1}, entrypoint_num_cpus=1, metadata={"workload": "selftest"},
                   wait="placed", poll_interval=2, placement_dest=str(dest), auth_token="s3cret")

    result = run_module(main, options)

    (asked,) = fake_ray.called("submit_job")
    for key in ("entrypoint", "submission_id", "runtime_env", "metadata", "entrypoint_resources"):
        assert asked[key] == options[key]
    assert asked["entrypoint_num_cpus"] == float(options["entrypoint_num_cpus"])
    assert fake_ray.clients and {auth for _path, auth in fake_ray.clients} == {"Bearer s3cret"}
    assert result["changed"] is True and result["existed"] is False
    assert result["job"]["status"] == "RUNNING" and result["job"]["driver_node_ip"] == driver["node_ip"]
    expected = {"submission_id": "job-1", "status": "RUNNING", "driver_node_id": driver["node_id"],
                "driver_node_ip": driver["node_ip"], "head_node_ip": head["node_ip"],
                "worker_ips": alive_worker_ips(cluster_nodes)}
    assert result["placement"] == expected
    assert result["placement_dest"] == str(dest) and json.loads(dest.read_text()) == expected
    assert not fake_ray.called("stop_job")


def test_pending_past_the_deadline_is_stopped_and_the_failure_names_the_shape(
        fake_ray, clock, run_module, cluster_nodes):
    resources = {"worker_node": 1, "gpu_node": 1}
    options = args(entrypoint="python -u job.py", entrypoint_resources=resources, entrypoint_num_cpus=1,
                   wait="placed", pending_timeout=30, poll_interval=5)

    result = run_module(main, options)

    assert result["failed"] and result["changed"] is True
    assert fake_ray.called("stop_job") == ["job-1"]
    # the first poll past the deadline stops it
    assert options["pending_timeout"] < clock.elapsed <= options["pending_timeout"] + options["poll_interval"]
    message = result["msg"]
    assert "Ray job job-1 still PENDING after %ss" % options["pending_timeout"] in message
    assert "no ALIVE node offers entrypoint_resources=%s with entrypoint_num_cpus=%s" % (
        json.dumps(resources, sort_keys=True), float(options["entrypoint_num_cpus"])) in message
    assert "(ALIVE nodes offer %s)" % json.dumps(offered(cluster_nodes), sort_keys=True) in message
    assert "The job was stopped" in message
    assert result["job"]["status"] == "PENDING"


def test_the_pending_deadline_leaves_its_cause_in_the_job_directory_for_the_verdict(
        fake_ray, clock, run_module, cluster_nodes, tmp_path):
    job_dir = tmp_path / "jobs" / "job-1"
    job_dir.parent.mkdir()  # the jobs folder exists; the job directory is made by the call
    resources = {"worker_node": 1, "gpu_node": 1}  # no node carries gpu_node: infeasible
    result = run_module(main, args(entrypoint="python -u job.py", entrypoint_resources=resources,
                                   entrypoint_num_cpus=1, wait="placed", pending_timeout=30, poll_interval=5,
                                   job_dir={"path": str(job_dir), "files": {}}))
    assert result["failed"]
    note = json.loads((job_dir / "logs" / "stopped_by.json").read_text())
    assert note["cause"] == "infeasible" and note["why"] == result["msg"]
    assert json.loads(note["demand"][0]) == dict(resources, CPU=1.0)
    alive = [n for n in cluster_nodes if n["state"] == "ALIVE"]
    assert sorted(note["offers"]) == sorted(n["node_ip"] for n in alive)
    # What a worker does offer (busy): the same deadline is a plain stop, not infeasible.
    fake_ray.jobs.clear()
    busy = tmp_path / "jobs" / "job-2"
    result = run_module(main, args(submission_id="job-2", entrypoint="python -u job.py",
                                   entrypoint_resources={"worker_node": 1}, entrypoint_num_cpus=1, wait="placed",
                                   pending_timeout=30, poll_interval=5, job_dir={"path": str(busy), "files": {}}))
    assert result["failed"] and "cause" not in json.loads((busy / "logs" / "stopped_by.json").read_text())


def test_without_a_deadline_of_its_own_the_wait_for_placement_ends_at_the_stop_the_job_controller_notes(
        fake_ray, clock, run_module, tmp_path, monkeypatch):
    """pending_timeout 0 (submit_job's handed-over jobs): no stop of its own however long the job is PENDING; the
    wait ends when the job's logs/stopped_by.json appears (the job controller's deadline; Ray still says PENDING)."""
    job_dir = tmp_path / "jobs" / "job-1"
    job_dir.parent.mkdir()
    note = {"by": "the job controller ctl", "why": "Ray job job-1 still PENDING after 900s: no ALIVE node offers it",
            "cause": "infeasible"}
    stop_at, poll = 900, 5

    def sleep(seconds):
        clock.sleep(seconds)
        path = job_dir / "logs" / "stopped_by.json"
        if clock.elapsed >= stop_at and not path.exists():
            path.write_text(json.dumps(note))
    monkeypatch.setattr(time, "sleep", sleep)
    result = run_module(main, args(entrypoint="python -u job.py", entrypoint_resources={"worker_node": 1, "gpu_node": 1},
                                   entrypoint_num_cpus=1, wait="placed", pending_timeout=0, poll_interval=poll,
                                   job_dir={"path": str(job_dir), "files": {}}))
    assert result["failed"] and fake_ray.called("stop_job") == []
    assert stop_at <= clock.elapsed <= stop_at + poll
    assert result["msg"] == "Ray job job-1 was stopped before its driver was placed, by %s: %s" % (note["by"], note["why"])
    assert result["stopped_by"] == note and result["job"]["status"] == "PENDING" and "placement" not in result


def test_an_existing_id_is_reported_and_not_submitted_again(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "SUCCEEDED", entrypoint="python -u first.py")

    result = run_module(main, args(entrypoint="echo never", wait="placed"))

    assert result["changed"] is False and result["existed"] is True
    assert result["job"]["entrypoint"] == "python -u first.py" and result["job"]["status"] == "SUCCEEDED"
    assert fake_ray.calls == []


def test_check_mode_submits_nothing(fake_ray, clock, run_module):
    result = run_module(main, args(entrypoint="python -u job.py", wait="placed"), check_mode=True)

    assert result["changed"] is True and result["existed"] is False and result["job"] is None
    assert fake_ray.calls == [] and "job-1" not in fake_ray.jobs


def test_check_mode_does_not_wait_for_a_pending_job(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "PENDING")

    result = run_module(main, args(entrypoint="python -u job.py", wait="placed"), check_mode=True)

    assert result["changed"] is False and result["job"]["status"] == "PENDING" and "placement" not in result
    assert fake_ray.info_reads == 1 and clock.elapsed == 0 and fake_ray.calls == []


def test_submitting_needs_an_entrypoint(fake_ray, clock, run_module):
    result = run_module(main, args())

    assert result["failed"] and result["msg"] == "entrypoint is required to submit job job-1"
    assert fake_ray.calls == []


def test_an_unreachable_jobs_api_names_the_address(fake_ray, clock, run_module):
    fake_ray.unreachable = ConnectionError("connection refused")

    result = run_module(main, args(entrypoint="python -u job.py"))

    assert result["failed"] and result["msg"].startswith("Cannot reach the Ray Jobs API at %s: " % ADDRESS)
    assert str(fake_ray.unreachable) in result["msg"]


# ---- the job directory and the snapshots in the same call ----

def wait_for(path, seconds=60):
    """Wait (real time) until ``path`` exists: the detached snapshot process writes it when done."""
    import os
    import time as real_time
    deadline = real_time.monotonic() + seconds
    while not os.path.exists(path):
        assert real_time.monotonic() < deadline, "%s never appeared" % path
        real_time.sleep(0.05)


def snapshot_commands(names):
    """Commands that print their own name (subprocesses: no Ray in the unit tests)."""
    import sys
    return [{"name": name, "argv": [sys.executable, "-c", "print(%r)" % ("said by " + name)]} for name in names]


def test_one_call_makes_the_job_dir_starts_the_snapshots_and_submits(fake_ray, run_module, cluster_nodes, tmp_path):
    driver = cluster_nodes[1]
    fake_ray.then("job-1", "PENDING", {"status": "RUNNING", "driver_node_id": driver["node_id"]})
    job_dir = tmp_path / "jobs" / "job-1"
    (tmp_path / "jobs").mkdir()
    files = {"config/job_spec.json": '{"submission_id": "job-1"}\n', str(job_dir / "config" / "submit_cmd.txt"): "ray job submit\n"}
    names = ["ray_status", "ray_job_list"]
    placement_dest = job_dir / "debug" / "placement.json"
    options = args(entrypoint="python -u job.py", entrypoint_resources={"worker_node": 1}, entrypoint_num_cpus=1,
                   wait="placed", poll_interval=0.01, placement_dest=str(placement_dest),
                   job_dir={"path": str(job_dir), "files": files},
                   debug_bundle={"dest": str(job_dir / "debug"), "stage": "submit", "commands": snapshot_commands(names),
                                 "in_process": False, "timeout": 20,
                                 "then": {"stage": "placed", "after_file": str(placement_dest), "timeout": 20}})

    result = run_module(main, options)

    assert result["changed"] is True and result["existed"] is False
    assert fake_ray.called("submit_job") and result["job"]["driver_node_ip"] == driver["node_ip"]
    assert sorted(p.name for p in job_dir.iterdir()) == ["checkpoints", "config", "debug", "logs"]
    expected_files = sorted(str(job_dir / rel) if not rel.startswith("/") else rel for rel in files)
    assert result["job_dir_written"] == expected_files
    for rel, text in files.items():
        assert (job_dir / rel).read_text() == text
    bundle = result["debug_bundle"]
    assert bundle["max_seconds"] == 2 * len(names) * 20 + 20
    assert bundle["files"] == [str(job_dir / "debug" / ("%s-submit-%s.txt" % (bundle["stamp"], n))) for n in names]
    wait_for(bundle["record"])
    record = json.loads(open(bundle["record"]).read())
    assert record["files"] == bundle["files"] and record["rcs"] == {n: 0 for n in names}
    assert len(record["then_files"]) == len(names)
    for name, path in zip(names, bundle["files"] + record["then_files"]):
        assert "said by %s" % name in open(path).read()
    assert json.loads(placement_dest.read_text())["driver_node_ip"] == driver["node_ip"]


def test_an_existing_job_dir_is_refused_before_anything_is_submitted(fake_ray, clock, run_module, tmp_path):
    job_dir = tmp_path / "job-1"
    (job_dir / "config").mkdir(parents=True)
    (job_dir / "config" / "job_spec.json").write_text("earlier run\n")
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    options = args(entrypoint="python -u job.py", wait="placed",
                   job_dir={"path": str(job_dir), "files": {"config/job_spec.json": "new\n"}},
                   debug_bundle={"dest": str(job_dir / "debug"), "stage": "submit", "commands": snapshot_commands(["a"])})

    result = run_module(main, options)

    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("job directory %s exists: job directories are never reused" % job_dir)
    assert fake_ray.calls == [] and "job-1" not in fake_ray.jobs
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
    assert (job_dir / "config" / "job_spec.json").read_text() == "earlier run\n"


def test_check_mode_says_what_the_job_dir_would_hold_and_makes_nothing(fake_ray, clock, run_module, tmp_path):
    job_dir = tmp_path / "job-1"
    options = args(entrypoint="python -u job.py", job_dir={"path": str(job_dir), "files": {"config/a.json": "{}"}},
                   debug_bundle={"dest": str(job_dir / "debug"), "stage": "submit", "commands": snapshot_commands(["a"])})

    result = run_module(main, options, check_mode=True)

    assert result["changed"] is True and result["job_dir_written"] == [str(job_dir / "config" / "a.json")]
    assert "debug_bundle" not in result and not job_dir.exists() and fake_ray.calls == []


def test_a_job_dir_goes_only_with_a_submission(fake_ray, clock, run_module, tmp_path):
    fake_ray.add_job("job-1", "RUNNING")

    result = run_module(main, args(state="stopped", job_dir={"path": str(tmp_path / "job-1")}))

    assert result["failed"] and result["msg"] == "job_dir and debug_bundle go with state=submitted (got state=stopped)."
    assert fake_ray.calls == [] and not (tmp_path / "job-1").exists()


# ---- stop ----

def test_stop_waits_until_the_job_is_terminal(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")
    fake_ray.when_stopped("job-1", "RUNNING", "RUNNING", "STOPPED")

    result = run_module(main, args(state="stopped", poll_interval=1))

    assert fake_ray.called("stop_job") == ["job-1"]
    assert result["changed"] is True and result["job"]["status"] == "STOPPED"
    assert clock.elapsed >= 2  # it polled until Ray said STOPPED


def test_stop_fails_when_the_job_outlives_stop_timeout(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")
    options = args(state="stopped", stop_timeout=10, poll_interval=1)

    result = run_module(main, options)

    assert result["failed"] and result["changed"] is True
    assert result["msg"] == "Ray job job-1 still RUNNING %ss after it was asked to stop." % options["stop_timeout"]
    assert clock.elapsed > options["stop_timeout"]


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED", "STOPPED"])
def test_stopping_a_terminal_job_changes_nothing(fake_ray, clock, run_module, status):
    fake_ray.add_job("job-1", status)

    result = run_module(main, args(state="stopped"))

    assert result["changed"] is False and result["job"]["status"] == status
    assert fake_ray.calls == []


def test_stopping_an_unknown_job_fails(fake_ray, clock, run_module):
    result = run_module(main, args(state="stopped"))

    assert result["failed"] and result["msg"] == "Ray job job-1 does not exist."


def test_check_mode_stops_nothing(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")

    result = run_module(main, args(state="stopped"), check_mode=True)

    assert result["changed"] is True and fake_ray.calls == [] and fake_ray.status_of("job-1") == "RUNNING"


# ---- delete ----

@pytest.mark.parametrize("check_mode", [False, True])
def test_delete_removes_a_terminal_job(fake_ray, clock, run_module, check_mode):
    fake_ray.add_job("job-1", "FAILED")

    result = run_module(main, args(state="absent"), check_mode=check_mode)

    assert result["changed"] is True and result["existed"] is True
    assert fake_ray.called("delete_job") == ([] if check_mode else ["job-1"])
    assert ("job-1" in fake_ray.jobs) is check_mode


def test_delete_refuses_a_job_that_still_runs(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")

    result = run_module(main, args(state="absent"))

    assert result["failed"] and result["msg"] == "Ray job job-1 is RUNNING: stop it before deleting it."
    assert fake_ray.calls == []


def test_deleting_an_unknown_job_changes_nothing(fake_ray, clock, run_module):
    result = run_module(main, args(state="absent"))

    assert result["changed"] is False and result["existed"] is False and result["job"] is None
    assert fake_ray.calls == []


# ---- the look and the refusal in the submitting call (check, refuse, device_sharing) ----

def minimal_spec(tmp_path, submission_id="job-1", entrypoint="python -u job.py"):
    """The keys of a job spec the refusal rules read, for a script workload under ``tmp_path``."""
    root = str(tmp_path)
    return {"submission_id": submission_id, "shared_root": root, "job_dir": "%s/jobs/%s" % (root, submission_id),
            "code_path": root + "/common/code/verl/v1", "tools_dir": root + "/common/code/mvp_tools",
            "data_files": {}, "hydra_config": None, "needs_gpus": False, "checkpoints": None,
            "trainer_overrides": {}, "entrypoint": entrypoint}


def checked_submission(tmp_path, spec, **options):
    (tmp_path / "jobs").mkdir(exist_ok=True)
    return args(entrypoint=spec["entrypoint"], entrypoint_resources={"worker_node": 1}, wait="none",
                job_dir={"path": spec["job_dir"], "files": {"config/job_spec.json": json.dumps(spec)}},
                check={"paths": {"model": str(tmp_path)}, "resource": "worker_node"},
                refuse={"spec": spec, "worker_resource": "worker_node", "check_gpus": False}, **options)


def test_a_taken_id_is_refused_by_the_look_before_the_job_dir_is_touched(fake_ray, clock, run_module, tmp_path):
    spec = minimal_spec(tmp_path)
    options = checked_submission(tmp_path, spec)
    fake_ray.add_job("job-1", "FAILED")
    before = {str(p): p.stat().st_mtime for p in tmp_path.rglob("*")}

    result = run_module(main, options)

    assert result["failed"] and result["changed"] is False
    assert result["msg"].startswith("submission_id '%s' is taken (Ray has a job with that id, status FAILED)"
                                    % spec["submission_id"])
    assert fake_ray.called("submit_job") == []
    assert {str(p): p.stat().st_mtime for p in tmp_path.rglob("*")} == before


def test_no_alive_worker_is_refused_naming_the_resource(fake_ray, clock, run_module, tmp_path, cluster_nodes):
    fake_ray.nodes = [n for n in cluster_nodes if n["is_head_node"]]
    spec = minimal_spec(tmp_path)

    result = run_module(main, checked_submission(tmp_path, spec))

    assert result["failed"] and "No ALIVE node carries 'worker_node'" in result["msg"]
    assert result["other_problems"] == [] and not (tmp_path / "jobs" / "job-1").exists()


def test_a_misspelt_key_of_the_look_fails_before_the_head_looks(fake_ray, clock, run_module, tmp_path):
    options = checked_submission(tmp_path, minimal_spec(tmp_path))
    options["check"]["hydar"] = {"config_dir": str(tmp_path), "config_name": "x"}

    result = run_module(main, options)

    assert result["failed"] and "hydar" in result["msg"]
    assert fake_ray.called("submit_job") == [] and not (tmp_path / "jobs" / "job-1").exists()


def test_refuse_goes_with_check(fake_ray, clock, run_module, tmp_path):
    result = run_module(main, args(entrypoint="x", refuse={"spec": {}}))
    assert result["failed"] and result["msg"] == "refuse goes with check."
