"""ray_job_info's chunked wait (issue 42): ``wait_at_most`` returns before the end with ``done: false`` and a
``wait_state`` that lets the next call continue the same deadlines; ``progress`` reads the job directory.
A chunked wait asks the dashboard no more often per minute than one long call.
"""
import json

from ansible_collections.mvp.ray.plugins.modules.ray_job_info import main

ADDRESS = "http://127.0.0.1:8265"


def args(**options):
    return dict({"address": ADDRESS, "submission_id": "job-1"}, **options)


def follow_in_chunks(run_module, options, chunk):
    """Call the module as the action plugin ray_job_follow does; return (results, calls)."""
    results, state = [], {}
    while True:
        result = run_module(main, dict(options, wait_at_most=chunk, wait_state=state))
        results.append(result)
        if result.get("failed") or result.get("done", True):
            return results
        state = result["wait_state"]


def test_a_chunk_returns_before_the_end_and_the_next_one_continues(fake_ray, clock, run_module, cluster_nodes):
    fake_ray.add_job("job-1", "RUNNING", driver_node_id=cluster_nodes[1]["node_id"])
    poll, chunk, reads_to_end = 1.0, 10, 25
    fake_ray.then("job-1", *(["RUNNING"] * (reads_to_end - 1) + [{"status": "SUCCEEDED", "driver_exit_code": 0}]))

    results = follow_in_chunks(run_module, args(wait="terminal", poll_interval=poll), chunk)

    assert [r["done"] for r in results] == [False] * (len(results) - 1) + [True]
    assert all("placement" not in r for r in results[:-1]) and results[-1]["placement"]["driver_node_ip"]
    assert results[-1]["job"]["status"] == "SUCCEEDED"
    # each chunk waited chunk seconds; the state carries the time waited and running
    assert [r["wait_state"]["waited_s"] for r in results[:-1]] == [chunk * (i + 1) for i in range(len(results) - 1)]
    assert results[-1]["wait_state"]["running_s"] == results[-1]["wait_state"]["waited_s"] == clock.elapsed


def test_running_timeout_counts_from_the_first_chunk(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")
    options = args(wait="terminal", running_timeout=60, poll_interval=5)

    results = follow_in_chunks(run_module, options, 25)

    assert len(results) == 3 and results[-1]["failed"]
    assert results[-1]["msg"].startswith("Ray job job-1 still RUNNING after running_timeout=60s")
    assert options["running_timeout"] < clock.elapsed <= options["running_timeout"] + options["poll_interval"]


def test_pending_timeout_counts_from_the_first_chunk(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "PENDING")

    results = follow_in_chunks(run_module, args(wait="terminal", pending_timeout=50, poll_interval=5), 20)

    assert results[-1]["failed"] and results[-1]["stalled"] and 50 < clock.elapsed <= 55


def requests_per_minute(fake_ray, clock):
    return len(fake_ray.clients) * 60.0 / clock.elapsed


def test_a_chunked_wait_asks_the_dashboard_no_more_often(fake_ray, clock, run_module, cluster_nodes):
    """The round trips of docs/benchmarks.md: HTTP requests per minute of waiting, one call vs chunks of 30 s."""
    fake_ray.add_job("job-1", "RUNNING", job_id="02000000", driver_node_id=cluster_nodes[1]["node_id"])
    minutes, poll = 5, 0.25
    reads = int(minutes * 60 / poll)
    moves = ["RUNNING"] * reads + [{"status": "SUCCEEDED", "driver_exit_code": 0}]
    options = args(wait="terminal", poll_interval=poll, pg_pending_timeout=180, running_timeout=7200)

    fake_ray.then("job-1", *moves)
    run_module(main, options)
    one_call = requests_per_minute(fake_ray, clock)

    fake_ray.clients[:] = []
    clock.start = clock.now
    fake_ray.jobs["job-1"]["status"] = type(fake_ray.jobs["job-1"]["status"])("RUNNING")
    fake_ray.then("job-1", *moves)
    chunks = follow_in_chunks(run_module, options, 30)
    chunked = requests_per_minute(fake_ray, clock)

    assert len(chunks) >= minutes * 2
    assert sum(chunk["http_requests"] for chunk in chunks) == len(fake_ray.clients)  # what the module counts
    print("HTTP requests per minute: one call %.1f, chunks of 30 s %.1f" % (one_call, chunked))
    assert chunked <= one_call, (chunked, one_call)


def test_progress_is_read_from_the_job_directory(fake_ray, clock, run_module, tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "config").mkdir()
    losses = [2.5, 2.0, 1.5]
    (tmp_path / "logs" / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": i + 1, "data": {"train/loss": v}}) + "\n" for i, v in enumerate(losses)))
    (tmp_path / "logs" / "driver.log").write_text("Total training steps: 12\n")
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps({"submission_id": "job-1", "max_restarts": 2}))
    fake_ray.add_job("job-1", "RUNNING", metadata={"job_dir": str(tmp_path), "workload": "sft"})

    result = run_module(main, args(progress=True, progress_workloads={"sft": {"metrics": [{"key": "train/loss"}]}}))

    progress = result["progress"]
    assert progress["last_step"] == len(losses) and progress["planned"] == 12
    assert progress["first"] == [1, losses[0]] and progress["last"] == [len(losses), losses[-1]]
    assert progress["line"].startswith("job-1: RUNNING step %d/12 | train/loss %g -> %g" % (len(losses), losses[0], losses[-1]))
    assert "restarts 0 of 2 | watchdog off" in progress["line"]


def test_no_job_directory_no_progress(fake_ray, clock, run_module):
    fake_ray.add_job("job-1", "RUNNING")

    assert run_module(main, args(progress=True))["progress"] is None
