#!/usr/bin/env python3
"""Write the variation matrix's last run (build/matrix.json) into the docs.

* docs/training-on-cpu.md, between ``<!-- matrix:begin -->`` and ``<!-- matrix:end -->``: one row per
  case of tests/matrix/cases.yml: the case, what it sets (its trainer overrides), how many of verl's
  example scripts set it (tests/matrix/verl_examples_counts.json, with the tag), the expectation
  (verl's reason for a platform it cannot use) and the result of the last run (``not run`` when
  build/matrix.json has no row for it);
* docs/benchmarks.md, between ``<!-- matrix-bench:begin -->`` and ``<!-- matrix-bench:end -->``: the
  run's date and commit and the wall seconds per case (the run and its resume).

Markers missing from a file are an error (nothing is written). Usage::

    python tests/matrix/docs.py [--results build/matrix.json] [--check]

``--check`` exits 1 when a file would change (the docs are not from the last run).
"""
import argparse
import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from run import CASES_FILE, DEFAULT_OUT, load_cases  # noqa: E402

COUNTS = os.path.join(HERE, "verl_examples_counts.json")
TRAINING_DOC = os.path.join(ROOT, "docs", "training-on-cpu.md")
BENCH_DOC = os.path.join(ROOT, "docs", "benchmarks.md")


def cell(text):
    """Text safe in a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def sets(spec):
    """The case's trainer overrides as ``key=value`` code spans."""
    items = []
    for key, value in (spec.get("trainer_overrides") or {}).items():
        value = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        items.append("`%s=%s`" % (key, value))
    return ", ".join(items)


def outcome(row, steps):
    """The result column: what the last run saw, and PASS/FAIL against the expectation."""
    if not row:
        return "not run"
    verdict = "PASS" if row.get("result") == "pass" else "FAIL"
    if row.get("expectation") == "trains" and row.get("result") == "pass":
        return "%s: %s; resumed from step %d, continued at %d" % (verdict, row.get("summary"), steps, steps + 1)
    seen = row.get("observed") or "no verdict"
    text = "%s: %s" % (verdict, seen)
    if row.get("summary"):
        text += " (%s)" % row["summary"][:160]
    if row.get("result") != "pass":
        text += "; expected %s" % row.get("expectation")
        if row.get("expectation") == "trains" and row.get("problems"):
            text += ": " + "; ".join(row["problems"])[:200]
    return text


def training_table(specs, steps, results, counts):
    """The Markdown of the cases table."""
    lines = ["Last run: %s (commit %s), %d steps per case, each on the local cluster; counts: verl %s "
             "(%s) `examples/`, %d scripts (`tests/matrix/derive.py`)."
             % (results.get("updated", "never"), results.get("commit", "-"), steps, counts["tag"],
                counts["commit"][:10], counts["scripts"]),
             "",
             "| case | workload | what it sets | scripts in verl's examples | expected | result |",
             "|---|---|---|---|---|---|"]
    rows = results.get("cases") or {}
    for spec in specs:
        count = spec.get("count")
        counted = "%d (`%s`)" % (count, spec["counted"]) if spec.get("counted") else spec.get("source", "-")
        expected = "trains" if spec["expectation"] == "trains" else "%s: %s" % (spec["expectation"],
                                                                               spec.get("reason", ""))
        lines.append("| %s |" % " | ".join(cell(c) for c in (
            spec["name"], spec["workload"], "%s: %s" % (spec.get("sets", ""), sets(spec)), counted, expected,
            outcome(rows.get(spec["name"]), steps))))
    return "\n".join(lines)


def bench_section(specs, results):
    """The Markdown of the benchmark section's body."""
    rows = results.get("cases") or {}
    lines = ["Last update %s (commit %s, %s CPUs): `tests/matrix/run.py` on the local cluster, one case at a"
             " time, each `submit.yml` run timed from the controller (validation, submission, training,"
             " verdict)."
             % (results.get("updated", "never"), results.get("commit", "-"), results.get("host_cpus", "?")),
             "",
             "The machine is shared: the 1-minute load average at each case's end is beside it (2 CPUs).",
             "",
             "| case | workload | run | its resume | result | ended | load |",
             "|---|---|---|---|---|---|---|"]
    total = 0.0
    for spec in specs:
        row = rows.get(spec["name"])
        if not row:
            lines.append("| %s | %s | not run | - | - | - | - |" % (spec["name"], spec["workload"]))
            continue
        run, resume = row.get("wall_s"), row.get("resume_wall_s")
        total += (run or 0) + (resume or 0)
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            spec["name"], spec["workload"], "%.0f s" % run if run else "-", "%.0f s" % resume if resume else "-",
            "pass" if row.get("result") == "pass" else "FAIL (%s)" % (row.get("observed") or "-"),
            row.get("at", "-"), row.get("load_avg", "-")))
    ci = [s["name"] for s in specs if s.get("ci")]
    ci_s = sum((rows.get(n) or {}).get("wall_s", 0) + ((rows.get(n) or {}).get("resume_wall_s") or 0) for n in ci)
    lines += ["", "Total %.0f s (%.1f min) for the cases run; the CI subset (%s, `make matrix-ci`): %.0f s."
              % (total, total / 60, ", ".join(ci), ci_s)]
    return "\n".join(lines)


def replace_between(text, begin, end, body, path):
    """``text`` with what lies between the markers replaced by ``body``; raises when a marker is missing."""
    pattern = re.compile(r"(%s\n).*?(%s)" % (re.escape(begin), re.escape(end)), re.S)
    if not pattern.search(text):
        raise SystemExit("%s has no %s ... %s markers" % (path, begin, end))
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text, count=1)


def main(argv=None):
    """Rewrite (or ``--check``) the two docs from the results file; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="exit 1 when a doc is not from the results")
    args = parser.parse_args(argv)
    steps, specs = load_cases(CASES_FILE)
    with open(args.results, encoding="utf-8") as handle:
        results = json.load(handle)
    with open(COUNTS, encoding="utf-8") as handle:
        counts = json.load(handle)
    stale = []
    table = training_table(specs, steps, results, counts)
    for path, begin, end, body in (
            (TRAINING_DOC, "<!-- matrix:begin -->", "<!-- matrix:end -->", table),
            (BENCH_DOC, "<!-- matrix-bench:begin -->", "<!-- matrix-bench:end -->", bench_section(specs, results))):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        new = replace_between(text, begin, end, body, path)
        if new != text:
            stale.append(path)
            if not args.check:
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(new)
    if args.check and stale:
        print("not from %s: %s" % (args.results, ", ".join(stale)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
