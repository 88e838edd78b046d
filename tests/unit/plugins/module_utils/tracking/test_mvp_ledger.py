"""The GPU-hour ledger of a run (module_utils mvp_ledger), from job directories the tests write.

Each test chooses the phases of its run - start-up S, step time T, a checkpoint of C seconds, a failure gap G
after step m, a next attempt resumed at step r after a heal of H - writes the files an attempt leaves (its job
spec, queue.json, status.json, steps.jsonl stamps, metrics.jsonl, checkpoint folders with chosen modification
times, the job controller's restart/continued/stopped_by/run_end files) and asserts each bucket equals the figure
computed from those inputs, and that the buckets close.
"""
import json
import os

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger

GPUS_PER_NODE, NODES = 2, 1
GPUS = GPUS_PER_NODE * NODES
S, T, C, G, H, E = 30.0, 10.0, 4.0, 7.0, 12.0, 5.0   # start-up, step, checkpoint, failure gap, heal, shutdown
EPOCH = 1795900000.0
VERDICT_S = 45.0  # the entrypoint's verdict after the trainer's exit (it waits for Ray to declare a node dead)


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        if isinstance(value, (dict, list)):
            json.dump(value, handle)
        else:
            handle.write(value)


def attempt(jobs, sid, start, stamps, end=None, verdict=None, cause=None, save_freq=0, resumed=0, metrics=None,
            saved=None, gate=None, extra=None, request=None):
    """Write one attempt's job directory.

    :param stamps: list of (step, at). :param end: Ray's end (s) or None (running, no status.json).
    :param metrics: {step: {metric: value}}. :param saved: {step: newest file mtime} (checkpoint folders).
    :param gate: (gate_started_s, admitted_at_s) or None. :param extra: {file name: JSON}.
    """
    folder = os.path.join(jobs, sid)
    overrides = {"trainer.nnodes": NODES, "trainer.n_gpus_per_node": GPUS_PER_NODE}
    if save_freq:
        overrides["trainer.save_freq"] = save_freq
    spec = {"submission_id": sid, "workload": "sft", "code_id": "v0.5.0", "trainer_overrides": overrides,
            "priority": {"class": "normal", "value": 0}, "owner": "alice", "team": "nlp", "project": None,
            "resume_from": {"step": resumed} if resumed else None, "request": request or {}}
    write(os.path.join(folder, "config", "job_spec.json"), spec)
    lines = [{"event": "start", "at": start - 1.0}] + [{"step": n, "at": at} for n, at in stamps]
    if end is not None:
        # the trainer exits at ``end`` (its GPUs are free); Ray ends the job after the entrypoint's verdict
        lines.append({"event": "trainer_exit", "at": end, "code": 0 if verdict == "trained" else 1})
    write(os.path.join(folder, "logs", "steps.jsonl"), "".join(json.dumps(x) + "\n" for x in lines))
    rows = []
    for n, _at in stamps:
        rows.append({"step": n, "data": dict({"train/loss": 1.0}, **(metrics or {}).get(n, {}))})
    write(os.path.join(folder, "logs", "metrics.jsonl"), "".join(json.dumps(x) + "\n" for x in rows))
    if end is not None:
        write(os.path.join(folder, "logs", "status.json"),
              {"status": "SUCCEEDED" if verdict == "trained" else "FAILED", "start_time": int(start * 1000),
               "end_time": int((end + VERDICT_S) * 1000), "verdict": verdict, "cause": cause,
               "steps": {"resumed": resumed, "planned": 8, "last": stamps[-1][0] if stamps else None}})
    if gate:
        write(os.path.join(folder, "logs", "queue.json"),
              {"state": "admitted", "gate_started_s": gate[0], "admitted_at_s": gate[1]})
    os.makedirs(os.path.join(folder, "checkpoints"), exist_ok=True)
    for step, mtime in (saved or {}).items():
        shard = os.path.join(folder, "checkpoints", "global_step_%d" % step, "model_world_size_2_rank_0.pt")
        write(shard, "x")
        os.utime(shard, (mtime, mtime))
    if saved:
        write(os.path.join(folder, "checkpoints", "latest_checkpointed_iteration.txt"), str(max(saved)))
    for name, value in (extra or {}).items():
        write(os.path.join(folder, "logs", name), value)
    return folder


def end_run(jobs, run, trained, attempts, verdict):
    write(os.path.join(jobs, run, "logs", "run_end.json"),
          {"run": run, "state": "ended", "trained": trained, "attempts": attempts, "verdict": verdict})


def closes(ledger):
    """The buckets of the run and of each attempt add up to what each held (1%), unaccounted near zero."""
    for part in [ledger] + ledger["attempts"]:
        total = sum(part["buckets"][name] for name in mvp_ledger.BUCKETS)
        assert abs(total - part["gpu_seconds_held"]) <= 0.01 * part["gpu_seconds_held"] + 1e-9
        assert abs(part["buckets"]["unaccounted"]) <= 1e-6 * max(1.0, part["gpu_seconds_held"])
        # the same buckets in wall seconds: GPU-seconds over the GPUs held, and their sum the seconds held
        gpus = part["gpus"]
        assert set(part["seconds"]) == set(mvp_ledger.BUCKETS)
        for name in mvp_ledger.BUCKETS:
            assert part["seconds"][name] * gpus == pytest.approx(part["buckets"][name], abs=1e-6)
        assert sum(part["seconds"].values()) == pytest.approx(part["seconds_held"], abs=1e-6)
    assert set(ledger["buckets"]) == set(mvp_ledger.BUCKETS)


def buckets(**seconds):
    """Expected GPU-seconds: wall seconds x GPUS, every other bucket 0."""
    return {name: seconds.get(name, 0.0) * GPUS for name in mvp_ledger.BUCKETS}


def same(got, want):
    assert set(got) == set(want)
    for name in want:
        assert got[name] == pytest.approx(want[name], abs=1e-6), name


def test_a_clean_run_with_logged_timings(tmp_path):
    """PPO-like: timing_s/step and timing_s/save_checkpoint logged; a checkpoint of C at step 3, inside the step."""
    jobs = str(tmp_path)
    start, queued = EPOCH, 10.0
    at, stamps, metrics = start + S + T, [], {}
    for n in range(1, 6):
        stamps.append((n, at))
        metrics[n] = {"timing_s/step": T + (C if n == 3 else 0.0)}
        if n == 3:
            metrics[n]["timing_s/save_checkpoint"] = C
        at += T + (C if n == 3 else 0.0)  # step n+1's line comes T (+C) after step n's
    end = stamps[-1][1] + E
    attempt(jobs, "run", start, stamps, end, "trained", metrics=metrics, gate=(start - queued, start))
    end_run(jobs, "run", True, ["run"], {"verdict": "trained", "cause": None})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end + 60)
    same(ledger["buckets"], buckets(startup=S, productive=5 * T, checkpoint=C, shutdown=E))
    held = (end - start) * GPUS
    assert ledger["gpu_seconds_held"] == pytest.approx(held)
    assert ledger["goodput"] == pytest.approx(5 * T * GPUS / held)
    assert ledger["no_gpu"] == {"queue_wait_s": pytest.approx(queued), "heal_s": 0.0}
    assert ledger["steps"] == {"productive": 5, "recomputed": 0, "lost": 0, "planned": 8}
    assert ledger["state"] == "ended" and ledger["verdict"] == "trained" and ledger["ended_at"] == pytest.approx(end)
    assert (ledger["owner"], ledger["team"], ledger["project"], ledger["workload"], ledger["code_id"],
            ledger["priority"], ledger["gpus"]) == ("alice", "nlp", None, "sft", "v0.5.0", "normal", GPUS)
    assert ledger["submitted_at"] == pytest.approx(start - queued) and ledger["estimates"] == []
    closes(ledger)


def test_a_node_lost_run_continued_recomputes_the_steps_after_the_checkpoint(tmp_path):
    """SFT-like (no timings): save_freq 2, each save C after the step's line; a fault G after step m=5; the next
    attempt resumes at r=4 after a heal H, trains 5-8 and ends trained with a final save C and a shutdown E."""
    jobs, m, r = str(tmp_path), 5, 4
    start = EPOCH
    stamps, at, saved = [], start + S + T, {}
    for n in range(1, m + 1):
        stamps.append((n, at))
        if n % 2 == 0:
            saved[n] = at + C
        at += T + (C if n % 2 == 0 else 0.0)
    end1 = stamps[-1][1] + G
    attempt(jobs, "run", start, stamps, end1, "failed", "node_lost", save_freq=2, saved=saved,
            extra={"stopped_by.json": {"cause": "node_lost"}, "restart.json": {"next": "run-r1"},
                   "continued.json": {"next": "run-r1", "heal_s": H, "ended_at": end1 * 1000}})
    start2 = end1 + H
    stamps2, at, saved2 = [], start2 + S + T, {}
    for n in range(r + 1, 9):
        stamps2.append((n, at))
        if n % 2 == 0:
            saved2[n] = at + C
        at += T + (C if n % 2 == 0 else 0.0)
    end2 = stamps2[-1][1] + C + E
    attempt(jobs, "run-r1", start2, stamps2, end2, "trained", save_freq=2, resumed=r, saved=saved2)
    end_run(jobs, "run", True, ["run", "run-r1"], {"verdict": "trained"})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end2 + 1)
    first, second = ledger["attempts"]
    same(first["buckets"], buckets(startup=S, productive=r * T, recomputed=(m - r) * T, checkpoint=2 * C,
                                   failure_gap=G))
    same(second["buckets"], buckets(startup=S, productive=4 * T, checkpoint=2 * C, shutdown=E))
    assert ledger["buckets"]["recomputed"] == pytest.approx((m - r) * T * GPUS)
    assert first["steps"] == {"first": 1, "last": m, "resumed": 0, "productive": r, "recomputed": m - r, "lost": 0}
    assert second["steps"]["resumed"] == r and second["steps"]["first"] == r + 1
    assert ledger["no_gpu"]["heal_s"] == pytest.approx(H) and first["heal_s"] == pytest.approx(H)
    assert first["cause"] == "node_lost" and ledger["steps"]["recomputed"] == m - r
    assert any(note.startswith("checkpoint:") for note in ledger["estimates"])
    closes(ledger)


def test_a_preempted_run_hands_over_after_its_checkpoint_and_its_next_attempt_waits_in_the_queue(tmp_path):
    jobs, k, P, Q = str(tmp_path), 4, 9.0, 25.0
    start = EPOCH
    stamps = [(n, start + S + n * T) for n in range(1, k + 1)]
    end1 = stamps[-1][1] + C + P
    attempt(jobs, "run", start, stamps, end1, "failed", "preempted", save_freq=k, saved={k: stamps[-1][1] + C},
            extra={"stopped_by.json": {"cause": "preempted", "at_s": stamps[-1][1] + C},
                   "preempt.json": {"state": "stopped", "decided_at_s": stamps[1][1]},
                   "restart.json": {"next": "run-r1"}, "continued.json": {"heal_s": 0.0}})
    start2 = end1 + Q
    stamps2 = [(n, start2 + S + (n - k) * T) for n in range(k + 1, k + 3)]
    end2 = stamps2[-1][1] + E
    attempt(jobs, "run-r1", start2, stamps2, end2, "trained", resumed=k, gate=(end1, start2))
    end_run(jobs, "run", True, ["run", "run-r1"], {"verdict": "trained"})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end2 + 1)
    same(ledger["attempts"][0]["buckets"], buckets(startup=S, productive=k * T, checkpoint=C, preemption=P))
    same(ledger["attempts"][1]["buckets"], buckets(startup=S, productive=2 * T, shutdown=E))
    assert ledger["attempts"][1]["queue_wait_s"] == pytest.approx(Q) and ledger["attempts"][0]["queue_wait_s"] == 0
    assert ledger["no_gpu"]["queue_wait_s"] == pytest.approx(Q)
    closes(ledger)


def test_a_hang_stopped_by_the_watchdog_loses_the_steps_without_a_checkpoint(tmp_path):
    jobs, W = str(tmp_path), 60.0
    start = EPOCH
    stamps = [(n, start + S + n * T) for n in range(1, 4)]
    end = stamps[-1][1] + W
    attempt(jobs, "run", start, stamps, end, "failed", "hang", extra={"watchdog.json": {"hang": True}})
    end_run(jobs, "run", False, ["run"], {"verdict": "failed", "cause": "hang"})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end + 1)
    same(ledger["buckets"], buckets(startup=S, lost=3 * T, hang=W))
    assert ledger["goodput"] == 0 and ledger["steps"]["lost"] == 3
    assert ledger["verdict"] == "failed" and ledger["cause"] == "hang"
    closes(ledger)


def test_the_validation_before_training_is_start_up(tmp_path):
    """verl's val_before_train logs val/* at step 0: that line is no step, its time stays in the start-up."""
    jobs, V = str(tmp_path), 6.0
    stamps = [(0, EPOCH + S - V)] + [(n, EPOCH + S + n * T) for n in range(1, 4)]
    end = stamps[-1][1] + E
    attempt(jobs, "run", EPOCH, stamps, end, "trained", metrics={0: {"val/score": 0.5}})
    end_run(jobs, "run", True, ["run"], {"verdict": "trained"})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end)
    same(ledger["buckets"], buckets(startup=S, productive=3 * T, shutdown=E))
    assert ledger["attempts"][0]["steps"]["first"] == 1
    closes(ledger)


def test_an_attempt_that_never_reached_a_step_is_all_start_up(tmp_path):
    jobs, X = str(tmp_path), 42.0
    attempt(jobs, "run", EPOCH, [], EPOCH + X, "failed", "oom")
    end_run(jobs, "run", False, ["run"], {"verdict": "failed", "cause": "oom"})
    ledger = mvp_ledger.compute_ledger(jobs, "run", EPOCH + 100)
    same(ledger["buckets"], buckets(startup=X))
    assert ledger["attempts"][0]["steps"]["first"] is None
    closes(ledger)


def test_a_running_run_counts_to_now_and_the_step_under_way_as_productive(tmp_path):
    jobs, under_way = str(tmp_path), 2.5
    start = EPOCH
    stamps = [(n, start + S + n * T) for n in range(1, 4)]
    attempt(jobs, "run", start, stamps, gate=(start - 3.0, start))  # no status.json yet: Ray has not ended it
    now = stamps[-1][1] + under_way
    ledger = mvp_ledger.compute_ledger(jobs, "run", now)
    same(ledger["buckets"], buckets(startup=S, productive=3 * T + under_way))
    assert ledger["state"] == "running" and ledger["ended_at"] is None and ledger["verdict"] is None
    assert ledger["attempts"][0]["ended_at"] is None and ledger["computed_at"] == now
    assert mvp_ledger.goodput_so_far(ledger) == "goodput so far %.0f%%" % (
        100 * (3 * T + under_way) / (S + 3 * T + under_way))
    closes(ledger)


def test_the_cache_reads_only_what_was_added_and_nothing_for_an_unchanged_run(tmp_path, monkeypatch):
    jobs = str(tmp_path)
    start = EPOCH
    stamps = [(n, start + S + n * T) for n in range(1, 4)]
    folder = attempt(jobs, "run", start, stamps, gate=(start, start))
    cache = mvp_ledger.LedgerCache()
    starts = []
    real = mvp_ledger.read_metrics
    monkeypatch.setattr(mvp_ledger, "read_metrics", lambda path, **kw: starts.append(kw["start"]) or real(path, **kw))
    sig = mvp_ledger.run_signature(jobs, "run")
    before = mvp_ledger.compute_ledger(jobs, "run", stamps[-1][1], cache)
    assert mvp_ledger.run_signature(jobs, "run") == sig
    again = mvp_ledger.compute_ledger(jobs, "run", stamps[-1][1], cache)
    assert again == before and starts == [0]  # unchanged: the metrics file is not read again
    metrics = os.path.join(folder, "logs", "metrics.jsonl")
    size = os.path.getsize(metrics)
    with open(metrics, "a") as handle:
        handle.write(json.dumps({"step": 4, "data": {}}) + "\n")
    with open(os.path.join(folder, "logs", "steps.jsonl"), "a") as handle:
        handle.write(json.dumps({"step": 4, "at": stamps[-1][1] + T}) + "\n")
    assert mvp_ledger.run_signature(jobs, "run") != sig
    after = mvp_ledger.compute_ledger(jobs, "run", stamps[-1][1] + T, cache)
    assert starts == [0, size]  # only the added line was read
    assert after["buckets"]["productive"] == pytest.approx(4 * T * GPUS)


def test_summary_line_names_goodput_and_the_buckets_in_minutes(tmp_path):
    gpus = 2
    ledger = {"gpus": gpus, "goodput": 0.86, "gpu_seconds_held": 3600.0 * gpus,
              "buckets": dict({name: 0.0 for name in mvp_ledger.BUCKETS}, productive=41 * 60.0 * gpus,
                              startup=4 * 60.0 * gpus, recomputed=3 * 60.0 * gpus),
              "no_gpu": {"queue_wait_s": 90.0, "heal_s": 0.0}}
    assert mvp_ledger.summary_line(ledger) == (
        "goodput 86%%: 41 min productive, 4 min start-up, 3 min recomputed; %.2f GPU-h held by 2 GPU(s); "
        "no GPU: 1.5 min queue" % (3600.0 * gpus / 3600.0))
    ledger["buckets"]["hang"] = 30.0 * gpus  # half a minute: shown in tenths, after the larger buckets
    assert ", 3 min recomputed, 0.5 min hang;" in mvp_ledger.summary_line(ledger)


def test_a_run_without_a_job_directory_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no job directory"):
        mvp_ledger.compute_ledger(str(tmp_path), "missing", 0.0)


def test_a_job_of_no_gpu_has_its_buckets_in_wall_seconds(tmp_path):
    """A script job (the selftest) reserves no GPU: GPU-seconds 0, the same buckets in wall seconds."""
    jobs = str(tmp_path)
    stamps = [(n, EPOCH + S + n * T) for n in range(1, 5)]
    end = stamps[-1][1] + G
    folder = attempt(jobs, "run", EPOCH, stamps, end, "failed", "unknown")
    spec_path = os.path.join(folder, "config", "job_spec.json")
    with open(spec_path) as handle:
        spec = json.load(handle)
    spec["trainer_overrides"], spec["gpus_requested"] = {}, 0
    write(spec_path, spec)
    end_run(jobs, "run", False, ["run"], {"verdict": "failed", "cause": "unknown"})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end + 10)
    assert ledger["gpus"] == 0 and ledger["gpu_seconds_held"] == 0.0 and ledger["goodput"] is None
    assert ledger["seconds_held"] == pytest.approx(end - EPOCH)
    # no checkpoint: every step is lost with the run, the time after the last step is the failure gap
    want = {name: 0.0 for name in mvp_ledger.BUCKETS}
    want.update(startup=S, lost=4 * T, failure_gap=G)
    same(ledger["seconds"], want)
    same(ledger["attempts"][0]["seconds"], want)


def test_the_entrypoints_verdict_after_the_trainers_exit_holds_no_gpu(tmp_path):
    """Held ends at the trainer's exit stamp; Ray's end_time comes VERDICT_S later (the entrypoint's verdict), and
    without the stamp (a node that died with the entrypoint) Ray's end_time is the end."""
    jobs = str(tmp_path)
    stamps = [(n, EPOCH + S + n * T) for n in range(1, 4)]
    end = stamps[-1][1] + E
    attempt(jobs, "run", EPOCH, stamps, end, "trained")
    end_run(jobs, "run", True, ["run"], {"verdict": "trained", "cause": None})
    ledger = mvp_ledger.compute_ledger(jobs, "run", end + 100)
    assert ledger["seconds_held"] == pytest.approx(end - EPOCH)
    same(ledger["buckets"], buckets(startup=S, productive=3 * T, shutdown=E))
    path = os.path.join(jobs, "run", "logs", "steps.jsonl")
    with open(path) as handle:
        kept = [line for line in handle if "trainer_exit" not in line]
    write(path, "".join(kept))
    ledger = mvp_ledger.compute_ledger(jobs, "run", end + 100)
    assert ledger["seconds_held"] == pytest.approx(end + VERDICT_S - EPOCH)
    same(ledger["buckets"], buckets(startup=S, productive=3 * T, shutdown=E + VERDICT_S))


def test_a_run_of_no_gpu_says_so_in_wall_minutes_and_an_attempt_not_started_yet_closes(tmp_path):
    """A script job's summary: 'no GPU held' with its wall minutes (not GPU-hours of a made-up GPU); and a run whose
    only attempt has no start yet (just handed over) gets a ledger, all zero (it raised KeyError 'seconds')."""
    ledger = {"gpus": 0, "goodput": None, "gpu_seconds_held": 0.0, "buckets": {n: 0.0 for n in mvp_ledger.BUCKETS},
              "seconds": dict({n: 0.0 for n in mvp_ledger.BUCKETS}, startup=120.0, lost=30.0), "no_gpu": {}}
    assert mvp_ledger.summary_line(ledger) == "no GPU held: 0.0 min productive, 2 min start-up, 0.5 min lost"
    jobs = str(tmp_path)
    folder = os.path.join(jobs, "run")
    write(os.path.join(folder, "config", "job_spec.json"), {"submission_id": "run", "workload": "sft"})
    os.makedirs(os.path.join(folder, "logs"))
    empty = mvp_ledger.compute_ledger(jobs, "run", EPOCH)
    assert empty["state"] == "running" and empty["seconds_held"] == 0.0 and empty["gpu_seconds_held"] == 0.0
    assert empty["seconds"] == {n: 0.0 for n in mvp_ledger.BUCKETS} == empty["attempts"][0]["seconds"]


def test_a_step_logged_after_the_last_stamp_of_an_ended_attempt_is_counted_at_the_metrics_files_last_write(tmp_path):
    """A node killed within the stamper's 0.25 s after a step's line: the step is in metrics.jsonl, not stamped. It
    is counted (recomputed here) at the metrics file's last write, and the failure gap runs from there to the end."""
    jobs, m, r = str(tmp_path), 6, 4
    stamps = [(n, EPOCH + S + n * T) for n in range(1, m + 1)]
    line_at, end = stamps[-1][1], stamps[-1][1] + G
    folder = attempt(jobs, "run", EPOCH, stamps, end, "failed", "node_lost",
                     extra={"restart.json": {"next": "run-r1"}})
    steps_path = os.path.join(folder, "logs", "steps.jsonl")
    with open(steps_path) as handle:
        kept = [line for line in handle if '"step": %d,' % m not in line and "trainer_exit" not in line]
    write(steps_path, "".join(kept))  # the last step's stamp never came (nor the exit: the node died)
    metrics_path = os.path.join(folder, "logs", "metrics.jsonl")
    os.utime(metrics_path, (line_at, line_at))
    attempt(jobs, "run-r1", end + H, [(n, end + H + S + (n - r) * T) for n in range(r + 1, 9)], end + H + S + 5 * T,
            "trained", resumed=r)
    end_run(jobs, "run", True, ["run", "run-r1"], {"verdict": "trained"})
    first = mvp_ledger.compute_ledger(jobs, "run", end + 1000)["attempts"][0]
    assert first["steps"]["last"] == m and first["steps"]["recomputed"] == m - r
    ray_end = end + VERDICT_S  # no exit stamp: Ray's end_time holds
    want = {name: 0.0 for name in mvp_ledger.BUCKETS}
    want.update(startup=S, productive=r * T, recomputed=(m - r) * T, failure_gap=ray_end - line_at)
    same(first["seconds"], want)
