#!/usr/bin/env python3
"""Webhooks told when a run ends (issue 64): real plays on the local cluster, a real receiver on this host's loopback.

The job controller of the local inventory runs on this machine (``inventories/local/hosts.yml``: the group
``job_controller`` is ``localhost``), so a receiver listening on 127.0.0.1 here is on the controller's own host; each
run is submitted with ``-e notify=http://127.0.0.1:<port>/hook`` (one endpoint, json format, the default events).

Cases:

* "selftest and failing run": a selftest and a selftest that fails at once (``MVP_SELFTEST_INTERCONNECT_ITERATIONS=0``:
  the selftest refuses it, ValueError), both ``-e wait=false`` and ``max_restarts=0``: each delivers exactly one
  event, ``run_ended``, within 10 s of the controller's verdict (``logs/run_end.json``'s ``at``, whole seconds: 1 s
  more is allowed), with the payload's fields (event_id, run, attempt, workload, verdict - succeeded / failed -, cause,
  summary, steps, job_dir under the nodes' shared root, evidence as at most 10 lines).
* "controller killed before send": the fault file ``<shared>/controller/faults/kill-after-outbox-write`` makes the
  controller SIGKILL itself right after it writes the run's event into the outbox, before it sends it; its keeper
  starts it again (a new pid in the heartbeat), and the event arrives then, with the event_id of the outbox's file.
* "receiver 503 then 200": the receiver answers 503 for ``--unavailable-s`` seconds (120 by default), then 200: the
  run's event is delivered once it answers (its outbox entry delivered after more than one try), none lost.

Signatures are checked by the unit tests (tests/unit/plugins/module_utils/notify/test_mvp_notify.py): a request's own
endpoint carries no secret, and setting ``job_controller_webhooks`` with a test secret here would mean running
``site.yml`` with another configuration of the controller another person's runs depend on.

Usage: python tests/reliability/notify.py --inventory inventories/local --host-shared /srv/mvp/private
           [--unavailable-s 120] [--only CASE ...]
"""
import hashlib
import hmac
import json
import os
import sys
import time

from faults import CaseFailed, Cluster, run_cases, suite_parser
from verdicts import extra_vars, read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import http_receiver  # noqa: E402  pylint: disable=wrong-import-position - tests/http_receiver.py
RUN_END_TIMEOUT = 600
DELIVERY_BOUND_S = 10.0
FAULT = os.path.join("controller", "faults", "kill-after-outbox-write")
FIELDS = ("event", "event_id", "at", "run", "attempt", "workload", "owner", "verdict", "cause", "summary", "steps",
          "metrics", "checkpoint", "job_dir", "mlflow_run", "evidence", "detail")


class Receiver(http_receiver.Receiver):
    """The shared receiver (tests/http_receiver.py) answering ``status()`` (200 unless told otherwise), with the
    events of one run."""

    def __init__(self, port=0, path="/hook"):
        self.status = lambda: 200
        super().__init__(lambda n, handler: self.status(), port, path)

    def events(self, run, answered=200):
        """The events of ``run`` received and answered ``answered``: list of (arrival time, payload)."""
        return [(r["at"], body) for r, body in self.received(run, answered)]

    def received(self, run, answered=200):
        """The requests about ``run`` answered ``answered``: list of (request dict, payload)."""
        with self.lock:
            got = [(r, json.loads(r["body"])) for r in self.requests if r["status"] == answered]
        return [(r, body) for r, body in got if body.get("run") == run]


def submit(case, receiver, name, env=None):
    """Submit a selftest run with the receiver as its own endpoint, ``wait=false``; returns its id."""
    sid = "notify-%s-%s-%04x" % (name, time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)
    args = ["-e", "workload=selftest", "-e", "submission_id=" + sid, "-e", "wait=false",
            "-e", "notify=" + receiver.url] + extra_vars(max_restarts=0, env_vars=env or {})
    run = case.play("submit.yml", args, label="submit %s" % name)
    if run.rc != 0:
        raise CaseFailed("submit.yml of %s failed (rc=%s)" % (sid, run.rc))
    return sid


def run_end(case, sid):
    """The run's end record, waited for (``logs/run_end.json`` of its first attempt)."""
    path = os.path.join(case.cluster.host_shared, "jobs", sid, "logs", "run_end.json")
    deadline = time.time() + RUN_END_TIMEOUT
    while not os.path.exists(path):
        if time.time() > deadline:
            raise CaseFailed("%s has no logs/run_end.json %d s after its submission" % (sid, RUN_END_TIMEOUT))
        time.sleep(0.5)
    return read_json(path) or {}


def wait_event(receiver, sid, within, kind="run_ended"):
    """The first ``kind`` event of ``sid`` answered 200, waited for ``within`` seconds: (arrival, payload)."""
    deadline = time.time() + within
    while time.time() < deadline:
        got = [e for e in receiver.events(sid) if e[1].get("event") == kind]
        if got:
            return got[0]
        time.sleep(0.1)
    raise CaseFailed("no %s event of %s within %d s (received: %s)" % (
        kind, sid, within, [b.get("event") for _a, b in receiver.events(sid)]))


def verdict_at(record):
    """Seconds since the epoch of the run's end (``at``, ``%Y-%m-%dT%H:%M:%SZ``, whole seconds)."""
    return time.mktime(time.strptime(record["at"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone


def signed_by(secret, request):
    """Whether a received request carries the documented signature (docs/jobs.md "Being told: webhooks"): hex
    HMAC-SHA256 with ``secret`` of ``"<X-MVP-Signature-Timestamp>,<body>"`` in ``X-MVP-Signature``, computed here with
    the standard library (not the project's own check)."""
    headers = {k.lower(): v for k, v in request["headers"].items()}
    stamp = headers.get("x-mvp-signature-timestamp", "")
    mac = hmac.new(secret.encode("utf-8"), stamp.encode("ascii") + b"," + request["body"], hashlib.sha256).hexdigest()
    return bool(stamp) and hmac.compare_digest(mac, headers.get("x-mvp-signature", "")) and \
        abs(time.time() - int(stamp)) < 300


def check_payload(case, sid, body, verdict):
    """The payload's fields, compared with the run's own files."""
    missing = [f for f in FIELDS if f not in body]
    case.check(not missing, "%s: the payload lacks %s" % (sid, missing))
    status = read_json(os.path.join(case.cluster.host_shared, "jobs", sid, "logs", "status.json")) or {}
    workload = (read_json(os.path.join(case.cluster.host_shared, "jobs", sid, "config", "job_spec.json")) or {}).get(
        "workload")
    case.check((body.get("run"), body.get("workload")) == (sid, workload) and str(body.get("attempt")).startswith(sid),
               "%s: run/attempt/workload %s" % (sid, [body.get(k) for k in ("run", "attempt", "workload")]))
    case.check(body.get("verdict") == verdict == status.get("verdict"),
               "%s: verdict %s, its status.json %s, expected %s" % (sid, body.get("verdict"), status.get("verdict"),
                                                                    verdict))
    case.check(body.get("cause") == status.get("cause"), "%s: cause %s, status.json %s" % (
        sid, body.get("cause"), status.get("cause")))
    case.check(str(body.get("job_dir", "")).endswith("/jobs/" + sid) and not str(body.get("job_dir")).startswith(
        case.cluster.host_shared), "%s: job_dir %s is not the nodes' path" % (sid, body.get("job_dir")))
    case.check(len(body.get("evidence") or []) <= 10 and all(len(x) <= 300 for x in body.get("evidence") or []),
               "%s: evidence not bounded" % sid)


def case_selftest_and_failing(case):
    """A selftest and a failing run: exactly run_ended each, within 10 s of the verdict, with the payload's fields."""
    case.ensure_cluster()
    receiver = Receiver()
    try:
        good = submit(case, receiver, "ok")
        bad = submit(case, receiver, "fail", {"MVP_SELFTEST_INTERCONNECT_ITERATIONS": "0"})
        for sid, verdict in ((good, "succeeded"), (bad, "failed")):
            record = run_end(case, sid)
            arrived, body = wait_event(receiver, sid, DELIVERY_BOUND_S + 30)
            late = arrived - verdict_at(record)
            case.note("%s: run_ended %.1f s after the verdict" % (sid, late))
            case.check(late <= DELIVERY_BOUND_S + 1, "%s: the event came %.1f s after the verdict" % (sid, late))
            check_payload(case, sid, body, verdict)
        time.sleep(5)  # anything else the controller would send about these runs
        for sid in (good, bad):
            kinds = sorted({b.get("event") for _a, b in receiver.events(sid)})
            case.check(kinds == ["run_ended"], "%s: events %s, asked for run_ended only (max_restarts 0)" % (sid, kinds))
            ids = {b.get("event_id") for _a, b in receiver.events(sid)}
            case.check(len(ids) == 1, "%s: %d different event ids for one event" % (sid, len(ids)))
    finally:
        receiver.close()


def case_controller_killed(case):
    """The controller killed after writing the event, before sending it: delivered after its keeper restarts it."""
    case.ensure_cluster()
    shared = case.cluster.host_shared
    receiver = Receiver()
    try:
        before = (read_json(os.path.join(shared, "controller", "heartbeat.json")) or {}).get("pid")
        sid = submit(case, receiver, "killed")
        os.makedirs(os.path.dirname(os.path.join(shared, FAULT)), exist_ok=True)
        with open(os.path.join(shared, FAULT), "w", encoding="utf-8") as handle:
            handle.write("set by tests/reliability/notify.py\n")
        run_end(case, sid)
        arrived, body = wait_event(receiver, sid, 180)
        case.check(not os.path.exists(os.path.join(shared, FAULT)), "the fault file is still there")
        after = (read_json(os.path.join(shared, "controller", "heartbeat.json")) or {}).get("pid")
        case.check(after and after != before, "the controller's pid %s -> %s: it was not killed" % (before, after))
        outbox = os.path.join(shared, "controller", "outbox")
        entries = [read_json(os.path.join(folder, n)) or {} for folder in (outbox, os.path.join(outbox, "done"))
                   if os.path.isdir(folder) for n in os.listdir(folder) if n.endswith(".json")]
        mine = [e for e in entries if (e.get("event") or {}).get("run") == sid]
        case.check(len(mine) == 1 and mine[0]["event"]["event_id"] == body["event_id"],
                   "the outbox's entries of %s: %s; the event received %s" % (
                       sid, [(e["event"]["event_id"], e.get("state")) for e in mine], body["event_id"]))
        case.note("killed controller pid %s; the event came %.1f s after the verdict, event_id %s"
                  % (before, arrived - verdict_at(read_json(os.path.join(shared, "jobs", sid, "logs",
                                                                         "run_end.json"))), body["event_id"]))
    finally:
        receiver.close()
        try:
            os.unlink(os.path.join(shared, FAULT))
        except OSError:
            pass


def case_receiver_unavailable(case):
    """The receiver answers 503 for ``case.unavailable_s`` seconds, then 200: the event is delivered, none lost."""
    case.ensure_cluster()
    receiver = Receiver()
    up_at = time.time() + case.unavailable_s
    receiver.status = lambda: 503 if time.time() < up_at else 200
    try:
        sid = submit(case, receiver, "unavailable")
        run_end(case, sid)
        # The backoff doubles from 5 s (5, 10, 20, 40, 80 ...): the try after the receiver is back comes within the
        # last pause, at most as long as the outage.
        arrived, body = wait_event(receiver, sid, max(0.0, up_at - time.time()) + case.unavailable_s + 60)
        refused = [b for _a, b in receiver.events(sid, answered=503)]
        case.check(refused, "no try of %s met the outage" % sid)
        case.check(all(b["event_id"] == body["event_id"] for b in refused),
                   "the tries carried different event ids")
        case.note("%d tries answered 503, delivered %.0f s after the receiver came back" % (
            len(refused), arrived - up_at))
    finally:
        receiver.close()


CASES = [
    ("selftest and failing run", "each delivers exactly run_ended within 10 s of its verdict, with the payload's "
     "fields", case_selftest_and_failing),
    ("controller killed before send", "the controller SIGKILLed right after the outbox write; its keeper starts it "
     "again and the event arrives with the outbox's event_id", case_controller_killed),
    ("receiver 503 then 200", "tries answered 503 during the outage, the event delivered once the receiver answers",
     case_receiver_unavailable),
]


def main():
    """Run the table and print it; return the exit code."""
    parser = suite_parser(__doc__, CASES)
    parser.add_argument("--unavailable-s", type=float, default=120.0,
                        help="seconds the receiver answers 503 in the case 'receiver 503 then 200'")
    args = parser.parse_args()

    def prepare(case):
        case.unavailable_s = args.unavailable_s
    return run_cases(CASES, Cluster(args.inventory, args.host_shared), args.only, "notify", prepare)


if __name__ == "__main__":
    sys.exit(main())
