#!/usr/bin/env python3
"""mvp_entry.py: the first program of every job's entrypoint (runs on the driver node).

Usage: python -u mvp_entry.py --log <job_dir>/logs/driver.log [--metrics FILE]
           [--watchdog FIRST,FLOOR,FACTOR] [--dashboard-port PORT] -- <program> [args...]

1. Prints ``MVP_PRECHECK_VERL_FILE=<path>`` (``importlib.util.find_spec("verl").origin``,
   which locates verl without importing it, so no torch is needed) and
   ``MVP_PRECHECK_MARKER=<code_id>`` (``mvp_marker.MARKER`` from the snapshot on
   PYTHONPATH), plus the driver's hostname.
2. Runs <program>, copying its output line by line to stdout (so Ray's job log
   has it) and to --log (so the output survives the cluster).
3. Progress watchdog (``--watchdog``, with ``--metrics``: verl's file logger output): while the
   trainer runs, each new step line is timed. No new step for longer than the bound
   (mvp_verdict.hang_bound: FIRST seconds before the first step, then max(FLOOR, FACTOR x the
   median step time), FIRST being also the least bound until step 2) is a hang: the Python stacks of every live actor of the job on
   every node (Ray dashboard ``/worker/traceback``, py-spy through each node's agent) and of the
   trainer's own process tree here (py-spy) go to ``debug/<time>-hang-stacks-*.txt``, Ray's
   tables to ``debug/<time>-hang-*.txt``, the record to ``logs/watchdog.json``; then the trainer
   is stopped (SIGTERM to its process tree, SIGKILL after 15 s) and this program exits 124.
4. At the end, the verdict (mvp_verdict.judge_job_dir, from the job's own files -
   config/job_spec.json, the driver output, the metrics, the watchdog record - and Ray's node and
   actor tables: trained N steps, or a named cause with its evidence) goes to ``logs/verdict.json``, and the tails of the job's worker error files on
   every node to ``logs/workers/<node ip>/`` when the trainer did not succeed.
5. Step stamps (with ``--metrics``): verl's metrics lines carry no time, so a light stamper (its own thread,
   looking at the metrics file's size every STAMP_POLL_S seconds and reading only the new bytes) appends
   ``{"step": N, "at": <epoch s>}`` to ``logs/steps.jsonl`` when a step first appears; the same file gets
   ``{"event": "start", "at": ...}`` when this program starts and ``{"event": "trainer_exit", "at": ...,
   "code": N}`` when the trainer exits. The job controller's GPU-hour ledger (module_utils ``mvp_ledger``)
   reads them.
6. Exits with <program>'s exit code (124 after the watchdog stopped it); 2 when the precheck
   cannot find verl or the marker (the snapshot is not first on PYTHONPATH).

The job directory is the parent of the --log file's folder. Everything after the trainer's
exit is best effort: a failure there is printed as ``MVP_VERDICT_ERROR=...`` and never changes
the exit code.
"""
import argparse
import datetime
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

import mvp_verdict  # noqa: E402 - installed beside this file (plugins/module_utils/lifecycle/mvp_verdict.py)
from mvp_job import FILES  # noqa: E402 - installed beside this file (plugins/module_utils/storage/mvp_job.py)

HANG_EXIT = 124
# Seconds between two looks at the metrics file.
POLL_S = 2.0
# Seconds between two looks at the metrics file's size by the step stamper (a stamp is at most this late).
STAMP_POLL_S = 0.25
# Seconds one stack dump (py-spy, the dashboard) may take.
STACK_TIMEOUT_S = 30
# Seconds to wait for Ray to declare a node dead when a failure names no cause yet.
NODE_WAIT_S = 45
# Lines kept from the end of each worker error file.
ERR_TAIL_LINES = 200


def precheck():
    """Return the precheck lines, or raise SystemExit(2) with the reason."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.origin:
        raise SystemExit("MVP_PRECHECK_ERROR=verl is not importable; PYTHONPATH=%s"
                         % os.environ.get("PYTHONPATH", ""))
    try:
        import mvp_marker  # noqa: E402 - provided by the code snapshot
    except ImportError:
        raise SystemExit("MVP_PRECHECK_ERROR=mvp_marker is not importable; the code snapshot "
                         "is not on PYTHONPATH (%s)" % os.environ.get("PYTHONPATH", ""))
    return ["MVP_PRECHECK_VERL_FILE=%s" % spec.origin,
            "MVP_PRECHECK_MARKER=%s" % mvp_marker.MARKER,
            "MVP_PRECHECK_DRIVER_HOST=%s" % socket.gethostname()]


def stamp():
    """UTC time for file names, e.g. 20261123T101500Z."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def write_json(path, data):
    """Write ``data`` as JSON to ``path`` through a temporary name (readers never see half a file)."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(tmp, path)


def auth_headers():
    """Ray token auth headers from RAY_AUTH_TOKEN or the file RAY_AUTH_TOKEN_PATH names ({} without a token)."""
    token = os.environ.get("RAY_AUTH_TOKEN")
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not token and path and os.path.exists(path):
        with open(path) as handle:
            token = handle.read().strip()
    return {"Authorization": "Bearer " + token} if token else {}


class MetricsTail(object):
    """The steps of the metrics lines added to verl's file logger output since the last look.

    :param path: str, the metrics file (``$VERL_FILE_LOGGER_PATH``; it may not exist yet), or '' (no steps).
    Each :meth:`read` costs one ``os.stat`` while the file does not grow; only the bytes added since the last read are
    read (a file that shrank - replaced - is read again from its start); a half-written last line waits for the next.
    """

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.partial = ""

    def read(self):
        """The step numbers of the complete lines added since the last call, in file order (list of int)."""
        if not self.path:
            return []
        try:
            size = os.stat(self.path).st_size
        except OSError:
            return []
        if size < self.offset:  # the file was replaced: read it again from its start
            self.offset, self.partial = 0, ""
        if size == self.offset:
            return []
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(size - self.offset)
        except OSError:
            return []
        self.offset += len(chunk)
        lines = (self.partial + chunk.decode("utf-8", "replace")).split("\n")
        self.partial = lines.pop()
        return list(mvp_verdict.read_metrics("\n".join(lines)))


class Progress(object):
    """Steps of the trainer as they appear in verl's file logger output, with their arrival times.

    :param path: str, the metrics file (``$VERL_FILE_LOGGER_PATH``); it may not exist yet.
    :param start: float, when the trainer started (s since the epoch).
    Steps read in one look share the time since the previous arrival equally (a fast trainer writes
    several between two looks).
    """

    def __init__(self, path, start):
        self.path = path
        self.tail = MetricsTail(path)
        self.last_arrival = start
        self.steps = []
        self.durations = []

    def poll(self, now):
        """Read lines added since the last call; returns the new steps."""
        new = []
        for step in self.tail.read():
            if not (self.steps + new) or step > (self.steps + new)[-1]:
                new.append(step)
        if new:
            share = (now - self.last_arrival) / len(new)
            # the first step's time holds the start-up: it is not a step time
            self.durations.extend([share] * (len(new) - (0 if self.steps else 1)))
            self.steps.extend(new)
            self.last_arrival = now
        return new

    def hang(self, now, first_step_s, floor_s, factor):
        """``None`` while progress is within the bound, else a dict describing the hang."""
        bound, how = mvp_verdict.hang_bound(len(self.steps), self.durations, first_step_s, floor_s, factor)
        waited = now - self.last_arrival
        if waited <= bound:
            return None
        after = ("after step %d" % self.steps[-1]) if self.steps else "before the first step"
        return {"hang": True, "waited_s": round(waited, 1), "bound_s": round(bound, 1), "bound_rule": how,
                "last_step": self.steps[-1] if self.steps else None, "steps_seen": len(self.steps),
                "summary": "no new training step for %.0f s %s (bound %.0f s = %s)" % (waited, after, bound, how)}


class Stamper(object):
    """Append a time stamp to ``logs/steps.jsonl`` for each step that first appears in verl's metrics file.

    :param metrics: str, the metrics file (``$VERL_FILE_LOGGER_PATH``; it may not exist yet), or '' (no steps).
    :param path: str, the stamps file (``mvp_job.FILES["steps"]``), appended to (one JSON object per line).
    :param clock: callable() -> float seconds since the epoch (``time.time``).
    It reads the file through its own :class:`MetricsTail` (one ``os.stat`` a look while the file does not grow). A
    step number seen before (verl's SFT trainer logs ``val/loss`` on a line of its own at the same step)
    gets no second stamp. Writing is best effort: an OSError is kept in ``self.error`` and never raised.
    """

    def __init__(self, metrics, path, clock=time.time):
        self.metrics = metrics
        self.tail = MetricsTail(metrics)
        self.path = path
        self.clock = clock
        self.seen = set()
        self.error = None

    @property
    def offset(self):
        """Bytes of the metrics file read so far (int)."""
        return self.tail.offset

    def write(self, record):
        """Append one record (dict) as a JSON line."""
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, sort_keys=True) + "\n")
        except OSError as exc:
            self.error = str(exc)

    def event(self, name, **fields):
        """Append ``{"event": name, "at": now, **fields}``."""
        self.write(dict(fields, event=name, at=round(self.clock(), 3)))

    def poll(self):
        """Stamp the steps that appeared since the last call; returns them (list of int)."""
        steps = self.tail.read()
        now = round(self.clock(), 3)
        new = []
        for step in steps:
            if step not in self.seen:
                self.seen.add(step)
                new.append(step)
                self.write({"step": step, "at": now})
        return new


def stamp_loop(stamper, stop):
    """The stamper's thread: a look every STAMP_POLL_S seconds until ``stop`` is set, then a last one."""
    while not stop.wait(STAMP_POLL_S):
        stamper.poll()
    stamper.poll()


def descendants(root):
    """PIDs of ``root`` and every process below it (read from /proc)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def process_state(pid):
    """The kernel's state letter of ``pid`` (R, S, D, T for stopped, Z) and its command line."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmd = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        return state, cmd
    except (OSError, IndexError):
        return "?", ""


def py_spy():
    """The py-spy beside this Python (the node venv ships it with ray[default]), or the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.path.exists(here) else "py-spy"


def local_stacks(root):
    """py-spy dumps of the trainer's process tree on this node, as one text."""
    parts = []
    for pid in descendants(root):
        state, cmd = process_state(pid)
        try:
            proc = subprocess.run([py_spy(), "dump", "--pid", str(pid)], capture_output=True, text=True,
                                  timeout=STACK_TIMEOUT_S)
            body = proc.stdout or proc.stderr
        except (OSError, subprocess.TimeoutExpired) as exc:
            body = "py-spy failed: %s" % exc
        parts.append("=== pid %d state %s%s: %s\n%s" % (pid, state, " (STOPPED)" if state == "T" else "",
                                                      cmd[:300], body))
    return "\n".join(parts)


class RayView(object):
    """What the Ray cluster says about this job, through the dashboard of the head (best effort).

    The head's dashboard is ``http://<GCS host>:<port>``; the GCS address comes from the node's
    ``ray_current_cluster`` file (what ``ray start`` writes and ``address="auto"`` reads).
    """

    def __init__(self, submission_id, port):
        self.submission_id = submission_id
        self.port = port
        self.url = None
        self.job_id = None
        self.headers = auth_headers()

    def connect(self):
        """Find the dashboard and this job's Ray job id; return self (raises on failure)."""
        if self.url:
            return self
        from ray._private.services import canonicalize_bootstrap_address_or_die

        host = canonicalize_bootstrap_address_or_die("auto").rsplit(":", 1)[0]
        self.url = "http://%s:%d" % (host, self.port)
        info = self.get_json("/api/jobs/%s" % urllib.parse.quote(self.submission_id))
        self.job_id = info.get("job_id")
        return self

    def get(self, path, timeout=STACK_TIMEOUT_S):
        """GET a dashboard path; the body as text."""
        request = urllib.request.Request(self.url + path, headers=self.headers)
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.read().decode("utf-8", "replace")

    def get_json(self, path):
        """GET a dashboard path; the body parsed as JSON."""
        return json.loads(self.get(path))

    def state(self, kind, filters=()):
        """Rows of Ray's state API (``ray.util.state.list_<kind>``) as dicts, detail on."""
        from ray.util import state as state_api

        rows = getattr(state_api, "list_" + kind)(address=self.url, filters=list(filters), detail=True,
                                                   limit=10000, raise_on_missing_output=False)
        return [row if isinstance(row, dict) else getattr(row, "__dict__", {}) for row in rows]

    def other_active_jobs(self):
        """The other PENDING or RUNNING submissions of the cluster, as ``id (STATUS)`` (Jobs API)."""
        out = []
        for job in self.get_json("/api/jobs/"):
            status = str(job.get("status", "")).rsplit(".", 1)[-1]
            if job.get("submission_id") and job["submission_id"] != self.submission_id and status in (
                    "PENDING", "RUNNING"):
                out.append("%s (%s)" % (job["submission_id"], status))
        return sorted(out)

    def nodes(self):
        """Ray's node table."""
        return self.state("nodes")

    def actors(self, alive_only=False):
        """The actors of this job (with node_ip from the node table); none when the job has no Ray job id (a script
        that never connected to Ray, such as the selftest playing phases: without the filter every job's actors
        would be read)."""
        if not self.job_id:
            return []
        filters = [("job_id", "=", self.job_id)]
        if alive_only:
            filters.append(("state", "=", "ALIVE"))
        ips = {n.get("node_id"): n.get("node_ip") for n in self.nodes()}
        rows = self.state("actors", filters)
        for row in rows:
            row["node_ip"] = ips.get(row.get("node_id"))
        return rows

    def stacks(self):
        """Stacks of every live actor of this job, through each node's agent (py-spy).

        :returns: ({node ip: text}, [one line per process whose stack could not be read]); a process
            py-spy cannot read (stopped, or stuck in the kernel) is often the one that hangs.
        """
        out, failed = {}, []
        for actor in self.actors(alive_only=True):
            ip, pid = actor.get("node_ip"), actor.get("pid")
            if not ip or not pid:
                continue
            try:
                body = self.get("/worker/traceback?%s" % urllib.parse.urlencode({"ip": ip, "pid": pid, "native": 0}))
            except Exception as exc:  # one process or node may not answer: keep the others
                detail = exc.read().decode("utf-8", "replace")[:300] if hasattr(exc, "read") else ""
                body = "NO STACK: %s %s" % (exc, " ".join(detail.split()))
                failed.append("%s pid %s on %s (%s)" % (actor.get("class_name"), pid, ip, exc))
            out.setdefault(ip, []).append("=== %s pid %s (actor %s)\n%s" % (
                actor.get("class_name"), pid, actor.get("actor_id"), body))
        return {ip: "\n".join(parts) for ip, parts in out.items()}, failed

    def worker_errors(self, dest):
        """Save the tails of the stderr files of this job's actors under ``dest/<node ip>/``.

        Ray's log API reads them through each node's agent (``ray.util.state.get_log`` by actor id,
        suffix ``err``); a dead node's files cannot be read and are skipped.
        :returns: list of str, the files written.
        """
        from ray.util import state as state_api

        saved = []
        for actor in self.actors():
            try:
                text = "".join(state_api.get_log(actor_id=actor["actor_id"], suffix="err", tail=ERR_TAIL_LINES,
                                                 errors="replace"))
            except Exception:  # the node is gone, or the actor never wrote to stderr
                continue
            if not text.strip():
                continue
            folder = os.path.join(dest, actor.get("node_ip") or "unknown-node")
            os.makedirs(folder, exist_ok=True)
            target = os.path.join(folder, "%s-%s-pid%s.err" % (actor.get("class_name"), actor["actor_id"][:8],
                                                               actor.get("pid")))
            with open(target, "w", encoding="utf-8") as handle:
                handle.write(text)
            saved.append(target)
        return saved


def ray_tables(job_dir, prefix):
    """``ray status``, ``ray job list``, ``ray list nodes``, ``ray list actors`` into debug/<prefix>-<name>.txt."""
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    commands = {"ray_status": ["status"], "ray_job_list": ["job", "list"],
                "ray_list_nodes": ["list", "nodes", "--detail"], "ray_list_actors": ["list", "actors", "--detail"]}
    written = []
    for name, args in sorted(commands.items()):
        try:
            proc = subprocess.run([ray] + args, capture_output=True, text=True, timeout=60)
            body = "$ ray %s\n# rc=%d\n%s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            body = "$ ray %s\n# failed: %s\n" % (" ".join(args), exc)
        path = os.path.join(job_dir, FILES["debug"], "%s-%s.txt" % (prefix, name))
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(body)
        written.append(path)
    return written


def on_hang(record, proc, job_dir, ray_view, emit):
    """Save the stacks and Ray's tables, record the hang, stop the trainer."""
    prefix = "%s-hang" % stamp()
    os.makedirs(os.path.join(job_dir, FILES["debug"]), exist_ok=True)
    stacks = []
    here = os.path.join(job_dir, FILES["debug"], "%s-stacks-driver-%s.txt" % (prefix, socket.gethostname()))
    with open(here, "w", encoding="utf-8") as handle:
        handle.write(local_stacks(proc.pid))
    stacks.append(here)
    failed = []
    try:
        texts, failed = ray_view.connect().stacks()
        for ip, text in sorted(texts.items()):
            path = os.path.join(job_dir, FILES["debug"], "%s-stacks-%s.txt" % (prefix, ip))
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
            stacks.append(path)
    except Exception as exc:  # the dashboard may be unreachable: the local stacks are kept
        emit("MVP_WATCHDOG_NOTE=cluster stacks not taken: %s\n" % exc)
    tables = ray_tables(job_dir, prefix)
    record.update(stacks=[os.path.relpath(p, job_dir) for p in stacks], no_stack=failed,
                  tables=[os.path.relpath(p, job_dir) for p in tables], detected_at=time.time())
    record["summary"] += "; stacks in debug/%s-stacks-*.txt (%d files)" % (prefix, len(stacks))
    if failed:
        record["summary"] += "; no stack from %s: stopped or stuck in the kernel?" % ", ".join(failed)
    write_json(os.path.join(job_dir, FILES["watchdog"]), record)
    emit("MVP_WATCHDOG_HANG=%s\n" % record["summary"])
    # The trainer shares this program's process group (so `ray job stop` reaches both): stop its tree.
    tree = descendants(proc.pid)
    signal_all(tree, signal.SIGCONT)  # a stopped process only dies once it runs again
    signal_all(tree, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    signal_all(descendants(proc.pid) if proc.poll() is None else tree, signal.SIGKILL)


def signal_all(pids, sig):
    """Send ``sig`` to each of ``pids``, ignoring the ones already gone."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def watch(progress, limits, proc, job_dir, ray_view, emit, stop):
    """Watchdog loop (a thread): follow the steps until the trainer ends or it hangs."""
    first, floor, factor = limits
    while not stop.wait(POLL_S):
        now = time.time()
        progress.poll(now)
        hang = progress.hang(now, first, floor, factor)
        if hang:
            on_hang(hang, proc, job_dir, ray_view, emit)
            return


def parse_limits(text):
    """``FIRST,FLOOR,FACTOR`` (seconds, seconds, multiple) as floats; None for ``0`` or empty (off)."""
    if not text or text.strip() in ("0", "off"):
        return None
    parts = [float(p) for p in text.split(",")]
    if len(parts) != 3 or min(parts) <= 0:
        raise ValueError("--watchdog wants FIRST,FLOOR,FACTOR, all > 0 (got %r)" % text)
    return tuple(parts)


def verdict(code, job_dir, ray_view, started):
    """Classify the end of the trainer (mvp_verdict.judge_job_dir); the record lists the files saved.

    A failure that names no cause yet may be a node Ray has not declared dead yet (its health
    checks take tens of seconds): Ray's node table is read again for up to NODE_WAIT_S.
    """
    nodes, actors, saved, note, holders = [], [], [], None, []
    end_ms = int(time.time() * 1000)

    def judge():
        return mvp_verdict.judge_job_dir(job_dir, "SUCCEEDED" if code == 0 else "FAILED", exit_code=code,
                                         nodes=nodes, actors=actors, start_ms=int(started * 1000), end_ms=end_ms,
                                         holders=holders)
    try:
        ray_view.connect()
        holders[:] = ray_view.other_active_jobs()
        nodes = ray_view.nodes()
        actors = [a for a in ray_view.actors() if str(a.get("state")).upper() == "DEAD"]
        record = judge()
        deadline = time.time() + NODE_WAIT_S
        while record["cause"] in ("collective", "unknown") and time.time() < deadline:
            time.sleep(3)
            nodes = ray_view.nodes()
            record = judge()
        if code != 0:
            saved = ray_view.worker_errors(os.path.join(job_dir, FILES["workers_logs"]))
    except Exception as exc:  # no Ray tables: the job's own files alone decide
        note = "Ray's tables not read: %s" % exc
        record = judge()
    record.update(exit_code=code, decided_by="mvp_entry.py on %s" % socket.gethostname(), holders=holders,
                  worker_error_files=[os.path.relpath(p, job_dir) for p in saved], recorded_at=time.time())
    if note:
        record["note"] = note
    return record


def main():
    """Parse arguments, print the precheck lines, run the program with its output teed and watched."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="file that receives a copy of the output")
    parser.add_argument("--metrics", default="", help="verl's file logger output (one JSON line per step)")
    parser.add_argument("--watchdog", default="", help="FIRST,FLOOR,FACTOR (s, s, x median step); 0: off")
    parser.add_argument("--dashboard-port", type=int, default=8265, help="the head's dashboard port")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program given after --")
    limits = parse_limits(args.watchdog)
    job_dir = os.path.dirname(os.path.dirname(os.path.abspath(args.log)))
    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    with open(args.log, "a", encoding="utf-8") as log:
        lock = threading.Lock()

        def emit(line):
            with lock:
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()
        try:
            lines = precheck()
        except SystemExit as exc:
            emit("%s\n" % exc.code)
            return 2
        stamper = Stamper(args.metrics, os.path.join(job_dir, FILES["steps"]))
        stamper.event("start")
        for line in lines:
            emit(line + "\n")
        started = time.time()
        proc = subprocess.Popen(program, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        ray_view = RayView(os.environ.get("MVP_SUBMISSION_ID", ""), args.dashboard_port)
        progress = Progress(args.metrics, started) if args.metrics else None
        stop = threading.Event()
        stamping = threading.Thread(target=stamp_loop, args=(stamper, stop), daemon=True) if args.metrics else None
        if stamping:
            stamping.start()
        watcher = None
        if progress and limits:
            emit("MVP_WATCHDOG=on first step %gs, then max(%gs, %g x median step)\n" % limits)
            watcher = threading.Thread(target=watch, args=(progress, limits, proc, job_dir, ray_view, emit, stop),
                                       daemon=True)
            watcher.start()
        for line in proc.stdout:
            emit(line)
        code = proc.wait()
        stop.set()
        if stamping:
            stamping.join(timeout=30)
        stamper.event("trainer_exit", code=code)
        if watcher:
            watcher.join(timeout=600)
        if watcher and os.path.exists(os.path.join(job_dir, FILES["watchdog"])):
            code = HANG_EXIT
        try:
            record = verdict(code, job_dir, ray_view, started)
            write_json(os.path.join(job_dir, FILES["verdict"]), record)
            emit("MVP_VERDICT=%s\n" % mvp_verdict.one_line(record))
        except Exception as exc:  # the verdict is best effort; the exit code stays the trainer's
            emit("MVP_VERDICT_ERROR=%s\n" % exc)
        emit("MVP_EXIT_CODE=%d\n" % code)
        return code


if __name__ == "__main__":
    sys.exit(main())
