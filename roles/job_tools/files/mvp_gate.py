#!/usr/bin/env python3
"""mvp_gate.py: the job queue's gate - start a job's program only when its whole shape fits and its turn came.

Usage: python -u mvp_gate.py --log <job_dir>/logs/driver.log [--pool NAME=NODESxGPUS:CPUS ...]
           [--lock NAME ...] [--priority N] [--since EPOCH_S] [--dashboard-port PORT] [--poll SECONDS]
           [--max-wait SECONDS] [--unfit-wait SECONDS] [--timeout SECONDS] -- <program> [args...]

Why: Ray has no job queue. A verl trainer started while another job holds the GPUs fails at once
(``Total available GPUs 0 is less than total desired GPUs 1``), and one whose node groups each fit
alone reserves part of its gang and waits forever, holding GPUs every later job needs. Some
trainers also make cluster-wide state two jobs cannot share (verl 0.9.1's TransferQueue keeps one
named ``TransferQueueController`` per cluster): such jobs take a **lock**.

How: the queue is every PENDING or RUNNING Ray job whose entrypoint starts with this gate, read from the
head's Jobs API (``/api/jobs/``): first the jobs whose program started (their ``logs/queue.json`` says
``admitted``: they hold their resources), then the waiting ones by ``--priority`` (higher first; 0 when
absent), then in submission order (Ray's ``start_time``, or ``--since`` for a continued run: a preempted
run keeps its first attempt's place; then the id). Each job's shape is its ``--pool`` options (one per resource pool verl will make:
NODES node groups of GPUS GPUs and CPUS CPUs, each group on one node), its locks its ``--lock``
options. ``mvp_queue.plan`` admits jobs first come, first served against the ALIVE workers' totals
(Ray's GCS, the cluster status ``ray status`` shows); this job's program starts when the plan admits
it AND its shape fits what Ray itself reports free on each worker (``mvp_queue.admit``). Until then
the Ray job is RUNNING and its program has not started: the gate prints ``MVP_GATE_WAIT=...``
(position, shape, what it waits for, since when) whenever that changes, and keeps
``logs/queue.json`` (``status.yml`` reads it); then ``MVP_GATE_GO=...`` and the program runs.

Exits with the program's exit code; 143/130 on SIGTERM/SIGINT (Ray's stop_job) while waiting
(``MVP_GATE_STOPPED``: the program never started); 4 when the wait passed ``--max-wait`` (any
shape) or ``--unfit-wait`` (a shape the ALIVE workers cannot hold, e.g. after a node was lost)
(``MVP_GATE_TIMEOUT``); 3 when the Jobs API or the cluster status could not be read for
``--timeout`` seconds (``MVP_GATE_ERROR``). While the program runs, signals are passed on to it.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import mvp_queue  # noqa: E402 - installed beside this file (plugins/module_utils/lifecycle/mvp_queue.py)
from mvp_entry import auth_headers, write_json  # noqa: E402 - the job tool beside this file
# installed beside this file (plugins/module_utils/storage/mvp_job.py)
from mvp_job import job_file, queue_states  # noqa: E402

# Exit codes of the gate itself (the program's own pass through).
TIMEOUT_EXIT = 4
UNREADABLE_EXIT = 3
# What a lock means, said in the wait line.
REASONS = {
    "transfer_queue": "verl's TransferQueue keeps one TransferQueueController per Ray cluster (namespace "
                      "transfer_queue, name fixed), so two such jobs would share one queue: they run one "
                      "after another.",
}


def stamp(seconds=None):
    """UTC time as ``2026-11-25T16:30:00Z``."""
    return datetime.datetime.fromtimestamp(time.time() if seconds is None else seconds,
                                           datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def gcs_address():
    """The GCS address of the cluster this node belongs to (what Ray's ``address="auto"`` finds)."""
    from ray._private.services import canonicalize_bootstrap_address_or_die

    return canonicalize_bootstrap_address_or_die("auto")


def list_jobs(url, headers):
    """Every job of the cluster from the Jobs API (``GET /api/jobs/``), as dicts."""
    request = urllib.request.Request(url + "/api/jobs/", headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read().decode("utf-8"))


def read_workers(address, worker_resource):
    """The ALIVE workers' total and free resources, from the GCS's cluster status.

    ``ray.autoscaler.v2.sdk.get_cluster_status`` is what ``ray status`` prints: per ALIVE node its
    IP and each resource's total and used amount (used includes what placement groups reserve).

    :param address: str, the GCS address (``host:port``).
    :param worker_resource: str, the custom resource only workers carry (``worker_node``).
    :returns: (totals, free): dicts node IP -> {"GPU", "CPU"}.
    """
    from ray.autoscaler.v2.sdk import get_cluster_status

    status = get_cluster_status(address)
    totals, free = {}, {}
    for node in list(status.active_nodes) + list(status.idle_nodes):
        total = node.total_resources()
        if not total.get(worker_resource):
            continue
        available = node.available_resources()
        totals[node.ip_address] = {key: float(total.get(key, 0)) for key in ("GPU", "CPU")}
        free[node.ip_address] = {key: float(available.get(key, 0)) for key in ("GPU", "CPU")}
    return totals, free


class Gate(object):
    """The waiting of one job: its place in the queue, its lines and its ``queue.json``."""

    def __init__(self, me, pools, locks, emit, state_path, clock=time.time, started=None, priority=0,
                 read_states=queue_states):
        self.me = me
        self.priority = int(priority or 0)
        self.read_states = read_states
        self.shape = mvp_queue.shape_of_pools(pools)
        self.locks = list(locks)
        self.emit = emit
        self.state_path = state_path
        self.clock = clock
        self.since = clock()
        self.said = None
        self.state = {"submission_id": me, "state": "waiting", "shape": self.shape, "locks": self.locks,
                      "shape_text": mvp_queue.describe(self.shape), "priority": self.priority,
                      "since": stamp(self.since),
                      "since_s": round(self.since, 3), "gate_started_s": round(started or self.since, 3)}

    def record(self, **changes):
        """Update and write ``queue.json`` (best effort: the shared storage may hiccup)."""
        self.state.update(changes, updated=stamp(self.clock()))
        if self.state_path:
            try:
                write_json(self.state_path, self.state)
            except OSError as exc:
                self.emit("MVP_GATE_NOTE=%s not written: %s\n" % (self.state_path, exc))

    def look(self, jobs, totals, ray_free):
        """One look at the queue; True when the program may start. Says what changed."""
        entries = mvp_queue.plan(jobs, totals, mvp_queue.started_ids(self.read_states(jobs)))
        mine = next((e for e in entries if e["submission_id"] == self.me), None)
        if mine is None:  # not in the job list yet (or not gated): wait for the jobs already there
            mine = {"state": "waiting", "position": len(entries) + 1,
                    "waits_for": "its job to appear in Ray's job list"}
            entries = entries + [mine]
        go, why = mvp_queue.admit(mine, ray_free) if "free_before" in mine else (False, mine["waits_for"])
        if go:
            return True
        now = (mine["position"], len(entries), why)
        if now != self.said:
            self.said = now
            self.record(state="waiting", position=mine["position"], queue_length=len(entries), waits_for=why,
                        unfit=mvp_queue.pack(self.shape, totals) is None)
            lock_note = " ".join(REASONS[lock] for lock in self.locks if lock in REASONS and "lock %s" % lock in why)
            self.emit("MVP_GATE_WAIT=queued since %s, position %d of %d, shape %s%s; waits for %s%s\n" % (
                stamp(self.since), mine["position"], len(entries), mvp_queue.describe(self.shape),
                ", priority %d" % self.priority if self.priority else "", why,
                (". " + lock_note) if lock_note else ""))
        return False

    def waited(self):
        """Seconds since the job started waiting."""
        return self.clock() - self.since


def wait_turn(gate, read_jobs, read_workers_fn, poll, timeout=0.0, max_wait=0.0, unfit_wait=0.0,
              sleep=time.sleep):
    """Block until ``gate`` may start its program; return the seconds waited.

    :param gate: Gate.
    :param read_jobs: callable returning the job list (:func:`list_jobs`); read_workers_fn: callable
        returning (totals, free) (:func:`read_workers`). Their errors are retried.
    :param poll: float, seconds between looks.
    :param timeout: float, give up after this many seconds without a readable Jobs API or cluster
        status (0: never).
    :param max_wait: float, give up after waiting this long (0: never).
    :param unfit_wait: float, give up after waiting this long while the ALIVE workers cannot hold the
        shape at all (0: never).
    :raises RuntimeError: unreadable past ``timeout``.
    :raises TimeoutError: waited past ``max_wait`` or ``unfit_wait``.
    """
    failing_since = None
    unfit_since = None
    while True:
        try:
            jobs = read_jobs()
            totals, ray_free = read_workers_fn()
            failing_since = None
        except Exception as exc:  # the dashboard or the GCS may restart; keep waiting within the bound
            failing_since = failing_since if failing_since is not None else gate.clock()
            if timeout and gate.clock() - failing_since > timeout:
                raise RuntimeError("cannot read the Jobs API or the cluster status for %.0f s: %s"
                                   % (gate.clock() - failing_since, exc))
            sleep(poll)
            continue
        if gate.look(jobs, totals, ray_free):
            waited = gate.waited()
            gate.record(state="admitted", admitted_at=stamp(gate.clock()), admitted_at_s=round(gate.clock(), 3),
                        waited_s=round(waited, 1), waits_for="")
            gate.emit("MVP_GATE_GO=shape %s admitted after %.0f s%s\n" % (
                mvp_queue.describe(gate.shape), waited, "; locks %s" % ", ".join(gate.locks) if gate.locks else ""))
            return waited
        unfit = mvp_queue.pack(gate.shape, totals) is None
        unfit_since = (unfit_since or gate.clock()) if unfit else None
        if max_wait and gate.waited() > max_wait:
            raise TimeoutError("waited %.0f s in the queue (max wait %g s): %s" % (
                gate.waited(), max_wait, gate.state.get("waits_for")))
        if unfit and unfit_wait and gate.clock() - unfit_since > unfit_wait:
            raise TimeoutError("the ALIVE workers could not hold the shape for %.0f s (unfit wait %g s): %s" % (
                gate.clock() - unfit_since, unfit_wait, gate.state.get("waits_for")))
        sleep(poll)


def main():
    """Parse arguments, wait for the job's turn, run the program, pass its exit code on."""
    started = time.time()  # the gate's own cost is measured from here (Ray's import included)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", action="append", default=[], type=mvp_queue.parse_pool,
                        help="a resource pool of the job: NAME=NODESxGPUS:CPUS (repeat per pool)")
    parser.add_argument("--lock", action="append", default=[], help="a cluster-wide lock the job takes")
    parser.add_argument(mvp_queue.PRIORITY_FLAG, type=int, default=0,
                        help="the job's priority: waiting jobs of a higher one go first (default 0)")
    parser.add_argument(mvp_queue.SINCE_FLAG, type=float, default=None,
                        help="a continued run's place in the queue: its first attempt's submission time (seconds "
                        "since the epoch; default: this job's own)")
    parser.add_argument("--log", required=True, help="file that receives a copy of the gate's lines")
    parser.add_argument("--dashboard-port", type=int, default=8265, help="the head's dashboard port")
    parser.add_argument("--worker-resource", default="worker_node", help="the custom resource workers carry")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between two looks at the queue")
    parser.add_argument("--max-wait", type=float, default=0.0, help="give up after waiting this long (0: never)")
    parser.add_argument("--unfit-wait", type=float, default=0.0, help="give up after this long while the ALIVE "
                        "workers cannot hold the shape (0: never)")
    parser.add_argument("--timeout", type=float, default=0.0, help="give up after this many seconds without a "
                        "readable Jobs API or cluster status (0: never)")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program given after --")
    me = os.environ.get("MVP_SUBMISSION_ID", "")
    os.makedirs(os.path.dirname(os.path.abspath(args.log)), exist_ok=True)

    def emit(line):
        sys.stdout.write(line)
        sys.stdout.flush()
        with open(args.log, "a", encoding="utf-8") as log:
            log.write(line)

    # The job directory is the parent of the --log file's folder (as for mvp_entry.py).
    job_dir = os.path.dirname(os.path.dirname(os.path.abspath(args.log)))
    gate = Gate(me, args.pool, args.lock, emit, job_file(job_dir, "queue"), started=started, priority=args.priority)

    def stop_waiting(signum, _frame):
        gate.record(state="stopped", waits_for="", stopped_at=stamp())
        emit("MVP_GATE_STOPPED=signal %d after %.0f s in the queue: the program never started\n"
             % (signum, gate.waited()))
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop_waiting)
    signal.signal(signal.SIGINT, stop_waiting)
    address = gcs_address()
    url = "http://%s:%d" % (address.rsplit(":", 1)[0], args.dashboard_port)
    headers = auth_headers()
    try:
        wait_turn(gate, lambda: list_jobs(url, headers), lambda: read_workers(address, args.worker_resource),
                  args.poll, args.timeout, args.max_wait, args.unfit_wait)
    except TimeoutError as exc:
        gate.record(state="timed_out", timed_out_at=stamp())
        emit("MVP_GATE_TIMEOUT=%s: the program never started\n" % exc)
        return TIMEOUT_EXIT
    except RuntimeError as exc:
        gate.record(state="error")
        emit("MVP_GATE_ERROR=%s\n" % exc)
        return UNREADABLE_EXIT
    proc = subprocess.Popen(program)

    def pass_on(signum, _frame):
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
