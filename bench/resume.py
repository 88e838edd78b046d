#!/usr/bin/env python3
"""Benchmark of automatic restarts: seconds from a lost node to the next attempt's first step.

Runs tests/reliability/resume.py's cases against a running cluster (real SFT runs; each case
kills a worker mid-training and the project heals the cluster and continues the run) and reads
the figures the suite measured (``--seconds-out``):

* ``fault_to_first_new_step_s``: from ``docker kill`` to the first step the next attempt logs
  (goal: at most 120 s on the local cluster);
* ``steps_lost``: steps logged before the fault past the checkpoint the next attempt continued
  from (goal: at most ``trainer.save_freq``, 2 in these runs; one more when the newest checkpoint
  was corrupted on purpose and the one before it was used).

Usage: python bench/resume.py [--inventory inventories/local --host-shared /srv/mvp/private]
           [--only CASE ...] [--out bench/results/resume.json]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOALS = {"fault_to_first_new_step_s": 120, "steps_lost": 2}


def main():
    """Run the suite, compare its figures with the goals, write them; exit 1 when a case failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", default=os.path.join(ROOT, "inventories/local"))
    parser.add_argument("--host-shared", default="/srv/mvp/private")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/resume.json"))
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(suffix=".json") as figures:
        argv = [sys.executable, os.path.join(ROOT, "tests/reliability/resume.py"), "--inventory", args.inventory,
                "--host-shared", args.host_shared, "--seconds-out", figures.name]
        if args.only:
            argv += ["--only"] + args.only
        started = time.time()
        code = subprocess.call(argv, cwd=os.path.join(ROOT, "tests/reliability"))
        measured = json.load(open(figures.name)) if os.path.getsize(figures.name) else {}
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "suite_rc": code, "suite_s": round(time.time() - started, 1), "goals": GOALS, "measured": measured,
              "within_goals": {key: all(v <= goal for v in measured.get(key, [])) for key, goal in GOALS.items()}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
    print(json.dumps(result, indent=2, sort_keys=True))
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(main())
