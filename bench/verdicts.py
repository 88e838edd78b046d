#!/usr/bin/env python3
"""Benchmarks of the verdict path: the watchdog's own cost, and fault-to-verdict seconds.

1. watchdog_cpu (no cluster): mvp_entry.py runs a stand-in trainer that logs one verl
   file-logger step every --step-s seconds and prints --lines-per-s lines of output for
   --seconds, once with the watchdog off and once on. The figure is mvp_entry.py's own CPU
   seconds (os.wait4's rusage of it and its children, minus the stand-in's own CPU, which it
   reports), per minute of training, on and off. Goal: the watchdog adds well under 1 % of a core.
2. fault_to_verdict (a running cluster, --inventory): tests/reliability/verdicts.py's cases
   with their measured seconds (--seconds-out): from a killed worker to the job's end with its
   cause (goal <= 60 s) and from a frozen rank to the stop (goal <= the bound + 60 s).

Usage: python bench/verdicts.py [--seconds 60] [--out bench/results/verdicts.json]
           [--inventory inventories/local --host-shared /srv/mvp/private]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAND_IN = textwrap.dedent("""
    import json, os, resource, sys, time
    path, seconds, step_s, lines_per_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
    start, step, printed = time.time(), 0, 0
    while time.time() - start < seconds:
        now = time.time() - start
        while printed < now * lines_per_s:
            print("step %d: some trainer output line %d" % (step, printed), flush=True)
            printed += 1
        if now >= (step + 1) * step_s:
            step += 1
            with open(path, "a") as handle:
                handle.write(json.dumps({"step": step, "data": {"train/loss": 1.0 / step}}) + "\\n")
        time.sleep(0.01)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(path + ".cpu", "w") as handle:
        handle.write(str(usage.ru_utime + usage.ru_stime))
""")


def one_run(watchdog, seconds, step_s, lines_per_s):
    """CPU seconds of mvp_entry.py itself for one stand-in run (the stand-in's own CPU subtracted)."""
    with tempfile.TemporaryDirectory() as tmp:
        tools = os.path.join(tmp, "tools")
        os.makedirs(tools)
        for src in ("roles/job_tools/files/mvp_entry.py", "plugins/module_utils/lifecycle/mvp_verdict.py",
                    "plugins/module_utils/storage/mvp_job.py"):
            with open(os.path.join(ROOT, src)) as handle, open(os.path.join(tools, os.path.basename(src)), "w") as out:
                out.write(handle.read())
        os.makedirs(os.path.join(tmp, "verl"))
        open(os.path.join(tmp, "verl", "__init__.py"), "w").close()
        with open(os.path.join(tmp, "mvp_marker.py"), "w") as handle:
            handle.write("MARKER = 'bench'\n")
        with open(os.path.join(tmp, "trainer.py"), "w") as handle:
            handle.write(STAND_IN)
        job = os.path.join(tmp, "job")
        os.makedirs(os.path.join(job, "config"))
        metrics = os.path.join(job, "logs", "metrics.jsonl")
        with open(os.path.join(job, "config", "job_spec.json"), "w") as handle:
            json.dump({"hydra_config": "sft_trainer_engine", "metrics_file": metrics}, handle)
        argv = [sys.executable, os.path.join(tools, "mvp_entry.py"), "--log", os.path.join(job, "logs", "driver.log"),
                "--metrics", metrics, "--watchdog", watchdog, "--dashboard-port", "1", "--",
                sys.executable, "-u", os.path.join(tmp, "trainer.py"), metrics, str(seconds), str(step_s),
                str(lines_per_s)]
        env = dict(os.environ, PYTHONPATH="%s:%s" % (tmp, tools), MVP_SUBMISSION_ID="bench")
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        with open(metrics + ".cpu") as handle:
            trainer_cpu = float(handle.read())
        return round(usage.ru_utime + usage.ru_stime - trainer_cpu, 3), os.waitstatus_to_exitcode(status)


def main():
    """Run the figures and write them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--step-s", type=float, default=0.5)
    parser.add_argument("--lines-per-s", type=float, default=20)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "verdicts.json"))
    parser.add_argument("--inventory", help="also run the fault cases against this running cluster")
    parser.add_argument("--host-shared", default="/srv/mvp/private")
    args = parser.parse_args()
    results = {"machine": platform.node(), "python": platform.python_version(), "when": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stand_in": {"seconds": args.seconds, "step_s": args.step_s,
                                                            "lines_per_s": args.lines_per_s}}
    off, rc_off = one_run("0", args.seconds, args.step_s, args.lines_per_s)
    on, rc_on = one_run("600,60,5", args.seconds, args.step_s, args.lines_per_s)
    per_min = 60.0 / args.seconds
    results["watchdog_cpu"] = {"entry_cpu_s_per_min_off": round(off * per_min, 3),
                               "entry_cpu_s_per_min_on": round(on * per_min, 3),
                               "watchdog_cpu_s_per_min": round((on - off) * per_min, 3),
                               "share_of_one_core": round((on - off) / args.seconds, 5),
                               "exit_codes": [rc_off, rc_on]}
    print(json.dumps(results["watchdog_cpu"], indent=2))
    if args.inventory:
        seconds_file = os.path.join(tempfile.mkdtemp(), "seconds.json")
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reliability", "verdicts.py"),
                               "--inventory", args.inventory, "--host-shared", args.host_shared,
                               "--only", "frozen rank", "killed worker", "killed driver worker",
                               "--seconds-out", seconds_file], cwd=ROOT)
        with open(seconds_file) as handle:
            results["fault_to_verdict"] = dict(json.load(handle), suite_rc=proc.returncode)
        print(json.dumps(results["fault_to_verdict"], indent=2))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump(results, handle, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
