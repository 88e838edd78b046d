"""tests/integration/check_training.py: the learning check - the workload's key metric must improve between the
first and the last step by a fraction of a baseline run's own improvement, so a run that learns nothing fails.

The job directories are made here with the contract's files (job spec, verl's metrics lines); the expected
verdicts are computed from the losses each test writes.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "tests", "integration", "check_training.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

import check_training  # noqa: E402  pylint: disable=wrong-import-position

# A baseline SFT run: 8 steps whose loss falls by 1.6 (the shape of the recorded local run).
LEARNS = [6.2, 5.9, 5.6, 5.4, 5.2, 5.0, 4.8, 4.6]
OVERRIDES = {"data.train_batch_size": 8, "data.train_files": "/private/datasets/sft/train.parquet",
             "model.path": "/private/common/models/tiny", "trainer.total_epochs": 1}


def make_job(jobs, name, losses, overrides=None, metric="train/loss", workload="sft"):
    """A job directory with a job spec (its own names among the overrides) and verl's metrics lines."""
    job = jobs / "jobs" / name
    for sub in ("config", "logs"):
        (job / sub).mkdir(parents=True)
    own = {"trainer.experiment_name": name, "trainer.default_local_dir": "/private/jobs/%s/checkpoints" % name,
           "trainer.save_freq": 4}
    spec = {"workload": workload, "submission_id": name, "job_dir": "/private/jobs/" + name,
            "trainer_overrides": dict(overrides or OVERRIDES, **own)}
    (job / "config" / "job_spec.json").write_text(json.dumps(spec))
    (job / "logs" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "data": {metric: value}}) + "\n" for step, value in enumerate(losses, 1)))
    return spec


def baselines_file(tmp_path, losses, direction="down", metric="train/loss", fraction=0.5, workload="sft"):
    """A baselines file whose entry for ``workload`` holds ``losses``' first and last values."""
    path = tmp_path / "baselines.json"
    path.write_text(json.dumps({workload: {
        "metric": metric, "direction": direction, "fraction": fraction, "first_step": 1, "first": losses[0],
        "last_step": len(losses), "last": losses[-1], "learning_overrides": OVERRIDES,
        "provenance": {"job": "the-baseline"}}}))
    return path


def learning_lines(tmp_path, job, *extra):
    """The learning check lines check_training.py prints for ``job`` (the other checks lack their files here)."""
    proc = subprocess.run([sys.executable, SCRIPT, "--host-shared", str(tmp_path), "--job", job] + list(extra),
                          capture_output=True, text=True, check=False)
    return [line for line in proc.stdout.splitlines() if "key metric" in line or "baseline is" in line]


def test_a_run_that_learns_nothing_fails_and_one_like_the_baseline_passes(tmp_path):
    baselines = baselines_file(tmp_path, LEARNS)
    make_job(tmp_path, "flat", [LEARNS[0]] * len(LEARNS))
    make_job(tmp_path, "same", LEARNS)
    # Half the baseline's fall, minus a little: not enough.
    half = (LEARNS[0] - LEARNS[-1]) * 0.5
    make_job(tmp_path, "barely", [LEARNS[0], LEARNS[0] - half + 0.01])

    flat = learning_lines(tmp_path, "flat", "--baselines", str(baselines))
    same = learning_lines(tmp_path, "same", "--baselines", str(baselines))

    assert any(line.startswith("FAIL key metric falls") and "improved by 0," in line for line in flat), flat
    assert any(line.startswith("PASS key metric falls") for line in same), same
    assert any(line.startswith("PASS baseline is this request") for line in same), same
    barely = learning_lines(tmp_path, "barely", "--baselines", str(baselines))
    assert any(line.startswith("FAIL key metric falls") and "the job ran steps 1..2, the baseline 1..8" in line
               for line in barely), barely


def test_the_margin_is_the_entrys_fraction_of_the_baselines_own_improvement():
    base = check_training.improvement({n: {"m": v} for n, v in enumerate(LEARNS, 1)}, "m", "down")
    fall = LEARNS[0] - LEARNS[-1]
    assert base["improvement"] == pytest.approx(fall)
    just = {"first_step": 1, "last_step": 8, "improvement": 0.5 * fall}
    short = dict(just, improvement=0.5 * fall - 1e-9)
    assert check_training.margin_problems(just, base, 0.5) == []
    assert check_training.margin_problems(short, base, 0.5)
    assert check_training.margin_problems(short, base, 0.25) == []


def test_a_score_must_rise_and_a_baseline_that_did_not_improve_gives_no_margin():
    rising = {1: {"s": 0.30}, 2: {"s": 0.25}, 3: {"s": 0.42}}
    moved = check_training.improvement(rising, "s", "up")
    assert moved["improvement"] == pytest.approx(0.42 - 0.30) and moved["last_step"] == 3
    assert check_training.improvement(rising, "s", "down")["improvement"] == pytest.approx(0.30 - 0.42)
    assert check_training.improvement({1: {"s": 0.3}}, "s", "up") is None
    with pytest.raises(ValueError):
        check_training.improvement(rising, "s", "sideways")
    flat_base = dict(moved, improvement=0.0)
    assert "did not improve" in check_training.margin_problems(moved, flat_base, 0.5)[0]


def test_a_baseline_job_of_the_same_request_serves_and_another_request_is_named(tmp_path):
    baselines = tmp_path / "baselines.json"
    baselines.write_text(json.dumps({"sft": {"metric": "train/loss", "direction": "down"}}))
    make_job(tmp_path, "first", LEARNS)
    make_job(tmp_path, "second", LEARNS)
    make_job(tmp_path, "other-lr", LEARNS, overrides=dict(OVERRIDES, **{"optim.lr": 1e-4}))

    same = learning_lines(tmp_path, "second", "--baselines", str(baselines), "--baseline-job", "first")
    other = learning_lines(tmp_path, "other-lr", "--baselines", str(baselines), "--baseline-job", "first")

    assert [line.split()[0] for line in same] == ["PASS", "PASS"], same
    assert any(line.startswith("FAIL baseline is this request") and "['optim.lr']" in line for line in other), other


def test_a_workload_without_a_baseline_fails_naming_how_to_record_one(tmp_path):
    baselines = tmp_path / "baselines.json"
    baselines.write_text("{}")
    make_job(tmp_path, "grpo-1", [0.3, 0.4], metric="critic/score/mean", workload="grpo")

    lines = learning_lines(tmp_path, "grpo-1", "--baselines", str(baselines))

    assert lines and lines[0].startswith("FAIL key metric improves") and "--record-baseline" in lines[0], lines


def test_the_learning_overrides_leave_out_the_jobs_own_names_and_its_checkpointing(tmp_path):
    spec = make_job(tmp_path, "job-7", LEARNS, overrides=dict(OVERRIDES, **{
        "trainer.max_ckpt_to_keep": 2, "hydra.run.dir": "/private/jobs/job-7/logs/hydra"}))
    assert check_training.learning_overrides(spec) == OVERRIDES


def test_a_baseline_recorded_with_other_loggers_is_still_this_request(tmp_path):
    """The loggers say where metrics go (the tracking server adds mlflow), not how the model learns."""
    baselines = tmp_path / "baselines.json"
    recorded = dict(OVERRIDES, **{"trainer.logger": ["console", "file"]})
    baselines.write_text(json.dumps({"sft": {
        "metric": "train/loss", "direction": "down", "first_step": 1, "first": LEARNS[0], "last_step": len(LEARNS),
        "last": LEARNS[-1], "learning_overrides": recorded, "provenance": {"job": "the-baseline"}}}))
    make_job(tmp_path, "tracked", LEARNS, overrides=dict(OVERRIDES, **{"trainer.logger": ["console", "file", "mlflow"]}))
    make_job(tmp_path, "other-lr", LEARNS, overrides=dict(OVERRIDES, **{"trainer.logger": ["console"], "optim.lr": 1}))

    tracked = learning_lines(tmp_path, "tracked", "--baselines", str(baselines))
    other = learning_lines(tmp_path, "other-lr", "--baselines", str(baselines))

    assert any(line.startswith("PASS baseline is this request") for line in tracked), tracked
    assert any(line.startswith("FAIL baseline is this request") and "['optim.lr']" in line for line in other), other


def test_the_shipped_baselines_say_which_way_each_key_metric_moves():
    with open(check_training.BASELINES, encoding="utf-8") as handle:
        shipped = json.load(handle)
    for workload in ("sft", "grpo", "ppo"):
        entry = shipped[workload]
        assert entry["direction"] in ("down", "up") and entry["metric"] and 0 < entry["fraction"] <= 1
        assert entry.get("why")
        if "first" in entry:
            base = check_training.recorded(entry)
            assert base["improvement"] > 0 and entry["provenance"]["job"], workload


def test_a_relative_margin_compares_shares_of_each_runs_first_value():
    """PPO's value loss starts elsewhere every run: the measured runs (first -> last) clear a quarter of the
    baseline's relative fall, and a run whose loss does not fall does not."""
    base = {"first_step": 1, "first": 0.279, "last_step": 4, "last": 0.101, "improvement": 0.279 - 0.101}
    runs = [(0.071, 0.030), (0.279, 0.101), (0.077, 0.055)]
    for first, last in runs:
        moved = {"first_step": 1, "first": first, "last_step": 4, "last": last, "improvement": first - last}
        assert check_training.margin_problems(moved, base, 0.25, relative=True) == []
    flat = {"first_step": 1, "first": 0.077, "last_step": 4, "last": 0.075, "improvement": 0.002}
    assert check_training.margin_problems(flat, base, 0.25, relative=True)
    # Without it, the third run fails against the second's absolute fall (what CI saw).
    third = {"first_step": 1, "first": 0.077, "last_step": 4, "last": 0.055, "improvement": 0.022}
    assert check_training.margin_problems(third, base, 0.5)
