#!/usr/bin/env python3
"""Verdict suite: real verl jobs on the cluster, faults injected mid-training, causes checked.

Each case submits a real verl job through ``submit.yml -e wait=false`` (a long SFT or GRPO
run on the tiny model), waits until the trainer has logged steps, injects a fault, then
waits for the end with ``collect.yml -e wait=true`` and reads what the job directory kept:
``logs/status.json`` (Ray's status beside the project's verdict, cause and evidence),
``logs/verdict.json`` (the entrypoint's own), ``logs/watchdog.json`` and the stack files.

Cases:

* frozen rank (SFT, and GRPO): one training actor's process is stopped (SIGSTOP) in a worker
  container; the watchdog, running beside the driver, must end the job with the cause ``hang``
  and stacks of the job's processes on every node, the frozen one among them (its pid named);
* killed worker (not the driver's): ``docker kill`` of the other worker mid-training; the cause
  ``node_lost`` names that worker's IP;
* killed driver worker: ``docker kill`` of the driver's worker; ``node_lost`` names its IP
  (the entrypoint died with it: the verdict is the play's, from Ray's node table);
* zero steps: a job that continues a finished run with nothing left to train ends SUCCEEDED in
  Ray but the verdict is ``short_training`` and submit.yml fails naming it.

Expected values are computed from the cluster (container IPs, the pid frozen), never copied
from the code under test. Prints a table and exits 1 when a case fails.

Usage:
    python tests/reliability/verdicts.py --inventory inventories/local --host-shared /srv/mvp/private
        [--only CASE ...] [--seconds-out FILE] [--finished-sft ID]
"""
import json
import os
import re
import subprocess
import sys
import time

from faults import CaseFailed, Cluster, run_cases, suite_parser, write_figures

# Watchdog limits for these runs (-e submit_job_watchdog=...): short, so a hang is caught in seconds.
WATCHDOG = {"first_step_s": 300, "floor_s": 20, "factor": 5}
# An SFT long enough to be caught mid-training (the 64-row sample, 8 steps per epoch).
LONG_SFT = {"trainer.total_epochs": 40, "trainer.save_freq": 4}
# A GRPO run long enough to be caught mid-training (steps of about 2.5 s after a 30 s first one).
LONG_GRPO = {"trainer.total_training_steps": 60, "trainer.save_freq": 20}
# Seconds to wait for a job's first logged steps.
FIRST_STEPS_TIMEOUT = 240
# collect.yml -e wait=true for a job that must end by itself.
END_TIMEOUT = 420


def stamp(kind):
    """A fresh submission id for a case."""
    return "verdict-%s-%s-%04x" % (kind, time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)


def extra_vars(**data):
    """-e JSON arguments for ansible-playbook."""
    return ["-e", json.dumps(data)]


def read_json(path):
    """A JSON file's content, or None."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


class Job:
    """One submitted job and its directory on the docker host."""

    def __init__(self, case, submission_id):
        self.case = case
        self.id = submission_id
        self.dir = os.path.join(case.cluster.host_shared, "jobs", submission_id)

    def submit(self, workload, overrides, wait=False, extra=()):
        """Submit through submit.yml; returns the playbook run."""
        args = ["-e", "workload=" + workload, "-e", "submission_id=" + self.id, "-e", "wait=%s" % str(wait).lower()]
        # max_restarts 0: these cases read the verdict of the attempt a fault ended (the job controller
        # does not continue it; tests/reliability/resume.py covers the restarts).
        args += extra_vars(trainer_overrides=overrides, submit_job_watchdog=WATCHDOG, max_restarts=0) + list(extra)
        return self.case.play("submit.yml", args, label="submit %s" % workload)

    def steps(self):
        """Steps logged so far (verl's file logger)."""
        try:
            with open(os.path.join(self.dir, "logs", "metrics.jsonl"), encoding="utf-8") as handle:
                return [json.loads(line)["step"] for line in handle if line.strip().endswith("}")]
        except (OSError, ValueError, KeyError):
            return []

    def wait_steps(self, count):
        """Wait until ``count`` steps are logged; raise CaseFailed at the deadline."""
        deadline = time.time() + FIRST_STEPS_TIMEOUT
        while len(self.steps()) < count:
            if time.time() > deadline:
                raise CaseFailed("job %s logged %d steps in %ds" % (self.id, len(self.steps()), FIRST_STEPS_TIMEOUT))
            time.sleep(1)
        return self.steps()

    def driver_ip(self):
        """The driver's node IP (debug/placement.json)."""
        deadline = time.time() + 30
        while time.time() < deadline:
            data = read_json(os.path.join(self.dir, "debug", "placement.json"))
            if data:
                return data["driver_node_ip"]
            time.sleep(1)
        raise CaseFailed("no debug/placement.json for %s" % self.id)

    def collect(self):
        """collect.yml -e wait=true; returns (run, status.json)."""
        run = self.case.play("collect.yml", ["-e", "submission_id=" + self.id, "-e", "wait=true"],
                             timeout=END_TIMEOUT, label="collect wait=true")
        return run, read_json(os.path.join(self.dir, "logs", "status.json")) or {}


def worker_of(cluster, ip):
    """The worker host whose container has ``ip``."""
    host = next((h for h in cluster.workers if ip in cluster.ip(h)), None)
    if host is None:
        raise CaseFailed("IP %s is no worker container's" % ip)
    return host


def training_pids(cluster, host):
    """PIDs of verl's training actor processes in a worker container (``ray::`` worker processes
    whose title names verl's worker group class), from ``ps`` in the container."""
    out = cluster.docker("exec", cluster.container[host], "ps", "-eo", "pid=,args=")
    pids = []
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if args.startswith("ray::") and re.search(r"WorkerDict|Worker|Engine|Actor", args) and "IDLE" not in args:
            pids.append((int(pid), args))
    # verl's worker groups first (the training ranks), then its other workers (reward, rollout)
    return sorted(pids, key=lambda p: not re.search(r"WorkerDict|TrainingWorker", p[1]))


def check_cause(case, status, cause, what):
    """Check status.json's verdict names ``cause``; note its summary."""
    case.check(status.get("cause") == cause, "%s: cause %r (summary %r), expected %r"
               % (what, status.get("cause"), status.get("summary"), cause))
    case.check(status.get("evidence"), "%s: no evidence recorded" % what)
    case.note("%s: Ray %s, cause %s: %s" % (what, status.get("status"), status.get("cause"),
                                           (status.get("summary") or "")[:160]))


def frozen_rank(case, workload, overrides):
    """SIGSTOP one training actor: the watchdog stops the job as a hang, with stacks of every node.

    The actor frozen is one of verl's training processes on a worker (the other worker than the
    driver's first: SFT puts a rank on each; GRPO's one worker group may sit on either).
    """
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    job = Job(case, stamp("hang-" + workload))
    if not case.check(job.submit(workload, overrides).rc == 0, "submit rc != 0"):
        return
    driver = worker_of(cluster, job.driver_ip())
    job.wait_steps(3)
    order = [h for h in cluster.workers if h != driver] + [driver]
    found = [(host, ranks) for host, ranks in ((h, training_pids(cluster, h)) for h in order) if ranks]
    if not case.check(found, "no training actor process found in %s" % ", ".join(order)):
        return
    other, ranks = found[0]
    pid, title = ranks[0]
    cluster.docker("exec", cluster.container[other], "kill", "-STOP", str(pid))
    frozen_at = time.time()
    case.note("froze pid %d (%s) in %s after step %d" % (pid, title[:40], other, job.steps()[-1]))
    try:
        run, status = job.collect()
    finally:
        subprocess.run(["docker", "exec", cluster.container[other], "kill", "-CONT", str(pid)], capture_output=True)
    watchdog = read_json(os.path.join(job.dir, "logs", "watchdog.json")) or {}
    check_cause(case, status, "hang", "frozen rank")
    case.check(status.get("status") == "FAILED", "Ray status %s, expected FAILED" % status.get("status"))
    stacks = [os.path.join(job.dir, s) for s in watchdog.get("stacks", [])]
    case.check(len(stacks) >= 2, "stack files: %s (want the driver's node and the actors' nodes)" % stacks)
    other_ip = next(iter(cluster.ip(other)), "?")
    frozen_file = [s for s in stacks if other_ip in os.path.basename(s)]
    text = open(frozen_file[0], encoding="utf-8").read() if frozen_file else ""
    case.check("pid %d " % pid in text, "no stack section for the frozen pid %d in %s" % (pid, frozen_file))
    named = any("pid %d on" % pid in line for line in watchdog.get("no_stack", []))
    case.note("frozen pid %s" % ("named as giving no stack" if named else "has a stack section"))
    detected = watchdog.get("detected_at", 0) - frozen_at
    case.check(watchdog.get("waited_s", 0) >= WATCHDOG["floor_s"], "watchdog waited %s s < floor" % watchdog.get(
        "waited_s"))
    case.note("hang detected %.0f s after the freeze (bound %s s), %d stack files" % (
        detected, watchdog.get("bound_s"), len(stacks)))
    case.seconds["hang_to_stop_%s_s" % workload] = round(detected, 1)
    case.seconds["hang_bound_%s_s" % workload] = watchdog.get("bound_s")


def case_frozen_rank(case):
    """A frozen SFT rank (see frozen_rank)."""
    frozen_rank(case, "sft", LONG_SFT)


def case_frozen_rank_grpo(case):
    """A frozen GRPO worker (actor, rollout and reference colocated; see frozen_rank)."""
    frozen_rank(case, "grpo", LONG_GRPO)


def kill_worker_case(case, driver_side):
    """Kill the driver's worker or the other one mid-SFT; the cause is node_lost naming its IP."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    job = Job(case, stamp("driver" if driver_side else "node"))
    if not case.check(job.submit("sft", LONG_SFT).rc == 0, "submit rc != 0"):
        return
    driver = worker_of(cluster, job.driver_ip())
    victim = driver if driver_side else next(h for h in cluster.workers if h != driver)
    victim_ip = next(iter(cluster.ip(victim)))
    job.wait_steps(3)
    cluster.docker("kill", cluster.container[victim])
    killed_at = time.time()
    case.note("killed %s (%s) after step %d" % (victim, victim_ip, job.steps()[-1]))
    run, status = job.collect()
    check_cause(case, status, "node_lost", "killed %s worker" % ("driver's" if driver_side else "other"))
    case.check(victim_ip in (status.get("summary") or ""), "the summary does not name %s" % victim_ip)
    case.check("node_lost" in run.text, "collect.yml output does not show the cause")
    if status.get("end_time"):
        took = status["end_time"] / 1000.0 - killed_at
        case.note("job ended %.0f s after the kill" % took)
        case.seconds["node_loss_to_end_%s_s" % ("driver" if driver_side else "other")] = round(took, 1)
    heal = case.play("site.yml", label="heal site.yml")
    case.check(heal.rc == 0, "heal site.yml rc=%s" % heal.rc)


def case_killed_worker(case):
    """See kill_worker_case (not the driver's worker)."""
    kill_worker_case(case, driver_side=False)


def case_killed_driver_worker(case):
    """See kill_worker_case (the driver's worker)."""
    kill_worker_case(case, driver_side=True)


def case_zero_steps(case):
    """Continue a finished SFT run with nothing left to train: SUCCEEDED in Ray, short_training here."""
    case.ensure_cluster()
    case.wait_jobs_idle()
    first = Job(case, case.finished_sft or stamp("done"))
    if not case.finished_sft:
        run = first.submit("sft", {"trainer.total_epochs": 1}, wait=True)
        if not case.check(run.rc == 0, "the first SFT run failed (rc=%s)" % run.rc):
            return
        case.check(re.search(r"trained (\d+) of \1 steps", run.text), "submit.yml did not say 'trained N of N steps'")
    case.note("continues %s" % first.id)
    again = Job(case, stamp("zero"))
    run = case.play("submit.yml", ["-e", "workload=sft", "-e", "submission_id=" + again.id,
                                   "-e", "resume_from=" + first.id] + extra_vars(submit_job_watchdog=WATCHDOG),
                    label="submit resume (nothing left)")
    status = read_json(os.path.join(again.dir, "logs", "status.json")) or {}
    case.check(run.rc != 0, "submit.yml succeeded for a job that trained nothing")
    check_cause(case, status, "short_training", "zero steps")
    case.check(status.get("status") == "SUCCEEDED", "Ray status %s (Ray's own view is kept beside the verdict)"
               % status.get("status"))
    case.check("short_training" in run.text, "submit.yml's failure does not name the cause")


CASES = [
    ("frozen rank", "watchdog stops the job: cause hang, stacks of every node incl. the frozen pid",
     case_frozen_rank),
    ("frozen rank grpo", "GRPO: the watchdog stops the job: cause hang, stacks incl. the frozen pid",
     case_frozen_rank_grpo),
    ("killed worker", "cause node_lost naming the killed worker's IP; site.yml heals", case_killed_worker),
    ("killed driver worker", "cause node_lost naming the driver's worker IP; site.yml heals",
     case_killed_driver_worker),
    ("zero steps", "Ray SUCCEEDED, verdict short_training, submit.yml fails naming it", case_zero_steps),
]


def main():
    """Run the table and print it; return the exit code."""
    parser = suite_parser(__doc__, CASES)
    parser.add_argument("--seconds-out", help="write the measured seconds (fault to verdict) as JSON here")
    parser.add_argument("--finished-sft", help="a finished SFT job to continue in the zero-steps case (else one is run)")
    args = parser.parse_args()
    seconds = {}

    def prepare(case):
        case.seconds = seconds
        case.finished_sft = args.finished_sft
    code = run_cases(CASES, Cluster(args.inventory, args.host_shared), args.only, "verdicts", prepare)
    write_figures(args.seconds_out, seconds)
    return code



if __name__ == "__main__":
    sys.exit(main())
