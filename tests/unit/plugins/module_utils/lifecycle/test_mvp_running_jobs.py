"""mvp_running_jobs: the jobs a cluster play would interrupt, what a restart costs them, and the refusal.
Job directories are real folders (metrics lines and checkpoint folders as verl writes them); expected
steps are computed from what each test writes."""
import json

import mvp_running_jobs

NODES = [{"node_id": "h", "node_ip": "10.0.0.1"}, {"node_id": "w0", "node_ip": "10.0.0.2"},
         {"node_id": "w1", "node_ip": "10.0.0.3"}]


def job_dir(tmp_path, name, steps, checkpoints=(), tracker=None):
    """A job directory with ``steps`` metrics lines and complete ``global_step_N`` checkpoints (SFT's layout)."""
    folder = tmp_path / name
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "data": {"train/loss": 1.0 / s}}) + "\n" for s in steps))
    for step in checkpoints:
        ckpt = folder / "checkpoints" / ("global_step_%d" % step)
        ckpt.mkdir(parents=True)
        for rank in range(2):
            (ckpt / ("model_world_size_2_rank_%d.pt" % rank)).write_bytes(b"x")
    if checkpoints:
        (folder / "checkpoints" / "latest_checkpointed_iteration.txt").write_text(str(tracker or max(checkpoints)))
    return str(folder)


def test_progress_reads_the_last_step_and_the_newest_complete_checkpoint(tmp_path):
    steps, ckpts = list(range(1, 13)), (5, 10)
    got = mvp_running_jobs.progress(job_dir(tmp_path, "a", steps, ckpts))
    assert got == {"last_step": max(steps), "checkpoint_step": max(ckpts), "steps_at_risk": max(steps) - max(ckpts)}
    # verl had not finished writing global_step_10 (the tracker still says 5): the checkpoint is 5.
    got = mvp_running_jobs.progress(job_dir(tmp_path, "b", steps, ckpts, tracker=5))
    assert got["checkpoint_step"] == 5 and got["steps_at_risk"] == max(steps) - 5
    got = mvp_running_jobs.progress(job_dir(tmp_path, "c", [1, 2, 3]))
    assert got == {"last_step": 3, "checkpoint_step": None, "steps_at_risk": 3}
    assert mvp_running_jobs.progress("") == {"last_step": 0, "checkpoint_step": None, "steps_at_risk": 0}
    assert mvp_running_jobs.progress(str(tmp_path / "missing"))["last_step"] == 0


def test_active_jobs_are_the_pending_and_running_ones_with_their_nodes(tmp_path):
    running = job_dir(tmp_path, "sft-1", [1, 2, 3, 4], (2, 4))
    jobs = [
        {"submission_id": "done", "status": "SUCCEEDED", "start_time": 1, "metadata": {"job_dir": "/x"}},
        {"submission_id": "sft-1", "status": "RUNNING", "start_time": 3, "driver_node_id": "w0",
         "metadata": {"job_dir": running}},
        {"submission_id": "queued", "status": "PENDING", "start_time": 2, "driver_node_id": None, "metadata": {}},
    ]
    actors = {"sft-1": ["10.0.0.3", "10.0.0.2"], "queued": []}
    rows = mvp_running_jobs.active_jobs(jobs, NODES, actor_ips=lambda job: actors[job["submission_id"]])
    assert [r["submission_id"] for r in rows] == ["queued", "sft-1"]  # oldest first, terminal ones left out
    queued, sft = rows
    assert sft["node_ips"] == sorted({"10.0.0.2", "10.0.0.3"}) and sft["metadata"] == {"job_dir": running}
    assert (sft["last_step"], sft["checkpoint_step"], sft["steps_at_risk"]) == (4, 4, 0)
    assert queued["node_ips"] == [] and queued["job_dir"] == "" and queued["metadata"] == {}


def test_a_change_hits_the_jobs_on_its_node_and_the_head_or_an_unknown_node_hits_all():
    one = {"submission_id": "one", "node_ips": ["10.0.0.2"]}
    two = {"submission_id": "two", "node_ips": ["10.0.0.2", "10.0.0.3"]}
    unknown = {"submission_id": "unknown", "node_ips": []}
    active = [one, two, unknown]
    w1 = {"host": "worker-1", "node_ip": "10.0.0.3", "head": False, "reason": "restart Ray (its settings change)"}
    hit = mvp_running_jobs.interrupted(active, [w1])
    assert [j["submission_id"] for j in hit] == ["two", "unknown"] and hit[0]["changes"] == ["worker-1"]
    quiet = [dict(w1, reason=""), {"host": "worker-0", "node_ip": "10.0.0.2", "head": False, "reason": ""}]
    assert mvp_running_jobs.interrupted(active, quiet) == []
    head = {"host": "head", "node_ip": "10.0.0.1", "head": True, "reason": "restart Ray on the head"}
    assert [j["submission_id"] for j in mvp_running_jobs.interrupted(active, [head])] == ["one", "two", "unknown"]
    no_ip = {"host": "worker-9", "node_ip": "", "head": False, "reason": "recreate its container"}
    assert len(mvp_running_jobs.interrupted(active, [no_ip])) == len(active)


def test_the_refusal_names_the_changes_the_jobs_their_cost_and_the_ways_on():
    job = {"submission_id": "sft-1", "status": "RUNNING", "node_ips": ["10.0.0.2"], "last_step": 12,
           "checkpoint_step": 10, "steps_at_risk": 2}
    change = {"host": "worker-0", "node_ip": "10.0.0.2", "head": False, "reason": "restart Ray (its settings change)"}
    text = mvp_running_jobs.refusal([job], [change], "site.yml")
    for part in ("site.yml", "worker-0: restart Ray (its settings change)", "sft-1 (RUNNING on 10.0.0.2)",
                 "last step 12", "checkpoint step 10", "trains 2 steps again", "Nothing was changed",
                 "-e mvp_running_jobs=wait", "-e mvp_running_jobs=restart", "job controller", "cluster_changed",
                 "max_restarts", "job_controller_restart_causes"):
        assert part in text, part
    fresh = mvp_running_jobs.job_line(dict(job, last_step=0, checkpoint_step=None, steps_at_risk=0))
    assert fresh.endswith("no step logged yet")
    bare = mvp_running_jobs.job_line(dict(job, checkpoint_step=None, steps_at_risk=12))
    assert "no complete checkpoint" in bare and "all 12 steps" in bare
