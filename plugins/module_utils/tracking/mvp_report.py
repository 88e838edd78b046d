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

What differs between the runs (``ray_job_runs`` computes it on the head, where the job
directories and code snapshots are; the functions here are pure):

- ``config_diff``: the runs' effective trainer configurations (``config/resolved_config.yaml``)
  key by key, each differing value with where it came from: the request, the inventory
  (``submit_job_site_overrides``), the catalog, the project (a key the job spec builder sets: paths,
  model, data, device...) - the spec's ``override_sources`` - or, for a key no override set,
  the snapshot's own default (its code_id and the YAML file under ``verl/trainer/config/``
  that sets the value, when one is found).
- ``code_diff``: when the runs' code snapshots differ, the files added, removed and changed
  (from the snapshots' content records, ``mvp_snapshot``), a unified diff of the changed
  text files capped in lines and bytes, and the full diff (every file) for ``code.diff``.
- ``plot_kind``: a metric logged at most twice per run is drawn as points, one column per
  run, instead of a line over steps.
"""

from __future__ import annotations

import difflib
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


def adjusted_text(resume_from):
    """A short phrase for the report when a resume was adjusted ('' when not; module_utils mvp_resume.plan).

    :param resume_from: dict or None, a job spec's ``resume_from``.
    :returns: str, e.g. ``data-loader state left out at an epoch's end (verl#7401)``.
    """
    adjusted = (resume_from or {}).get("adjusted") or []
    return "; ".join("%s left out at an epoch's end (%s)" % (
        "data-loader state %s" % ", ".join(item.get("left_out") or []), item.get("issue")) for item in adjusted)


def build_report(runs, parents, metric_specs, baseline_id=None, config_diff=None, code_diff=None):
    """Compute everything a report shows.

    :param runs: list of runs (order kept: first is the default baseline).
    :param parents: list of runs only loaded because a run resumed from them.
    :param metric_specs: list of checked metric specs (``check_metric_spec``).
    :param baseline_id: str or None (the first run).
    :param config_diff: dict or None, ``config_diff`` of the runs (``ray_job_runs`` with compare).
    :param code_diff: dict or None, the summary of ``code_diff`` (idem).
    :returns: dict baseline, runs (table rows), metrics (per metric: rows with stats
        and comparison, and ``plot``: ``plot_kind``), regressions (list of {submission_id,
        metric, message}), spec_diff, config_diff and code_diff (as given, {} when not),
        lines (one per plotted curve: label, color, ids, series).
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
            "baseline": run["submission_id"] == baseline_id, "mlflow": (run.get("mlflow") or {}).get("ui_url"),
            "continues": ({"submission_id": resumed.get("submission_id"), "step": resumed.get("step"),
                           "adjusted": adjusted_text(resumed)} if resumed else None),
            "preemption": run.get("preemption") or "",
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
                        "tolerance": spec["tolerance"], "rows": table, "plot": plot_kind(lines, spec["key"])})

    for run in runs:
        if run.get("status") in BAD_STATUSES and base.get("status") not in BAD_STATUSES:
            regressions.append({"submission_id": run["submission_id"], "metric": "status",
                                "message": "%s ended %s (baseline %s: %s)" % (
                                    run["submission_id"], run["status"], baseline_id, base.get("status"))})
    return {"baseline": baseline_id, "runs": rows, "metrics": metrics, "regressions": regressions,
            "spec_diff": spec_diff(runs), "config_diff": config_diff or {}, "code_diff": code_diff or {},
            "lines": lines, "ledger": ledger_rows(runs)}


LEDGER_BUCKETS = ("startup", "productive", "checkpoint", "validation", "recomputed", "lost", "failure_gap", "hang",
                  "preemption", "shutdown", "unaccounted")
"""The buckets of a run's ledger.json (issue 63), in the order the bars stack them."""

NO_LEDGER = "no ledger (run older than the ledger)"
"""What the report says of a run without a ledger.json."""


def ledger_rows(runs):
    """The GPU-hour ledger of each run, for the report's stacked bars and table.

    :param runs: list of runs (``ray_job_runs``; ``ledger``: the run's ledger.json or None).
    :returns: dict ``{"buckets": the LEDGER_BUCKETS some run has above zero, "rows": [...]}``, a row per run:
        ``submission_id``, ``run`` (the first attempt), ``owner``, ``state``, ``gpu_hours`` (held), ``goodput``
        (0..1 or None), ``hours`` (bucket -> GPU-hours), ``note`` (NO_LEDGER when it has none, else '').
    """
    rows = []
    for run in runs:
        ledger = run.get("ledger") if isinstance(run.get("ledger"), dict) else None
        if ledger is None:
            rows.append({"submission_id": run["submission_id"], "run": None, "owner": None, "state": None,
                         "gpu_hours": None, "goodput": None, "hours": {}, "note": NO_LEDGER})
            continue
        buckets = ledger.get("buckets") or {}
        rows.append({"submission_id": run["submission_id"], "run": ledger.get("run"), "owner": ledger.get("owner"),
                     "state": ledger.get("state"), "gpu_hours": float(ledger.get("gpu_seconds_held") or 0) / 3600.0,
                     "goodput": ledger.get("goodput"),
                     "hours": {b: float(buckets.get(b) or 0) / 3600.0 for b in LEDGER_BUCKETS}, "note": ""})
    used = [b for b in LEDGER_BUCKETS if any(abs(r["hours"].get(b, 0.0)) > 0 for r in rows)]
    return {"buckets": used, "rows": rows}


# ---- what differs: effective configurations ----

# A run without a key (config) or a file (code).
UNSET = "(unset)"
# Where a config value came from when no override of the run set it.
DEFAULT_SOURCE = "default"
# Sources of the job spec's override_sources, in the order a person reads them.
OVERRIDE_SOURCES = ("request", "inventory", "catalog", "project")
# At most this many differing config keys are returned (two verl releases differ in hundreds).
CONFIG_DIFF_MAX_ROWS = 500


def _dotted(path):
    """A config path tuple as one key: ``a.b.c``; a component holding a dot is bracketed (``a[b.c]``)."""
    name = ""
    for part in path:
        name = ("%s[%s]" % (name, part) if "." in part else "%s.%s" % (name, part)) if name else part
    return name


def flatten_config(config):
    """Flatten a config mapping to its leaves.

    :param config: dict (nested mappings, lists, scalars), e.g. a parsed resolved_config.yaml.
    :returns: dict ``{path tuple: value}``; mappings nest, an empty mapping is a leaf ``{}``,
        a list is one leaf (compared whole). Not a mapping: {}.
    """
    out = {}

    def walk(value, path):
        if isinstance(value, dict) and (value or not path):
            for key in value:
                walk(value[key], path + (str(key),))
        else:
            out[path] = value

    if isinstance(config, dict):
        walk(config, ())
    return out


def source_of(path, override_sources):
    """Where a config key's value came from.

    :param path: tuple, the key's path in the config.
    :param override_sources: the job spec's ``override_sources`` (override key -> source).
    :returns: tuple (source, override key): the source of the longest override key that is the
        key itself or a mapping above it (``+optim={lr: 1}`` sets ``optim.lr``), else
        (``default``, None): the snapshot's own value.
    """
    sources = override_sources if isinstance(override_sources, dict) else {}
    for end in range(len(path), 0, -1):
        key = ".".join(path[:end])
        if key in sources:
            return sources[key], key
    return DEFAULT_SOURCE, None


def _origin_label(origin, code_id, present):
    """One line naming where a value came from (shown under the value in the report)."""
    if origin["source"] != DEFAULT_SOURCE:
        more = "" if origin["override"] == origin["key"] else " (%s)" % origin["override"]
        return "%s%s" % (origin["source"], more)
    if not present:
        return "not in %s's config" % (code_id or "the snapshot")
    files = origin.get("files") or []
    return "default of %s%s" % (code_id or "the snapshot", (": %s" % files[0]) if files else "")


def config_diff(entries, locate=None, max_rows=CONFIG_DIFF_MAX_ROWS):
    """Compare the runs' effective configurations key by key.

    :param entries: list (report order) of dicts: ``submission_id``, ``config`` (the parsed
        ``config/resolved_config.yaml``, a mapping; None when the job has none: a script, or
        a job from before the file was kept), ``override_sources`` (the job spec's) and ``code_id``.
    :param locate: callable ``(submission_id, path tuple, value) -> list of files`` of that run's
        snapshot that set the value (``verl/trainer/config/...yaml``), or None.
    :param max_rows: int, rows kept (the rest are counted in ``more``).
    :returns: dict with
        ``compared`` (ids whose configs were compared: those that have one; nothing is compared
        with fewer than two), ``missing`` (ids without one: the report falls back to the job spec
        diff for them), ``rows`` (one per differing key, sorted by key:
        ``{key, values {id: JSON text or "(unset)"}, origins {id: {key, source, override, code_id,
        files, label}}, sources [distinct sources]}``), ``redacted`` (keys holding a redacted
        secret in some run: their values are not known, equal ``<redacted>`` are not a difference)
        and ``more`` (differing keys left out beyond max_rows).
        Each run's own submission id in a value is replaced by ``<submission_id>`` first, so
        per-job paths do not count as differences. A key only one run has is ``(unset)`` in the others.
    """
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import REDACTED

    compared = [e for e in entries if isinstance(e.get("config"), dict)]
    result = {"compared": [e["submission_id"] for e in compared],
              "missing": [e["submission_id"] for e in entries if not isinstance(e.get("config"), dict)],
              "rows": [], "redacted": [], "more": 0}
    if len(compared) < 2:
        return result
    flat, raw = {}, {}
    for entry in compared:
        pattern = _id_pattern(entry["submission_id"])
        raw[entry["submission_id"]] = flatten_config(entry["config"])
        flat[entry["submission_id"]] = {path: _normalise(value, pattern)
                                        for path, value in raw[entry["submission_id"]].items()}
    paths = sorted(set().union(*[set(v) for v in flat.values()]), key=_dotted)
    redacted_text = json.dumps(REDACTED)
    rows = []
    for path in paths:
        values = {rid: json.dumps(f[path], sort_keys=True) if path in f else UNSET for rid, f in flat.items()}
        key = _dotted(path)
        if redacted_text in values.values():
            result["redacted"].append(key)
        if len(set(values.values())) < 2:
            continue
        if len(rows) >= max_rows:
            result["more"] += 1
            continue
        origins = {}
        for entry in compared:
            rid = entry["submission_id"]
            source, override = source_of(path, entry.get("override_sources"))
            origin = {"key": ".".join(path), "source": source, "override": override,
                      "code_id": entry.get("code_id"), "files": []}
            present = path in flat[rid]
            if source == DEFAULT_SOURCE and present and locate is not None:
                origin["files"] = list(locate(rid, path, raw[rid][path]) or [])
            origin["label"] = _origin_label(origin, entry.get("code_id"), present)
            origins[rid] = origin
        rows.append({"key": key, "values": values, "origins": origins,
                     "sources": sorted({o["source"] for o in origins.values()},
                                       key=lambda s: (OVERRIDE_SOURCES + (DEFAULT_SOURCE,)).index(s)
                                       if s in OVERRIDE_SOURCES + (DEFAULT_SOURCE,) else 99)})
    result["rows"] = rows
    return result


def _same_value(a, b):
    """Config values equal as a YAML reader sees them: numbers by value (1 == 1.0), bools apart from numbers."""
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, numbers) and isinstance(b, numbers):
        return float(a) == float(b)
    return a == b


def default_files(path, value, files, changed=(), limit=5):
    """The snapshot config files that set a key to a value.

    A file under ``verl/trainer/config/`` sets ``actor_rollout_ref.actor.optim.lr`` when one of its
    own keys is a suffix of the key's path (``optim.lr`` in ``actor/actor.yaml``: Hydra places the
    file's content under a package) and holds the same value.

    :param path: tuple, the key's path in the effective config.
    :param value: its value in the run.
    :param files: dict ``{relative file: flatten_config of the file}``.
    :param changed: relative files that differ from the baseline's snapshot: listed first.
    :param limit: int, at most this many files.
    :returns: list of relative files, best first: changed files, then files Hydra composes
        (not ``_generated_*``), then the longest matching key, then by name.
    """
    found = []
    for name, keys in files.items():
        best = 0
        for own, own_value in keys.items():
            if own and len(own) <= len(path) and path[len(path) - len(own):] == own and _same_value(own_value, value):
                best = max(best, len(own))
        if best:
            found.append(((name not in changed, "/_generated_" in "/" + name, -best, name), name))
    return [name for _rank, name in sorted(found)][:limit]


# ---- what differs: code snapshots ----

# The inline diff of report.html/report.md: at most this many lines and bytes (UTF-8).
DIFF_MAX_LINES = 200
DIFF_MAX_BYTES = 20000
# Larger text files are named as changed but not diffed.
FILE_DIFF_MAX_BYTES = 2000000
# Files read first: configuration, then Python, then the rest.
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".cfg", ".ini")


def _file_rank(path):
    """Sort key of a file in the code diff: configuration first, then Python, then the rest."""
    return (0 if path.endswith(_CONFIG_SUFFIXES) else 1 if path.endswith(".py") else 2, path)


def is_binary(data):
    """Whether file content is binary: a NUL byte in its first 8 KiB, or not UTF-8 text."""
    if b"\0" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _lines(data):
    """Text lines of UTF-8 bytes, ends kept; only ``\\n`` splits (not form feeds or Unicode separators)."""
    parts = data.decode("utf-8").split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def file_diff(path, old, new, old_root, new_root):
    """The unified diff of one file between two snapshots.

    :param path: str, relative path in both snapshots (``verl/...``).
    :param old: bytes, or None when the file is added.
    :param new: bytes, or None when the file is removed.
    :param old_root: str, prefix of the old file's name in the diff (the old code_id).
    :param new_root: str, the same for the new file.
    :returns: tuple (record, lines): record ``{path, binary, too_large, added_lines, removed_lines}``
        (line counts None for binary and too large files), lines the diff as str lines
        ending in ``\\n`` (``--- old_root/path``, ``+++ new_root/path``, hunks; ``/dev/null``
        for an added or removed file; one ``Binary files ... differ`` line for binary files).
    """
    old_label = "%s/%s" % (old_root, path) if old is not None else "/dev/null"
    new_label = "%s/%s" % (new_root, path) if new is not None else "/dev/null"
    record = {"path": path, "binary": any(d is not None and is_binary(d) for d in (old, new)),
              "too_large": False, "added_lines": None, "removed_lines": None}
    if record["binary"]:
        return record, ["Binary files %s and %s differ\n" % (old_label, new_label)]
    if max(len(old or b""), len(new or b"")) > FILE_DIFF_MAX_BYTES:
        record["too_large"] = True
        return record, ["Files %s and %s differ (over %d bytes: not diffed)\n"
                        % (old_label, new_label, FILE_DIFF_MAX_BYTES)]
    lines = []
    for line in difflib.unified_diff(_lines(old or b""), _lines(new or b""), old_label, new_label):
        if line.endswith("\n"):
            lines.append(line)
        else:
            lines.extend([line + "\n", "\\ No newline at end of file\n"])
    body = lines[2:]
    record["added_lines"] = sum(1 for line in body if line.startswith("+"))
    record["removed_lines"] = sum(1 for line in body if line.startswith("-"))
    return record, lines


def code_diff(pairs, max_lines=DIFF_MAX_LINES, max_bytes=DIFF_MAX_BYTES):
    """Compare code snapshots file by file.

    :param pairs: list of dicts, one per snapshot compared with the baseline's: ``from`` and
        ``to`` (code_ids), ``runs`` (ids of the runs on ``to``), ``old`` and ``new`` (content
        records ``{relative path: sha256}``, None when unknown), ``read_old`` and ``read_new``
        (callables: relative path -> bytes, raising OSError) and ``error`` (why a record is
        missing, or None).
    :param max_lines: int >= 0, lines of the inline diff (shared by every pair).
    :param max_bytes: int >= 0, its bytes (UTF-8).
    :returns: tuple (summary, full diff text). summary: ``pairs`` (per pair ``from``, ``to``,
        ``runs``, ``error``, ``added``, ``removed``, ``changed`` - file records of ``file_diff``
        plus ``shown`` (``full``, ``part`` or ``no``: how much of a changed text file's diff is
        inline) and ``error`` (an unreadable file) - ``diff`` (the inline unified diff of the
        changed text files, configuration files first, cut at a whole line when a cap is
        reached) and ``truncated``), ``max_lines``, ``max_bytes``, ``shown_lines``,
        ``shown_bytes``, ``full_lines``, ``full_bytes`` (of the full diff, which also holds
        added and removed files) and ``truncated`` (any pair's inline diff was cut).
        The full diff is empty when no pair has a differing file.
    """
    lines_left, bytes_left = max(0, int(max_lines)), max(0, int(max_bytes))
    full, summary_pairs = [], []
    for pair in pairs:
        entry = {"from": pair["from"], "to": pair["to"], "runs": list(pair.get("runs") or []),
                 "error": pair.get("error"), "added": [], "removed": [], "changed": [], "diff": "",
                 "truncated": False}
        summary_pairs.append(entry)
        old, new = pair.get("old"), pair.get("new")
        if entry["error"] or old is None or new is None:
            entry["error"] = entry["error"] or "no content record"
            continue
        kinds = (("changed", sorted((p for p in old if p in new and old[p] != new[p]), key=_file_rank)),
                 ("added", sorted((p for p in new if p not in old), key=_file_rank)),
                 ("removed", sorted((p for p in old if p not in new), key=_file_rank)))
        if not any(paths for _kind, paths in kinds):
            continue
        full.append("# %s -> %s (runs %s): %d changed, %d added, %d removed\n" % (
            pair["from"], pair["to"], ", ".join(entry["runs"]), len(kinds[0][1]), len(kinds[1][1]),
            len(kinds[2][1])))
        inline = []
        for kind, paths in kinds:
            for path in paths:
                try:
                    record, lines = file_diff(path, None if kind == "added" else pair["read_old"](path),
                                              None if kind == "removed" else pair["read_new"](path),
                                              pair["from"], pair["to"])
                    record["error"] = None
                except OSError as exc:
                    record = {"path": path, "binary": False, "too_large": False, "added_lines": None,
                              "removed_lines": None, "error": "unreadable: %s" % exc}
                    lines = ["Files %s/%s and %s/%s differ (%s)\n"
                             % (pair["from"], path, pair["to"], path, record["error"])]
                full.extend(lines)
                if kind == "changed":
                    shown = 0
                    if not (record["binary"] or record["too_large"] or record["error"]):
                        for line in lines:
                            size = len(line.encode("utf-8"))
                            if lines_left < 1 or size > bytes_left:
                                lines_left = 0
                                break
                            inline.append(line)
                            lines_left -= 1
                            bytes_left -= size
                            shown += 1
                        if shown < len(lines):
                            entry["truncated"] = True
                    record["shown"] = "full" if lines and shown == len(lines) else ("part" if shown else "no")
                entry[kind].append(record)
        entry["diff"] = "".join(inline)
    text = "".join(full)
    inline_all = "".join(p["diff"] for p in summary_pairs)
    return {"pairs": summary_pairs, "max_lines": max(0, int(max_lines)), "max_bytes": max(0, int(max_bytes)),
            "shown_lines": inline_all.count("\n"), "shown_bytes": len(inline_all.encode("utf-8")),
            "full_lines": text.count("\n"), "full_bytes": len(text.encode("utf-8")),
            "truncated": any(p["truncated"] for p in summary_pairs)}, text


# ---- plots ----

# A metric with at most this many points in every run is drawn as points, one column per run.
POINTS_MAX = 2


def plot_kind(lines, key, points_max=POINTS_MAX):
    """How to draw one metric: ``points`` (every curve logged it at most ``points_max`` times,
    e.g. a validation at the end), ``lines`` (against the training step) or ``none`` (no data).

    :param lines: the report's ``lines`` (with ``series``).
    :param key: str, the metric.
    """
    counts = [len((line.get("series") or {}).get(key) or []) for line in lines]
    if not any(counts):
        return "none"
    return "points" if max(counts) <= points_max else "lines"
