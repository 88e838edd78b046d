#!/usr/bin/env python3
"""Benchmark of automatic restarts: seconds from a lost node to the next attempt's first step, by phase.

Runs tests/reliability/resume.py's cases against a running cluster (real SFT runs; each case
kills a worker - or removes the head - mid-training and the project heals the cluster and continues
the run) ``--repeat`` times and reads the figures the suite measured (``--seconds-out``):

* ``fault_to_first_new_step_s``: from ``docker kill`` to the first step the next attempt logs
  (goal: at most 60 s on the local cluster);
* its phases (resume.py ``PHASES``): ``ray_notice_s`` (the fault to the attempt's end in Ray: the job controller saw
  the worker's container exit and stopped it, or Ray's health checks declared the node dead), ``verdict_s`` (to the job controller's decision), ``heal_s``, ``start_s`` (the next
  attempt's checks and submission until placed), ``verl_start_s`` (verl's start-up to the first new step);
* ``steps_lost``: steps logged before the fault past the checkpoint the next attempt continued from (goal: at
  most ``trainer.save_freq``);
* with ``--only "killed head"``: ``head_lost_to_answer_s`` (the head's container killed to the head the job controller
  brought back answering), ``head_lost_to_first_new_step_s`` (to the first step after the kill: the same attempt
  going on, or its next attempt) and ``head_lost_to_end_s``.

Beside them (``--raw``), the raw scripts' manual recovery of the same lost worker, timed on the same cluster: a
person who watches ``ray job status`` every second notices the FAILED job, ``docker start``s the worker's container
(its entrypoint runs ``ray start``), waits for the node to be ALIVE and runs ``ray job submit`` of verl's trainer
with ``trainer.resume_mode=resume_path`` on the checkpoint. Its phases: ``ray_notice_s``, ``heal_s`` (docker start
to ALIVE), ``start_s`` (``ray job submit`` to RUNNING) and ``verl_start_s`` (to the first new step). The raw run
resumes from a checkpoint inside an epoch (step 12 of 8-step epochs): at an epoch's last step, verl 0.9.1 would
skip the next epoch there (verl#7401, docs/jobs.md).

Usage: python bench/resume.py [--inventory inventories/local --host-shared /srv/mvp/private]
           [--only CASE ...] [--repeat N] [--raw N] [--out bench/results/resume.json]
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "reliability"))
GOALS = {"fault_to_first_new_step_s": 60, "steps_lost": 8}
DEFAULT_CASES = ["every epoch"]
# The raw run: the local SFT, 3 epochs of 8 steps, a checkpoint every 4 steps (the local inventory's own
# save_freq); the worker without the driver is killed right after the checkpoint of step 12.
RAW_OVERRIDES = {"trainer.total_epochs": 3, "trainer.save_freq": 4}
RAW_KILL_AT = 12


def suite(args, only, figures):
    """Run resume.py's cases once; return its exit code (figures written to ``figures``)."""
    argv = [sys.executable, os.path.join(ROOT, "tests/reliability/resume.py"), "--inventory", args.inventory,
            "--host-shared", args.host_shared, "--seconds-out", figures, "--only"] + only
    return subprocess.call(argv, cwd=os.path.join(ROOT, "tests/reliability"))


def raw_recovery(cluster, index):
    """One raw manual recovery of a lost worker (see the module's docstring); returns its phases (seconds)."""
    from faults import start_playbook, finish_playbook  # noqa: E402 (tests/reliability)
    from resume import complete_steps, metrics
    from verdicts import Job, extra_vars, worker_of

    class _Case:  # the little of a suite case that Job needs
        def __init__(self):
            self.cluster = cluster

    job = Job(_Case(), "bench-raw-%s-%d" % (time.strftime("%H%M%S", time.gmtime()), index))
    argv, proc = start_playbook(cluster, "submit.yml", ["-e", "workload=sft", "-e", "submission_id=" + job.id,
                                                        "-e", "wait=false"]
                                + extra_vars(trainer_overrides=RAW_OVERRIDES, max_restarts=0))
    finish_playbook(argv, proc, time.time(), 600)
    ckpt_dir = os.path.join(job.dir, "checkpoints")
    deadline = time.time() + 600
    while RAW_KILL_AT not in complete_steps(ckpt_dir):
        if time.time() > deadline:
            raise RuntimeError("%s saved no checkpoint of step %d" % (job.id, RAW_KILL_AT))
        time.sleep(0.1)
    driver = worker_of(cluster, job.driver_ip())
    victim = next(h for h in cluster.workers if h != driver)
    cluster.docker("kill", cluster.container[victim])
    killed = time.time()
    while cluster.job_status(job.id) not in ("FAILED", "STOPPED", "SUCCEEDED"):  # the person watching
        time.sleep(1)
    noticed = time.time()
    cluster.docker("start", cluster.container[victim])
    while not (cluster.alive() or {}).get(victim):
        time.sleep(0.5)
    healed = time.time()
    spec = json.load(open(os.path.join(job.dir, "config", "job_spec.json")))
    out = "%s/outputs/%s" % (spec["shared_root"], job.id + "-raw")
    host_out = os.path.join(cluster.host_shared, "outputs", job.id + "-raw")
    overrides = [o for o in spec["hydra_overrides"] if not o.startswith(("trainer.default_local_dir=", "hydra.run.dir=",
                                                                         "trainer.logger="))]
    overrides += ["trainer.default_local_dir=%s/checkpoints" % out, "hydra.run.dir=%s/hydra" % out,
                  "trainer.logger=[console,file]", "trainer.resume_mode=resume_path",
                  "trainer.resume_from_path=%s/checkpoints/global_step_%d" % (spec["job_dir"], RAW_KILL_AT)]
    # verl's file logger where resume.metrics reads it (<folder>/logs/metrics.jsonl)
    env = {"PYTHONPATH": spec["code_path"], "RAY_ADDRESS": "auto", "VERL_FILE_LOGGER_PATH": out + "/logs/metrics.jsonl"}
    entry = "%s -u -m verl.trainer.sft_trainer_ray %s" % (cluster.python, " ".join(shlex.quote(o) for o in overrides))
    submit = ("mkdir -p %s/logs && RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=%s %s/ray job submit --address %s --submission-id %s "
              "--entrypoint-num-cpus 1 --entrypoint-resources '{\"worker_node\": 1}' --runtime-env-json %s --no-wait "
              "-- %s" % (out, cluster.token_path, os.path.dirname(cluster.python), cluster.address, job.id + "-raw",
                         shlex.quote(json.dumps({"env_vars": env})), entry))
    subprocess.run(["docker", "exec", cluster.container[cluster.head], "sh", "-c", submit], check=True,
                   capture_output=True, text=True)
    submitted = time.time()
    while cluster.job_status(job.id + "-raw") != "RUNNING":
        time.sleep(0.5)
    running = time.time()
    while not metrics(host_out):
        if cluster.job_status(job.id + "-raw") in ("FAILED", "STOPPED", "SUCCEEDED"):
            raise RuntimeError("the raw resubmission %s-raw ended without a step" % job.id)
        time.sleep(0.5)
    first = time.time()
    steps = sorted(metrics(host_out))
    return {"ray_notice_s": round(noticed - killed, 1), "heal_s": round(healed - noticed, 1),
            "start_s": round(running - healed, 1), "verl_start_s": round(first - running, 1),
            "fault_to_first_new_step_s": round(first - killed, 1), "first_new_step": steps[0],
            "submit_s": round(submitted - healed, 1)}


def medians(runs):
    """{name: median} of every figure over a list of {name: value or [values]} dicts."""
    values = {}
    for run in runs:
        for name, value in run.items():
            values.setdefault(name, []).extend(value if isinstance(value, list) else [value])
    return {name: round(statistics.median(v), 1) for name, v in values.items() if v and all(
        isinstance(x, (int, float)) for x in v)}


def main():
    """Run the suite ``--repeat`` times (and the raw recovery ``--raw`` times), write the medians beside the goals;
    exit 1 when a case failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", default=os.path.join(ROOT, "inventories/local"))
    parser.add_argument("--host-shared", default="/srv/mvp/private")
    parser.add_argument("--only", nargs="*", default=DEFAULT_CASES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--raw", type=int, default=3, help="raw manual recoveries to time (0: none)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/resume.json"))
    args = parser.parse_args()
    started, code, runs = time.time(), 0, []
    for _ in range(args.repeat):
        with tempfile.NamedTemporaryFile(suffix=".json") as figures:
            code = suite(args, args.only, figures.name) or code
            if os.path.getsize(figures.name):
                runs.append(json.load(open(figures.name)))
    raw = []
    if args.raw:
        from faults import Cluster
        cluster = Cluster(args.inventory, args.host_shared)
        for index in range(args.raw):
            try:
                raw.append(raw_recovery(cluster, index))
            except (RuntimeError, subprocess.CalledProcessError) as exc:
                code = 1
                raw.append({"error": "%s%s" % (exc, (": " + exc.stderr[-500:]) if getattr(exc, "stderr", None) else "")})
    measured = medians(runs)
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "cases": args.only, "repeat": args.repeat, "suite_rc": code, "suite_s": round(time.time() - started, 1),
              "goals": GOALS, "runs": runs, "median": measured, "raw": raw, "raw_median": medians(raw),
              "within_goals": {key: measured[key] <= goal for key, goal in GOALS.items() if key in measured}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
    print(json.dumps({k: result[k] for k in ("median", "raw_median", "within_goals", "suite_rc")}, indent=2,
                     sort_keys=True))
    return 1 if code else 0


if __name__ == "__main__":
    sys.exit(main())
