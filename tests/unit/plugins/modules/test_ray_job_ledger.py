"""ray_job_ledger: the ledgers of a period summed on the head, ledger.csv and ledger.md written once, bad input refused."""
import csv
import json
import os
import time

from ray_job_ledger import main


def _ledger(run, owner, start, seconds, gpus, productive_share):
    held = seconds * gpus
    buckets = {"startup": held * (1 - productive_share), "productive": held * productive_share}
    attempt = {"submission_id": run, "started_at": start, "ended_at": start + seconds, "gpu_seconds_held": held,
               "buckets": buckets}
    return {"version": 1, "run": run, "state": "ended", "owner": owner, "team": None, "workload": "sft",
            "code_id": "v1", "gpus": gpus, "submitted_at": start, "ended_at": start + seconds,
            "computed_at": start + seconds, "gpu_seconds_held": held, "buckets": buckets,
            "goodput": productive_share, "attempts": [attempt]}


def _shared(tmp_path):
    now = time.time()
    runs = [_ledger("sft-1", "alice", now - 7200, 600, 2, 0.75), _ledger("sft-2", "bob", now - 3600, 300, 1, 0.5),
            _ledger("sft-3", "alice", now - 1800, 1200, 2, 0.5)]
    for run in runs:
        path = tmp_path / "jobs" / run["run"] / "logs" / "ledger.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(run), encoding="utf-8")
    return str(tmp_path), runs


def test_the_period_is_summed_per_owner_and_written_once(tmp_path, run_module):
    shared, runs = _shared(tmp_path)
    dest = str(tmp_path / "reports" / "ledger-x")
    result = run_module(main, {"shared_root": shared, "since": "24h", "dest": dest})
    assert result["changed"] and result["by"] == "owner"
    alice = next(g for g in result["groups"] if g["group"] == "alice")
    assert alice["gpu_seconds_held"] == sum(r["gpu_seconds_held"] for r in runs if r["owner"] == "alice")
    with open(result["csv_file"], encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["kind"] for r in rows] == ["run"] * 3 + ["owner"] * 2 + ["total"]
    assert os.path.isfile(result["md_file"]) and result["idle_gpu_seconds"] is None
    again = run_module(main, {"shared_root": shared, "since": "24h", "dest": dest})
    assert again["failed"] and "never overwritten" in again["msg"]


def test_a_short_period_keeps_only_the_runs_inside(tmp_path, run_module):
    shared, _runs = _shared(tmp_path)
    result = run_module(main, {"shared_root": shared, "since": "45m"}, check_mode=True)
    assert [r["run"] for r in result["runs"]] == ["sft-3"] and result["csv_file"] is None


def test_bad_since_and_by_are_refused_naming_them(tmp_path, run_module):
    shared, _runs = _shared(tmp_path)
    result = run_module(main, {"shared_root": shared, "since": "last week"})
    assert result["failed"] and "since=" in result["msg"] and "7d" in result["msg"]
    result = run_module(main, {"shared_root": shared, "by": "user"})
    assert result["failed"] and "by=" in result["msg"] and "owner|team|workload|code_id" in result["msg"]
