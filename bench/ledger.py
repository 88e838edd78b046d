#!/usr/bin/env python3
"""Benchmark of ledger.yml's summing (module_utils mvp_ledger_sum.ledger_period) over many job directories.

Makes ``--runs`` job directories (1,000 by default) in a temporary folder, each with a ``logs/ledger.json`` in the
format of issue 63 (one to three attempts, every bucket filled, owners, teams, workloads and code ids spread over
the runs) and beside them the ``config/``, ``checkpoints/`` and ``debug/`` folders a job directory has; a third of
the directories are later attempts without a ledger, as on a real cluster. Also a month of the job controller's
capacity lines (one a minute: 43,200 lines). Then calls ``ledger_period`` (what the module ``ray_job_ledger`` runs on
the head, without Ansible) ``--repeat`` times per grouping key and reports the median and fastest seconds and the
peak RSS of this process (``resource.getrusage``; the figure includes Python itself), with the peak Python
allocation of one call (``tracemalloc``).

Writes the figures as JSON (``--out``) with the machine and Python version.

Usage: python bench/ledger.py [--runs 1000] [--repeat 5] [--out bench/results/ledger.json]
"""
import argparse
import json
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger_sum  # noqa: E402 pylint: disable=C0413

DAY = 86400.0


def make_ledger(run, start, rng):
    """One ledger.json dict of ``run`` starting at ``start`` (seconds since the epoch), its buckets closing."""
    attempts, at = [], start
    for index in range(rng.choice((1, 1, 1, 2, 3))):
        seconds = rng.uniform(300, 7200)
        gpus = rng.choice((1, 2, 4, 8))
        held = seconds * gpus
        shares = [rng.random() for _ in mvp_ledger_sum.BUCKETS]
        shares[1] *= 10  # productive dominates
        total = sum(shares)
        buckets = {b: held * s / total for b, s in zip(mvp_ledger_sum.BUCKETS, shares)}
        attempts.append({"submission_id": run if index == 0 else "%s-r%d" % (run, index), "started_at": at,
                         "ended_at": at + seconds, "seconds_held": seconds, "gpu_seconds_held": held,
                         "buckets": buckets, "queue_wait_s": 5.0, "heal_s": 30.0, "verdict": "failed",
                         "cause": "node_lost", "steps": {"first": 1, "last": 10, "resumed": 0, "recomputed": 1}})
        at += seconds + 60
    held = sum(a["gpu_seconds_held"] for a in attempts)
    buckets = {b: sum(a["buckets"][b] for a in attempts) for b in mvp_ledger_sum.BUCKETS}
    return {"version": 1, "run": run, "state": "ended", "verdict": "trained", "cause": None,
            "owner": "user%d" % rng.randrange(20), "team": rng.choice(("nlp", "vision", "rl", None)),
            "project": None, "workload": rng.choice(("sft", "grpo", "ppo")), "code_id": rng.choice(("v0.5.0", "v0.6.0")),
            "priority": "normal", "gpus": attempts[0]["gpu_seconds_held"] / attempts[0]["seconds_held"],
            "submitted_at": start - 10, "ended_at": attempts[-1]["ended_at"], "computed_at": attempts[-1]["ended_at"] + 5,
            "gpu_seconds_held": held, "buckets": buckets, "goodput": buckets["productive"] / held,
            "no_gpu": {"queue_wait_s": 10.0, "heal_s": 30.0}, "steps": {"productive": 100, "recomputed": 2, "lost": 0,
                                                                      "planned": 100},
            "estimates": ["checkpoint: from the save lines of the driver log"], "attempts": attempts}


def make_tree(root, runs, now, rng):
    """The job directories and a month of capacity lines under ``root``; returns the number of ledgers."""
    jobs = os.path.join(root, "jobs")
    ledgers = 0
    for index in range(runs):
        run = "sft-%06d" % index
        folder = os.path.join(jobs, run)
        for sub in ("config", "logs", "checkpoints", "debug"):
            os.makedirs(os.path.join(folder, sub))
        with open(os.path.join(folder, "config", "job_spec.json"), "w", encoding="utf-8") as handle:
            json.dump({"submission_id": run, "workload": "sft"}, handle)
        if index % 3 == 2:  # a later attempt: its run's ledger is in the first attempt's directory
            continue
        with open(os.path.join(folder, "logs", "ledger.json"), "w", encoding="utf-8") as handle:
            json.dump(make_ledger(run, now - rng.uniform(0, 30 * DAY), rng), handle)
        ledgers += 1
    folder = os.path.join(root, "controller")
    os.makedirs(folder)
    at = now - 30 * DAY
    while at < now:
        path = mvp_ledger_sum.capacity_file(root, at)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(mvp_ledger_sum.capacity_line(at, 16, 128.0, 60.0))
        at += 60.0
    return ledgers


def main():
    """Make the tree, time the summing and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ledger.json"))
    args = parser.parse_args()
    rng = random.Random(63)
    now = time.time()
    with tempfile.TemporaryDirectory() as root:
        ledgers = make_tree(root, args.runs, now, rng)
        jobs = os.path.join(root, "jobs")
        results = {"machine": platform.node(), "python": platform.python_version(),
                   "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "job_directories": args.runs,
                   "ledgers": ledgers, "capacity_lines": int(30 * DAY / 60), "by": {}}
        for by in mvp_ledger_sum.GROUP_BY:
            times = []
            for _ in range(args.repeat):
                began = time.perf_counter()
                result = mvp_ledger_sum.ledger_period(jobs, root, now - 7 * DAY, now, by)
                mvp_ledger_sum.ledger_csv(result)
                times.append(time.perf_counter() - began)
            results["by"][by] = {"median_s": round(statistics.median(times), 4), "fastest_s": round(min(times), 4),
                                 "runs_in_week": len(result["runs"]), "groups": len(result["groups"])}
        tracemalloc.start()
        mvp_ledger_sum.ledger_period(jobs, root, now - 30 * DAY, now, "owner")
        results["month_peak_python_alloc_mib"] = round(tracemalloc.get_traced_memory()[1] / 2.0 ** 20, 2)
        tracemalloc.stop()
        results["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
    print(json.dumps(results, indent=2, sort_keys=True))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
