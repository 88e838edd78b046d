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
  - Writes into I(dest) (created; an existing folder is refused, reports are never
    overwritten) C(report.json) (everything computed) and C(plots/<metric>.png)
    (matplotlib, Agg backend, one line per curve in matplotlib's tab10 colours, in
    the order of C(lines); later lines thinner and dashed, a curve equal to an
    earlier one says so in the legend). C(report.md) and C(report.html) are rendered by
    templates from the returned C(report).
  - Runs where the plots are made (the controller; needs matplotlib).
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
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Report | Compare the runs and draw the plots
  mvp.ray.ray_run_report:
    runs: "{{ runs.runs }}"
    parents: "{{ runs.parents }}"
    metrics:
      - {key: train/loss, unit: nats/token, better: lower, tolerance: {rel: 0.02}}
    dest: /tmp/report-sft
  delegate_to: localhost
"""

RETURN = r"""
report:
  description: What the report shows (see module_utils/mvp_report.build_report) plus C(plots).
  type: dict
  returned: success
  contains:
    baseline: {description: "id of the baseline run", type: str}
    runs: {description: "one row per run (submission_id, workload, code_id, model, status, verdict, steps, wall_s, continues)", type: list}
    metrics: {description: "per metric its spec and one row per run (first, last, best, step, value, baseline_value, diff, allowed, verdict)", type: list}
    regressions: {description: "runs worse than the baseline beyond tolerance ({submission_id, metric, message})", type: list}
    spec_diff: {description: "job spec fields that differ ({field, values {id - JSON}})", type: list}
    lines: {description: "plotted curves (label, color, ids), series left out", type: list}
    plots: {description: "metric -> {file (relative to dest), png_base64}", type: dict}
"""

import base64
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.mvp_report import build_report, check_metric_spec


LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D", "v"]


def plot_file(key):
    """File name of a metric's plot: ``critic/score/mean`` -> ``plots/critic_score_mean.png``."""
    return "plots/%s.png" % re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_")


def draw(report, metric, path, title):
    """Draw one metric against step, one line per curve of the report, into a PNG file."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(figsize=(8, 4.5), dpi=100)
    try:
        drawn = []
        for index, line in enumerate(report["lines"]):
            points = line["series"].get(metric["key"]) or []
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
        unit = " (%s)" % metric["unit"] if metric["unit"] else ""
        axes.set_title("%s: %s%s" % (title, metric["key"], unit))
        axes.set_xlabel("training step")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_ylabel("%s%s" % (metric["key"], unit))
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)


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
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        specs = [check_metric_spec(spec, "metrics[%d]" % i) for i, spec in enumerate(params["metrics"])]
        report = build_report(params["runs"], params["parents"], specs, params["baseline"] or None)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
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
        module.fail_json(msg="matplotlib is not importable by %s (%s): install the controller requirements "
                             "(make setup / pip install -r requirements.txt)" % (os.sys.executable, exc))
    os.makedirs(os.path.join(dest, "plots"))
    for metric in report["metrics"]:
        name = plot_file(metric["key"])
        draw(report, metric, os.path.join(dest, name), params["title"])
        with open(os.path.join(dest, name), "rb") as handle:
            report["plots"][metric["key"]] = {"file": name, "png_base64": base64.b64encode(handle.read()).decode()}
    report["lines"] = [{k: v for k, v in line.items() if k != "series"} for line in report["lines"]]
    with open(os.path.join(dest, "report.json"), "w", encoding="utf-8") as handle:
        json.dump(dict(report, plots={k: v["file"] for k, v in report["plots"].items()}),
                  handle, indent=2, sort_keys=True)
        handle.write("\n")
    module.exit_json(changed=True, report=report)


if __name__ == "__main__":
    main()
