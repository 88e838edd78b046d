"""mvp_gate.py (job tools): a job with a cluster lock runs only after every earlier job holding the same
lock has ended. The queue is read from Ray's job list (``/api/jobs/`` rows); no cluster is needed here.
"""
import shlex

import pytest

import mvp_gate

TOOLS = "/private/common/code/mvp_tools"


def entrypoint(lock=None):
    """An entrypoint as mvp_spec builds it, with the gate in front when ``lock`` is given."""
    gate = (["python", "-u", TOOLS + "/mvp_gate.py", "--lock", lock, "--log", "/x/logs/driver.log", "--"]
            if lock else [])
    entry = ["python", "-u", TOOLS + "/mvp_entry.py", "--log", "/x/logs/driver.log",
             "--", "python", "-m", "verl.trainer.main_ppo"]
    return " ".join(shlex.quote(w) for w in gate + entry)


def job(submission_id, status, start_s, lock="transfer_queue", **more):
    return dict({"submission_id": submission_id, "status": status, "start_time": int(start_s * 1000),
                 "entrypoint": entrypoint(lock), "type": "SUBMISSION"}, **more)


def test_uses_lock_reads_the_gates_own_arguments_only():
    assert mvp_gate.uses_lock(entrypoint("transfer_queue"), "transfer_queue")
    assert not mvp_gate.uses_lock(entrypoint("other"), "transfer_queue")
    assert not mvp_gate.uses_lock(entrypoint(None), "transfer_queue")
    # "--lock transfer_queue" after the gate's "--" belongs to the program, not to the gate.
    assert not mvp_gate.uses_lock("python mvp_gate.py --lock x -- prog --lock transfer_queue", "transfer_queue")
    assert not mvp_gate.uses_lock("python 'unbalanced", "transfer_queue")


def test_the_oldest_active_holder_runs_and_later_ones_wait_in_submission_order():
    jobs = [job("c", "PENDING", 30), job("a", "RUNNING", 10), job("b", "RUNNING", 20),
            job("old", "SUCCEEDED", 1), job("stopped", "STOPPED", 2), job("sft", "RUNNING", 5, lock=None),
            job("other-lock", "RUNNING", 3, lock="other")]
    ahead = {me: [j["submission_id"] for j in mvp_gate.jobs_ahead(jobs, me, "transfer_queue")] for me in "abc"}
    assert ahead == {"a": [], "b": ["a"], "c": ["a", "b"]}


def test_same_submission_time_orders_by_id_and_drivers_without_a_submission_do_not_count():
    jobs = [job("y", "RUNNING", 10), job("x", "RUNNING", 10),
            {"submission_id": None, "status": "RUNNING", "type": "DRIVER", "entrypoint": entrypoint("transfer_queue")}]
    assert [j["submission_id"] for j in mvp_gate.jobs_ahead(jobs, "y", "transfer_queue")] == ["x"]
    assert mvp_gate.jobs_ahead(jobs, "x", "transfer_queue") == []
    # A job not listed yet waits for every active holder.
    assert len(mvp_gate.jobs_ahead(jobs, "z", "transfer_queue")) == 2


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_wait_turn_says_whom_it_waits_for_once_per_change_and_goes_when_they_ended():
    clock, lines = Clock(), []
    # a runs until t=25, then b until t=45; c waits for both.
    def read():
        a = "RUNNING" if clock.now < 25 else "SUCCEEDED"
        b = "RUNNING" if clock.now < 45 else "FAILED"
        return [job("a", a, 1), job("b", b, 2), job("c", "RUNNING", 3)]

    waited = mvp_gate.wait_turn("c", "transfer_queue", read, lines.append, poll=10, clock=clock.time,
                                sleep=clock.sleep)
    assert waited == 50  # the first read at or after t=45, polling every 10 s
    assert [line.split(":")[0] for line in lines] == ["MVP_GATE_WAIT=lock transfer_queue"] * 2 + [
        "MVP_GATE_GO=lock transfer_queue after 50 s\n"]
    assert "starts after a (RUNNING" in lines[0] and ", b (RUNNING" in lines[0]
    assert "starts after b (RUNNING" in lines[1] and "TransferQueueController" in lines[1]


def test_wait_turn_retries_an_unreadable_jobs_api_then_gives_up_past_its_timeout():
    clock, lines = Clock(), []

    def broken():
        raise OSError("connection refused")

    with pytest.raises(RuntimeError, match="cannot read the Jobs API for 3[0-9] s: connection refused"):
        mvp_gate.wait_turn("c", "transfer_queue", broken, lines.append, poll=10, timeout=25,
                           clock=clock.time, sleep=clock.sleep)
    assert lines == []
