"""A fake of Ray's Jobs API client and State API, a fake clock, and a runner of a module's main().

The job modules (ray_job, ray_job_info, ray_job_record) talk to Ray's dashboard over
HTTP (module_utils mvp_ray_rest). The fixture ``fake_ray`` answers those requests for one test, as
Ray's routes do, from a cluster the test describes: its nodes, its jobs and how their status moves
on, its pending placement groups. (tests/unit/plugins/module_utils/test_mvp_ray_rest.py runs the
same fake behind a real HTTP server.)
"""
import json
import time

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.mvp.ray.plugins.module_utils import mvp_ray_rest
from ray_dashboard_fake import FakeRay, node


@pytest.fixture
def cluster_nodes():
    """A head that runs no jobs, two ALIVE workers carrying worker_node and a DEAD one."""
    return [node("head0", "10.0.0.1", head=True, CPU=0.0),
            node("wrk1", "10.0.0.2", CPU=8.0, worker_node=100.0),
            node("wrk2", "10.0.0.3", CPU=8.0, GPU=2.0, worker_node=100.0),
            node("wrk3", "10.0.0.4", state="DEAD", CPU=8.0, worker_node=100.0)]


@pytest.fixture
def fake_ray(monkeypatch, cluster_nodes):
    """A fake of Ray's dashboard (Jobs REST API and State API) behind ``open_url`` of module_utils
    mvp_ray_rest, holding ``cluster_nodes``; Ray's token variables are unset for the test."""
    fake = FakeRay()
    fake.nodes = list(cluster_nodes)
    monkeypatch.setattr(mvp_ray_rest, "open_url", fake.open_url)
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    return fake


class FakeClock(object):
    """``time.time`` and ``time.sleep`` that only move when slept: a deadline passes without waiting."""

    def __init__(self, now=1800000000.0):
        self.now = now
        self.start = now

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    @property
    def elapsed(self):
        return self.now - self.start


@pytest.fixture
def clock(monkeypatch):
    """A FakeClock in place of ``time.time`` and ``time.sleep``."""
    fake = FakeClock()
    monkeypatch.setattr(time, "time", fake.time)
    monkeypatch.setattr(time, "sleep", fake.sleep)
    return fake


@pytest.fixture
def run_module(capsys):
    """Run a module's ``main()`` with ``args`` as Ansible passes them; return its result (``failed`` on failure).

    :param main: the module's main function.
    :param args: dict of module options.
    :param check_mode: bool, run as ``--check``.
    """
    def run(main, args, check_mode=False):
        args = dict(args, _ansible_check_mode=check_mode)
        with patch_module_args(args):
            with pytest.raises(SystemExit) as exit_:
                main()
        result = json.loads(capsys.readouterr().out)
        assert (exit_.value.code != 0) == bool(result.get("failed")), result
        return result
    return run
