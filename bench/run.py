#!/usr/bin/env python3
"""Benchmarks: this project's playbooks against the raw scripts they replace.

Measured in one run on the local Docker engine, each figure the median of
--repeat runs (with min and max), printed as a table and written to JSON:

  raw_bringup_2w      raw baseline: docker run x3, ray start head, workers one after
                      another, wait until both workers are registered
  site_cold_2w        playbooks/cluster.yml from no containers to all workers registered
  site_noop_2w        site.yml again with nothing to change
  cluster_noop_2w     playbooks/cluster.yml again with nothing to change
  site_cold_full_2w   the whole site.yml from no containers, the shared storage kept (as after
                      down.yml): bring-up plus the data and code checks that find everything there
  raw_submit_running  `ray job submit --no-wait` on the head until the job is RUNNING
  submit_running      `submit.yml -e wait=false` from invocation until the job is RUNNING
  site_cold_{1,2,16}w  cold cluster.yml bring-up with 1, 2 and 16 workers (--sizes)
  raw_bringup_{1,2,16}w  the raw baseline with as many workers (how the scripts themselves scale)
  phase_<phase>_<N>w  where each cold bring-up's wall time went, under "phases" in the JSON: for
                      cluster.yml from ansible-runner's events (each task's time until the next
                      one starts, by the role it belongs to - PHASES: containers, checks, auth,
                      head, tracking, workers; "startup" before the first play, "other" for the
                      plays' own steps), for the raw scripts by step (containers, head, workers)
  idle_mem_{head,worker}_<N>w  after each sized bring-up, once the cluster has been idle for
                      --idle-wait seconds: the engine's memory use of the head container and of
                      each worker container (MiB, page cache left out as `docker stats` does),
                      under "memory_mib" in the JSON (the worker figure over every worker);
  idle_mem_tracking_<N>w  the MLflow tracking server's share of the head's figure (its processes' Pss)

Every bring-up starts from no container, no network and an empty shared folder.

plus the ratios the goals are stated in. Uses its own containers (mvp-bench-*),
network and shared folder, and removes them at the end. Needs the node image
(images/node/build.sh) and the project venv on PATH.

Usage: python bench/run.py [--repeat 3] [--sizes 1 2 16] [--out bench/results/latest.json]
       [--sizes-only | --submit-only] [-e VAR=VALUE ...] [--keep-going] [--no-raw] [--idle-wait 15]

-e passes extra variables to every playbook run (for example ``-e ray_worker_start_attempts=1`` to
measure bring-up without the retry of a failed ``ray start``; ``ANSIBLE_FORKS`` paces how many
nodes are worked on at once). With --keep-going a failed sized bring-up is counted
(``failed_site_cold_<N>w``, with the reason's last line) instead of ending the benchmark.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "plugins", "module_utils", "lifecycle"))
import mvp_playbook_run  # noqa: E402  pylint: disable=wrong-import-position
PREFIX = "mvp-bench"
NETWORK = "mvp-bench-net"
SHARED = "/var/tmp/mvp-bench/private"
PY = "/opt/mvp/venv/bin/python"
# Jobs/State API of the bench clusters: raw_bringup and the inventory keep Ray's default dashboard port.
JOBS_ADDRESS = "http://127.0.0.1:8265"
RAY = "/opt/mvp/venv/bin/ray"


def sh(argv, check=True, **kw):
    """Run a command, return CompletedProcess (text)."""
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def image():
    """Return the node image reference (building it if its recipe changed)."""
    out = sh(["bash", os.path.join(ROOT, "images/node/build.sh")]).stdout.strip().splitlines()[-1]
    return out.split()[0].split("=", 1)[1]


def names(workers):
    """Container names of the head and ``workers`` workers."""
    return ["%s-head" % PREFIX] + ["%s-worker-%d" % (PREFIX, i) for i in range(workers)]


def clean(keep_shared=False):
    """Remove every bench container, the network and (unless ``keep_shared``) the shared folder."""
    ids = sh(["docker", "ps", "-aq", "--filter", "name=^%s-" % PREFIX]).stdout.split()
    if ids:
        sh(["docker", "rm", "-f"] + ids)
    sh(["docker", "network", "rm", NETWORK], check=False)
    if not keep_shared:
        shutil.rmtree(os.path.dirname(SHARED), ignore_errors=True)


def wait_workers(head, count, timeout=180):
    """Poll the head until ``count`` ALIVE nodes carry worker_node."""
    probe = ("import ray.util.state as s; print(sum(1 for n in s.list_nodes(address=%r) "
             "if n.state == 'ALIVE' and n.resources_total.get('worker_node', 0) > 0))" % JOBS_ADDRESS)
    deadline = time.time() + timeout
    while time.time() < deadline:
        proc = sh(["docker", "exec", head, PY, "-c", probe], check=False)
        if proc.returncode == 0 and proc.stdout.strip().isdigit() and int(proc.stdout) >= count:
            return
        time.sleep(0.5)
    raise RuntimeError("workers did not register within %ss" % timeout)


def raw_bringup(img, workers=2, phases=None):
    """What the old shell scripts did; returns seconds (the empty shared folder exists, as for the playbooks).

    :param phases: dict or None; when given, filled with the seconds of each step: ``containers`` (network
        and ``docker run``), ``head`` (``ray start --head``), ``workers`` (their ``ray start`` until registered).
    """
    clean()
    os.makedirs(SHARED)
    start = time.time()
    sh(["docker", "network", "create", NETWORK])
    for name in names(workers):
        sh(["docker", "run", "-d", "--init", "--name", name, "--hostname", name, "--network", NETWORK,
            "--shm-size", "1g", "-v", "%s:/private" % SHARED, img, "sleep", "infinity"])
    marks = [time.time()]
    head = names(workers)[0]
    sh(["docker", "exec", head, RAY, "start", "--head", "--num-cpus=0", "--num-gpus=0",
        "--dashboard-host=0.0.0.0", "--disable-usage-stats"])
    head_ip = sh(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                  head]).stdout.strip()
    marks.append(time.time())
    for name in names(workers)[1:]:
        sh(["docker", "exec", name, RAY, "start", "--address=%s:6379" % head_ip,
            '--resources={"worker_node": 100}', "--disable-usage-stats"])
    wait_workers(head, workers)
    marks.append(time.time())
    if phases is not None:
        phases.update({"containers": marks[0] - start, "head": marks[1] - marks[0], "workers": marks[2] - marks[1]})
    return marks[2] - start


def inventory(tmp, workers):
    """Write an inventory for the bench cluster (links the shared group_vars); return its folder."""
    inv = os.path.join(tmp, "inv-%d" % workers)
    if os.path.isdir(inv):
        return inv
    os.makedirs(os.path.join(inv, "group_vars", "all"))
    os.symlink(os.path.join(ROOT, "inventories/common/all"), os.path.join(inv, "group_vars/all", "00-mvp"))
    os.symlink(os.path.join(ROOT, "inventories/local/group_vars/ray_nodes"), os.path.join(inv, "group_vars/ray_nodes"))
    with open(os.path.join(inv, "group_vars/all/10-bench.yml"), "w") as handle:
        handle.write("mvp_host_shared_dir: %s\nmvp_node_image_build: true\nmvp_docker_network: %s\n"
                     "verl_snapshot_sources:\n  - code_id: verl-0.9.1\n    pip: verl==0.9.1\n" % (SHARED, NETWORK))
    hosts = ["all:", "  children:", "    docker_hosts:", "      hosts:", "        localhost:",
             "          ansible_connection: local",
             "          ansible_python_interpreter: \"{{ ansible_playbook_python }}\"",
             "    ray_nodes:", "      children:", "        ray_head:", "          hosts:",
             "            %s: {}" % names(workers)[0], "        ray_workers:", "          hosts:"]
    hosts += ["            %s: {}" % n for n in names(workers)[1:]]
    with open(os.path.join(inv, "hosts.yml"), "w") as handle:
        handle.write("\n".join(hosts) + "\n")
    return inv


def memory_mib(memory_stats):
    """MiB a container uses, from the engine's ``memory_stats`` (a dict of its stats API).

    ``usage`` minus the inactive page cache: ``stats.total_inactive_file`` (cgroup v1) or
    ``stats.inactive_file`` (v2), none when neither is there. Rounded to 0.1 MiB.
    :raises KeyError: when ``usage`` is missing (a stopped container reports no memory).
    """
    stats = memory_stats.get("stats", {})
    cache = stats.get("total_inactive_file", stats.get("inactive_file", 0))
    return round((memory_stats["usage"] - cache) / 1048576.0, 1)


# Run in the head container by the node venv's Python: the proportional set size (Pss, smaps_rollup, proc(5)) of
# the MLflow tracking server's processes (command lines under its venv /opt/mvp/mlflow/), in KiB.
TRACKING_PSS = (
    "import os\n"
    "total = 0\n"
    "for pid in filter(str.isdigit, os.listdir('/proc')):\n"
    "    try:\n"
    "        if b'/opt/mvp/mlflow/' not in open('/proc/%s/cmdline' % pid, 'rb').read():\n"
    "            continue\n"
    "        total += sum(int(line.split()[1]) for line in open('/proc/%s/smaps_rollup' % pid)\n"
    "                     if line.startswith('Pss:'))\n"
    "    except OSError:\n"
    "        pass\n"
    "print(total)\n")


def tracking_memory(head):
    """MiB (float, 0.1) the MLflow tracking server's processes take in the head container ``head`` (their Pss).

    :raises subprocess.CalledProcessError: when the probe cannot run in the container.
    """
    return round(int(sh(["docker", "exec", head, PY, "-c", TRACKING_PSS]).stdout.strip() or 0) / 1024.0, 1)


def idle_memory(workers, settle):
    """Memory of the idle bench cluster: MiB of the head container and of each worker container.

    Waits ``settle`` seconds (float) first, then reads each container's stats once through the
    Docker SDK (``one_shot``): usage minus the inactive page cache (``total_inactive_file`` on
    cgroup v1, ``inactive_file`` on v2), what ``docker stats`` shows.
    :returns: (head MiB, list of worker MiB), floats rounded to 0.1.
    :raises docker.errors.NotFound: when a bench container is gone.
    """
    import docker
    time.sleep(settle)
    client = docker.from_env()

    def mib(name):
        """MiB the container ``name`` uses now."""
        return memory_mib(client.containers.get(name).stats(stream=False, one_shot=True)["memory_stats"])

    all_names = names(workers)
    return mib(all_names[0]), [mib(name) for name in all_names[1:]]


def fresh():
    """No container, no network, an empty shared folder: where both the raw scripts and the playbooks start."""
    clean()
    os.makedirs(SHARED)


# Extra variables given to every playbook run (--extra-vars / -e of this script).
EXTRA_VARS = []
# Output of the last successful playbook run (the sized bring-ups count the workers' retried starts in it).
LAST_OUTPUT = {"text": ""}

# The phase of a cluster.yml task, by the role it belongs to (ansible-runner's ``event_data.role``, the
# role's short name): the phases issue 52 names. A task of no role counts as "other" (the plays' own steps).
PHASES = {"docker_host": "containers", "containers": "containers", "running_jobs": "checks",
          "preflight": "checks", "shared_storage": "checks", "ray_auth_token": "auth", "ray_head": "head",
          "mlflow_server": "tracking", "ray_worker": "workers"}
PHASE_ORDER = ["startup", "containers", "checks", "auth", "head", "tracking", "workers", "other"]


def _when(event):
    """Seconds since the epoch of an ansible-runner event (its ``created``, ISO 8601 with the UTC offset)."""
    return datetime.fromisoformat(event["created"]).timestamp()


def phase_seconds(events, started, ended=None, phase_of=None):
    """Where the wall time of one playbook run went, by phase.

    Each task counts from its ``playbook_on_task_start`` event until the next task or play starts (or the
    ``playbook_on_stats`` event): its hosts run in parallel, so the phases add up to the wall time.

    :param events: list of ansible-runner event dicts (``event``, ``created``, ``event_data.role``), in order.
    :param started: float, seconds since the epoch when ``ansible-playbook`` was started: the time until the
        first event is "startup" (Python, Ansible, the inventory and the playbook parsed).
    :param ended: float or None, seconds since the epoch when the run returned: the time after the last
        event counts as "other".
    :param phase_of: dict role short name -> phase (default PHASES); a task of another role, or of none, and
        the time between a play's start and its first task count as "other".
    :returns: dict phase -> seconds (float, >= 0), every phase that took time.
    :raises KeyError: when an event has no ``created`` (not an ansible-runner event).
    """
    phase_of = PHASES if phase_of is None else phase_of
    out = {}
    current, since = "startup", started
    for event in events:
        kind = event.get("event")
        if kind not in ("playbook_on_task_start", "playbook_on_play_start", "playbook_on_stats",
                        "playbook_on_start"):
            continue
        now = _when(event)
        out[current] = out.get(current, 0.0) + max(0.0, now - since)
        role = ((event.get("event_data") or {}).get("role") or "").rsplit(".", 1)[-1]
        current = phase_of.get(role, "other") if kind == "playbook_on_task_start" else "other"
        since = now
    if ended is not None:
        out[current] = out.get(current, 0.0) + max(0.0, ended - since)
    return {name: round(seconds, 3) for name, seconds in out.items() if seconds > 0}


def playbook(inv, path, *extra, phases=None):
    """Run a playbook; return its wall seconds.

    With ``phases`` (a dict) the playbook runs through ansible-runner (mvp_playbook_run, as the job controller
    runs its playbooks) and ``phases`` is filled with ``phase_seconds`` of its events; else through
    ``ansible-playbook`` itself (what a user types; the submit measures).
    :raises RuntimeError: with the output's tail, or the failed tasks, when it fails.
    """
    start = time.time()
    if phases is not None:
        with tempfile.TemporaryDirectory(prefix="mvp-bench-runner-") as private:
            extra_vars = dict(var.split("=", 1) for var in EXTRA_VARS + [v for f, v in zip(extra[::2], extra[1::2])
                                                                          if f == "-e"])
            result = mvp_playbook_run.run(os.path.join(ROOT, path), [inv], private, "run", extra_vars=extra_vars,
                                          envvars=mvp_playbook_run.runner_env(os.path.join(ROOT, "ansible.cfg")),
                                          project_dir=ROOT)
            seconds = time.time() - start
            events = []
            folder = os.path.join(result["artifacts"], "job_events")
            for name in sorted(os.listdir(folder), key=lambda n: int(n.split("-", 1)[0])):
                with open(os.path.join(folder, name)) as handle:
                    events.append(json.load(handle))
        # The lines the play says (debug tasks' msg), once each: the workers' start notes are among them.
        said = []
        for event in events:
            msg = ((event.get("event_data") or {}).get("res") or {}).get("msg") if event.get("event") == "runner_on_ok" \
                else None
            said.extend(msg if isinstance(msg, list) else [msg] if isinstance(msg, str) else [])
        LAST_OUTPUT["text"] = "\n".join(said)
        if result["rc"]:
            raise RuntimeError("%s failed:\n%s" % (path, "\n".join(
                "fatal: %s %s msg: %s" % (t["host"], t["task"], t["msg"][:500]) for t in result["failed_tasks"])))
        phases.update(phase_seconds(events, start, start + seconds))
        return seconds
    argv = ["ansible-playbook", "-i", inv, os.path.join(ROOT, path)] + list(extra)
    for var in EXTRA_VARS:
        argv += ["-e", var]
    proc = sh(argv, check=False, cwd=ROOT)
    LAST_OUTPUT["text"] = proc.stdout
    if proc.returncode:
        fatal = [line.strip() for line in proc.stdout.splitlines() if "fatal:" in line or "msg:" in line]
        raise RuntimeError("%s failed:\n%s\n%s" % (path, proc.stdout[-3000:], "\n".join(fatal[-4:])))
    return time.time() - start


def wait_running(head, submission_id, inv, timeout=120, interval=0.1):
    """Poll Ray's Jobs REST API (``GET /api/jobs/<id>``) from this host until the job is RUNNING (or terminal).

    Asked over HTTP at the head container's address every ``interval`` seconds, so the figure is not
    rounded up by the probe itself (a ``docker exec`` of a Python importing Ray takes about a second).
    :raises RuntimeError: after ``timeout`` seconds.
    """
    head_ip = sh(["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                  head]).stdout.split()[0]
    url = "http://%s:%s/api/jobs/%s" % (head_ip, JOBS_ADDRESS.rsplit(":", 1)[1], submission_id)
    # The token site.yml generated for this inventory (mvp_ray_auth_token_file), read as the plays read it.
    with open(os.path.join(inv, ".secrets", "ray_auth_token")) as handle:
        headers = {"Authorization": "Bearer " + handle.read().strip()}
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as answer:
                if json.load(answer).get("status") in ("RUNNING", "SUCCEEDED", "FAILED", "STOPPED"):
                    return
        except (OSError, ValueError):  # not submitted yet (404), or the dashboard busy
            pass
        time.sleep(interval)
    raise RuntimeError("job %s not RUNNING within %ss" % (submission_id, timeout))


def submit_pair(inv, head, tag, record):
    """Time ``ray job submit --no-wait`` and then ``submit.yml -e wait=false``, each until RUNNING.

    :param inv: str, the inventory folder of the running cluster (its data and code prepared).
    :param head: str, the head container's name.
    :param tag: str, makes the submission ids ``raw-<tag>`` and ``bench-<tag>``.
    :param record: callable(key, seconds).
    """
    start = time.time()
    sh(["docker", "exec", "-e", "RAY_AUTH_MODE=token", "-e", "RAY_AUTH_TOKEN_PATH=/tmp/ray/mvp_auth_token",
        head, RAY, "job", "submit", "--no-wait", "--submission-id", "raw-%s" % tag,
        "--entrypoint-resources", '{"worker_node": 1}', "--entrypoint-num-cpus", "1",
        "--", "sleep", "30"])
    wait_running(head, "raw-%s" % tag, inv)
    record("raw_submit_running", time.time() - start)
    start = time.time()
    playbook(inv, "submit.yml", "-e", "workload=selftest", "-e", "submission_id=bench-%s" % tag, "-e", "wait=false")
    wait_running(head, "bench-%s" % tag, inv)
    record("submit_running", time.time() - start)


def print_phases(phases):
    """Print the cold bring-ups' phases as a table: one row per phase, one column per size and kind (medians)."""
    columns = sorted({key.split("_", 1)[0] + "_" + key.rsplit("_", 1)[-1] for key in phases},
                     key=lambda c: (int(c.rsplit("_", 1)[-1].rstrip("w")), c))
    if not columns:
        return
    print("\n| phase (median s) | %s |\n|---|%s" % (" | ".join(
        ("raw " if c.startswith("raw") else "cluster.yml ") + c.rsplit("_", 1)[-1] for c in columns),
        "---|" * len(columns)))
    for name in PHASE_ORDER:
        cells = []
        for column in columns:
            prefix, size = ("raw_phase", column.rsplit("_", 1)[-1]) if column.startswith("raw") else \
                ("phase", column.rsplit("_", 1)[-1])
            value = phases.get("%s_%s_%s" % (prefix, name, size))
            cells.append("%.1f" % value["median"] if value else "-")
        if any(cell != "-" for cell in cells):
            print("| %s | %s |" % (name, " | ".join(cells)))


def summary(values):
    """Median, min and max (seconds, or MiB for the memory figures), rounded, and every value."""
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "runs": [round(v, 2) for v in values]}


def main():
    """Run the benchmarks, print the table and write the JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="*", default=[1, 2, 16])
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/latest.json"))
    parser.add_argument("--sizes-only", action="store_true", help="only the sized bring-ups (--sizes)")
    parser.add_argument("--submit-only", action="store_true",
                        help="one 2-worker cluster, then only raw_submit_running and submit_running, --repeat times")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], help="VAR=VALUE for every playbook")
    parser.add_argument("--keep-going", action="store_true", help="count a failed sized bring-up, go on")
    parser.add_argument("--no-raw", action="store_true", help="sized bring-ups without the raw baseline")
    parser.add_argument("--idle-wait", type=float, default=15.0,
                        help="seconds of idle cluster before the memory of a sized bring-up is read")
    args = parser.parse_args()
    EXTRA_VARS.extend(args.extra_vars)
    failures = {}
    img = image()
    runs = {}
    memory = {}
    phase_runs = {}

    def record(key, value, phases=None, prefix="phase"):
        runs.setdefault(key, []).append(value)
        print("  %-20s %6.1fs" % (key, value), flush=True)
        size = key.rsplit("_", 1)[-1]
        for name in PHASE_ORDER:
            if name in (phases or {}):
                phase_runs.setdefault("%s_%s_%s" % (prefix, name, size), []).append(phases[name])
        if phases:
            print("  %-20s %s" % ("", ", ".join("%s %.1f" % (n, phases[n]) for n in PHASE_ORDER if n in phases)),
                  flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        inv2 = inventory(tmp, 2)
        head = names(2)[0]
        for i in range(0 if args.sizes_only or args.submit_only else args.repeat):
            raw = {}
            record("raw_bringup_2w", raw_bringup(img, phases=raw), raw, "raw_phase")
            fresh()
            cold = {}
            record("site_cold_2w", playbook(inv2, "playbooks/cluster.yml", phases=cold), cold)
            playbook(inv2, "site.yml")  # data + code, so submit.yml has what it validates
            record("site_noop_2w", playbook(inv2, "site.yml"))
            record("cluster_noop_2w", playbook(inv2, "playbooks/cluster.yml"))
            submit_pair(inv2, head, "%d" % i, record)
            clean(keep_shared=True)
            record("site_cold_full_2w", playbook(inv2, "site.yml"))
        if args.submit_only:
            fresh()
            playbook(inv2, "site.yml")
            for i in range(args.repeat):
                submit_pair(inv2, head, "s%d-%d" % (i, int(time.time())), record)
                time.sleep(args.idle_wait)  # the selftest and the snapshots of the one before finish
        for size in [] if args.submit_only else args.sizes:
            inv = inventory(tmp, size)
            for _ in range(args.repeat):
                if not args.no_raw:
                    raw = {}
                    record("raw_bringup_%dw" % size, raw_bringup(img, size, phases=raw), raw, "raw_phase")
                fresh()
                try:
                    cold = {}
                    record("site_cold_%dw" % size, playbook(inv, "playbooks/cluster.yml", phases=cold), cold)
                    # ray_worker's "joined at attempt N" lines: workers whose first `ray start` failed.
                    notes = [line for line in LAST_OUTPUT["text"].splitlines() if " joined at attempt " in line]
                    runs.setdefault("retried_starts_%dw" % size, []).append(len(notes))
                    if notes:
                        failures.setdefault("retried_start_notes_%dw" % size, []).extend(notes)
                    head_mib, worker_mib = idle_memory(size, args.idle_wait)
                    tracking_mib = tracking_memory(names(size)[0])
                    memory.setdefault("idle_mem_head_%dw" % size, []).append(head_mib)
                    memory.setdefault("idle_mem_tracking_%dw" % size, []).append(tracking_mib)
                    memory.setdefault("idle_mem_worker_%dw" % size, []).extend(worker_mib)
                    print("  %-20s head %.0f MiB (the tracking server's processes %.0f MiB of it), workers %.0f MiB "
                          "each (median)" % ("idle_mem_%dw" % size, head_mib, tracking_mib,
                                             statistics.median(worker_mib)), flush=True)
                except RuntimeError as exc:
                    if not args.keep_going:
                        raise
                    last = [line for line in str(exc).splitlines() if "fatal:" in line or "msg:" in line][-2:]
                    failures.setdefault("failed_site_cold_%dw" % size, []).append(" ".join(last)[:400])
                    print("  %-20s FAILED %s" % ("site_cold_%dw" % size, " ".join(last)[:200]), flush=True)
        clean()

    result = {k: summary(v) for k, v in runs.items()}
    med = {k: v["median"] for k, v in result.items()}
    ratios = {}
    if "raw_bringup_2w" in med and "site_cold_2w" in med:
        ratios["cold_vs_raw_2w"] = round(med["site_cold_2w"] / med["raw_bringup_2w"], 2)
    if "site_noop_2w" in med:  # the full run (not --sizes-only)
        ratios.update({
            "noop_vs_cold_2w": round(med["site_noop_2w"] / med["site_cold_full_2w"], 2),
            "cluster_noop_vs_cold_2w": round(med["cluster_noop_2w"] / med["site_cold_2w"], 2),
        })
    if "submit_running" in med:
        ratios["submit_minus_raw_s"] = round(med["submit_running"] - med["raw_submit_running"], 2)
    if "site_cold_1w" in med and "site_cold_8w" in med:
        ratios["cold_8w_vs_1w"] = round(med["site_cold_8w"] / med["site_cold_1w"], 2)
    if "raw_bringup_1w" in med and "raw_bringup_8w" in med:  # not with --no-raw
        ratios["raw_8w_vs_1w"] = round(med["raw_bringup_8w"] / med["raw_bringup_1w"], 2)
    for size in (1, 2):
        if "site_cold_%dw" % size in med and "raw_bringup_%dw" % size in med:
            ratios["cold_minus_raw_%dw_s" % size] = round(med["site_cold_%dw" % size] - med["raw_bringup_%dw" % size], 2)
    if "site_cold_16w" in med and "raw_bringup_16w" in med:
        ratios["cold_vs_raw_16w"] = round(med["site_cold_16w"] / med["raw_bringup_16w"], 2)
    if "site_cold_16w" in med and "site_cold_1w" in med:
        ratios["cold_16w_vs_1w"] = round(med["site_cold_16w"] / med["site_cold_1w"], 2)
    goals = {"cold_vs_raw_2w": "<= 1.3", "noop_vs_cold_2w": "<= 0.5", "cluster_noop_vs_cold_2w": "<= 0.5",
             "submit_minus_raw_s": "<= 2 (issues 27, 52)",
             "cold_minus_raw_1w_s": "<= 4 (issue 52)", "cold_minus_raw_2w_s": "<= 4 (issue 52)",
             "cold_8w_vs_1w": "<= 2", "raw_8w_vs_1w": "(reference: the raw scripts' own scaling)",
             "cold_vs_raw_16w": "<= 1.1 (issue 52)", "cold_16w_vs_1w": "<= 2 (issue 27)"}
    report = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "extra_vars": EXTRA_VARS, "forks": os.environ.get("ANSIBLE_FORKS", "ansible.cfg"),
              "failures": failures,
              "machine": "%s, %d cores, %s" % (platform.machine(), os.cpu_count(), platform.platform()),
              "repeat": args.repeat, "seconds": result, "ratios": ratios, "goals": goals,
              "memory_mib": {k: summary(v) for k, v in memory.items()},
              "phases": {k: summary(v) for k, v in phase_runs.items()}}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=2)
    print("\n| measure | median s | min s | max s |\n|---|---|---|---|")
    for key, value in result.items():
        print("| %s | %.1f | %.1f | %.1f |" % (key, value["median"], value["min"], value["max"]))
    for key, value in report["memory_mib"].items():
        print("| %s (MiB) | %.0f | %.0f | %.0f |" % (key, value["median"], value["min"], value["max"]))
    print_phases(report["phases"])
    print("\n| ratio | value | goal |\n|---|---|---|")
    for key, value in ratios.items():
        print("| %s | %s | %s |" % (key, value, goals[key]))
    print("\nwritten to %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
