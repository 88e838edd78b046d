#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: compare training runs and draw their key metrics (PNG)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_run_report
short_description: Compare training runs against a baseline and plot their key metrics
description:
  - Takes the runs read by M(mvp.ray.ray_job_runs) and the key metrics of their workloads
    (catalog C(mvp_workloads.<workload>.metrics)), computes for each run and metric
    the first, last and best value, the difference from the baseline run at the
    highest step both logged, and whether it is worse beyond tolerance.
  - A run that resumed from another (C(resume_from)) is drawn as one curve with it.
  - Adds what differs between the runs, as M(mvp.ray.ray_job_runs) with C(compare) read it on
    the head - I(config_diff) (effective configurations key by key, with each value's source)
    and I(code_diff) (the files two snapshots differ in, a capped unified diff); the full diff
    is fetched into I(dest) as I(code_diff_file) by the role.
  - Writes into I(dest) (created; an existing folder is refused, reports are never
    overwritten) C(report.json) (everything computed) and C(plots/<metric>.png)
    (matplotlib, Agg backend, in matplotlib's tab10 colours, in the order of C(lines)).
    A metric some run logged more than twice is drawn against the training step (integer
    ticks), one line per curve; later lines thinner and dashed, a curve equal to an
    earlier one says so in the legend. A metric every run logged at most twice (a
    validation at the end) is drawn as points, one column per curve, each point labelled
    with its step (earlier points hollow). C(report.md) and C(report.html) are rendered by
    templates from the returned C(report).
  - Runs where the plots are made (the Ansible controller; needs matplotlib).
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
    details:
      - Writes no report folder and draws no plot; returns the report it would write (C(changed=true)).
  diff_mode:
    support: none
options:
  runs:
    description: Runs to compare (C(runs) of ray_job_runs, with series).
    type: list
    elements: dict
    required: true
  parents:
    description: Runs the selected ones resumed from (C(parents) of ray_job_runs).
    type: list
    elements: dict
    default: []
  metrics:
    description: Metric specs C({key, unit, better (lower/higher/none), tolerance {abs, rel}}).
    type: list
    elements: dict
    required: true
  baseline:
    description: Submission id of the baseline run; empty - the first run.
    type: str
    default: ""
  dest:
    description: Folder to create for the report (must not exist).
    type: path
    required: true
  title:
    description: Title of the report and its plots.
    type: str
    default: Training runs
  config_diff:
    description: C(config_diff) of M(mvp.ray.ray_job_runs) with C(compare); empty - not compared.
    type: dict
    default: {}
  code_diff:
    description: C(code_diff) of M(mvp.ray.ray_job_runs) with C(compare); empty - not compared.
    type: dict
    default: {}
  code_diff_file:
    description:
      - Name in I(dest) of the full code diff (the role fetches C(code_diff.full_file) there);
        recorded as C(code_diff.file) when the head wrote one, for the reports' links.
    type: str
    default: code.diff
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Report | Compare the runs and draw the plots
  mvp.ray.ray_run_report:
    runs: "{{ runs.runs }}"
    parents: "{{ runs.parents }}"
    metrics:
      - {key: train/loss, unit: nats/token, better: lower, tolerance: {rel: 0.02}}
    config_diff: "{{ runs.config_diff }}"
    code_diff: "{{ runs.code_diff }}"
    dest: /tmp/report-sft
  delegate_to: localhost
"""

RETURN = r"""
report:
  description: What the report shows (see module_utils/tracking/mvp_report.build_report) plus C(plots).
  type: dict
  returned: success
  contains:
    baseline: {description: "id of the baseline run", type: str}
    runs: {description: "one row per run (submission_id, workload, code_id, model, status, verdict, steps, wall_s, continues)", type: list}
    metrics:
      description:
        - Per metric its spec, one row per run (first, last, best, step, value, baseline_value, diff, allowed, verdict)
          and C(plot) - C(points) (every run logged it at most twice), C(lines) or C(none) (no data).
      type: list
    regressions: {description: "runs worse than the baseline beyond tolerance ({submission_id, metric, message})", type: list}
    spec_diff: {description: "job spec fields that differ ({field, values {id - JSON}})", type: list}
    config_diff: {description: "I(config_diff) as given (see ray_job_runs)", type: dict}
    code_diff:
      description:
        - I(code_diff) as given without C(full_file) (a path on the head), plus C(file) -
          I(code_diff_file) when the head wrote the full diff, else null.
      type: dict
    lines: {description: "plotted curves (label, color, ids), series left out", type: list}
    plots: {description: "metric -> {file (relative to dest), kind (points or lines), png_base64}", type: dict}
    ledger:
      description:
        - Each run's GPU-hour ledger (its first attempt's C(logs/ledger.json); module_utils
          C(mvp_report.ledger_rows)) - C(buckets) (those some run has), C(rows) (submission_id, run, owner, state,
          gpu_hours, goodput, hours per bucket, note - C(no ledger (run older than the ledger)) for a run without one).
      type: dict
    ledger_plot: {description: "the stacked bars of the ledgers {file (plots/ledger.png), png_base64}, null when no run has a ledger", type: dict}
"""

import base64
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_report import (
    build_report, check_metric_spec, plot_kind)


LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v"]
# Marker size (points) of a metric drawn as points: a single point per run stays visible.
POINT_SIZE = 14


def plot_file(key):
    """File name of a metric's plot: ``critic/score/mean`` -> ``plots/critic_score_mean.png``."""
    return "plots/%s.png" % re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_")


def _run_label(label, width=30):
    """A curve's label as an x tick: one run per line of a resumed chain, long ids wrapped."""
    import textwrap

    return "\n".join(textwrap.fill(part, width) for part in label.split(" -> "))


def _draw_lines(axes, report, key):
    """One line per curve against the training step (integer ticks)."""
    from matplotlib.ticker import MaxNLocator

    drawn = []
    for index, line in enumerate(report["lines"]):
        points = line["series"].get(key) or []
        if not points:
            continue
        # Identical curves hide each other: say so in the legend, and draw later lines
        # thinner and dashed so the earlier ones stay visible around them.
        same = [label for label, other in drawn if other == points]
        label = line["label"] + (" (same as %s)" % same[0] if same else "")
        axes.plot([p[0] for p in points], [p[1] for p in points], color=line["color"],
                  linewidth=max(1.0, 3.5 - 0.75 * index), linestyle=LINESTYLES[index % len(LINESTYLES)],
                  marker=MARKERS[index % len(MARKERS)], markersize=max(3.0, 7.0 - index), label=label)
        drawn.append((line["label"], points))
    axes.set_xlabel("training step")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))


def _draw_points(axes, report, key):
    """One column per curve, its (at most two) values as markers without a line, each labelled with its step."""
    lines = report["lines"]
    for index, line in enumerate(lines):
        points = line["series"].get(key) or []
        for number, (step, value) in enumerate(points):
            last = number == len(points) - 1
            axes.plot([index], [value], linestyle="none", marker=MARKERS[index % len(MARKERS)],
                      markersize=POINT_SIZE, markeredgewidth=2, color=line["color"],
                      markerfacecolor=line["color"] if last else "none", label=line["label"] if last else None)
            axes.annotate("step %d" % int(step), (index, value), xytext=(12, 0), textcoords="offset points",
                          va="center", fontsize=8)
        if not points:
            axes.annotate("no data", (index, 0.5), xycoords=("data", "axes fraction"), ha="center", fontsize=8)
    axes.set_xticks(list(range(len(lines))))
    axes.set_xticklabels([_run_label(line["label"]) for line in lines], fontsize=8)
    axes.set_xlim(-0.5, len(lines) - 0.5)
    axes.margins(y=0.15)
    axes.set_xlabel("run (each point labelled with the training step it was logged at; the last one filled)")


def figure(report, metric, title):
    """The plot of one metric as a matplotlib Figure (Agg backend); the caller closes it.

    :param report: dict of ``build_report`` (``lines`` with series).
    :param metric: one of its ``metrics``.
    :returns: tuple (figure, kind): kind is ``plot_kind`` - ``points``, ``lines`` or ``none``.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    kind = plot_kind(report["lines"], metric["key"])
    fig, axes = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        if kind == "points":
            _draw_points(axes, report, metric["key"])
        else:
            _draw_lines(axes, report, metric["key"])
            if kind == "none":
                axes.text(0.5, 0.5, "no run logged %s" % metric["key"], transform=axes.transAxes, ha="center")
        unit = " (%s)" % metric["unit"] if metric["unit"] else ""
        axes.set_title("%s: %s%s" % (title, metric["key"], unit))
        axes.set_ylabel("%s%s" % (metric["key"], unit))
        axes.grid(True, alpha=0.3)
        # Points: the x ticks name the runs, a legend would only hide points.
        if kind != "points" and axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
        fig.tight_layout()
    except Exception:
        plt.close(fig)
        raise
    return fig, kind


LEDGER_PLOT = "plots/ledger.png"
"""The stacked bars of the runs' GPU-hour ledgers, in the report folder."""


def ledger_figure(ledger):
    """The runs' ledgers as stacked horizontal bars (GPU-hours per bucket), a matplotlib Figure; the caller closes it.

    :param ledger: dict, ``mvp_report.ledger_rows`` (``buckets``, ``rows``); a run without a ledger gets an empty
        bar labelled ``no ledger``.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = ledger["rows"]
    fig, axes = plt.subplots(figsize=(9, 1.2 + 0.55 * len(rows)), dpi=100)
    try:
        colors = plt.get_cmap("tab20").colors
        left = [0.0] * len(rows)
        for index, bucket in enumerate(ledger["buckets"]):
            widths = [max(r["hours"].get(bucket, 0.0), 0.0) for r in rows]
            axes.barh(range(len(rows)), widths, left=left, color=colors[index % len(colors)], label=bucket)
            left = [a + b for a, b in zip(left, widths)]
        for y, row in enumerate(rows):
            text = "no ledger" if row["gpu_hours"] is None else "%.2f GPU-h, goodput %s" % (
                row["gpu_hours"], "-" if row["goodput"] is None else "%.0f%%" % (100 * row["goodput"]))
            axes.annotate(text, (left[y], y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
        axes.set_yticks(list(range(len(rows))))
        axes.set_yticklabels([_run_label(r["submission_id"]) for r in rows], fontsize=8)
        axes.invert_yaxis()
        axes.set_xlabel("GPU-hours held")
        axes.set_title("Where each run's GPU-hours went (its ledger)")
        axes.margins(x=0.25)
        if ledger["buckets"]:
            axes.legend(fontsize=7, ncol=min(4, len(ledger["buckets"])), loc="lower right")
        fig.tight_layout()
    except Exception:
        plt.close(fig)
        raise
    return fig


def draw(report, metric, path, title):
    """Draw one metric (``figure``) into a PNG file; return its kind (points, lines or none)."""
    from matplotlib import pyplot as plt

    fig, kind = figure(report, metric, title)
    try:
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return kind


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            runs=dict(type="list", elements="dict", required=True),
            parents=dict(type="list", elements="dict", default=[]),
            metrics=dict(type="list", elements="dict", required=True),
            baseline=dict(type="str", default=""),
            dest=dict(type="path", required=True),
            title=dict(type="str", default="Training runs"),
            config_diff=dict(type="dict", default={}),
            code_diff=dict(type="dict", default={}),
            code_diff_file=dict(type="str", default="code.diff"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        specs = [check_metric_spec(spec, "metrics[%d]" % i) for i, spec in enumerate(params["metrics"])]
        code = dict(params["code_diff"])
        if code:
            code["file"] = params["code_diff_file"] if code.pop("full_file", None) else None
        report = build_report(params["runs"], params["parents"], specs, params["baseline"] or None,
                              params["config_diff"], code)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    diff_name = params["code_diff_file"]
    if not diff_name or "/" in diff_name or diff_name.startswith(".") or diff_name in (
            "report.json", "report.md", "report.html", "plots"):
        module.fail_json(msg="code_diff_file %r must be a plain file name in the report folder (e.g. code.diff)"
                         % diff_name)
    dest = params["dest"]
    if os.path.lexists(dest):
        module.fail_json(msg="report folder %s exists; reports are never overwritten: choose another report_id" % dest)
    report["plots"] = {}
    if module.check_mode:
        module.exit_json(changed=True, report=dict(report, lines=[
            {k: v for k, v in line.items() if k != "series"} for line in report["lines"]]))
    try:
        import matplotlib  # noqa: F401 - fail early with the fix
    except ImportError as exc:
        module.fail_json(msg="matplotlib is not importable by %s (%s): install the Ansible controller's requirements "
                             "(make setup / pip install -r requirements.txt)" % (os.sys.executable, exc))
    os.makedirs(os.path.join(dest, "plots"))
    for metric in report["metrics"]:
        name = plot_file(metric["key"])
        kind = draw(report, metric, os.path.join(dest, name), params["title"])
        with open(os.path.join(dest, name), "rb") as handle:
            report["plots"][metric["key"]] = {"file": name, "kind": kind,
                                              "png_base64": base64.b64encode(handle.read()).decode()}
    report["ledger_plot"] = None
    if any(row["gpu_hours"] is not None for row in report["ledger"]["rows"]):
        from matplotlib import pyplot as plt

        fig = ledger_figure(report["ledger"])
        try:
            fig.savefig(os.path.join(dest, LEDGER_PLOT), format="png")
        finally:
            plt.close(fig)
        with open(os.path.join(dest, LEDGER_PLOT), "rb") as handle:
            report["ledger_plot"] = {"file": LEDGER_PLOT, "png_base64": base64.b64encode(handle.read()).decode()}
    report["lines"] = [{k: v for k, v in line.items() if k != "series"} for line in report["lines"]]
    with open(os.path.join(dest, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(dict(report, plots={k: v["file"] for k, v in report["plots"].items()},
                       ledger_plot=(report["ledger_plot"] or {}).get("file")),
                  handle, indent=2, sort_keys=True)
        handle.write("\n")
    module.exit_json(changed=True, report=report)


if __name__ == "__main__":
    main()
