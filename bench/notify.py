#!/usr/bin/env python3
"""Benchmark of the webhooks' delivery (issue 64), at the unit level: the outbox and the sender of
``plugins/module_utils/notify/mvp_notify.py`` with real HTTP receivers on 127.0.0.1 (http.server in a thread).

* Verdict to first delivery attempt: ``--rounds`` times, 1 and then 20 runs end "together" (their events are built
  from a real job directory and written to the outbox one after the other, as the controller's pass does, then the
  sender is woken); the delay is from the decision (the event's ``at_s``) to the receiver's arrival of the event's
  first request. All runs share one endpoint (a team's chat webhook: the worst case, as the sender keeps at most
  ``PER_ENDPOINT`` deliveries in flight per URL). p50 and p99 over every event.
* The controller's pass while a receiver hangs: the time the pass spends on one event (build it, write its outbox
  entry, wake the sender), with a receiver answering at once, and with a receiver that never answers (every try
  waits the 10 s timeout) while earlier deliveries to it hold the sender's workers.

Writes the figures as JSON (``--out``).

Usage: python bench/notify.py [--rounds 30] [--out bench/results/notify.json]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "collections"))

sys.path.insert(0, os.path.join(ROOT, "tests"))

from ansible_collections.mvp.ray.plugins.module_utils.notify import mvp_notify  # noqa: E402  pylint: disable=C0413
from http_receiver import Receiver  # noqa: E402  pylint: disable=C0413


class Arrivals(object):
    """event_id -> the first arrival (seconds since the epoch) of that event at a receiver, read live."""

    def __init__(self, server):
        self.server = server

    def first(self):
        with self.server.lock:
            out = {}
            for request in self.server.requests:
                out.setdefault(json.loads(request["body"])["event_id"], request["at"])
            return out

    def __contains__(self, event_id):
        return event_id in self.first()

    def __getitem__(self, event_id):
        return self.first()[event_id]


def receiver(hang=None):
    """A receiver on 127.0.0.1 (tests/http_receiver.py): (url, Arrivals, its server); ``hang``: an Event it waits on
    before answering (never set: it hangs)."""
    def answer(_n, _handler):
        if hang is not None:
            hang.wait(30)
        return 200
    server = Receiver(answer)
    return server.url, Arrivals(server), server


def job_dir(root, sid):
    """An ended attempt's job directory (verdict, 20 evidence lines, metrics of 50 steps, a checkpoint)."""
    for sub in ("logs", "config", "checkpoints/global_step_40"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    with open(os.path.join(root, "logs", "status.json"), "w", encoding="utf-8") as handle:
        json.dump({"verdict": "failed", "cause": "oom", "summary": "ran out of memory", "steps": {"last": 50,
                   "planned": 100}, "evidence": [{"file": "logs/driver.log", "line": i, "text": "line %d" % i}
                                                 for i in range(20)]}, handle)
    with open(os.path.join(root, "logs", "metrics.jsonl"), "w", encoding="utf-8") as handle:
        for step in range(1, 51):
            handle.write(json.dumps({"step": step, "data": {"critic/score/mean": step / 50.0, "loss": 1.0 / step}})
                         + "\n")
    with open(os.path.join(root, "checkpoints", "latest_checkpointed_iteration.txt"), "w", encoding="utf-8") as h:
        h.write("40")
    with open(os.path.join(root, "checkpoints", "global_step_40", "model_world_size_1_rank_0.pt"), "w",
              encoding="utf-8") as handle:
        handle.write("w")
    with open(os.path.join(root, "config", "job_spec.json"), "w", encoding="utf-8") as handle:
        json.dump({"workload": "sft", "submission_id": sid}, handle)
    return root


def emit(outbox, sender, attempt, sid, url, key):
    """What the controller's pass does for one event: build it, write its outbox entry, wake the sender; returns
    (event, seconds spent)."""
    started = time.time()
    event = mvp_notify.build_event("run_ended", sid, sid, attempt, key, started, key_metrics=["critic/score/mean"])
    outbox.put(event, [{"url": url, "format": "json", "events": list(mvp_notify.DEFAULT_EVENTS), "source": "request",
                        "index": 0}])
    sender.wake()
    return event, time.time() - started


def percentile(values, q):
    """The q-th percentile (nearest rank) of ``values`` (float)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(q / 100.0 * len(ordered) + 0.5)) - 1))]


def delivery(rounds, together, tmp):
    """Seconds from decision to first arrival over ``rounds`` rounds of ``together`` events (list of float)."""
    url, arrivals, server = receiver()
    outbox = mvp_notify.Outbox(os.path.join(tmp, "outbox-%d" % together))
    sender = mvp_notify.Sender(outbox).start()
    attempt = job_dir(os.path.join(tmp, "job"), "bench-run")
    delays = []
    try:
        for r in range(rounds):
            events = [emit(outbox, sender, attempt, "bench-%d-%d-%d" % (together, r, i), url, "end")[0]
                      for i in range(together)]
            deadline = time.time() + 30
            while any(e["event_id"] not in arrivals for e in events) and time.time() < deadline:
                time.sleep(0.001)
            delays += [arrivals[e["event_id"]] - e["at_s"] for e in events if e["event_id"] in arrivals]
            time.sleep(0.05)
    finally:
        sender.stop()
        server.close()
    return delays


def pass_time(rounds, tmp, hanging):
    """Seconds the pass spends per event (list of float), the receiver answering at once or hanging."""
    release = threading.Event()
    url, _arrivals, server = receiver(release if hanging else None)
    outbox = mvp_notify.Outbox(os.path.join(tmp, "outbox-pass-%s" % hanging))
    sender = mvp_notify.Sender(outbox).start()
    attempt = job_dir(os.path.join(tmp, "job"), "bench-run")
    spent = []
    try:
        for r in range(rounds):
            spent.append(emit(outbox, sender, attempt, "pass-%s-%d" % (hanging, r), url, "end")[1])
            time.sleep(0.02)
    finally:
        release.set()
        sender.stop(wait=False)
        server.close()
    return spent


def summary(values):
    """p50, p99 and max in milliseconds (dict)."""
    return {"n": len(values), "p50_ms": round(percentile(values, 50) * 1000, 1),
            "p99_ms": round(percentile(values, 99) * 1000, 1), "max_ms": round(max(values) * 1000, 1)}


def main():
    """Measure and print the figures; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = {
            "host": {"python": platform.python_version(), "cpus": os.cpu_count(), "machine": platform.machine()},
            "verdict_to_first_try": {"1 run": summary(delivery(args.rounds, 1, tmp)),
                                     "20 runs together": summary(delivery(args.rounds, 20, tmp))},
            "pass_per_event": {"receiver answers": summary(pass_time(args.rounds, tmp, False)),
                               "receiver hangs": summary(pass_time(args.rounds, tmp, True))},
            "settings": {"workers": mvp_notify.WORKERS, "per_endpoint": mvp_notify.PER_ENDPOINT,
                         "timeout_s": mvp_notify.TIMEOUT_S, "rounds": args.rounds},
        }
    text = json.dumps(figures, indent=2, sort_keys=True)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
