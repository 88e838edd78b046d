#!/usr/bin/env python3
"""selftest.py: the `selftest` workload, a cluster acceptance job that needs no GPU.

Checks, each printed as ``SELFTEST <name> OK|FAIL <detail>``:
  driver_placement  the driver's node carries --worker-resource and is not the head;
  workers           one task pinned to every ALIVE worker node returns its hostname,
                    and there are at least --expect-workers of them;
  data:<key>        each --data parquet reads with pyarrow and has the columns verl
                    needs (RL: data_source, prompt, ability, reward_model, extra_info;
                    SFT: messages);
  internal_token    when MVP_INTERNAL_TOKEN is set, or MVP_SELFTEST_REQUIRE_TOKEN=1:
                    the driver's environment holds the token (only its presence and
                    the first 12 hex digits of its sha256 are printed, never the value);
  interconnect      a torch.distributed all-reduce across every worker (one actor per
                    worker; gloo on CPU nodes, NCCL where CUDA is available) at the sizes
                    of MVP_SELFTEST_INTERCONNECT_SIZES_MIB (1,16,64; "off": skipped),
                    MVP_SELFTEST_INTERCONNECT_ITERATIONS (5) timed after one warm-up, and
                    each pair of ring neighbours at MVP_SELFTEST_INTERCONNECT_PAIR_MIB (16);
                    bus bandwidth (nccl-tests: algbw x 2(n-1)/n, bytes/s) per size and pair
                    goes to <job-dir>/logs/interconnect.json and the shared root's
                    ray/interconnect_latest.json; the first good run sets the cluster's
                    ray/interconnect_baseline.json, later runs print
                    ``SELFTEST interconnect WARN ...`` naming the size or node pair below
                    MVP_SELFTEST_INTERCONNECT_WARN_FRACTION (0.7) x the baseline (a
                    warning, not a failure). Fewer than 2 workers, or a worker without
                    torch: ``SELFTEST interconnect SKIP <why>``, not a failure;
With MVP_SELFTEST_PHASES set (a JSON object), none of those checks runs: the job plays a training run
whose phases the caller sets, for the tests of the GPU-hour ledger - ``startup_s`` (sleep before the first
step), ``steps``, ``step_s`` (each step), ``save_freq`` and ``save_s`` (after every save_freq-th step's
metrics line, a checkpoint ``checkpoints/global_step_N/`` taking save_s, then verl's tracker file, the order
of verl's SFT trainer), ``fail_after`` (exit 1 right after that step's line and save, if any). Each step
appends verl's file-logger line ``{"step": N, "data": {"train/loss": ...}}`` to ``logs/metrics.jsonl``;
what happened, with wall-clock times, goes to ``logs/phases.json`` (the tests' ground truth).
Otherwise, when MVP_SELFTEST_HOLD_SECONDS is set in the job's env_vars, stays alive
that long (to test concurrent jobs and stop.yml), writes
``<job-dir>/checkpoints/selftest_result.json`` and exits 1 when any check
failed (0 otherwise).
"""
import argparse
import datetime
import glob
import hashlib
import importlib.util
import json
import os
import socket
import sys
import time

RL_COLUMNS = {"data_source", "prompt", "ability", "reward_model", "extra_info"}
SFT_COLUMNS = {"messages"}


def check_parquet(path):
    """Return (ok, detail) for a dataset file: readable, non-empty, expected columns."""
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    columns = set(table.column_names)
    wanted = SFT_COLUMNS if "messages" in columns or "sft" in path else RL_COLUMNS
    missing = sorted(wanted - columns)
    if missing:
        return False, "%s lacks columns %s (has %s)" % (path, missing, sorted(columns))
    if table.num_rows == 0:
        return False, "%s has no rows" % path
    return True, "%s rows=%d columns=%s" % (path, table.num_rows, sorted(columns))


def _env_float(name, default):
    """A number from the job's environment (default when unset or empty); ValueError for text."""
    value = os.environ.get(name, "")
    return float(value) if value.strip() else float(default)


def interconnect_settings(ic):
    """The interconnect check's settings from the job's environment.

    :param ic: the mvp_interconnect module (its defaults).
    :returns: dict sizes (list of int bytes; empty: turned off), pair_bytes (int), iterations
        (int), fraction (float).
    :raises ValueError: for a value that is not a positive number.
    """
    raw = os.environ.get("MVP_SELFTEST_INTERCONNECT_SIZES_MIB", "").strip()
    if raw.lower() in ("off", "0", "none", "false"):
        sizes = []
    else:
        sizes = [float(x) for x in (raw.split(",") if raw else ic.DEFAULT_SIZES_MIB) if str(x).strip()]
    settings = {"sizes": sorted(set(int(m * ic.MIB) for m in sizes)),
                "pair_bytes": int(_env_float("MVP_SELFTEST_INTERCONNECT_PAIR_MIB", ic.DEFAULT_PAIR_MIB) * ic.MIB),
                "iterations": int(_env_float("MVP_SELFTEST_INTERCONNECT_ITERATIONS", ic.DEFAULT_ITERATIONS)),
                "fraction": _env_float("MVP_SELFTEST_INTERCONNECT_WARN_FRACTION", ic.DEFAULT_WARN_FRACTION)}
    if any(b < 4 for b in settings["sizes"]) or settings["pair_bytes"] < 4 or settings["iterations"] < 1 \
            or settings["fraction"] <= 0:
        raise ValueError("interconnect settings must be positive (sizes >= 4 bytes): %r" % settings)
    return settings


class Peer(object):
    """One rank of the interconnect measurement: a Ray actor pinned to one worker node."""

    def where(self):
        """This node's host name and IP, and whether torch is here (then imported: the slow part, early).

        :returns: dict host, ip, torch (bool), import_seconds (float).
        """
        import ray
        begin = time.perf_counter()
        found = importlib.util.find_spec("torch") is not None
        if found:
            import torch.distributed  # noqa: F401 pylint: disable=unused-import
        return {"host": socket.gethostname(), "ip": ray.util.get_node_ip_address(), "torch": found,
                "import_seconds": round(time.perf_counter() - begin, 3)}

    def free_port(self):
        """A TCP port free on this node now (rank 0's rendezvous)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            return sock.getsockname()[1]

    def run(self, address, port, rank, world, sizes, iterations, pairs, phases, pair_bytes):
        """Join the process group, time the all-reduces and this rank's pair rounds.

        :returns: dict backend, allreduce {bytes: [seconds of each timed all-reduce]}, pairs {index: [seconds]}.
        """
        import torch
        import torch.distributed as dist
        from mvp_interconnect import iterations_for
        begin = time.perf_counter()
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
        dist.init_process_group(backend, init_method="tcp://%s:%d" % (address, port), rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        joined = time.perf_counter()

        def sync():
            if backend == "nccl":
                torch.cuda.synchronize()

        def timed(nbytes, group=None):
            count = iterations_for(nbytes, iterations)
            tensor = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)  # sums stay finite
            dist.all_reduce(tensor, group=group)  # warm-up: the connections and buffers
            sync()
            dist.barrier(group=group)
            times = []
            for _ in range(count):
                start = time.perf_counter()
                dist.all_reduce(tensor, group=group)
                sync()
                times.append(time.perf_counter() - start)
            return times

        out = {"backend": backend, "allreduce": {}, "pairs": {},
               "phase_seconds": {"init_process_group": joined - begin}}
        for nbytes in sizes:
            out["allreduce"][nbytes] = timed(nbytes)
        # Every rank makes every pair's group (torch.distributed requires all to enter new_group).
        groups = [dist.new_group(list(pair)) for pair in pairs] if world > 2 else [None for _ in pairs]
        for phase in phases:
            for index in phase:
                if rank in pairs[index]:
                    out["pairs"][index] = timed(pair_bytes, groups[index])
            dist.barrier()
        dist.destroy_process_group()
        out["phase_seconds"]["measure"] = time.perf_counter() - joined
        return out


def write_json(path, data, exclusive=False):
    """Write JSON atomically (temp file + rename); exclusive: only when path does not exist yet.

    :returns: bool, whether the file was written (False: exclusive and it existed).
    """
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
    try:
        if not exclusive:
            os.rename(tmp, path)
            return True
        try:
            os.link(tmp, path)  # fails when another run set it first
            return True
        except FileExistsError:
            return False
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def read_json(path):
    """A JSON file's content, or None when missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


class Interconnect(object):
    """The interconnect check: start one actor per worker early (torch imports while the other
    checks run), then measure, record and compare with the cluster's baseline.

    :param ray: the ray module (connected).
    :param workers: list of ray.nodes() entries of the ALIVE worker nodes.
    :param args: the parsed arguments (job_dir, shared_root).
    :param cuda_nodes: node ids with real GPUs: their actor asks Ray for one GPU (NCCL needs it
        visible); a logical GPU on a CPU node is left to the training jobs.
    """

    def __init__(self, ray, workers, args, cuda_nodes=()):
        self.ray, self.args, self.started = ray, args, time.time()
        self.actors, self.ready, self.early = [], [], None
        self.record = {"submission_id": os.environ.get("MVP_SUBMISSION_ID")}
        try:
            import mvp_interconnect as ic
            from mvp_job import job_file
        except ImportError as exc:
            self.early = ("FAIL", "the job tools beside selftest.py are incomplete (%s): run site.yml" % exc)
            return
        self.ic, self.job_file = ic, job_file
        self.record.update({"unit": ic.UNIT, "definition": ic.DEFINITION})
        try:
            self.settings = interconnect_settings(ic)
        except ValueError as exc:
            self.early = ("FAIL", str(exc))
            return
        if not self.settings["sizes"]:
            self.early = ("SKIP", "turned off (MVP_SELFTEST_INTERCONNECT_SIZES_MIB=%s)"
                          % os.environ.get("MVP_SELFTEST_INTERCONNECT_SIZES_MIB"))
            return
        if len(workers) < 2:
            self.early = ("SKIP", "fewer than 2 workers (%d): an all-reduce across nodes needs 2" % len(workers))
            return
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        for node in sorted(workers, key=lambda n: n["NodeManagerAddress"]):
            gpus = 1 if node["NodeID"] in cuda_nodes and node.get("Resources", {}).get("GPU", 0) >= 1 else 0
            self.actors.append(ray.remote(Peer).options(
                num_cpus=0, num_gpus=gpus,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote())
        self.ready = [a.where.remote() for a in self.actors]

    def finish(self, state, detail, warnings=(), result=None, comparison=None):
        """Write the record (job directory and the cluster's latest) and return (state, detail, warnings)."""
        record = self.record
        record.update(result or {})
        record.update({"state": state, "detail": detail, "warnings": list(warnings),
                       "seconds": round(time.time() - self.started, 3),
                       "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        if state == "SKIP":
            record["skipped"] = detail
        if comparison is not None:
            record["comparison"] = comparison
        if hasattr(self, "ic"):
            write_json(self.job_file(self.args.job_dir, "interconnect"), record)
            write_json(self.ic.files(self.args.shared_root)["latest"], record)
        return state, detail, list(warnings)

    def run(self):
        """Measure and compare.

        :returns: tuple (state, detail, warnings): state OK, FAIL or SKIP; warnings: list of str.
        """
        if self.early:
            return self.finish(*self.early)
        ray, ic, settings, actors = self.ray, self.ic, self.settings, self.actors
        try:
            ranks = ray.get(self.ready, timeout=180)
            self.record["actors_ready_seconds"] = round(time.time() - self.started, 3)
            no_torch = [r["host"] for r in ranks if not r["torch"]]
            if no_torch:
                return self.finish("SKIP", "no torch in the Python of %s: the check needs torch.distributed"
                                   % ",".join(no_torch), result={"ranks": ranks})
            world = len(actors)
            pairs = ic.ring_pairs(world)
            port = ray.get(actors[0].free_port.remote(), timeout=60)
            timings = ray.get([a.run.remote(ranks[0]["ip"], port, rank, world, settings["sizes"],
                                            settings["iterations"], pairs, ic.pair_phases(world),
                                            settings["pair_bytes"])
                               for rank, a in enumerate(actors)], timeout=300)
        except Exception as exc:  # a rank that cannot join or times out is a failed check
            lines = str(exc).strip().splitlines()
            return self.finish("FAIL", "%s: %s" % (type(exc).__name__, lines[-1] if lines else ""))
        finally:
            for actor in actors:
                ray.kill(actor)
        backends = sorted(set(t["backend"] for t in timings))
        allreduce = {n: [t["allreduce"][n] for t in timings] for n in settings["sizes"]}
        pair_seconds = {}
        for t in timings:
            for index, seconds in t["pairs"].items():
                pair_seconds.setdefault(int(index), []).append(seconds)
        result = ic.summarize(ranks, "+".join(backends), settings["iterations"], allreduce,
                              settings["pair_bytes"], pair_seconds)
        result["submission_id"] = self.record["submission_id"]
        result["phase_seconds"] = [{k: round(v, 3) for k, v in t["phase_seconds"].items()} for t in timings]
        result["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        detail = "backend=%s workers=%d %s; pairs at %g MiB: %s" % (
            result["backend"], world,
            " ".join("%gMiB=%s" % (r["mib"], ic.rate(r["busbw"]).replace(" ", "")) for r in result["sizes"]),
            settings["pair_bytes"] / float(ic.MIB),
            ", ".join("%s<->%s=%s" % (p["hosts"][0], p["hosts"][1], ic.rate(p["busbw"]).replace(" ", ""))
                      for p in result["pairs"]))
        if len(backends) > 1:
            return self.finish("FAIL", "ranks chose different backends (%s): %s" % (",".join(backends), detail),
                               result=result)
        path = ic.files(self.args.shared_root)["baseline"]
        baseline = read_json(path)
        if not ic.is_good(baseline) and ic.is_good(result):
            # exclusive: of two runs at once, the first sets it; an unreadable file is replaced
            if write_json(path, result, exclusive=not os.path.exists(path)):
                print("SELFTEST interconnect baseline set from this run: %s (delete it to set a new one from "
                      "the next selftest)" % path, flush=True)
            baseline = read_json(path)
        comparison = ic.compare(result, baseline, settings["fraction"])
        for line in comparison["lines"]:
            print("SELFTEST interconnect vs baseline: %s" % line, flush=True)
        return self.finish("OK", detail, comparison["warnings"], result=result, comparison=comparison)


def play_phases(job_dir, phases, clock=time.time, sleep=time.sleep):
    """Play a training run of the given phases (see the module's docstring) in ``job_dir``; return the exit code.

    :param job_dir: str, the job directory (``logs/`` and ``checkpoints/`` are written under it).
    :param phases: dict, startup_s, steps, step_s, save_freq, save_s (seconds, numbers >= 0), fail_after (a step
        or None).
    :returns: 0 after the last step, 1 after ``fail_after``.
    :raises ValueError: a phase that is not a number >= 0 (named).
    """
    def number(key, default):
        value = phases.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError("MVP_SELFTEST_PHASES %s: %r is not a number >= 0" % (key, value))
        return value

    from mvp_job import job_file  # beside this file (plugins/module_utils/storage/mvp_job.py)
    startup, steps, step_s = number("startup_s", 0), int(number("steps", 1)), number("step_s", 1)
    save_freq, save_s, fail_after = int(number("save_freq", 0)), number("save_s", 0), phases.get("fail_after")
    metrics, ckpts = job_file(job_dir, "metrics"), job_file(job_dir, "checkpoints")
    os.makedirs(os.path.dirname(metrics), exist_ok=True)
    record = {"asked": phases, "started_at": clock(), "steps": [], "saves": []}

    def keep():
        write_json(job_file(job_dir, "phases"), record)

    sleep(startup)
    for step in range(1, steps + 1):
        began = clock()
        sleep(step_s)
        with open(metrics, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, "data": {"train/loss": 1.0 / step}}) + "\n")
        record["steps"].append({"step": step, "start": began, "end": clock()})
        if save_freq and step % save_freq == 0:
            began = clock()
            folder = os.path.join(ckpts, "global_step_%d" % step)
            os.makedirs(folder, exist_ok=True)
            sleep(save_s)
            with open(os.path.join(folder, "model_world_size_1_rank_0.pt"), "w", encoding="utf-8") as handle:
                handle.write("synthetic\n")
            with open(os.path.join(ckpts, "latest_checkpointed_iteration.txt"), "w", encoding="utf-8") as handle:
                handle.write(str(step))
            record["saves"].append({"step": step, "start": began, "end": clock()})
        keep()
        if fail_after is not None and step == fail_after:
            record["failed_at"] = clock()
            keep()
            print("SELFTEST phases: failing after step %d as asked" % step, flush=True)
            return 1
    record["ended_at"] = clock()
    keep()
    print("SELFTEST phases: %d steps played" % steps, flush=True)
    return 0


def main():
    """Run the checks and write the result file; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--shared-root", required=True)
    parser.add_argument("--expect-workers", type=int, default=1)
    parser.add_argument("--worker-resource", default="worker_node")
    parser.add_argument("--data", action="append", default=[], help="key=path of a parquet")
    args = parser.parse_args()
    if os.environ.get("MVP_SELFTEST_PHASES"):
        return play_phases(args.job_dir, json.loads(os.environ["MVP_SELFTEST_PHASES"]))

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    checks = []

    def record(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print("SELFTEST %s %s %s" % (name, "OK" if ok else "FAIL", detail), flush=True)

    ray.init(address="auto")
    my_node = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    me = next((n for n in nodes if n["NodeID"] == my_node), None)
    if me is None:
        record("driver_placement", False, "driver node %s not in ray.nodes()" % my_node)
    else:
        resources = me.get("Resources", {})
        is_head = "node:__internal_head__" in resources
        record("driver_placement", resources.get(args.worker_resource, 0) > 0 and not is_head,
               "node_id=%s ip=%s %s=%s head=%s" % (my_node, me["NodeManagerAddress"],
                                                   args.worker_resource,
                                                   resources.get(args.worker_resource), is_head))

    @ray.remote(num_cpus=0)
    def where():
        # NVIDIA device files: a real GPU (the interconnect check then asks Ray for one), not a logical one
        return (socket.gethostname(), ray.get_runtime_context().get_node_id(),
                bool(glob.glob("/dev/nvidia[0-9]*")))

    workers = [n for n in nodes if n.get("Resources", {}).get(args.worker_resource, 0) > 0]
    refs = [where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
            .remote() for n in workers]
    answers = ray.get(refs, timeout=120)
    hostnames = sorted(a[0] for a in answers)
    pinned = all(a[1] == n["NodeID"] for a, n in zip(answers, workers))
    cuda_nodes = set(n["NodeID"] for a, n in zip(answers, workers) if a[2])
    record("workers", len(workers) >= args.expect_workers and pinned,
           "expected>=%d found=%d hostnames=%s" % (args.expect_workers, len(workers),
                                                   ",".join(hostnames)))
    # The interconnect's actors start now: torch imports on the workers while the other checks run.
    peers = Interconnect(ray, workers, args, cuda_nodes)

    for item in args.data:
        key, _, path = item.partition("=")
        try:
            ok, detail = check_parquet(path)
        except Exception as exc:  # any read failure is a failed check
            ok, detail = False, "%s: %s" % (path, exc)
        record("data:" + key, ok, detail)

    token = os.environ.get("MVP_INTERNAL_TOKEN", "")
    if token or os.environ.get("MVP_SELFTEST_REQUIRE_TOKEN") == "1":
        record("internal_token", bool(token), "present=%s sha256_12=%s" % (
            bool(token), hashlib.sha256(token.encode()).hexdigest()[:12] if token else "-"))

    state, detail, warnings = peers.run()
    if state == "SKIP":
        checks.append({"check": "interconnect", "ok": True, "skipped": True, "detail": detail})
        print("SELFTEST interconnect SKIP %s" % detail, flush=True)
    else:
        record("interconnect", state == "OK", detail)
    for warning in warnings:
        print("SELFTEST interconnect WARN %s" % warning, flush=True)

    hold = float(os.environ.get("MVP_SELFTEST_HOLD_SECONDS", "0") or 0)
    if hold > 0:
        print("SELFTEST holding for %.0fs" % hold, flush=True)
        time.sleep(hold)

    result = {
        "submission_id": os.environ.get("MVP_SUBMISSION_ID"),
        "driver_host": socket.gethostname(),
        "driver_node_id": my_node,
        "worker_hostnames": hostnames,
        "checks": checks,
        "interconnect_warnings": warnings,
        "ok": all(c["ok"] for c in checks),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    from mvp_job import job_file  # beside this file, like mvp_entry.py's (submit.yml refuses a job without it)
    out = job_file(args.job_dir, "selftest_result")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = os.path.join(os.path.dirname(out), "." + os.path.basename(out) + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    os.rename(tmp, out)
    print("SELFTEST RESULT %s" % ("OK" if result["ok"] else "FAIL"), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
