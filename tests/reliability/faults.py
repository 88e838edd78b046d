#!/usr/bin/env python3
"""Fault suite: kill and restart nodes, submit concurrently, tear down and bring up again.

Runs real ``ansible-playbook`` and ``docker`` commands against a running cluster
(the local inventory's, or a molecule scenario's) and checks, for each case,
what the playbooks did: the PLAY RECAP of the healing ``site.yml`` (which hosts
changed), Ray's node table read on the head (every worker ALIVE, which node ids
are new), the containers' start times, and the files under the shared folder on
the docker host. Prints a table (case, expected, observed, result) and exits 1
when any case fails, with the tail of the failed case's playbook output on
stderr.

The cases kill, restart and remove the inventory's node containers: point it
only at a cluster made for that (``inventories/local`` or ``molecule/faults``).

Usage:
    python tests/reliability/faults.py --inventory inventories/local \\
        --host-shared /srv/mvp/private [--only CASE ...]
"""
import argparse
import base64
import json
import os
import re
import subprocess
import sys
import time
import traceback
import urllib.request

import yaml

from suite import differences, head_state, print_table
from suite import listing as suite_listing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
# Hard limit of one playbook run (a hang fails the case instead of the suite).
PLAYBOOK_TIMEOUT = 900
# Hard limit of collect.yml -e wait=true for a job whose driver node was killed.
COLLECT_TIMEOUT = 300
# Ray job states that are not final.
ACTIVE_JOB_STATES = ("PENDING", "RUNNING")
# Ray's temp/session folders, should a cluster keep them on the shared storage.
# Ray's temp/session folders, should a cluster keep them on the shared storage.
SESSION_DIR = re.compile(r"^session_")
# Seconds Ray may keep a killed raylet's node ALIVE after site.yml returns (its health checks).
STALE_NODE_TIMEOUT = 90
DEBUG_KINDS = ("ray_status", "ray_job_list", "ray_list_nodes", "ray_list_actors")



class CaseFailed(Exception):
    """A precondition or step of a case failed; the message says which."""


class Cluster:
    """The inventory's topology and what docker and the Ray head say about it."""

    def __init__(self, inventory, host_shared):
        self.inventory = inventory
        self.host_shared = host_shared
        proc = subprocess.run(["ansible-inventory", "-i", inventory, "--list"], capture_output=True,
                              text=True, cwd=ROOT, env=ENV, check=True)
        data = json.loads(proc.stdout)
        hostvars = data.get("_meta", {}).get("hostvars", {})

        def hosts(group):
            return sorted(data.get(group, {}).get("hosts", []))

        self.head = hosts("ray_head")[0]
        self.workers = hosts("ray_workers")
        self.docker_hosts = hosts("docker_hosts")
        self.nodes = [self.head] + self.workers
        self.container = {h: hostvars.get(h, {}).get("mvp_container_name") or h for h in self.nodes}
        # The first worker's inventory settings (raw, as ansible-inventory lists them).
        self.worker_vars = hostvars.get(self.workers[0], {}) if self.workers else {}
        head_vars = hostvars.get(self.head, {})
        self.python = head_vars.get("mvp_ray_python", "/opt/mvp/venv/bin/python")
        self.address = "http://127.0.0.1:%s" % head_vars.get("mvp_ray_dashboard_port", 8265)
        temp_dir = head_vars.get("mvp_ray_temp_dir", "/tmp/ray")
        self.token_path = temp_dir.rstrip("/") + "/mvp_auth_token"
        self.network = head_vars.get("mvp_docker_network", "mvp-ray-net")
        # Non-empty (possibly a template): the head keeps its GCS tables across a restart. The ray_head role's
        # knob, set in the inventory only to change it: else the role's default.
        with open(os.path.join(ROOT, "roles", "ray_head", "defaults", "main.yml"), encoding="utf-8") as handle:
            gcs_default = yaml.safe_load(handle)["ray_head_gcs_storage_path"]
        self.gcs_storage = str(head_vars.get("ray_head_gcs_storage_path", gcs_default) or "").strip()
        # The head's MLflow tracking server (mvp_mlflow_*), reached from the docker host at the head's IP.
        self.mlflow = head_vars.get("mvp_mlflow_enabled", True) not in (False, "false", "False")
        self.mlflow_port = int(head_vars.get("mvp_mlflow_port", 5000))
        # Its basic auth (mvp_mlflow_auth): the user, and the password site.yml generated into the inventory's
        # .secrets folder (mvp_mlflow_password_file's default).
        folder = inventory if os.path.isdir(inventory) else os.path.dirname(inventory)
        self.mlflow_user = head_vars.get("mvp_mlflow_username", "mvp")
        self.mlflow_password_file = os.path.join(folder, ".secrets", "mlflow_password")

    # --- docker -----------------------------------------------------------
    def starts_ray_itself(self, host):
        """Whether the node's container starts Ray itself (its command is the node entrypoint mvp_ray_node.py)."""
        record = self.inspect(host) or {}
        return any("mvp_ray_node.py" in str(arg) for arg in (record.get("Config") or {}).get("Cmd") or [])

    def inspect(self, host):
        """Return docker inspect's record of a node's container, or None when it does not exist."""
        proc = subprocess.run(["docker", "inspect", self.container[host]], capture_output=True, text=True)
        return json.loads(proc.stdout)[0] if proc.returncode == 0 else None

    def ip(self, host):
        """The container's IPs on its networks (a set; empty when it is not running)."""
        info = self.inspect(host)
        if not info or not info["State"]["Running"]:
            return set()
        return {n["IPAddress"] for n in info["NetworkSettings"]["Networks"].values() if n.get("IPAddress")}

    def started_at(self, host):
        """When the container last started (docker's State.StartedAt), or None."""
        info = self.inspect(host)
        return info["State"]["StartedAt"] if info else None

    def network_exists(self):
        """True when the nodes' bridge network exists."""
        return subprocess.run(["docker", "network", "inspect", self.network], capture_output=True).returncode == 0

    def docker(self, *args):
        """Run a docker command on a node's container; raise CaseFailed when it fails."""
        proc = subprocess.run(["docker"] + list(args), capture_output=True, text=True, timeout=180)
        if proc.returncode:
            raise CaseFailed("docker %s: %s" % (" ".join(args), proc.stderr.strip()))
        return proc.stdout

    # --- Ray, read on the head ----------------------------------------------
    def head_state(self):
        """Ray's node and job tables read on the head, or None when the head does not answer."""
        return head_state(self.container[self.head], self.python, self.address, self.token_path)

    def alive(self):
        """{host: set of the Ray node ids the head lists ALIVE at that running container's IP}, for every
        node (a head node for the head, worker nodes for workers), or None when the head does not answer.
        A killed raylet's node stays ALIVE until Ray's health checks fail: a host can have two ids."""
        state = self.head_state()
        if state is None:
            return None
        alive = [n for n in state["nodes"] if n["state"] == "ALIVE"]
        view = {}
        for host in self.nodes:
            ips = self.ip(host)
            view[host] = {n["node_id"] for n in alive
                          if n["is_head_node"] == (host == self.head) and n["node_ip"] in ips}
        return view

    def healthy(self):
        """True when every container runs and the head lists a node ALIVE at each one's IP."""
        view = self.alive()
        return bool(view) and all(view.values())

    def active_jobs(self):
        """Submission ids of jobs Ray has PENDING or RUNNING (None when the head does not answer)."""
        state = self.head_state()
        if state is None:
            return None
        return [j["submission_id"] for j in state["jobs"] if j["status"] in ACTIVE_JOB_STATES]

    def job_status(self, submission_id):
        """Ray's status of one job, or None."""
        state = self.head_state() or {"jobs": []}
        return next((j["status"] for j in state["jobs"] if j["submission_id"] == submission_id), None)


class Playbook:
    """One finished ansible-playbook run."""

    def __init__(self, argv, rc, output, seconds, timed_out=False):
        self.argv, self.rc, self.output, self.seconds, self.timed_out = argv, rc, output, seconds, timed_out
        self.label = argv[3] if len(argv) > 3 else ""

    @property
    def text(self):
        """The output with whitespace runs collapsed (Ansible wraps long lines)."""
        return " ".join(self.output.split())

    def recap(self):
        """{host: {'ok': n, 'changed': n, 'unreachable': n, 'failed': n}} from the PLAY RECAP."""
        rows = {}
        part = self.text.rsplit("PLAY RECAP", 1)
        if len(part) < 2:
            return rows
        for match in re.finditer(r"(\S+) : ok=(\d+) changed=(\d+) unreachable=(\d+) failed=(\d+)", part[1]):
            rows[match.group(1)] = dict(zip(("ok", "changed", "unreachable", "failed"),
                                            map(int, match.group(2, 3, 4, 5))))
        return rows

    def changed(self, host):
        """changed= of a host in the RECAP (None when the host is not in it)."""
        return self.recap().get(host, {}).get("changed")


def start_playbook(cluster, playbook, extra=()):
    """Start ansible-playbook in the background; return (argv, Popen)."""
    argv = ["ansible-playbook", "-i", cluster.inventory, os.path.join(ROOT, playbook)] + list(extra)
    return argv, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  cwd=ROOT, env=ENV, start_new_session=True)


def finish_playbook(argv, proc, started, timeout):
    """Wait for a started playbook; kill its process group at the timeout."""
    try:
        output, _ = proc.communicate(timeout=max(1, timeout - (time.time() - started)))
        return Playbook(argv, proc.returncode, output, time.time() - started)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        output, _ = proc.communicate()
        return Playbook(argv, None, output, time.time() - started, timed_out=True)


def run_playbook(cluster, playbook, extra=(), timeout=PLAYBOOK_TIMEOUT):
    """Run one playbook to its end (or its timeout) and return the Playbook."""
    started = time.time()
    argv, proc = start_playbook(cluster, playbook, extra)
    return finish_playbook(argv, proc, started, timeout)


def listing(folder, hashes=False):
    """{relative path: (size, mtime_ns[, sha256])} of everything under ``folder`` (Ray session folders left out)."""
    return suite_listing(folder, hashes=hashes, skip_dir=SESSION_DIR)


def job_dirs(cluster):
    """Names of the job directories under <host shared>/jobs."""
    jobs = os.path.join(cluster.host_shared, "jobs")
    return sorted(d for d in os.listdir(jobs) if os.path.isdir(os.path.join(jobs, d))) if os.path.isdir(jobs) else []


class Case:
    """What one case saw: notes for the observed column, problems that fail it, and the outputs."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.notes, self.problems, self.runs = [], [], []

    def note(self, text):
        """Add ``text`` to the observed column."""
        self.notes.append(text)

    def check(self, condition, problem):
        """Record ``problem`` when ``condition`` is false; return the condition."""
        if not condition:
            self.problems.append(problem)
        return bool(condition)

    def play(self, playbook, extra=(), timeout=PLAYBOOK_TIMEOUT, label=None):
        """Run a playbook, keep its output for the failure dump, and note its rc and time."""
        run = run_playbook(self.cluster, playbook, extra, timeout)
        self.keep(run, label or playbook)
        return run

    def keep(self, run, label):
        """Keep a finished run (for the failure dump) and note its rc and time."""
        run.label = label
        self.runs.append(run)
        self.note("%s rc=%s %.0fs" % (label, "TIMEOUT" if run.timed_out else run.rc, run.seconds))

    def ensure_cluster(self):
        """Start from a full cluster: heal with site.yml when a node is missing (a setup step)."""
        if self.cluster.healthy():
            return
        run = self.play("site.yml", label="setup site.yml")
        if run.rc != 0 or not self.cluster.healthy():
            raise CaseFailed("setup: the cluster is not whole (rc=%s) and site.yml did not heal it" % run.rc)

    def wait_jobs_idle(self, timeout=300):
        """Wait until Ray has no PENDING or RUNNING job (a setup step)."""
        deadline = time.time() + timeout
        while True:
            active = self.cluster.active_jobs()
            if active == []:
                return
            if time.time() > deadline:
                raise CaseFailed("setup: jobs still active after %ds: %s" % (timeout, active))
            time.sleep(3)

    def all_workers_alive(self, what):
        """Check that the head lists every worker ALIVE; return the view."""
        view = self.cluster.alive()
        if not self.check(view is not None, "%s: the head does not answer" % what):
            return None
        missing = [h for h in self.cluster.nodes if not view[h]]
        self.check(not missing, "%s: not ALIVE on the head: %s" % (what, ", ".join(missing)))
        if not missing:
            self.note("%s: head + %d workers ALIVE" % (what, len(self.cluster.workers)))
        return view


# --- the cases -------------------------------------------------------------

def case_killed_worker(case):
    """docker kill one worker; site.yml recreates only it and it rejoins."""
    cluster = case.cluster
    case.ensure_cluster()
    victim = cluster.workers[0]
    before = cluster.alive()
    starts = {h: cluster.started_at(h) for h in cluster.nodes}
    cluster.docker("kill", cluster.container[victim])
    run = case.play("site.yml")
    case.check(run.rc == 0, "site.yml rc=%s" % run.rc)
    recap = run.recap()
    changed = {h: recap.get(h, {}).get("changed") for h in cluster.docker_hosts + cluster.nodes}
    case.note("changed: " + " ".join("%s=%s" % kv for kv in sorted(changed.items())))
    case.check((changed[victim] or 0) > 0, "%s (killed) changed=%s, expected > 0" % (victim, changed[victim]))
    for host in cluster.nodes:
        if host != victim:
            case.check(changed[host] == 0, "%s changed=%s, expected 0" % (host, changed[host]))
    # The docker host may only start the killed container again: at most that one change (none when the
    # start is delegated from the node's own play and counted there). Which containers restarted is
    # checked below from docker's start times.
    for host in cluster.docker_hosts:
        case.check(changed[host] is not None and changed[host] <= 1,
                   "%s changed=%s, expected 0 or 1 (the killed container's start)" % (host, changed[host]))
    for host in cluster.nodes:
        restarted = cluster.started_at(host) != starts[host]
        case.check(restarted == (host == victim),
                   "%s container %s" % (host, "restarted" if restarted else "not restarted"))
    view = case.all_workers_alive("after site.yml")
    if not view:
        return
    new = view[victim] - before[victim]
    case.check(new, "%s: no new Ray node ALIVE, only its old id(s) %s" % (victim, sorted(view[victim])))
    others = [h for h in cluster.nodes if h != victim and view[h] != before[h]]
    case.check(not others, "Ray node ids changed on %s (restarted)" % ", ".join(others))
    # The killed raylet's old node stays ALIVE until Ray's health checks fail; it must then go.
    returned = time.time()
    while view[victim] & before[victim] and time.time() - returned < STALE_NODE_TIMEOUT:
        time.sleep(3)
        view = cluster.alive() or view
    stale = view[victim] & before[victim]
    case.check(not stale, "the killed raylet's node %s still ALIVE %ds after site.yml"
               % (sorted(stale), STALE_NODE_TIMEOUT))
    if new and not others and not stale:
        case.note("only %s has a new node id (old one gone after %ds)" % (victim, time.time() - returned))


def case_concurrent_submits(case):
    """Two submit.yml started at the same moment get two ids and two job directories."""
    cluster = case.cluster
    case.ensure_cluster()
    dirs_before = set(job_dirs(cluster))
    extra = ["-e", "workload=selftest", "-e", "wait=false"]
    started = time.time()
    first = start_playbook(cluster, "submit.yml", extra)
    second = start_playbook(cluster, "submit.yml", extra)
    runs = [finish_playbook(argv, proc, started, PLAYBOOK_TIMEOUT) for argv, proc in (first, second)]
    ids = []
    for number, run in enumerate(runs, 1):
        case.keep(run, "submit.yml #%d" % number)
        case.check(run.rc == 0, "submit.yml #%d rc=%s" % (number, run.rc))
        found = re.findall(r"Driver of (\S+)\s+\(workload\s+selftest\)\s+placed", run.text)
        case.check(len(set(found)) == 1,
                   "submit.yml #%d names %s submission ids" % (number, sorted(set(found)) or "no"))
        ids.append(found[0] if found else None)
    case.check(None not in ids and ids[0] != ids[1], "submission ids %s are not two different ones" % ids)
    new_dirs = sorted(set(job_dirs(cluster)) - dirs_before)
    case.note("ids %s" % ", ".join(map(str, ids)))
    case.check(new_dirs == sorted(i for i in ids if i), "new job directories %s, expected %s" % (new_dirs, ids))
    for name in new_dirs:
        spec_path = os.path.join(cluster.host_shared, "jobs", name, "config", "job_spec.json")
        try:
            with open(spec_path, encoding="utf-8") as handle:
                spec_id = json.load(handle).get("submission_id")
        except (OSError, ValueError) as exc:
            spec_id = "unreadable (%s)" % exc
        case.check(spec_id == name, "jobs/%s/config/job_spec.json has submission_id %s" % (name, spec_id))
    if len(new_dirs) == 2:
        case.note("2 job directories, job_spec.json ids match")


def case_worker_killed_during_job(case):
    """Kill the worker a selftest's driver runs on; collect.yml still returns with a status and a bundle, and the
    verdict is determined: the driver (and Ray's job supervisor beside it) died with that node, so the job is FAILED
    with the cause node_lost, and the dead node the verdict names is the one killed (its IP from the job's
    debug/placement.json, where Ray placed the driver), not a fixed name."""
    cluster = case.cluster
    case.ensure_cluster()
    submission_id = "faults-kill-%s-%04x" % (time.strftime("%Y%m%d-%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)
    # Held for 600 s: the job is still running when its driver's node is killed.
    run = case.play("submit.yml", ["-e", "workload=selftest", "-e", "wait=false",
                                   "-e", "submission_id=" + submission_id,
                                   "-e", '{"env_vars": {"MVP_SELFTEST_HOLD_SECONDS": "600"}}'])
    if not case.check(run.rc == 0, "submit.yml rc=%s" % run.rc):
        return
    deadline = time.time() + 60
    status = cluster.job_status(submission_id)
    while status != "RUNNING" and time.time() < deadline:
        time.sleep(2)
        status = cluster.job_status(submission_id)
    if not case.check(status == "RUNNING", "job %s is %s, not RUNNING" % (submission_id, status)):
        return
    job_dir = os.path.join(cluster.host_shared, "jobs", submission_id)
    with open(os.path.join(job_dir, "debug", "placement.json"), encoding="utf-8") as handle:
        driver_ip = json.load(handle)["driver_node_ip"]
    victim = next((h for h in cluster.workers if driver_ip in cluster.ip(h)), None)
    if not case.check(victim is not None, "driver IP %s is no worker container's" % driver_ip):
        return
    case.note("RUNNING, driver on %s" % victim)
    cluster.docker("kill", cluster.container[victim])
    run = case.play("collect.yml", ["-e", "submission_id=" + submission_id, "-e", "wait=true"],
                    timeout=COLLECT_TIMEOUT, label="collect.yml wait=true")
    case.check(not run.timed_out, "collect.yml still running after %ds (hang)" % COLLECT_TIMEOUT)
    case.check(run.rc == 0, "collect.yml rc=%s" % run.rc)
    status = re.search(r"job %s: (\w+) \((.{0,60})" % re.escape(submission_id), run.text)
    case.check(status and status.group(1) == "FAILED", "collect.yml says %s for %s, expected FAILED (its driver's "
               "node was killed)" % (status.group(1) if status else "no status", submission_id))
    case.check("verdict: FAILED [node_lost]" in run.text, "collect.yml's verdict line does not say FAILED [node_lost]")
    record = read_status(cluster, submission_id)  # the verdict ray_job_record judged (the entrypoint died too)
    lost = [e["text"].split()[1] for e in record.get("evidence") or []
            if e.get("source") == "ray list nodes" and e.get("text", "").startswith("node ")]
    case.check(record.get("status") == "FAILED" and record.get("cause") == "node_lost",
               "%s/logs/status.json: %s %s, expected FAILED, node_lost" % (
                   submission_id, record.get("status"), record.get("cause")))
    case.check(driver_ip in lost and driver_ip in (record.get("summary") or ""),
               "the verdict names the dead nodes %s (%s), not the killed %s (%s)" % (
                   lost, record.get("summary"), victim, driver_ip))
    if status:
        case.note("collect says %s (%s...); verdict %s: %s" % (status.group(1), status.group(2), record.get("cause"),
                                                                record.get("summary")))
    debug = os.listdir(os.path.join(job_dir, "debug"))
    kinds = [k for k in DEBUG_KINDS if any(re.match(r"^\d{8}T\d{6}Z-collect-%s\.txt$" % k, f) for f in debug)]
    case.check(kinds == list(DEBUG_KINDS), "collect bundle in debug/ has %s of %s" % (kinds, list(DEBUG_KINDS)))
    if kinds == list(DEBUG_KINDS):
        case.note("collect bundle (%d files)" % len(kinds))
    heal = case.play("site.yml", label="heal site.yml")
    case.check(heal.rc == 0, "heal site.yml rc=%s" % heal.rc)
    case.all_workers_alive("after heal")


def case_restarted_head(case):
    """docker restart the head; Ray runs on it again and every worker is ALIVE on it; job dirs untouched.

    A head container that starts Ray itself (docker hosts: the node entrypoint) has Ray back before
    site.yml runs, and site.yml changes nothing on it; otherwise site.yml starts it again.

    With the GCS tables kept on the head's disk (ray_head_gcs_storage_path) the workers' raylets
    reconnect: they keep their node ids, site.yml changes nothing on them, and Ray still lists the
    earlier jobs with their statuses. Without it the new head forgets them: site.yml restarts every
    worker against it (new node ids).
    """
    cluster = case.cluster
    case.ensure_cluster()
    if not job_dirs(cluster):  # something to keep: one finished job
        run = case.play("submit.yml", ["-e", "workload=selftest"], label="setup submit.yml")
        if run.rc != 0:
            raise CaseFailed("setup: the selftest submitted to have a job directory failed (rc=%s)" % run.rc)
    case.wait_jobs_idle()
    jobs_folder = os.path.join(cluster.host_shared, "jobs")
    jobs_before = listing(jobs_folder, hashes=True)
    before = cluster.alive()
    ray_jobs_before = {j["submission_id"]: j["status"] for j in cluster.head_state()["jobs"]}
    keeps = cluster.gcs_storage
    case.note("GCS tables %s" % ("kept on the head" if keeps else "in memory"))
    itself = cluster.starts_ray_itself(cluster.head)
    marked = mlflow_mark(cluster, case) if cluster.mlflow else None
    cluster.docker("restart", cluster.container[cluster.head])
    if itself:
        restarted = time.time()
        while time.time() - restarted < 120 and not (cluster.alive() or {}).get(cluster.head, set()) - before[cluster.head]:
            time.sleep(2)
        case.check((cluster.alive() or {}).get(cluster.head, set()) - before[cluster.head],
                   "the head's container did not start Ray by itself within 120 s of docker restart")
        case.note("Ray back on the head %.0f s after docker restart, before site.yml" % (time.time() - restarted))
        if marked:  # the container's command starts the tracking server again from its service file
            while time.time() - restarted < 180 and mlflow_call(cluster, "GET", "/health") != "OK":
                time.sleep(2)
            run = (mlflow_call(cluster, "GET", "/api/2.0/mlflow/runs/get?run_id=" + marked) or {}).get("run") or {}
            metrics = {m["key"]: (m["value"], m["step"]) for m in (run.get("data") or {}).get("metrics") or []}
            case.check(metrics.get("loss") == (1.5, 7), "the MLflow run made before the restart is not served after it "
                       "(%s)" % (metrics or "no answer within 180 s"))
            case.note("MLflow back %.0f s after docker restart, before site.yml, with the run made before it"
                      % (time.time() - restarted))
    run = case.play("site.yml")
    case.check(run.rc == 0, "site.yml rc=%s" % run.rc)
    recap = run.recap()
    changed = {h: recap.get(h, {}).get("changed") for h in cluster.docker_hosts + cluster.nodes}
    case.note("changed: " + " ".join("%s=%s" % kv for kv in sorted(changed.items())))
    if itself:
        case.check(changed[cluster.head] == 0, "%s changed=%s, expected 0 (its container started Ray itself)"
                   % (cluster.head, changed[cluster.head]))
    else:
        case.check((changed[cluster.head] or 0) > 0, "%s changed=%s, expected > 0 (Ray started again)"
                   % (cluster.head, changed[cluster.head]))
    for host in cluster.workers:
        if keeps:
            case.check(changed[host] == 0, "%s changed=%s, expected 0 (its raylet reconnects)" % (host, changed[host]))
        else:
            case.check((changed[host] or 0) > 0, "%s changed=%s, expected > 0 (restarted)" % (host, changed[host]))
    # The restarted container runs: nothing for the docker host to do.
    for host in cluster.docker_hosts:
        case.check(changed[host] == 0, "%s changed=%s, expected 0" % (host, changed[host]))
    view = case.all_workers_alive("after site.yml")
    if view:
        case.check(view[cluster.head] - before[cluster.head], "no new head node ALIVE")
        if keeps:
            moved = [h for h in cluster.workers if view[h] != before[h]]
            case.check(not moved, "workers with other node ids (restarted, not reconnected): %s" % ", ".join(moved))
            ray_jobs = {j["submission_id"]: j["status"] for j in (cluster.head_state() or {"jobs": []})["jobs"]}
            lost = {k: (v, ray_jobs.get(k)) for k, v in ray_jobs_before.items() if ray_jobs.get(k) != v}
            case.check(not lost, "Ray's job table lost or changed jobs (before, after): %s" % lost)
            if not moved and not lost:
                case.note("workers reconnected with their node ids; Ray still lists %d jobs" % len(ray_jobs_before))
        else:
            stale = [h for h in cluster.workers if view[h] & before[h]]
            case.check(not stale, "the new head lists the old node ids of %s" % ", ".join(stale))
    jobs_after = listing(jobs_folder, hashes=True)
    changes = differences(jobs_before, jobs_after)
    case.check(not changes, "job directories changed: %s" % changes[:10])
    if not changes:
        case.note("%d job dirs, %d entries unchanged" % (len(job_dirs(cluster)), len(jobs_after)))


def mlflow_call(cluster, method, route, body=None, timeout=5):
    """One call of the head's MLflow REST API from the docker host; the decoded JSON, or None without an answer."""
    ips = sorted(cluster.ip(cluster.head))
    if not ips:
        return None
    headers = {"Content-Type": "application/json"}
    if os.path.isfile(cluster.mlflow_password_file):
        with open(cluster.mlflow_password_file, encoding="utf-8") as handle:
            pair = "%s:%s" % (cluster.mlflow_user, handle.read().strip())
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    request = urllib.request.Request("http://%s:%d%s" % (ips[0], cluster.mlflow_port, route), method=method,
                                     data=json.dumps(body).encode("utf-8") if body is not None else None,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            text = answer.read().decode("utf-8")
    except (OSError, ValueError):
        return None
    return json.loads(text) if text.strip().startswith("{") else text


def mlflow_mark(cluster, case):
    """A run with one logged metric on the head's tracking server (the case's own experiment); its run id."""
    name = "faults-restarted-head"
    found = mlflow_call(cluster, "GET", "/api/2.0/mlflow/experiments/get-by-name?experiment_name=" + name)
    experiment = (found or {}).get("experiment", {}).get("experiment_id") or (
        mlflow_call(cluster, "POST", "/api/2.0/mlflow/experiments/create", {"name": name}) or {}).get("experiment_id")
    case.check(experiment, "the head's MLflow tracking server does not answer on port %d" % cluster.mlflow_port)
    run = (mlflow_call(cluster, "POST", "/api/2.0/mlflow/runs/create", {"experiment_id": experiment,
                                                                        "run_name": "before-restart"}) or {})["run"]
    mlflow_call(cluster, "POST", "/api/2.0/mlflow/runs/log-metric", {
        "run_id": run["info"]["run_id"], "key": "loss", "value": 1.5, "timestamp": int(time.time() * 1000), "step": 7})
    return run["info"]["run_id"]


def case_down_wrong_purge(case):
    """down.yml with a purge confirmation naming another folder fails before deleting anything."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    before = listing(cluster.host_shared)
    run = case.play("down.yml", ["-e", "mvp_down_purge_confirm=/wrong/path"])
    case.check(run.rc not in (0, None), "down.yml rc=%s, expected a failure" % run.rc)
    case.check("mvp_down_purge_confirm" in run.text, "the output does not name mvp_down_purge_confirm")
    changes = differences(before, listing(cluster.host_shared))
    case.check(not changes, "shared folder changed: %s" % changes[:10])
    gone = [h for h in cluster.nodes if not cluster.ip(h)]
    case.check(not gone, "node containers removed or stopped anyway: %s" % ", ".join(gone))
    case.check(cluster.network_exists(), "network %s removed anyway" % cluster.network)
    case.check(cluster.healthy(), "Ray is no longer up on every node")
    if not changes and not gone:
        case.note("shared folder and containers untouched")


def case_down_then_up(case):
    """down.yml removes the nodes and keeps the shared folder; site.yml brings it all back.

    Run after "down with a running job", which took the nodes down with down.yml: then this case starts from
    that state (down.yml again must change nothing and keep the shared folder) instead of bringing the cluster
    up only to take it down again (CI time).
    """
    cluster = case.cluster
    if any(cluster.inspect(h) is not None for h in cluster.nodes):
        case.ensure_cluster()
        case.wait_jobs_idle()
    else:
        case.note("the nodes were down already (down.yml of the previous case)")
    before = listing(cluster.host_shared)
    run = case.play("down.yml")
    case.check(run.rc == 0, "down.yml rc=%s" % run.rc)
    left = [cluster.container[h] for h in cluster.nodes if cluster.inspect(h) is not None]
    case.check(not left, "containers still there after down.yml: %s" % left)
    changes = differences(before, listing(cluster.host_shared))
    case.check(not changes, "shared folder changed by down.yml: %s" % changes[:10])
    if not left and not changes:
        case.note("containers gone, %d shared entries unchanged" % len(before))
    run = case.play("site.yml")
    case.check(run.rc == 0, "site.yml rc=%s" % run.rc)
    case.all_workers_alive("after site.yml")
    run = case.play("submit.yml", ["-e", "workload=selftest"], label="submit.yml selftest")
    case.check(run.rc == 0, "selftest submit.yml rc=%s" % run.rc)
    succeeded = re.search(r"job (\S+): SUCCEEDED\b", run.text)
    case.check(succeeded, "the selftest did not report SUCCEEDED")
    if succeeded:
        case.note("selftest SUCCEEDED")


def case_down_with_a_running_job(case):
    """down.yml refuses while a job runs, naming it and touching nothing; with mvp_running_jobs=stop it stops
    the job first (its verdict names down.yml), then removes the nodes."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    job_id = "faults-down-%s-%04x" % (time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)
    held_selftest(case, job_id, 600)
    started = {h: cluster.started_at(h) for h in cluster.nodes}
    refused = case.play("down.yml", label="down.yml with a running job")
    case.check(refused.rc not in (0, None), "down.yml rc=%s with %s running, expected a refusal" % (refused.rc, job_id))
    case.check(job_id in refused.text and "mvp_running_jobs=stop" in refused.text and "Nothing was stopped" in refused.text,
               "the refusal does not name %s and the ways on" % job_id)
    case.check(cluster.job_status(job_id) == "RUNNING", "%s is %s after the refusal" % (job_id, cluster.job_status(job_id)))
    case.check({h: cluster.started_at(h) for h in cluster.nodes} == started, "a container was touched by the refusal")
    stopped = case.play("down.yml", ["-e", "mvp_running_jobs=stop"], label="down.yml mvp_running_jobs=stop")
    case.check(stopped.rc == 0, "down.yml -e mvp_running_jobs=stop rc=%s" % stopped.rc)
    status = read_status(cluster, job_id)
    case.check(status.get("status") == "STOPPED" and status.get("cause") == "stopped"
               and "stopped by down.yml" in (status.get("summary") or ""),
               "%s: %s %s %r, expected STOPPED, stopped by down.yml" % (job_id, status.get("status"), status.get("cause"),
                                                                       status.get("summary")))
    left = [cluster.container[h] for h in cluster.nodes if cluster.inspect(h) is not None]
    case.check(not left, "containers still there after down.yml: %s" % left)
    case.note("refused naming %s; then stopped: %s" % (job_id, status.get("summary")))


def restart_forcing_change(cluster):
    """The -e arguments of a change that makes site.yml restart Ray on every worker: one logical CPU more
    than the inventory's ``ray_worker_cpus`` (the machine's CPU count when it is unset)."""
    current = str(cluster.worker_vars.get("ray_worker_cpus", "") or "")
    value = int(current) + 1 if current.isdigit() else (os.cpu_count() or 1) + 1
    return ["-e", "ray_worker_cpus=%d" % value]


def held_selftest(case, job_id, seconds):
    """Submit a selftest that stays RUNNING ``seconds`` (wait=false); fail the case when it does not run."""
    run = case.play("submit.yml", ["-e", "workload=selftest", "-e", "wait=false", "-e", "submission_id=" + job_id,
                                   "-e", json.dumps({"env_vars": {"MVP_SELFTEST_HOLD_SECONDS": str(seconds)}})],
                    label="submit.yml selftest held %ds" % seconds)
    if run.rc != 0 or case.cluster.job_status(job_id) != "RUNNING":
        raise CaseFailed("setup: the held selftest %s is %s (rc=%s)" % (job_id, case.cluster.job_status(job_id), run.rc))


def case_site_with_a_running_job(case):
    """site.yml whose change would restart the workers' Ray while a job runs: refused by default, naming the
    job, nothing touched; an unchanged site.yml passes beside it; with mvp_running_jobs=wait the play waits
    for the job's end (never interrupted), then makes the change."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    change = restart_forcing_change(cluster)
    stamp = "%s-%04x" % (time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)
    held = "faults-site-%s" % stamp
    held_selftest(case, held, 600)
    before = cluster.alive()
    refused = case.play("site.yml", change, label="site.yml %s with a running job" % change[1])
    case.check(refused.rc not in (0, None), "site.yml rc=%s with %s running, expected a refusal" % (refused.rc, held))
    case.check(held in refused.text and "mvp_running_jobs=wait" in refused.text
               and "mvp_running_jobs=restart" in refused.text and "Nothing was changed" in refused.text,
               "the refusal does not name %s and the ways on" % held)
    case.check(cluster.job_status(held) == "RUNNING", "%s is %s after the refusal" % (held, cluster.job_status(held)))
    case.check(cluster.alive() == before, "Ray was restarted on a node by the refused play")
    same = case.play("site.yml", label="site.yml unchanged with a running job")
    case.check(same.rc == 0, "an unchanged site.yml rc=%s beside a running job" % same.rc)
    case.check(cluster.job_status(held) == "RUNNING" and cluster.alive() == before,
               "an unchanged site.yml touched the running job or a node")
    case.play("stop.yml", ["-e", "submission_id=" + held], label="stop.yml the held selftest")
    # wait: the play ends after the job, which is never interrupted, and the change is made.
    hold, waited_id = 20, "faults-site-wait-%s" % stamp
    held_selftest(case, waited_id, hold)
    before = cluster.alive()
    waited = case.play("site.yml", change + ["-e", "mvp_running_jobs=wait", "-e", "running_jobs_wait_delay_s=3"],
                       label="site.yml mvp_running_jobs=wait")
    status = read_status(cluster, waited_id)
    case.check(waited.rc == 0, "site.yml -e mvp_running_jobs=wait rc=%s" % waited.rc)
    case.check(cluster.job_status(waited_id) == "SUCCEEDED",
               "%s is %s after the waiting play, expected SUCCEEDED" % (waited_id, cluster.job_status(waited_id)))
    case.check("Wait until the jobs end" in waited.text, "the play does not show its wait")
    after = cluster.alive() or {}
    renewed = [h for h in cluster.workers if after.get(h) and not after[h] & (before or {}).get(h, set())]
    case.check(sorted(renewed) == sorted(cluster.workers), "after the wait Ray was restarted on %s, expected every "
               "worker (%s)" % (renewed, ", ".join(cluster.workers)))
    # No site.yml back to the inventory's settings: the down cases after this one rebuild every node.
    case.note("refused naming %s; unchanged site.yml passed beside it; wait: %s %s, then Ray restarted on %s"
              % (held, waited_id, status.get("status") or cluster.job_status(waited_id), ", ".join(renewed)))


def case_head_lost_while_followed(case):
    """The head's container is removed while submit.yml waits for a job: the play survives and says so, the job
    controller heals the cluster (a new head: the job table is gone) and judges the job from its job directory -
    status LOST, cause head_lost - and the play fails naming it (a selftest never restarts); every node is ALIVE
    afterwards."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    job_id = "faults-headlost-%s-%04x" % (time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)
    argv, proc = start_playbook(cluster, "submit.yml", [
        "-e", "workload=selftest", "-e", "submission_id=" + job_id,
        "-e", json.dumps({"env_vars": {"MVP_SELFTEST_HOLD_SECONDS": "120"}})])
    started = time.time()
    try:
        deadline = started + 120
        while cluster.job_status(job_id) != "RUNNING":
            if proc.poll() is not None or time.time() > deadline:
                raise CaseFailed("setup: %s is %s" % (job_id, cluster.job_status(job_id)))
            time.sleep(1)
        time.sleep(3)  # submit.yml is following the job now
        cluster.docker("rm", "-f", cluster.container[cluster.head])
        removed_at = time.time()
    finally:
        run = finish_playbook(argv, proc, started, PLAYBOOK_TIMEOUT)
        case.keep(run, "submit.yml selftest (head removed)")
    status = read_status(cluster, job_id)
    case.check(run.rc not in (0, None) and "FAILED [head_lost]" in run.text,
               "submit.yml rc=%s does not fail naming head_lost" % run.rc)
    case.check("%s: the Ray head does not answer" % job_id in run.text and "the job controller heals the cluster"
               in run.text, "the play does not say the head went away and the job controller heals it")
    case.check(status.get("status") == "LOST" and status.get("cause") == "head_lost",
               "%s/logs/status.json: %s %s, expected LOST, head_lost" % (job_id, status.get("status"), status.get("cause")))
    case.all_workers_alive("after the heal")
    case.note("head removed; the job controller healed the cluster, submit.yml ended %.0f s later: %s" % (
        time.time() - removed_at, status.get("summary")))


def read_status(cluster, job_id):
    """A job's logs/status.json on the docker host ({} when there is none)."""
    try:
        with open(os.path.join(cluster.host_shared, "jobs", job_id, "logs", "status.json"), encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


CASES = [
    ("killed worker heals", "site.yml: only that worker (and its container start) changes; all ALIVE",
     case_killed_worker),
    ("two simultaneous submits", "both rc 0, two ids, two job dirs matching job_spec.json", case_concurrent_submits),
    ("worker killed during a selftest", "the driver's worker killed: collect.yml returns < 300 s with a collect "
     "bundle; FAILED, verdict node_lost naming that worker's IP",
     case_worker_killed_during_job),
    ("restarted head", "Ray and the MLflow tracking server back on the head (by its container, or site.yml), with the "
     "runs made before; workers reconnect (GCS kept) or restart; all ALIVE; job dirs unchanged", case_restarted_head),
    ("site.yml with a running job", "a change that restarts the workers' Ray: refused naming the job, nothing "
     "touched; unchanged site.yml passes beside it; mvp_running_jobs=wait: the play waits for the job's end, then "
     "restarts every worker", case_site_with_a_running_job),
    ("head lost while followed", "the head's container removed while submit.yml waits: the job controller heals the cluster, "
     "the job is judged LOST / head_lost from its job directory, submit.yml fails naming it; all ALIVE",
     case_head_lost_while_followed),
    # While the cluster is up; the next case takes it down, and the last one brings it back.
    ("down with a wrong purge path", "fails naming mvp_down_purge_confirm; nothing deleted", case_down_wrong_purge),
    ("down with a running job", "refused naming the job, nothing touched; with mvp_running_jobs=stop the job is "
     "stopped first (verdict: stopped by down.yml) and the nodes removed", case_down_with_a_running_job),
    ("down then bring-up", "containers gone, shared folder kept; site.yml; selftest SUCCEEDED", case_down_then_up),
]


def suite_parser(doc, cases):
    """The command line every case table takes: --inventory, --host-shared and --only (one of ``cases``' names).

    :param doc: str, the suite module's docstring (its first line describes the parser).
    :param cases: list of (name, expected, function) tuples.
    :returns: argparse.ArgumentParser, for the suite to add its own options to.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--inventory", default=os.path.join(ROOT, "inventories/local"))
    parser.add_argument("--host-shared", default="/srv/mvp/private",
                        help="the shared folder as seen on the docker host")
    parser.add_argument("--only", nargs="*", choices=[c[0] for c in cases], metavar="CASE",
                        help="run only these case names: %s" % "; ".join(c[0] for c in cases))
    return parser


def write_figures(path, figures):
    """Write the measured figures (dict) as sorted, indented JSON to ``path``; nothing when ``path`` is empty."""
    if path:
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2, sort_keys=True)


def main():
    """Run the table and print it; return the exit code."""
    args = suite_parser(__doc__, CASES).parse_args()
    return run_cases(CASES, Cluster(args.inventory, args.host_shared), args.only, "faults")


def run_cases(cases, cluster, only, suite, prepare=None):
    """Run a table of (name, expected, function) cases; print it and return the exit code.

    :param cases: list of (name, expected text, function taking a Case).
    :param cluster: Cluster.
    :param only: list of case names to run, or None for all.
    :param suite: str, the table's name in its closing line.
    :param prepare: callable(Case) run before each case (to hand it settings), or None.
    """
    rows, failures = [], 0
    for name, expected, function in cases:
        if only and name not in only:
            continue
        case, started = Case(cluster), time.time()
        if prepare:
            prepare(case)
        try:
            function(case)
        except Exception as exc:  # pylint: disable=broad-except - a broken step fails its case, not the suite
            case.problems.append("%s: %s" % (type(exc).__name__, exc))
            traceback.print_exc()
        ok = not case.problems
        failures += not ok
        observed = "; ".join(case.notes + (["FAILED: " + " | ".join(case.problems)] if case.problems else []))
        rows.append((name, expected, observed, "%.0f" % (time.time() - started), "PASS" if ok else "FAIL"))
        print("[%s] %s (%.0fs)" % ("PASS" if ok else "FAIL", name, time.time() - started), file=sys.stderr, flush=True)
        if not ok:
            for run in case.runs[-2:]:
                print("--- %s: %s rc=%s\n%s" % (name, run.label, run.rc, run.output[-4000:]), file=sys.stderr)
    # Each case's seconds in the table too: where a suite's minutes go shows in CI's output.
    return print_table(("case", "expected", "observed", "seconds", "result"), rows, suite, failures)


if __name__ == "__main__":
    sys.exit(main())
