#!/usr/bin/env python3
"""Ledger suite (issue 63): where a run's GPU-seconds went, checked against runs whose phases are known.

Cases:

* "synthetic phases": a job that plays a training run of set phases (the selftest with ``MVP_SELFTEST_PHASES``:
  start-up, step time, a checkpoint every N steps taking S seconds, a failure after step M), nobody waiting
  (``wait=false``, ``max_restarts`` 0). Once the job controller ended the run, its ``logs/ledger.json`` must put every
  second the attempt held in the bucket the job made happen, each within 1 s of the job's own record
  (``logs/phases.json``, wall-clock times taken by the job) and Ray's start and end times (``logs/status.json``):
  start-up = first step's start - Ray's start; productive = the steps up to the newest checkpoint; checkpoint = the
  saves; lost = the steps after the newest checkpoint of a run that did not end trained; failure gap = the failure
  to the job's exit (right after it: the entrypoint's verdict afterwards holds no GPU). The buckets close (sum =
  held) within 1%.

* "ledger.yml sums": ``ledger.yml -e by=owner`` over a period holding whole runs only (from ``--mark``, a moment the
  cluster ran nothing - "synthetic phases" writes it -, to now, after the runs of the other suites in CI): each
  owner's row of ``ledger.csv`` equals the sums of that owner's runs' own ledgers.

The synthetic run also tells its end (issue 64): to its own endpoint (``-e notify``, a receiver here on the job
controller's loopback) within 10 s of the verdict, one ``run_ended`` with the payload's fields; with ``--signed-port``
to the inventory's signed webhook too, its signature checked with ``--signed-secret``.

``check_closes`` and ``wait_for_ledger`` are used by the resume and queue suites too (a real SFT run that lost a worker,
a preempted run and its preemptor).

Usage: python tests/reliability/ledger.py --inventory inventories/local --host-shared /srv/mvp/private [--only CASE ...]
"""
import csv
import json
import os
import sys
import time

from faults import CaseFailed, Cluster, run_cases, suite_parser
from notify import DELIVERY_BOUND_S, Receiver, check_payload, signed_by, verdict_at, wait_event
from verdicts import read_json

BUCKETS = ("startup", "productive", "checkpoint", "validation", "recomputed", "lost", "failure_gap", "hang",
           "preemption", "shutdown", "unaccounted")
# The job controller writes the ended run's ledger within 60 s of its end (issue 63).
LEDGER_AFTER_END_S = 60
# Phases of the synthetic run (seconds): two checkpoints (3, 6), the failure after step 7.
PHASES = {"startup_s": 3, "steps": 10, "step_s": 1, "save_freq": 3, "save_s": 2, "fail_after": 7}
TOLERANCE_S = 1.0
# The synthetic run's owner (the request's `owner`): its own row in ledger.yml's table.
SYNTHETIC_OWNER = "ledger-synthetic"
RUN_TIMEOUT = 300


def stamp(kind):
    """A fresh submission id for a case."""
    return "ledger-%s-%s-%04x" % (kind, time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)


def wait_for_ledger(case, run_dir, timeout=RUN_TIMEOUT):
    """The run's ended ledger (dict), once its ``logs/run_end.json`` exists and the ledger says ``ended``; the ledger
    must come within LEDGER_AFTER_END_S of the run's end. Raises CaseFailed otherwise."""
    end_path, ledger_path = (os.path.join(run_dir, "logs", name) for name in ("run_end.json", "ledger.json"))
    deadline = time.time() + timeout
    while not os.path.exists(end_path):
        if time.time() > deadline:
            raise CaseFailed("no logs/run_end.json in %s within %d s" % (run_dir, timeout))
        time.sleep(1)
    ended = os.stat(end_path).st_mtime
    while True:
        ledger = read_json(ledger_path) or {}
        if ledger.get("state") == "ended":
            written = os.stat(ledger_path).st_mtime
            case.check(written - ended <= LEDGER_AFTER_END_S, "%s written %.0f s after the run's end (at most %d)"
                       % (ledger_path, written - ended, LEDGER_AFTER_END_S))
            return ledger
        if time.time() > ended + LEDGER_AFTER_END_S + 5:
            raise CaseFailed("no ended ledger in %s within %d s of the run's end (has: %s)" % (
                run_dir, LEDGER_AFTER_END_S, ledger.get("state")))
        time.sleep(1)


def check_closes(case, ledger, what):
    """The buckets of the run and of each attempt add up to their GPU-seconds held, within 1%."""
    for part, name in [(ledger, what)] + [(a, a.get("submission_id")) for a in ledger.get("attempts") or []]:
        held, buckets = float(part.get("gpu_seconds_held") or 0), part.get("buckets") or {}
        case.check(sorted(buckets) == sorted(BUCKETS), "%s: buckets %s, expected %s" % (name, sorted(buckets),
                                                                                          sorted(BUCKETS)))
        total = sum(float(v) for v in buckets.values())
        case.check(abs(total - held) <= 0.01 * max(held, 1e-9), "%s: buckets add up to %.1f GPU-s, held %.1f"
                   % (name, total, held))
        unaccounted = float(buckets.get("unaccounted") or 0)
        case.check(abs(unaccounted) <= 0.01 * max(held, 1e-9), "%s: unaccounted %.1f GPU-s of %.1f held"
                   % (name, unaccounted, held))


def check_told(case, sid, receiver, signed):
    """The run's end came to its own endpoint within 10 s of the verdict, exactly one event (run_ended), with the
    payload's fields; and to the signed webhook with a valid signature (when one listens)."""
    arrived, body = wait_event(receiver, sid, DELIVERY_BOUND_S + 30)
    record = read_json(os.path.join(case.cluster.host_shared, "jobs", sid, "logs", "run_end.json")) or {}
    late = arrived - verdict_at(record)
    case.check(late <= DELIVERY_BOUND_S + 1, "run_ended came %.1f s after the verdict (at most %d)" % (
        late, DELIVERY_BOUND_S))
    check_payload(case, sid, body, "failed")
    case.check(body.get("owner") == SYNTHETIC_OWNER, "the event's owner %r" % body.get("owner"))
    if signed:
        wait_event(signed, sid, DELIVERY_BOUND_S + 30)
        requests = [r for r, b in signed.received(sid) if b.get("event") == "run_ended"]
        case.check(requests and all(signed_by(case.shared["signed_secret"], r) for r in requests),
                   "the signed webhook's run_ended of %s has no valid signature" % sid)
    time.sleep(3)  # anything else the controller would send about this run
    kinds = [b.get("event") for _a, b in receiver.events(sid)]
    case.check(kinds == ["run_ended"], "events %s, asked for run_ended only (max_restarts 0)" % kinds)
    case.note("run_ended %.1f s after the verdict%s" % (late, ", signed" if signed else ""))


def case_synthetic(case):
    """A played run of known phases (see the module's docstring)."""
    from verdicts import Job  # pylint: disable=import-outside-toplevel
    mark = case.shared.get("mark")
    if mark and not os.path.exists(mark):
        case.wait_jobs_idle()
        with open(mark, "w", encoding="utf-8") as handle:
            handle.write("%.3f\n" % time.time())
    job = Job(case, stamp("syn"))
    # Issue 64 on the way: the run tells its own endpoint (a receiver here, on the controller's loopback) and, with
    # --signed-port, the inventory's signed webhook (job_controller_webhooks) its end.
    receiver = Receiver()
    signed = Receiver(case.shared["signed_port"], "/signed") if case.shared.get("signed_port") else None
    try:
        run = case.play("submit.yml", ["-e", "workload=selftest", "-e", "wait=false", "-e", "submission_id=" + job.id,
                                       "-e", json.dumps({"env_vars": {"MVP_SELFTEST_PHASES": json.dumps(PHASES)},
                                                         "max_restarts": 0, "owner": SYNTHETIC_OWNER,
                                                         "notify": receiver.url})],
                        label="submit.yml selftest with phases")
        if run.rc != 0:
            raise CaseFailed("submit.yml rc=%s" % run.rc)
        ledger = wait_for_ledger(case, job.dir)
        check_told(case, job.id, receiver, signed)
    finally:
        receiver.close()
        if signed:
            signed.close()
    played = read_json(os.path.join(job.dir, "logs", "phases.json")) or {}
    status = read_json(os.path.join(job.dir, "logs", "status.json")) or {}
    if not played.get("steps") or not status.get("start_time"):
        raise CaseFailed("no phases.json steps or Ray start time in %s" % job.dir)
    # The job exits right after its failure (phases.json failed_at): its GPUs are free then, though Ray ends the job
    # later (the entrypoint's verdict waits up to 45 s for a dead node), so the attempt holds them until failed_at.
    start, end = status["start_time"] / 1000.0, played["failed_at"]
    steps, saves = played["steps"], played["saves"]
    kept = max(s["step"] for s in saves)  # the newest checkpoint's step
    expected = {
        "startup": steps[0]["start"] - start,
        # a step's time runs from the previous step's end (or its own start for the first) to its end, saves excluded
        "productive": sum(s["end"] - s["start"] for s in steps if s["step"] <= kept),
        "checkpoint": sum(s["end"] - s["start"] for s in saves),
        "lost": sum(s["end"] - s["start"] for s in steps if s["step"] > kept),
        "failure_gap": end - played["failed_at"],
    }
    attempt = (ledger.get("attempts") or [{}])[0]
    seconds = attempt.get("seconds") or {}
    case.check(abs(float(attempt.get("seconds_held") or 0) - (end - start)) <= TOLERANCE_S,
               "seconds held %s, the job ran %.1f s from Ray's start to its failure" % (
                   attempt.get("seconds_held"), end - start))
    for bucket, value in sorted(expected.items()):
        got = float(seconds.get(bucket, -1))
        case.check(abs(got - value) <= TOLERANCE_S, "%s: %.2f s in the ledger, the job made %.2f s" % (bucket, got,
                                                                                                       value))
    case.note("buckets (s): " + ", ".join("%s %.1f (made %.1f)" % (b, float(seconds.get(b, 0)), v)
                                          for b, v in sorted(expected.items())))
    check_closes(case, ledger, job.id)
    case.check(ledger.get("owner") == SYNTHETIC_OWNER, "the ledger's owner %r, submitted as %s"
               % (ledger.get("owner"), SYNTHETIC_OWNER))


def ended_ledgers(host_shared, since):
    """The ended runs' ledgers (first attempts' ``logs/ledger.json``) submitted at or after ``since`` (list)."""
    jobs, out = os.path.join(host_shared, "jobs"), []
    for name in sorted(os.listdir(jobs)):
        ledger = read_json(os.path.join(jobs, name, "logs", "ledger.json"))
        if isinstance(ledger, dict) and ledger.get("state") == "ended" and (ledger.get("submitted_at") or 0) >= since:
            out.append(ledger)
    return out


def case_ledger_yml_sums(case):
    """ledger.yml over a period that holds whole runs only (from MARK, a moment the cluster ran nothing, to now):
    each owner's row in ledger.csv equals the sums of that owner's runs' own ledgers (GPU-hours, runs, buckets) - the
    runs that held GPUs."""
    case.wait_jobs_idle()
    since = float(open(case.shared["mark"], encoding="utf-8").read()) if case.shared.get("mark") else None
    if since is None:
        raise CaseFailed("no --mark file: run 'synthetic phases' with --mark first, or give --mark of an earlier run")
    time.sleep(LEDGER_AFTER_END_S // 4)  # the last run's ledger (at most 60 s after its end; usually the same pass)
    until = time.time()
    # ledger.yml counts the runs that held GPUs (a script job such as the selftest holds none)
    runs = [r for r in ended_ledgers(case.cluster.host_shared, since)
            if (r.get("ended_at") or until) <= until and (r.get("gpu_seconds_held") or 0) > 0]
    if not runs:  # alone (make ledger): one short SFT run of another owner makes the period hold GPU time
        sft = case.play("submit.yml", ["-e", "workload=sft", "-e", "owner=ledger-sft", "-e", "wait=true"],
                        label="submit.yml sft (ledger-sft)")
        if sft.rc != 0:
            raise CaseFailed("the SFT run of the period failed (rc=%s)" % sft.rc)
        time.sleep(LEDGER_AFTER_END_S // 4)
        until = time.time()
        runs = [r for r in ended_ledgers(case.cluster.host_shared, since)
                if (r.get("ended_at") or until) <= until and (r.get("gpu_seconds_held") or 0) > 0]
    if not runs:
        raise CaseFailed("no ended run that held GPUs since %s" % time.strftime("%H:%M:%S", time.gmtime(since)))
    stamp_fmt = "%Y-%m-%dT%H:%M:%SZ"
    run = case.play("ledger.yml", ["-e", "since=" + time.strftime(stamp_fmt, time.gmtime(since)),
                                   "-e", "until=" + time.strftime(stamp_fmt, time.gmtime(until + 1)),
                                   "-e", "by=owner"], label="ledger.yml by owner")
    if run.rc != 0:
        raise CaseFailed("ledger.yml rc=%s" % run.rc)
    reports = os.path.join(case.cluster.host_shared, "reports")
    newest = max((os.path.join(reports, n) for n in os.listdir(reports) if n.startswith("ledger-")), key=os.path.getmtime)
    with open(os.path.join(newest, "ledger.csv"), encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    groups = {r["name"]: r for r in rows if r["kind"] == "owner"}
    owners = sorted(set(r.get("owner") or "(none)" for r in runs))
    for owner in owners:
        mine = [r for r in runs if (r.get("owner") or "(none)") == owner]
        row = groups.get(owner)
        if not case.check(row is not None, "ledger.csv has no row for owner %s (rows: %s)" % (owner, sorted(groups))):
            continue
        case.check(int(row["runs"]) == len(mine), "owner %s: %s runs in ledger.csv, %d ended in the period"
                   % (owner, row["runs"], len(mine)))
        columns = [("gpu_hours_held", "gpu_seconds_held", None)] + [("%s_gpu_hours" % b, "buckets", b) for b in BUCKETS]
        for column, key, bucket in columns:
            total = sum(float(r[key] if bucket is None else r[key][bucket]) for r in mine) / 3600.0
            # ledger.csv rounds GPU-hours to 0.001
            case.check(abs(float(row[column] or 0) - total) <= 0.0006, "owner %s: %s %s in ledger.csv, its runs add "
                       "up to %.4f" % (owner, column, row[column], total))
        case.note("%s: %d runs, %s GPU-h" % (owner, len(mine), row["gpu_hours_held"]))


CASES = [
    ("synthetic phases", "each bucket within 1 s of the phases the job played; the buckets close within 1%",
     case_synthetic),
    ("ledger.yml sums", "each owner's row of ledger.csv equals the sums of that owner's runs' ledgers",
     case_ledger_yml_sums),
]


def main():
    """Run the table and print it; return the exit code."""
    parser = suite_parser(__doc__, CASES)
    parser.add_argument("--mark", default="", help="a file holding the period's start for 'ledger.yml sums' (seconds "
                        "since the epoch); 'synthetic phases' writes it, once the cluster runs nothing, when absent")
    parser.add_argument("--signed-port", type=int, default=0, help="the port of the inventory's signed webhook on "
                        "127.0.0.1 (job_controller_webhooks, path /signed): the synthetic run's end must come there "
                        "signed with --signed-secret")
    parser.add_argument("--signed-secret", default="", help="that webhook's test secret")
    args = parser.parse_args()

    def prepare(case):
        case.shared = {"mark": args.mark, "signed_port": args.signed_port, "signed_secret": args.signed_secret}
    return run_cases(CASES, Cluster(args.inventory, args.host_shared), args.only, "ledger", prepare=prepare)


if __name__ == "__main__":
    sys.exit(main())
