# -*- coding: utf-8 -*-
"""The GPU-hour ledger of a period: the runs' ledgers added up per group, beside what the cluster held.

Two sources, both on the shared storage:

* each run's ``jobs/<run>/logs/ledger.json`` (its first attempt's job directory, written by the job controller; the
  format is the contract of issue 63, docs/jobs.md "ledger.yml"): ``gpu_seconds_held``, ``buckets`` (bucket name ->
  GPU-seconds), ``goodput``, who and what (``owner``, ``team``, ``project``, ``workload``, ``code_id``) and its
  ``attempts`` with their ``started_at``/``ended_at`` (seconds since the epoch);
* the cluster's own capacity, ``controller/capacity-YYYY-MM.jsonl`` (the job controller appends one line a minute,
  :func:`capacity_line`): ``{"at": epoch_s, "nodes": N, "gpus": G, "interval_s": s}``, the ALIVE workers and their
  GPUs (logical GPUs on a docker host) over the ``interval_s`` seconds that end at ``at``.

A run that crosses the period's start or end is counted **for its part**: each attempt's GPU-seconds and buckets are
scaled by the share of the attempt's wall time (``started_at`` to ``ended_at``, or to the ledger's ``computed_at`` while
it runs) inside the period, as if its buckets were spread evenly over the attempt (an estimate, said in the run's row as
``share`` < 1). A run wholly inside the period counts whole. That way a week's sum can be set against the cluster's
GPU-seconds of the same week, and two weeks add up.

Standard library only; nothing here talks to Ray.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import os
import re

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_ledger import BUCKETS  # noqa: F401 - the contract's

GROUP_BY = ("owner", "team", "workload", "code_id")
"""What ``by`` may name: a key of ledger.json whose value groups the runs."""

LEDGER_FILE = FILES["ledger"]
"""A run's ledger, relative to its first attempt's job directory."""

MAX_LEDGER_BYTES = 1 << 20
"""A ledger.json larger than this (bytes) is skipped and named, not read (a run's ledger is a few KiB)."""

CAPACITY_EVERY_S = 60.0
"""Seconds between two capacity lines of the job controller."""

CAPACITY_MAX_GAP_S = 300.0
"""A capacity line covers at most this many seconds back (longer: the controller was down; the gap stays uncovered)."""

NONE_GROUP = "(none)"
"""The group of a run whose ``by`` key is missing or null (a run without a team)."""

_SINCE_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([dhm])$")
_UNITS_S = {"d": 86400.0, "h": 3600.0, "m": 60.0}


class LedgerInputError(ValueError):
    """A bad ``since``/``until``/``by``; the message names the variable and the fix."""


def parse_time(value, now, name="since"):
    """Seconds since the epoch (float) of ``since`` or ``until`` as ledger.yml takes it.

    :param value: str: a duration back from ``now`` (``7d``, ``24h``, ``30m``, decimals allowed) or an ISO 8601 date or
        date-time (``2026-11-20``, ``2026-11-20T08:00``, ``2026-11-20T08:00:00+01:00``; UTC when it has no offset);
        int or float: seconds since the epoch.
    :param now: float, seconds since the epoch.
    :param name: str, the variable's name for the message.
    :raises LedgerInputError: naming ``name``, the value and the forms taken.
    """
    if isinstance(value, bool):
        value = str(value)
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value if value is not None else "").strip()
    match = _SINCE_RE.match(text)
    if match:
        return now - float(match.group(1)) * _UNITS_S[match.group(2)]
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise LedgerInputError(
            "%s=%r is neither a duration nor an ISO date: give -e %s=7d (days), 24h (hours), 30m (minutes), or a "
            "date such as 2026-11-20 or 2026-11-20T08:00 (UTC unless it carries an offset)" % (name, value, name))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def check_by(by):
    """``by`` (str) when it is one of GROUP_BY.

    :raises LedgerInputError: naming ``by`` and the values taken.
    """
    if by not in GROUP_BY:
        raise LedgerInputError("by=%r cannot group runs: give -e by=%s" % (by, "|".join(GROUP_BY)))
    return by


def read_ledgers(jobs_dir, max_bytes=MAX_LEDGER_BYTES):
    """Every ``<jobs_dir>/*/logs/ledger.json``, read one by one while the folder is listed (``os.scandir``).

    :param jobs_dir: str, ``<shared_root>/jobs``.
    :param max_bytes: int, a larger file is skipped (named in ``skipped``).
    :returns: tuple ``(ledgers, skipped)``: list of dicts (each ledger with ``_dir``, its job directory's name), list of
        str (``"<path>: why"``: too large, not JSON, not an object, without ``version``).
    :raises OSError: ``jobs_dir`` cannot be listed.
    """
    ledgers, skipped = [], []
    with os.scandir(jobs_dir) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            path = os.path.join(entry.path, LEDGER_FILE)
            try:
                size = os.stat(path).st_size
            except OSError:
                continue  # no ledger: a later attempt (the run's ledger is in its first one) or a run older than it
            if size > max_bytes:
                skipped.append("%s: %d bytes, over the %d bytes a ledger may have" % (path, size, max_bytes))
                continue
            try:
                with open(path, encoding="utf-8") as handle:
                    ledger = json.load(handle)
            except (OSError, ValueError) as exc:
                skipped.append("%s: not readable as JSON (%s)" % (path, exc))
                continue
            if not isinstance(ledger, dict) or "version" not in ledger:
                skipped.append("%s: not a ledger (an object with a version)" % path)
                continue
            ledger["_dir"] = entry.name
            ledgers.append(ledger)
    return ledgers, skipped


def _num(value):
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def _overlap(start, end, since, until):
    """Seconds of [start, end] inside [since, until] (float >= 0)."""
    return max(0.0, min(end, until) - max(start, since))


def run_share(ledger, since, until):
    """The part of one run's ledger inside [since, until] (see the module's docstring), or None when it held none.

    :param ledger: dict, a ledger.json.
    :param since: float, :param until: float, seconds since the epoch.
    :returns: dict: ``run``, ``owner``, ``team``, ``project``, ``workload``, ``code_id``, ``state``, ``verdict``,
        ``gpu_seconds_held`` (in the period), ``buckets`` (every BUCKETS key, in the period), ``share`` (float 0..1: the
        period's part of the run's whole GPU-seconds; 1.0: counted whole), ``goodput`` (productive / held in the
        period, None when nothing was held), ``submitted_at``, ``ended_at``.
    """
    open_end = _num(ledger.get("computed_at")) or until
    attempts = [a for a in ledger.get("attempts") or [] if isinstance(a, dict)]
    if not attempts:  # a ledger without attempts: the run's own span stands for one attempt
        attempts = [{"started_at": ledger.get("submitted_at"), "ended_at": ledger.get("ended_at"),
                     "gpu_seconds_held": ledger.get("gpu_seconds_held"), "buckets": ledger.get("buckets") or {}}]
    held, buckets = 0.0, dict.fromkeys(BUCKETS, 0.0)
    for attempt in attempts:
        start = _num(attempt.get("started_at"))
        end = _num(attempt.get("ended_at")) or open_end
        gpu_s = _num(attempt.get("gpu_seconds_held"))
        if gpu_s <= 0:
            continue
        span = end - start
        part = 1.0 if span <= 0 and since <= start <= until else (_overlap(start, end, since, until) / span
                                                                  if span > 0 else 0.0)
        if part <= 0:
            continue
        held += gpu_s * part
        for name in BUCKETS:
            buckets[name] += _num((attempt.get("buckets") or {}).get(name)) * part
    if held <= 0:
        return None
    whole = _num(ledger.get("gpu_seconds_held")) or sum(_num(a.get("gpu_seconds_held")) for a in attempts)
    row = {key: ledger.get(key) for key in ("run", "owner", "team", "project", "workload", "code_id", "state",
                                            "verdict", "submitted_at", "ended_at")}
    row["run"] = row["run"] or ledger.get("_dir")
    row.update(gpu_seconds_held=held, buckets=buckets, share=min(1.0, held / whole) if whole > 0 else 1.0,
               goodput=buckets["productive"] / held if held > 0 else None)
    return row


def group_sums(rows, by):
    """The rows added up per value of ``by``, largest GPU-seconds first.

    :param rows: list of :func:`run_share` dicts. :param by: str, one of GROUP_BY.
    :returns: list of dicts ``{"group", "runs", "gpu_seconds_held", "buckets", "goodput"}`` (goodput: the group's
        productive / held, None when it held nothing).
    """
    groups = {}
    for row in rows:
        key = row.get(by)
        key = NONE_GROUP if key in (None, "") else str(key)
        group = groups.setdefault(key, {"group": key, "runs": 0, "gpu_seconds_held": 0.0,
                                        "buckets": dict.fromkeys(BUCKETS, 0.0)})
        group["runs"] += 1
        group["gpu_seconds_held"] += row["gpu_seconds_held"]
        for name in BUCKETS:
            group["buckets"][name] += row["buckets"][name]
    out = sorted(groups.values(), key=lambda g: (-g["gpu_seconds_held"], g["group"]))
    for group in out:
        held = group["gpu_seconds_held"]
        group["goodput"] = group["buckets"]["productive"] / held if held > 0 else None
    return out


# -- the cluster's own GPU-seconds ---------------------------------------------------------------------------------

def capacity_file(shared_dir, at):
    """The capacity file of the UTC month of ``at``: ``<shared_dir>/controller/capacity-YYYY-MM.jsonl`` (str)."""
    month = datetime.datetime.fromtimestamp(at, datetime.timezone.utc).strftime("%Y-%m")
    return os.path.join(shared_dir, "controller", "capacity-%s.jsonl" % month)


def capacity_line(at, nodes, gpus, interval_s):
    """One line of the capacity file (str, JSON and a newline).

    :param at: float, seconds since the epoch (the end of the stretch it covers).
    :param nodes: int, ALIVE worker nodes. :param gpus: float, their GPUs (``resources_total["GPU"]``, logical or not).
    :param interval_s: float, seconds the line covers back from ``at`` (0 for the first line after a start).
    """
    return json.dumps({"at": round(at, 3), "nodes": int(nodes), "gpus": gpus, "interval_s": round(interval_s, 3)},
                      sort_keys=True) + "\n"


def _months(since, until):
    """The UTC months (``YYYY-MM`` str) from ``since``'s to ``until``'s, both included."""
    first = datetime.datetime.fromtimestamp(since, datetime.timezone.utc)
    last = datetime.datetime.fromtimestamp(until, datetime.timezone.utc)
    year, month, out = first.year, first.month, []
    while (year, month) <= (last.year, last.month):
        out.append("%04d-%02d" % (year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def cluster_gpu_seconds(shared_dir, since, until):
    """The GPU-seconds (and node-seconds) the cluster held in [since, until], from the capacity files.

    Each line covers the ``interval_s`` seconds that end at its ``at`` (at most CAPACITY_MAX_GAP_S) with its ``gpus``
    and ``nodes``; the part of that stretch inside the period counts. Stretches no line covers (the controller was
    down, or the period reaches past the newest line) are not guessed: they are ``uncovered_s``. Lines that are not
    JSON objects with numbers are skipped and counted.

    :param shared_dir: str, the shared storage on this host (the folder holding ``controller/``).
    :param since: float, :param until: float, seconds since the epoch.
    :returns: dict ``{"gpu_seconds", "node_seconds", "covered_s", "uncovered_s", "lines", "bad_lines", "files"}``.
    """
    gpu_s = node_s = covered = 0.0
    lines = bad = 0
    files = []
    months = _months(since, until + CAPACITY_MAX_GAP_S)
    for month in months:
        path = os.path.join(shared_dir, "controller", "capacity-%s.jsonl" % month)
        try:
            handle = open(path, encoding="utf-8")
        except OSError:
            continue
        files.append(path)
        with handle:
            for text in handle:
                try:
                    line = json.loads(text)
                    at, gpus = float(line["at"]), float(line["gpus"])
                    nodes = float(line.get("nodes") or 0)
                    interval = min(max(float(line.get("interval_s") or 0), 0.0), CAPACITY_MAX_GAP_S)
                except (ValueError, TypeError, KeyError, AttributeError):
                    bad += 1
                    continue
                lines += 1
                part = _overlap(at - interval, at, since, until)
                if part > 0:
                    covered += part
                    gpu_s += gpus * part
                    node_s += nodes * part
    return {"gpu_seconds": gpu_s, "node_seconds": node_s, "covered_s": covered,
            "uncovered_s": max(0.0, (until - since) - covered), "lines": lines, "bad_lines": bad, "files": files}


# -- the whole summing, as ledger.yml runs it -------------------------------------------------------------------

def ledger_period(jobs_dir, shared_dir, since, until, by, max_bytes=MAX_LEDGER_BYTES):
    """Read every run's ledger, keep the part inside [since, until], sum per ``by``, and set the cluster beside it.

    :param jobs_dir: str, ``<shared_root>/jobs``. :param shared_dir: str, ``<shared_root>``.
    :param since: float, :param until: float, seconds since the epoch (since < until).
    :param by: str, one of GROUP_BY.
    :returns: dict ``{"since", "until", "by", "runs" (run_share rows, oldest first), "groups" (group_sums),
        "total" (a group_sums dict of every run, ``group`` "all"), "cluster" (cluster_gpu_seconds),
        "idle_gpu_seconds" (the cluster's minus the runs', None without capacity lines), "skipped"}``.
    :raises LedgerInputError: a bad ``by`` or ``since`` >= ``until``. :raises OSError: ``jobs_dir`` cannot be listed.
    """
    check_by(by)
    if since >= until:
        raise LedgerInputError("since (%s) is not before until (%s): give -e since=7d or an ISO date in the past"
                               % (iso(since), iso(until)))
    ledgers, skipped = read_ledgers(jobs_dir, max_bytes)
    rows = [r for r in (run_share(ledger, since, until) for ledger in ledgers) if r is not None]
    rows.sort(key=lambda r: (_num(r.get("submitted_at")), str(r.get("run"))))
    total = group_sums([dict(r, all="all") for r in rows], "all") if rows else []
    total = total[0] if total else {"group": "all", "runs": 0, "gpu_seconds_held": 0.0,
                                    "buckets": dict.fromkeys(BUCKETS, 0.0), "goodput": None}
    cluster = cluster_gpu_seconds(shared_dir, since, until)
    idle = cluster["gpu_seconds"] - total["gpu_seconds_held"] if cluster["lines"] else None
    return {"since": since, "until": until, "by": by, "runs": rows, "groups": group_sums(rows, by), "total": total,
            "cluster": cluster, "idle_gpu_seconds": idle, "skipped": skipped}


def iso(seconds):
    """``seconds`` since the epoch as UTC text ``YYYY-mm-ddTHH:MM:SSZ`` (str)."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hours(seconds):
    return round(seconds / 3600.0, 3) if seconds is not None else None


def _pct(value):
    return "-" if value is None else "%.0f%%" % (100.0 * value)


CSV_COLUMNS = ("kind", "name", "owner", "team", "project", "workload", "code_id", "state", "verdict", "runs", "share",
               "gpu_hours_held", "goodput") + tuple("%s_gpu_hours" % b for b in BUCKETS)
"""The columns of ledger.csv: one row per run (``kind`` run), one per group (``kind`` the ``by`` key), one total."""


def _csv_row(kind, name, item, runs, labels=None, share=""):
    values = dict.fromkeys(CSV_COLUMNS, "")
    values.update(labels or {})
    values.update(kind=kind, name=name, runs=runs, share=share, gpu_hours_held=_hours(item["gpu_seconds_held"]),
                  goodput="" if item["goodput"] is None else round(item["goodput"], 4))
    values.update(("%s_gpu_hours" % b, _hours(item["buckets"][b])) for b in BUCKETS)
    return values


def ledger_csv(result):
    """ledger.csv of a :func:`ledger_period` result (str, written with the ``csv`` module).

    One row per run (``kind`` ``run``, ``share`` its part inside the period), one per group (``kind`` the ``by`` key),
    one total (``kind`` ``total``); columns CSV_COLUMNS, GPU-hours rounded to 0.001, goodput 0..1 (empty: none held).
    """
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for run in result["runs"]:
        labels = {k: "" if run.get(k) is None else run[k]
                  for k in ("owner", "team", "project", "workload", "code_id", "state", "verdict")}
        writer.writerow(_csv_row("run", run["run"], run, 1, labels, round(run["share"], 4)))
    for group in result["groups"]:
        writer.writerow(_csv_row(result["by"], group["group"], group, group["runs"]))
    writer.writerow(_csv_row("total", "all", result["total"], result["total"]["runs"]))
    return out.getvalue()


def ledger_table(result):
    """The table ledger.yml prints and ledger.md holds (list of str, markdown): a row per group, the runs' total, the
    cluster's GPU-hours and the idle remainder, in GPU-hours; the buckets that are zero in every group are left out."""
    used = [b for b in BUCKETS if any(abs(g["buckets"][b]) >= 0.5 for g in result["groups"])]
    head = [result["by"], "runs", "GPU-h held", "goodput"] + ["%s GPU-h" % b for b in used]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group in result["groups"] + [dict(result["total"], group="**all runs**")]:
        cells = [group["group"], str(group["runs"]), "%.2f" % _hours(group["gpu_seconds_held"]), _pct(group["goodput"])]
        cells += ["%.2f" % _hours(group["buckets"][b]) for b in used]
        lines.append("| " + " | ".join(cells) + " |")
    cluster, idle = result["cluster"], result["idle_gpu_seconds"]
    if cluster["lines"]:
        lines.append("")
        lines.append("cluster: %.2f GPU-h held by its ALIVE workers (%.2f node-h); runs %.2f GPU-h; idle %.2f GPU-h"
                     % (_hours(cluster["gpu_seconds"]), _hours(cluster["node_seconds"]),
                        _hours(result["total"]["gpu_seconds_held"]), _hours(idle)))
        if cluster["uncovered_s"] >= 60:
            lines.append("capacity unknown for %.1f h of the period (no job controller line: it was down, or older "
                         "than the capacity record); idle counts only the known part" % (cluster["uncovered_s"] / 3600))
    else:
        lines.append("")
        lines.append("cluster: no capacity line in the period (controller/capacity-YYYY-MM.jsonl): idle unknown")
    return lines


def ledger_markdown(result):
    """ledger.md of a :func:`ledger_period` result (str): the period, the table, the runs, what was skipped."""
    out = ["# GPU-hour ledger %s to %s, by %s" % (iso(result["since"]), iso(result["until"]), result["by"]), ""]
    out += ledger_table(result)
    out += ["", "## Runs", "", "| run | owner | team | workload | code_id | state | verdict | share | GPU-h | goodput |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for run in result["runs"]:
        out.append("| %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s |" % tuple(
            [run.get(k) if run.get(k) is not None else "-" for k in
             ("run", "owner", "team", "workload", "code_id", "state", "verdict")]
            + [run["share"], _hours(run["gpu_seconds_held"]), _pct(run["goodput"])]))
    if result["skipped"]:
        out += ["", "## Skipped", ""] + ["* %s" % s for s in result["skipped"]]
    out += ["", "A run crossing the period's start or end counts for its part (share < 1: each attempt's GPU-seconds "
            "scaled by its wall time inside the period). Idle: the cluster's GPU-seconds minus the runs' "
            "(docs/jobs.md, \"ledger.yml\").", ""]
    return "\n".join(out)
