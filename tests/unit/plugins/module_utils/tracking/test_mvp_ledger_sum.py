"""The ledger of a period (plugins/module_utils/tracking/mvp_ledger_sum.py): runs' ledger.json files added up per
group, the cluster's capacity lines integrated, ``since``/``by`` refused with the fix, the CSV's rows.

The fixtures are ledger.json files in the format of issue 63 (the contract with the job controller's ledger); the
expected figures are computed here from the fixture numbers.
"""
import csv
import datetime
import io
import json
import os

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger_sum as ls

T0 = datetime.datetime(2026, 11, 20, tzinfo=datetime.timezone.utc).timestamp()
HOUR = 3600.0


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def buckets_of(productive, startup=0.0, recomputed=0.0, failure_gap=0.0):
    out = dict.fromkeys(ls.BUCKETS, 0.0)
    out.update(productive=productive, startup=startup, recomputed=recomputed, failure_gap=failure_gap)
    return out


def ledger(run, owner, team, attempts, workload="sft", code_id="v0.5.0", state="ended"):
    """A ledger.json dict: the run's figures are the sums of its attempts' (as the contract says)."""
    held = sum(a["gpu_seconds_held"] for a in attempts)
    buckets = {b: sum(a["buckets"][b] for a in attempts) for b in ls.BUCKETS}
    return {"version": 1, "run": run, "state": state, "verdict": "trained", "cause": None, "owner": owner,
            "team": team, "project": None, "workload": workload, "code_id": code_id, "priority": "normal", "gpus": 2,
            "submitted_at": attempts[0]["started_at"] - 5, "ended_at": attempts[-1]["ended_at"],
            "computed_at": (attempts[-1]["ended_at"] or attempts[-1]["started_at"]) + 10,
            "gpu_seconds_held": held, "buckets": buckets,
            "goodput": buckets["productive"] / held, "no_gpu": {"queue_wait_s": 5.0, "heal_s": 0.0},
            "steps": {}, "estimates": [], "attempts": attempts}


def attempt(start, seconds, gpus, productive_share, startup_share=0.0):
    held = seconds * gpus
    return {"submission_id": "x", "started_at": start, "ended_at": start + seconds, "seconds_held": seconds,
            "gpu_seconds_held": held,
            "buckets": buckets_of(held * productive_share, startup=held * startup_share,
                                  failure_gap=held * (1 - productive_share - startup_share))}


def put_ledger(jobs, value):
    write(os.path.join(jobs, value["run"], "logs", "ledger.json"), json.dumps(value))


@pytest.fixture(name="jobs")
def fixture_jobs(tmp_path):
    """Four runs inside [T0, T0 + 7 d] (two of alice's, one of bob's, one without a team), one before the period."""
    jobs = str(tmp_path / "jobs")
    runs = [
        ledger("sft-a1", "alice", "nlp", [attempt(T0 + 1 * HOUR, 1800, 2, 0.8, 0.1),
                                          attempt(T0 + 2 * HOUR, 600, 2, 0.5, 0.2)]),
        ledger("grpo-a2", "alice", "nlp", [attempt(T0 + 3 * HOUR, 3600, 4, 0.9, 0.05)], workload="grpo"),
        ledger("sft-b1", "bob", "vision", [attempt(T0 + 4 * HOUR, 900, 1, 0.7, 0.1)]),
        ledger("sft-c1", "carol", None, [attempt(T0 + 5 * HOUR, 1200, 2, 0.6, 0.3)], code_id="v0.6.0"),
        ledger("sft-old", "alice", "nlp", [attempt(T0 - 10 * HOUR, 1200, 2, 0.6, 0.3)]),
    ]
    for value in runs:
        put_ledger(jobs, value)
    os.makedirs(os.path.join(jobs, "sft-a1-r1", "logs"))  # a later attempt: no ledger of its own
    os.makedirs(os.path.join(jobs, "sft-older-than-the-ledger", "logs"))
    return jobs, {r["run"]: r for r in runs}


def test_the_sums_per_owner_equal_the_sums_of_the_runs(jobs, tmp_path):
    jobs_dir, runs = jobs
    result = ls.ledger_period(jobs_dir, str(tmp_path), T0, T0 + 7 * 86400, "owner")
    inside = [r for name, r in runs.items() if name != "sft-old"]
    assert sorted(r["run"] for r in result["runs"]) == sorted(r["run"] for r in inside)
    groups = {g["group"]: g for g in result["groups"]}
    assert sorted(groups) == ["alice", "bob", "carol"]
    for owner, group in groups.items():
        mine = [r for r in inside if r["owner"] == owner]
        assert group["runs"] == len(mine)
        assert group["gpu_seconds_held"] == pytest.approx(sum(r["gpu_seconds_held"] for r in mine))
        for name in ls.BUCKETS:
            assert group["buckets"][name] == pytest.approx(sum(r["buckets"][name] for r in mine))
        productive = sum(r["buckets"]["productive"] for r in mine)
        assert group["goodput"] == pytest.approx(productive / group["gpu_seconds_held"])
    assert result["total"]["gpu_seconds_held"] == pytest.approx(sum(r["gpu_seconds_held"] for r in inside))
    assert all(r["share"] == pytest.approx(1.0) for r in result["runs"])
    # The biggest group first: alice held 1800*2 + 600*2 + 3600*4 GPU-seconds.
    assert result["groups"][0]["group"] == "alice"
    assert result["groups"][0]["gpu_seconds_held"] == pytest.approx(1800 * 2 + 600 * 2 + 3600 * 4)


def test_by_team_puts_a_run_without_a_team_in_its_own_group(jobs, tmp_path):
    result = ls.ledger_period(jobs[0], str(tmp_path), T0, T0 + 7 * 86400, "team")
    groups = {g["group"]: g["runs"] for g in result["groups"]}
    assert groups == {"nlp": 2, "vision": 1, ls.NONE_GROUP: 1}


def test_a_run_crossing_the_periods_start_counts_for_its_part(jobs, tmp_path):
    jobs_dir, runs = jobs
    # Start in the middle of sft-a1's first attempt (1800 s from T0 + 1 h): its second half and its second attempt.
    since = T0 + HOUR + 900
    result = ls.ledger_period(jobs_dir, str(tmp_path), since, T0 + 7 * 86400, "owner")
    row = next(r for r in result["runs"] if r["run"] == "sft-a1")
    first, second = runs["sft-a1"]["attempts"]
    expected = first["gpu_seconds_held"] * 0.5 + second["gpu_seconds_held"]
    assert row["gpu_seconds_held"] == pytest.approx(expected)
    assert row["share"] == pytest.approx(expected / runs["sft-a1"]["gpu_seconds_held"])
    assert row["buckets"]["productive"] == pytest.approx(first["buckets"]["productive"] * 0.5
                                                         + second["buckets"]["productive"])


def test_a_running_run_counts_up_to_its_ledgers_computation(tmp_path):
    jobs_dir = str(tmp_path / "jobs")
    run = ledger("sft-now", "dave", None, [attempt(T0, 600, 2, 0.5)], state="running")
    run["attempts"][0]["ended_at"] = None
    run["ended_at"] = None
    run["computed_at"] = T0 + 600
    put_ledger(jobs_dir, run)
    result = ls.ledger_period(jobs_dir, str(tmp_path), T0 + 300, T0 + 3600, "owner")
    assert result["runs"][0]["gpu_seconds_held"] == pytest.approx(600 * 2 / 2)


def test_files_over_the_bound_or_not_json_are_skipped_and_named(tmp_path):
    jobs_dir = str(tmp_path / "jobs")
    write(os.path.join(jobs_dir, "big", "logs", "ledger.json"), "{" + " " * 2000 + "}")
    write(os.path.join(jobs_dir, "bad", "logs", "ledger.json"), "{not json")
    put_ledger(jobs_dir, ledger("ok", "erin", None, [attempt(T0, 60, 1, 1.0)]))
    ledgers, skipped = ls.read_ledgers(jobs_dir, max_bytes=1000)
    assert [x["run"] for x in ledgers] == ["ok"]
    assert len(skipped) == 2
    assert any("big" in s and "bytes" in s for s in skipped) and any("bad" in s and "JSON" in s for s in skipped)


@pytest.mark.parametrize("text,back_s", [("7d", 7 * 86400), ("24h", 86400), ("30m", 1800), ("1.5h", 5400)])
def test_since_as_a_duration_back_from_now(text, back_s):
    assert ls.parse_time(text, T0) == pytest.approx(T0 - back_s)


def test_since_as_an_iso_date_is_utc_unless_it_has_an_offset():
    assert ls.parse_time("2026-11-20", 0) == T0
    assert ls.parse_time("2026-11-20T08:30", 0) == T0 + 8.5 * HOUR
    assert ls.parse_time("2026-11-20T08:30:00+01:00", 0) == T0 + 7.5 * HOUR


@pytest.mark.parametrize("text", ["7 days", "", "yesterday", "-7d", "7w", "2026-13-01", None])
def test_a_bad_since_is_refused_naming_the_variable_and_the_forms(text):
    with pytest.raises(ls.LedgerInputError) as err:
        ls.parse_time(text, T0)
    assert "since=" in str(err.value) and "7d" in str(err.value) and "2026-11-20" in str(err.value)


@pytest.mark.parametrize("by", ["user", "", "Owner", None])
def test_a_bad_by_is_refused_naming_the_values(by, tmp_path):
    with pytest.raises(ls.LedgerInputError) as err:
        ls.ledger_period(str(tmp_path), str(tmp_path), T0, T0 + 1, by)
    assert "by=" in str(err.value) and "owner|team|workload|code_id" in str(err.value)


def test_a_period_that_ends_before_it_starts_is_refused(tmp_path):
    with pytest.raises(ls.LedgerInputError, match="since"):
        ls.ledger_period(str(tmp_path), str(tmp_path), T0, T0 - 1, "owner")


def capacity(shared, lines):
    for at, nodes, gpus, interval in lines:
        path = ls.capacity_file(shared, at)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(ls.capacity_line(at, nodes, gpus, interval))


def test_the_capacity_integrates_over_a_period_with_gaps_and_a_month_boundary(tmp_path):
    shared = str(tmp_path)
    start = datetime.datetime(2026, 11, 30, 23, 50, tzinfo=datetime.timezone.utc).timestamp()
    # 10 minutes of 2 nodes x 4 GPUs, a first line after a start (covers nothing), a 20-minute gap (the controller was
    # down), then 15 minutes of 1 node x 4 GPUs across midnight into December.
    lines = [(start, 2, 8, 0.0)] + [(start + 60 * i, 2, 8, 60.0) for i in range(1, 11)]
    later = start + 30 * 60
    lines += [(later, 1, 4, 0.0)] + [(later + 60 * i, 1, 4, 60.0) for i in range(1, 16)]
    capacity(shared, lines)
    with open(os.path.join(shared, "controller", "capacity-2026-12.jsonl"), "a", encoding="utf-8") as handle:
        handle.write("not json\n")
    assert os.path.exists(os.path.join(shared, "controller", "capacity-2026-11.jsonl"))
    result = ls.cluster_gpu_seconds(shared, start - 3600, later + 3600)
    assert result["gpu_seconds"] == pytest.approx(10 * 60 * 8 + 15 * 60 * 4)
    assert result["node_seconds"] == pytest.approx(10 * 60 * 2 + 15 * 60 * 1)
    assert result["covered_s"] == pytest.approx(25 * 60)
    assert result["uncovered_s"] == pytest.approx((later + 3600 - (start - 3600)) - 25 * 60)
    assert result["bad_lines"] == 1 and len(result["files"]) == 2
    # A period that starts in the middle of a line's minute counts its part: from start + 90 s to start + 5 min.
    part = ls.cluster_gpu_seconds(shared, start + 90, start + 300)
    assert part["gpu_seconds"] == pytest.approx((300 - 90) * 8)


def test_a_line_never_covers_more_than_the_bound_back(tmp_path):
    capacity(str(tmp_path), [(T0, 1, 2, 10 * 3600.0)])
    result = ls.cluster_gpu_seconds(str(tmp_path), T0 - 86400, T0)
    assert result["gpu_seconds"] == pytest.approx(ls.CAPACITY_MAX_GAP_S * 2)


def test_idle_is_the_clusters_gpu_seconds_minus_the_runs(jobs, tmp_path):
    jobs_dir, runs = jobs
    shared = str(tmp_path)
    every = [(T0 + 60 * i, 2, 4, 60.0) for i in range(1, 24 * 60 + 1)]  # one day of 2 nodes x 2 GPUs
    capacity(shared, every)
    result = ls.ledger_period(jobs_dir, shared, T0, T0 + 86400, "owner")
    runs_s = sum(r["gpu_seconds_held"] for name, r in runs.items() if name != "sft-old")
    assert result["cluster"]["gpu_seconds"] == pytest.approx(86400 * 4)
    assert result["idle_gpu_seconds"] == pytest.approx(86400 * 4 - runs_s)
    assert any(line.startswith("cluster: %.2f GPU-h" % (86400 * 4 / 3600.0)) for line in ls.ledger_table(result))


def test_the_csv_has_a_row_per_run_per_group_and_a_total(jobs, tmp_path):
    jobs_dir, runs = jobs
    result = ls.ledger_period(jobs_dir, str(tmp_path), T0, T0 + 7 * 86400, "workload")
    rows = list(csv.DictReader(io.StringIO(ls.ledger_csv(result))))
    kinds = [r["kind"] for r in rows]
    assert kinds == ["run"] * 4 + ["workload"] * 2 + ["total"]
    by_name = {r["name"]: r for r in rows}
    grpo = runs["grpo-a2"]
    assert float(by_name["grpo-a2"]["gpu_hours_held"]) == pytest.approx(grpo["gpu_seconds_held"] / 3600, abs=1e-3)
    assert float(by_name["grpo-a2"]["productive_gpu_hours"]) == pytest.approx(
        grpo["buckets"]["productive"] / 3600, abs=1e-3)
    assert by_name["grpo-a2"]["owner"] == "alice" and by_name["sft-c1"]["team"] == ""
    sft_s = sum(r["gpu_seconds_held"] for n, r in runs.items() if r["workload"] == "sft" and n != "sft-old")
    assert int(by_name["sft"]["runs"]) == 3
    assert float(by_name["sft"]["gpu_hours_held"]) == pytest.approx(sft_s / 3600, abs=1e-3)
    assert set(rows[0]) == set(ls.CSV_COLUMNS)
    assert "# GPU-hour ledger" in ls.ledger_markdown(result)
