#!/usr/bin/env python3
"""Benchmark of the job controller: its memory and its requests to the head with 1 and with N runs.

Against a running cluster (the local inventory's by default) and its running job controller
(``site.yml`` starts it): submits one self-test, then N at once (``submit.yml -e repeat=N -e
repeat_mode=parallel -e wait=false``: one play hands N runs over), and while the runs wait in the
cluster's queue and run, samples every ``--every`` seconds

* the controller's resident memory (``VmRSS`` of its process, ``/proc/<pid>/status``; the pid from its
  heartbeat ``<shared>/controller/heartbeat.json``), alone and with the playbooks it runs at that moment (its
  process tree), and the number of controller processes for the cluster;
* the HTTP requests it sent to the head's dashboard (the heartbeat's ``head_requests``, a counter), as
  requests per minute over the sampling window;
* how many runs it follows (the heartbeat's ``runs``).

With N runs the window lasts from the submission until every run has its end (``logs/run_end.json``).
Writes the figures as JSON (``--out``). The plays' own requests (submitting, watching) are not the controller's and are not counted.

Usage: python bench/controller.py [--inventory inventories/local --host-shared /srv/mvp/private]
           [--runs 20] [--every 5] [--out bench/results/controller.json]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def heartbeat(shared):
    """The controller's heartbeat (dict, {} when missing)."""
    try:
        with open(os.path.join(shared, "controller", "heartbeat.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def rss_mib(pid):
    """Resident memory of ``pid`` in MiB (None when it is gone)."""
    try:
        with open("/proc/%d/status" % pid, encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024.0, 1)
    except (OSError, ValueError):
        return None
    return None


def tree_rss_mib(pid):
    """Resident memory of ``pid`` and every process below it (the playbooks it runs) in MiB, or None."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, encoding="utf-8", errors="replace") as handle:
                    parent = int(handle.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(name))
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        total += rss_mib(current) or 0.0
        todo += children.get(current, [])
    return round(total, 1) if rss_mib(pid) is not None else None


def controller_processes(state_dir):
    """Pids of processes running the controller (``mvp_controller run``) with this cluster's settings."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if b"run" in argv and any(state_dir.encode() in a for a in argv) and any(b"mvp_controller" in a for a in argv):
            found.append(int(name))
    return found


def submit(inventory, extra):
    """Run submit.yml (wait=false) with ``extra`` -e arguments; return its seconds."""
    started = time.time()
    subprocess.run(["ansible-playbook", "-i", inventory, os.path.join(ROOT, "submit.yml"), "-e", "workload=selftest",
                    "-e", "wait=false"] + extra, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return round(time.time() - started, 1)


def sample(shared, state_dir, seconds, every, until=None):
    """Sample the controller for ``seconds`` (or, with ``until``, until ``until()`` is true); return the samples and
    the requests per minute over that window."""
    samples, start = [], heartbeat(shared)
    began = time.time()
    while (time.time() - began < seconds) if until is None else not until():
        beat = heartbeat(shared)
        samples.append({"t": round(time.time() - began, 1), "rss_mib": rss_mib(beat.get("pid") or 0),
                        "tree_rss_mib": tree_rss_mib(beat.get("pid") or 0),
                        "runs": len(beat.get("runs") or []), "head_requests": beat.get("head_requests"),
                        "processes": len(controller_processes(state_dir))})
        time.sleep(every)
    end = heartbeat(shared)
    span = max(1e-6, float(end.get("at") or 0) - float(start.get("at") or 0))
    same = end.get("pid") == start.get("pid")
    per_minute = round(((end.get("head_requests") or 0) - (start.get("head_requests") or 0)) * 60.0 / span, 1) \
        if same else None
    return samples, per_minute


def wait_ended(shared, ids, timeout):
    """Wait until every run in ``ids`` has logs/run_end.json; return the seconds waited."""
    began = time.time()
    while time.time() - began < timeout:
        if all(os.path.exists(os.path.join(shared, "jobs", i, "logs", "run_end.json")) for i in ids):
            return round(time.time() - began, 1)
        time.sleep(2)
    raise SystemExit("runs without an end after %d s: %s" % (timeout, [
        i for i in ids if not os.path.exists(os.path.join(shared, "jobs", i, "logs", "run_end.json"))]))


def main():
    """Measure with 1 run and with --runs runs; write --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", default=os.path.join(ROOT, "inventories/local"))
    parser.add_argument("--host-shared", default="/srv/mvp/private")
    parser.add_argument("--state-dir", default="/var/lib/mvp-controller/mvp-ray-head")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--window", type=float, default=60.0, help="seconds sampled with the runs handed over")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/controller.json"))
    args = parser.parse_args()
    if not heartbeat(args.host_shared):
        raise SystemExit("no job controller heartbeat under %s/controller: run site.yml" % args.host_shared)
    stamp = time.strftime("%H%M%S", time.gmtime())
    idle, idle_rpm = sample(args.host_shared, args.state_dir, args.window / 2, args.every)
    one_id = "bench-ctl1-%s" % stamp
    one_submit = submit(args.inventory, ["-e", "submission_id=" + one_id,
                                         "-e", json.dumps({"env_vars": {"MVP_SELFTEST_HOLD_SECONDS": "90"}})])
    one, one_rpm = sample(args.host_shared, args.state_dir, args.window, args.every)
    wait_ended(args.host_shared, [one_id], 900)
    many_id = "bench-ctl%d-%s" % (args.runs, stamp)
    ids = ["%s-%d" % (many_id, i) for i in range(1, args.runs + 1)]
    began = time.time()
    # One play hands the N runs over one after another; the controller follows them from the first one on:
    # sampled from the submission until every run has its end.
    play = subprocess.Popen(["ansible-playbook", "-i", args.inventory, os.path.join(ROOT, "submit.yml"),
                             "-e", "workload=selftest", "-e", "wait=false", "-e", "submission_id=" + many_id,
                             "-e", "repeat=%d" % args.runs, "-e", "repeat_mode=parallel"],
                            cwd=ROOT, stdout=subprocess.DEVNULL)
    many, many_rpm = sample(args.host_shared, args.state_dir, 0, args.every, until=lambda: play.poll() is not None
                            and all(os.path.exists(os.path.join(args.host_shared, "jobs", i, "logs",
                                                                "run_end.json")) for i in ids))
    if play.wait() != 0:
        raise SystemExit("submit.yml -e repeat=%d failed" % args.runs)
    drained = round(time.time() - began, 1)
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.node(),
        "cpus": os.cpu_count(), "runs": args.runs, "window_s": args.window,
        "idle": {"rss_mib_max": max((s["rss_mib"] or 0) for s in idle), "head_requests_per_min": idle_rpm},
        "one_run": {"submit_s": one_submit, "rss_mib_max": max((s["rss_mib"] or 0) for s in one),
                    "tree_rss_mib_max": max((s["tree_rss_mib"] or 0) for s in one),
                    "head_requests_per_min": one_rpm, "processes_max": max(s["processes"] for s in one)},
        "many_runs": {"rss_mib_max": max((s["rss_mib"] or 0) for s in many),
                      "tree_rss_mib_max": max((s["tree_rss_mib"] or 0) for s in many),
                      "followed_max": max(s["runs"] for s in many), "head_requests_per_min": many_rpm,
                      "processes_max": max(s["processes"] for s in many),
                      "submitted_to_all_ended_s": drained},
        "samples": {"idle": idle, "one_run": one, "many_runs": many},
    }
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
