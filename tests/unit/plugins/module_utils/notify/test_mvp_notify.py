"""mvp_notify: endpoints checked, events built from a job directory, signed, written to an outbox and delivered at least
once to real HTTP receivers on 127.0.0.1 (http.server in a thread). Backoffs are shortened by the sender's parameters."""
import hashlib
import hmac
import json
import os
import random
import threading
import time

import pytest

import mvp_notify
from http_receiver import Receiver


@pytest.fixture
def receivers():
    made = []

    def make(answer=lambda n, h: 200):
        made.append(Receiver(answer))
        return made[-1]
    yield make
    for receiver in made:
        receiver.close()


def done_count(folder):
    done = os.path.join(folder, "done")
    return len(os.listdir(done)) if os.path.isdir(done) else 0


def wait_for(condition, within=10.0):
    deadline = time.time() + within
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def job_dir(tmp_path, sid="grpo-20261129-010000-abcdef", evidence=20, secret="hf_abcdefghijklmnop1234"):
    """An ended attempt's job directory: a failed verdict with ``evidence`` lines (one holding a token), metrics of
    steps 1..5, a complete checkpoint of step 4, an MLflow run record and a job spec with an owner."""
    root = tmp_path / "jobs" / sid
    for sub in ("logs", "config", "checkpoints/global_step_4/actor"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    lines = [{"file": "logs/driver.log", "line": i + 1, "text": "line %d %s" % (i, "x" * 400 if i == 3 else "")}
             for i in range(evidence)]
    lines[-1]["text"] = "HF_TOKEN=%s failed" % secret
    status = {"verdict": "failed", "cause": "oom", "summary": "the actor ran out of memory",
              "steps": {"last": 5, "planned": 10, "logged": 5}, "evidence": lines}
    (root / "logs/status.json").write_text(json.dumps(status))
    (root / "logs/metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "data": {"critic/score/mean": s / 10.0, "actor/entropy": 1.0 - s / 100.0,
                                        "other": s}}) + "\n" for s in range(1, 6)))
    (root / "checkpoints/latest_checkpointed_iteration.txt").write_text("4")
    (root / "checkpoints/global_step_4/actor/model_world_size_1_rank_0.pt").write_text("w")
    (root / "config/mlflow_run.json").write_text(json.dumps({"run_id": "r1", "ui_url": "http://head:5000/#/r1"}))
    (root / "config/job_spec.json").write_text(json.dumps({"workload": "grpo", "owner": "ana",
                                                           "submission_id": sid}))
    return str(root), status


def make_sender(folder, webhooks=(), **kwargs):
    settings = dict(first_backoff_s=0.05, max_backoff_s=0.2, timeout_s=2.0, retry_for_s=60)
    settings.update(kwargs)
    return mvp_notify.Sender(mvp_notify.Outbox(folder), webhooks, **settings).start()


def endpoints(url, source="request", **extra):
    return [dict(mvp_notify.check_endpoints([dict({"url": url}, **extra)], "notify")[0], source=source, index=0)]


# -- endpoints --------------------------------------------------------------------------------------------------

def test_a_url_is_one_json_endpoint_with_every_event_but_checkpoint():
    [one] = mvp_notify.check_endpoints("http://127.0.0.1:9/hook", "notify")
    assert one["url"] == "http://127.0.0.1:9/hook" and one["format"] == "json"
    assert set(one["events"]) == set(mvp_notify.EVENTS) - {"checkpoint"}


@pytest.mark.parametrize("value, field, words", [
    ("ftp://x", "notify[0].url", "not an http(s) URL"),
    ([{"url": "http://h/", "format": "xml"}], "notify[0].format", "not a format"),
    ([{"url": "http://h/", "events": ["run_ended", "born"]}], "notify[0].events", "'born' is not an event"),
    ([{"url": "http://h/", "events": ["checkpoint"]}], "notify[0].checkpoint_every", "needed"),
    (["http://h/", {"url": "http://h/", "colour": 1}], "notify[1].colour", "unknown key"),
    ([{"url": "http://h/", "secret": "s3cr3t"}], "notify[0].secret", "cannot carry a secret"),
])
def test_a_bad_endpoint_is_refused_naming_the_field(value, field, words):
    with pytest.raises(mvp_notify.NotifyError) as caught:
        mvp_notify.check_endpoints(value, "notify", allow_secret=False)
    assert caught.value.field == field and words in str(caught.value) and "Fix:" in str(caught.value)


def test_the_inventorys_endpoint_keeps_its_secret_and_checkpoint_every_adds_the_event():
    [hook] = mvp_notify.check_endpoints([{"url": "https://chat/x", "secret": "k", "checkpoint_every": 50,
                                          "events": ["run_ended"]}], "job_controller_webhooks")
    assert hook["secret"] == "k" and hook["events"] == ["run_ended", "checkpoint"]


def test_public_url_drops_user_info_and_query():
    assert mvp_notify.public_url("https://u:p@hooks.example:8443/a/b?token=t#f") == "https://hooks.example:8443/a/b"


# -- the payload and the signature --------------------------------------------------------------------------------

def test_the_payload_answers_in_one_message_bounded_and_without_the_token(tmp_path):
    token = "hf_abcdefghijklmnop1234"
    attempt, status = job_dir(tmp_path, secret=token)
    event = mvp_notify.build_event("run_ended", "grpo-20261129-010000-abcdef", "grpo-20261129-010000-abcdef",
                                   attempt, "ended", 1800000000.0, key_metrics=["critic/score/mean", "actor/entropy"],
                                   job_dir="/private/jobs/x", secrets=["line 1"])
    assert event["event"] == "run_ended" and event["owner"] == "ana" and event["workload"] == "grpo"
    assert (event["verdict"], event["cause"], event["summary"]) == ("failed", "oom", status["summary"])
    assert event["steps"] == {"trained": 5, "planned": 10}
    assert event["metrics"] == {"critic/score/mean": 5 / 10.0, "actor/entropy": 1.0 - 5 / 100.0}
    assert event["checkpoint"] == os.path.join(attempt, "checkpoints", "global_step_4")
    assert event["mlflow_run"] == "http://head:5000/#/r1" and event["job_dir"] == "/private/jobs/x"
    assert event["at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1800000000.0))
    assert len(event["evidence"]) == mvp_notify.MAX_EVIDENCE_LINES
    assert all(len(line) <= mvp_notify.MAX_LINE_CHARS for line in event["evidence"])
    text = json.dumps(event)
    assert token not in text and "<redacted>" in event["evidence"][-1]
    assert "line 1 " not in text  # a secret the controller names is replaced wherever it appears
    again = mvp_notify.build_event("run_ended", "grpo-20261129-010000-abcdef", "grpo-20261129-010000-abcdef",
                                   attempt, "ended", 1800000999.0)
    assert again["event_id"] == event["event_id"]  # the same decision taken again: the same id
    other = mvp_notify.build_event("run_ended", "grpo-20261129-010000-abcdef", "grpo-20261129-010000-abcdef-r1",
                                   attempt, "ended", 1800000000.0)
    assert other["event_id"] != event["event_id"]


@pytest.mark.parametrize("text, secret", [("Authorization: Bearer abcdefghijkl", "abcdefghijkl"),
                                          ("wandb_api_key='0123456789'", "0123456789"),
                                          ("fetch https://bob:pa55word@host/x", "pa55word"),
                                          ('{"password": "hunter22"}', "hunter22")])
def test_redact_text_hides_secret_shapes(text, secret):
    assert secret not in mvp_notify.redact_text(text)


def test_the_signature_is_determineds_hmac_over_timestamp_comma_body():
    body = b'{"a":1}'
    headers = mvp_notify.sign("key", 1700000000, body)
    expected = hmac.new(b"key", b"1700000000," + body, hashlib.sha256).hexdigest()
    assert headers[mvp_notify.SIGNATURE_HEADER] == expected
    assert mvp_notify.verify_signature("key", headers, body, 300, now=1700000100)
    assert not mvp_notify.verify_signature("key", headers, body, 300, now=1700000301)  # a replay, too old
    assert not mvp_notify.verify_signature("other", headers, body, 300, now=1700000100)
    assert not mvp_notify.verify_signature("key", headers, body + b" ", 300, now=1700000100)


def test_slack_format_is_one_text(tmp_path):
    attempt, _status = job_dir(tmp_path)
    event = mvp_notify.build_event("run_ended", "r", "r", attempt, "ended", time.time())
    body = json.loads(mvp_notify.body_of(event, "slack"))
    assert list(body) == ["text"] and "run r ended: failed" in body["text"] and "oom" in body["text"]


# -- delivery over real sockets -----------------------------------------------------------------------------------

def test_delivered_with_the_payload_and_a_valid_signature(tmp_path, receivers):
    receiver = receivers()
    attempt, _status = job_dir(tmp_path)
    folder = str(tmp_path / "outbox")
    hooks = mvp_notify.check_endpoints([{"url": receiver.url, "secret": "team-key"}], "job_controller_webhooks")
    sender = make_sender(folder, hooks)
    try:
        event = mvp_notify.build_event("run_ended", "r", "r", attempt, "ended", time.time())
        outbox = mvp_notify.Outbox(folder)
        [path] = outbox.put(event, [dict(hooks[0], source="config", index=0)])
        assert "team-key" not in open(path).read()  # the secret never goes into the outbox
        sender.wake()
        assert wait_for(lambda: len(receiver.requests) == 1, 5)
        request = receiver.requests[0]
        assert json.loads(request["body"]) == event
        assert mvp_notify.verify_signature("team-key", request["headers"], request["body"], 60)
        assert wait_for(lambda: done_count(folder) == 1)
    finally:
        sender.stop()
    assert outbox.entries() == [] and outbox.put(event, [dict(hooks[0], source="config", index=0)]) == []


def test_503_twice_then_200_is_delivered_once_after_three_tries(tmp_path, receivers):
    receiver = receivers(lambda n, h: 503 if n < 2 else 200)
    folder = str(tmp_path / "outbox")
    sender = make_sender(folder)
    try:
        mvp_notify.Outbox(folder).put({"event_id": "e1", "at_s": time.time()}, endpoints(receiver.url))
        sender.wake()
        assert wait_for(lambda: done_count(folder) == 1)
    finally:
        sender.stop()
    [name] = os.listdir(os.path.join(folder, "done"))
    entry = json.load(open(os.path.join(folder, "done", name)))
    assert entry["state"] == "delivered" and entry["tries"] == 3 and len(receiver.requests) == 3


def test_404_is_refused_after_one_try(tmp_path, receivers):
    receiver = receivers(lambda n, h: 404)
    folder = str(tmp_path / "outbox")
    sender = make_sender(folder)
    try:
        mvp_notify.Outbox(folder).put({"event_id": "e1", "at_s": time.time()}, endpoints(receiver.url))
        sender.wake()
        assert wait_for(lambda: [e for _n, e in mvp_notify.Outbox(folder).entries() if e["state"] == "refused"])
        time.sleep(0.3)  # longer than the backoffs: a refused one is not tried again
    finally:
        sender.stop()
    [(_name, entry)] = mvp_notify.Outbox(folder).entries()
    assert entry["tries"] == 1 and "404" in entry["last_error"] and len(receiver.requests) == 1
    summary = mvp_notify.outbox_summary(folder)
    assert summary["refused"] == 1 and summary["endpoints"][receiver.url]["last_error"] == entry["last_error"]


def test_429_retry_after_is_honoured(tmp_path, receivers):
    def answer(n, handler):
        handler.retry_after = "1"
        return 429 if n == 0 else 200
    receiver = receivers(answer)
    folder = str(tmp_path / "outbox")
    sender = make_sender(folder, max_backoff_s=5)
    try:
        mvp_notify.Outbox(folder).put({"event_id": "e1", "at_s": time.time()}, endpoints(receiver.url))
        sender.wake()
        assert wait_for(lambda: len(receiver.requests) == 2, 5)
    finally:
        sender.stop()
    assert receiver.requests[1]["at"] - receiver.requests[0]["at"] >= 0.95  # not the 0.05 s backoff


def test_a_hanging_receiver_does_not_delay_another_endpoint(tmp_path, receivers):
    release = threading.Event()
    hanging = receivers(lambda n, h: release.wait(10) and 200)
    quick = receivers()
    folder = str(tmp_path / "outbox")
    sender = make_sender(folder, timeout_s=10.0)
    try:
        outbox = mvp_notify.Outbox(folder)
        for i in range(5):
            outbox.put({"event_id": "slow%d" % i, "at_s": time.time()}, endpoints(hanging.url))
        sender.wake()
        assert wait_for(lambda: len(hanging.requests) >= 1, 5)
        started = time.time()
        outbox.put({"event_id": "quick", "at_s": time.time()}, endpoints(quick.url))
        sender.wake()
        assert wait_for(lambda: len(quick.requests) == 1, 5)
        assert time.time() - started < 1.0
    finally:
        release.set()
        sender.stop()


def test_a_thousand_events_with_a_flaky_receiver_none_lost_duplicates_share_their_id(tmp_path, receivers):
    rng = random.Random(64)

    def answer(n, handler):
        pick = rng.random()
        if pick < 0.15:
            return 500
        if pick < 0.25:
            return None  # the connection closed without an answer (after the receiver read the event)
        if pick < 0.30:
            time.sleep(0.1)  # slow, within the timeout
        return 200
    receiver = receivers(answer)
    folder = str(tmp_path / "outbox")
    sender = make_sender(folder, first_backoff_s=0.01, max_backoff_s=0.05, workers=8, per_endpoint=8)
    ids = ["event-%04d" % i for i in range(1000)]
    try:
        outbox = mvp_notify.Outbox(folder)
        for eid in ids:
            outbox.put({"event_id": eid, "at_s": time.time()}, endpoints(receiver.url))
        sender.wake()
        assert wait_for(lambda: done_count(folder) == len(ids), 120)
    finally:
        sender.stop()
    bodies = receiver.bodies()
    received = {b["event_id"] for b in bodies}
    assert received == set(ids)  # none lost
    assert len(bodies) > len(ids)  # the closed connections made some duplicates ...
    assert all(b == {"event_id": b["event_id"], "at_s": b["at_s"]} for b in bodies)  # ... each the same event
    assert mvp_notify.Outbox(folder).entries() == []


def test_a_restarted_sender_delivers_what_was_pending(tmp_path, receivers):
    receiver = receivers()
    folder = str(tmp_path / "outbox")
    outbox = mvp_notify.Outbox(folder)
    outbox.put({"event_id": "before-the-kill", "at_s": time.time()}, endpoints(receiver.url))
    assert receiver.requests == []  # written, never sent (the controller died here)
    sender = make_sender(folder)  # a new controller over the same outbox
    try:
        assert wait_for(lambda: len(receiver.requests) == 1, 5)
    finally:
        sender.stop()
    assert receiver.bodies()[0]["event_id"] == "before-the-kill"


def test_a_delivery_past_retry_for_s_expires(tmp_path):
    folder = str(tmp_path / "outbox")
    outbox = mvp_notify.Outbox(folder)
    outbox.put({"event_id": "old", "at_s": time.time() - 100}, endpoints("http://127.0.0.1:9/hook"))
    sender = mvp_notify.Sender(outbox, retry_for_s=50, post_fn=lambda *a: (None, "ConnectionRefusedError", None))
    [(_name, entry)] = outbox.entries()
    assert sender.deliver(entry) == "expired"
    assert mvp_notify.outbox_summary(folder)["expired"] == 1


def test_backoff_doubles_from_the_first_up_to_the_max(tmp_path):
    outbox = mvp_notify.Outbox(str(tmp_path / "outbox"))
    outbox.put({"event_id": "b", "at_s": 1000.0}, endpoints("http://127.0.0.1:9/hook"))
    now = [1000.0]
    sender = mvp_notify.Sender(outbox, first_backoff_s=5, max_backoff_s=3600, clock=lambda: now[0],
                               post_fn=lambda *a: (503, "HTTP 503", None))
    [(_name, entry)] = outbox.entries()
    waits = []
    for _ in range(12):
        sender.deliver(entry)
        waits.append(entry["next_try_at"] - now[0])
        now[0] = entry["next_try_at"]
    assert waits == [min(3600.0, 5.0 * 2 ** n) for n in range(12)]


def test_the_fault_point_kills_the_process_after_the_write(tmp_path):
    import subprocess
    import sys
    fault = tmp_path / "kill"
    fault.write_text("")
    folder = tmp_path / "outbox"
    code = ("import mvp_notify, sys; o = mvp_notify.Outbox(%r, fault_file=%r); "
            "o.put({'event_id': 'e', 'at_s': 1.0}, [{'url': 'http://h/', 'source': 'request', 'index': 0}]); "
            "print('survived')" % (str(folder), str(fault)))
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)), check=False)
    assert ran.returncode == -9 and "survived" not in ran.stdout
    assert not fault.exists() and len(os.listdir(folder)) == 1


def test_a_try_whose_record_cannot_be_written_is_not_repeated_at_once(tmp_path, receivers):
    receiver = receivers()
    folder = str(tmp_path / "outbox")
    outbox = mvp_notify.Outbox(folder)
    outbox.put({"event_id": "e", "at_s": time.time()}, endpoints(receiver.url))

    def broken(entry):
        raise OSError("the shared storage is gone")
    outbox.save = broken
    sender = mvp_notify.Sender(outbox, first_backoff_s=0.5, max_backoff_s=1, timeout_s=2).start()
    try:
        time.sleep(0.8)
    finally:
        sender.stop()
    assert 1 <= len(receiver.requests) <= 2  # one try, maybe its retry after the first pause; no tight loop


def test_a_loopback_receiver_is_reached_past_the_environments_proxy(receivers, monkeypatch):
    receiver = receivers()
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("no_proxy", raising=False)
    assert mvp_notify.post(receiver.url, b"{}", {}, 2.0)[0] == 200


def test_a_redirect_is_a_refusal_not_followed(receivers):
    receiver = receivers(lambda n, h: 302)
    status, error, _retry = mvp_notify.post(receiver.url, b"{}", {}, 2.0)
    assert status == 302 and not mvp_notify.retryable(status) and "302" in error and len(receiver.requests) == 1
