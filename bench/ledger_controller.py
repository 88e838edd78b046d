#!/usr/bin/env python3
"""Benchmark of what the GPU-hour ledgers cost the job controller (issue 63): its time and memory to keep the ledgers
of 1 and of 20 running runs.

Makes ``--runs`` running runs in a temporary shared folder (each an SFT-like attempt of 2 GPUs with ``--steps`` step
stamps in ``logs/steps.jsonl``, as many lines of verl's ``logs/metrics.jsonl``, ``logs/queue.json`` and its job spec),
then drives ``Controller.keep_ledger`` - what each pass of the job controller runs for every followed run, before any
call to the head - the way the controller does:

* ``cold``: the first pass (every run's files read and its ledger written);
* ``unchanged``: a pass where no run's file changed (only the files' sizes and modification times are looked at);
* ``one step each``: a pass after each run logged one more step (only the added bytes are read);
* ``refresh``: a pass after LEDGER_REFRESH_S with nothing changed (every ledger written again).

Reports the median and fastest seconds of each pass over ``--repeat`` repetitions (fresh controllers over the same
files for ``cold``), the peak RSS of this process (``resource.getrusage``, Python included) and the peak Python
allocation of one cold pass (``tracemalloc``); writes the figures as JSON (``--out``).

Usage: python bench/ledger_controller.py [--steps 2000] [--repeat 5] [--out bench/results/ledger_controller.json]
"""
import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_controller  # noqa: E402 pylint: disable=C0413

EPOCH = 1795900000.0
STEP_S = 10.0


def make_run(shared, run, steps):
    """A running run's first attempt with ``steps`` steps logged (nothing ended yet)."""
    folder = os.path.join(shared, "jobs", run)
    for sub in ("config", "logs", "checkpoints", "debug"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    spec = {"submission_id": run, "workload": "sft", "code_id": "v0.5.0", "owner": "bench",
            "trainer_overrides": {"trainer.nnodes": 2, "trainer.n_gpus_per_node": 1, "trainer.save_freq": 100},
            "priority": {"class": "normal", "value": 0}}
    with open(os.path.join(folder, "config", "job_spec.json"), "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    with open(os.path.join(folder, "config", "controller.json"), "w", encoding="utf-8") as handle:
        json.dump({"run": run, "attempt": 0}, handle)
    with open(os.path.join(folder, "logs", "queue.json"), "w", encoding="utf-8") as handle:
        json.dump({"state": "admitted", "gate_started_s": EPOCH - 5, "admitted_at_s": EPOCH}, handle)
    add_steps(folder, 1, steps)


def add_steps(folder, first, last):
    """Append the stamps and metrics lines of steps ``first``..``last``."""
    with open(os.path.join(folder, "logs", "steps.jsonl"), "a", encoding="utf-8") as stamps, \
            open(os.path.join(folder, "logs", "metrics.jsonl"), "a", encoding="utf-8") as metrics:
        for step in range(first, last + 1):
            stamps.write(json.dumps({"step": step, "at": EPOCH + 60 + step * STEP_S}) + "\n")
            metrics.write(json.dumps({"step": step, "data": {"train/loss": 1.0 / step, "train/lr": 1e-5,
                                                             "train/grad_norm": 0.5}}) + "\n")


def timed(call):
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def measure(runs_count, steps, repeat):
    """The passes' seconds for ``runs_count`` running runs (dict)."""
    with tempfile.TemporaryDirectory() as shared:
        runs = ["bench-%03d" % i for i in range(runs_count)]
        for run in runs:
            make_run(shared, run, steps)
        now = [EPOCH + 60 + (steps + 0.5) * STEP_S]
        config = {"shared_dir": shared}
        figures = {"cold": [], "unchanged": [], "one step each": [], "refresh": []}
        peak_alloc = 0
        for index in range(repeat):
            ctl = mvp_controller.Controller(config, playbook=None, clock=lambda: now[0])
            if index == 0:
                tracemalloc.start()
            figures["cold"].append(timed(lambda: [ctl.keep_ledger(run) for run in runs]))
            if index == 0:
                peak_alloc = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            figures["unchanged"].append(timed(lambda: [ctl.keep_ledger(run) for run in runs]))
            for run in runs:
                add_steps(os.path.join(shared, "jobs", run), steps + index + 1, steps + index + 1)
            now[0] += STEP_S
            figures["one step each"].append(timed(lambda: [ctl.keep_ledger(run) for run in runs]))
            now[0] += mvp_controller.LEDGER_REFRESH_S
            figures["refresh"].append(timed(lambda: [ctl.keep_ledger(run) for run in runs]))
        ledger = json.load(open(os.path.join(shared, "jobs", runs[0], "logs", "ledger.json"), encoding="utf-8"))
        return {name: {"median_s": round(statistics.median(v), 4), "fastest_s": round(min(v), 4)}
                for name, v in figures.items()} | {
                    "runs": runs_count, "steps_per_run": steps, "peak_python_alloc_mib_cold": round(peak_alloc / 2**20, 2),
                    "check_closes": abs(sum(ledger["buckets"].values()) - ledger["gpu_seconds_held"]) < 1e-6}


def main():
    """Measure 1 and 20 runs, print and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "ledger_controller.json"))
    args = parser.parse_args()
    result = {"machine": platform.machine(), "python": platform.python_version(), "cpus": os.cpu_count(),
              "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "cases": [measure(n, args.steps, args.repeat) for n in (1, 20)],
              "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
