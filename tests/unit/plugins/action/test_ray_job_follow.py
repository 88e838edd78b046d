"""The ray_job_follow action plugin: a real ansible-playbook on localhost follows a job of a fake dashboard served
over HTTP (tests/unit/plugins/ray_dashboard_fake.py) in chunks and prints its progress line in the normal output."""
import json
import os
import subprocess
import sys
import threading
import time

import pytest
import yaml
from ansible_collections.mvp.ray.plugins.action.ray_job_follow import follow_again_command, observe

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_progress import duration

from ray_dashboard_fake import FakeRay, served

WATCHDOG = {"first_step_s": 600, "floor_s": 300, "factor": 5}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


@pytest.fixture
def dashboard():
    """A FakeRay served over HTTP on a free port; yields (fake, address)."""
    fake = FakeRay()

    with served(fake) as address:
        yield fake, address


def test_the_command_that_follows_a_job_again():
    assert follow_again_command("sft-1") == "ansible-playbook collect.yml -e submission_id=sft-1 -e wait=true"


def test_the_rate_samples_are_taken_when_the_step_moves():
    history = []
    for mtime, step in [(None, 0), (10.0, 0), (20.0, 2), (20.0, 2), (35.0, 5)]:
        observe(history, {"metrics_mtime": mtime, "last_step": step})
    observe(history, None)
    assert history == [[20.0, 2], [35.0, 5]]


def job_dir(tmp_path, losses, planned, max_restarts):
    """A job directory with verl's metrics file, a driver log naming the planned steps, and the job spec."""
    (tmp_path / "logs").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "logs" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i + 1, "data": {"train/loss": v}}) + "\n" for i, v in enumerate(losses)))
    (tmp_path / "logs" / "driver.log").write_text("Total training steps: %d\n" % planned)
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps(
        {"submission_id": "job-1", "max_restarts": max_restarts,
         "watchdog": WATCHDOG}))
    return str(tmp_path)


def play_on_localhost(tmp_path, tasks):
    """Run ``tasks`` in a play on localhost (a local connection, this Python) with ansible-playbook, the checkout's
    collection on the path, in ``tmp_path``; returns the CompletedProcess."""
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"name": "Test", "hosts": "localhost", "gather_facts": False,
                                                        "tasks": tasks}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    return done


def run_play(tmp_path, address, interval):
    """Follow job-1 to its end in a play on localhost; return (stdout, the registered result)."""
    out = tmp_path / "result.json"
    tasks = [
        {"name": "Test | Follow the job", "mvp.ray.ray_job_follow": {
            "submission_id": "job-1", "address": address, "wait": "terminal", "poll_interval": 0.05,
            "progress_interval": interval, "progress_workloads": {"sft": {"metrics": [{"key": "train/loss"}]}}},
         "register": "followed"},
        {"name": "Test | Save it", "ansible.builtin.copy": {"content": "{{ followed | to_json }}", "dest": str(out),
                                                             "mode": "0644"}}]
    done = play_on_localhost(tmp_path, tasks)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout, json.loads(out.read_text())


def test_a_progress_line_between_chunks_in_the_normal_output(tmp_path, dashboard):
    fake, address = dashboard
    losses, planned, max_restarts = [2.5, 2.0, 1.5], 12, 2
    (tmp_path / "job").mkdir()
    path = job_dir(tmp_path / "job", losses, planned, max_restarts)
    fake.add_job("job-1", "RUNNING", metadata={"job_dir": path, "workload": "sft"})
    fake.then("job-1", *(["RUNNING"] * 30 + [{"status": "SUCCEEDED", "driver_exit_code": 0}]))

    stdout, result = run_play(tmp_path, address, 1)

    assert result["job"]["status"] == "SUCCEEDED" and result["done"] is True
    assert result["module_calls"] >= 2 and len(result["progress_lines"]) == result["module_calls"] - 1
    assert result["http_requests"] == len(fake.clients)
    line = "job-1: RUNNING step %d/%d | train/loss %g -> %g |" % (len(losses), planned, losses[0], losses[-1])
    assert result["progress_lines"][0].startswith(line)
    # no step time yet (no timing_s/step, the step count did not move): the watchdog's bound until step 2
    bound = duration(max(WATCHDOG["first_step_s"], WATCHDOG["floor_s"]))
    assert "s/step ? | ETA ? | restarts 0 of %d | watchdog: hang after %s without a new step" % (
        max_restarts, bound) in result["progress_lines"][0]
    # shown at the default verbosity, with the command that follows the job again first
    assert stdout.count(line) == len(result["progress_lines"])
    assert stdout.index(follow_again_command("job-1")) < stdout.index(line)


def test_no_interval_is_one_silent_call(tmp_path, dashboard):
    fake, address = dashboard
    fake.add_job("job-1", "RUNNING")
    fake.then("job-1", *(["RUNNING"] * 10 + ["SUCCEEDED"]))

    stdout, result = run_play(tmp_path, address, 0)

    assert result["job"]["status"] == "SUCCEEDED" and "progress_lines" not in result
    assert follow_again_command("job-1") not in stdout


def test_a_run_s_end_is_read_under_its_name_then_under_the_one_older_versions_wrote(tmp_path, dashboard):
    """logs/run_end.json of the run's first attempt; runs ended by versions before the rename have
    logs/supervisor.json (still on the shared storage), read when the new name is missing."""
    fake, address = dashboard
    jobs = tmp_path / "jobs"
    ends = {"old-1": {"supervisor.json": {"state": "ended", "trained": True, "why": "old name", "attempts": ["old-1"]}},
            "both-1": {"supervisor.json": {"state": "ended", "trained": False, "why": "stale", "attempts": ["both-1"]},
                       "run_end.json": {"state": "ended", "trained": True, "why": "new name", "attempts": ["both-1"]}}}
    for run, files in ends.items():
        (jobs / run / "logs").mkdir(parents=True)
        for name, value in files.items():
            (jobs / run / "logs" / name).write_text(json.dumps(value))
        fake.add_job(run, "SUCCEEDED")
    tasks = []
    for run in ends:
        tasks += [{"name": "Test | Follow " + run, "register": "followed", "mvp.ray.ray_job_follow": {
                       "submission_id": run, "address": address, "wait": "terminal", "poll_interval": 0.05,
                       "progress_interval": 1, "run": True, "jobs_dir": str(jobs), "run_timeout": 30}},
                  {"name": "Test | Save " + run, "ansible.builtin.copy": {
                      "content": "{{ followed.run_end | to_json }}", "dest": str(tmp_path / (run + ".json")),
                      "mode": "0644"}}]
    done = play_on_localhost(tmp_path, tasks)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads((tmp_path / "old-1.json").read_text()) == ends["old-1"]["supervisor.json"]
    assert json.loads((tmp_path / "both-1.json").read_text()) == ends["both-1"]["run_end.json"]


def test_a_run_is_followed_into_the_attempt_the_job_controller_started(tmp_path, dashboard):
    """The attempts as module_utils mvp_run_state chains them (logs/restart.json's next, once its job directory
    exists), read on the task's host: the first attempt ended and was continued, the next one runs to its end, then
    the job controller writes the run's end (here: this test, once Ray says the next attempt SUCCEEDED)."""
    fake, address = dashboard
    jobs = tmp_path / "jobs"
    run, nxt = "sft-1", "sft-1-r1"
    link = {"next": nxt, "cause": "node_lost", "summary": "node 10.0.0.3 lost", "why": "restart 1 of 1"}
    end = {"state": "ended", "trained": True, "why": "trained", "attempts": [run, nxt]}
    status = {"status": "SUCCEEDED", "verdict": "trained", "cause": None}
    for sid, files in {run: {"restart.json": link}, nxt: {"status.json": status}}.items():
        (jobs / sid / "logs").mkdir(parents=True)
        for name, value in files.items():
            (jobs / sid / "logs" / name).write_text(json.dumps(value))
    fake.add_job(run, "FAILED")
    fake.add_job(nxt, "RUNNING")
    fake.then(nxt, *(["RUNNING"] * 5 + ["SUCCEEDED"]))

    def controller():
        deadline = time.time() + 60
        while fake.status_of(nxt) != "SUCCEEDED" and time.time() < deadline:
            time.sleep(0.1)
        (jobs / run / "logs" / "run_end.json").write_text(json.dumps(end))
    judge = threading.Thread(target=controller, daemon=True)
    judge.start()
    out = tmp_path / "result.json"
    tasks = [{"name": "Test | Follow the run", "register": "followed", "mvp.ray.ray_job_follow": {
                  "submission_id": run, "address": address, "wait": "terminal", "poll_interval": 0.05,
                  "progress_interval": 1, "run": True, "jobs_dir": str(jobs), "run_timeout": 30}},
             {"name": "Test | Save it", "ansible.builtin.copy": {"content": "{{ followed | to_json }}", "dest": str(out),
                                                                 "mode": "0644"}}]
    done = play_on_localhost(tmp_path, tasks)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert (result["submission_id"], result["run_end"], result["status"]) == (nxt, end, status)
    judge.join()
    assert "%s ended (%s: %s); the job controller continues run %s as %s: %s" % (
        run, link["cause"], link["summary"], run, nxt, link["why"]) in done.stdout
