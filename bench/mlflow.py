#!/usr/bin/env python3
"""Benchmark: what MLflow tracking adds per training step (verl SFT on CPU, the local cluster).

Each round submits the same SFT request twice through ``submit.yml``, alternating which goes first:

  mlflow   as shipped: verl's ``mlflow`` logger beside ``console`` and ``file`` (one ``log_metrics``
           HTTP call to the head's tracking server per step, basic auth);
  off      ``-e mvp_mlflow_enabled=false``: ``console`` and ``file`` only.

The request trains ``--epochs`` epochs (8 steps each on the local dataset) with checkpoints only at the
end (``trainer.save_freq`` = the last step), so the step times are the trainer's own. While a job runs, a
thread polls its ``logs/metrics.jsonl`` (verl's file logger) every 0.05 s and stamps each new step's
arrival; the step time is (last arrival - first arrival) / (steps - 1) (the first step includes start-up;
the median gap between arrivals is kept too, but a CPU step of about 0.15 s is near the poll's resolution),
steps per minute = 60 / that. Also each job's wall time (submit.yml's whole
run) and its verdict. The two variants must train the same steps with the same step-1 loss (a fixed seed).

Usage: python bench/mlflow.py [--repeat 2] [--epochs 4] [--out bench/results/mlflow.json]
Needs the project venv on PATH and the local cluster up (``make cluster``).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST_SHARED = "/srv/mvp/private"
STEPS_PER_EPOCH = 8  # 64 training rows of the local GSM8K SFT set / data.train_batch_size 8 (10-local.yml)


def watch_steps(metrics_file, stamps, stop):
    """Append (step, arrival time) for each new line of ``metrics_file`` until ``stop`` is set."""
    seen = 0
    while not stop.is_set():
        try:
            with open(metrics_file, encoding="utf-8") as handle:
                lines = [line for line in handle.read().splitlines() if line.strip()]
        except OSError:
            lines = []
        now = time.time()
        for line in lines[seen:]:
            try:
                row = json.loads(line)
            except ValueError:
                break
            if "train/loss" in row.get("data", {}):
                stamps.append((int(row["step"]), now, float(row["data"]["train/loss"])))
            seen += 1
        time.sleep(0.05)


def run(variant, index, epochs):
    """Submit one SFT job of the variant and measure it; returns its record (dict)."""
    job = "bench-mlflow-%s-%d-%s" % (variant, index, time.strftime("%H%M%S"))
    steps = epochs * STEPS_PER_EPOCH
    request = {"workload": "sft", "submission_id": job,
               "trainer_overrides": {"trainer.total_epochs": epochs, "trainer.save_freq": steps}}
    argv = ["ansible-playbook", "submit.yml", "-e", json.dumps(request)]
    if variant == "off":
        argv += ["-e", "mvp_mlflow_enabled=false"]
    stamps, stop = [], threading.Event()
    watcher = threading.Thread(target=watch_steps, args=(
        os.path.join(HOST_SHARED, "jobs", job, "logs", "metrics.jsonl"), stamps, stop), daemon=True)
    watcher.start()
    started = time.time()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False,
                          env=dict(os.environ, ANSIBLE_NOCOLOR="1"))
    wall = time.time() - started
    time.sleep(0.3)
    stop.set()
    watcher.join()
    gaps = [b[1] - a[1] for a, b in zip(stamps, stamps[1:]) if b[0] == a[0] + 1]
    try:
        with open(os.path.join(HOST_SHARED, "jobs", job, "logs", "status.json"), encoding="utf-8") as handle:
            status = json.load(handle)
    except (OSError, ValueError):
        status = {"summary": "no logs/status.json; submit.yml rc=%s: %s" % (proc.returncode, proc.stdout[-600:])}
    tracked = os.path.isfile(os.path.join(HOST_SHARED, "jobs", job, "config", "mlflow_run.json"))
    median = statistics.median(gaps) if gaps else None
    # First to last arrival over the steps between: the poll's 0.05 s resolution spreads over them.
    mean = (stamps[-1][1] - stamps[0][1]) / (len(stamps) - 1) if len(stamps) > 1 else None
    return {"variant": variant, "submission_id": job, "rc": proc.returncode, "verdict": status.get("summary"),
            "tracked": tracked, "steps": len(stamps), "planned": steps, "wall_s": round(wall, 1),
            "step_s_median": round(median, 4) if median else None,
            "step_s_mean": round(mean, 4) if mean else None,
            "steps_per_min": round(60.0 / mean, 1) if mean else None,
            "step1_loss": stamps[0][2] if stamps else None}


def main(argv=None):
    """Entry point; writes the JSON result and prints a table. Returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="rounds (each runs both variants)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per job (8 steps each)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "mlflow.json"))
    args = parser.parse_args(argv)
    rows = []
    for index in range(args.repeat):
        order = ("mlflow", "off") if index % 2 == 0 else ("off", "mlflow")
        for variant in order:
            rows.append(run(variant, index, args.epochs))
            print(json.dumps(rows[-1]), flush=True)
    problems = [r["submission_id"] for r in rows if r["rc"] != 0 or r["steps"] != r["planned"]
                or r["tracked"] != (r["variant"] == "mlflow")]
    losses = {r["step1_loss"] for r in rows}
    if len(losses) > 1:
        problems.append("step-1 losses differ: %s" % sorted(losses))
    summary = {}
    for variant in ("mlflow", "off"):
        mine = [r for r in rows if r["variant"] == variant and r["step_s_median"]]
        summary[variant] = {"jobs": len(mine),
                            "step_s_median": round(statistics.median(r["step_s_median"] for r in mine), 4) if mine else None,
                            "step_s_mean": round(statistics.median(r["step_s_mean"] for r in mine), 4) if mine else None,
                            "wall_s_median": round(statistics.median(r["wall_s"] for r in mine), 1) if mine else None}
    if summary["mlflow"]["step_s_mean"] and summary["off"]["step_s_mean"]:
        summary["added_s_per_step"] = round(summary["mlflow"]["step_s_mean"] - summary["off"]["step_s_mean"], 4)
        summary["steps_per_min"] = {v: round(60.0 / summary[v]["step_s_mean"], 1) for v in ("mlflow", "off")}
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "cpus": os.cpu_count(), "load_avg": os.getloadavg(), "epochs": args.epochs, "rows": rows,
              "summary": summary, "problems": problems}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
        handle.write("\n")
    print(json.dumps(summary, indent=2))
    if problems:
        print("problems: %s" % problems)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
