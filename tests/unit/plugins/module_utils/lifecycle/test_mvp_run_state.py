"""A run's state and the job controller's heartbeat (plugins/module_utils/lifecycle/mvp_run_state.py), read by the job
controller on its host and by the plays through their own file reader."""
import json
import os

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_run_state

RUN = "sft-20261127-120000-abcdef"


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


class Recorded(mvp_run_state.Files):
    """A reader of a dict of paths (what a play reads on the head through modules), counting its reads."""

    def __init__(self, texts, dirs):
        self.texts, self.dirs, self.reads = texts, dirs, []

    def text(self, path):
        self.reads.append(path)
        return self.texts.get(path, "")

    def isdir(self, path):
        self.reads.append(path)
        return path in self.dirs


def test_the_attempts_are_chained_by_their_restart_links_and_a_decided_one_is_next(tmp_path):
    jobs = str(tmp_path / "jobs")
    first, second, third = RUN, RUN + "-r1", RUN + "-r2"
    link = {"next": second, "cause": "node_lost", "why": "restart 1 of 2"}
    write(mvp_run_state.attempt_file(jobs, first, "restart"), link)
    os.makedirs(os.path.join(jobs, second))
    state = mvp_run_state.run_state(jobs, RUN)
    assert (state["attempts"], state["current"], state["next"], state["ended"]) == ([first, second], second, None, None)
    assert state["restarts"] == {first: link}
    # Decided, its directory not made yet: the current attempt stays the one that ended.
    write(mvp_run_state.attempt_file(jobs, second, "restart"), {"next": third})
    state = mvp_run_state.run_state(jobs, RUN)
    assert (state["current"], state["next"]) == (second, third)
    # A link back to an attempt of the run (a broken file) ends the chain.
    write(mvp_run_state.attempt_file(jobs, second, "restart"), {"next": first})
    assert mvp_run_state.run_state(jobs, RUN)["next"] is None


def test_the_runs_end_is_read_under_its_name_then_under_the_one_older_versions_wrote(tmp_path):
    jobs = str(tmp_path / "jobs")
    old = {"state": "ended", "trained": True, "why": "old name", "attempts": [RUN]}
    write(os.path.join(jobs, RUN, "logs", "supervisor.json"), old)
    assert mvp_run_state.run_state(jobs, RUN)["ended"] == old
    new = dict(old, why="new name")
    write(mvp_run_state.attempt_file(jobs, RUN, "run_end"), new)
    assert mvp_run_state.run_state(jobs, RUN)["ended"] == new
    assert mvp_run_state.run_end_files(jobs, RUN)[0] == mvp_run_state.attempt_file(jobs, RUN, "run_end")


def test_another_hosts_files_are_read_through_the_callers_reader():
    jobs = "/private/jobs"
    link = {"next": RUN + "-r1"}
    files = Recorded({mvp_run_state.attempt_file(jobs, RUN, "restart"): json.dumps(link),
                      mvp_run_state.attempt_file(jobs, RUN + "-r1", "restart"): "{not json"}, {jobs + "/" + RUN + "-r1"})
    state = mvp_run_state.run_state(jobs, RUN, files)
    assert (state["attempts"], state["next"], state["ended"]) == ([RUN, RUN + "-r1"], None, None)
    # Each restart link once, the next attempt's folder once, the run's end under each of its names.
    assert len(files.reads) == len(set(files.reads)) == 2 + 1 + len(mvp_run_state.run_end_files(jobs, RUN))
    assert mvp_run_state.heartbeat_file("/private") == "/private/controller/heartbeat.json"


def test_the_heartbeat_says_whether_the_runs_are_supervised():
    now = 1_000_000.0
    poll = 10
    beat = json.dumps({"name": "ctl", "host": "h1", "pid": 7, "at": now - 5, "poll_s": poll, "runs": ["a"]})
    assert "followed by the job controller ctl on h1 (pid 7)" in mvp_run_state.controller_line(["a"], beat, now)
    assert mvp_run_state.controller_line(None, beat, now).startswith("a: followed")
    idle = json.dumps({"name": "ctl", "host": "h1", "pid": 7, "at": now - 2, "poll_s": 5, "runs": []})
    assert mvp_run_state.controller_line(None, idle, now) == (
        "the job controller ctl on h1 (pid 7) is alive (its last pass 2 s ago) and follows no run now")
    stale = mvp_run_state.controller_line(["a"], beat, now + 600)
    assert "NOT supervised now" in stale and "605 s ago" in stale
    # Alive up to three passes and the slack; a heal says it is busy for longer.
    bound = 3 * poll + 15
    assert mvp_run_state.heartbeat_state(beat, now - 5 + bound)["alive"] is True
    assert mvp_run_state.heartbeat_state(beat, now - 5 + bound + 1)["alive"] is False
    healing = json.dumps({"name": "ctl", "at": now - 500, "poll_s": poll, "busy_until": now + 100})
    assert mvp_run_state.heartbeat_state(healing, now)["alive"] is True
    assert "no job controller has run" in mvp_run_state.controller_line(["a"], "", now)
