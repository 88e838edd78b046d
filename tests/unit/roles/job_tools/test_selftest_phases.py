"""The selftest's played training run (MVP_SELFTEST_PHASES, roles/job_tools/files/selftest.py) on a fake clock:
the metrics lines, checkpoints and the ground-truth record the ledger's cluster test compares with."""
import json
import os

import pytest

import selftest


class Clock(object):
    """A clock that sleep() moves forward (seconds)."""

    def __init__(self, start=1000.0):
        self.now = start

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def played(tmp_path, phases):
    clock = Clock()
    code = selftest.play_phases(str(tmp_path), phases, clock=clock.time, sleep=clock.sleep)
    record = json.loads((tmp_path / "logs" / "phases.json").read_text())
    lines = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    return code, record, lines


def test_steps_saves_and_the_record_follow_the_phases_asked(tmp_path):
    phases = {"startup_s": 3, "steps": 6, "step_s": 2, "save_freq": 4, "save_s": 5}
    code, record, lines = played(tmp_path, phases)
    assert code == 0
    assert [line["step"] for line in lines] == list(range(1, 7))
    # step k starts after the start-up, the k-1 steps before it and the saves after steps <= k-1
    start = 1000.0
    for item in record["steps"]:
        k = item["step"]
        saves_before = (k - 1) // 4
        assert item["start"] == start + 3 + (k - 1) * 2 + saves_before * 5
        assert item["end"] - item["start"] == 2
    assert [s["step"] for s in record["saves"]] == [4]
    assert record["saves"][0]["end"] - record["saves"][0]["start"] == 5
    assert (tmp_path / "checkpoints" / "global_step_4").is_dir()
    assert (tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert record["ended_at"] == start + 3 + 6 * 2 + 5


def test_fail_after_ends_with_1_right_after_that_step(tmp_path):
    code, record, lines = played(tmp_path, {"startup_s": 1, "steps": 10, "step_s": 1, "save_freq": 3, "save_s": 2,
                                            "fail_after": 7})
    assert code == 1
    assert [line["step"] for line in lines] == list(range(1, 8))
    assert record["failed_at"] == record["steps"][-1]["end"]
    assert [s["step"] for s in record["saves"]] == [3, 6]
    assert "ended_at" not in record


@pytest.mark.parametrize("bad", [{"step_s": -1}, {"startup_s": "3"}, {"save_s": True}])
def test_a_phase_that_is_not_a_number_is_named(tmp_path, bad):
    with pytest.raises(ValueError, match=list(bad)[0]):
        selftest.play_phases(str(tmp_path), bad, clock=Clock().time, sleep=Clock().sleep)
    assert not os.path.exists(tmp_path / "logs" / "metrics.jsonl")
