"""Unit tests of mvp_runs: job directories (spec, status, metrics, checkpoints) read as runs."""
import json
import math
import os

from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import (
    latest_checkpoint, list_job_dirs, read_metrics, read_run, world_size_of)

# (step, data) of each metrics line, in the order verl writes them. Step 8 is logged
# twice (train line, then val/loss on a line of its own, as verl's SFT trainer does).
TRAIN_LINES = [
    (1, {"train/loss": 6.2, "train/lr": 0.001}),
    (2, {"train/loss": 5.9, "train/lr": 0.002}),
    (3, {"train/loss": 5.1, "train/lr": 0.003}),
    (4, {"train/loss": 4.8, "train/lr": 0.003}),
    (5, {"train/loss": 4.9, "train/lr": 0.003}),
    (6, {"train/loss": 4.6, "train/lr": 0.003}),
    (7, {"train/loss": 4.5, "train/lr": 0.003}),
    (8, {"train/loss": 4.3, "train/lr": 0.003}),
]
VAL_LINES = [(8, {"val/loss": 4.4})]


def _write(path, text):
    """Write ``text`` to ``path``, creating its folders."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "w", encoding="utf-8") as handle:
        handle.write(text)


def _metric_lines(records):
    """JSON lines as verl's FileLogger writes them."""
    return "".join(json.dumps({"step": step, "data": data}) + "\n" for step, data in records)


def _expected_series(records):
    """Series per metric from (step, data) records: last value per step, sorted by step."""
    by_key = {}
    for step, data in records:
        for key, value in data.items():
            by_key.setdefault(key, {})[step] = float(value)
    return {key: [[s, v[s]] for s in sorted(v)] for key, v in by_key.items()}


def _make_job(jobs_dir, submission_id, spec=None, status=None, records=None, checkpoints=()):
    """Build a job directory the way submit.yml, ray_job and verl write it."""
    job = os.path.join(str(jobs_dir), submission_id)
    _write(os.path.join(job, "config", "job_spec.json"), json.dumps(spec if spec is not None else {}))
    if status is not None:
        _write(os.path.join(job, "logs", "status.json"), json.dumps(status))
    if records is not None:
        _write(os.path.join(job, "logs", "metrics.jsonl"), _metric_lines(records))
    for rel in checkpoints:
        _write(os.path.join(job, "checkpoints", rel), "x")
    return job


def test_series_are_sorted_by_step_and_split_per_metric(tmp_path):
    """Lines written out of order come back as one series per metric sorted by step."""
    records = TRAIN_LINES + VAL_LINES
    shuffled = records[4:] + records[:4]
    path = tmp_path / "metrics.jsonl"
    _write(path, _metric_lines(shuffled))
    result = read_metrics(str(path))
    assert result["series"] == _expected_series(records)
    for points in result["series"].values():
        assert [p[0] for p in points] == sorted(p[0] for p in points)
    assert result["last_step"] == max(step for step, _ in records)
    assert result["bad_lines"] == 0


def test_val_line_with_the_same_step_is_kept_next_to_the_train_line(tmp_path):
    """A val line that repeats a train step adds its metric without dropping the train values."""
    path = tmp_path / "metrics.jsonl"
    _write(path, _metric_lines(TRAIN_LINES + VAL_LINES))
    series = read_metrics(str(path))["series"]
    val_step, val_data = VAL_LINES[0]
    assert series["val/loss"] == [[val_step, val_data["val/loss"]]]
    train_at_val_step = [d["train/loss"] for s, d in TRAIN_LINES if s == val_step][-1]
    assert [val_step, train_at_val_step] in series["train/loss"]


def test_a_step_logged_twice_keeps_its_last_value(tmp_path):
    """When the same metric is logged twice for one step, the later line wins."""
    records = [(1, {"train/loss": 3.0}), (2, {"train/loss": 2.5}), (2, {"train/loss": 2.25})]
    path = tmp_path / "metrics.jsonl"
    _write(path, _metric_lines(records))
    points = read_metrics(str(path))["series"]["train/loss"]
    assert points == [[1, records[0][1]["train/loss"]], [2, records[2][1]["train/loss"]]]


def test_bad_lines_are_counted_and_skipped(tmp_path):
    """Half-written, non-object and data-less lines count as bad lines and do not stop reading."""
    good = TRAIN_LINES[:3]
    bad = [
        '{"step": 9, "data": {"train/l',      # half-written last line of a running job
        '[1, 2, 3]',                         # not an object
        '{"step": 10}',                      # no data
        '{"step": 11, "data": [1, 2]}',      # data not an object
        '{"data": {"train/loss": 1.0}}',     # no step
        '{"step": "x", "data": {}}',         # step not a number
    ]
    text = _metric_lines(good[:1]) + bad[1] + "\n" + _metric_lines(good[1:]) + "\n".join(bad[2:] + bad[:1])
    path = tmp_path / "metrics.jsonl"
    _write(path, text + "\n\n")
    result = read_metrics(str(path))
    assert result["bad_lines"] == len(bad)
    assert result["series"] == _expected_series(good)
    assert result["last_step"] == max(step for step, _ in good)


def test_non_finite_and_non_numeric_values_are_dropped(tmp_path):
    """NaN, infinities, bools, strings and null are dropped; ints become floats."""
    records = [
        (1, {"train/loss": 2.0, "train/grad_norm": float("nan"), "flag": True, "name": "sft"}),
        (2, {"train/loss": float("inf"), "train/grad_norm": 1.5, "flag": False, "none": None}),
        (3, {"train/loss": 1, "train/grad_norm": -float("inf")}),
    ]
    path = tmp_path / "metrics.jsonl"
    _write(path, _metric_lines(records))  # json.dumps writes NaN / Infinity as verl's logger does
    result = read_metrics(str(path))
    kept = [(step, {k: v for k, v in data.items()
                    if not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)})
            for step, data in records]
    assert result["series"] == _expected_series(kept)
    assert set(result["series"]) == {"train/loss", "train/grad_norm"}
    assert all(isinstance(v, float) for points in result["series"].values() for _, v in points)
    assert result["bad_lines"] == 0


def test_keys_filter_keeps_only_the_named_metrics(tmp_path):
    """``keys`` limits the series to the metrics asked for, but last_step still counts every line."""
    records = TRAIN_LINES + VAL_LINES
    path = tmp_path / "metrics.jsonl"
    _write(path, _metric_lines(records))
    result = read_metrics(str(path), keys=["val/loss", "not/logged"])
    assert result["series"] == {"val/loss": _expected_series(records)["val/loss"]}
    assert result["last_step"] == max(step for step, _ in records)


def test_missing_metrics_file_means_no_metrics(tmp_path):
    """A job that has not logged yet has no series, step 0 and no bad lines."""
    assert read_metrics(str(tmp_path / "logs" / "metrics.jsonl")) == {"series": {}, "last_step": 0, "bad_lines": 0, "end": 0}


KINDS = ("model", "optim", "extra_state")


def _save(ckpt, step, world, subdirs=("",), skip=(), empty=()):
    """Write a verl checkpoint folder: every kind's shard per rank (minus ``skip``, ``empty`` ones of size 0)."""
    folder = ckpt / ("global_step_%d" % step)
    for sub in subdirs:
        for kind in KINDS:
            for rank in range(world):
                name = "%s_world_size_%d_rank_%d.pt" % (kind, world, rank)
                rel = os.path.join(sub, name) if sub else name
                if rel in skip:
                    continue
                _write(folder / rel, "" if rel in empty else "weights")
    return folder


def test_latest_checkpoint_skips_a_folder_newer_than_the_tracker(tmp_path):
    """latest_checkpointed_iteration.txt names the newest finished save: a newer folder is skipped, and said."""
    ckpt = tmp_path / "checkpoints"
    for step in (4, 8):
        _save(ckpt, step, 2)
    _write(ckpt / "latest_checkpointed_iteration.txt", "4\n")
    found = latest_checkpoint(str(ckpt), world_size=2)
    assert (found["step"], found["path"], found["world_size"]) == (4, str(ckpt / "global_step_4"), 2)
    assert [s["step"] for s in found["skipped"]] == [8]
    assert "latest_checkpointed_iteration.txt (4)" in found["skipped"][0]["why"]


def test_latest_checkpoint_skips_a_checkpoint_missing_a_rank_for_the_one_before(tmp_path):
    """A missing rank shard (verl#4024) makes the newest incomplete; the one before is used."""
    ckpt = tmp_path / "checkpoints"
    world = 2
    _save(ckpt, 4, world)
    missing = "optim_world_size_%d_rank_%d.pt" % (world, world - 1)
    _save(ckpt, 8, world, skip=(missing,))
    _write(ckpt / "latest_checkpointed_iteration.txt", "8")
    found = latest_checkpoint(str(ckpt), world_size=world)
    assert found["step"] == 4
    assert found["skipped"][0]["step"] == 8
    assert "optim_world_size_%d_rank_{%d}.pt missing" % (world, world - 1) in found["skipped"][0]["why"]


def test_latest_checkpoint_checks_every_subfolder_and_empty_shards(tmp_path):
    """main_ppo saves actor/ and critic/: an empty critic shard makes that step incomplete."""
    ckpt = tmp_path / "checkpoints"
    _save(ckpt, 2, 1, subdirs=("actor", "critic"))
    _save(ckpt, 4, 1, subdirs=("actor", "critic"), empty=("critic/model_world_size_1_rank_0.pt",))
    _write(ckpt / "latest_checkpointed_iteration.txt", "4")
    found = latest_checkpoint(str(ckpt), world_size=1)
    assert found["step"] == 2
    assert "critic/model_world_size_1_rank_{0}.pt empty" in found["skipped"][0]["why"]


def test_latest_checkpoint_refuses_shards_of_another_world_size(tmp_path):
    """Shards written by 2 ranks do not serve a job of world size 4 (verl#2265): none is complete."""
    ckpt = tmp_path / "checkpoints"
    _save(ckpt, 4, 2)
    _write(ckpt / "latest_checkpointed_iteration.txt", "4")
    found = latest_checkpoint(str(ckpt), world_size=4)
    assert found["step"] is None and found["path"] is None
    assert "world size 2, the job has 4" in found["skipped"][0]["why"]
    assert latest_checkpoint(str(ckpt))["step"] == 4  # no world size given: the shards' own is used


def test_latest_checkpoint_without_a_tracker_trusts_only_an_older_folder(tmp_path):
    """No (or an unreadable) tracker: the newest of several folders may be half written and is skipped."""
    ckpt = tmp_path / "checkpoints"
    steps = [4, 8]
    for step in steps:
        _save(ckpt, step, 2)
    assert latest_checkpoint(str(ckpt))["step"] == min(steps)
    _write(ckpt / "latest_checkpointed_iteration.txt", "not a number")
    assert latest_checkpoint(str(ckpt))["step"] == min(steps)
    _write(ckpt / "latest_checkpointed_iteration.txt", "12")
    found = latest_checkpoint(str(ckpt))
    assert found["step"] == max(steps) and found["skipped"] == []


def test_latest_checkpoint_is_none_without_checkpoints(tmp_path):
    """No checkpoints folder, or one without global_step folders, gives None."""
    assert latest_checkpoint(str(tmp_path / "checkpoints")) is None
    _write(tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt", "4")
    os.makedirs(str(tmp_path / "checkpoints" / "global_step_x"))
    assert latest_checkpoint(str(tmp_path / "checkpoints")) is None


def test_world_size_from_files_in_the_step_folder_or_in_actor(tmp_path):
    """SFT shards sit in the step folder, main_ppo shards in actor/; no shard gives None."""
    sft = tmp_path / "global_step_4"
    _write(sft / "model_world_size_2_rank_0.pt", "x")
    _write(sft / "model_world_size_2_rank_1.pt", "x")
    ppo = tmp_path / "global_step_2"
    _write(ppo / "actor" / "model_world_size_4_rank_0.pt", "x")
    _write(ppo / "actor" / "huggingface" / "config.json", "{}")
    empty = tmp_path / "global_step_6"
    _write(empty / "data.pt", "x")
    assert world_size_of(str(sft)) == 2
    assert world_size_of(str(ppo)) == 4
    assert world_size_of(str(empty)) is None


def test_world_size_ignores_shards_deeper_than_one_level(tmp_path):
    """Only the step folder and its direct sub-folders are searched."""
    folder = tmp_path / "global_step_2"
    _write(folder / "actor" / "extra" / "model_world_size_8_rank_0.pt", "x")
    assert world_size_of(str(folder)) is None


def test_latest_checkpoint_reads_the_main_ppo_layout(tmp_path):
    """A main_ppo checkpoint reports the world size of its actor/ shards."""
    ckpt = tmp_path / "checkpoints"
    world = 4
    _save(ckpt, 2, world, subdirs=("actor",))
    _write(ckpt / "latest_checkpointed_iteration.txt", "2")
    assert latest_checkpoint(str(ckpt)) == {"step": 2, "path": os.path.join(str(ckpt), "global_step_2"),
                                            "world_size": world, "skipped": [], "tracker": 2,
                                            "entries": sorted(os.listdir(str(ckpt / "global_step_2")))}
    assert "actor" in latest_checkpoint(str(ckpt))["entries"]


def test_read_run_collects_spec_status_metrics_and_checkpoint(tmp_path):
    """read_run puts spec fields, recorded status, last values and the checkpoint together."""
    spec = {"workload": "sft", "code_id": "abc123", "model": "tiny",
            "resume_from": {"submission_id": "sft-old", "step": 4}, "repeat": {"group": "g", "index": 1, "count": 2}}
    status = {"submission_id": "sft-1", "status": "SUCCEEDED", "message": "", "start_time": 1000, "end_time": 9000}
    records = TRAIN_LINES + VAL_LINES
    job = _make_job(tmp_path / "jobs", "sft-1", spec=spec, status=status, records=records,
                    checkpoints=["global_step_%d/model_world_size_2_rank_%d.pt" % (step, rank)
                                 for step in (4, 8) for rank in (0, 1)])
    _write(os.path.join(job, "checkpoints", "latest_checkpointed_iteration.txt"), "8")
    with open(os.path.join(job, "logs", "metrics.jsonl"), "a", encoding="utf-8") as handle:
        handle.write('{"step": 9, "data": {"train/lo')
    run = read_run(job)
    expected = _expected_series(records)
    assert run["submission_id"] == "sft-1"
    assert run["job_dir"] == job
    assert run["spec"] == spec
    assert (run["workload"], run["code_id"], run["model"]) == ("sft", "abc123", "tiny")
    assert run["resume_from"] == spec["resume_from"]
    assert run["repeat"] == spec["repeat"]
    assert run["recorded_status"] == status
    assert run["series"] == expected
    assert run["last"] == {key: points[-1][1] for key, points in expected.items()}
    assert run["last_step"] == max(step for step, _ in records)
    assert run["bad_lines"] == 1
    assert run["checkpoint"]["step"] == 8 and run["checkpoint"]["world_size"] == 2
    assert run["created"] == os.stat(os.path.join(job, "config", "job_spec.json")).st_mtime


def test_read_run_without_series_and_with_a_trailing_slash(tmp_path):
    """with_series=False leaves out the series; the id comes from the folder name even with a trailing slash."""
    job = _make_job(tmp_path / "jobs", "sft-2", records=TRAIN_LINES)
    run = read_run(job + os.sep, keys=["train/loss"], with_series=False)
    assert "series" not in run
    assert run["submission_id"] == "sft-2"
    assert run["last"] == {"train/loss": TRAIN_LINES[-1][1]["train/loss"]}


def test_read_run_of_a_bare_folder_has_empty_fields(tmp_path):
    """A folder without any of the files reads as a run with nothing recorded."""
    folder = tmp_path / "jobs" / "empty"
    os.makedirs(str(folder))
    run = read_run(str(folder))
    assert run["spec"] is None and run["workload"] is None and run["created"] is None
    assert run["recorded_status"] is None and run["checkpoint"] is None and run["resume_from"] is None
    assert run["series"] == {} and run["last"] == {} and run["last_step"] == 0


def test_list_job_dirs_newest_first_and_skips_folders_without_a_spec(tmp_path):
    """Job folders are listed by job_spec.json time, newest first; others are skipped."""
    jobs = tmp_path / "jobs"
    times = {"job-a": 1000000, "job-b": 3000000, "job-c": 2000000}
    for name, mtime in times.items():
        job = _make_job(jobs, name)
        os.utime(os.path.join(job, "config", "job_spec.json"), (mtime, mtime))
    os.makedirs(str(jobs / "not-a-job" / "logs"))
    _write(jobs / "stray.txt", "x")
    listed = list_job_dirs(str(jobs))
    assert listed == sorted(((n, float(t)) for n, t in times.items()), key=lambda item: -item[1])
    assert [name for name, _ in listed] == ["job-b", "job-c", "job-a"]


def test_list_job_dirs_of_a_missing_folder_is_empty(tmp_path):
    """A shared root without jobs yet lists nothing."""
    assert list_job_dirs(str(tmp_path / "jobs")) == []


def test_preemption_text_says_both_sides():
    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import preemption_text
    victim = {"by": "grpo-h", "by_priority": 100, "priority": -100, "state": "stopped", "step": 20,
              "decided_at_s": 100.0, "stopped_at_s": 104.5}
    text = preemption_text(victim, None, {"next": "sft-l-r1"})
    assert "preempted by grpo-h (priority 100 over -100) at step 20, 4.5 s after the decision" in text
    assert "continues as sft-l-r1" in text
    waiting = preemption_text(dict(victim, state="waiting_for_checkpoint", grace_s=600), None)
    assert waiting.startswith("being preempted by grpo-h") and "grace 600" in waiting
    record = {"preemptions": [{"victims": ["sft-l", "sft-m"], "decided_at_s": 100.0,
                               "stopped": {"sft-l": {"step": 20, "waited_s": 4.5}}}]}
    text = preemption_text(None, record, None, {"admitted_at_s": 110.0})
    assert text == "preempted sft-l (stopped at step 20 after 4.5 s), sft-m (awaited); started 10.0 s after the decision"
    assert preemption_text(None, None) == "" and preemption_text({}, {"preemptions": []}) == ""


def test_read_metrics_keeps_prefixes_and_reads_on_from_an_offset(tmp_path):
    path = tmp_path / "metrics.jsonl"
    first = '{"step": 1, "data": {"timing_s/step": 2.0, "train/loss": 1.0}}\n'
    second = '{"step": 1, "data": {"val/loss": 0.5, "val/acc": 0.25}}\n'
    path.write_text(first + second + '{"step": 2, "data": {"timing_s/st')
    result = read_metrics(str(path), keys=["timing_s/step"], prefixes=("val/",))
    assert result["series"] == {"timing_s/step": [[1, 2.0]], "val/loss": [[1, 0.5]], "val/acc": [[1, 0.25]]}
    assert result["end"] == len((first + second).encode())  # the half-written line is read again next time
    with open(path, "a") as handle:
        handle.write('ep": 3.0}}\n')
    more = read_metrics(str(path), keys=["timing_s/step"], start=result["end"])
    assert more["series"] == {"timing_s/step": [[2, 3.0]]} and more["bad_lines"] == 0
    assert more["end"] == os.path.getsize(path)
    assert read_metrics(str(path), prefixes=("val/",))["series"] == {"val/loss": [[1, 0.5]], "val/acc": [[1, 0.25]]}


def test_a_runs_ledger_is_read_from_its_first_attempt_and_an_older_run_has_none(tmp_path):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import read_ledger
    ledger = {"version": 1, "run": "sft-1", "owner": "alice", "gpu_seconds_held": 60.0}
    _write(tmp_path / "sft-1" / "logs" / "ledger.json", json.dumps(ledger))
    _write(tmp_path / "sft-1-r1" / "config" / "controller.json", json.dumps({"run": "sft-1", "attempt": 1}))
    _write(tmp_path / "old-1" / "config" / "job_spec.json", "{}")
    _write(tmp_path / "bad-1" / "logs" / "ledger.json", json.dumps(["not", "a", "ledger"]))
    assert read_ledger(str(tmp_path / "sft-1")) == ledger
    assert read_ledger(str(tmp_path / "sft-1-r1")) == ledger
    assert read_ledger(str(tmp_path / "old-1")) is None and read_ledger(str(tmp_path / "bad-1")) is None
    assert read_run(str(tmp_path / "sft-1-r1"))["ledger"] == ledger
