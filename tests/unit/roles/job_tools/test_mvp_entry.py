"""The progress watchdog of mvp_entry.py (the job tools the job_tools role installs): step following,
its limits, and a real hang. The bound it applies is mvp_verdict.hang_bound's
(plugins/module_utils/lifecycle/test_mvp_verdict.py).

The last test runs mvp_entry.py for real on this machine with a stand-in trainer (a
Python program writing verl's file logger lines, then stopping): the watchdog must stop
it within the bound plus its polling, write logs/watchdog.json and a stack file of the
stand-in, exit 124 and leave the verdict `hang` in logs/verdict.json.
"""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import mvp_entry

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def install_tools(dest):
    """The job tools folder as verl_snapshot installs it: job_tools/ plus the verdict rules."""
    dest.mkdir()
    for src in ("roles/job_tools/files/mvp_entry.py", "plugins/module_utils/lifecycle/mvp_verdict.py",
                "plugins/module_utils/storage/mvp_job.py"):
        with open(os.path.join(ROOT, src)) as handle:
            (dest / os.path.basename(src)).write_text(handle.read())
    return str(dest)


def test_progress_follows_appended_lines_and_a_half_written_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    progress = mvp_entry.Progress(str(path), start=0.0)
    assert progress.poll(1.0) == []  # no file yet
    path.write_text('{"step": 1, "data": {}}\n{"step": 2, "da')
    assert progress.poll(2.0) == [1]
    with open(path, "a") as handle:
        handle.write('ta": {}}\n{"step": 3, "data": {}}\n{"step": 4, "data": {}}\n')
    assert progress.poll(6.0) == [2, 3, 4]
    # step 1 holds the start-up; steps 2-4 share the 4 s since step 1 arrived
    assert progress.durations == [4.0 / 3] * 3
    assert progress.last_arrival == 6.0


def test_progress_reports_a_hang_naming_the_last_step_and_the_bound(tmp_path):
    path = tmp_path / "metrics.jsonl"
    progress = mvp_entry.Progress(str(path), start=0.0)
    for now, step in ((30.0, 1), (32.0, 2), (34.0, 3)):
        with open(path, "a") as handle:
            handle.write('{"step": %d, "data": {}}\n' % step)
        progress.poll(now)
    floor, factor = 60, 5
    bound = max(floor, factor * 2.0)
    assert progress.hang(34.0 + bound - 1, first_step_s=300, floor_s=floor, factor=factor) is None
    hang = progress.hang(34.0 + bound + 1, first_step_s=300, floor_s=floor, factor=factor)
    assert hang["hang"] and hang["last_step"] == 3 and hang["bound_s"] == bound
    assert "after step 3" in hang["summary"]


def test_watchdog_limits_parse_and_off():
    assert mvp_entry.parse_limits("300,60,5") == (300.0, 60.0, 5.0)
    assert mvp_entry.parse_limits("0") is None and mvp_entry.parse_limits("") is None
    with pytest.raises(ValueError):
        mvp_entry.parse_limits("300,60")


STAND_IN = textwrap.dedent("""
    # Stand-in trainer: two verl file-logger lines a second apart, then it stops making progress.
    import json, os, time
    path = os.environ["VERL_FILE_LOGGER_PATH"]
    print("Total training steps: 10", flush=True)
    for step in (1, 2):
        with open(path, "a") as handle:
            handle.write(json.dumps({"step": step, "data": {"train/loss": 1.0}}) + "\\n")
        time.sleep(1)
    time.sleep(600)
""")


def test_a_trainer_that_stops_making_progress_is_stopped_with_stacks(tmp_path):
    job = tmp_path / "job"
    (job / "config").mkdir(parents=True)
    (job / "config" / "job_spec.json").write_text(json.dumps(
        {"hydra_config": "sft_trainer_engine", "metrics_file": str(job / "logs" / "metrics.jsonl")}))
    (tmp_path / "mvp_marker.py").write_text("MARKER = 'stand-in'\n")
    (tmp_path / "verl").mkdir()
    (tmp_path / "verl" / "__init__.py").write_text("")
    trainer = tmp_path / "trainer.py"
    trainer.write_text(STAND_IN)
    tools = install_tools(tmp_path / "tools")
    env = dict(os.environ, PYTHONPATH="%s:%s" % (tmp_path, tools),
               VERL_FILE_LOGGER_PATH=str(job / "logs" / "metrics.jsonl"), MVP_SUBMISSION_ID="stand-in")
    first, floor, factor = 20, 3, 2
    started = time.time()
    proc = subprocess.run(
        [sys.executable, os.path.join(tools, "mvp_entry.py"), "--log", str(job / "logs" / "driver.log"),
         "--metrics", str(job / "logs" / "metrics.jsonl"), "--watchdog", "%d,%d,%d" % (first, floor, factor),
         "--dashboard-port", "1", "--", sys.executable, "-u", str(trainer)],
        env=env, capture_output=True, text=True, timeout=300)
    took = time.time() - started
    assert proc.returncode == mvp_entry.HANG_EXIT, proc.stdout + proc.stderr
    record = json.loads((job / "logs" / "watchdog.json").read_text())
    assert record["hang"] and record["last_step"] == 2
    # step 2 came about 1 s after step 1: the bound is the floor unless both came in one look
    assert record["bound_s"] >= floor and record["waited_s"] > record["bound_s"]
    assert took < 2 + record["bound_s"] + 15 + 3 * mvp_entry.POLL_S + 60  # steps, bound, stop, polls, py-spy
    stacks = [job / f for f in record["stacks"]]
    assert stacks and all(path.exists() for path in stacks)
    verdict = json.loads((job / "logs" / "verdict.json").read_text())
    assert verdict["cause"] == "hang" and verdict["verdict"] == "failed"
    assert verdict["steps"]["logged"] == 2 and verdict["steps"]["planned"] == 10
    assert "MVP_WATCHDOG_HANG=" in proc.stdout and "MVP_VERDICT=FAILED [hang]" in proc.stdout
    # the stamps: the entrypoint's start, steps 1 and 2 in order, the trainer's exit after the hang was detected
    stamped = [json.loads(line) for line in (job / "logs" / "steps.jsonl").read_text().splitlines()]
    assert [s.get("event", s.get("step")) for s in stamped] == ["start", 1, 2, "trainer_exit"]
    assert started <= stamped[0]["at"] <= stamped[1]["at"] <= stamped[2]["at"] <= record["detected_at"]
    assert stamped[3]["at"] >= record["detected_at"] and stamped[3]["code"] != 0


class _Clock(object):
    """A clock the test sets (seconds since the epoch)."""

    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def _stamps(path):
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_stamper_stamps_each_step_once_when_it_first_appears(tmp_path):
    metrics, steps = tmp_path / "metrics.jsonl", tmp_path / "steps.jsonl"
    clock = _Clock(100.0)
    stamper = mvp_entry.Stamper(str(metrics), str(steps), clock)
    stamper.event("start")
    assert stamper.poll() == []  # no metrics file yet
    metrics.write_text('{"step": 1, "data": {}}\n{"step": 2, "da')
    clock.now = 103.5
    assert stamper.poll() == [1]  # the half-written line waits for its end
    with open(metrics, "a") as handle:  # the end of step 2's line, then SFT's validation line of step 2 again
        handle.write('ta": {}}\n{"step": 2, "data": {"val/loss": 1.0}}\n{"step": 3, "data": {}}\n')
    clock.now = 107.25
    assert stamper.poll() == [2, 3]
    clock.now = 110.0
    assert stamper.poll() == []  # nothing new: one stat, no read
    stamper.event("trainer_exit", code=1)
    assert _stamps(steps) == [{"event": "start", "at": 100.0}, {"step": 1, "at": 103.5}, {"step": 2, "at": 107.25},
                              {"step": 3, "at": 107.25}, {"event": "trainer_exit", "at": 110.0, "code": 1}]


def test_stamper_reads_only_the_new_bytes(tmp_path, monkeypatch):
    metrics, steps = tmp_path / "metrics.jsonl", tmp_path / "steps.jsonl"
    first = '{"step": 1, "data": {"x": 1}}\n'
    metrics.write_text(first)
    stamper = mvp_entry.Stamper(str(metrics), str(steps), _Clock(1.0))
    stamper.poll()
    with open(metrics, "a") as handle:
        handle.write('{"step": 2, "data": {}}\n')
    assert stamper.offset == len(first)
    assert stamper.poll() == [2]
    assert stamper.offset == os.path.getsize(metrics)


def test_stamper_thread_stamps_within_its_poll(tmp_path):
    import threading
    metrics, steps = tmp_path / "metrics.jsonl", tmp_path / "steps.jsonl"
    stamper = mvp_entry.Stamper(str(metrics), str(steps))
    stop = threading.Event()
    thread = threading.Thread(target=mvp_entry.stamp_loop, args=(stamper, stop), daemon=True)
    thread.start()
    written = time.time()
    metrics.write_text('{"step": 1, "data": {}}\n')
    time.sleep(4 * mvp_entry.STAMP_POLL_S)
    stop.set()
    thread.join(timeout=5)
    stamped = _stamps(steps)
    assert [s["step"] for s in stamped] == [1]
    assert written - 0.01 <= stamped[0]["at"] <= written + mvp_entry.STAMP_POLL_S + 0.5
