"""Unit tests of module_utils mvp_debug_bundle (the snapshot runner of ray_debug_bundle and ray_job) with real processes."""
import sys

from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import max_seconds, render, run_all


def test_commands_run_concurrently_and_keep_their_order(tmp_path):
    # Each command announces itself, then waits for the other one: run one after
    # the other, the first would wait until it is killed.
    wait_for = ("import os, sys, time\n"
                "open(os.path.join(sys.argv[1], sys.argv[2]), 'w').close()\n"
                "while not os.path.exists(os.path.join(sys.argv[1], sys.argv[3])): time.sleep(0.05)\n"
                "print(sys.argv[2])\n")
    results = run_all([{"argv": [sys.executable, "-c", wait_for, str(tmp_path), "a", "b"]},
                       {"argv": [sys.executable, "-c", wait_for, str(tmp_path), "b", "a"]}], timeout=20)
    assert [r[0] for r in results] == [0, 0]
    assert [r[1].strip() for r in results] == ["a", "b"]


def test_failures_and_timeouts_are_recorded_not_raised():
    results = run_all([{"argv": ["false"]}, {"argv": ["/nonexistent/ray"]},
                       {"argv": [sys.executable, "-c", "import time; time.sleep(30)"]}], timeout=1)
    assert results[0][0] == 1
    assert results[1][0] is None and "could not start" in results[1][2]
    assert results[2][0] is None and "killed after 1s" in results[2][2]


def test_render_names_command_rc_and_stderr():
    text = render({"argv": ["ray", "job", "list"]}, 2, "out\n", "boom", "20261121T000000Z", "head")
    assert text.splitlines() == ["# ray job list", "# rc=2 at 20261121T000000Z on head", "out", "",
                                 "# stderr", "boom"]


def test_in_process_commands_capture_output_strip_colours_and_record_failures():
    import click

    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import run_in_process

    @click.group()
    def cli():
        """A stand-in for Ray's click CLI."""

    @cli.command()
    def status():
        click.echo("\x1b[37mNode status\x1b[39m")

    @cli.command()
    def broken():
        raise RuntimeError("GCS unreachable")

    @cli.command()
    def leave():
        raise SystemExit(3)

    assert run_in_process(cli, ["status"], timeout=10) == (0, "Node status\n", "")
    rc, out, err = run_in_process(cli, ["broken"], timeout=10)
    assert rc == 1 and "RuntimeError: GCS unreachable" in err
    assert run_in_process(cli, ["leave"], timeout=10)[0] == 3


def test_wait_for_file_returns_seconds_or_none(tmp_path):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import wait_for_file

    present = tmp_path / "placement.json"
    present.write_text("{}")
    assert wait_for_file(str(present), timeout=5) < 1
    assert wait_for_file(str(tmp_path / "never"), timeout=0.3, interval=0.05) is None


def test_detached_work_writes_its_record_after_the_caller_returned(tmp_path):
    """A real double fork: the caller returns before the work ends; the record holds the result; the work runs
    with DETACHED_NICENESS added to the caller's niceness (Linux caps it at 19)."""
    import json
    import os
    import time

    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import DETACHED_NICENESS, detached

    gate = tmp_path / "gate"
    record = tmp_path / "bundle.json"

    def work():
        while not gate.exists():
            time.sleep(0.02)
        return {"files": ["a.txt"], "pid": os.getpid(), "niceness": os.nice(0)}

    start = time.time()
    detached(work, str(record))
    assert not record.exists()  # the work waits for the gate: the caller did not wait for it
    gate.write_text("")
    while not record.exists() and time.time() - start < 10:
        time.sleep(0.02)
    result = json.loads(record.read_text())
    assert result["files"] == ["a.txt"] and result["pid"] != os.getpid()
    assert result["niceness"] == min(19, os.nice(0) + DETACHED_NICENESS)


def test_detached_work_that_raises_is_recorded(tmp_path):
    import json
    import time

    from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import detached

    record = tmp_path / "bundle.json"

    def work():
        raise RuntimeError("no ray here")

    detached(work, str(record))
    deadline = time.time() + 10
    while not record.exists() and time.time() < deadline:
        time.sleep(0.02)
    assert json.loads(record.read_text()) == {"failed": True, "msg": "RuntimeError: no ray here"}


def test_max_seconds_bounds_every_command_of_both_snapshots_and_the_wait():
    commands = [{"name": n, "argv": ["ray", n]} for n in ("status", "list")]
    alone = {"commands": commands, "timeout": 7, "then": None}
    assert max_seconds(alone) == len(commands) * 7
    chained = dict(alone, then={"stage": "placed", "after_file": "/x", "timeout": 40})
    assert max_seconds(chained) == 2 * len(commands) * 7 + 40
