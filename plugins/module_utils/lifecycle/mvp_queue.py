# -*- coding: utf-8 -*-
"""The job queue of a shared cluster: a job's shape, whether the cluster can ever hold it, and admission.

Ray has no job queue of its own: a trainer that starts while another holds the GPUs fails at once
(verl's ``ResourcePoolManager._check_resource_available``) or, when each of its placement groups
alone fits, reserves part of its gang and waits forever holding it. The project admits jobs by
their **whole shape**, as Kueue admits a RayJob's gang: a job's trainer starts only when every node
group it will ask Ray for fits what is free, in submission order.

Standard library only, one file for three places:

* the job spec builder (``mvp_spec.mvp_job_spec``) computes the job's ``shape`` with
  :func:`job_shape` and passes it to the gate as ``--pool`` options (:func:`pool_options`);
* the refusal before submission (``mvp_refuse.mvp_submit_problems``) compares the shape with the
  ALIVE workers' totals (:func:`shape_problem`);
* the gate in the job's entrypoint (``mvp_gate.py`` on the driver's worker; ``job_tools`` installs
  a copy beside it) plans the queue of every active job with :func:`plan` and starts the trainer
  when :func:`admit` says so.

A **shape** is ``{"pools": [{"name", "nodes", "gpus_per_node", "cpus_per_node"}], "gpus", "cpus",
"rule", "keys"}``: each pool is ``nodes`` node groups, and each node group must land on ONE node
(verl makes one STRICT_PACK placement group of ``gpus_per_node`` bundles per node entry of a pool;
the groups of a pool may share a node when it has room). ``cpus_per_node`` is what verl's bundles
ask (``{"CPU": max_colocate_count, "GPU": 1}`` per process). A job whose shape has no pool (a
script such as the selftest) reserves nothing and is never queued.

Resources are Ray's logical ones (``GPU``, ``CPU``): a CPU-device run on the local inventory asks
for logical GPUs too (the verl CPU platform names ``GPU`` when the cluster advertises them).
"""

from __future__ import annotations

import itertools
import re
import shlex

# verl's trainers and how each builds its resource pools (read from verl 0.9.1; the keys are the
# trainer's Hydra keys, with verl's defaults where the job does not set them).
TRAINERS = {
    "verl.trainer.main_ppo": {
        "pools": (
            # name, nodes key, GPUs per node key, default nodes, default GPUs per node, enabled by
            ("global_pool", "trainer.nnodes", "trainer.n_gpus_per_node", 1, 8, None),
            ("reward_pool", "reward.reward_model.nnodes", "reward.reward_model.n_gpus_per_node", 0, 8,
             "reward.reward_model.enable_resource_pool"),
            ("teacher_pool", "distillation.nnodes", "distillation.n_gpus_per_node", 0, 8, "distillation.enabled"),
        ),
        "cpus_per_gpu": 3,
        "rule": "verl.trainer.main_ppo (RayPPOTrainer.init_resource_pool_mgr): global_pool = [trainer.n_gpus_per_node] "
                "* trainer.nnodes for actor, rollout, reference and critic; reward_pool = "
                "[reward.reward_model.n_gpus_per_node] * reward.reward_model.nnodes when "
                "reward.reward_model.enable_resource_pool; teacher_pool = [distillation.n_gpus_per_node] * "
                "distillation.nnodes when distillation.enabled; one STRICT_PACK placement group per node, "
                "bundles {CPU: 3, GPU: 1} (ResourcePoolManager.max_colocate_count 3)",
    },
    "verl.trainer.sft_trainer_ray": {
        "pools": (("global_pool", "trainer.nnodes", "trainer.n_gpus_per_node", 1, 1, None),),
        "cpus_per_gpu": 10,
        "rule": "verl.trainer.sft_trainer_ray: RayResourcePool([trainer.n_gpus_per_node] * trainer.nnodes); one "
                "STRICT_PACK placement group per node, bundles {CPU: 10, GPU: 1} (RayResourcePool's "
                "max_colocate_count 10)",
    },
}
# A pool on the gate's command line: name=<nodes>x<GPUs per node>:<CPUs per node>.
POOL_RE = re.compile(r"^([A-Za-z0-9_.-]+)=(\d+)x(\d+):(\d+(?:\.\d+)?)$")
# Ray job states that hold a place in the queue.
ACTIVE = ("PENDING", "RUNNING")
# The job tool every queued job's entrypoint starts with.
GATE_TOOL = "mvp_gate.py"
# The gate's option that carries a job's priority (a whole number; 0 when absent).
PRIORITY_FLAG = "--priority"
# The gate's option that carries a continued run's place in the queue: its first attempt's submission time
# (seconds since the epoch); absent - Ray's submission time of the job itself.
SINCE_FLAG = "--since"
# The most sets of victims one preemption decision tries (fewest first): bounded work on a big cluster.
MAX_VICTIM_SETS = 5000


def _whole(value, default):
    """``value`` as an int >= 0 (``default`` when None); ValueError for anything else."""
    if value is None:
        return default
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise ValueError(value)
    return int(value)


def _true(value):
    """Hydra's reading of a boolean override (``true``/``True``/True)."""
    return str(value).strip().lower() == "true"


def job_shape(module, overrides):
    """The shape of a verl trainer's job, from its trainer overrides (verl's defaults where unset).

    :param module: str, the trainer's module (the catalog's ``module``); None or another module
        gives None (a script reserves nothing).
    :param overrides: dict, the job's merged trainer overrides (Hydra keys -> values).
    :returns: dict (see the module docstring) or None.
    :raises ValueError: naming the key whose value is not a whole number >= 0.
    """
    trainer = TRAINERS.get(module or "")
    if not trainer:
        return None
    pools, keys = [], []
    for name, nodes_key, gpus_key, nodes_default, gpus_default, enabled_by in trainer["pools"]:
        if enabled_by:
            keys.append(enabled_by)
            if not _true(overrides.get(enabled_by, False)):
                continue
        keys += [nodes_key, gpus_key]
        values = []
        for key, default in ((nodes_key, nodes_default), (gpus_key, gpus_default)):
            try:
                values.append(_whole(overrides.get(key), default))
            except ValueError:
                raise ValueError("%s must be a whole number >= 0 (got %r)" % (key, overrides.get(key)))
        nodes, gpus = values
        if nodes and gpus:
            pools.append({"name": name, "nodes": nodes, "gpus_per_node": gpus,
                          "cpus_per_node": gpus * trainer["cpus_per_gpu"]})
    return {"pools": pools, "gpus": sum(p["nodes"] * p["gpus_per_node"] for p in pools),
            "cpus": sum(p["nodes"] * p["cpus_per_node"] for p in pools),
            "rule": trainer["rule"], "keys": keys}


def describe(shape):
    """One phrase for a shape: ``2 nodes x 1 GPU (10 CPUs each)`` (pools joined by ``+``)."""
    pools = (shape or {}).get("pools") or []
    if not pools:
        return "nothing reserved"
    return " + ".join("%s%d node%s x %g GPU%s (%g CPUs each)" % (
        "%s: " % p["name"] if len(pools) > 1 else "", p["nodes"], "s" if p["nodes"] != 1 else "",
        p["gpus_per_node"], "s" if p["gpus_per_node"] != 1 else "", p["cpus_per_node"]) for p in pools)


def pool_options(shape, priority=0, since=None):
    """The gate's queue options for a shape: ``["--pool", "global_pool=2x1:10", ...]``, ``--priority N``
    for a priority other than 0 (the default class's number, as Kubernetes gives a pod without a class), and
    ``--since S`` for a continued run (its first attempt's submission time: it keeps its place in the queue).

    :param shape: dict (:func:`job_shape`). :param priority: int, the job's priority (higher first).
    :param since: float or None, seconds since the epoch.
    """
    out = []
    for pool in (shape or {}).get("pools") or []:
        out += ["--pool", "%s=%dx%d:%g" % (pool["name"], pool["nodes"], pool["gpus_per_node"], pool["cpus_per_node"])]
    if int(priority or 0) != 0:
        out += [PRIORITY_FLAG, "%d" % int(priority)]
    if since:
        out += [SINCE_FLAG, "%.3f" % float(since)]
    return out


def parse_pool(text):
    """One ``--pool`` value back into a pool dict; ValueError when it is not ``name=NxG:C``."""
    match = POOL_RE.match(text or "")
    if not match:
        raise ValueError("--pool wants name=<nodes>x<GPUs per node>:<CPUs per node>, got %r" % (text,))
    return {"name": match.group(1), "nodes": int(match.group(2)), "gpus_per_node": int(match.group(3)),
            "cpus_per_node": float(match.group(4))}


def shape_of_pools(pools):
    """A shape dict from a list of pool dicts (what the gate rebuilds from its options)."""
    return {"pools": list(pools), "gpus": sum(p["nodes"] * p["gpus_per_node"] for p in pools),
            "cpus": sum(p["nodes"] * p["cpus_per_node"] for p in pools)}


def groups(shape):
    """The node groups of a shape, largest first: list of ``{"pool", "gpus", "cpus"}``."""
    out = []
    for pool in (shape or {}).get("pools") or []:
        out += [{"pool": pool["name"], "gpus": pool["gpus_per_node"], "cpus": pool["cpus_per_node"]}] * pool["nodes"]
    return sorted(out, key=lambda g: (-g["gpus"], -g["cpus"]))


def pack(shape, free):
    """Place every node group of ``shape`` on a node of ``free`` (best fit, largest group first).

    :param shape: dict, a shape.
    :param free: dict node key -> {"GPU": float, "CPU": float}: what each node has to give.
    :returns: (dict node key -> what is left after the groups, dict node key -> list of pool names)
        when every group fits; None when one does not.
    """
    left = {node: {"GPU": float(res.get("GPU", 0)), "CPU": float(res.get("CPU", 0))} for node, res in free.items()}
    placed = {}
    for group in groups(shape):
        fits = [node for node in sorted(left) if left[node]["GPU"] + 1e-9 >= group["gpus"]
                and left[node]["CPU"] + 1e-9 >= group["cpus"]]
        if not fits:
            return None
        node = min(fits, key=lambda n: (left[n]["GPU"] - group["gpus"], left[n]["CPU"] - group["cpus"], n))
        left[node]["GPU"] -= group["gpus"]
        left[node]["CPU"] -= group["cpus"]
        placed.setdefault(node, []).append(group["pool"])
    return left, placed


def worker_totals(workers):
    """The GPU and CPU totals of ALIVE workers by IP, what shapes are packed into.

    :param workers: list of node dicts with ``node_ip`` (or ``node_id``) and ``resources_total`` (Ray's
        State API rows, as ``mvp_ray.summarize`` returns them in ``alive_workers``).
    :returns: dict node key -> {"GPU": float, "CPU": float}.
    """
    return {w.get("node_ip") or w.get("node_id") or "?": {key: float((w.get("resources_total") or {}).get(key, 0))
                                                          for key in ("GPU", "CPU")} for w in workers or []}


def _node_text(totals):
    """``10.0.0.3: 1 GPU, 16 CPUs; ...`` for a node -> resources dict."""
    return "; ".join("%s: %g GPU, %g CPU" % (node, res.get("GPU", 0), res.get("CPU", 0))
                     for node, res in sorted(totals.items())) or "no ALIVE worker"


def shape_problem(shape, totals, keys_hint=None):
    """Why the cluster can never hold ``shape`` (compared with its workers' totals), or "".

    :param shape: dict, a shape (None or no pools: "").
    :param totals: dict node key (IP) -> {"GPU", "CPU"}: the ALIVE workers' total resources.
    :param keys_hint: list of str, the keys to change (default: the shape's ``keys``).
    :returns: str, naming the shape, the cluster's and the keys to change.
    """
    if not (shape or {}).get("pools") or pack(shape, totals) is not None:
        return ""
    keys = [k for k in (keys_hint or shape.get("keys") or []) if not k.endswith("enable_resource_pool")
            and not k.endswith(".enabled")]
    return ("the job's shape, %s (%g GPUs in all), can never fit this cluster's ALIVE workers (%s): verl would "
            "reserve part of it and wait forever, holding GPUs other jobs need. Fix: lower %s in trainer_overrides "
            "so that each node group fits one worker, or add workers (site.yml)."
            % (describe(shape), shape.get("gpus", 0), _node_text(totals), " / ".join(keys) or "the trainer's sizes"))


def gate_options(entrypoint):
    """The queue options of a job from its entrypoint: ``{"pools": [...], "locks": [...], "priority": int,
    "since": float or None}`` or None.

    Only the options before the gate's ``--`` count (what comes after belongs to the program).

    :param entrypoint: str, the job's entrypoint (Ray's ``JobDetails.entrypoint``).
    :returns: dict, or None when the entrypoint does not start with the gate (or cannot be split).
    """
    try:
        words = shlex.split(entrypoint or "")
    except ValueError:
        return None
    for index, word in enumerate(words):
        if word.rsplit("/", 1)[-1] != GATE_TOOL:
            continue
        rest = words[index + 1:]
        rest = rest[:rest.index("--")] if "--" in rest else rest
        out = {"pools": [], "locks": [], "priority": [], "since": []}
        for flag, value in zip(rest, rest[1:] + [None]):
            for name, key in (("--pool", "pools"), ("--lock", "locks"), (PRIORITY_FLAG, "priority"),
                              (SINCE_FLAG, "since")):
                if flag == name and value is not None:
                    out[key].append(value)
                elif flag.startswith(name + "="):
                    out[key].append(flag.split("=", 1)[1])
        try:
            out["pools"] = [parse_pool(p) for p in out["pools"]]
        except ValueError:
            out["pools"] = []
        try:
            out["priority"] = int(out["priority"][-1]) if out["priority"] else 0
        except ValueError:
            out["priority"] = 0
        try:
            out["since"] = float(out["since"][-1]) if out["since"] else None
        except ValueError:
            out["since"] = None
        return out
    return None


def _status(job):
    """Ray's job status without an enum prefix (``JobStatus.RUNNING`` -> ``RUNNING``)."""
    return str(job.get("status", "")).rsplit(".", 1)[-1]


def plan(jobs, totals, started=()):
    """The queue: every active gated job in order, admitted or waiting, and why.

    The order: first the jobs whose program already started (they hold their resources), then the waiting
    ones by priority (higher first, the gate's ``--priority``), then by submission time (a continued run's
    first attempt's, the gate's ``--since``: a preempted run keeps its place). Within that order,
    first come, first served: a job is admitted when every job ahead of it is, its locks are free and its
    whole shape fits what the admitted jobs before it leave of the workers' totals. A waiting job holds
    back every job behind it (none overtakes it: no starvation within a priority), except a job the ALIVE
    workers cannot hold at all (a lost node): it waits without blocking the queue.

    :param jobs: list of dicts as the Jobs API gives them (``/api/jobs/``: ``submission_id``,
        ``status``, ``start_time`` in ms, ``entrypoint``, ``type``).
    :param totals: dict node key -> {"GPU", "CPU"}: the ALIVE workers' totals.
    :param started: collection of the submission ids whose gate already started the program (their
        ``queue.json`` says ``admitted``: :func:`started_ids`).
    :returns: list of dicts ``{submission_id, position (1-based), state ("admitted"/"waiting"),
        shape, locks, priority (int), start_time, waits_for (str, "" when admitted), free_before
        (node -> resources the admitted jobs ahead leave)}``.
    """
    started = set(started or ())
    queue = []
    for job in jobs or []:
        if not job.get("submission_id") or _status(job) not in ACTIVE:
            continue
        if str(job.get("type") or "SUBMISSION").rsplit(".", 1)[-1] != "SUBMISSION":
            continue
        options = gate_options(job.get("entrypoint"))
        if options is None:
            continue
        since = options.get("since")
        queue.append((since * 1000.0 if since else job.get("start_time") or 0, job["submission_id"], options))
    queue.sort(key=lambda item: (item[1] not in started, 0 if item[1] in started else -item[2]["priority"],
                                 item[0], item[1]))
    free = {node: dict(res) for node, res in totals.items()}
    held_locks = {}
    holders = []
    blocker = None
    out = []
    for position, (start, sid, options) in enumerate(queue, 1):
        shape = shape_of_pools(options["pools"])
        entry = {"submission_id": sid, "position": position, "shape": shape, "locks": options["locks"],
                 "priority": options["priority"], "start_time": start, "free_before": {n: dict(r) for n, r in free.items()}, "state": "waiting"}
        out.append(entry)
        taken = [lock for lock in options["locks"] if lock in held_locks]
        packed = pack(shape, free)
        if blocker:
            entry["waits_for"] = "its turn: %s is ahead of it in the queue and waits" % blocker
        elif taken:
            entry["waits_for"] = "lock %s, held by %s" % (taken[0], held_locks[taken[0]])
        elif packed is None:
            if pack(shape, totals) is None:
                entry["waits_for"] = ("workers that can hold %s: the ALIVE workers cannot (%s)"
                                      % (describe(shape), _node_text(totals)))
                continue
            entry["waits_for"] = "%s to be free, held by %s" % (describe(shape), ", ".join(
                "%s (%s)" % (h["submission_id"], describe(h["shape"])) for h in holders if h["shape"]["pools"])
                or "jobs ahead of it")
        else:
            free = packed[0]
            entry.update(state="admitted", waits_for="")
            for lock in options["locks"]:
                held_locks[lock] = sid
            holders.append(entry)
            continue
        blocker = blocker or sid
    return out


def admit(entry, ray_free):
    """Whether the job of a :func:`plan` entry may start its trainer now, and if not why.

    The plan's accounting counts every admitted job's whole shape from the moment it is admitted
    (before its trainer reserved anything); Ray's own free resources count what is reserved or used
    outside the queue (a job submitted without the gate, a colleague's actors). The job starts when
    its shape fits both, node by node.

    :param entry: dict, this job's entry of :func:`plan`.
    :param ray_free: dict node key -> {"GPU", "CPU"} free on each ALIVE worker as Ray reports it.
    :returns: (bool, str why not; "" when it may start).
    """
    if entry["state"] != "admitted":
        return False, entry.get("waits_for") or "its turn"
    both = {}
    for node, res in entry["free_before"].items():
        ray = ray_free.get(node) or {}
        both[node] = {key: min(float(res.get(key, 0)), float(ray.get(key, 0))) for key in ("GPU", "CPU")}
    if not entry["shape"]["pools"] or pack(entry["shape"], both) is not None:
        return True, ""
    return False, ("%s to be free: Ray reports %s free, held outside the queue (a job started without the "
                   "gate, or the resources of a job that just ended not yet released)"
                   % (describe(entry["shape"]), _node_text(ray_free)))


def preemptor(entries, totals):
    """The waiting job a preemption would serve: the first waiting job of :func:`plan` that the ALIVE workers can
    hold and that waits for resources (not for a lock, which no preemption frees), or None.

    :param entries: list of :func:`plan` entries. :param totals: dict node key -> {"GPU", "CPU"}.
    """
    for entry in entries:
        if entry["state"] != "waiting":
            continue
        if not entry["shape"]["pools"] or pack(entry["shape"], totals) is None:
            continue  # waits for workers that can hold it (it blocks nobody), or reserves nothing
        if str(entry.get("waits_for") or "").startswith("lock "):
            return None
        return entry
    return None


def choose_victims(entries, totals, candidates):
    """Which running jobs to preempt so that the first waiting job fits: the fewest, of the lowest priority, most
    recently started (as Kueue and Slurm pick), or None when no such set exists.

    A job is a candidate when it is admitted, its priority is lower than the waiting job's and ``candidates``
    names it (the caller's choice: runs it follows and may continue, not ``preemptible: false``, not of the
    highest class). The victims' release must make the waiting job's whole shape fit beside every admitted job
    that stays; at most MAX_VICTIM_SETS sets are tried, fewest victims first.

    :param entries: list of :func:`plan` entries. :param totals: dict node key -> {"GPU", "CPU"}: the ALIVE
        workers' totals.
    :param candidates: dict submission id -> ``{"started_at": float seconds}`` of the jobs that may be preempted.
    :returns: dict ``{"preemptor": entry, "victims": [entries, in the order chosen]}`` or None.
    """
    waiting = preemptor(entries, totals)
    if waiting is None:
        return None
    admitted = [e for e in entries if e["state"] == "admitted"]
    pool = sorted((e for e in admitted if e["submission_id"] in (candidates or {})
                   and e.get("priority", 0) < waiting.get("priority", 0)),
                  key=lambda e: (e.get("priority", 0), -float(candidates[e["submission_id"]].get("started_at") or 0),
                                 e["submission_id"]))
    tried = 0
    for size in range(1, len(pool) + 1):
        for victims in itertools.combinations(pool, size):
            tried += 1
            if tried > MAX_VICTIM_SETS:
                return None
            chosen = {v["submission_id"] for v in victims}
            free = {node: dict(res) for node, res in totals.items()}
            for entry in admitted:
                if entry["submission_id"] in chosen:
                    continue
                packed = pack(entry["shape"], free)
                free = packed[0] if packed else {node: {"GPU": 0.0, "CPU": 0.0} for node in free}
            if pack(waiting["shape"], free) is not None:
                return {"preemptor": waiting, "victims": list(victims)}
    return None


def started_ids(states):
    """The submission ids whose gate started the program, from each job's ``queue.json`` (``state: admitted``).

    :param states: dict submission id -> that job's gate record (as ``mvp_job.queue_states`` reads them).
    :returns: set of str.
    """
    return {sid for sid, own in (states or {}).items() if isinstance(own, dict) and own.get("state") == "admitted"}


def queue_rows(entries, states):
    """The queue as ``status.yml`` shows it: the plan's entries with what each job's gate recorded.

    :param entries: list of :func:`plan` entries.
    :param states: dict submission id -> the job's ``logs/queue.json`` (the gate's own record:
        ``state``, ``since``, ``waits_for``, ``admitted_at``), missing for a gate that wrote none yet.
    :returns: list of dicts ``{submission_id, position, state, shape, locks, waits_for, since,
        admitted_at}``: ``state`` is ``started`` once the gate let the program start, else
        ``queued``; ``waits_for`` is the gate's own words when it wrote any.
    """
    rows = []
    for entry in entries:
        own = states.get(entry["submission_id"]) or {}
        started = own.get("state") == "admitted"
        rows.append({
            "submission_id": entry["submission_id"], "position": entry["position"],
            "priority": entry.get("priority", 0),
            "state": "started" if started else "queued", "shape": describe(entry["shape"]),
            "locks": entry.get("locks") or [],
            "waits_for": "" if started else (own.get("waits_for") or entry.get("waits_for") or ""),
            "since": own.get("since"), "admitted_at": own.get("admitted_at")})
    return rows


def row_line(row):
    """One line for a :func:`queue_rows` row."""
    rank = ", priority %d" % row["priority"] if row.get("priority") else ""
    if row["state"] == "started":
        return "%d. %s: started at %s, shape %s%s" % (
            row["position"], row["submission_id"], row.get("admitted_at") or "?", row["shape"], rank)
    return "%d. %s: queued since %s, shape %s%s; waits for %s" % (
        row["position"], row["submission_id"], row.get("since") or "its gate to start", row["shape"], rank,
        row.get("waits_for") or "its turn")
