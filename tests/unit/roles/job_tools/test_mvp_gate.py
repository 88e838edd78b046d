"""mvp_gate.py (job tools): a queued job's program starts only when the plan admits it and Ray reports its
shape free; until then it says why, once per change, in its log and in logs/queue.json. The queue is
read from Ray's job list (``/api/jobs/`` rows) and the workers' resources; no cluster is needed here."""
import json
import shlex

import pytest

import mvp_gate
import mvp_queue

TOOLS = "/private/common/code/mvp_tools"


def entrypoint(pools, lock=None):
    """An entrypoint as mvp_spec builds it: the gate with its pools (and lock), then mvp_entry.py."""
    gate = ["python", "-u", TOOLS + "/mvp_gate.py"] + [w for p in pools for w in ("--pool", p)]
    gate += (["--lock", lock] if lock else []) + ["--log", "/x/logs/driver.log", "--"]
    entry = ["python", "-u", TOOLS + "/mvp_entry.py", "--log", "/x/logs/driver.log",
             "--", "python", "-m", "verl.trainer.main_ppo"]
    return " ".join(shlex.quote(w) for w in gate + entry)


def job(submission_id, status, start_s, pools=("global_pool=1x1:3",), lock=None):
    return {"submission_id": submission_id, "status": status, "start_time": int(start_s * 1000),
            "entrypoint": entrypoint(pools, lock), "type": "SUBMISSION"}


class Clock(object):
    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


WORKERS = {"10.0.0.1": {"GPU": 1.0, "CPU": 16.0}, "10.0.0.2": {"GPU": 1.0, "CPU": 16.0}}


def gate_for(me, pools, clock, lines, tmp_path, lock=None):
    return mvp_gate.Gate(me, [mvp_queue.parse_pool(p) for p in pools], [lock] if lock else [], lines.append,
                         str(tmp_path / "queue.json"), clock=clock.time)


def test_a_job_waits_behind_the_holder_of_its_gpus_says_so_once_per_change_and_goes_when_they_are_free(tmp_path):
    clock, lines = Clock(), []
    # sft holds both workers' GPUs until t=25, then Ray frees them at t=29 (its placement groups go).
    def read_jobs():
        sft = "RUNNING" if clock.now < 25 else "SUCCEEDED"
        return [job("sft", sft, 1, ["global_pool=2x1:10"]), job("grpo", "RUNNING", 2, lock="transfer_queue")]

    def read_workers():
        gpus = 0.0 if clock.now < 29 else 1.0
        return WORKERS, {ip: dict(res, GPU=gpus) for ip, res in WORKERS.items()}

    gate = gate_for("grpo", ["global_pool=1x1:3"], clock, lines, tmp_path, lock="transfer_queue")
    waited = mvp_gate.wait_turn(gate, read_jobs, read_workers, poll=2, sleep=clock.sleep)
    assert waited == 30  # the first look at or after t=29, every 2 s
    assert [line.split("=")[0] for line in lines] == ["MVP_GATE_WAIT", "MVP_GATE_WAIT", "MVP_GATE_GO"]
    assert "position 2 of 2, shape 1 node x 1 GPU (3 CPUs each)" in lines[0]
    assert "held by sft (2 nodes x 1 GPU (10 CPUs each))" in lines[0]
    # sft ended in Ray's job table, but its resources are not released yet: said, with Ray's numbers.
    assert "position 1 of 1" in lines[1] and "held outside the queue" in lines[1]
    assert lines[2].startswith("MVP_GATE_GO=shape 1 node x 1 GPU (3 CPUs each) admitted after 30 s; locks transfer_queue")
    state = json.loads((tmp_path / "queue.json").read_text())
    assert (state["state"], state["waited_s"], state["waits_for"]) == ("admitted", 30, "")


def test_the_lock_reason_is_said_with_the_lock(tmp_path):
    clock, lines = Clock(), []
    jobs = [job("a", "RUNNING", 1, lock="transfer_queue"), job("b", "RUNNING", 2, lock="transfer_queue")]
    gate = gate_for("b", ["global_pool=1x1:3"], clock, lines, tmp_path, lock="transfer_queue")
    assert gate.look(jobs, WORKERS, WORKERS) is False
    assert "waits for lock transfer_queue, held by a" in lines[0] and "TransferQueueController" in lines[0]
    assert gate.look(jobs, WORKERS, WORKERS) is False and len(lines) == 1  # nothing changed: nothing said


def test_max_wait_and_unfit_wait_bound_the_wait(tmp_path):
    clock, lines = Clock(), []
    holder = [job("sft", "RUNNING", 1, ["global_pool=2x1:10"]), job("me", "RUNNING", 2)]
    gate = gate_for("me", ["global_pool=1x1:3"], clock, lines, tmp_path)
    with pytest.raises(TimeoutError, match=r"waited 1[0-9] s in the queue \(max wait 10 s\)"):
        mvp_gate.wait_turn(gate, lambda: holder, lambda: (WORKERS, WORKERS), poll=2, max_wait=10, sleep=clock.sleep)
    # Two nodes asked, one ALIVE worker left: the shape cannot fit at all; unfit_wait bounds it, max_wait is off.
    clock, lines = Clock(), []
    one = {"10.0.0.1": WORKERS["10.0.0.1"]}
    gate = gate_for("me", ["global_pool=2x1:10"], clock, lines, tmp_path)
    with pytest.raises(TimeoutError, match="the ALIVE workers could not hold the shape"):
        mvp_gate.wait_turn(gate, lambda: [job("me", "RUNNING", 2, ["global_pool=2x1:10"])], lambda: (one, one),
                           poll=2, unfit_wait=20, sleep=clock.sleep)
    assert "workers that can hold 2 nodes x 1 GPU" in lines[0]
    assert json.loads((tmp_path / "queue.json").read_text())["unfit"] is True


def test_an_unreadable_api_is_retried_then_given_up_past_its_timeout(tmp_path):
    clock, lines = Clock(), []

    def broken():
        raise OSError("connection refused")

    gate = gate_for("c", ["global_pool=1x1:3"], clock, lines, tmp_path)
    with pytest.raises(RuntimeError, match="cannot read the Jobs API or the cluster status for 2[0-9] s: connection refused"):
        mvp_gate.wait_turn(gate, broken, lambda: (WORKERS, WORKERS), poll=2, timeout=25, sleep=clock.sleep)
    assert lines == []


def test_a_job_not_listed_yet_waits_for_the_jobs_already_there(tmp_path):
    clock, lines = Clock(), []
    gate = gate_for("new", ["global_pool=1x1:3"], clock, lines, tmp_path)
    assert gate.look([job("a", "RUNNING", 1)], WORKERS, WORKERS) is False
    assert "position 2 of 2" in lines[0] and "its job to appear in Ray's job list" in lines[0]


def test_a_high_priority_job_goes_before_earlier_waiting_ones_but_after_the_running_one(tmp_path):
    """Real queue.json files in real job folders (job metadata job_dir), read by the gate's default reader."""
    clock, lines = Clock(), []
    jobs_root = tmp_path / "jobs"

    def listed(submission_id, start_s, priority=None, state=None):
        job_dir = jobs_root / submission_id
        (job_dir / "logs").mkdir(parents=True)
        if state:
            (job_dir / "logs" / "queue.json").write_text(json.dumps({"state": state}))
        row = job(submission_id, "RUNNING", start_s)
        if priority is not None:
            row["entrypoint"] = row["entrypoint"].replace(" --log ", " --priority %d --log " % priority, 1)
        return dict(row, metadata={"job_dir": str(job_dir)})

    # old-low started its trainer long ago (its record says admitted) and holds one worker; normal-a waits for
    # its turn since t=2; urgent (priority 100) came at t=3. One worker is free.
    jobs = [listed("old-low", 1, priority=-100, state="admitted"), listed("normal-a", 2, state="waiting"),
            listed("urgent", 3, priority=100)]
    free = {"10.0.0.1": {"GPU": 0.0, "CPU": 13.0}, "10.0.0.2": {"GPU": 1.0, "CPU": 16.0}}
    urgent = mvp_gate.Gate("urgent", [mvp_queue.parse_pool("global_pool=1x1:3")], [], lines.append,
                           str(jobs_root / "urgent" / "logs" / "queue.json"), clock=clock.time, priority=100)
    assert urgent.look(jobs, WORKERS, free) is True
    normal = mvp_gate.Gate("normal-a", [mvp_queue.parse_pool("global_pool=1x1:3")], [], lines.append,
                           str(jobs_root / "normal-a" / "logs" / "queue.json"), clock=clock.time)
    assert normal.look(jobs, WORKERS, free) is False
    assert "position 3 of 3" in lines[-1] and "held by old-low" in lines[-1] and "urgent" in lines[-1]
    assert json.loads((jobs_root / "normal-a" / "logs" / "queue.json").read_text())["priority"] == 0
    # Without old-low's record (its gate never wrote one), it would sort by priority as a waiting job: last.
    (jobs_root / "old-low" / "logs" / "queue.json").unlink()
    plan = mvp_queue.plan(jobs, WORKERS, mvp_queue.started_ids(mvp_gate.queue_states(jobs)))
    assert [e["submission_id"] for e in plan] == ["urgent", "normal-a", "old-low"]
