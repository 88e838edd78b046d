#!/usr/bin/env python3
"""Benchmark: a real training job through submit.yml against `ray job submit` by hand.

On the running local cluster (`make cluster`: the verl-cpu image, the tiny model,
the local inventory's CPU overrides), each round runs the same workload twice:

  playbook  `ansible-playbook submit.yml -e workload=W` (build and validate the job
            spec, job directory, debug bundles before, after placement and at the end,
            placement check, wait, Ray's driver log)
  raw       `ray job submit` on the head with the same entrypoint and runtime_env
            (taken from the playbook job's config/job_spec.json, its submission id
            replaced), waiting for the end as the CLI does, into a job directory
            made with mkdir

and measures for each: wall time from invocation to return, and time to the first
step in logs/metrics.jsonl (verl's file logger; polled every 0.2 s), the median
`timing_s/step` after the first step, and this machine's used memory before and
at its peak (MemTotal - MemAvailable, sampled every 0.5 s: the whole local
cluster, since its nodes are containers here). It compares
the runs: same number of steps, same step-1 value of the first key metric (a
fixed seed). Rounds alternate which goes first. Goal: playbook wall <= 1.10 x raw.

Usage: python bench/train.py [--workload sft] [--repeat 2] [--out bench/results/train.json]
Needs the project venv on PATH and the local cluster up (mvp-ray-head).
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from check_training import read_metrics  # noqa: E402  (verl's file-logger format, read in one place)

HOST_SHARED = "/srv/mvp/private"
HEAD = "mvp-ray-head"
RAY = "/opt/mvp/venv/bin/ray"
KEY_METRIC = {"sft": "train/loss", "grpo": "critic/score/mean", "ppo": "critic/score/mean"}


def metrics_of(job):
    """Return {step: data} of a job's metrics.jsonl on the host (empty when missing or unreadable)."""
    try:
        return read_metrics(os.path.join(HOST_SHARED, "jobs", job, "logs", "metrics.jsonl"))
    except (OSError, ValueError):
        return {}


def watch_first_step(job, started, result, stop):
    """Record in result['first_step_s'] the seconds from ``started`` until step 1 is logged."""
    path = os.path.join(HOST_SHARED, "jobs", job, "logs", "metrics.jsonl")
    while not stop.is_set():
        try:
            if os.path.getsize(path) > 0:
                result["first_step_s"] = time.time() - started
                return
        except OSError:
            pass
        time.sleep(0.2)


def used_memory_gib():
    """This machine's used memory in GiB (MemTotal - MemAvailable from /proc/meminfo)."""
    info = {}
    with open("/proc/meminfo") as handle:
        for line in handle:
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0])
    return (info["MemTotal"] - info["MemAvailable"]) / 1048576.0


def watch_memory(result, stop):
    """Record in result['peak_used_gib'] the highest used memory seen (sampled every 0.5 s)."""
    peak = used_memory_gib()
    while not stop.is_set():
        peak = max(peak, used_memory_gib())
        time.sleep(0.5)
    result["peak_used_gib"] = round(peak, 2)


def timed(job, argv, env=None):
    """Run argv, watching job's metrics file and the machine's memory.

    :returns: dict with wall_s, first_step_s, rc, tail, idle_used_gib (before),
        peak_used_gib (during), all memory figures for the whole machine.
    """
    result = {"job": job, "idle_used_gib": round(used_memory_gib(), 2)}
    stop = threading.Event()
    started = time.time()
    watcher = threading.Thread(target=watch_first_step, args=(job, started, result, stop), daemon=True)
    watcher.start()
    memory = threading.Thread(target=watch_memory, args=(result, stop), daemon=True)
    memory.start()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    result["wall_s"] = round(time.time() - started, 2)
    stop.set()
    watcher.join(1)
    memory.join(2)
    result["rc"] = proc.returncode
    result["tail"] = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
    if "first_step_s" in result:
        result["first_step_s"] = round(result["first_step_s"], 2)
    return result


def run_playbook(workload, job):
    """submit.yml with waiting (the default)."""
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    return timed(job, ["ansible-playbook", os.path.join(ROOT, "submit.yml"), "-e", "workload=%s" % workload,
                       "-e", "submission_id=%s" % job], env)


def raw_argv(spec, job):
    """The `docker exec <head> ray job submit ...` line of a job spec with another submission id."""
    old = spec["submission_id"]
    entrypoint = spec["entrypoint"].replace(old, job)
    runtime_env = json.loads(json.dumps(spec["runtime_env"]).replace(old, job))
    return ["docker", "exec", "-e", "RAY_AUTH_MODE=token", "-e", "RAY_AUTH_TOKEN_PATH=/tmp/ray/mvp_auth_token",
            HEAD, RAY, "job", "submit", "--address", spec["address"],
            "--submission-id", job, "--entrypoint-num-cpus", str(spec["entrypoint_num_cpus"]),
            "--entrypoint-resources", json.dumps(spec["entrypoint_resources"]),
            "--runtime-env-json", json.dumps(runtime_env), "--"] + shlex.split(entrypoint)


def run_raw(spec, job):
    """`ray job submit` by hand, the job directory made with mkdir first (as a user would)."""
    for sub in ("logs", "checkpoints"):
        os.makedirs(os.path.join(HOST_SHARED, "jobs", job, sub))
    return timed(job, raw_argv(spec, job))


def median(values):
    """Median of the non-None values, or None."""
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 2) if values else None


def main():
    """Run the rounds, print the table and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="sft")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/train.json"))
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    metric = KEY_METRIC.get(args.workload, "train/loss")
    rounds = []
    spec = None
    for i in range(args.repeat):
        pb_job, raw_job = "bench-%s-%s-pb%d" % (args.workload, stamp, i), "bench-%s-%s-raw%d" % (args.workload, stamp, i)
        order = ["playbook", "raw"] if i % 2 == 0 or spec is None else ["raw", "playbook"]
        runs = {}
        for kind in order:
            if kind == "playbook":
                runs["playbook"] = run_playbook(args.workload, pb_job)
                with open(os.path.join(HOST_SHARED, "jobs", pb_job, "config", "job_spec.json")) as handle:
                    spec = json.load(handle)
            else:
                runs["raw"] = run_raw(spec, raw_job)
        for kind, run in runs.items():
            steps = metrics_of(run["job"])
            run["steps"] = max(steps) if steps else 0
            run["step1_%s" % metric] = steps.get(1, {}).get(metric)
            later = [steps[n].get("timing_s/step") for n in sorted(steps) if n > 1]
            later = [t for t in later if isinstance(t, (int, float))]
            run["step_s_after_first"] = round(statistics.median(later), 2) if later else None
            print("round %d %-8s rc=%s wall %.1f s, first step %s s, steps %d, step-1 %s %s, step after the "
                  "first %s s, memory %s -> peak %s GiB"
                  % (i, kind, run["rc"], run["wall_s"], run.get("first_step_s"), run["steps"], metric,
                     run["step1_%s" % metric], run["step_s_after_first"], run["idle_used_gib"],
                     run.get("peak_used_gib")), flush=True)
            if run["rc"] != 0:
                print("\n".join(run["tail"]))
        rounds.append(runs)
    pb_wall = median(r["playbook"]["wall_s"] for r in rounds)
    raw_wall = median(r["raw"]["wall_s"] for r in rounds)
    summary = {
        "workload": args.workload,
        "playbook_wall_s": pb_wall, "raw_wall_s": raw_wall,
        "playbook_first_step_s": median(r["playbook"].get("first_step_s") for r in rounds),
        "raw_first_step_s": median(r["raw"].get("first_step_s") for r in rounds),
        "overhead_ratio": round(pb_wall / raw_wall, 3) if pb_wall and raw_wall else None,
        "peak_used_gib": max(r[k].get("peak_used_gib") or 0 for r in rounds for k in r),
        "step_s_after_first": median(r[k].get("step_s_after_first") for r in rounds for k in r),
        "same_steps": all(r["playbook"]["steps"] == r["raw"]["steps"] > 0 for r in rounds),
        "same_step1_metric": all(r["playbook"]["step1_%s" % metric] == r["raw"]["step1_%s" % metric]
                                 is not None for r in rounds),
        "goal_met": None,
    }
    summary["goal_met"] = bool(summary["overhead_ratio"] and summary["overhead_ratio"] <= 1.10
                               and summary["same_steps"] and summary["same_step1_metric"])
    print(json.dumps(summary, indent=2))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump({"summary": summary, "rounds": rounds, "machine": {
            "cpus": os.cpu_count(), "platform": platform.platform(),
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}, handle, indent=2)
    return 0 if all(r[k]["rc"] == 0 for r in rounds for k in r) else 1


if __name__ == "__main__":
    sys.exit(main())
