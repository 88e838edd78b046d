# -*- coding: utf-8 -*-
"""The job controller: one long-lived program that follows every run from submission to its end.

A *run* is a chain of attempts ``<run>``, ``<run>-r1``, ... (``mvp_restart``). ``submit.yml`` makes the
first attempt and hands the run over by writing ``config/controller.json`` into its job directory, in the
same call that makes the directory (``ray_job``). From then on this program owns the run, whoever
submitted it and whether or not anybody waits: it follows the current attempt through Ray's Jobs API,
judges an ended attempt (the playbook ``mvp.ray.record``: ``ray_job_record`` and the final cluster
snapshot, the same modules a play uses), asks the restart decision (``mvp_restart.decide``), heals the
cluster (the cluster playbook, through ansible-runner) and starts the next attempt (``mvp.ray.submit``
with the decision), and writes the run's end into ``logs/run_end.json`` of its first attempt.

Its state is what the job directories already hold, written before it acts, so a controller that was
killed and started again picks every unfinished run up where it was and starts no attempt twice:

* ``config/controller.json`` (every attempt): ``{"run", "attempt"}``; a first attempt's marks a run to follow;
* ``logs/status.json`` (``ray_job_record``): the ended attempt's verdict;
* ``logs/restart.json``: the decision to continue as ``next``, written before the heal and the start;
  an attempt whose ``next`` has no job directory yet is started (``ray_job`` refuses an existing
  directory, so a second start cannot make a second attempt);
* ``logs/continued.json``: the phases of that restart once the next attempt started (seconds healing, seconds
  starting it, when Ray ended the attempt and when the decision was written);
* ``logs/run_end.json`` (the run's first attempt): the run's end; a run with it is done (one with the name older
  versions gave it, ``logs/supervisor.json``, too: ``mvp_job.FORMER_FILES``);
* ``logs/ledger.json`` (the run's first attempt): where the run's GPU-hours went (``mvp_ledger.compute_ledger``, from
  the attempts' files only), written at each pass where the run's files changed (at least every
  ``LEDGER_REFRESH_S``) and once more at its end; ``logs/run_end.json`` then carries its summary line (``goodput``);
* ``logs/preempt.json``: this attempt is preempted for a job of a higher priority (by whom, since when, the
  checkpoint step it had, the grace deadline, its state); ``logs/preempting.json`` of that job: what it preempted.

Preemption (:meth:`Controller.preempt`): when the first waiting job of the cluster's queue (``mvp_queue.plan``)
cannot start and running runs this controller follows, of a lower priority and preemptible (their job spec's
``preemptible``), hold what it needs, the fewest, lowest-priority, most recently started of them
(``mvp_queue.choose_victims``) are stopped right after their next complete checkpoint
(``mvp_runs.latest_checkpoint``: verl's tracker file and every rank's shards), or at once when the grace time
``preempt_grace_s`` passes first; each is judged ``preempted`` (``logs/stopped_by.json``) and continued from
that checkpoint as its run's next attempt, queued again at its priority with its first submission time.
While a victim's checkpoint is awaited the controller looks every ``URGENT_POLL_S`` seconds.

Besides those, ``<shared>/controller/capacity-YYYY-MM.jsonl`` gets one line a minute: the ALIVE workers and their GPUs
(:meth:`Controller.record_capacity`; ``ledger.yml`` sets the runs' GPU-hours against it), and
``<shared>/controller/heartbeat.json`` says which controller follows which runs (the plays
read it to say whether a run is supervised). The run's state and the heartbeat are read by the rules of
``mvp_run_state``, which the plays use too. The deadlines of a followed run are this program's alone: an attempt
PENDING past ``pending_timeout_s`` (:meth:`Controller.check_pending`), a placement group no node can hold past
``pg_pending_timeout_s`` (:meth:`Controller.check_placement`); the plays that submit and watch a run set none.
Causes come from facts: the head is lost when its container is gone or stopped (the Docker API) or its dashboard
refuses or drops the connection (``mvp_ray_rest.RayUnreachable``), typed where it is detected.

People are told through webhooks (issue 64, module_utils ``notify/mvp_notify``): :meth:`Controller.notify` writes
each event (a run ended, an attempt continued or preempted, an attempt stopped by a deadline, a long wait in the
queue, a checkpoint) into ``<shared>/controller/outbox/`` before anything is sent, for the inventory's ``webhooks``
and the request's ``notify``; a sender thread started by :func:`serve` delivers the outbox at least once, off the
pass.

Entry points (``python -m ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_controller``): ``run
--config FILE`` (the controller), ``keep --dir DIR`` (the keeper that starts it again when it dies, on a
host without systemd; ``mvp_service.keep``), ``heal --config FILE`` (the cluster playbook once, exactly as
the controller runs it; prints the result as JSON, exit status 1 when it failed). The service is installed by the role ``job_controller``
(module ``ray_job_controller``); its configuration file is described in :func:`load_config`.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import os
import signal
import socket
import sys
import time
import traceback

from ansible_collections.mvp.ray.plugins.module_utils.cluster import mvp_service
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_playbook_run, mvp_queue, mvp_run_state
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import mtime, read_json, write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import is_submission_id
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    TERMINAL_STATUSES, auth_headers, bundle_shapes, list_nodes, list_placement_groups, alive_offers, pending_stop,
    placement, stalled_message, stalled_placement_groups, status_name)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_rest import (
    JobsClient, RayHttpError, RayUnreachable, StateClient)
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import AFTER_EACH_EPOCH
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_restart import decide
from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger
from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger_sum
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import latest_checkpoint
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import stopped_while_pending
from ansible_collections.mvp.ray.plugins.module_utils.notify import mvp_notify

HANDOFF_GRACE_S = 120
"""Seconds a handed-over attempt may be unknown to Ray (its directory is made just before its submission)."""

ENV_DROPPED = ("ANSIBLE_", "AWX_", "RUNNER_", "MOLECULE_", "JOB_ID", "INVENTORY_ID", "PROJECT_REVISION")
"""Prefixes of variables never passed from the controller's own environment to a playbook it runs: an
outer ansible-runner's ``ANSIBLE_STDOUT_CALLBACK=awx_display`` and ``ANSIBLE_CALLBACK_PLUGINS`` break the
inner run (docs/how-it-works.md#playbooks-run-from-a-program), and ``ANSIBLE_HOST_KEY_CHECKING`` must be the
inventory's, not inherited."""

WORKER_START_S = 30
"""Seconds the heal gives worker containers it started again to join the cluster before it runs the cluster playbook."""

HEAD_EXIT_S = 5
"""Seconds the heal looks whether a head that stopped answering has a container that exited (then it starts it again)."""

LEDGER_REFRESH_S = 30
"""Seconds after which a running run's ``logs/ledger.json`` is written again even when none of its files changed
(its held time grows; a run whose files change is written at the next pass)."""

URGENT_POLL_S = 0.5
"""Seconds between two passes while a preempted run's next checkpoint is awaited (it is stopped right after it)."""

REQUIRED = ("name", "inventory", "project_dir", "shared_root", "shared_dir", "head", "dashboard_port", "state_dir")


class ConfigError(ValueError):
    """The controller's configuration file is missing a key or has a wrong value (the message names it)."""


class HeadLost(Exception):
    """The Ray head does not answer: its container is gone or stopped, or its dashboard refuses the connection.

    ``why`` (str) is the fact as it was detected (the Docker API's answer, or the connection's error).
    """

    def __init__(self, why):
        Exception.__init__(self, why)
        self.why = why


DEFAULTS = {
    "poll_s": 2.0,
    "restart_causes": "retryable",
    "heal_timeout_s": 900,
    "heal_delay_s": 10,
    "pending_timeout_s": 300,
    "pg_pending_timeout_s": 180,
    "preempt_grace_s": 600,
    "expect_workers": 1,
    "worker_resource": "worker_node",
    "workers": [],
    "collections_path": "",
    "content": {},
    "host_key_checking": True,
    "env": {},
    "ray_auth_token": "",
    "playbooks": {},
    "webhooks": [],
    "notify_queue_wait_s": 1800,
    "notify_retry_for_s": 86400,
    "key_metrics": {},
}
"""The configuration's optional keys and their values when the file lacks them: the one table of the controller's
defaults. The role ``job_controller`` writes every key from the setting SETTINGS names; a unit test checks that
each setting's default (the role's ``defaults/main.yml`` and ``meta/argument_specs.yml``, or the shared
``inventories/common/all``) is this value."""

SETTINGS = {
    "poll_s": "job_controller_poll_s",
    "restart_causes": "job_controller_restart_causes",
    "heal_timeout_s": "mvp_restart_heal_timeout_s",
    "heal_delay_s": "job_controller_heal_delay_s",
    "pending_timeout_s": "job_controller_pending_timeout_s",
    "pg_pending_timeout_s": "job_controller_pg_pending_timeout_s",
    "preempt_grace_s": "job_controller_preempt_grace_s",
    "expect_workers": "job_controller_expect_workers",
    "worker_resource": "mvp_ray_worker_resource",
    "workers": "job_controller_worker_containers",
    "host_key_checking": "job_controller_host_key_checking",
    "env": "job_controller_env",
    "ray_auth_token": "job_controller_ray_auth_token",
    "webhooks": "job_controller_webhooks",
    "notify_queue_wait_s": "job_controller_notify_queue_wait_s",
    "notify_retry_for_s": "job_controller_notify_retry_for_s",
}
"""The inventory setting each optional key of the configuration comes from (``roles/job_controller/tasks/main.yml``);
``playbooks`` is not a setting (tests point it elsewhere), nor are ``collections_path`` and ``content`` (what the role
installed: ``roles/job_controller/tasks/install.yml``), nor ``key_metrics`` (the catalog's ``metrics`` of each workload,
``mvp_workloads``)."""

PLAYBOOKS = {"heal": "playbooks/cluster.yml", "record": "playbooks/record.yml", "submit": "playbooks/submit.yml"}
"""The playbooks of the checkout the controller runs: the heal, the record of an ended attempt, the start of the next
attempt (``config["playbooks"]`` replaces some)."""


def load_config(path):
    """Read and check the controller's configuration (JSON, written 0600 by ``ray_job_controller``).

    Keys: ``name`` (str, the controller's name), ``inventory`` (list of str, inventory sources), ``project_dir``
    (``ansible.cfg`` and the playbooks: the installed collection's folder, or a developer's checkout),
    ``collections_path`` (str, the folder holding ``ansible_collections/mvp/ray`` that the controller imports and its
    playbooks use), ``content`` (dict: ``source``, ``version``, ``hash`` - what the role installed; shown in the
    heartbeat and ``status.yml``), ``shared_root`` (the shared storage inside the nodes,
    ``/private``), ``shared_dir`` (the same storage on this host), ``head`` (``{"container", "network"}`` on a
    docker host, else ``{"address"}``), ``dashboard_port`` (int), ``state_dir`` (this controller's folder:
    ansible-runner's artifacts, lock), and optionally (their defaults: DEFAULTS; the settings: SETTINGS)
    ``ray_auth_token`` (str), ``poll_s`` (float seconds between two passes), ``restart_causes`` (``"retryable"`` or
    a list), ``heal_timeout_s``, ``heal_delay_s``, ``pending_timeout_s`` (seconds an attempt may stay PENDING in
    Ray: the one PENDING deadline of a followed run), ``pg_pending_timeout_s`` (seconds a placement group no node
    can hold may stay PENDING: the one placement-group deadline), ``preempt_grace_s`` (seconds a preempted run may
    train on waiting for its next complete checkpoint; 0 stops it at once), ``expect_workers`` (int),
    ``worker_resource`` (str), ``workers`` (list of str: the worker containers on a docker host, [] elsewhere;
    a worker whose container exited stops the attempts on its node at once), ``host_key_checking`` (bool), ``env``
    (dict str -> str passed to every playbook: the inventory's secrets from the environment, never logged),
    ``playbooks`` (dict: ``heal``, ``record``, ``submit``; PLAYBOOKS), ``webhooks`` (list of endpoints,
    ``mvp_notify.check_endpoints``: url, format, events, secret, checkpoint_every, name), ``notify_queue_wait_s``
    (seconds an attempt may wait in the queue before the event ``queue_waiting``; 0: never), ``notify_retry_for_s``
    (seconds a delivery is retried), ``key_metrics`` (dict workload -> list of its catalog ``metrics``, names or
    ``{key}`` mappings: the final metrics of an event).

    :param path: str.
    :returns: dict with the defaults filled in.
    :raises ConfigError: the file cannot be read, a required key is missing (named), or a webhook is refused
        (``job_controller_webhooks[i].<key>``).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError("controller configuration %s cannot be read: %s (site.yml writes it; run it again)"
                          % (path, exc))
    missing = [k for k in REQUIRED if k not in config]
    if missing:
        raise ConfigError("controller configuration %s lacks %s (site.yml writes it; run it again)"
                          % (path, ", ".join(missing)))
    for key, value in DEFAULTS.items():
        config.setdefault(key, copy.deepcopy(value))  # the table's lists and dicts are not shared
    config["playbooks"] = dict(PLAYBOOKS, **config["playbooks"])
    try:
        config["webhooks"] = mvp_notify.check_endpoints(config["webhooks"], "job_controller_webhooks")
    except mvp_notify.NotifyError as exc:
        raise ConfigError("controller configuration %s: %s (set it in the inventory and run site.yml again)"
                          % (path, exc))
    return config


def host_path(config, node_path):
    """The path on this host of ``node_path``, a path under the nodes' shared root (str).

    :raises ValueError: ``node_path`` is not under ``config["shared_root"]``.
    """
    root = os.path.normpath(config["shared_root"])
    path = os.path.normpath(node_path)
    if path != root and not path.startswith(root + os.sep):
        raise ValueError("%s is not under the shared root %s" % (node_path, root))
    return os.path.join(config["shared_dir"], os.path.relpath(path, root))


def jobs_dir(config):
    """The jobs folder on this host (str; ``mvp_run_state.jobs_dir`` of ``config["shared_dir"]``)."""
    return mvp_run_state.jobs_dir(config["shared_dir"])


def attempt_file(config, submission_id, name):
    """The path on this host of the file ``name`` (``mvp_job.FILES``) of attempt ``submission_id`` (str;
    ``mvp_run_state.attempt_file``)."""
    return mvp_run_state.attempt_file(jobs_dir(config), submission_id, name)


def run_state(config, run):
    """What the job directories on this host say about ``run`` (``mvp_run_state.run_state``, which the plays use too).

    :param config: dict (:func:`load_config`). :param run: str, the run's first attempt's id.
    :returns: dict ``{"run", "attempts", "current", "next", "restarts", "ended"}``.
    """
    return mvp_run_state.run_state(jobs_dir(config), run)


def discover(config, known):
    """The runs handed over and not ended: first attempts with ``config/controller.json`` and no run's end file.

    :param config: dict. :param known: dict id -> bool, updated in place (True: a run to follow, False: not one,
        or ended): each directory is read once, so a tick costs one directory listing.
    :returns: sorted list of run ids.
    """
    try:
        names = os.listdir(jobs_dir(config))
    except OSError:
        return []
    for name in names:
        if name in known or not is_submission_id(name):
            continue
        handoff = read_json(attempt_file(config, name, "controller"))
        if not handoff:
            # Not handed over (an older job), or its directory is being made: look again while it is young.
            if not _young(os.path.join(jobs_dir(config), name)):
                known[name] = False
            continue
        known[name] = handoff.get("run") == name and not any(
            os.path.exists(p) for p in mvp_run_state.run_end_files(jobs_dir(config), name))
    return sorted(n for n, follow in known.items() if follow)


def _mtime(path):
    """The modification time of ``path`` (seconds since the epoch), 0 when it cannot be read."""
    return mtime(path, 0.0)


def _young(path, now=None):
    """True while the folder ``path`` is younger than HANDOFF_GRACE_S (False when it cannot be read)."""
    made = _mtime(path)
    return bool(made) and (now or time.time()) - made < HANDOFF_GRACE_S


def runner_env(config, python=None):
    """The environment variables of a playbook the controller runs (dict str -> str).

    Only what is set here reaches the playbook from the controller: the project folder's ``ansible.cfg`` and the
    collections folder the controller imports (``collections_path``), the
    inventory's host key checking (ansible-runner turns it off unless told), plain output, and the
    configuration's ``env`` (the inventory's secrets). The controller's own ``ANSIBLE_*`` and ansible-runner
    variables are removed from its environment at start (:func:`clean_environ`).
    """
    env = mvp_playbook_run.runner_env(os.path.join(config["project_dir"], "ansible.cfg"))
    if python:
        env["PATH"] = os.path.dirname(python) + os.pathsep + os.environ.get("PATH", "")
    env.update({"ANSIBLE_HOST_KEY_CHECKING": "True" if config.get("host_key_checking", True) else "False",
                "ANSIBLE_NOCOLOR": "1", "ANSIBLE_RETRY_FILES_ENABLED": "False"})
    if config.get("collections_path"):
        # The copy the controller imports is the one its playbooks use (an installed copy's ansible.cfg names a
        # checkout's relative collections folder, which it does not have).
        env["ANSIBLE_COLLECTIONS_PATH"] = config["collections_path"]
    env.update({str(k): str(v) for k, v in (config.get("env") or {}).items()})
    return env


def clean_environ(environ):
    """Remove from ``environ`` (a dict, changed in place) every variable ``ENV_DROPPED`` names; return it."""
    for key in list(environ):
        if key.startswith(ENV_DROPPED):
            del environ[key]
    return environ


def record_vars(submission_id, lost_with_head):
    """The extra vars of the record playbook (``playbooks/record.yml``: the role ``submit_job``'s entry point
    ``record``) for the ended attempt ``submission_id``, by that entry point's own input names (dict).

    :param lost_with_head: bool, Ray's new head does not know the attempt (judged from its job directory).
    """
    return {"submit_job_collect_id": submission_id, "submit_job_lost_with_head": bool(lost_with_head)}


def ledger_vars(run):
    """The extra vars of the record playbook that only put ``run``'s final ledger on its MLflow run (dict)."""
    return {"submit_job_collect_id": run, "submit_job_record_ledger_only": True}


def start_vars(nxt):
    """The extra vars of the submit playbook (``playbooks/submit.yml``: the role ``submit_job``) that start the
    decided next attempt ``nxt`` (``mvp_restart.decide``'s ``next``), by the role's own input names (dict): its
    request and restart record, and no wait - the play returns once Ray has the attempt and this controller follows
    it from its first pass (its PENDING and placement-group deadlines are this controller's)."""
    return {"submit_job_restart": {"request": nxt["request"], "info": nxt["info"]}, "submit_job_wait": False}


def end_record(state, trained, why, attempts, verdict=None, now=None):
    """The run's end as ``logs/run_end.json`` holds it (dict).

    :param state: ``"ended"`` (the run ended: trained or failed) or ``"stopped"`` (the controller could not go on).
    """
    return {"run": attempts[0], "state": state, "trained": bool(trained), "why": why, "attempts": list(attempts),
            "verdict": verdict or None, "by": "job controller",
            "at": _stamp(now)}


class Controller(object):
    """Follows every handed-over run (see the module's docstring); one instance per process.

    :param config: dict (:func:`load_config`).
    :param playbook: callable(playbook, extra_vars, ident) -> dict (``mvp_playbook_run.run``'s result), how
        a playbook is run; tests pass their own.
    :param docker: callable() -> a docker SDK client, or None (the head is reached by address).
    :param say: callable(str), one line of the controller's log (None: nothing is logged).
    :param clock: callable() -> float seconds (``time.time``).
    """

    def __init__(self, config, playbook, docker=None, say=None, clock=time.time):
        self.config = config
        self.playbook = playbook
        self.docker = docker
        self.say = say or (lambda line: None)
        self.clock = clock
        self.known = {}
        self.first_seen = {}
        self.requests = 0
        self.head_lost_since = None
        self.head_replaced_at = None
        self.runs = []
        self.pass_cache = {}
        self.urgent = False
        self.workers_started_at = 0.0
        self.sleep = time.sleep
        self.ledgers = mvp_ledger.LedgerCache()
        self.ledger_written = {}
        self.ledger_errors = {}
        self.capacity_at = None
        controller_dir = os.path.join(config["shared_dir"], "controller")
        self.outbox = mvp_notify.Outbox(mvp_notify.outbox_dir(config["shared_dir"]), clock,
                                        fault_file=os.path.join(controller_dir, mvp_notify.FAULT_FILE))
        self.wake = lambda: None  # the sender's wake-up (serve starts the sender)
        self.request_endpoints = {}  # attempt -> its request's endpoints (config/job_spec.json's request.notify)

    # -- the head ------------------------------------------------------------------------------------------

    def address(self):
        """The dashboard's URL (str).

        :raises HeadLost: the head's container is gone, stopped or has no address on its network.
        """
        head = self.config["head"]
        if head.get("container"):
            import docker.errors  # pylint: disable=import-outside-toplevel
            try:
                container = self.docker().containers.get(head["container"])
            except docker.errors.NotFound:
                raise HeadLost("the head's container %s is gone" % head["container"])
            except docker.errors.DockerException as exc:
                raise HeadLost("the Docker engine did not answer about %s: %s" % (head["container"], exc))
            if container.status != "running":
                raise HeadLost("the head's container %s is %s" % (head["container"], container.status))
            ips = _network_ips(container)
            ip = ips.get(head.get("network")) or next((ip for ip in ips.values() if ip), "")
            if not ip:
                raise HeadLost("the head's container %s has no address" % head["container"])
            return "http://%s:%d" % (ip, int(self.config["dashboard_port"]))
        return "http://%s:%d" % (head["address"], int(self.config["dashboard_port"]))

    def clients(self):
        """Jobs and State API clients of the head, counted in ``self.requests``.

        :raises HeadLost: see :meth:`address`.
        """
        address = self.address()
        headers = auth_headers(self.config.get("ray_auth_token") or None)
        jobs, state = JobsClient(address, headers=headers, timeout=20), StateClient(address, headers=headers, timeout=20)
        for api in (jobs, state):
            api.call = self._counted(api.call)
        return jobs, state, address

    def _counted(self, call):
        def counted(*args, **kwargs):
            self.requests += 1
            return call(*args, **kwargs)
        return counted

    # -- one pass over every run ------------------------------------------------------------------------------

    def tick(self):
        """Look at every run once and act on those whose attempt ended; return the runs followed (list of ids).

        Then, at most once a minute, append what the cluster holds to its capacity file (:meth:`record_capacity`).
        """
        try:
            return self.one_pass()
        finally:
            self.record_capacity()

    def one_pass(self):
        """The pass of :meth:`tick` over every run (list of the runs' ids)."""
        runs = self.runs = discover(self.config, self.known)
        self.pass_cache = {}
        self.heartbeat(runs)
        if not runs:
            return runs
        for run in runs:
            self.keep_ledger(run)
        try:
            jobs_api, state_api, address = self.clients()
            table = {j.get("submission_id"): j for j in jobs_api.list_jobs() if j.get("submission_id")}
        except (HeadLost, RayUnreachable) as exc:
            self.head_lost(runs, getattr(exc, "why", None) or "the head's dashboard does not answer: %s" % exc)
            return runs
        except RayHttpError as exc:
            self.say("the head's Jobs API refused the job list (%s); trying again next pass" % exc)
            return runs
        self.head_lost_since = None
        try:
            self.stop_on_lost_workers(runs, table, jobs_api, state_api, address)
        except (RayUnreachable, RayHttpError) as exc:
            self.say("the look at the workers' containers could not read the cluster (%s); trying again next pass" % exc)
        for run in runs:
            try:
                self.step(run, table, jobs_api, state_api, address)
            except HeadLost as exc:
                self.head_lost(runs, exc.why)
                return runs
        try:
            self.preempt(runs, table, jobs_api, state_api, address)
        except (RayUnreachable, RayHttpError) as exc:
            self.say("the preemption pass could not read the cluster (%s); trying again next pass" % exc)
        return runs

    def step(self, run, table, jobs_api, state_api, address):
        """Act on one run: continue a decided restart, judge an ended attempt, stop a stalled one."""
        state = run_state(self.config, run)
        if state["ended"]:
            self.known[run] = False
            return
        if state["next"]:
            self.continue_run(state)
            return
        current = state["current"]
        job = table.get(current)
        if job is None:
            made = _mtime(os.path.join(jobs_dir(self.config), current))
            if made > (self.head_replaced_at or 0) and self.clock() - made < HANDOFF_GRACE_S:
                return  # handed over a moment ago, not submitted yet (and no head was replaced since)
            self.say("%s: Ray does not know the attempt (its head was replaced): judging it from its job directory"
                     % current)
            self.judge(state, lost_with_head=True)
            return
        status = status_name(job.get("status"))
        if status in TERMINAL_STATUSES:
            self.judge(state)
        elif stopped_while_pending(status, read_json(attempt_file(self.config, current, "stopped_by"))):
            self.judge(state)
        elif status == "PENDING":
            self.check_pending(current, job, jobs_api, state_api, address)
            self.notify_watch(run, current)
        elif status == "RUNNING":
            self.save_placement(current, job, state_api, address)
            self.check_placement(current, job, jobs_api, state_api, address)
            self.notify_watch(run, current)

    # -- a worker's container exited (docker hosts) --------------------------------------------------------------

    def worker_containers(self):
        """What the Docker engine says about the worker containers of ``config["workers"]``.

        :returns: tuple ``(down, up_ips)``: ``down`` dict container name -> str (the fact: "exited (exit code 137,
            finished at ...)" or "gone"), ``up_ips`` set of str (the network addresses of the running ones); ``({},
            None)`` when no worker container is configured or the engine does not answer (Ray's own health checks
            then decide, as on a host without Docker).
        """
        names = self.config.get("workers") or []
        if not names or self.docker is None:
            return {}, None
        import docker.errors  # pylint: disable=import-outside-toplevel
        down, up_ips = {}, set()
        try:
            client = self.docker()
            for name in names:
                try:
                    container = client.containers.get(name)
                except docker.errors.NotFound:
                    down[name] = "gone"
                    continue
                if container.status != "running":
                    state = container.attrs.get("State") or {}
                    down[name] = "%s (exit code %s, finished at %s)" % (
                        container.status, state.get("ExitCode"), state.get("FinishedAt") or "?")
                    continue
                up_ips.update(ip for ip in _network_ips(container).values() if ip)
        except docker.errors.DockerException as exc:
            self.say("the Docker engine did not answer about the workers' containers (%s): Ray's health checks "
                     "decide" % exc)
            return {}, None
        return down, up_ips

    def stop_on_lost_workers(self, runs, table, jobs_api, state_api, address):
        """Stop at once each running attempt that holds a node whose worker container exited (cause ``node_lost``).

        On a docker host the engine says within a pass that a worker's container exited; Ray's health checks take
        ``ray_head_health_check`` periods more (18 s here) to declare its node dead and end the attempt. A node is
        lost when Ray lists it ALIVE, it offers the worker resource, and no running worker container has its
        address while a worker container is down; an attempt holds it when its driver or a bundle of a placement
        group it made is there (Ray's state API). The attempt's ``logs/stopped_by.json`` (cause ``node_lost``, the
        container's state as evidence) is written before Ray's stop, so its verdict says why
        (``mvp_verdict``) and the restart decision continues it like any lost node.
        """
        down, up_ips = self.worker_containers()  # the cheap look first: nothing more while every container runs
        if not down:
            return
        current = {}
        for run in runs:
            state = run_state(self.config, run)
            sid = state["current"]
            if state["ended"] or state["next"] or status_name((table.get(sid) or {}).get("status")) != "RUNNING":
                continue
            if not os.path.exists(attempt_file(self.config, sid, "stopped_by")):
                current[sid] = table[sid]
        if not current:
            return
        lost = self.without_container(self.alive_workers(list_nodes(state_api, address)), up_ips)
        if not lost:
            return  # Ray knows already: it ends the attempts itself
        groups, stopped = list_placement_groups(state_api, address), False
        for sid, job in sorted(current.items()):
            held = {job.get("driver_node_id")} | {
                bundle.get("node_id") for group in groups
                if job.get("job_id") and group.get("creator_job_id") == job["job_id"] and group.get("state") != "REMOVED"
                for bundle in group.get("bundles") or []}
            hit = [lost[node] for node in sorted(held) if node in lost]
            if hit:
                self.stop_node_lost(sid, hit, down, jobs_api)
                stopped = True
        if stopped:
            self.start_workers(down)

    def start_workers(self, down):
        """Start again the worker containers of ``down`` that exited (not those that are gone: the heal playbook makes
        them); their entrypoint runs Ray from the settings the cluster play wrote, as a ``docker start`` by hand would.

        Ray marks the lost node dead as soon as the new raylet registers at the same address (about 5 s here), so the
        node comes back while the attempt is stopped and judged. Returns the names started (list of str).
        """
        if self.docker is None:
            return []
        import docker.errors  # pylint: disable=import-outside-toplevel
        started = []
        for name, why in sorted(down.items()):
            if why == "gone":
                continue
            try:
                self.docker().containers.get(name).start()
                started.append(name)
            except docker.errors.DockerException as exc:
                self.say("could not start the worker container %s again (%s): the heal playbook will" % (name, exc))
        if started:
            self.workers_started_at = self.clock()
            self.say("started the worker container(s) %s again" % ", ".join(started))
        return started

    def start_head(self):
        """Start the head's container again when it exited (on a docker host), and give it ``WORKER_START_S`` to answer
        with every worker ALIVE; True when it did (no playbook needed), False otherwise (the heal playbook then runs).

        Its entrypoint starts Ray from the settings the cluster play wrote and its services (the MLflow server) from
        their files; the head's GCS storage keeps the job table, and the workers' raylets reconnect to it.
        """
        name = self.config["head"].get("container")
        if not name or self.docker is None:
            return False
        import docker.errors  # pylint: disable=import-outside-toplevel
        try:
            container = self.docker().containers.get(name)
            deadline = self.clock() + HEAD_EXIT_S
            while container.status == "running" and self.clock() < deadline:
                # A killed head's dashboard refuses connections a moment before Docker says its container exited.
                self.sleep(0.5)
                container.reload()
            if container.status not in ("exited", "created"):
                return False
            container.start()
        except docker.errors.NotFound:
            return False  # gone: the heal playbook makes it
        except docker.errors.DockerException as exc:
            self.say("could not start the head's container %s again (%s): the heal playbook will" % (name, exc))
            return False
        self.say("started the head's container %s again" % name)
        return self.whole_by(self.clock() + WORKER_START_S,
                             "healed: the head's container started again answers and every worker is ALIVE")

    def whole_by(self, deadline, healed):
        """Look every second until ``deadline`` (seconds since the epoch) whether every worker is ALIVE
        (:meth:`workers_alive`); True, saying ``healed``, once they are, else False."""
        while self.clock() < deadline:
            if self.workers_alive() >= int(self.config["expect_workers"]):
                self.say(healed)
                return True
            self.sleep(1.0)
        return False

    def stop_node_lost(self, sid, nodes, down, jobs_api):
        """Stop an attempt that lost a worker: its ``logs/stopped_by.json`` (cause ``node_lost``) first, then Ray's stop.

        :param nodes: list of node dicts (``mvp_ray.node_to_dict``) the attempt held that have no running container.
        :param down: dict container name -> its state (:meth:`worker_containers`).
        """
        now = self.clock()
        ips = ", ".join(n.get("node_ip") or "?" for n in nodes)
        containers = "; ".join("%s %s" % (name, why) for name, why in sorted(down.items()))
        note = {"by": "the job controller %s" % self.config["name"], "cause": "node_lost",
                "why": "the worker container(s) %s; Ray still listed the node(s) %s it ran on ALIVE" % (containers, ips),
                "nodes": [{"node_id": n.get("node_id"), "node_ip": n.get("node_ip")} for n in nodes],
                "containers": dict(down), "at": _stamp(now), "at_s": now, "status_before": "running"}
        _write_json(attempt_file(self.config, sid, "stopped_by"), note)
        self.say("%s: stopped: it lost a worker (%s)" % (sid, note["why"]))
        jobs_api.stop_job(sid)

    # -- deadlines ---------------------------------------------------------------------------------------------

    def check_pending(self, current, job, jobs_api, state_api, address):
        """Stop an attempt PENDING in Ray longer than ``pending_timeout_s`` (its entrypoint never started): the one
        PENDING deadline of a followed run (the play that submitted it waits for it, it sets none of its own).

        Its ``logs/stopped_by.json`` says what the driver asked for (its job spec's ``entrypoint_resources`` and
        ``entrypoint_num_cpus``) and what the ALIVE nodes offer, with the cause ``infeasible`` when no node could ever
        hold it (``mvp_ray.pending_stop``, the rule ``ray_job``'s own deadline uses).
        """
        started = (job.get("start_time") or 0) / 1000.0
        timeout = int(self.config["pending_timeout_s"])
        if not timeout or not started or self.clock() - started <= timeout:
            return
        spec = read_json(attempt_file(self.config, current, "job_spec"))
        asked = dict(job, submission_id=current)
        for key in ("entrypoint_resources", "entrypoint_num_cpus"):
            if spec.get(key) is not None:
                asked[key] = spec[key]
        if "nodes" not in self.pass_cache:
            self.pass_cache["nodes"] = list_nodes(state_api, address)
        note = pending_stop(asked, timeout, self.pass_cache["nodes"],
                            "The job was stopped by the job controller %s (job_controller_pending_timeout_s). Start "
                            "workers carrying that resource (ray_worker role), or raise job_controller_pending_timeout_s."
                            % self.config["name"])
        self.stop_stalled(current, jobs_api, note["why"], cause=note.get("cause"), stall="pending_timeout",
                          demand=note["demand"],
                          offers=note["offers"])

    def save_placement(self, current, job, state_api, address):
        """Write ``debug/placement.json`` of a RUNNING attempt that has none: where Ray placed its driver
        (``mvp_ray.placement``, the file ``ray_job`` writes when the play waits for the placement). An attempt this
        controller starts is submitted without that wait; the placement snapshot of its ``debug/`` waits for this
        file, and the fault tests read the driver's node from it."""
        path = attempt_file(self.config, current, "placement")
        if os.path.exists(path) or not job.get("driver_node_id"):
            return
        if "nodes" not in self.pass_cache:
            self.pass_cache["nodes"] = list_nodes(state_api, address)
        where = placement(state_api, address, dict(job), self.config["worker_resource"], self.pass_cache["nodes"])
        if where:
            _write_json(path, where)

    def check_placement(self, current, job, jobs_api, state_api, address):
        """Stop an attempt whose placement group no node can hold waited past ``pg_pending_timeout_s``."""
        timeout = float(self.config["pg_pending_timeout_s"])
        if not timeout or not job.get("job_id"):
            return
        if "groups" not in self.pass_cache:  # one listing per pass for every run together
            self.pass_cache["groups"] = [g for g in list_placement_groups(state_api, address)
                                         if g.get("state") == "PENDING"]
        groups = self.pass_cache["groups"]
        if not groups:
            return
        if "nodes" not in self.pass_cache:
            self.pass_cache["nodes"] = list_nodes(state_api, address)
        nodes = self.pass_cache["nodes"]
        stalled = stalled_placement_groups(groups, job["job_id"], self.clock(), timeout, nodes,
                                           self.first_seen.setdefault(current, {}))
        if stalled:
            # The verdict's cause and evidence: what the job asked Ray for, and what the ALIVE nodes offer.
            self.stop_stalled(current, jobs_api, stalled_message(current, stalled, nodes, timeout), cause="infeasible",
                              demand=[bundle_shapes(group) for group, _age in stalled],
                              offers=alive_offers(nodes))

    def stop_stalled(self, current, jobs_api, why, cause=None, demand=None, offers=None, stall="stalled"):
        """Stop an attempt that cannot make progress, saying so in its ``logs/stopped_by.json`` first.

        :param cause: str or None, the verdict's cause (``infeasible``: no ALIVE node offers ``demand``); None
            leaves it ``stopped``.
        :param stall: str, what the ``run_stopped`` event names when ``cause`` is None: ``stalled``, or
            ``pending_timeout`` (PENDING past ``pending_timeout_s``).
        :param demand: list of str, the placement groups' bundle shapes; offers: dict node IP -> resources.
        """
        note = {"by": "the job controller %s" % self.config["name"], "why": why, "cause": cause,
                "demand": demand, "offers": offers,
                "at": _stamp(self.clock()), "status_before": "stalled"}
        note = {key: value for key, value in note.items() if value is not None}
        path = attempt_file(self.config, current, "stopped_by")
        if not os.path.exists(path):
            _write_json(path, note)
        self.notify("run_stopped", None, current, cause or stall, {"why": why}, cause=cause or stall,
                    summary="stopped by the job controller: %s" % why)
        self.say("%s: stopping it: %s" % (current, why))
        jobs_api.stop_job(current)

    # -- preemption ------------------------------------------------------------------------------------------

    def preempt(self, runs, table, jobs_api, state_api, address):
        """Follow the preemptions under way, or start one when the queue's first waiting job needs it.

        Sets ``self.urgent`` while a victim's next checkpoint is awaited (the service then passes every
        URGENT_POLL_S seconds). One preemption at a time: a new one is chosen only when none is under way.
        """
        self.urgent = False
        currents = {}
        for run in runs:
            state = run_state(self.config, run)
            if not state["ended"] and not state["next"]:
                currents[state["current"]] = state
        if self.follow_preemptions(currents, table, jobs_api):
            self.urgent = True
            return
        active = [j for j in table.values() if status_name(j.get("status")) in mvp_queue.ACTIVE
                  and mvp_queue.gate_options(j.get("entrypoint")) is not None]
        states = {j["submission_id"]: read_json(attempt_file(self.config, j["submission_id"], "queue"))
                  for j in active}
        started = mvp_queue.started_ids(states)
        if not any(states[sid].get("state") == "waiting" for sid in states) or not started.intersection(currents):
            return  # nobody waits, or no run this controller follows could make room
        if "nodes" not in self.pass_cache:
            self.pass_cache["nodes"] = list_nodes(state_api, address)
        resource = self.config["worker_resource"]
        totals = mvp_queue.worker_totals([n for n in self.pass_cache["nodes"] if n.get("state") == "ALIVE"
                                          and (n.get("resources_total") or {}).get(resource)])
        entries = mvp_queue.plan(active, totals, started)
        candidates = {}
        for sid in started.intersection(currents):
            spec = read_json(attempt_file(self.config, sid, "job_spec"))
            if os.path.exists(attempt_file(self.config, sid, "stopped_by")):
                continue  # stopped already (by a person, a deadline or a preemption)
            if status_name((table.get(sid) or {}).get("status")) == "RUNNING" and \
                    (spec.get("preemptible") or {}).get("value"):
                candidates[sid] = {"started_at": states[sid].get("admitted_at_s") or 0}
        choice = mvp_queue.choose_victims(entries, totals, candidates)
        if choice:
            self.start_preemption(choice, currents)
            if self.follow_preemptions(currents, table, jobs_api):
                self.urgent = True

    def start_preemption(self, choice, currents):
        """Write each victim's ``logs/preempt.json`` and the preemptor's ``logs/preempting.json`` (the decision)."""
        waiting, now = choice["preemptor"], self.clock()
        grace = float(self.config["preempt_grace_s"])
        victims = []
        for entry in choice["victims"]:
            sid = entry["submission_id"]
            spec = read_json(attempt_file(self.config, sid, "job_spec"))
            newest = latest_checkpoint(attempt_file(self.config, sid, "checkpoints")) or {}
            note = {"state": "waiting_for_checkpoint", "by": waiting["submission_id"],
                    "by_priority": waiting.get("priority", 0), "priority": entry.get("priority", 0),
                    "run": currents[sid]["run"], "decided_at": _stamp(now), "decided_at_s": now, "grace_s": grace,
                    "deadline_s": now + grace, "checkpoint_before": newest.get("step"),
                    "save_freq": _save_freq(spec), "by_controller": self.config["name"]}
            _write_json(attempt_file(self.config, sid, "preempt"), note)
            victims.append(sid)
        path = attempt_file(self.config, waiting["submission_id"], "preempting")
        record = read_json(path) or {"preemptions": []}
        record["preemptions"].append({"victims": victims, "decided_at": _stamp(now), "decided_at_s": now,
                                      "priority": waiting.get("priority", 0), "stopped": {}})
        _write_json(path, record)
        self.say("%s (priority %s) cannot start: preempting %s after their next complete checkpoint (at most %d s)"
                 % (waiting["submission_id"], waiting.get("priority", 0), ", ".join(
                     "%s (priority %s)" % (e["submission_id"], e.get("priority", 0)) for e in choice["victims"]),
                    grace))

    def follow_preemptions(self, currents, table, jobs_api):
        """Stop each victim whose next complete checkpoint arrived or whose grace time passed; True while any waits
        for its checkpoint, or was stopped and Ray still lists it RUNNING (what it holds is not free yet).

        A preemption whose preemptor no longer waits (it ended, was stopped, or started) is cancelled.
        """
        waiting = False
        for sid in sorted(currents):
            path = attempt_file(self.config, sid, "preempt")
            note = read_json(path)
            running = status_name((table.get(sid) or {}).get("status")) == "RUNNING"
            if note.get("state") == "stopped" and running:
                waiting = True  # stopped, its driver not yet ended: what it holds is not free yet
                continue
            if note.get("state") != "waiting_for_checkpoint" or not running:
                continue  # done, cancelled, or it ended on its own (judged as it ended)
            preemptor = table.get(note.get("by")) or {}
            if status_name(preemptor.get("status")) not in mvp_queue.ACTIVE or read_json(
                    attempt_file(self.config, note["by"], "queue")).get("state") == "admitted":
                note.update(state="cancelled", cancelled_at=_stamp(self.clock()),
                            why="%s no longer waits (%s)" % (note["by"], status_name(preemptor.get("status"))))
                _write_json(path, note)
                self.say("%s: preemption cancelled: %s" % (sid, note["why"]))
                continue
            now = self.clock()
            newest = latest_checkpoint(attempt_file(self.config, sid, "checkpoints")) or {}
            step, before = newest.get("step"), note.get("checkpoint_before")
            if step is not None and (before is None or step > before):
                why = "right after its checkpoint of step %d (waited %.1f s for it)" % (step, now - note["decided_at_s"])
            elif not _saves_checkpoints(note.get("save_freq")):
                why = "at once: it saves no checkpoint (trainer.save_freq %s)" % note.get("save_freq")
            elif now >= note["deadline_s"]:
                newest_text = "step %d" % step if step is not None else "none"
                why = ("at once: the grace time (job_controller_preempt_grace_s, %d s) passed before its next checkpoint; its "
                       "newest complete checkpoint is %s" % (note["grace_s"], newest_text))
            else:
                waiting = True
                continue
            self.stop_preempted(sid, note, newest, why, jobs_api)
        return waiting

    def stop_preempted(self, sid, note, newest, why, jobs_api):
        """Stop a victim: its ``logs/stopped_by.json`` (cause ``preempted``) first, then Ray's stop."""
        now = self.clock()
        checkpoint = newest.get("path")
        if checkpoint:
            checkpoint = os.path.join(self.config["shared_root"], os.path.relpath(checkpoint, self.config["shared_dir"]))
        stopped = {"by": "the job controller %s" % self.config["name"], "cause": "preempted",
                   "preempted_by": note["by"], "preemptor_priority": note["by_priority"], "priority": note["priority"],
                   "why": "preempted for %s %s" % (note["by"], why), "step": newest.get("step"),
                   "checkpoint": checkpoint, "waited_s": round(now - note["decided_at_s"], 1),
                   "at": _stamp(now), "at_s": now, "status_before": "running"}
        path = attempt_file(self.config, sid, "stopped_by")
        if not os.path.exists(path):
            _write_json(path, stopped)
        note.update(state="stopped", stopped_at=_stamp(now), stopped_at_s=now, step=newest.get("step"), why=why)
        _write_json(attempt_file(self.config, sid, "preempt"), note)
        record_path = attempt_file(self.config, note["by"], "preempting")
        record = read_json(record_path)
        for item in record.get("preemptions") or []:
            if sid in item.get("victims", []):
                item.setdefault("stopped", {})[sid] = {"at": _stamp(now), "at_s": now, "step": newest.get("step"),
                                                       "waited_s": stopped["waited_s"], "why": why}
        if record:
            _write_json(record_path, record)
        self.say("%s: preempted for %s %s" % (sid, note["by"], why))
        jobs_api.stop_job(sid)

    # -- an ended attempt ----------------------------------------------------------------------------------

    def judge(self, state, lost_with_head=False):
        """Record the ended attempt (``mvp.ray.record``), then end the run or decide its next attempt."""
        current = state["current"]
        status = read_json(attempt_file(self.config, current, "status"))
        ran = {"rc": 0}
        if not (lost_with_head and status_name(status.get("status")) in TERMINAL_STATUSES and status.get("verdict")):
            # An attempt the new head does not know keeps the record it got when it ended (e.g. stopped by
            # down.yml before the cluster went away); any other ended attempt is recorded now.
            ran = self.playbook(self.config["playbooks"]["record"], record_vars(current, lost_with_head),
                                "record-" + current)
            status = read_json(attempt_file(self.config, current, "status"))
        verdict = status if status.get("verdict") else None  # status.json holds the verdict's fields beside Ray's status
        if ran.get("rc") != 0 or not verdict:
            why = _playbook_failure(self.config["playbooks"]["record"], ran)
            if ran.get("unreachable"):
                raise HeadLost("recording %s: %s" % (current, why))
            self.say("%s: its record could not be written (%s); trying again next pass" % (current, why))
            return
        spec = read_json(attempt_file(self.config, current, "job_spec"))
        decision = decide(spec, verdict, self.config["restart_causes"])
        self.say("%s: %s (%s); %s" % (current, verdict.get("verdict"), verdict.get("cause") or "-", decision["why"]))
        if not decision["restart"]:
            trained = verdict.get("verdict") in ("trained", "succeeded")
            self.end(state, "ended", trained, "%s: %s" % (current, decision["why"]) if trained else
                     "; ".join(decision["history"]) + ". " + decision["why"], verdict)
            return
        link = {"next": decision["next"]["submission_id"], "run": decision["next"]["info"]["run"],
                "attempt": decision["next"]["info"]["attempt"] - 1, "cause": verdict.get("cause"),
                "summary": verdict.get("summary") or "", "why": decision["why"], "by": "job controller",
                "decided_at": _stamp(self.clock())}
        path = attempt_file(self.config, current, "restart")
        if not os.path.exists(path):
            _write_json(path, link)
        self.continue_run(run_state(self.config, state["run"]))

    def continue_run(self, state):
        """Heal the cluster and start the decided next attempt (``state["next"]``) of the run."""
        previous = state["current"]
        spec = read_json(attempt_file(self.config, previous, "job_spec"))
        verdict = read_json(attempt_file(self.config, previous, "status"))
        decision = decide(spec, verdict, self.config["restart_causes"])
        if not decision["restart"] or decision["next"]["submission_id"] != state["next"]:
            self.end(state, "stopped", False, "the restart decision of %s changed since it was written (%s)"
                     % (previous, decision["why"]), verdict)
            return
        info = decision["next"]["info"]
        self.notify("run_preempted" if verdict.get("cause") == "preempted" else "attempt_continued", state["run"],
                    previous, state["next"], {"next": state["next"], "restart": info.get("restarts"),
                                              "of": info.get("max_restarts"), "preemptions": info.get("preemptions"),
                                              "why": decision["why"]}, verdict=verdict)
        if verdict.get("cause") == "cluster_changed" and not self.cluster_play_done(previous):
            return
        heal_started = self.clock()
        if not self.heal(previous):
            decided = _mtime(attempt_file(self.config, previous, "restart"))
            if self.clock() - decided > float(self.config["heal_timeout_s"]):
                self.end(state, "stopped", False, "the cluster could not be healed within %d s after %s ended (%s); "
                         "bring it back with site.yml and submit the run again with resume_from=%s"
                         % (int(self.config["heal_timeout_s"]), previous, verdict.get("cause"), previous), verdict)
            return
        nxt = decision["next"]
        start_started = self.clock()
        ran = self.playbook(self.config["playbooks"]["submit"], start_vars(nxt), "start-" + nxt["submission_id"])
        if os.path.isdir(os.path.join(jobs_dir(self.config), nxt["submission_id"])):
            self.say("%s: continued as %s (%s)" % (previous, nxt["submission_id"], decision["why"]))
            phases = {"next": nxt["submission_id"], "ended_at": verdict.get("end_time"),
                      "decided_at": _mtime(attempt_file(self.config, previous, "restart")),
                      "heal_s": round(start_started - heal_started, 1),
                      "start_s": round(self.clock() - start_started, 1), "started_at": self.clock()}
            path = attempt_file(self.config, previous, "continued")
            if not os.path.exists(path):
                _write_json(path, phases)
            return
        self.end(state, "stopped", False, "the next attempt %s could not be started: %s" % (
            nxt["submission_id"], _playbook_failure(self.config["playbooks"]["submit"], ran)), verdict)

    def cluster_play_done(self, attempt):
        """True once the cluster play that stopped ``attempt`` to change its nodes has ended (its done file)."""
        note = read_json(attempt_file(self.config, attempt, "interrupted_by"))
        done = note.get("done_file")
        if not done:
            return True
        try:
            if os.path.exists(host_path(self.config, done)):
                return True
        except ValueError:
            return True
        decided = _mtime(attempt_file(self.config, attempt, "restart"))
        return self.clock() - decided > float(self.config["heal_timeout_s"])

    def heal(self, attempt):
        """Bring every worker back; True when healed.

        On a docker host, worker containers that exited are started again first (:meth:`start_workers`) and the
        cluster is given ``WORKER_START_S`` to be whole; otherwise, or when it is not, the cluster playbook runs until
        every worker is back (at most ``heal_timeout_s``).
        """
        if self.workers_alive() >= int(self.config["expect_workers"]):
            return True
        down, _up = self.worker_containers()
        if down:
            self.start_workers(down)
        if self.whole_by(self.workers_started_at + WORKER_START_S,
                         "healed: the worker container(s) started again joined the cluster"):
            return True
        within, delay = float(self.config["heal_timeout_s"]), float(self.config["heal_delay_s"])
        self.say("healing the cluster for %s: %s" % (attempt, self.config["playbooks"]["heal"]))
        self.heartbeat(self.runs, "healing the cluster (at most %d s) for %s" % (within, attempt))
        ran = mvp_playbook_run.run_until_success(within, delay, lambda: self.playbook(
            self.config["playbooks"]["heal"], {}, "heal-" + attempt))
        if ran.get("rc") == 0:
            self.say("healed in %d run(s): %s" % (ran["attempts"], "; ".join(
                mvp_playbook_run.recap_lines(ran.get("hosts") or {}))))
            return True
        self.say("the heal did not succeed within %d s: %s" % (within, _playbook_failure(
            self.config["playbooks"]["heal"], ran)))
        return False

    def workers_alive(self):
        """How many ALIVE workers (nodes offering the worker resource) the head sees; 0 when it does not answer.

        On a docker host, 0 while Ray lists a worker node ALIVE that no running worker container has the address of
        (a killed container's node stays ALIVE until Ray's health checks fail or a new raylet registers there).
        """
        try:
            _jobs, state_api, address = self.clients()
            nodes = list_nodes(state_api, address)
        except (HeadLost, RayUnreachable, RayHttpError):
            return 0
        workers = self.alive_workers(nodes)
        _down, up_ips = self.worker_containers()
        if up_ips is not None and self.without_container(workers, up_ips):
            # A node Ray still lists ALIVE whose container is not running: a new attempt's placement group could be
            # put there. The cluster is whole once Ray knows it dead (its health checks, or a new raylet there).
            return 0
        return len(workers)

    def alive_workers(self, nodes):
        """The nodes Ray lists ALIVE that offer the worker resource (list of node dicts)."""
        resource = self.config["worker_resource"]
        return [n for n in nodes if n.get("state") == "ALIVE" and (n.get("resources_total") or {}).get(resource)]

    @staticmethod
    def without_container(workers, up_ips):
        """Of ``workers``, those no running worker container has the address of (dict node id -> node dict)."""
        return {n["node_id"]: n for n in workers if n.get("node_ip") not in up_ips}

    def head_lost(self, runs, why):
        """The head does not answer: heal the cluster (the runs' attempts are judged once it answers again)."""
        if self.head_lost_since is None:
            self.head_lost_since = self.clock()
            self.say("the Ray head was lost while %d run(s) were followed: %s" % (len(runs), why))
        if self.start_head() or self.heal("head"):
            self.head_lost_since = None
            self.head_replaced_at = self.clock()
            return
        if self.clock() - self.head_lost_since > float(self.config["heal_timeout_s"]):
            for run in runs:
                state = run_state(self.config, run)
                self.end(state, "stopped", False, "the Ray head was lost (%s) and the cluster could not be healed "
                         "within %d s; bring it back with site.yml and submit the run again with resume_from=%s"
                         % (why, int(self.config["heal_timeout_s"]), state["current"]))
            self.head_lost_since = None

    def end(self, state, how, trained, why, verdict=None):
        """Write the run's end into its first attempt's ``logs/run_end.json`` and stop following it; then its final
        ``logs/ledger.json``, and the ledger's summary line into ``run_end.json`` (``goodput``)."""
        record = end_record(how, trained, why, state["attempts"], verdict, self.clock())
        # The event first: a controller killed between the two ends the run again, and the same event is not written twice.
        self.notify("run_ended", state["run"], state["attempts"][-1], "end",
                    {"how": how, "trained": bool(trained), "why": why, "attempts": len(state["attempts"])},
                    verdict=verdict or None, cause=None if verdict else how)
        path = attempt_file(self.config, state["run"], "run_end")
        _write_json(path, record)
        self.known[state["run"]] = False
        self.say("run %s %s: %s" % (state["run"], how, why))
        ledger = self.keep_ledger(state["run"], force=True)
        if ledger:
            record["goodput"] = mvp_ledger.summary_line(ledger)
            _write_json(path, record)
            self.say("run %s: %s" % (state["run"], record["goodput"]))
            if os.path.exists(attempt_file(self.config, state["run"], "mlflow_run")):
                # the attempt's record (and its MLflow tags) came before this final ledger: put it on the MLflow run
                ran = self.playbook(self.config["playbooks"]["record"], ledger_vars(state["run"]),
                                    "ledger-" + state["run"])
                if ran.get("rc") != 0:
                    self.say("run %s: its ledger is not on its MLflow run: %s" % (state["run"], _playbook_failure(
                        self.config["playbooks"]["record"], ran)))
        self.ledger_written.pop(state["run"], None)
        self.ledger_errors.pop(state["run"], None)
        self.ledgers.forget(os.path.join(jobs_dir(self.config), sid) for sid in state["attempts"])

    def keep_ledger(self, run, force=False):
        """Write ``logs/ledger.json`` of ``run`` when its files changed since the last write, or LEDGER_REFRESH_S
        passed (``force``: always). Files only, no Ray call; a failure is one line of the log, never raised.

        :returns: dict, the ledger written, or None (unchanged, or the computation failed).
        """
        try:
            now = self.clock()
            sig = mvp_ledger.run_signature(jobs_dir(self.config), run)
            last = self.ledger_written.get(run)
            if not force and last and last[0] == sig and now - last[1] < LEDGER_REFRESH_S:
                return None
            ledger = mvp_ledger.compute_ledger(jobs_dir(self.config), run, now, self.ledgers)
            _write_json(attempt_file(self.config, run, "ledger"), ledger)
            self.ledger_written[run] = (sig, now)
            self.ledger_errors.pop(run, None)
            return ledger
        except Exception as exc:  # pylint: disable=broad-except
            why = "%s: %s" % (type(exc).__name__, exc)
            if self.ledger_errors.get(run) != why:  # one line per new failure, not one per pass
                self.say("run %s: its ledger could not be written: %s" % (run, why))
            self.ledger_errors[run] = why
            return None

    def record_capacity(self):
        """Append what the cluster holds now to ``<shared>/controller/capacity-YYYY-MM.jsonl``, at most once a minute.

        One line (``mvp_ledger_sum.capacity_line``): the ALIVE workers (nodes offering the worker resource) and their
        GPUs (``resources_total["GPU"]``: logical GPUs on a docker host), covering the seconds since this controller's
        previous line (0 for its first: a restarted controller does not claim the minutes it was away; at most
        ``mvp_ledger_sum.CAPACITY_MAX_GAP_S``). The node list of this pass is used when the pass read one; else one
        ``list_nodes`` call to the head, so at most one request a minute more. A head that does not answer writes no
        line (the time stays uncovered: ``ledger.yml`` says how much) and the next line after it covers 0 s. The file
        of each month is a new one (about 3 MB a month); ``mvp_ledger_sum.cluster_gpu_seconds`` integrates them.
        Never raises: the capacity record must not stop the controller.
        """
        now = self.clock()
        if self.capacity_at is not None and now - self.capacity_at < mvp_ledger_sum.CAPACITY_EVERY_S:
            return
        try:
            nodes = self.pass_cache.get("nodes")
            if nodes is None:
                _jobs, state_api, address = self.clients()
                nodes = self.pass_cache["nodes"] = list_nodes(state_api, address)
        except (HeadLost, RayUnreachable, RayHttpError, RuntimeError) as exc:
            if self.capacity_at is not None:
                self.say("the cluster's capacity is not recorded while the head does not answer (%s)" % exc)
            self.capacity_at = None
            return
        workers = self.alive_workers(nodes)
        gpus = sum(float((n.get("resources_total") or {}).get("GPU") or 0) for n in workers)
        interval = 0.0 if self.capacity_at is None else min(now - self.capacity_at, mvp_ledger_sum.CAPACITY_MAX_GAP_S)
        path = mvp_ledger_sum.capacity_file(self.config["shared_dir"], now)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(mvp_ledger_sum.capacity_line(now, len(workers), gpus, interval))
        except OSError as exc:
            self.say("cannot append the cluster's capacity to %s: %s" % (path, exc))
            return
        self.capacity_at = now

    def heartbeat(self, runs, activity="following"):
        """Write ``<shared>/controller/heartbeat.json``: this controller, its host, pid, the runs it follows.

        ``activity`` says what it does now; a long step (a heal) writes it first with ``busy_until`` (seconds
        since the epoch) so a play that reads the heartbeat does not take the controller for dead meanwhile.
        """
        path = mvp_run_state.heartbeat_file(self.config["shared_dir"])
        now = self.clock()
        busy = float(self.config["heal_timeout_s"]) + 60 if activity != "following" else 0
        beat = {"name": self.config["name"], "host": socket.gethostname(), "pid": os.getpid(),
                "at": now, "poll_s": float(self.config["poll_s"]), "runs": list(runs),
                "head_requests": self.requests, "activity": activity, "busy_until": now + busy,
                "content": self.config.get("content") or {}}
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_text_atomic(path, json.dumps(beat, sort_keys=True) + "\n")
        except OSError as exc:
            self.say("cannot write the heartbeat %s: %s" % (path, exc))

    # -- telling people (webhooks, module_utils notify/mvp_notify) --------------------------------------------------

    def notify(self, kind, run, attempt, key, detail=None, verdict=None, cause=None, summary=None, only=None):
        """Write the event ``kind`` of ``attempt`` into the outbox for every endpoint that asks for it, then wake the
        sender: the one place the controller's decisions become webhooks (never raises: a failed write is logged).

        :param run: str or None (read from the attempt's ``config/controller.json``). :param key: str, what tells
            this event from another of its kind and attempt (``mvp_notify.event_id``: the same decision taken again
            gives the same id, and an event already in the outbox is not written again).
        :param detail, verdict, cause, summary: as ``mvp_notify.build_event``. :param only: list of endpoints or None
            (every endpoint asking for ``kind``: the inventory's webhooks and the request's ``notify``).
        """
        try:
            run = run or read_json(attempt_file(self.config, attempt, "controller")).get("run") or attempt
            endpoints = [e for e in (only if only is not None else self.endpoints(attempt))
                         if mvp_notify.wants(e, kind)]
            eid = mvp_notify.event_id(run, attempt, kind, key)
            todo = [e for e in endpoints if not self.outbox.has(eid, e)]
            if not todo:
                return
            spec = read_json(attempt_file(self.config, attempt, "job_spec"))
            metrics = [m.get("key") if isinstance(m, dict) else m
                       for m in (self.config.get("key_metrics") or {}).get(spec.get("workload")) or []]
            secrets = [self.config.get("ray_auth_token")] + [str(v) for v in (self.config.get("env") or {}).values()] + [
                e.get("secret") for e in self.config.get("webhooks") or []]
            event = mvp_notify.build_event(
                kind, run, attempt, os.path.join(jobs_dir(self.config), attempt), key, self.clock(), detail=detail,
                verdict=verdict, spec=spec, job_dir=self.node_path(os.path.join(jobs_dir(self.config), attempt)),
                key_metrics=[m for m in metrics if m], secrets=secrets, node_path=self.node_path, summary=summary,
                cause=cause)
            self.outbox.put(event, todo)
            self.wake()
        # Telling people never stops following runs.
        except Exception as exc:  # pylint: disable=broad-except
            self.say("%s: the event %s could not be written to the outbox: %s: %s"
                     % (attempt, kind, type(exc).__name__, exc))

    def endpoints(self, attempt):
        """The endpoints of ``attempt``'s events (list of dict with ``source`` and ``index``): the inventory's
        ``webhooks`` and its request's ``notify`` (``config/job_spec.json``, read once per attempt)."""
        if attempt not in self.request_endpoints:
            given = (read_json(attempt_file(self.config, attempt, "job_spec")).get("request") or {}).get("notify")
            try:
                own = mvp_notify.check_endpoints(given, "notify", allow_secret=False)
            except mvp_notify.NotifyError as exc:
                self.say("%s: its request's notify is ignored: %s" % (attempt, exc))
                own = []
            self.request_endpoints[attempt] = [dict(e, source="request", index=i) for i, e in enumerate(own)]
        hooks = [dict(e, source="config", index=i) for i, e in enumerate(self.config.get("webhooks") or [])]
        return hooks + self.request_endpoints[attempt]

    def notify_watch(self, run, current):
        """The events a pass looks for while an attempt is PENDING or RUNNING: a wait in the queue longer than
        ``notify_queue_wait_s`` (its ``logs/queue.json``: state ``waiting`` since ``since_s``), and for each endpoint
        with ``checkpoint_every`` N the first complete checkpoint (``mvp_runs.latest_checkpoint``) at or past each
        multiple of N."""
        endpoints = self.endpoints(current)
        wait_s = float(self.config.get("notify_queue_wait_s") or 0)
        if wait_s and any(mvp_notify.wants(e, "queue_waiting") for e in endpoints):
            queue = read_json(attempt_file(self.config, current, "queue"))
            waited = self.clock() - float(queue.get("since_s") or self.clock())
            if queue.get("state") == "waiting" and waited > wait_s:
                self.notify("queue_waiting", run, current, "waiting", {
                    "waited_s": round(waited), "why": "waiting in the queue for %d s (notify_queue_wait_s %d): %s"
                    % (waited, wait_s, queue.get("shape_text") or "")}, summary="waiting in the queue")
        every = [e for e in endpoints if e.get("checkpoint_every") and mvp_notify.wants(e, "checkpoint")]
        if not every:
            return
        step = (latest_checkpoint(attempt_file(self.config, current, "checkpoints")) or {}).get("step")
        for endpoint in every if step else []:
            passed = step // int(endpoint["checkpoint_every"])
            if passed:
                self.notify("checkpoint", run, current, "%d:%d" % (endpoint["checkpoint_every"], passed),
                            {"step": step, "checkpoint_every": endpoint["checkpoint_every"]},
                            summary="a complete checkpoint at step %d" % step, only=[endpoint])

    def node_path(self, path):
        """``path`` on this host as the nodes see it (under ``shared_root``), or unchanged outside ``shared_dir``."""
        rel = os.path.relpath(path, self.config["shared_dir"])
        return path if rel.startswith("..") else os.path.join(self.config["shared_root"], rel)


def _network_ips(container):
    """A Docker SDK container's address on each of its networks (dict network name -> str, '' once it stopped)."""
    networks = container.attrs.get("NetworkSettings", {}).get("Networks", {}) or {}
    return {name: (net or {}).get("IPAddress") or "" for name, net in networks.items()}


def _write_json(path, value):
    """Write a state file of a job directory: ``value`` as indented JSON, atomically (``write_text_atomic``)."""
    write_text_atomic(path, json.dumps(value, indent=2, sort_keys=True) + "\n")


def _stamp(seconds):
    """``2026-11-28T03:04:05Z`` for seconds since the epoch (str)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _save_freq(spec):
    """The trainer's ``trainer.save_freq`` from a job spec: an int (0 when the job is not a trainer or saves never),
    or verl's SFT word ``after_each_epoch`` (a checkpoint at each epoch's last step)."""
    value = (spec.get("trainer_overrides") or {}).get("trainer.save_freq")
    if value == AFTER_EACH_EPOCH:
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _saves_checkpoints(save_freq):
    """Whether a ``_save_freq`` value makes the trainer save periodically (bool)."""
    return save_freq == AFTER_EACH_EPOCH or (isinstance(save_freq, int) and save_freq > 0)


def _playbook_failure(playbook, ran):
    """One line saying how a playbook run ended and its last failed task (str)."""
    last = (ran.get("failed_tasks") or [{}])[-1]
    return "%s ended %s (rc %s)%s" % (playbook, ran.get("status"), ran.get("rc"),
                                      ": %s failed on %s: %s" % (last.get("task"), last.get("host"), last.get("msg"))
                                      if last else "")


def playbook_runner(config, python=None):
    """A callable(playbook, extra_vars, ident) that runs a playbook of the checkout with ansible-runner.

    Each run gets its own ``ident`` under ``<state_dir>/runner`` and only :func:`runner_env`'s variables;
    its result says ``unreachable`` when a host could not be reached.
    """
    folder = os.path.join(config["state_dir"], "runner")
    env = runner_env(config, python)

    def run(playbook, extra_vars, ident):
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        ran = mvp_playbook_run.run(os.path.join(config["project_dir"], playbook), config["inventory"], folder,
                                   "%s-%s" % (ident, stamp), extra_vars, env, config["project_dir"])
        ran["unreachable"] = any(c.get("unreachable") for c in ran.get("hosts", {}).values())
        return ran
    return run


def serve(config, python, say, stop):
    """Run the controller until ``stop()`` is true: a pass every ``poll_s`` seconds (holds the state dir's lock)."""
    os.makedirs(config["state_dir"], mode=0o700, exist_ok=True)
    lock = open(os.path.join(config["state_dir"], "lock"), "w")  # pylint: disable=consider-using-with
    deadline = time.time() + 60
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.time() > deadline or stop():
                say("another controller holds %s/lock: exiting" % config["state_dir"])
                return 1
            time.sleep(1)
    docker = None
    if config["head"].get("container"):
        import docker as docker_sdk  # pylint: disable=import-outside-toplevel
        docker = docker_sdk.from_env
    controller = Controller(config, playbook_runner(config, python), docker, say)
    sender = mvp_notify.Sender(controller.outbox, config["webhooks"], retry_for_s=float(config["notify_retry_for_s"]),
                               say=say).start()
    controller.wake = sender.wake
    say("job controller %s started (pid %d): runs under %s, head %s" % (
        config["name"], os.getpid(), jobs_dir(config), config["head"]))
    while not stop():
        started = time.time()
        try:
            controller.tick()
        except Exception as exc:  # pylint: disable=broad-except
            say("a pass failed: %s: %s (trying again next pass)\n%s"
                % (type(exc).__name__, exc, traceback.format_exc(limit=6)))
        poll = URGENT_POLL_S if controller.urgent else float(config["poll_s"])
        time.sleep(max(URGENT_POLL_S, poll - (time.time() - started)))
    sender.stop(wait=False)  # what is pending stays in the outbox for the next controller
    return 0


QUICK_DEATH_S = 30
"""A controller that ends within this many seconds of its start died quickly: the keeper backs off."""

BACKOFF_MAX_S = 300
"""The longest pause (seconds) of the keeper between two starts of a controller that keeps dying."""


def backoff_s(failures, interval=2.0):
    """Seconds the keeper waits before the next start after ``failures`` quick deaths in a row (float):
    ``interval`` doubled per death, at most :data:`BACKOFF_MAX_S`; 0 without a failure."""
    return 0.0 if failures <= 0 else min(float(BACKOFF_MAX_S), float(interval) * 2 ** min(failures, 16))


def keeper_note(heartbeat, failures, next_start, why, now):
    """Put the keeper's word into the heartbeat file ``heartbeat`` (its other fields, ``at`` among them, kept: a
    dying controller stays not alive): ``keeper`` = ``{"failures", "next_start_at", "why", "at"}``, or removed when
    ``failures`` is 0. OSError is the caller's."""
    try:
        with open(heartbeat, encoding="utf-8") as handle:
            beat = json.load(handle)
    except (OSError, ValueError):
        beat = {}
    if not isinstance(beat, dict):
        beat = {}
    if failures:
        beat["keeper"] = {"failures": failures, "next_start_at": next_start, "why": why, "at": now}
    elif beat.pop("keeper", None) is None:
        return
    os.makedirs(os.path.dirname(heartbeat), exist_ok=True)
    write_text_atomic(heartbeat, json.dumps(beat, sort_keys=True) + "\n")


def keeper(directory, say, stop, interval=2.0, clock=time.time, sleep=time.sleep):
    """Start the services of ``directory`` again whenever their process ended (``mvp_service.keep``), until ``stop()``.

    A controller that died within :data:`QUICK_DEATH_S` of its start is started again after :func:`backoff_s`
    (2, 4, 8 ... at most 300 s), and the keeper says why: a line in its log with the controller log's last lines, and
    ``keeper`` in the heartbeat file (``status.yml`` shows it), found through the configuration beside ``directory``.
    """
    started_at, died_at, failures, next_start = {}, {}, 0, 0.0
    settings = os.path.join(os.path.dirname(os.path.abspath(directory)), "settings.json")
    while not stop():
        now = clock()
        for name in started_at:
            if name not in died_at and mvp_service.running_pid(mvp_service.paths(directory, name)["pid"]) is None:
                died_at[name] = now  # seen ended (within one interval of its end)
        if now >= next_start:
            for name in mvp_service.keep(directory, say):
                say("started %s again" % name)
                lived = died_at.pop(name, now) - started_at.get(name, float("-inf"))
                started_at[name] = now
                failures = failures + 1 if lived < QUICK_DEATH_S else 0
                if not failures:
                    continue
                config = read_json(settings)
                log = os.path.join(os.path.dirname(settings), "controller.log")
                why = "the job controller ended %.0f s after its start, %d time(s) in a row; its log (%s) ends: %s" % (
                    lived, failures, log, mvp_service.log_tail(log) or "-")
                next_start = now + backoff_s(failures, interval)
                say("%s; next start in %.0f s" % (why, next_start - now))
                if config.get("shared_dir"):
                    try:
                        keeper_note(mvp_run_state.heartbeat_file(config["shared_dir"]), failures,
                                    next_start, why, now)
                    except OSError as exc:
                        say("cannot write the keeper's note into the heartbeat: %s" % exc)
        sleep(interval)
    return 0


def main(argv=None):
    """Command line: ``run --config FILE``, ``keep --dir DIR`` or ``heal --config FILE``; returns the exit code (int)."""
    parser = argparse.ArgumentParser(prog="mvp-controller", description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="follow every handed-over run")
    run.add_argument("--config", required=True)
    keep = sub.add_parser("keep", help="start the controller again whenever it dies")
    keep.add_argument("--dir", required=True)
    heal = sub.add_parser("heal", help="run the cluster playbook once, exactly as a heal does; print its result")
    heal.add_argument("--config", required=True)
    heal.add_argument("--inventory", action="append", default=[], help="one more inventory source")
    args = parser.parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    def say(line):
        sys.stdout.write("%s %s\n" % (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), line))
        sys.stdout.flush()
    if args.command == "keep":
        return keeper(args.dir, say, lambda: bool(stopping))
    clean_environ(os.environ)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        say(str(exc))
        return 2
    if args.command == "heal":
        config["inventory"] = list(config["inventory"]) + list(args.inventory)
        ran = playbook_runner(config, sys.executable)(config["playbooks"]["heal"], {}, "heal-by-hand")
        sys.stdout.write(json.dumps({k: ran.get(k) for k in ("rc", "status", "unreachable", "failed_tasks", "hosts")},
                                    indent=2, sort_keys=True) + "\n")
        return 0 if ran.get("rc") == 0 else 1
    return serve(config, sys.executable, say, lambda: bool(stopping))


if __name__ == "__main__":
    raise SystemExit(main())
