"""mvp_progress: a running job's progress read from its job directory, and the line the plays print about it
(issue 42). Every expected value is computed from the inputs the test writes."""
import json
import os

import pytest
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_progress import (
    AVG_MIN_STEPS, FALLBACK_METRICS, duration, key_metric, progress_line, read_progress, step_time, watchdog_text)
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import hang_bound

WATCHDOG = {"first_step_s": 1800.0, "floor_s": 300.0, "factor": 5.0}


def write_job(job_dir, rows, log="", spec=None):
    """A job directory: verl's metrics lines (dicts {step: data}), the driver log, the job spec."""
    os.makedirs(os.path.join(job_dir, "logs"))
    os.makedirs(os.path.join(job_dir, "config"))
    with open(os.path.join(job_dir, "logs", "metrics.jsonl"), "w") as handle:
        for step, data in rows:
            handle.write(json.dumps({"step": step, "data": data}) + "\n")
        handle.write('{"step": 99, "da')  # a half-written last line of a running job
    with open(os.path.join(job_dir, "logs", "driver.log"), "w") as handle:
        handle.write(log)
    with open(os.path.join(job_dir, "config", "job_spec.json"), "w") as handle:
        json.dump(spec or {}, handle)
    return job_dir


def test_reads_steps_metric_plan_restarts_and_watchdog(tmp_path):
    scores, times = [0.2, 0.3, 0.25, 0.4], [12.0, 10.0, 11.0, 50.0]
    rows = [(i + 5, {"critic/score/mean": s, "timing_s/step": t}) for i, (s, t) in enumerate(zip(scores, times))]
    spec = {"submission_id": "grpo-1-r1", "max_restarts": 3, "watchdog": WATCHDOG,
            "restart": {"attempt": 1, "max_restarts": 3}, "resume_from": {"step": 4}}
    job = write_job(str(tmp_path / "grpo-1-r1"), rows, "noise\nTotal training steps: 20\n", spec)
    os.utime(os.path.join(job, "logs", "metrics.jsonl"), (1000.0, 1000.0))

    got = read_progress(job, "critic/score/mean")

    ordered = sorted(times)
    assert got == {"submission_id": "grpo-1-r1", "job_dir": job, "last_step": rows[-1][0],
                   "metric": "critic/score/mean", "first": [rows[0][0], scores[0]], "last": [rows[-1][0], scores[-1]],
                   "planned": 20, "step_time_s": (ordered[1] + ordered[2]) / 2, "metrics_mtime": 1000.0,
                   "resumed_step": 4, "restart_attempt": 1, "preemptions": 0, "max_restarts": 3, "watchdog": WATCHDOG,
                   "goodput": None}


def test_a_job_that_logged_nothing_yet(tmp_path):
    job = str(tmp_path / "sft-1")
    os.makedirs(job)

    got = read_progress(job, planned=7)

    assert got["last_step"] == 0 and got["first"] is None and got["planned"] == 7 and got["watchdog"] is None
    assert got["metric"] is None and got["metrics_mtime"] is None
    line = progress_line(got, "PENDING", now=50.0)
    assert line == "sft-1: PENDING step 0/7 | metrics: none logged yet | s/step ? | ETA ? | restarts 0 of 0 | watchdog off"


@pytest.mark.parametrize("logged", list(FALLBACK_METRICS))
def test_without_a_metric_the_first_known_one_logged(tmp_path, logged):
    job = write_job(str(tmp_path / "j"), [(1, {logged: 1.0, "other": 2.0})])
    assert read_progress(job)["metric"] == logged


def test_the_key_metric_of_the_catalog():
    catalog = {"sft": {"metrics": [{"key": "train/loss"}, {"key": "val/loss"}]}, "raw": {}}
    assert key_metric(catalog, "sft") == "train/loss"
    assert key_metric(catalog, "raw") == key_metric(catalog, "nope") == key_metric({}, None) == ""


def test_step_time_prefers_verl_then_measured_then_the_average():
    base = {"last_step": 10, "resumed_step": 2, "metrics_mtime": 500.0}
    assert step_time(dict(base, step_time_s=3.5)) == (3.5, "verl")
    history = [[200.0, 4], [260.0, 6]]
    assert step_time(base, history) == ((500.0 - 200.0) / (10 - 4), "measured")
    start_ms = 100000
    assert step_time(base, [], start_ms) == ((500.0 - start_ms / 1000.0) / (10 - 2), "avg")
    assert step_time(base) == (None, "")
    # fewer steps than AVG_MIN_STEPS since the start: the start-up would be most of the average
    early = dict(base, last_step=base["resumed_step"] + AVG_MIN_STEPS - 1)
    assert step_time(early, [], start_ms) == (None, "")


def test_the_line_of_a_running_job():
    progress = {"submission_id": "sft-7", "last_step": 30, "planned": 100, "metric": "train/loss",
                "first": [1, 6.234375], "last": [30, 1.5], "step_time_s": 4.0, "metrics_mtime": 1000.0,
                "resumed_step": 0, "restart_attempt": 1, "preemptions": 0, "max_restarts": 2, "watchdog": WATCHDOG}
    now = 1012.0

    line = progress_line(progress, "RUNNING", now)

    bound, _ = hang_bound(30, [4.0] * 29, WATCHDOG["first_step_s"], WATCHDOG["floor_s"], WATCHDOG["factor"])
    assert line == ("sft-7: RUNNING step 30/100 | train/loss %.4g -> %.4g | %.3g s/step | ETA %s | restarts 1 of 2 | "
                    "watchdog: hang after %s without a new step (quiet %s)"
                    % (6.234375, 1.5, 4.0, duration((100 - 30) * 4.0), duration(bound), duration(now - 1000.0)))
    assert "ETA 4m40s" in line and "hang after 5m00s" in line and "quiet 12s" in line


def test_the_watchdog_bound_follows_the_step_time():
    progress = {"last_step": 12, "resumed_step": 2, "watchdog": WATCHDOG}
    slow = 120.0
    bound, _ = hang_bound(10, [slow] * 9, WATCHDOG["first_step_s"], WATCHDOG["floor_s"], WATCHDOG["factor"])
    assert bound == WATCHDOG["factor"] * slow
    assert watchdog_text(progress, slow) == "watchdog: hang after %s without a new step" % duration(bound)
    assert watchdog_text(dict(progress, last_step=2)) == "watchdog: first step within %s" % duration(
        WATCHDOG["first_step_s"])


@pytest.mark.parametrize("seconds,text", [(0, "0s"), (59.4, "59s"), (60, "1m00s"), (3599, "59m59s"),
                                          (3600 * 2 + 5 * 60, "2h05m"), (-3, "0s")])
def test_durations(seconds, text):
    assert duration(seconds) == text


def test_the_line_of_a_running_run_says_its_goodput_so_far_from_the_first_attempts_ledger(tmp_path):
    spec = {"submission_id": "sft-1-r1", "restart": {"run": "sft-1", "attempt": 1}}
    job = write_job(str(tmp_path / "sft-1-r1"), [(3, {"train/loss": 1.0})], spec=spec)
    productive, held = 123.0, 200.0
    ledger = os.path.join(str(tmp_path), "sft-1", "logs", "ledger.json")
    os.makedirs(os.path.dirname(ledger))
    with open(ledger, "w") as handle:
        json.dump({"state": "running", "goodput": productive / held}, handle)
    got = read_progress(job, planned=8)
    assert got["goodput"] == productive / held
    assert progress_line(got).endswith(" | goodput so far %.0f%%" % (100 * productive / held))
    with open(ledger, "w") as handle:  # an ended run's ledger is not "so far"
        json.dump({"state": "ended", "goodput": 0.5}, handle)
    assert read_progress(job, planned=8)["goodput"] is None and "goodput" not in progress_line(read_progress(job))
