"""Unit tests of ray_notify_info: the outbox's undelivered deliveries counted per state, the newest error per endpoint,
URLs shown without their user info and query."""
import json
import os

from ray_notify_info import main


def entry(folder, name, url, state, error, at, sub=""):
    path = os.path.join(folder, sub, name + ".json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"id": name, "event": {"event_id": name}, "endpoint": {"url": url}, "state": state,
                   "last_error": error, "last_try_at": at}, handle)


def test_undelivered_events_and_why(tmp_path, run_module):
    folder = str(tmp_path / "outbox")
    secret_url = "https://user:pw@chat.example/hooks/x?token=abc"
    entry(folder, "a", secret_url, "pending", "HTTP 503 Service Unavailable", 10.0)
    entry(folder, "b", secret_url, "pending", "no answer within 10 s", 20.0)
    entry(folder, "c", secret_url, "expired", "ConnectionRefusedError", 5.0)
    entry(folder, "d", "http://127.0.0.1:9/hook", "refused", "HTTP 404 Not Found", 1.0)
    entry(folder, "e", "http://127.0.0.1:9/hook", "delivered", None, 1.0, sub="done")
    result = run_module(main, {"outbox": folder})
    assert (result["pending"], result["expired"], result["refused"], result["delivered"]) == (2, 1, 1, 1)
    chat = result["endpoints"]["https://chat.example/hooks/x"]
    assert chat["undelivered"] == 3 and chat["last_error"] == "no answer within 10 s"  # the newest try's
    assert "pw" not in json.dumps(result) and "abc" not in json.dumps(result)
    assert result["lines"] == [
        "http://127.0.0.1:9/hook: 1 undelivered (refused 1); last error: HTTP 404 Not Found",
        "https://chat.example/hooks/x: 3 undelivered (expired 1, pending 2); last error: no answer within 10 s"]


def test_a_missing_outbox_has_nothing_undelivered(tmp_path, run_module):
    result = run_module(main, {"outbox": str(tmp_path / "none")}, check_mode=True)
    assert result["lines"] == [] and result["pending"] == 0 and not result["changed"]
