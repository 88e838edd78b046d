"""The selftest's interconnect check (roles/job_tools/files/selftest.py) without a cluster: its
settings, and the paths where it says SKIP (fewer than 2 workers, turned off, no torch on a worker)
and still writes its record to the job directory and the cluster's latest file. Ray is a stand-in
that runs each actor method here, in this venv - which has no torch, like the prod node image."""
import argparse
import importlib.util
import json
import os

import pytest

import mvp_interconnect
import mvp_job
import selftest

MIB = 1 << 20


class FakeRay(object):
    """ray.remote(cls).options(...).remote() -> an actor whose methods' .remote() run at once."""

    def __init__(self):
        self.options_seen, self.killed = [], []

    def remote(self, cls):
        fake = self

        class Handle(object):
            def options(self, **options):
                fake.options_seen.append(options)
                return self

            def remote(self):
                return Actor(cls())

        class Actor(object):
            def __init__(self, instance):
                self.instance = instance

            def __getattr__(self, name):
                method = getattr(self.instance, name)
                return argparse.Namespace(remote=lambda *a, **k: method(*a, **k))

        return Handle()

    def get(self, refs, timeout=None):
        return refs

    def kill(self, actor):
        self.killed.append(actor)


def node_id(i):
    return "%056x" % (i + 1)  # Ray's node ids: 28 bytes in hex


def workers(n):
    return [{"NodeID": node_id(i), "NodeManagerAddress": "10.0.0.%d" % (i + 1), "Resources": {"GPU": 1.0}}
            for i in range(n)]


@pytest.fixture
def job(tmp_path, monkeypatch):
    monkeypatch.setenv("MVP_SUBMISSION_ID", "selftest-x")
    for name in ("SIZES_MIB", "PAIR_MIB", "ITERATIONS", "WARN_FRACTION"):
        monkeypatch.delenv("MVP_SELFTEST_INTERCONNECT_" + name, raising=False)
    shared = tmp_path / "private"
    job_dir = shared / "jobs" / "selftest-x"
    (job_dir / "logs").mkdir(parents=True)
    args = argparse.Namespace(job_dir=str(job_dir), shared_root=str(shared))
    paths = mvp_interconnect.files(str(shared))

    def read():
        with open(mvp_job.job_file(str(job_dir), "interconnect")) as handle:
            mine = json.load(handle)
        with open(paths["latest"]) as handle:
            assert json.load(handle) == mine
        assert not os.path.exists(paths["baseline"])  # a skipped run never sets the baseline
        return mine
    return args, read


def test_settings_default_and_from_the_environment(monkeypatch):
    assert selftest.interconnect_settings(mvp_interconnect) == {
        "sizes": [m * MIB for m in mvp_interconnect.DEFAULT_SIZES_MIB], "pair_bytes": 16 * MIB,
        "iterations": mvp_interconnect.DEFAULT_ITERATIONS, "fraction": mvp_interconnect.DEFAULT_WARN_FRACTION}
    monkeypatch.setenv("MVP_SELFTEST_INTERCONNECT_SIZES_MIB", "4, 0.5")
    monkeypatch.setenv("MVP_SELFTEST_INTERCONNECT_WARN_FRACTION", "100")
    settings = selftest.interconnect_settings(mvp_interconnect)
    assert settings["sizes"] == [MIB // 2, 4 * MIB] and settings["fraction"] == 100.0
    monkeypatch.setenv("MVP_SELFTEST_INTERCONNECT_SIZES_MIB", "off")
    assert selftest.interconnect_settings(mvp_interconnect)["sizes"] == []
    monkeypatch.setenv("MVP_SELFTEST_INTERCONNECT_WARN_FRACTION", "0")
    with pytest.raises(ValueError):
        selftest.interconnect_settings(mvp_interconnect)


def test_fewer_than_two_workers_is_a_skip(job):
    args, read = job
    ray = FakeRay()
    state, detail, warnings = selftest.Interconnect(ray, workers(1), args).run()
    assert (state, warnings) == ("SKIP", [])
    assert detail == "fewer than 2 workers (1): an all-reduce across nodes needs 2"
    assert ray.options_seen == []  # no actor started
    assert read()["skipped"] == detail


def test_turned_off_is_a_skip(job, monkeypatch):
    args, read = job
    monkeypatch.setenv("MVP_SELFTEST_INTERCONNECT_SIZES_MIB", "off")
    state, detail, _ = selftest.Interconnect(FakeRay(), workers(2), args).run()
    assert state == "SKIP" and "turned off" in detail
    assert read()["state"] == "SKIP"


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="this venv has torch")
def test_no_torch_on_the_workers_is_a_skip_naming_them(job, monkeypatch):
    args, read = job
    ray = FakeRay()
    monkeypatch.setattr(selftest.socket, "gethostname", lambda: "worker-a")
    state, detail, warnings = selftest.Interconnect(ray, workers(3), args, cuda_nodes={node_id(1)}).run()
    assert state == "SKIP" and warnings == []
    assert detail == "no torch in the Python of worker-a,worker-a,worker-a: the check needs torch.distributed"
    # one actor per worker, pinned, no CPU taken; a GPU asked only where the node has real ones
    assert [o["num_gpus"] for o in ray.options_seen] == [0, 1, 0]
    assert all(o["num_cpus"] == 0 and o["scheduling_strategy"].soft is False for o in ray.options_seen)
    assert [o["scheduling_strategy"].node_id for o in ray.options_seen] == [node_id(i) for i in range(3)]
    assert len(ray.killed) == 3
    record = read()
    assert record["skipped"] == detail and record["unit"] == "bytes/s" and record["submission_id"] == "selftest-x"
    # the preflight's comparison of such a record says why there is nothing to compare
    out = mvp_interconnect.compare(record, None, 0.7)
    assert out["state"] == "no_measurement" and detail in out["lines"][0]
