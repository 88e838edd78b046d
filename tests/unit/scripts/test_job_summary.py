"""scripts/job_summary.py: the lines `make demo` ends with, from a job directory made here."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(ROOT, "scripts", "job_summary.py")


def make_job(jobs, name, workload, losses, verdict=None, checkpoint_steps=()):
    """A job directory with the contract's files: spec, verl's metrics lines, optional status and checkpoints."""
    job = jobs / name
    for sub in ("config", "logs", "checkpoints", "debug"):
        (job / sub).mkdir(parents=True)
    (job / "config" / "job_spec.json").write_text(json.dumps({"workload": workload, "submission_id": name}))
    (job / "logs" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "data": {"train/loss": loss}}) + "\n" for step, loss in enumerate(losses, 1)))
    if verdict:
        (job / "logs" / "status.json").write_text(json.dumps(verdict))
    for step in checkpoint_steps:  # one rank's shards: a complete checkpoint of world size 1
        folder = job / "checkpoints" / ("global_step_%d" % step)
        folder.mkdir()
        for kind in ("model", "optim", "extra_state"):
            (folder / ("%s_world_size_1_rank_0.pt" % kind)).write_text("weights")
    if checkpoint_steps:
        (job / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(str(max(checkpoint_steps)))
    return job


def summary(*argv):
    done = subprocess.run([sys.executable, SCRIPT] + list(argv), capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def test_a_trained_job(tmp_path):
    losses = [2.5, 2.0, 1.25, 1.0]
    verdict = {"verdict": "trained", "summary": "trained %d of %d steps" % (len(losses), len(losses)),
               "steps": {"logged": len(losses), "last": len(losses), "planned": len(losses)}}
    job = make_job(tmp_path, "sft-a", "sft", losses, verdict, checkpoint_steps=(2, 4))
    code, out = summary("--jobs-dir", str(tmp_path), "--submission-id", "sft-a")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "== summary of job sft-a (sft) =="
    assert verdict["summary"] in lines[1]
    assert "train/loss first %.4g (step 1) -> last %.4g (step %d)" % (losses[0], losses[-1], len(losses)) in out
    assert "%s (newest complete: global_step_4)" % (job / "checkpoints") in out
    assert str(job / "logs" / "metrics.jsonl") in out
    assert lines[-1] == "compare runs: ansible-playbook report.yml -e workload=sft -e last=2"


def test_newest_of_a_workload_a_failed_job_and_no_job(tmp_path):
    make_job(tmp_path, "grpo-a", "grpo", [1.0])
    failed = {"verdict": "failed", "cause": "hang", "summary": "hung after step 1"}
    make_job(tmp_path, "sft-b", "sft", [3.0], failed)
    os.utime(tmp_path / "grpo-a" / "config" / "job_spec.json", (1, 1))  # the older one
    code, out = summary("--jobs-dir", str(tmp_path), "--workload", "sft")
    assert code == 1 and "sft-b" in out and failed["summary"] in out
    code, out = summary("--jobs-dir", str(tmp_path), "--workload", "ppo")
    assert code == 2 and "no job" in out
