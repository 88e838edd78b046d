"""Unit tests of ray_run_report: the plot choice (points or lines), integer step ticks, and what report.json keeps."""
import io
import json
import os

import pytest

matplotlib = pytest.importorskip("matplotlib")

from matplotlib import image as mpimg  # noqa: E402
from matplotlib import pyplot as plt  # noqa: E402

from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_report import (  # noqa: E402
    COLORS, build_report, check_metric_spec)
from ray_run_report import figure, main  # noqa: E402

SPECS = [check_metric_spec({"key": "train/loss", "better": "lower"}, "m[0]"),
         check_metric_spec({"key": "val/loss", "better": "lower"}, "m[1]")]


def _run(rid, train_steps, val_steps):
    series = {"train/loss": [[s, 2.0 - 0.1 * s] for s in train_steps],
              "val/loss": [[s, 1.5 - 0.01 * s - 0.1 * len(rid)] for s in val_steps]}
    return {"submission_id": rid, "series": series, "status": "SUCCEEDED", "resume_from": None, "spec": {},
            "workload": "sft", "code_id": "c1", "model": "tiny", "wall_s": 1.0,
            "last_step": max(train_steps + val_steps)}


def _report(runs):
    return build_report(runs, [], SPECS)


def _metric(report, key):
    return next(m for m in report["metrics"] if m["key"] == key)


def _drawn(axes):
    """Tick values inside the visible x range, after a draw."""
    axes.figure.canvas.draw()
    low, high = axes.get_xlim()
    return [t for t in axes.get_xticks() if low <= t <= high]


def test_a_metric_logged_once_per_run_is_drawn_as_points_one_column_per_run():
    report = _report([_run("a", [1, 2, 3], [8]), _run("bb", [1, 2, 3], [8])])
    fig, kind = figure(report, _metric(report, "val/loss"), "t")
    try:
        axes = fig.axes[0]
        assert kind == "points" and _metric(report, "val/loss")["plot"] == "points"
        # One marker per point, no line, at the run's column; the column ticks name the runs.
        assert [list(line.get_xdata()) for line in axes.lines] == [[0], [1]]
        assert all(line.get_linestyle() == "None" and line.get_marker() not in ("", "None", None)
                   for line in axes.lines)
        assert [t.get_text() for t in axes.get_xticklabels()] == ["a", "bb"]
        assert [t.get_text() for t in axes.texts] == ["step 8", "step 8"]
        assert axes.get_xlim() == (-0.5, 1.5)
    finally:
        plt.close(fig)


def test_two_points_of_a_run_the_first_hollow_the_last_filled():
    report = _report([_run("a", [1, 2, 3], [4, 8])])
    fig, kind = figure(report, _metric(report, "val/loss"), "t")
    try:
        first, last = fig.axes[0].lines
        assert kind == "points"
        assert first.get_markerfacecolor() == "none" and last.get_markerfacecolor() != "none"
        assert [t.get_text() for t in fig.axes[0].texts] == ["step 4", "step 8"]
    finally:
        plt.close(fig)


def test_a_metric_logged_at_every_step_is_a_line_with_integer_step_ticks():
    # Three steps: matplotlib's default ticks would be 1.00, 1.25, ... 3.00.
    report = _report([_run("a", [1, 2, 3], [8]), _run("b", [1, 2, 3], [8])])
    fig, kind = figure(report, _metric(report, "train/loss"), "t")
    try:
        axes = fig.axes[0]
        assert kind == "lines"
        assert [list(line.get_xdata()) for line in axes.lines] == [[1, 2, 3], [1, 2, 3]]
        assert all(line.get_linestyle() not in ("None", "") for line in axes.lines)
        ticks = _drawn(axes)
        assert ticks and all(float(t).is_integer() for t in ticks)
    finally:
        plt.close(fig)


def test_each_run_colour_covers_a_line_worth_of_pixels_in_a_points_plot():
    """The check tests/integration/check_report.py --lines makes on every plot."""
    report = _report([_run("a", [1, 2, 3], [8]), _run("b", [1, 2, 3], [8])])
    fig, _kind = figure(report, _metric(report, "val/loss"), "t")
    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    rgb = mpimg.imread(io.BytesIO(buffer.getvalue()), format="png")[:, :, :3]
    for colour in COLORS[:2]:
        value = [int(colour[i:i + 2], 16) / 255.0 for i in (1, 3, 5)]
        assert int((abs(rgb - value).max(axis=2) < 0.08).sum()) > 150


def test_report_json_keeps_what_differs_and_links_the_code_diff(tmp_path, run_module):
    runs = [_run("a", [1, 2, 3], [3]), _run("b", [1, 2, 3], [3])]
    configs = {"compared": ["a", "b"], "missing": [], "rows": [], "redacted": [], "more": 0, "errors": {}}
    code = {"pairs": [], "baseline": "a", "full_file": "/tmp/mvp-report-x.diff", "full_lines": 3}
    dest = str(tmp_path / "report")
    result = run_module(main, {"runs": runs, "metrics": [{"key": "val/loss"}, {"key": "train/loss"}], "dest": dest,
                               "config_diff": configs, "code_diff": code})
    with open(os.path.join(dest, "report.json"), encoding="utf-8") as handle:
        saved = json.load(handle)
    assert saved["config_diff"] == configs
    assert saved["code_diff"] == {"pairs": [], "baseline": "a", "full_lines": 3, "file": "code.diff"}
    assert saved["plots"] == {"val/loss": "plots/val_loss.png", "train/loss": "plots/train_loss.png"}
    assert [m["plot"] for m in saved["metrics"]] == ["points", "lines"]
    assert {k: v["kind"] for k, v in result["report"]["plots"].items()} == {"val/loss": "points", "train/loss": "lines"}


def test_no_code_diff_written_no_link(tmp_path, run_module):
    runs = [_run("a", [1, 2, 3], [3])]
    result = run_module(main, {"runs": runs, "metrics": [{"key": "train/loss"}], "dest": str(tmp_path / "r"),
                               "code_diff": {"pairs": [], "full_file": None}})
    assert result["report"]["code_diff"] == {"pairs": [], "file": None}
    result = run_module(main, {"runs": runs, "metrics": [{"key": "train/loss"}], "dest": str(tmp_path / "r2")})
    assert result["report"]["code_diff"] == {} and result["report"]["config_diff"] == {}


@pytest.mark.parametrize("name", ["", "../code.diff", "report.json", ".hidden"])
def test_a_code_diff_file_that_is_not_a_plain_name_is_refused(tmp_path, run_module, name):
    result = run_module(main, {"runs": [_run("a", [1], [1])], "metrics": [], "dest": str(tmp_path / "r"),
                               "code_diff_file": name})
    assert result["failed"] and "code_diff_file" in result["msg"]
    assert not os.path.exists(str(tmp_path / "r"))


def _ledger(run, owner, held_s, buckets_s):
    return {"version": 1, "run": run, "state": "ended", "owner": owner, "gpu_seconds_held": held_s,
            "goodput": buckets_s["productive"] / held_s, "buckets": buckets_s}


def test_each_runs_ledger_is_a_stacked_bar_and_a_run_without_one_says_so(tmp_path, run_module):
    from ray_run_report import ledger_figure
    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_report import NO_LEDGER
    a_buckets = {"startup": 360.0, "productive": 5400.0, "recomputed": 1440.0}
    b_buckets = {"startup": 720.0, "productive": 2880.0}
    runs = [dict(_run("a", [1, 2], [2]), ledger=_ledger("a", "alice", 7200.0, a_buckets)),
            dict(_run("b", [1, 2], [2]), ledger=_ledger("b", "bob", 3600.0, b_buckets)),
            dict(_run("c", [1, 2], [2]), ledger=None)]
    dest = str(tmp_path / "report")
    report = run_module(main, {"runs": runs, "metrics": [{"key": "train/loss"}], "dest": dest})["report"]
    rows = {r["submission_id"]: r for r in report["ledger"]["rows"]}
    assert report["ledger"]["buckets"] == ["startup", "productive", "recomputed"]
    assert rows["a"]["gpu_hours"] == pytest.approx(2.0) and rows["a"]["hours"]["recomputed"] == pytest.approx(0.4)
    assert rows["b"]["goodput"] == pytest.approx(2880.0 / 3600.0) and rows["c"]["note"] == NO_LEDGER
    assert report["ledger_plot"]["file"] == "plots/ledger.png" and os.path.getsize(os.path.join(dest,
                                                                                               "plots/ledger.png"))
    fig = ledger_figure(report["ledger"])
    try:
        bars = [p for p in fig.axes[0].patches]
        widths = {}
        for bar in bars:
            y = round(bar.get_y() + bar.get_height() / 2)
            widths[y] = widths.get(y, 0.0) + bar.get_width()
        assert widths == pytest.approx({0: sum(a_buckets.values()) / 3600, 1: sum(b_buckets.values()) / 3600, 2: 0.0})
    finally:
        plt.close(fig)


def test_no_ledger_at_all_draws_no_ledger_plot(tmp_path, run_module):
    result = run_module(main, {"runs": [_run("a", [1], [1])], "metrics": [], "dest": str(tmp_path / "r")})
    assert result["report"]["ledger_plot"] is None and not os.path.exists(str(tmp_path / "r" / "plots" / "ledger.png"))
