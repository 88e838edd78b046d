#!/usr/bin/env python3
"""Check a report of report.yml against the runs' own files, computed here independently.

Reads the report folder and the job directories on the docker host. For every key
metric of the catalog and every run, the first, last and best value, the step
compared with the baseline, the difference and the verdict are computed here from
``logs/metrics.jsonl`` (a resumed run continues its parent's curve up to the
checkpoint named in its job spec) and the catalog's tolerance, then compared with
the numbers in report.html's tables. The embedded plots must be PNG images equal
to the files in ``plots/``; with ``--lines`` every plotted curve's colour must cover
a line's worth of pixels in each plot (read back with matplotlib).

Usage:
    python tests/integration/check_report.py --host-shared /srv/mvp/private --report ID \\
        --runs A,B,C [--baseline A] [--same A,B] [--differs A,C] [--resumed C] [--lines]
Exit code 0 when every check passes; prints one line per check.
"""
import argparse
import base64
import html.parser
import io
import json
import math
import os
import re
import sys

import yaml

from check_training import load_json  # the same folder: one JSON reader for the checks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join(ROOT, "inventories/common/all/00-mvp-workloads.yml")


class Tables(html.parser.HTMLParser):
    """Collect each <table>'s attributes and cell texts, and each <img>'s src."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"attrs": dict(attrs), "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(dict(attrs))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1]["rows"][-1].append(self._cell.strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def series_of(job_dir):
    """metric -> {step: value} from a job's metrics.jsonl (last value of a step wins)."""
    out = {}
    with open(os.path.join(job_dir, "logs/metrics.jsonl"), encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            for key, value in record["data"].items():
                out.setdefault(key, {})[record["step"]] = value
    return out


def spec_of(job_dir):
    with open(os.path.join(job_dir, "config/job_spec.json"), encoding="utf-8") as handle:
        return json.load(handle)


def curve(jobs, rid, key):
    """The run's points of one metric, prefixed by its parents' up to each resumed step."""
    points = dict(series_of(os.path.join(jobs, rid)).get(key, {}))
    resumed = spec_of(os.path.join(jobs, rid)).get("resume_from")
    while resumed:
        parent = series_of(os.path.join(jobs, resumed["submission_id"])).get(key, {})
        points.update({s: v for s, v in parent.items() if s <= resumed["step"] and s not in points})
        resumed = spec_of(os.path.join(jobs, resumed["submission_id"])).get("resume_from")
    return sorted(points.items())


def number(text):
    """A table cell as a float, or None for an empty cell."""
    return None if text in ("—", "-", "") else float(text)


def close(a, b):
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-9))




def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-shared", required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--runs", required=True, help="the report's runs, in order")
    parser.add_argument("--baseline", help="default: the first run")
    parser.add_argument("--same", help="two runs whose every metric must be identical")
    parser.add_argument("--differs", help="two runs whose train/loss must differ")
    parser.add_argument("--resumed", help="a run whose first step must follow its parent's checkpoint")
    parser.add_argument("--lines", action="store_true", help="every curve's colour must show in each plot")
    parser.add_argument("--config-differs", action="append", default=[], metavar="RUN:KEY:SOURCE",
                        help="the report's config diff must list KEY with RUN's value from SOURCE (repeatable)")
    args = parser.parse_args()
    jobs = os.path.join(args.host_shared, "jobs")
    folder = os.path.join(args.host_shared, "reports", args.report)
    runs = args.runs.split(",")
    baseline = args.baseline or runs[0]
    failures = []

    def check(ok, what):
        print("%s %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            failures.append(what)

    with open(CATALOG, encoding="utf-8") as handle:
        catalog = yaml.safe_load(handle)["mvp_workloads"]
    workloads = sorted({spec_of(os.path.join(jobs, r))["workload"] for r in runs})
    metrics = [m for w in workloads for m in catalog[w].get("metrics", [])]

    parsed = Tables()
    with open(os.path.join(folder, "report.html"), encoding="utf-8") as handle:
        parsed.feed(handle.read())
    tables = {t["attrs"].get("data-metric"): t["rows"] for t in parsed.tables if t["attrs"].get("data-metric")}
    check(sorted(tables) == sorted(m["key"] for m in metrics),
          "report.html has one table per key metric of %s: %s" % (",".join(workloads), sorted(tables)))

    for metric in metrics:
        key, better = metric["key"], metric.get("better", "none")
        tol = metric.get("tolerance") or {}
        rows = {row[0]: row for row in tables.get(key, [])[1:]}
        base = dict(curve(jobs, baseline, key))
        for rid in runs:
            points = curve(jobs, rid, key)
            row = rows.get(rid)
            if row is None:
                check(False, "%s: a row for %s" % (key, rid))
                continue
            values = [v for _, v in points]
            best = None if better == "none" or not values else (min(values) if better == "lower" else max(values))
            expect = [values[0] if values else None, values[-1] if values else None, best]
            got = [number(c) for c in row[1:4]]
            check(all(close(a, b) for a, b in zip(expect, got)),
                  "%s %s first/last/best %s == computed %s" % (key, rid, got, expect))
            if rid == baseline or not points:
                continue
            common = [s for s, _ in points if s in base]
            step = common[-1]
            diff = dict(points)[step] - base[step]
            allowed = max(tol.get("abs", 0), tol.get("rel", 0) * abs(base[step]))
            bad = diff if better == "lower" else -diff
            verdict = ("same" if diff == 0 else "changed") if better == "none" else (
                "worse" if bad > allowed else "better" if -bad > allowed else "within tolerance")
            check(int(row[4]) == step and close(number(row[7]), diff) and row[8] == verdict,
                  "%s %s at step %s: difference %s, verdict %r == computed step %d, %+.6g, %r"
                  % (key, rid, row[4], row[7], row[8], step, diff, verdict))

    # The plots: valid PNGs, embedded in the HTML and kept as files.
    from matplotlib import image as mpimg

    with open(os.path.join(folder, "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    # The GPU-hour ledger's stacked bars (issue 63) are embedded too when a run has a ledger: told apart by their alt.
    ledger_images = [i for i in parsed.images if (i.get("alt") or "").startswith("stacked GPU-hours")]
    images = [i for i in parsed.images if i not in ledger_images]
    runs_with_ledger = [r for r in runs if os.path.exists(os.path.join(jobs, r, "logs", "ledger.json"))]
    if report.get("ledger_plot") or runs_with_ledger:
        data = base64.b64decode(ledger_images[0]["src"].split(",", 1)[1]) if len(ledger_images) == 1 else b""
        with open(os.path.join(folder, "plots", "ledger.png"), "rb") as handle:
            on_disk = handle.read()
        check(data[:8] == b"\x89PNG\r\n\x1a\n" and data == on_disk,
              "the ledger's stacked bars: one embedded PNG (%d), the same as plots/ledger.png (runs with a ledger: %s)"
              % (len(ledger_images), ", ".join(runs_with_ledger)))
    check(len(images) == len(metrics), "one embedded plot per key metric (%d)" % len(images))
    for img, metric in zip(images, metrics):
        data = base64.b64decode(img["src"].split(",", 1)[1])
        with open(os.path.join(folder, report["plots"][metric["key"]]), "rb") as handle:
            on_disk = handle.read()
        pixels = mpimg.imread(io.BytesIO(data), format="png")
        check(data[:8] == b"\x89PNG\r\n\x1a\n" and data == on_disk and pixels.shape[0] > 100,
              "%s plot: PNG %dx%d, same as %s" % (metric["key"], pixels.shape[1], pixels.shape[0],
                                                 report["plots"][metric["key"]]))
        if args.lines:
            rgb = pixels[:, :, :3]
            for line in report["lines"]:
                colour = [int(line["color"][i:i + 2], 16) / 255.0 for i in (1, 3, 5)]
                count = int(((abs(rgb - colour).max(axis=2)) < 0.08).sum())
                check(count > 150, "%s plot: %d pixels of %s's colour %s" % (metric["key"], count, line["label"],
                                                                           line["color"]))

    if args.same:
        a, b = args.same.split(",")
        sa, sb = series_of(os.path.join(jobs, a)), series_of(os.path.join(jobs, b))
        keys = [m["key"] for m in metrics if m["key"] in sa]
        check(keys and all(sa[k] == sb.get(k) for k in keys),
              "%s and %s logged identical %s" % (a, b, ", ".join(keys)))
    if args.differs:
        a, b = args.differs.split(",")
        check(series_of(os.path.join(jobs, a))["train/loss"] != series_of(os.path.join(jobs, b))["train/loss"],
              "%s and %s logged different train/loss" % (a, b))
    if args.resumed:
        resumed = spec_of(os.path.join(jobs, args.resumed))["resume_from"]
        ckpts = os.listdir(os.path.join(jobs, resumed["submission_id"], "checkpoints"))
        newest = max(int(m.group(1)) for m in (re.match(r"global_step_(\d+)$", n) for n in ckpts) if m)
        first = min(min(points) for points in series_of(os.path.join(jobs, args.resumed)).values())
        check(resumed["step"] == newest and first == newest + 1,
              "%s continues %s: its first step %d follows the newest checkpoint global_step_%d"
              % (args.resumed, resumed["submission_id"], first, newest))
    report = json.load(open(os.path.join(folder, "report.json"), encoding="utf-8"))
    rows = {row["key"]: row for row in (report.get("config_diff") or {}).get("rows") or []}
    for item in args.config_differs:
        rid, key, source = item.split(":")
        row = rows.get(key) or {}
        origin = (row.get("origins") or {}).get(rid) or {}
        # The run's value as its job spec gave it (a request or inventory override), else as its saved config holds it.
        given = spec_of(os.path.join(jobs, rid))["trainer_overrides"].get(key)
        if given is None:
            with open(os.path.join(jobs, rid, "config", "resolved_config.yaml"), encoding="utf-8") as handle:
                given = yaml.safe_load(handle)
            for part in key.split("."):
                given = given[part]
        shown = (row.get("values") or {}).get(rid)
        check(origin.get("source") == source and shown is not None and float(shown) == float(given),
              "the config diff lists %s: %s's value %s (shown %s) from %s (shown %s)"
              % (key, rid, given, shown, source, origin.get("source")))
    if args.config_differs:
        with open(os.path.join(folder, "report.html"), encoding="utf-8") as handle:
            html = handle.read()
        check("What differs" in html and html.index("What differs") < html.index("data-metric"),
              "report.html shows what differs before the metric tables")
    with open(os.path.join(folder, "report.md"), encoding="utf-8") as handle:
        markdown = handle.read()
    check(all("| %s |" % rid in markdown for rid in runs), "report.md has a row for every run")
    # Each tracked run links its MLflow run: the UI's page of the run its job directory recorded at submission
    # (the address may be the head's IP now, not at submission).
    records = {rid: load_json(os.path.join(jobs, rid, "config", "mlflow_run.json")) or {} for rid in runs}
    pages = ["/#/experiments/%s/runs/%s)" % (r["experiment_id"], r["run_id"]) for r in records.values() if r.get("run_id")]
    check(all(re.search(r"\[run\]\(https?://[^)\s]+" + re.escape(page), markdown) for page in pages),
          "report.md links each tracked run to its MLflow run (%d of %d tracked)" % (len(pages), len(runs)))
    print("report %s: %d checks failed" % (args.report, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
