"""A fake of Ray's Jobs API client and State API, a fake clock, and a runner of a module's main().

The job modules (ray_job, ray_job_info, ray_submit_check) import ``ray.job_submission.JobSubmissionClient``
and ``ray.util.state`` when they run (module_utils mvp_ray.import_ray). The fixture ``fake_ray`` puts
stand-ins for both into ``sys.modules`` for one test, so the modules talk to a cluster the test
describes: its nodes, its jobs and how their status moves on, its pending placement groups.
"""
import enum
import json
import sys
import time
import types

import pytest
from ansible.module_utils.testing import patch_module_args


class JobStatus(str, enum.Enum):
    """Ray's ``ray.job_submission.JobStatus`` (a str enum: ``str()`` gives ``JobStatus.RUNNING``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class JobDetails(object):
    """What ``JobSubmissionClient.get_job_info`` returns: Ray's pydantic JobDetails, fields as attributes."""

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def model_dump(self):
        return dict(self.__dict__)


def _matches(row, filters):
    """Whether a State API row passes ``filters`` ([(key, "=", value)], as the modules pass them)."""
    return all(row.get(key) == value for key, op, value in filters or () if op == "=")


class FakeRay(object):
    """A Ray cluster as its Jobs API (a fake ``JobSubmissionClient``) and State API show it.

    :ivar nodes: node rows (dicts as ``ray.util.state.list_nodes`` gives them).
    :ivar jobs: submission id -> JobDetails fields of the jobs Ray knows.
    :ivar placement_groups: placement group rows (``list_placement_groups``).
    :ivar actors: actor rows (``list_actors``).
    :ivar logs: submission id -> driver log text, or the exception ``get_job_logs`` raises.
    :ivar calls: (method, argument) of every call that changes a job (submit, stop, delete).
    :ivar clients: (address, headers) of every client the modules opened.
    """

    def __init__(self):
        self.nodes = []
        self.jobs = {}
        self.placement_groups = []
        self.actors = []
        self.logs = {}
        self.calls = []
        self.clients = []
        self.next_fields = {}
        self.after_stop = {}
        self.unreachable = None
        self.state_error = None
        self.info_error = None
        self.info_reads = 0

    # -- describing the cluster --

    def add_job(self, submission_id, status, **fields):
        """A job Ray knows, with ``status`` (a JobStatus name) and more JobDetails fields."""
        self.jobs[submission_id] = dict({"submission_id": submission_id, "job_id": None, "driver_node_id": None,
                                         "message": "", "entrypoint": "python -u job.py", "metadata": {},
                                         "start_time": None, "end_time": None, "driver_exit_code": None},
                                        **fields)
        self.jobs[submission_id]["status"] = JobStatus(status)

    def then(self, submission_id, *changes):
        """How the job moves on: each later ``get_job_info`` applies the next change (the last one stays).

        :param changes: dicts of JobDetails fields; a plain str is ``{"status": <str>}``.
        """
        self.next_fields[submission_id] = [self._change(change) for change in changes]

    def when_stopped(self, submission_id, *changes):
        """How the job moves on once ``stop_job`` is called (see :meth:`then`)."""
        self.after_stop[submission_id] = [self._change(change) for change in changes]

    @staticmethod
    def _change(change):
        change = {"status": change} if isinstance(change, str) else dict(change)
        if "status" in change:
            change["status"] = JobStatus(change["status"])
        return change

    def status_of(self, submission_id):
        return self.jobs[submission_id]["status"].value

    def called(self, method):
        return [arg for name, arg in self.calls if name == method]

    # -- the Jobs API: ray.job_submission.JobSubmissionClient --

    def client_class(self):
        fake = self

        class JobSubmissionClient(object):
            """The fake of ``ray.job_submission.JobSubmissionClient`` (the methods the modules call)."""

            def __init__(self, address=None, headers=None, **_ignored):
                fake.clients.append((address, headers))
                if fake.unreachable is not None:
                    raise fake.unreachable

            def get_job_info(self, submission_id):
                fake.info_reads += 1
                if fake.info_error is not None:
                    raise fake.info_error
                if submission_id not in fake.jobs:
                    raise RuntimeError("Job %s does not exist" % submission_id)
                queue = fake.next_fields.get(submission_id)
                if queue:
                    fake.jobs[submission_id].update(queue.pop(0) if len(queue) > 1 else queue[0])
                return JobDetails(**fake.jobs[submission_id])

            def submit_job(self, *, entrypoint, submission_id=None, runtime_env=None, metadata=None,
                           entrypoint_num_cpus=None, entrypoint_resources=None, **more):
                asked = dict(entrypoint=entrypoint, submission_id=submission_id, runtime_env=runtime_env,
                             metadata=metadata, entrypoint_num_cpus=entrypoint_num_cpus,
                             entrypoint_resources=entrypoint_resources, **more)
                fake.calls.append(("submit_job", asked))
                if submission_id in fake.jobs:
                    raise RuntimeError("Job with submission_id %s already exists." % submission_id)
                fake.add_job(submission_id, "PENDING", entrypoint=entrypoint, metadata=metadata or {})
                return submission_id

            def stop_job(self, submission_id):
                fake.calls.append(("stop_job", submission_id))
                if submission_id in fake.after_stop:
                    fake.next_fields[submission_id] = list(fake.after_stop[submission_id])
                return True

            def delete_job(self, submission_id):
                fake.calls.append(("delete_job", submission_id))
                del fake.jobs[submission_id]
                return True

            def list_jobs(self):
                return [JobDetails(**fields) for fields in fake.jobs.values()]

            def get_job_logs(self, submission_id):
                logs = fake.logs.get(submission_id, "")
                if isinstance(logs, Exception):
                    raise logs
                return logs

        return JobSubmissionClient

    # -- the State API: ray.util.state --

    def state_module(self):
        fake = self
        state = types.ModuleType("ray.util.state")

        def rows(table, filters):
            if fake.state_error is not None:
                raise fake.state_error
            return [dict(row) for row in table if _matches(row, filters)]

        def list_nodes(address=None, filters=None, limit=None, timeout=None, detail=False, **_ignored):
            return rows(fake.nodes, filters)

        def list_actors(address=None, filters=None, limit=None, timeout=None, detail=False, **_ignored):
            return rows(fake.actors, filters)

        def list_placement_groups(address=None, filters=None, limit=None, timeout=None, detail=False, **_ignored):
            return rows(fake.placement_groups, filters)

        state.list_nodes = list_nodes
        state.list_actors = list_actors
        state.list_placement_groups = list_placement_groups
        return state


def node(node_id, ip, head=False, state="ALIVE", **resources):
    """A node row of ``list_nodes``: its schedulable resources plus Ray's own ``node:<ip>`` and memory entries."""
    total = dict(resources, memory=8e9, object_store_memory=2e9)
    total["node:%s" % ip] = 1.0
    return {"node_id": node_id, "node_ip": ip, "node_name": ip, "is_head_node": head, "state": state,
            "resources_total": total}


@pytest.fixture
def cluster_nodes():
    """A head that runs no jobs, two ALIVE workers carrying worker_node and a DEAD one."""
    return [node("head0", "10.0.0.1", head=True, CPU=0.0),
            node("wrk1", "10.0.0.2", CPU=8.0, worker_node=100.0),
            node("wrk2", "10.0.0.3", CPU=8.0, GPU=2.0, worker_node=100.0),
            node("wrk3", "10.0.0.4", state="DEAD", CPU=8.0, worker_node=100.0)]


@pytest.fixture
def fake_ray(monkeypatch, cluster_nodes):
    """A fake of Ray's JobSubmissionClient and State API in ``sys.modules`` (``ray.job_submission``,
    ``ray.util.state``), holding ``cluster_nodes``; RAY_AUTH_TOKEN is restored afterwards."""
    fake = FakeRay()
    fake.nodes = list(cluster_nodes)
    jobs = types.ModuleType("ray.job_submission")
    jobs.JobSubmissionClient = fake.client_class()
    jobs.JobStatus = JobStatus
    state = fake.state_module()
    util = types.ModuleType("ray.util")
    util.state = state
    ray = types.ModuleType("ray")
    ray.job_submission, ray.util = jobs, util
    for name, module in (("ray", ray), ("ray.job_submission", jobs), ("ray.util", util),
                         ("ray.util.state", state)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "")  # recorded, so the module's own setting is undone too
    monkeypatch.delenv("RAY_AUTH_TOKEN")
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
