"""mvp_service with real processes: a service started detached in its own session, found by its pid file,
started again by keep() once it ended (what the node container's command does after a restart), and
stopped for good by stop() (keep() then leaves it down)."""
import json
import os

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_service import keep, paths, running_pid, start, stop


def _service(tmp_path, name="svc", argv=("sleep", "60")):
    where = paths(str(tmp_path), name)
    spec = {"argv": list(argv), "env": {"MVP_TEST": "1"}, "log": str(tmp_path / "logs" / (name + ".log"))}
    with open(where["spec"], "w", encoding="utf-8") as handle:
        json.dump(spec, handle)
    return where, spec


def test_a_started_service_runs_in_its_own_session_and_is_found_by_its_pid_file(tmp_path):
    where, spec = _service(tmp_path)
    pid = start(spec, where["pid"])
    try:
        assert running_pid(where["pid"]) == pid
        assert os.getsid(pid) == pid != os.getsid(0)
        assert os.path.isfile(spec["log"])
    finally:
        assert stop(str(tmp_path), "svc") is True
    assert running_pid(where["pid"]) is None and not os.path.exists(where["spec"])


def test_keep_starts_again_a_service_whose_process_ended_and_leaves_a_running_one(tmp_path):
    where, spec = _service(tmp_path)
    assert keep(str(tmp_path)) == ["svc"]
    first = running_pid(where["pid"])
    assert keep(str(tmp_path)) == [] and running_pid(where["pid"]) == first
    os.kill(first, 9)
    os.waitpid(first, 0)  # this test is its parent: collect it, as the node container's command does
    said = []
    assert keep(str(tmp_path), say=said.append) == ["svc"]
    assert running_pid(where["pid"]) not in (None, first) and said[0].startswith("service svc started")
    stop(str(tmp_path), "svc")
    assert keep(str(tmp_path)) == [] and running_pid(where["pid"]) is None


def test_a_service_that_cannot_start_is_said_and_others_still_start(tmp_path):
    _service(tmp_path, "bad", argv=("/no/such/program",))
    _service(tmp_path, "good")
    said = []
    assert keep(str(tmp_path), say=said.append) == ["good"]
    assert any("bad could not start" in line for line in said)
    stop(str(tmp_path), "good")


def test_stopping_a_service_that_does_not_run_changes_nothing(tmp_path):
    assert stop(str(tmp_path), "svc") is False


def test_a_pid_the_kernel_gave_to_another_program_is_not_the_service(tmp_path):
    """After a container restart the recorded pid may be another program's: its start time differs."""
    where, _spec = _service(tmp_path)
    with open("/proc/self/stat", encoding="utf-8") as handle:
        mine = handle.read().rpartition(")")[2].split()[19]
    with open(where["pid"], "w", encoding="ascii") as handle:
        handle.write("%d %d\n" % (os.getpid(), int(mine) + 1))
    assert running_pid(where["pid"]) is None
    with open(where["pid"], "w", encoding="ascii") as handle:
        handle.write("%d %s\n" % (os.getpid(), mine))
    assert running_pid(where["pid"]) == os.getpid()
