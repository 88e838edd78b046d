# -*- coding: utf-8 -*-
"""Compare training runs: the numbers behind report.yml (no plotting, no I/O).

Input runs are the dicts of ``mvp_runs.read_run`` (``series`` included) with
``status`` and ``wall_s`` added by ``ray_job_runs``. Metric specs come from the
workload catalog (``mvp_workloads.<workload>.metrics``)::

    {"key": "train/loss", "unit": "nats/token", "better": "lower",
     "tolerance": {"abs": 0.0, "rel": 0.02}}

``better`` is ``lower``, ``higher`` or ``none`` (shown, never a regression). A run
is compared with the baseline at the highest step both have logged (so a running
job's partial curve is compared where it is); it is worse beyond tolerance when
the difference in the bad direction exceeds ``max(abs, rel * |baseline value|)``.
A run that ended FAILED or STOPPED is a regression against a baseline that did not.
"""

from __future__ import annotations

import json
import re

BAD_STATUSES = ("FAILED", "STOPPED")
# matplotlib's default colour cycle (tab10): line i of a plot has COLORS[i % 10].
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
# Job spec fields that only restate other fields or differ between any two runs.
SPEC_DIFF_SKIP = ("entrypoint", "hydra_overrides", "notes", "repeat")
# Job spec fields compared as a whole (one row), not field by field.
SPEC_DIFF_LEAVES = ("resume_from",)


def check_metric_spec(spec, where):
    """Validate one metric spec of the catalog.

    :param spec: dict (see the module docstring).
    :param where: str, the catalog path for messages (``mvp_workloads.sft.metrics[0]``).
    :returns: the spec with defaults filled in (unit "", better "none", tolerance 0/0).
    :raises ValueError: naming ``where`` and the fix.
    """
    if not isinstance(spec, dict) or not isinstance(spec.get("key"), str) or not spec["key"]:
        raise ValueError("%s must be a mapping with a metric name in `key` (e.g. train/loss)" % where)
    better = spec.get("better", "none")
    if better not in ("lower", "higher", "none"):
        raise ValueError("%s.better is %r: use lower, higher or none" % (where, better))
    tol = spec.get("tolerance")
    tol = {} if tol is None else tol
    if not isinstance(tol, dict) or set(tol) - {"abs", "rel"}:
        raise ValueError("%s.tolerance must be a mapping with abs and/or rel (numbers >= 0)" % where)
    for name in ("abs", "rel"):
        value = tol.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or value == float("inf"):
            raise ValueError("%s.tolerance.%s is %r: give a finite number >= 0" % (where, name, value))
    return {"key": spec["key"], "unit": str(spec.get("unit") or ""), "better": better,
            "tolerance": {"abs": float(tol.get("abs", 0)), "rel": float(tol.get("rel", 0))}}


def chain_series(run, runs_by_id):
    """Return a run's series prefixed by the run it resumed from, as one curve.

    :param run: dict with ``series`` and ``resume_from`` (``{"submission_id", "step"}`` or None).
    :param runs_by_id: dict id -> run (parents included).
    :returns: tuple (series dict, list of ids on the curve, oldest first). The parent's
        points up to the resumed checkpoint's step come first; the chain follows
        parents of parents.
    """
    ids = [run["submission_id"]]
    series = {key: list(points) for key, points in (run.get("series") or {}).items()}
    current = run
    while current.get("resume_from") and current["resume_from"].get("submission_id") in runs_by_id:
        parent = runs_by_id[current["resume_from"]["submission_id"]]
        if parent["submission_id"] in ids:
            break
        cut = int(current["resume_from"].get("step") or 0)
        for key, points in (parent.get("series") or {}).items():
            series[key] = [p for p in points if p[0] <= cut] + series.get(key, [])
        ids.insert(0, parent["submission_id"])
        current = parent
    return series, ids


def stats(points, better):
    """First, last and best value of a series.

    :param points: list of [step, value] sorted by step.
    :param better: lower, higher or none (best is None for none).
    :returns: dict first, last, best, best_step, last_step (None when no points).
    """
    if not points:
        return {"first": None, "last": None, "best": None, "best_step": None, "last_step": None}
    best = None
    if better == "lower":
        best = min(points, key=lambda p: p[1])
    elif better == "higher":
        best = max(points, key=lambda p: p[1])
    return {"first": points[0][1], "last": points[-1][1], "last_step": points[-1][0],
            "best": best[1] if best else None, "best_step": best[0] if best else None}


def compare(points, base_points, spec):
    """Compare a run's series with the baseline's at their highest common step.

    :returns: dict step, value, baseline_value, diff (run - baseline), rel_diff (diff
        / |baseline|, None when the baseline is 0), allowed (the tolerance in the
        metric's unit) and verdict: ``worse``, ``better``, ``within tolerance``,
        ``changed`` / ``same`` (for better=none) or ``no common step``.
    """
    base = dict((p[0], p[1]) for p in base_points)
    common = [p for p in points if p[0] in base]
    if not common:
        return {"step": None, "value": None, "baseline_value": None, "diff": None, "rel_diff": None,
                "allowed": None, "verdict": "no common step"}
    step, value = common[-1]
    base_value = base[step]
    diff = value - base_value
    allowed = max(spec["tolerance"]["abs"], spec["tolerance"]["rel"] * abs(base_value))
    if spec["better"] == "none":
        verdict = "same" if diff == 0 else "changed"
    else:
        bad = diff if spec["better"] == "lower" else -diff
        verdict = "worse" if bad > allowed else ("better" if -bad > allowed else "within tolerance")
    return {"step": step, "value": value, "baseline_value": base_value, "diff": diff,
            "rel_diff": diff / abs(base_value) if base_value else None, "allowed": allowed,
            "verdict": verdict}


def _id_pattern(submission_id):
    """Regex matching a submission id as a whole token: not inside a longer id or word.

    Characters a submission id may contain (``[A-Za-z0-9._-]``) may not border the match,
    so ``run-1`` matches ``/private/jobs/run-1/logs`` but not ``run-10`` or ``prerun-1``.
    """
    return re.compile(r"(?<![A-Za-z0-9._-])%s(?![A-Za-z0-9._-])" % re.escape(submission_id))


def _normalise(value, pattern):
    """Replace a run's own id (``pattern`` from ``_id_pattern``) in every string of a job spec,
    so per-run paths compare equal."""
    if isinstance(value, str):
        return pattern.sub("<submission_id>", value)
    if isinstance(value, dict):
        return {k: _normalise(v, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, pattern) for v in value]
    return value


def _flatten(value, prefix, out):
    """Flatten a job spec to ``field -> JSON text``; mappings nest as ``a.b``, dotted keys as ``a[b.c]``."""
    if value is None:
        return
    if isinstance(value, dict) and value and prefix not in SPEC_DIFF_LEAVES:
        for key in sorted(value):
            name = ("%s[%s]" % (prefix, key) if "." in str(key) else "%s.%s" % (prefix, key)) if prefix else str(key)
            _flatten(value[key], name, out)
    else:
        out[prefix] = json.dumps(value, sort_keys=True)


def spec_diff(runs):
    """Fields of the job specs that differ between runs (inputs: code, overrides, env, data).

    :param runs: list of runs with ``spec`` and ``submission_id``.
    :returns: list of ``{"field": str, "values": {submission_id: JSON text or "(unset)"}}``
        (null counts as unset),
        sorted by field; fields equal in every run are left out. Each run's own id is
        replaced by ``<submission_id>`` first, so job paths do not count as differences.
    """
    flat = {}
    for run in runs:
        spec = {k: v for k, v in (run.get("spec") or {}).items() if k not in SPEC_DIFF_SKIP}
        out = {}
        _flatten(_normalise(spec, _id_pattern(run["submission_id"])), "", out)
        flat[run["submission_id"]] = out
    fields = sorted(set().union(*[set(v) for v in flat.values()])) if flat else []
    diff = []
    for field in fields:
        values = {rid: flat[rid].get(field, "(unset)") for rid in flat}
        if len(set(values.values())) > 1:
            diff.append({"field": field, "values": values})
    return diff


def build_report(runs, parents, metric_specs, baseline_id=None):
    """Compute everything a report shows.

    :param runs: list of runs (order kept: first is the default baseline).
    :param parents: list of runs only loaded because a run resumed from them.
    :param metric_specs: list of checked metric specs (``check_metric_spec``).
    :param baseline_id: str or None (the first run).
    :returns: dict baseline, runs (table rows), metrics (per metric: rows with stats
        and comparison), regressions (list of {submission_id, metric, message}),
        spec_diff, lines (one per plotted curve: label, color, ids, series).
    :raises ValueError: when the baseline is not one of the runs.
    """
    if not runs:
        raise ValueError("no runs to report")
    ids = [r["submission_id"] for r in runs]
    baseline_id = baseline_id or ids[0]
    if baseline_id not in ids:
        raise ValueError("baseline %s is not one of the runs (%s)" % (baseline_id, ", ".join(ids)))
    by_id = {r["submission_id"]: r for r in list(parents) + list(runs)}
    chains = {r["submission_id"]: chain_series(r, by_id) for r in runs}
    base = by_id[baseline_id]

    # One plotted line per run, except a run another selected run continues: its curve is that chain's.
    continued = {rid for _base, chain_ids in chains.values() for rid in chain_ids[:-1]}
    lines = []
    for rid in ids:
        if rid in continued:
            continue
        series, chain_ids = chains[rid]
        lines.append({"label": " -> ".join(chain_ids), "ids": chain_ids, "series": series,
                      "color": COLORS[len(lines) % len(COLORS)]})

    rows = []
    for run in runs:
        resumed = run.get("resume_from") or None
        rows.append({
            "submission_id": run["submission_id"], "workload": run.get("workload"),
            "code_id": run.get("code_id"), "model": run.get("model"), "status": run.get("status"),
            "verdict": run.get("verdict"), "steps": run.get("last_step"), "wall_s": run.get("wall_s"),
            "baseline": run["submission_id"] == baseline_id,
            "continues": ({"submission_id": resumed.get("submission_id"), "step": resumed.get("step")}
                          if resumed else None),
        })

    metrics = []
    regressions = []
    for spec in metric_specs:
        base_points = chains[baseline_id][0].get(spec["key"], [])
        table = []
        for run in runs:
            points = chains[run["submission_id"]][0].get(spec["key"], [])
            row = {"submission_id": run["submission_id"]}
            row.update(stats(points, spec["better"]))
            if run["submission_id"] == baseline_id:
                row.update({"verdict": "baseline", "diff": None, "rel_diff": None, "allowed": None,
                            "step": row["last_step"], "value": row["last"], "baseline_value": row["last"]})
            elif not points:
                row.update({"verdict": "no data", "diff": None, "rel_diff": None, "allowed": None,
                            "step": None, "value": None, "baseline_value": None})
            else:
                row.update(compare(points, base_points, spec))
            if row["verdict"] == "worse":
                regressions.append({
                    "submission_id": run["submission_id"], "metric": spec["key"],
                    "message": "%s: %s %.6g at step %d vs baseline %s %.6g (difference %+.6g, tolerance %.6g, "
                               "%s is better)" % (run["submission_id"], spec["key"], row["value"], row["step"],
                                                  baseline_id, row["baseline_value"], row["diff"],
                                                  row["allowed"], spec["better"])})
            table.append(row)
        metrics.append({"key": spec["key"], "unit": spec["unit"], "better": spec["better"],
                        "tolerance": spec["tolerance"], "rows": table})

    for run in runs:
        if run.get("status") in BAD_STATUSES and base.get("status") not in BAD_STATUSES:
            regressions.append({"submission_id": run["submission_id"], "metric": "status",
                                "message": "%s ended %s (baseline %s: %s)" % (
                                    run["submission_id"], run["status"], baseline_id, base.get("status"))})
    return {"baseline": baseline_id, "runs": rows, "metrics": metrics, "regressions": regressions,
            "spec_diff": spec_diff(runs), "lines": lines}
