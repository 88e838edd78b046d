"""Unit tests of mvp_report: metric specs, resumed-run curves, comparisons and the report."""
import json

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_report import (
    build_report, chain_series, check_metric_spec, compare, spec_diff, stats)

WHERE = "mvp_workloads.sft.metrics[0]"


def _spec(better="lower", abs_tol=0.0, rel_tol=0.0, key="train/loss"):
    """A checked metric spec."""
    return check_metric_spec({"key": key, "better": better, "tolerance": {"abs": abs_tol, "rel": rel_tol}}, WHERE)


def _points(values, first_step=1):
    """[[step, value], ...] from a list of values at consecutive steps."""
    return [[first_step + i, v] for i, v in enumerate(values)]


def _run(submission_id, series=None, status="SUCCEEDED", resume_from=None, spec=None):
    """A run as ray_job_runs hands it to the report."""
    return {"submission_id": submission_id, "series": series or {}, "status": status,
            "resume_from": resume_from, "spec": spec if spec is not None else {},
            "workload": "sft", "code_id": "c1", "model": "tiny", "wall_s": 10.0,
            "last_step": max([p[0] for pts in (series or {}).values() for p in pts] or [0])}


def _allowed(spec, base_value):
    """The tolerance in the metric's unit, as the module docstring defines it."""
    return max(spec["tolerance"]["abs"], spec["tolerance"]["rel"] * abs(base_value))


# ---- check_metric_spec ----

def test_metric_spec_defaults_are_filled_in():
    """Only key is required: unit "", better none and zero tolerances are filled in."""
    assert check_metric_spec({"key": "train/loss"}, WHERE) == {
        "key": "train/loss", "unit": "", "better": "none", "tolerance": {"abs": 0.0, "rel": 0.0}}


def test_metric_spec_keeps_given_values_as_floats():
    """Given values are kept; integer tolerances become floats."""
    checked = check_metric_spec({"key": "val/acc", "unit": "%", "better": "higher",
                                 "tolerance": {"abs": 1, "rel": 0.5}}, WHERE)
    assert checked == {"key": "val/acc", "unit": "%", "better": "higher", "tolerance": {"abs": 1.0, "rel": 0.5}}
    assert isinstance(checked["tolerance"]["abs"], float)


@pytest.mark.parametrize("spec, field", [
    ({"key": "train/loss", "better": "sideways"}, "better"),
    ({"key": "train/loss", "tolerance": {"abs": -0.1}}, "tolerance.abs"),
    ({"key": "train/loss", "tolerance": {"rel": -1}}, "tolerance.rel"),
    ({"key": "train/loss", "tolerance": {"abs": True}}, "tolerance.abs"),
    ({"key": "train/loss", "tolerance": {"abs": "0.1"}}, "tolerance.abs"),
    ({"key": "train/loss", "tolerance": {"pct": 0.1}}, "tolerance"),
    ({"key": "train/loss", "tolerance": 0.1}, "tolerance"),
    ({"key": "train/loss", "tolerance": 0}, "tolerance"),
    ({"key": "train/loss", "tolerance": []}, "tolerance"),
    ({"key": "train/loss", "tolerance": {"rel": float("nan")}}, "tolerance.rel"),
    ({"key": "train/loss", "tolerance": {"abs": float("inf")}}, "tolerance.abs"),
    ({"better": "lower"}, "key"),
    ({"key": ""}, "key"),
    ("train/loss", "key"),
])
def test_bad_metric_specs_raise_naming_the_field(spec, field):
    """Each bad spec raises ValueError naming the catalog path and the faulty field."""
    with pytest.raises(ValueError) as err:
        check_metric_spec(spec, WHERE)
    message = str(err.value)
    assert WHERE in message
    assert field in message


def test_bad_better_value_is_quoted_in_the_message():
    """The rejected better value is shown so the user sees what was read."""
    with pytest.raises(ValueError, match="sideways"):
        check_metric_spec({"key": "train/loss", "better": "sideways"}, WHERE)


# ---- stats ----

def test_stats_best_depends_on_the_direction():
    """best is the minimum for lower, the maximum for higher and None for none."""
    values = [3.0, 1.0, 2.0, 4.0, 2.5]
    points = _points(values)
    low = stats(points, "lower")
    high = stats(points, "higher")
    none = stats(points, "none")
    assert low["best"] == min(values) and low["best_step"] == points[values.index(min(values))][0]
    assert high["best"] == max(values) and high["best_step"] == points[values.index(max(values))][0]
    assert none["best"] is None and none["best_step"] is None
    for result in (low, high, none):
        assert result["first"] == values[0]
        assert result["last"] == values[-1]
        assert result["last_step"] == points[-1][0]


def test_stats_of_no_points_are_all_none():
    """An empty series gives None everywhere."""
    assert set(stats([], "lower").values()) == {None}


# ---- compare ----

def test_compare_at_the_highest_common_step():
    """Baseline has steps 1..8, the run 1..5: the comparison is at step 5."""
    base = _points([10.0 - i for i in range(8)])
    run = _points([10.5 - i for i in range(5)])
    spec = _spec("lower", abs_tol=0.01)
    result = compare(run, base, spec)
    common = max(set(p[0] for p in run) & set(p[0] for p in base))
    base_value = dict(map(tuple, base))[common]
    value = dict(map(tuple, run))[common]
    assert result["step"] == common == 5
    assert result["value"] == value
    assert result["baseline_value"] == base_value
    assert result["diff"] == pytest.approx(value - base_value)
    assert result["rel_diff"] == pytest.approx((value - base_value) / abs(base_value))


def test_compare_uses_the_highest_step_both_logged_not_the_run_last_step():
    """Steps only one side logged are ignored: run 1..5 vs baseline even steps -> step 4."""
    base = [[s, 1.0] for s in (2, 4, 6, 8)]
    run = _points([1.0, 1.0, 1.0, 1.0, 9.0])
    result = compare(run, base, _spec("lower"))
    assert result["step"] == 4
    assert result["verdict"] == "within tolerance"


def test_compare_without_a_common_step():
    """Disjoint steps give the no common step verdict and no numbers."""
    result = compare([[1, 1.0]], [[2, 1.0]], _spec("lower"))
    assert result["verdict"] == "no common step"
    assert result["step"] is None and result["diff"] is None and result["allowed"] is None


@pytest.mark.parametrize("better, abs_tol, rel_tol, base_value, value, verdict", [
    ("lower", 0.01, 0.02, 2.0, 2.2, "worse"),
    ("lower", 0.01, 0.02, 2.0, 1.8, "better"),
    ("lower", 0.01, 0.02, 2.0, 2.03, "within tolerance"),
    ("lower", 0.01, 0.02, 2.0, 1.97, "within tolerance"),
    ("lower", 0.5, 0.01, 2.0, 2.3, "within tolerance"),   # abs wins over rel
    ("lower", 0.5, 0.01, 2.0, 2.6, "worse"),
    ("higher", 0.0, 0.05, 0.6, 0.5, "worse"),
    ("higher", 0.0, 0.05, 0.6, 0.7, "better"),
    ("higher", 0.0, 0.05, 0.6, 0.61, "within tolerance"),
    ("higher", 0.0, 0.05, -4.0, -4.5, "worse"),            # rel uses |baseline|
    ("lower", 0.0, 0.0, 1.0, 1.0, "within tolerance"),
])
def test_compare_verdicts(better, abs_tol, rel_tol, base_value, value, verdict):
    """worse / better / within tolerance follow allowed = max(abs, rel * |baseline|)."""
    spec = _spec(better, abs_tol=abs_tol, rel_tol=rel_tol)
    result = compare([[3, value]], [[3, base_value]], spec)
    allowed = _allowed(spec, base_value)
    assert result["allowed"] == pytest.approx(allowed)
    # the case table is chosen far from the boundary; check it agrees with the formula
    bad = (value - base_value) if better == "lower" else (base_value - value)
    expected = "worse" if bad > allowed else ("better" if -bad > allowed else "within tolerance")
    assert expected == verdict
    assert result["verdict"] == verdict


def test_compare_rel_diff_is_none_for_a_zero_baseline():
    """A zero baseline value has no relative difference."""
    result = compare([[1, 0.5]], [[1, 0.0]], _spec("lower", abs_tol=1.0))
    assert result["rel_diff"] is None
    assert result["diff"] == 0.5


def test_compare_better_none_is_same_or_changed():
    """better=none only says same or changed, whatever the tolerance."""
    spec = _spec("none", abs_tol=10.0)
    assert compare([[1, 2.0]], [[1, 2.0]], spec)["verdict"] == "same"
    assert compare([[1, 2.0]], [[1, 50.0]], spec)["verdict"] == "changed"
    assert compare([[1, 2.0]], [[1, 2.0001]], spec)["verdict"] == "changed"


# ---- chain_series ----

PARENT_LOSS = [6.0, 5.5, 5.0, 4.7, 4.5, 4.3, 4.2, 4.1]      # steps 1..8
CHILD_LOSS = [4.25, 4.15, 4.0, 3.9]                         # steps 7..10, resumed from step 6
RESUME_STEP = 6


def _parent_and_child():
    """Parent P ran steps 1..8 and checkpointed at 6; child C resumed from P's step 6."""
    parent = _run("P", {"train/loss": _points(PARENT_LOSS), "train/lr": _points([0.1] * len(PARENT_LOSS))})
    child = _run("C", {"train/loss": _points(CHILD_LOSS, first_step=RESUME_STEP + 1)},
                 resume_from={"submission_id": "P", "step": RESUME_STEP})
    return parent, child


def test_chain_series_prefixes_the_parent_up_to_the_resumed_step():
    """A resumed run is one curve: parent's points up to step 6, then its own."""
    parent, child = _parent_and_child()
    series, ids = chain_series(child, {"P": parent, "C": child})
    expected = [p for p in parent["series"]["train/loss"] if p[0] <= RESUME_STEP] + child["series"]["train/loss"]
    assert ids == ["P", "C"]
    assert series["train/loss"] == expected
    steps = [p[0] for p in series["train/loss"]]
    assert steps == sorted(steps) and len(steps) == len(set(steps))
    # a metric only the parent logged still shows its part of the curve
    assert series["train/lr"] == [p for p in parent["series"]["train/lr"] if p[0] <= RESUME_STEP]
    # the run itself is not modified
    assert child["series"]["train/loss"] == _points(CHILD_LOSS, first_step=RESUME_STEP + 1)


def test_chain_series_follows_parents_of_parents():
    """G -> P -> C: each parent contributes its points up to where the next resumed."""
    grand = _run("G", {"train/loss": _points([9.0, 8.0, 7.0, 6.0])})
    parent = _run("P", {"train/loss": _points([6.5, 6.1, 5.8], first_step=3)},
                  resume_from={"submission_id": "G", "step": 2})
    child = _run("C", {"train/loss": _points([5.0, 4.0], first_step=5)},
                 resume_from={"submission_id": "P", "step": 4})
    series, ids = chain_series(child, {"G": grand, "P": parent, "C": child})
    expected = ([p for p in grand["series"]["train/loss"] if p[0] <= 2]
                + [p for p in parent["series"]["train/loss"] if p[0] <= 4]
                + child["series"]["train/loss"])
    assert ids == ["G", "P", "C"]
    assert series["train/loss"] == expected


def test_chain_series_stops_at_an_unknown_parent_and_at_a_loop():
    """A parent not loaded ends the chain; a resume loop does not run forever."""
    _, child = _parent_and_child()
    series, ids = chain_series(child, {"C": child})
    assert ids == ["C"] and series == child["series"]
    a = _run("A", {"x": [[1, 1.0]]}, resume_from={"submission_id": "B", "step": 1})
    b = _run("B", {"x": [[1, 2.0]]}, resume_from={"submission_id": "A", "step": 1})
    _, ids = chain_series(a, {"A": a, "B": b})
    assert ids == ["B", "A"]


# ---- spec_diff ----

def _job_spec(submission_id, **extra):
    """A job spec with per-run paths, as submit.yml records it."""
    spec = {"workload": "sft", "code_id": "c1", "job_dir": "/private/jobs/%s" % submission_id,
            "checkpoint_dir": "/private/jobs/%s/checkpoints" % submission_id,
            "env_vars": {"RUN_LOG": "/private/jobs/%s/logs/run.log" % submission_id},
            "trainer_overrides": {"optim.lr": 1e-4, "trainer.total_epochs": 2},
            "entrypoint": "python -m verl ... %s" % submission_id, "notes": ["resumed by %s" % submission_id]}
    spec.update(extra)
    return spec


def test_spec_diff_ignores_each_run_own_id_in_paths():
    """Job paths containing each run's own id, and skipped fields, are no difference."""
    runs = [_run(rid, spec=_job_spec(rid)) for rid in ("sft-20260101-aaaa", "sft-20260102-bbbb")]
    assert spec_diff(runs) == []


def test_spec_diff_replaces_the_id_only_as_a_whole_token():
    """A short id inside a longer one (run-1 in run-10, prerun-1) is not replaced, so a
    spec naming another run still shows as a difference."""
    one = _run("run-1", spec=_job_spec("run-1", resume_from={"submission_id": "run-10"}))
    two = _run("run-2", spec=_job_spec("run-2", resume_from={"submission_id": "prerun-2"}))
    diff = {row["field"]: row["values"] for row in spec_diff([one, two])}
    expected = {rid: json.dumps({"submission_id": parent}, sort_keys=True)
                for rid, parent in (("run-1", "run-10"), ("run-2", "prerun-2"))}
    assert diff == {"resume_from": expected}


def test_spec_diff_reports_a_dotted_override_key_in_brackets():
    """A differing trainer override shows as trainer_overrides[optim.lr] with JSON values."""
    lrs = {"run-one": 1e-4, "run-two": 3e-4}
    runs = [_run(rid, spec=_job_spec(rid, trainer_overrides={"optim.lr": lr, "trainer.total_epochs": 2}))
            for rid, lr in lrs.items()]
    assert spec_diff(runs) == [{"field": "trainer_overrides[optim.lr]",
                                "values": {rid: json.dumps(lr) for rid, lr in lrs.items()}}]


def test_spec_diff_nested_mapping_uses_dots_and_unset_fields():
    """Plain nested keys join with a dot; a field one run lacks is (unset)."""
    one = _run("run-one", spec=_job_spec("run-one", env_vars={"A": "1"}))
    two = _run("run-two", spec=_job_spec("run-two", env_vars={"A": "2", "B": "x"}))
    diff = {row["field"]: row["values"] for row in spec_diff([one, two])}
    assert diff == {"env_vars.A": {"run-one": json.dumps("1"), "run-two": json.dumps("2")},
                    "env_vars.B": {"run-one": "(unset)", "run-two": json.dumps("x")}}


def test_spec_diff_treats_null_as_unset():
    """A field set to null in one run and missing in the other is no difference; null vs a value is."""
    one = _run("run-one", spec=_job_spec("run-one", model=None, reward_fn_path=None))
    two = _run("run-two", spec=_job_spec("run-two", reward_fn_path="/code/reward.py"))
    diff = spec_diff([one, two])
    assert [row["field"] for row in diff] == ["reward_fn_path"]
    assert diff[0]["values"] == {"run-one": "(unset)", "run-two": json.dumps("/code/reward.py")}


def test_spec_diff_shows_resume_from_as_one_row():
    """resume_from is compared as a whole: one row, not one per sub-field."""
    resume = {"submission_id": "run-zero", "step": 6, "path": "/private/jobs/run-zero/checkpoints/global_step_6",
              "world_size": 2}
    one = _run("run-one", spec=_job_spec("run-one"))
    two = _run("run-two", spec=_job_spec("run-two", resume_from=resume))
    diff = spec_diff([one, two])
    assert diff == [{"field": "resume_from",
                     "values": {"run-one": "(unset)", "run-two": json.dumps(resume, sort_keys=True)}}]


def test_spec_diff_rows_are_sorted_by_field_and_empty_without_runs():
    """Rows come sorted by field name; no runs give no rows."""
    one = _run("r-1", spec={"workload": "sft", "code_id": "a", "model": "m1"})
    two = _run("r-2", spec={"workload": "ppo", "code_id": "b", "model": "m1"})
    fields = [row["field"] for row in spec_diff([one, two])]
    assert fields == sorted(["workload", "code_id"])
    assert spec_diff([]) == []


# ---- build_report ----

def test_build_report_rejects_a_baseline_that_is_not_a_run():
    """A baseline id not among the runs (even if it is a parent) raises ValueError naming it."""
    parent, child = _parent_and_child()
    with pytest.raises(ValueError, match="nope"):
        build_report([child], [parent], [_spec()], baseline_id="nope")
    with pytest.raises(ValueError, match="P"):
        build_report([child], [parent], [_spec()], baseline_id="P")
    with pytest.raises(ValueError):
        build_report([], [], [_spec()])


def test_build_report_compares_with_the_first_run_by_default():
    """Without baseline_id the first run is the baseline; a worse run is a regression."""
    spec = _spec("lower", abs_tol=0.0, rel_tol=0.02)
    base_values = [5.0, 4.0, 3.0, 2.0]
    worse_values = [5.0, 4.2, 3.5, 2.5]
    base = _run("base", {"train/loss": _points(base_values)})
    worse = _run("worse", {"train/loss": _points(worse_values)})
    report = build_report([base, worse], [], [spec])
    assert report["baseline"] == "base"
    assert [row["baseline"] for row in report["runs"]] == [True, False]
    rows = {row["submission_id"]: row for row in report["metrics"][0]["rows"]}
    assert rows["base"]["verdict"] == "baseline"
    assert rows["worse"]["verdict"] == "worse"
    assert rows["worse"]["allowed"] == pytest.approx(_allowed(spec, base_values[-1]))
    assert rows["worse"]["best"] == min(worse_values)
    assert [(r["submission_id"], r["metric"]) for r in report["regressions"]] == [("worse", "train/loss")]
    assert "worse" in report["regressions"][0]["message"] and "base" in report["regressions"][0]["message"]


def test_build_report_explicit_baseline_and_a_better_run_is_not_a_regression():
    """With the other run as baseline, the better run is better, not a regression."""
    spec = _spec("lower", abs_tol=0.1)
    good = _run("good", {"train/loss": _points([3.0, 2.0])})
    bad = _run("bad", {"train/loss": _points([3.0, 2.5])})
    report = build_report([good, bad], [], [spec], baseline_id="bad")
    rows = {row["submission_id"]: row for row in report["metrics"][0]["rows"]}
    assert report["baseline"] == "bad"
    assert rows["good"]["verdict"] == "better"
    assert report["regressions"] == []


def test_build_report_better_none_never_regresses():
    """A metric with better=none is same/changed and never listed as a regression."""
    spec = _spec("none", key="train/lr")
    a = _run("a", {"train/lr": _points([0.1, 0.2])})
    b = _run("b", {"train/lr": _points([0.1, 0.9])})
    report = build_report([a, b], [], [spec])
    rows = {row["submission_id"]: row for row in report["metrics"][0]["rows"]}
    assert rows["b"]["verdict"] == "changed"
    assert rows["b"]["best"] is None
    assert report["regressions"] == []


def test_build_report_run_without_the_metric_has_no_data():
    """A run that never logged the metric gets the no data verdict, not a regression."""
    a = _run("a", {"train/loss": _points([1.0])})
    b = _run("b", {"other": _points([1.0])})
    report = build_report([a, b], [], [_spec("lower")])
    rows = {row["submission_id"]: row for row in report["metrics"][0]["rows"]}
    assert rows["b"]["verdict"] == "no data"
    assert report["regressions"] == []


def test_failed_run_against_a_succeeded_baseline_is_a_status_regression():
    """A FAILED (or STOPPED) run is a regression with metric status when the baseline did not fail."""
    values = [2.0, 1.0]
    base = _run("base", {"train/loss": _points(values)}, status="SUCCEEDED")
    failed = _run("failed", {"train/loss": _points(values)}, status="FAILED")
    stopped = _run("stopped", {"train/loss": _points(values)}, status="STOPPED")
    report = build_report([base, failed, stopped], [], [_spec("lower")])
    assert [(r["submission_id"], r["metric"]) for r in report["regressions"]] == [
        ("failed", "status"), ("stopped", "status")]
    assert "FAILED" in report["regressions"][0]["message"]


def test_failed_run_against_a_failed_baseline_is_not_a_regression():
    """When the baseline failed too, a failed run is no status regression."""
    base = _run("base", status="FAILED")
    other = _run("other", status="FAILED")
    report = build_report([base, other], [], [])
    assert report["regressions"] == []


def test_resumed_run_is_one_line_and_its_selected_parent_is_not_drawn():
    """Selecting parent and child gives one line P -> C; the parent's own line is left out."""
    parent, child = _parent_and_child()
    other = _run("O", {"train/loss": _points(PARENT_LOSS)})
    report = build_report([parent, child, other], [], [_spec("lower", abs_tol=0.05)])
    lines = report["lines"]
    assert [line["ids"] for line in lines] == [["P", "C"], ["O"]]
    assert lines[0]["label"] == "P -> C"
    expected = [p for p in parent["series"]["train/loss"] if p[0] <= RESUME_STEP] + child["series"]["train/loss"]
    assert lines[0]["series"]["train/loss"] == expected
    assert lines[0]["color"] != lines[1]["color"]
    # the parent still has its own table row and comparison
    assert [row["submission_id"] for row in report["runs"]] == ["P", "C", "O"]
    assert report["runs"][1]["continues"] == {"submission_id": "P", "step": RESUME_STEP, "adjusted": ""}
    assert report["runs"][0]["continues"] is None


def test_a_resume_from_a_view_without_the_data_state_says_so_in_its_row():
    parent, child = _parent_and_child()
    child["resume_from"] = dict(child["resume_from"], adjusted=[{"issue": "verl#7401", "left_out": ["data_0.pt"]}])
    report = build_report([parent, child], [], [_spec("lower", abs_tol=0.05)])
    assert report["runs"][1]["continues"]["adjusted"] == (
        "data-loader state data_0.pt left out at an epoch's end (verl#7401)")


def test_a_preempted_run_is_one_curve_across_the_preemption_and_its_row_says_so():
    parent, child = _parent_and_child()
    parent["preemption"] = "preempted by H (priority 100 over -100) at step %d" % RESUME_STEP
    report = build_report([parent, child], [], [_spec("lower", abs_tol=0.05)])
    assert [line["ids"] for line in report["lines"]] == [["P", "C"]]
    assert report["runs"][0]["preemption"] == parent["preemption"] and report["runs"][1]["preemption"] == ""


def test_parent_passed_only_in_parents_still_makes_the_chain():
    """A parent loaded only because the run resumed from it prefixes the curve and the comparison."""
    parent, child = _parent_and_child()
    base = _run("B", {"train/loss": _points(PARENT_LOSS[:RESUME_STEP] + [4.3, 4.2, 4.1, 4.0])})
    spec = _spec("lower", abs_tol=0.01)
    report = build_report([base, child], [parent], [spec])
    chained = [p for p in parent["series"]["train/loss"] if p[0] <= RESUME_STEP] + child["series"]["train/loss"]
    assert [line["ids"] for line in report["lines"]] == [["B"], ["P", "C"]]
    assert report["lines"][1]["series"]["train/loss"] == chained
    rows = {row["submission_id"]: row for row in report["metrics"][0]["rows"]}
    # stats and comparison see the whole chained curve
    assert rows["C"]["first"] == chained[0][1]
    assert rows["C"]["best"] == min(v for _, v in chained)
    base_at = dict(map(tuple, base["series"]["train/loss"]))
    last_common = max(s for s, _ in chained if s in base_at)
    assert rows["C"]["step"] == last_common
    assert rows["C"]["diff"] == pytest.approx(dict(map(tuple, chained))[last_common] - base_at[last_common])
    # the parent gets no row of its own
    assert "P" not in rows
    assert [row["submission_id"] for row in report["runs"]] == ["B", "C"]


def test_build_report_spec_diff_covers_the_selected_runs():
    """The report's spec_diff is that of the selected runs."""
    one = _run("run-one", spec=_job_spec("run-one", code_id="c1"))
    two = _run("run-two", spec=_job_spec("run-two", code_id="c2"))
    report = build_report([one, two], [], [])
    assert report["spec_diff"] == spec_diff([one, two])
    assert [row["field"] for row in report["spec_diff"]] == ["code_id"]
