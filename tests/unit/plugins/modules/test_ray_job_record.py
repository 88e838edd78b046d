"""ray_job_record against a fake of Ray's dashboard (Jobs REST API, State API): Ray's driver log and the status with the
verdict written into the job directory (logs/ray_driver.log, logs/status.json); nothing in check mode."""
import json
import os

from ansible_collections.mvp.ray.plugins.modules.ray_job_record import main

ADDRESS = "http://127.0.0.1:8265"


def test_saves_the_driver_log_and_the_status_with_the_verdict(fake_ray, clock, run_module, tmp_path):
    job_dir = tmp_path / "jobs" / "job-1"
    (job_dir / "config").mkdir(parents=True)
    (job_dir / "config" / "job_spec.json").write_text(json.dumps({"submission_id": "job-1"}))  # a script job
    details = {"message": "Job finished successfully.", "start_time": 1800000000000, "end_time": 1800000042000,
               "driver_exit_code": 0}
    fake_ray.add_job("job-1", "SUCCEEDED", **details)
    fake_ray.logs["job-1"] = "SELFTEST RESULT OK\n"
    log_dest, status_dest = job_dir / "logs" / "ray_driver.log", job_dir / "logs" / "status.json"
    options = {"address": ADDRESS, "submission_id": "job-1", "job_dir": str(job_dir)}

    result = run_module(main, options)

    assert result["changed"] is True
    assert (result["log_dest"], result["status_dest"]) == (str(log_dest), str(status_dest))
    assert log_dest.read_text() == fake_ray.logs["job-1"]
    status = json.loads(status_dest.read_text())
    assert {key: status[key] for key in details} == details
    assert status["submission_id"] == "job-1" and status["status"] == "SUCCEEDED"
    assert status["recorded_at"] == round(clock.now, 3)
    assert result["verdict"]["verdict"] == "succeeded"  # a script job that SUCCEEDED
    assert {key: status[key] for key in result["verdict"]} == result["verdict"]
    assert fake_ray.calls == []  # the job itself is left as it is


def test_a_log_ray_cannot_return_is_named_and_check_mode_writes_nothing(fake_ray, clock, run_module, tmp_path):
    job_dir = tmp_path / "job-1"
    job_dir.mkdir()
    fake_ray.add_job("job-1", "FAILED", driver_exit_code=1)
    fake_ray.logs["job-1"] = fake_ray.Unanswered("node 10.0.0.3 is dead\ntraceback ...")
    options = {"address": ADDRESS, "submission_id": "job-1", "job_dir": str(job_dir)}

    checked = run_module(main, options, check_mode=True)
    assert checked["changed"] is False and not (job_dir / "logs").exists()

    result = run_module(main, options)
    reason = "Request failed with status code 500: %s" % fake_ray.logs["job-1"].text.splitlines()[0]
    assert result["log_error"] == reason
    assert "Ray could not return the driver log of job-1 (%s)" % reason in (
        job_dir / "logs" / "ray_driver.log").read_text()
    assert json.loads((job_dir / "logs" / "status.json").read_text())["status"] == "FAILED"


def test_an_unknown_job_or_a_missing_job_dir_writes_nothing(fake_ray, clock, run_module, tmp_path):
    result = run_module(main, {"address": ADDRESS, "submission_id": "job-1", "job_dir": str(tmp_path)})
    assert result["changed"] is False and result["job"] is None and list(tmp_path.iterdir()) == []

    missing = tmp_path / "jobs" / "job-1"
    failed = run_module(main, {"address": ADDRESS, "submission_id": "job-1", "job_dir": str(missing)})
    assert failed["failed"] and failed["msg"].startswith("job_dir %s does not exist" % missing)


def test_a_job_lost_with_its_head_is_judged_from_its_job_directory(fake_ray, clock, run_module, tmp_path):
    job_dir = tmp_path / "jobs" / "sft-1"
    (job_dir / "config").mkdir(parents=True)
    (job_dir / "logs").mkdir()
    (job_dir / "config" / "job_spec.json").write_text(json.dumps({"submission_id": "sft-1",
                                                                  "hydra_config": "sft_trainer_engine"}))
    planned, logged = 8, [1, 2, 3]
    (job_dir / "logs" / "driver.log").write_text("MVP_PRECHECK_MARKER=x\nTotal steps: %d, num_warmup_steps: 0\n" % planned)
    (job_dir / "logs" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "data": {"train/loss": 1.0}}) + "\n" for s in logged))
    options = {"address": ADDRESS, "submission_id": "sft-1", "job_dir": str(job_dir)}
    # The new head does not know the job: without lost_with_head nothing is written.
    assert run_module(main, options)["job"] is None and not (job_dir / "logs" / "status.json").exists()

    result = run_module(main, dict(options, lost_with_head=True))
    status = json.loads((job_dir / "logs" / "status.json").read_text())
    assert result["changed"] is True and status["status"] == "LOST" == result["job"]["status"]
    assert status["cause"] == "head_lost" and status["steps"]["last"] == max(logged)
    assert "Ray has no driver log of sft-1: the head that ran it was lost" in (job_dir / "logs" / "ray_driver.log").read_text()
    # Every planned step logged before the head went: it trained.
    (job_dir / "logs" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "data": {"train/loss": 1.0}}) + "\n" for s in range(1, planned + 1)))
    assert run_module(main, dict(options, lost_with_head=True))["verdict"]["verdict"] == "trained"


def test_a_later_attempt_finds_its_runs_ledger_in_the_first_attempt(fake_ray, clock, run_module, tmp_path):
    jobs = tmp_path / "jobs"
    first, later = jobs / "sft-1", jobs / "sft-1-r1"
    (first / "logs").mkdir(parents=True)
    (later / "config").mkdir(parents=True)
    (later / "config" / "controller.json").write_text(json.dumps({"run": "sft-1", "attempt": 1}))
    fake_ray.add_job("sft-1-r1", "FAILED", driver_exit_code=1)
    options = {"address": ADDRESS, "submission_id": "sft-1-r1", "job_dir": str(later)}
    assert "ledger_mlflow" not in run_module(main, options)  # no ledger yet: nothing to put on MLflow
    (first / "logs" / "ledger.json").write_text(json.dumps({"version": 1, "run": "sft-1", "state": "running"}))
    # A ledger, but the run is untracked (no config/mlflow_run.json in its first attempt): nothing is sent.
    assert run_module(main, options)["ledger_mlflow"] == ""


def test_ledger_only_writes_nothing_and_asks_ray_nothing(fake_ray, clock, run_module, tmp_path):
    """ledger_only (the job controller after a run's end): the run's ledger to MLflow, no record, no Ray call."""
    first = tmp_path / "jobs" / "sft-1"
    (first / "logs").mkdir(parents=True)
    options = {"address": ADDRESS, "submission_id": "sft-1", "job_dir": str(first), "ledger_only": True}
    result = run_module(main, options)
    assert result["changed"] is False and result["ledger_mlflow"] == "no ledger.json"
    (first / "logs" / "ledger.json").write_text(json.dumps({"version": 1, "run": "sft-1", "state": "ended"}))
    assert run_module(main, options)["ledger_mlflow"] == ""  # untracked: no config/mlflow_run.json
    assert sorted(os.listdir(first / "logs")) == ["ledger.json"]
    assert fake_ray.calls == []  # no request to Ray's dashboard
