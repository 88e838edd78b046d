"""A fake of Ray's Jobs API client and State API, a fake clock, and a runner of a module's main().

The job modules (ray_job, ray_job_info, ray_job_record) talk to Ray's dashboard over
HTTP (module_utils mvp_ray_rest). The fixture ``fake_ray`` answers those requests for one test, as
Ray's routes do, from a cluster the test describes: its nodes, its jobs and how their status moves
on, its pending placement groups. (tests/unit/plugins/module_utils/cluster/test_mvp_ray_rest.py runs the
same fake behind a real HTTP server.)
"""
import json
import time

import pytest
from ansible.module_utils.testing import patch_module_args


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
