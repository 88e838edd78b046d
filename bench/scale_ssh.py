#!/usr/bin/env python3
"""Scale benchmark of the Ansible side: N nodes reached over SSH, as in prod (issue 27, item 1).

For every size N (--sizes) and Ansible fork count (--forks), --repeat times:

  1. N containers of the node image (images/node/build.sh: sshd, Python, Ray) that run only
     sshd, on a dedicated network (mvp-scale-net, 172.30.99.0/24, fixed addresses), one key made
     for this run, a host folder mounted at /private in each: what the molecule ``prod``
     scenario does with 3 nodes (molecule/prod/create.yml), here from the Docker SDK;
  2. an inventory for them in a temporary folder (hosts.yml: one ``ray_head``, N-1
     ``ray_workers``; group_vars linked to inventories/common/all plus an SSH connection.yml as
     molecule/prod/inventory's);
  3. ``preflight``: ``playbooks/cluster.yml --tags preflight --skip-tags ray_head,ray_worker`` (the
     preflight role on every node; the skip keeps the Ray roles' argument checks, tagged
     ``always``, from running: ray_worker's needs the head's address, set by ray_head);
  4. ``bringup``: ``playbooks/cluster.yml --skip-tags ray_head,ray_worker`` (the whole bring-up
     minus Ray's own start: the preflight again, the shared tree, the Ray auth token file; the
     containers play and tasks have no docker host to run on, as in prod);
  5. the containers removed (fresh ones for the next fork count: every run is cold).

Each playbook run is measured for wall time (seconds), the controller's CPU seconds
(``resource.getrusage(RUSAGE_CHILDREN)`` of this process around ansible-playbook, plus the SSH
ControlPersist masters it leaves behind: this process is made a child subreaper, so they are
reaped, and counted, here when the run ends) and the tasks each node ran (from the
``ansible.posix.json`` callback: results not skipped). Derived: CPU milliseconds per node per task.
Every run gets its own ControlPath folder (cold SSH connections, as in one prod run), pipelining
on, ``ANSIBLE_SSH_ARGS`` as molecule/prod/molecule.yml sets them.

With --ray-sizes, bench/run.py's cold bring-ups of real Ray workers (each worker one CPU, its idle
memory measured from the engine's container stats) run afterwards in the same invocation and their
JSON is merged into this one (``ray``); bench/run.py --sizes ... --sizes-only runs them alone.

Needs the Docker engine, the node image and the project venv on PATH. Containers, network, key and
folders are removed at the end, on an error and on Ctrl-C (--keep leaves the last size's nodes up).

Usage: python bench/scale_ssh.py [--sizes 8 16 32 64] [--forks 5 16 64] [--repeat 1]
       [--skip 32x5 ...] [--ray-sizes 1 4 8 16] [--keep] [--out bench/results/scale-ssh.json]
"""
import argparse
import concurrent.futures
import ctypes
import datetime
import ipaddress
import json
import os
import platform
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench_run  # noqa: E402  (bench/run.py: the node image, the Ray-side bring-ups)

PREFIX = "mvp-scale"
NETWORK = "mvp-scale-net"
SUBNET = "172.30.99.0/24"
# Key, authorized_keys and the shared folder (the platform's NFS) of this run.
WORKDIR = "/var/tmp/mvp-scale"
# The node image's Python (has Ray; Ansible's modules run with it, as in molecule prod).
NODE_PYTHON = "/opt/mvp/venv/bin/python"
SSH_ARGS = "-o ControlMaster=auto -o ControlPersist=60s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
PHASES = {
    # --tags preflight alone fails: the roles' argument-spec checks are tagged "always", and
    # ray_worker's reads the head's ray_head_ip fact, which only the ray_head role sets.
    "preflight": ["--tags", "preflight", "--skip-tags", "ray_head,ray_worker"],
    "bringup": ["--skip-tags", "ray_head,ray_worker"],
}
PR_SET_CHILD_SUBREAPER = 36


def node_addresses(count, subnet=SUBNET, first=10):
    """Names and fixed IPv4 addresses of ``count`` nodes: the head first, then the workers.

    :param count: number of nodes (int >= 2: one head and at least one worker).
    :param subnet: the network's subnet (CIDR string); addresses start at its ``first``-th host.
    :returns: list of (name, address) tuples, ``mvp-scale-head`` then ``mvp-scale-worker-<i>``.
    :raises ValueError: when ``count`` < 2 or the subnet has no room for ``count`` addresses
        from ``first`` on (the last address of the subnet, broadcast, is never used).
    """
    if count < 2:
        raise ValueError("need at least 2 nodes (one head, one worker), got %d" % count)
    net = ipaddress.ip_network(subnet)
    if first + count > net.num_addresses - 1:
        raise ValueError("subnet %s has no room for %d addresses from .%d" % (subnet, count, first))
    names = ["%s-head" % PREFIX] + ["%s-worker-%d" % (PREFIX, i) for i in range(count - 1)]
    return [(name, str(net.network_address + first + i)) for i, name in enumerate(names)]


def inventory_hosts(nodes):
    """The hosts.yml content (a dict) for ``nodes`` from :func:`node_addresses`.

    :param nodes: list of (name, address); the first is the head.
    :returns: dict with ``all.children``: an empty ``docker_hosts`` (nothing is created, as in
        prod) and ``ray_nodes`` with ``ray_head`` (the first node) and ``ray_workers`` (the rest),
        each host with its ``ansible_host``.
    """
    def hosts(part):
        """Host entries of ``part``: name -> {"ansible_host": address}."""
        return {name: {"ansible_host": address} for name, address in part}
    return {"all": {"children": {
        "docker_hosts": {"hosts": {}},
        "ray_nodes": {"children": {
            "ray_head": {"hosts": hosts(nodes[:1])},
            "ray_workers": {"hosts": hosts(nodes[1:])},
        }},
    }}}


def connection_vars(key_path, python=NODE_PYTHON):
    """group_vars/ray_nodes/connection.yml content: SSH as root with ``key_path`` (as molecule prod).

    :param key_path: the private key file (str).
    :param python: the nodes' interpreter with Ray (str).
    :returns: dict of Ansible connection variables.
    """
    return {"ansible_connection": "ssh", "ansible_user": "root", "ansible_port": 22,
            "ansible_ssh_private_key_file": key_path, "ansible_python_interpreter": python}


def write_inventory(folder, nodes, key_path, token):
    """Write an inventory for ``nodes`` into ``folder`` (created); return ``folder``.

    Files: hosts.yml (:func:`inventory_hosts`), group_vars/all/00-mvp (a link to the shared
    defaults inventories/common/all), group_vars/all/10-scale.yml (the Ray auth token, so the
    auth-token role does its work as in molecule prod), group_vars/ray_nodes/connection.yml.

    :param folder: path of a folder that does not exist yet (str).
    :param nodes: list of (name, address), the head first.
    :param key_path: the SSH private key the nodes accept (str).
    :param token: the Ray auth token written to every node (str).
    :raises FileExistsError: when ``folder`` exists.
    """
    os.makedirs(os.path.join(folder, "group_vars", "all"))
    os.makedirs(os.path.join(folder, "group_vars", "ray_nodes"))
    os.symlink(os.path.join(ROOT, "inventories", "common", "all"), os.path.join(folder, "group_vars", "all", "00-mvp"))
    files = {
        "hosts.yml": inventory_hosts(nodes),
        os.path.join("group_vars", "all", "10-scale.yml"): {"mvp_ray_auth_token": token},
        os.path.join("group_vars", "ray_nodes", "connection.yml"): connection_vars(key_path),
    }
    for name, content in files.items():
        with open(os.path.join(folder, name), "w") as handle:
            handle.write("---\n" + yaml.safe_dump(content, default_flow_style=False, sort_keys=False))
    return folder


def count_tasks(report, hosts):
    """Tasks each of ``hosts`` ran and skipped, from an ``ansible.posix.json`` callback report.

    :param report: the callback's parsed JSON (dict with ``plays`` -> ``tasks`` -> ``hosts``).
    :param hosts: host names to count (iterable of str); a host with no result counts 0.
    :returns: dict host -> {"ran": int, "skipped": int}; "ran" counts results not marked
        ``skipped`` (ok, changed, failed, unreachable), ``run_once`` tasks count on the one host
        whose result the callback recorded.
    """
    counts = {host: {"ran": 0, "skipped": 0} for host in hosts}
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            for host, result in task.get("hosts", {}).items():
                if host in counts:
                    counts[host]["skipped" if result.get("skipped") else "ran"] += 1
    return counts


def _seconds(stamp):
    """Seconds since the epoch of the callback's time stamp (``2026-11-23T21:50:01.123456Z``)."""
    return datetime.datetime.strptime(stamp.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(
        tzinfo=datetime.timezone.utc).timestamp()


def task_times(report):
    """Wall time of every task in an ``ansible.posix.json`` report, longest first.

    :param report: the callback's parsed JSON.
    :returns: list of dicts {"task": name, "seconds": float (from the task's start to its last
        host result, rounded to 0.01), "hosts": int (results recorded), "skipped": int}; tasks
        with no result (no ``end``) are left out.
    """
    rows = []
    for play in report.get("plays", []):
        for task in play.get("tasks", []):
            duration = task["task"].get("duration", {})
            if "end" not in duration:
                continue
            results = task.get("hosts", {}).values()
            rows.append({"task": task["task"]["name"],
                         "seconds": round(_seconds(duration["end"]) - _seconds(duration["start"]), 2),
                         "hosts": len(results), "skipped": sum(1 for r in results if r.get("skipped"))})
    return sorted(rows, key=lambda row: -row["seconds"])


def cpu_per_node_task(cpu_s, nodes, tasks_per_node):
    """The controller's CPU milliseconds per node per task.

    :param cpu_s: the controller's CPU seconds for the whole run (float, user + system).
    :param nodes: number of nodes (int > 0).
    :param tasks_per_node: mean tasks each node ran (float > 0).
    :returns: ``cpu_s * 1000 / nodes / tasks_per_node``, rounded to 0.1 ms.
    :raises ValueError: when ``nodes`` or ``tasks_per_node`` is not positive.
    """
    if nodes <= 0 or tasks_per_node <= 0:
        raise ValueError("nodes (%r) and tasks_per_node (%r) must be positive" % (nodes, tasks_per_node))
    return round(cpu_s * 1000.0 / nodes / tasks_per_node, 1)


def _children_cpu():
    """CPU seconds (user + system) of every reaped child and descendant of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap_orphans():
    """End and reap the processes reparented to this process (the SSH ControlPersist masters).

    Only processes whose parent is this process (a child subreaper) are signalled, by pid, with
    SIGTERM; each is then waited for, so its CPU time enters RUSAGE_CHILDREN.
    :returns: number of processes reaped (int).
    """
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/status" % entry) as handle:
                ppid = next(int(line.split()[1]) for line in handle if line.startswith("PPid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if ppid == me:
            pids.append(int(entry))
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    return len(pids)


def make_key(folder):
    """Make an ed25519 key pair for this run in ``folder``; return the private key's path.

    Writes ``id_ed25519`` (0600, OpenSSH format) and ``authorized_keys`` (0600, the public key).
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    path = os.path.join(folder, "id_ed25519")
    for name, data in ((path, private), (os.path.join(folder, "authorized_keys"), public + b" mvp-scale\n")):
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    return path


class Nodes:
    """The sshd-only node containers and their network, through the Docker SDK."""

    def __init__(self, image):
        """Connect to the engine (``docker.from_env``); ``image`` is the node image reference (str)."""
        import docker
        self.client = docker.from_env(timeout=120)
        self.image = image

    def network(self):
        """Create the dedicated network (subnet SUBNET) unless it exists."""
        if not self.client.networks.list(names=[NETWORK]):
            import docker
            ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=SUBNET)])
            self.client.networks.create(NETWORK, driver="bridge", ipam=ipam, labels={"mvp-scale": "network"})

    def start(self, nodes, shared, authorized_keys, workers=6):
        """Start one container per (name, address) in ``nodes``, running only sshd; seconds taken.

        :param shared: host folder mounted at /private (str); ``authorized_keys``: root's keys file.
        :param workers: containers created at once (int).
        :raises docker.errors.APIError: when the engine refuses a container.
        """
        api = self.client.api

        def one(node):
            """Create and start the container of ``node`` (name, address)."""
            name, address = node
            host_config = api.create_host_config(init=True, binds=[
                "%s:/private" % shared, "%s:/root/.ssh/authorized_keys:ro" % authorized_keys])
            created = api.create_container(
                self.image, command=["bash", "-c", "mkdir -p /run/sshd && exec /usr/sbin/sshd -D -e"],
                name=name, hostname=name, host_config=host_config, labels={"mvp-scale": "node"},
                networking_config=api.create_networking_config(
                    {NETWORK: api.create_endpoint_config(ipv4_address=address)}))
            api.start(created["Id"])

        start = time.time()
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, nodes))
        return time.time() - start

    def remove(self, network=True, workers=6):
        """Remove every container labelled ``mvp-scale`` (and the network unless ``network`` is false)."""
        found = self.client.containers.list(all=True, filters={"label": "mvp-scale"})
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda c: c.remove(force=True), found))
        if network:
            for net in self.client.networks.list(names=[NETWORK]):
                net.remove()


def wait_sshd(nodes, timeout=60):
    """Wait until every node's port 22 accepts a connection and sends the SSH banner.

    :raises RuntimeError: naming the nodes still silent after ``timeout`` seconds.
    """
    pending = dict(nodes)
    deadline = time.time() + timeout
    while pending and time.time() < deadline:
        for name, address in list(pending.items()):
            try:
                with socket.create_connection((address, 22), timeout=2) as conn:
                    if conn.recv(4).startswith(b"SSH-"):
                        del pending[name]
            except OSError:
                pass
        if pending:
            time.sleep(0.3)
    if pending:
        raise RuntimeError("sshd did not answer within %ss on %s" % (timeout, ", ".join(sorted(pending))))


def run_playbook(inventory, extra, forks, playbook=os.path.join(ROOT, "playbooks", "cluster.yml")):
    """Run ``playbook`` (cluster.yml) with the arguments ``extra`` (list, e.g. a PHASES entry) and
    ``forks``, over SSH as prod; return the measures.

    :returns: dict with wall_s, cpu_playbook_s (ansible-playbook and its forks), cpu_ssh_s (the
        ControlPersist masters, reaped after the run), cpu_s (both), ssh_masters (how many were
        reaped), load_1m_before (the machine's load average when it started: other work on the
        machine stretches the wall time) and report (the callback's parsed JSON, {} when none).
    :raises RuntimeError: when the playbook fails (with the failed results' messages).
    """
    control = tempfile.mkdtemp(prefix="mvp-scale-cp-")
    env = dict(os.environ, ANSIBLE_FORKS=str(forks), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_SSH_ARGS=SSH_ARGS, ANSIBLE_PIPELINING="True", ANSIBLE_HOST_KEY_CHECKING="False",
               ANSIBLE_GATHERING="explicit", ANSIBLE_SSH_CONTROL_PATH_DIR=control)
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)  # no profile_tasks: one JSON document on stdout
    argv = ["ansible-playbook", "-i", inventory, playbook] + list(extra)
    load = os.getloadavg()[0]
    cpu0 = _children_cpu()
    start = time.time()
    try:
        proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        wall = time.time() - start
        cpu1 = _children_cpu()
        masters = reap_orphans()
        cpu2 = _children_cpu()
    finally:
        shutil.rmtree(control, ignore_errors=True)
    try:
        report = json.loads(proc.stdout[proc.stdout.index("{"):])
    except ValueError:
        report = {}
    if proc.returncode:
        failed = ["%s: %s: %s" % (task["task"]["name"], host, result.get("msg", "")) for play in report.get("plays", [])
                  for task in play["tasks"] for host, result in task["hosts"].items()
                  if result.get("failed") or result.get("unreachable")]
        raise RuntimeError("%s %s (forks %d) failed, rc %d:\n%s\n%s" % (
            os.path.basename(playbook), " ".join(extra), forks, proc.returncode, "\n".join(failed[:5]), proc.stderr[-2000:]))
    return {"wall_s": round(wall, 2), "cpu_playbook_s": round(cpu1 - cpu0, 2), "cpu_ssh_s": round(cpu2 - cpu1, 2),
            "cpu_s": round(cpu2 - cpu0, 2), "ssh_masters": masters,
            "load_1m_before": round(load, 2), "report": report}


def measure(nodes_api, size, forks, key_path, token, tmp, costs=False):
    """One cold trial: fresh containers for ``size`` nodes, the preflight run, the bring-up run.

    :returns: (list of two result dicts: phase, nodes, forks, wall, CPU, tasks per node, CPU ms
        per node per task, the 8 longest tasks; list of :func:`task_costs` rows when ``costs``).
    """
    nodes = node_addresses(size)
    shared = os.path.join(WORKDIR, "private")
    nodes_api.remove(network=False)
    shutil.rmtree(shared, ignore_errors=True)
    os.makedirs(shared)
    started = nodes_api.start(nodes, shared, os.path.join(WORKDIR, "authorized_keys"))
    wait_sshd(nodes)
    inventory = write_inventory(tempfile.mkdtemp(prefix="inv-%d-" % size, dir=tmp) + "/inv", nodes, key_path, token)
    rows = []
    for phase in PHASES:
        measured = run_playbook(inventory, PHASES[phase], forks)
        report = measured.pop("report")
        counts = count_tasks(report, [name for name, _ in nodes])
        ran = [c["ran"] for c in counts.values()]
        mean_ran = statistics.mean(ran)
        row = dict(phase=phase, nodes=size, forks=forks, containers_start_s=round(started, 1), **measured)
        row.update(tasks_per_node=round(mean_ran, 2), tasks_head=counts[nodes[0][0]]["ran"],
                   tasks_worker=counts[nodes[1][0]]["ran"],
                   skipped_per_node=round(statistics.mean(c["skipped"] for c in counts.values()), 2),
                   cpu_ms_per_node_task=cpu_per_node_task(row["cpu_s"], size, mean_ran),
                   wall_ms_per_node_task=round(row["wall_s"] * 1000.0 / size / mean_ran, 1),
                   top_tasks=task_times(report)[:8])
        print("  N=%-3d forks=%-3d %-9s %6.1f s wall  %6.1f s CPU (ssh %.1f)  %.1f tasks/node  %.1f ms CPU/node/task"
              % (size, forks, phase, row["wall_s"], row["cpu_s"], row["cpu_ssh_s"], mean_ran,
                 row["cpu_ms_per_node_task"]), flush=True)
        rows.append(row)
    return rows, (task_costs(inventory, size, forks, tmp) if costs else [])


# Synthetic plays on the same nodes (--task-costs): what one task costs the controller per host,
# by kind. "empty" is the fixed cost of ansible-playbook itself (start, inventory, one play).
COST_TASKS = {
    "empty": [],
    "assert": [{"name": "Cost | Assert %d" % i, "ansible.builtin.assert": {"that": ["inventory_hostname | length > 0"],
                                                                            "quiet": True}} for i in range(10)],
    "ping": [{"name": "Cost | Ping %d" % i, "ansible.builtin.ping": {}} for i in range(10)],
}


def cost_playbook(kind):
    """The synthetic playbook of ``kind`` (COST_TASKS): one play on ray_nodes, no facts; a list."""
    return [{"name": "Cost | %s" % kind, "hosts": "ray_nodes", "gather_facts": False, "tasks": COST_TASKS[kind]}]


def per_host_task_ms(cpu_s, empty_cpu_s, nodes, tasks):
    """Controller CPU milliseconds one task costs per host, the fixed cost of a run taken out.

    :param cpu_s: CPU seconds of a run of ``tasks`` tasks on ``nodes`` hosts (float).
    :param empty_cpu_s: CPU seconds of the same run with no task (float).
    :returns: ``(cpu_s - empty_cpu_s) * 1000 / nodes / tasks``, rounded to 0.1 ms.
    :raises ValueError: when ``nodes`` or ``tasks`` is not positive.
    """
    return cpu_per_node_task(cpu_s - empty_cpu_s, nodes, tasks)


def task_costs(inventory, size, forks, tmp):
    """Run the synthetic playbooks on the ``size`` nodes of ``inventory``; list of result dicts.

    Each: kind, nodes, forks, wall_s, cpu_s, and (but for "empty") ms_per_host_task: the CPU
    milliseconds per host per task over the empty run's (:func:`per_host_task_ms`).
    """
    rows = []
    empty = None
    for kind, tasks in COST_TASKS.items():
        path = os.path.join(tmp, "cost-%s.yml" % kind)
        with open(path, "w") as handle:
            handle.write("---\n" + yaml.safe_dump(cost_playbook(kind), sort_keys=False))
        measured = run_playbook(inventory, [], forks, playbook=path)
        measured.pop("report")
        row = dict(kind=kind, nodes=size, forks=forks, **measured)
        if kind == "empty":
            empty = row["cpu_s"]
        else:
            row["ms_per_host_task"] = per_host_task_ms(row["cpu_s"], empty, size, len(tasks))
            row["wall_ms_per_host_task"] = round(row["wall_s"] * 1000.0 / size / len(tasks), 1)
        print("  N=%-3d forks=%-3d cost %-6s %6.1f s wall  %6.1f s CPU  %s ms CPU/host/task" % (
            size, forks, kind, row["wall_s"], row["cpu_s"], row.get("ms_per_host_task", "-")), flush=True)
        rows.append(row)
    return rows


def summarize(rows):
    """Median per (nodes, forks, phase) of wall, CPU and CPU per node per task; list of dicts."""
    groups = {}
    for row in rows:
        groups.setdefault((row["nodes"], row["forks"], row["phase"]), []).append(row)
    out = []
    for (size, forks, phase), group in sorted(groups.items()):
        out.append({"nodes": size, "forks": forks, "phase": phase, "runs": len(group),
                    "wall_s": round(statistics.median(r["wall_s"] for r in group), 1),
                    "cpu_s": round(statistics.median(r["cpu_s"] for r in group), 1),
                    "cpu_ssh_s": round(statistics.median(r["cpu_ssh_s"] for r in group), 1),
                    "tasks_per_node": group[0]["tasks_per_node"],
                    "cpu_ms_per_node_task": round(statistics.median(r["cpu_ms_per_node_task"] for r in group), 1)})
    return out


def main():
    """Run the matrix (and, with --ray-sizes, bench/run.py's sized bring-ups), print and write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64], help="node counts (head included)")
    parser.add_argument("--forks", type=int, nargs="+", default=[5, 16, 64])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--skip", action="append", default=[], metavar="NxF",
                        help="leave out N nodes with F forks, e.g. 64x5 (repeatable)")
    parser.add_argument("--ray-sizes", type=int, nargs="*", default=[],
                        help="then bench/run.py --sizes-only --no-raw with these worker counts (1 CPU each)")
    parser.add_argument("--task-costs", action="store_true",
                        help="after each trial, synthetic plays: no task, 10 asserts, 10 pings (CPU per host-task)")
    parser.add_argument("--keep", action="store_true", help="leave the last trial's containers, network and key")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "scale-ssh.json"))
    args = parser.parse_args()
    skip = {tuple(int(v) for v in item.lower().split("x")) for item in args.skip}
    for size in args.sizes:
        node_addresses(size)  # refuse a size the subnet cannot hold before anything starts

    # SSH ControlPersist masters detach from ansible-playbook; as a subreaper this process
    # inherits them, so their CPU is counted when reap_orphans() waits for them.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    began = time.time()
    img = bench_run.image()
    nodes_api = Nodes(img)
    rows = []
    cost_rows = []
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "machine": "%s, %d cores, %s" % (platform.machine(), os.cpu_count(), platform.platform()),
              "image": img, "sizes": args.sizes, "forks": args.forks, "repeat": args.repeat,
              "skipped": sorted("%dx%d" % pair for pair in skip), "runs": rows, "task_costs": cost_rows, "ray": None}
    kept = False
    try:
        nodes_api.remove()
        shutil.rmtree(WORKDIR, ignore_errors=True)
        os.makedirs(WORKDIR, mode=0o700)
        key_path = make_key(WORKDIR)
        token = secrets.token_hex(16)
        nodes_api.network()
        with tempfile.TemporaryDirectory(prefix="mvp-scale-") as tmp:
            for size in args.sizes:
                for forks in args.forks:
                    if (size, forks) in skip:
                        print("  N=%-3d forks=%-3d skipped (--skip)" % (size, forks), flush=True)
                        continue
                    for _ in range(args.repeat):
                        measured, costs = measure(nodes_api, size, forks, key_path, token, tmp, args.task_costs)
                        rows.extend(measured)
                        cost_rows.extend(costs)
        report["ansible_side_s"] = round(time.time() - began, 1)
        report["summary"] = summarize(rows)
        write_report(report, args.out)  # kept even if the Ray side fails
        if not args.keep:
            nodes_api.remove()
        if args.ray_sizes:
            report["ray"] = ray_side(args.ray_sizes)
        kept = args.keep
    finally:
        if not kept:
            nodes_api.remove()
            shutil.rmtree(WORKDIR, ignore_errors=True)
        reap_orphans()
    report["total_s"] = round(time.time() - began, 1)
    write_report(report, args.out)
    print_tables(report)
    return 0


def ray_side(sizes):
    """bench/run.py's cold bring-ups of ``sizes`` real Ray workers (1 CPU each, idle memory read).

    :returns: run.py's JSON report (dict), with ``rc`` added (run.py's exit status; its failed
        bring-ups are counted under ``failures`` because of --keep-going).
    """
    out = os.path.join(tempfile.gettempdir(), "mvp-scale-ray-%d.json" % os.getpid())
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"), "--sizes"]
                          + [str(s) for s in sizes]
                          + ["--sizes-only", "--no-raw", "--repeat", "1", "--keep-going",
                             "-e", "ray_worker_cpus=1", "--out", out], cwd=ROOT, check=False)
    ray = {}
    if os.path.exists(out):
        with open(out) as handle:
            ray = json.load(handle)
        os.unlink(out)
    ray["rc"] = proc.returncode
    return ray


def write_report(report, path):
    """Write ``report`` (dict) as indented JSON to ``path``, making its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(report, handle, indent=2)


def print_tables(report):
    """Print the summary and the task-cost rows of ``report`` as Markdown tables."""
    print("\n| nodes | forks | phase | wall s | controller CPU s (ssh) | tasks/node | CPU ms/node/task |")
    print("|---|---|---|---|---|---|---|")
    for row in report.get("summary", []):
        print("| %d | %d | %s | %.1f | %.1f (%.1f) | %.1f | %.1f |" % (
            row["nodes"], row["forks"], row["phase"], row["wall_s"], row["cpu_s"], row["cpu_ssh_s"],
            row["tasks_per_node"], row["cpu_ms_per_node_task"]))
    if report["task_costs"]:
        print("\n| nodes | forks | plays of | wall s | CPU s | CPU ms per host per task (over no task) |")
        print("|---|---|---|---|---|---|")
        for row in report["task_costs"]:
            print("| %d | %d | %s | %.1f | %.1f | %s |" % (row["nodes"], row["forks"], row["kind"], row["wall_s"],
                                                       row["cpu_s"], row.get("ms_per_host_task", "-")))
    print("\nAnsible side %s s, total %s s" % (report.get("ansible_side_s"), report.get("total_s")))


if __name__ == "__main__":
    sys.exit(main())
