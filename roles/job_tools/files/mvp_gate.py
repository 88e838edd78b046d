#!/usr/bin/env python3
"""mvp_gate.py: run a job's program only when no earlier job holding the same cluster lock is still running.

Usage: python -u mvp_gate.py --lock NAME --log <job_dir>/logs/driver.log [--dashboard-port PORT]
           [--poll SECONDS] -- <program> [args...]

Why: some trainers make cluster-wide state that two jobs cannot share. verl 0.9.1's PPO/GRPO
trainer (``trainer.use_v1``) starts TransferQueue 0.1.x, whose ``init()`` creates ONE named actor,
``TransferQueueController`` in the fixed Ray namespace ``transfer_queue`` (``ray.get_actor`` first,
else create), and whose ``close()`` kills it: a second job attaches to the first job's queue, and
fails when the first ends. Neither the name nor the namespace can be set, so such jobs run one
after another, in submission order.

How: the lock's holders are the submitted Ray jobs that are PENDING or RUNNING and whose entrypoint
carries ``--lock NAME`` (this program's own arguments, so restarts and resubmissions of the same
spec count too), read from the head's Jobs API (``/api/jobs/``). They are ordered by submission
time (Ray's ``start_time``), then submission id; the first one runs, the others wait here - the
Ray job is RUNNING, its program not started yet - printing ``MVP_GATE_WAIT=...`` with the jobs
ahead, then ``MVP_GATE_GO=...`` when they have ended. A job that ends in any way (SUCCEEDED,
FAILED, STOPPED, its driver's node lost) releases the lock, as Ray records it terminal.

Exits with the program's exit code; 3 when the Jobs API cannot be read for --timeout seconds
(default: forever). SIGTERM/SIGINT (Ray's stop_job) while waiting exit 143/130 at once; while the
program runs they are passed on to it.
"""
import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request

ACTIVE = ("PENDING", "RUNNING")


def uses_lock(entrypoint, lock):
    """Whether a job's entrypoint runs this gate with ``--lock <lock>``.

    :param entrypoint: str, the job's entrypoint command line (Ray's JobDetails.entrypoint).
    :param lock: str, the lock name.
    :returns: bool.
    """
    try:
        words = shlex.split(entrypoint or "")
    except ValueError:
        return False
    for index, word in enumerate(words):
        if os.path.basename(word) == "mvp_gate.py":
            rest = words[index + 1:]
            rest = rest[:rest.index("--")] if "--" in rest else rest
            return any(a == "--lock" and b == lock for a, b in zip(rest, rest[1:])) or "--lock=" + lock in rest
    return False


def jobs_ahead(jobs, me, lock):
    """The jobs that hold or come before ``me`` in the queue of ``lock``.

    :param jobs: list of dicts with Ray's job fields (``submission_id``, ``status``, ``start_time``
        in ms, ``entrypoint``; ``type`` ``SUBMISSION`` for submitted jobs), as ``/api/jobs/`` gives them.
    :param me: str, this job's submission id.
    :param lock: str, the lock name.
    :returns: list of those dicts, oldest first; empty when ``me`` may run. A job that is not in
        ``jobs`` (yet) waits for every active holder.
    """
    queue = [j for j in jobs
             if j.get("submission_id") and str(j.get("status", "")).rsplit(".", 1)[-1] in ACTIVE
             and str(j.get("type") or "SUBMISSION").rsplit(".", 1)[-1] == "SUBMISSION"
             and uses_lock(j.get("entrypoint"), lock)]
    queue.sort(key=lambda j: (j.get("start_time") or 0, j["submission_id"]))
    ids = [j["submission_id"] for j in queue]
    return queue[:ids.index(me)] if me in ids else queue


def describe(jobs):
    """``id (STATUS, submitted <UTC time>)`` for each job, comma-separated."""
    return ", ".join("%s (%s, submitted %s)" % (
        j["submission_id"], str(j.get("status")).rsplit(".", 1)[-1],
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((j.get("start_time") or 0) / 1000.0))) for j in jobs)


def dashboard_url(port):
    """The head's dashboard, ``http://<GCS host>:<port>`` (the GCS address Ray's ``auto`` finds)."""
    from ray._private.services import canonicalize_bootstrap_address_or_die

    return "http://%s:%d" % (canonicalize_bootstrap_address_or_die("auto").rsplit(":", 1)[0], port)


def auth_headers():
    """Ray token auth headers from RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH (none without a token)."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not token and path and os.path.exists(path):
        with open(path) as handle:
            token = handle.read().strip()
    return {"Authorization": "Bearer " + token} if token else {}


def list_jobs(url, headers):
    """Every job of the cluster from the Jobs API (``GET /api/jobs/``), as dicts."""
    request = urllib.request.Request(url + "/api/jobs/", headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read().decode("utf-8"))


def wait_turn(me, lock, read_jobs, emit, poll, timeout=0.0, clock=time.time, sleep=time.sleep):
    """Block until no earlier job of ``lock`` is active; return the seconds waited.

    :param read_jobs: callable returning the job list (:func:`list_jobs`); its errors are retried.
    :param emit: callable(str line) for the progress lines.
    :param poll: float, seconds between reads.
    :param timeout: float, give up after this many seconds of unreadable Jobs API (0: never).
    :raises RuntimeError: when the Jobs API stayed unreadable past ``timeout``.
    """
    started = clock()
    failing_since = None
    said = None
    while True:
        try:
            ahead = jobs_ahead(read_jobs(), me, lock)
            failing_since = None
        except Exception as exc:  # the dashboard may restart; keep waiting within the bound
            failing_since = failing_since if failing_since is not None else clock()
            if timeout and clock() - failing_since > timeout:
                raise RuntimeError("cannot read the Jobs API for %.0f s: %s" % (clock() - failing_since, exc))
            sleep(poll)
            continue
        if not ahead:
            waited = clock() - started
            emit("MVP_GATE_GO=lock %s after %.0f s\n" % (lock, waited))
            return waited
        names = [j["submission_id"] for j in ahead]
        if names != said:
            said = names
            emit("MVP_GATE_WAIT=lock %s: this job starts after %s. %s\n" % (lock, describe(ahead), REASONS.get(
                lock, "Jobs holding the same lock run one after another.")))
        sleep(poll)


REASONS = {
    "transfer_queue": "verl's TransferQueue keeps one TransferQueueController per Ray cluster (namespace "
                      "transfer_queue, name fixed), so two such jobs would share one queue: they run one "
                      "after another.",
}


def main():
    """Parse arguments, wait for the lock's turn, run the program, pass its exit code on."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lock", required=True, help="name of the cluster-wide lock")
    parser.add_argument("--log", required=True, help="file that receives a copy of the gate's lines")
    parser.add_argument("--dashboard-port", type=int, default=8265, help="the head's dashboard port")
    parser.add_argument("--poll", type=float, default=10.0, help="seconds between two reads of the job list")
    parser.add_argument("--timeout", type=float, default=0.0, help="give up after this many seconds "
                        "without a readable Jobs API (0: never)")
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

    def stop_waiting(signum, _frame):
        emit("MVP_GATE_STOPPED=signal %d while waiting for lock %s\n" % (signum, args.lock))
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stop_waiting)
    signal.signal(signal.SIGINT, stop_waiting)
    url = dashboard_url(args.dashboard_port)
    headers = auth_headers()
    try:
        wait_turn(me, args.lock, lambda: list_jobs(url, headers), emit, args.poll, args.timeout)
    except RuntimeError as exc:
        emit("MVP_GATE_ERROR=lock %s: %s\n" % (args.lock, exc))
        return 3
    proc = subprocess.Popen(program)

    def pass_on(signum, _frame):
        proc.send_signal(signum)

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
