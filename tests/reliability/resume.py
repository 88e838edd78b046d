#!/usr/bin/env python3
"""Resume suite: real SFT runs lose a node mid-training and continue by themselves.

Each case runs ``submit.yml`` (waiting, with ``max_restarts``) in the background, waits until
the trainer has logged steps and saved checkpoints, injects a fault (``docker kill`` of a
worker container, and for one case a missing rank shard in the newest checkpoint), then waits
for submit.yml to end: the project must heal the cluster itself, submit ``<id>-r1`` from the
newest complete checkpoint, and that attempt must end where an uninterrupted run of the same
request ends, with the same final ``train/loss`` (SFT on the tiny model is deterministic here).

Expected values come from the inputs and the files the runs wrote (the checkpoint folders, the
baseline run's metrics), never from the code under test:

* the checkpoint used = the newest ``global_step_N`` whose every rank shard exists and that the
  tracker file covers, after the fault (computed here by listing the folder);
* the first step of ``-r1`` = that N + 1; its last step and final loss = the baseline's.

Cases: "killed driver worker, corrupt newest" (CI; continued from an epoch's last step), "every epoch" and
"after each epoch" (a checkpoint at each epoch's end, continued from one: verl#7401), "grpo epoch boundary" and
"ppo epoch boundary" (verl's V1 trainer continued from an epoch's last step), "killed other worker", "controller
killed" (`make resume`; its keeper starts it again and it continues the run exactly once), "killed head" (CI; nobody
acting, the job controller heals it), "site.yml restarts a run" (refused, then mvp_running_jobs=restart),
"restarts exhausted", "frozen grpo rank" (the watchdog's hang restarts too), "two grpo at once" (jobs
sharing a cluster).
Prints a table; exits 1 when a case fails. Figures (``--seconds-out``): seconds from the kill
to the first step of the next attempt, steps lost (steps logged past the checkpoint used).

Usage:
    python tests/reliability/resume.py --inventory inventories/local --host-shared /srv/mvp/private
        [--only CASE ...] [--baseline ID] [--seconds-out FILE]
"""
import json
import os
import re
import signal
import sys
import time

from ledger import check_closes, wait_for_ledger
from notify import DELIVERY_BOUND_S, Receiver, verdict_at, wait_event
from faults import (CaseFailed, Cluster, Playbook, finish_playbook, mlflow_call, restart_forcing_change, run_cases,
                    start_playbook, suite_parser, write_figures)
from suite import actors_of_class
from verdicts import Job, extra_vars, read_json, training_pids, worker_of

# The local inventory's SFT (8 steps of the 64-row sample) with a checkpoint every 2 steps, so
# that a fault after step 5 leaves two complete checkpoints (2 and 4) and maybe a third.
OVERRIDES = {"trainer.save_freq": 2}
# 3 epochs of the 64-row sample (8 steps each) with a checkpoint at every epoch's end, as most users save
# (verl's after_each_epoch): a fault right after the step-16 checkpoint continues from an epoch's last step.
EPOCHS = {"trainer.total_epochs": 3, "trainer.save_freq": 8}
# 2 epochs with the local inventory's own trainer.save_freq (4, dividing the 8-step epoch): checkpoints at 4, 8 (an
# epoch's last step), 12 and 16.
TWO_EPOCHS = {"trainer.total_epochs": 2}
# A watchdog bound far above a heal: these cases test restarts after a lost node, not hangs.
WATCHDOG = {"first_step_s": 600, "floor_s": 300, "factor": 5}
# Steps logged before the fault (checkpoints at 2 and 4 exist by then).
KILL_AFTER_STEPS = 5
# Issue 42: while submit.yml waits it prints, every submit_job_progress_interval_s (2 s in the case that checks it),
# one line per job after the command that follows it again: a step of the running job, the loss first -> last,
# s/step, ETA, restarts, the watchdog.
PROGRESS_INTERVAL_S = 2
PROGRESS_LINE = (r": RUNNING step [1-9][0-9]*/[0-9]+ [|] train/loss \S+ -> \S+ [|] .*s/step.* [|] ETA \S+ [|] "
                 r"restarts [0-9]+ of [0-9]+ [|] watchdog")
# submit.yml with its restarts: first attempt, heal, second attempt.
RUN_TIMEOUT = 1200
STEP_DIR_RE = re.compile(r"^global_step_(\d+)$")
SHARD_RE = re.compile(r"^(\w+?)_world_size_(\d+)_rank_(\d+)\.pt$")


def stamp(kind):
    """A fresh submission id for a case."""
    return "resume-%s-%s-%04x" % (kind, time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)


def metrics(job_dir):
    """{step: data} of a job's verl file logger lines (the last line of a step wins)."""
    out = {}
    try:
        with open(os.path.join(job_dir, "logs", "metrics.jsonl"), encoding="utf-8") as handle:
            for line in handle:
                if line.strip().endswith("}"):
                    row = json.loads(line)
                    out.setdefault(row["step"], {}).update(row["data"])
    except OSError:
        pass
    return out


def complete_steps(ckpt_dir):
    """Steps whose folder holds every rank's shards of each kind and that the tracker covers."""
    try:
        names = os.listdir(ckpt_dir)
        tracker = int(open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt")).read().strip())
    except (OSError, ValueError):
        return []
    good = []
    for name in names:
        match = STEP_DIR_RE.match(name)
        if not match or int(match.group(1)) > tracker:
            continue
        shards = {}
        for root, _dirs, files in os.walk(os.path.join(ckpt_dir, name)):
            for file_name in files:
                found = SHARD_RE.match(file_name)
                if found and os.path.getsize(os.path.join(root, file_name)):
                    shards.setdefault((root, found.group(1), int(found.group(2))), set()).add(int(found.group(3)))
        if shards and all(ranks == set(range(world)) for (_r, _k, world), ranks in shards.items()):
            good.append(int(match.group(1)))
    return sorted(good)


def corrupt_newest(case, job_dir):
    """Delete the last rank's optimizer shard of the newest complete checkpoint; return its step."""
    ckpt_dir = os.path.join(job_dir, "checkpoints")
    newest = complete_steps(ckpt_dir)[-1]
    folder = os.path.join(ckpt_dir, "global_step_%d" % newest)
    shards = sorted(f for f in os.listdir(folder) if f.startswith("optim_world_size_"))
    os.remove(os.path.join(folder, shards[-1]))
    case.note("removed %s from global_step_%d" % (shards[-1], newest))
    return newest


def baseline(case, overrides=None, job_id=None, key="baseline"):
    """The uninterrupted run of the same SFT request: {step: data} (run here unless --baseline names one).

    :param overrides: dict, the request's trainer overrides (this suite's OVERRIDES when None).
    :param job_id: str, the id of the run made here (a fresh ``resume-base-...`` when None).
    :param key: str, where the suite keeps the run's id for the next case of the same request.
    """
    if case.shared.get(key):
        data = metrics(os.path.join(case.cluster.host_shared, "jobs", case.shared[key]))
        if data:
            return data
    job = Job(case, job_id or stamp("base"))
    run = case.play("submit.yml", ["-e", "workload=sft", "-e", "submission_id=" + job.id]
                    + extra_vars(trainer_overrides=OVERRIDES if overrides is None else overrides,
                                 submit_job_watchdog=WATCHDOG, max_restarts=0),
                    label="baseline sft")
    if run.rc != 0:
        raise CaseFailed("the baseline run failed (rc=%s)" % run.rc)
    case.shared[key] = job.id
    return metrics(job.dir)


def controller_pid(cluster):
    """The job controller's pid, from its heartbeat under the shared storage (None when it has none)."""
    return (read_json(os.path.join(cluster.host_shared, "controller", "heartbeat.json")) or {}).get("pid")


def wait_for_run_end(case, run_id, timeout):
    """Wait for the job controller's end of the run (its first attempt's logs/run_end.json); a Playbook-like
    result whose rc is 0 when the run trained."""
    ended, started = os.path.join(case.cluster.host_shared, "jobs", run_id, "logs", "run_end.json"), time.time()
    while not os.path.exists(ended):
        if time.time() - started > timeout:
            raise CaseFailed("the job controller did not end run %s within %d s" % (run_id, timeout))
        time.sleep(1)
    record = read_json(ended) or {}
    return Playbook(["job controller", run_id], 0 if record.get("trained") else 1, json.dumps(record, indent=1),
                    time.time() - started)


def run_with_kills(case, kind, max_restarts, victims, corrupt=False, overrides=None, nobody=None, progress=False,
                   kill_at_checkpoint=None, extra=()):
    """Submit an SFT run that may restart, kill a worker in each attempt (``victims``: 'driver' or
    'other' per attempt: the first after KILL_AFTER_STEPS steps - or, with ``kill_at_checkpoint``, as soon as that
    step's checkpoint is complete -, the next ones after their first step), optionally corrupt the newest
    checkpoint after the first kill.

    :param nobody: None, ``"submitter"`` (the waiting ansible-playbook is killed with SIGKILL before the first
        worker: the job controller alone continues the run), ``"submitter later"`` (it is killed once it has
        followed the run into its next attempt - that attempt's first step: the job controller alone ends the
        run; its output is ``facts["play"]``) or ``"controller"`` (the job controller is killed with SIGKILL
        before the first worker: its keeper starts it again and it picks the run up).
    :param progress: bool, the play prints its progress line every PROGRESS_INTERVAL_S (check_progress reads it).
    :returns: (the playbook run - or, with nobody="submitter", the controller's end of the run -, list of Job
        per attempt, facts dict).
    """
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    first = Job(case, stamp(kind))
    args = ["-e", "workload=sft", "-e", "submission_id=" + first.id] + extra_vars(
        trainer_overrides=overrides or OVERRIDES, submit_job_watchdog=WATCHDOG, max_restarts=max_restarts)
    if progress:
        args += ["-e", "submit_job_progress_interval_s=%d" % PROGRESS_INTERVAL_S]
    args += list(extra)
    started = time.time()
    argv, proc = start_playbook(cluster, "submit.yml", args)
    attempts, facts = [first], {"kills": []}
    try:
        for index, victim_side in enumerate(victims):
            job = attempts[-1]
            deadline = time.time() + 600
            while not (kill_at_checkpoint in complete_steps(os.path.join(job.dir, "checkpoints"))
                       if index == 0 and kill_at_checkpoint else len(job.steps()) >= (KILL_AFTER_STEPS if index == 0
                                                                                      else 1)):
                if proc.poll() is not None or time.time() > deadline:
                    raise CaseFailed("%s logged %d steps before submit.yml ended" % (job.id, len(job.steps())))
                time.sleep(0.1 if kill_at_checkpoint else 0.5)
            driver = worker_of(cluster, job.driver_ip())
            if index == 0 and nobody == "submitter":
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                case.note("killed the submitting ansible-playbook (SIGKILL) after step %d" % max(job.steps()))
            elif index == 0 and nobody == "controller":
                pid = controller_pid(cluster)
                if not pid:
                    raise CaseFailed("no job controller heartbeat under %s/controller" % cluster.host_shared)
                os.kill(pid, signal.SIGKILL)
                facts["controller_killed"] = pid
                case.note("killed the job controller (pid %d, SIGKILL) after step %d" % (pid, max(job.steps())))
            victim = driver if victim_side == "driver" else next(h for h in cluster.workers if h != driver)
            victim_ip = next(iter(cluster.ip(victim)), "?")
            cluster.docker("kill", cluster.container[victim])
            facts["kills"].append({"at": time.time(), "job": job.id, "victim": victim, "ip": victim_ip,
                                   "last_step": max(job.steps())})
            case.note("attempt %d: killed %s (%s worker) after step %d" % (index, victim, victim_side,
                                                                          max(job.steps())))
            if corrupt and index == 0:
                time.sleep(2)  # the trainer is gone with the node: nothing writes checkpoints now
                facts["corrupted"] = corrupt_newest(case, job.dir)
            facts.setdefault("expected_resume", []).append(
                max(complete_steps(os.path.join(job.dir, "checkpoints")) or [0]))
            nxt = Job(case, "%s-r%d" % (first.id, index + 1))
            if index + 1 <= max_restarts:
                # the next attempt's first step, timed from the kill
                while not nxt.steps():
                    if (proc.poll() is not None and nobody not in ("submitter", "submitter later")) \
                            or time.time() > deadline + 600:
                        raise CaseFailed("no step of %s before submit.yml ended" % nxt.id)
                    time.sleep(0.5)
                facts.setdefault("fault_to_step_s", []).append(round(time.time() - facts["kills"][-1]["at"], 1))
                facts.setdefault("first_step_at", []).append(time.time())
                attempts.append(nxt)
                if nobody == "submitter later" and proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    case.note("killed the submitting ansible-playbook (SIGKILL) at step %d of %s"
                              % (max(nxt.steps()), nxt.id))
    finally:
        run = finish_playbook(argv, proc, started, RUN_TIMEOUT)
        case.keep(run, "submit sft max_restarts=%d" % max_restarts)
    if nobody in ("submitter", "submitter later"):
        facts["play"] = run
        run = wait_for_run_end(case, first.id, RUN_TIMEOUT)
        case.keep(run, "the job controller's end of the run")
    return run, attempts, facts


def check_continued(case, run, attempts, facts, expected_base, cause="node_lost"):
    """The run ended trained; each attempt ended with ``cause`` (its verdict naming the lost node, or for
    cluster_changed the play that interrupted it) and the next continued from the expected checkpoint at its
    step + 1; the last attempt ends at the baseline's last step with its final loss."""
    case.check(run.rc == 0, "submit.yml rc=%s, expected 0 after the restarts" % run.rc)
    for index, (prev, nxt) in enumerate(zip(attempts, attempts[1:])):
        status = read_json(os.path.join(prev.dir, "logs", "status.json")) or {}
        case.check(status.get("cause") == cause, "%s: cause %r, expected %s" % (prev.id, status.get("cause"), cause))
        named = facts["kills"][index]["ip"]
        case.check(named in (status.get("summary") or ""), "%s: the verdict %r does not name %s"
                   % (prev.id, status.get("summary"), named))
        link = read_json(os.path.join(prev.dir, "logs", "restart.json")) or {}
        case.check(link.get("next") == nxt.id and link.get("cause") == cause, "%s/logs/restart.json next=%r cause=%r, "
                   "expected %s, %s" % (prev.id, link.get("next"), link.get("cause"), nxt.id, cause))
        spec = read_json(os.path.join(nxt.dir, "config", "job_spec.json")) or {}
        resumed = spec.get("resume_from") or {}
        expected = facts["expected_resume"][index]
        case.check(resumed.get("submission_id") == prev.id and resumed.get("step") == expected,
                   "%s resume_from %s, expected %s at step %d" % (nxt.id, resumed, prev.id, expected))
        steps = sorted(metrics(nxt.dir))
        case.check(steps and steps[0] == expected + 1, "%s first step %s, expected %d" % (
            nxt.id, steps[:1], expected + 1))
        check_epoch_boundary(case, prev, nxt, resumed, expected)
        case.note("%s continued %s from step %d (%d steps lost)" % (nxt.id, prev.id, expected,
                                                                  facts["kills"][index]["last_step"] - expected))
        case.seconds.setdefault("steps_lost", []).append(facts["kills"][index]["last_step"] - expected)
    last = attempts[-1]
    status = read_json(os.path.join(last.dir, "logs", "status.json")) or {}
    case.check(status.get("verdict") == "trained", "%s verdict %r (%s)" % (last.id, status.get("verdict"),
                                                                          status.get("summary")))
    final, base_last = metrics(last.dir), max(expected_base)
    case.check(max(final or [0]) == base_last, "last step %s, the uninterrupted run's %d" % (max(final or [0]), base_last))
    loss, base_loss = final.get(base_last, {}).get("train/loss"), expected_base[base_last].get("train/loss")
    case.check(loss is not None and abs(loss - base_loss) <= 1e-6 * max(1.0, abs(base_loss)),
               "final train/loss %s, the uninterrupted run's %s" % (loss, base_loss))
    case.note("final train/loss %s = uninterrupted %s at step %d" % (loss, base_loss, base_last))
    case.seconds.setdefault("fault_to_first_new_step_s", []).extend(facts.get("fault_to_step_s", []))
    record_phases(case, attempts, facts)
    check_one_mlflow_run(case, attempts, base_last, base_loss)
    check_run_ledger(case, attempts, facts)


def check_run_ledger(case, attempts, facts):
    """Issue 63: the run's ledger (its first attempt's ``logs/ledger.json``, written by the job controller) closes
    within 1%; the steps it counts recomputed are the steps each attempt logged after the checkpoint its next attempt
    continued from (the kill's last step - that step, this suite's facts); each continued attempt's failure gap is the
    kill to Ray's end of the attempt (the kill came right after a step's line or its checkpoint, within 2 s); the heal
    time between attempts is the job controller's own record (``logs/continued.json``)."""
    ledger = wait_for_ledger(case, attempts[0].dir)
    check_closes(case, ledger, attempts[0].id)
    recomputed = sum(k["last_step"] - step for k, step in zip(facts["kills"], facts["expected_resume"])
                     if k["job"] != attempts[-1].id)
    case.check(ledger["steps"]["recomputed"] == recomputed, "ledger: %s steps recomputed, the attempts logged %d "
               "after the checkpoints continued from" % (ledger["steps"]["recomputed"], recomputed))
    heal = sum((read_json(os.path.join(a.dir, "logs", "continued.json")) or {}).get("heal_s") or 0 for a in attempts)
    case.check(abs(ledger["no_gpu"]["heal_s"] - heal) < 0.05, "ledger: heal %s s, the controller's records say %s s"
               % (ledger["no_gpu"]["heal_s"], heal))
    for index, prev in enumerate(attempts[:-1]):
        status = read_json(os.path.join(prev.dir, "logs", "status.json")) or {}
        gap = (ledger["attempts"][index].get("seconds") or {}).get("failure_gap", -1)
        expected = status.get("end_time", 0) / 1000.0 - facts["kills"][index]["at"]
        case.check(abs(gap - expected) <= 2.0, "ledger: %s failure gap %.1f s, the kill to Ray's end %.1f s"
                   % (prev.id, gap, expected))
    case.note("ledger: goodput %.0f%%, %d steps recomputed, held %.0f GPU-s, unaccounted %.1f" % (
        100 * (ledger.get("goodput") or 0), ledger["steps"]["recomputed"], ledger["gpu_seconds_held"],
        ledger["buckets"]["unaccounted"]))


def steps_per_epoch(job_dir):
    """Steps of one epoch of an SFT attempt, from its inputs: verl's "dataset len" line over data.train_batch_size
    (the local SFT's batch, one data-parallel rank in verl's Ray trainer, the last partial batch dropped)."""
    with open(os.path.join(job_dir, "logs", "driver.log"), errors="replace") as handle:
        rows = int(re.search(r"dataset len: (\d+)", handle.read()).group(1))
    spec = read_json(os.path.join(job_dir, "config", "job_spec.json")) or {}
    return rows // int(spec["trainer_overrides"]["data.train_batch_size"])


def check_epoch_boundary(case, prev, nxt, resumed, step):
    """verl#7401: an attempt continued from a checkpoint at an epoch's last step loads a view of it without the
    data-loader state (data_<rank>.pt), recorded in its job_spec.json; the checkpoint as saved keeps its file."""
    saver = os.path.join(case.cluster.host_shared, "jobs", resumed.get("checkpoint_of") or prev.id)
    saved = os.path.join(saver, "checkpoints", "global_step_%d" % step)
    state = sorted(f for f in os.listdir(saved) if re.match(r"^data_\d+\.pt$", f)) if os.path.isdir(saved) else []
    boundary = step > 0 and step % steps_per_epoch(saver) == 0
    issues = [fix.get("issue") for fix in resumed.get("adjusted") or []]
    if boundary and state:
        view = os.path.join(nxt.dir, "config", "resume", "global_step_%d" % step)
        case.check(issues == ["verl#7401"] and os.path.isdir(view) and not set(state) & set(os.listdir(view)),
                   "%s continued from step %d, an epoch's last step: expected a view without %s (verl#7401), "
                   "got adjusted %s" % (nxt.id, step, state, issues))
        case.note("%s loaded global_step_%d without %s (verl#7401); the checkpoint as saved keeps it" % (
            nxt.id, step, ", ".join(state)))
    else:
        case.check(issues == [], "%s: step %d is not an epoch's last step, but the resume was adjusted: %s" % (
            nxt.id, step, issues))


PHASES = ("ray_notice_s", "verdict_s", "heal_s", "start_s", "verl_start_s")
"""The phases of a lost node's recovery, in order (docs/benchmarks.md): the fault to Ray ending the attempt (its
health checks declare the node dead), to the job controller's decision (the attempt recorded and judged), the heal,
the next attempt's checks and submission until placed, and verl's start-up to the first new step."""


def record_phases(case, attempts, facts):
    """Add each restart's phases (seconds, :data:`PHASES`) to the case's figures, from the runs' own records:
    the fault's time (this suite), Ray's end of the attempt (``logs/status.json`` ``end_time``), the controller's
    ``logs/continued.json`` (decided_at, heal_s, start_s, started_at) and the first new step's time (seen here)."""
    for index, (prev, _nxt) in enumerate(zip(attempts, attempts[1:])):
        kills, seen = facts.get("kills") or [], facts.get("first_step_at") or []
        status = read_json(os.path.join(prev.dir, "logs", "status.json")) or {}
        cont = read_json(os.path.join(prev.dir, "logs", "continued.json")) or {}
        if index >= len(kills) or index >= len(seen) or not status.get("end_time") or not cont:
            continue
        ended = status["end_time"] / 1000.0
        phases = {"ray_notice_s": ended - kills[index]["at"], "verdict_s": cont["decided_at"] - ended,
                  "heal_s": cont["heal_s"], "start_s": cont["start_s"], "verl_start_s": seen[index] - cont["started_at"]}
        for name in PHASES:
            case.seconds.setdefault(name, []).append(round(phases[name], 1))
        case.note("phases: " + ", ".join("%s %.1f" % (name, phases[name]) for name in PHASES))


def check_progress(case, run, first, nxt=None):
    """The waiting play printed the command that follows the run again and, for one of its attempts, the progress
    line with a step, the loss, the restarts and the watchdog (PROGRESS_LINE); with ``nxt``, that it followed the
    run into that next attempt."""
    follow = "ansible-playbook collect.yml -e submission_id=%s -e wait=true" % first.id
    case.check(follow in run.text, "submit.yml did not print the follow command %r" % follow)
    if nxt is not None:
        said = "the job controller continues run %s as %s" % (first.id, nxt.id)
        case.check(said in " ".join(run.text.split()), "submit.yml did not say %r" % said)
    line = re.search(re.escape(first.id) + r"(-r[0-9]+)?" + PROGRESS_LINE, run.text)
    case.check(line is not None, "submit.yml printed no progress line for %s: %s" % (
        first.id, [x for x in run.text.splitlines() if first.id + ": RUNNING" in x][:3]))
    if line:
        case.note("progress line: %s" % line.group(0)[:160])


def check_one_mlflow_run(case, attempts, last_step, last_loss):
    """Every attempt logged into the run's one MLflow run (config/mlflow_run.json), named after the first
    attempt; its train/loss history covers steps 1..last_step and ends with the uninterrupted run's loss."""
    records = [read_json(os.path.join(a.dir, "config", "mlflow_run.json")) or {} for a in attempts]
    if not case.cluster.mlflow:
        return
    run_ids = {r.get("run_id") for r in records}
    case.check(len(run_ids) == 1 and None not in run_ids, "the attempts' MLflow runs %s, expected one" % sorted(
        str(i) for i in run_ids))
    case.check([r.get("continued") for r in records] == [False] + [True] * (len(records) - 1),
               "continued flags %s" % [r.get("continued") for r in records])
    run_id = records[0].get("run_id") or ""
    run = (mlflow_call(case.cluster, "GET", "/api/2.0/mlflow/runs/get?run_id=" + run_id) or {}).get("run") or {}
    case.check((run.get("info") or {}).get("run_name") == attempts[0].id, "MLflow run name %s, expected %s" % (
        (run.get("info") or {}).get("run_name"), attempts[0].id))
    history = (mlflow_call(case.cluster, "GET", "/api/2.0/mlflow/metrics/get-history?run_id=%s&metric_key=train/loss"
                           % run_id) or {}).get("metrics") or []
    steps = {int(m["step"]) for m in history}
    latest = max((m for m in history if int(m["step"]) == last_step), key=lambda m: m["timestamp"], default={})
    case.check(steps == set(range(1, last_step + 1)) and abs(latest.get("value", float("nan")) - last_loss)
               <= 1e-6 * max(1.0, abs(last_loss)), "MLflow train/loss steps %s..%s (%d), last %s; expected 1..%d ending "
               "at %s" % (min(steps or [0]), max(steps or [0]), len(steps), latest.get("value"), last_step, last_loss))
    case.note("one MLflow run %s for %d attempts: train/loss steps 1..%d, last %s" % (
        run_id[:8], len(attempts), last_step, latest.get("value")))


def case_killed_driver_worker_corrupt(case):
    """The driver's worker dies right after the checkpoint of step 12 (2 epochs of 8 steps, the local inventory's
    checkpoint every 4 steps) and that checkpoint lost a shard: the one before, step 8 - an epoch's last step - is
    used, and said, without its data-loader state (verl#7401). The waiting play follows the run into its next
    attempt and is then killed (SIGKILL): the job controller alone ends the run, like the uninterrupted one."""
    base = baseline(case, TWO_EPOCHS, stamp("base-two"), "two_epochs_baseline")
    receiver = Receiver()  # issue 64: the run tells its own endpoint on the job controller's loopback
    try:
        # Three checkpoints kept: one is left after the newest is corrupted.
        run, attempts, facts = run_with_kills(case, "drv", 1, ["driver"], corrupt=True,
                                              overrides=dict(TWO_EPOCHS, **{"trainer.max_ckpt_to_keep": 3}),
                                              progress=True, nobody="submitter later", kill_at_checkpoint=12,
                                              extra=("-e", "notify=" + receiver.url))
        check_continued(case, run, attempts, facts, base)
        check_told(case, receiver, attempts)
    finally:
        receiver.close()
    check_progress(case, facts["play"], attempts[0], attempts[1] if len(attempts) > 1 else None)
    if len(attempts) > 1:
        spec = read_json(os.path.join(attempts[1].dir, "config", "job_spec.json")) or {}
        skipped = [s.get("step") for s in (spec.get("resume_from") or {}).get("skipped") or []]
        case.check(facts.get("corrupted") in skipped, "resume_from.skipped %s lacks the corrupted step %s"
                   % (skipped, facts.get("corrupted")))
        case.check("skipped checkpoint global_step_%s" % facts.get("corrupted") in " ".join(spec.get("notes") or []),
                   "the job's notes do not say the corrupted checkpoint was skipped")


def check_told(case, receiver, attempts):
    """Issue 64: the run's own endpoint got, each within 10 s of the job controller's decision, attempt_continued for
    the lost node (cause node_lost, the next attempt named) and run_ended (trained) - those two, each once."""
    run = attempts[0].id
    link = read_json(os.path.join(attempts[0].dir, "logs", "restart.json")) or {}
    decided = verdict_at({"at": link.get("decided_at", "1970-01-01T00:00:00Z")})
    arrived, body = wait_event(receiver, run, DELIVERY_BOUND_S + 30, "attempt_continued")
    case.check(arrived - decided <= DELIVERY_BOUND_S + 1, "attempt_continued came %.1f s after the decision"
               % (arrived - decided))
    case.check(body.get("cause") == "node_lost" and body.get("attempt") == run and len(attempts) > 1
               and attempts[1].id in json.dumps(body.get("detail")),
               "attempt_continued: cause %s, attempt %s, detail %s" % (body.get("cause"), body.get("attempt"),
                                                                     body.get("detail")))
    record = read_json(os.path.join(attempts[0].dir, "logs", "run_end.json")) or {}
    arrived, body = wait_event(receiver, run, DELIVERY_BOUND_S + 30)
    case.check(arrived - verdict_at(record) <= DELIVERY_BOUND_S + 1, "run_ended came %.1f s after the run's end"
               % (arrived - verdict_at(record)))
    case.check(body.get("verdict") == "trained" and body.get("attempt") == attempts[-1].id,
               "run_ended: verdict %s of %s, expected trained of %s" % (body.get("verdict"), body.get("attempt"),
                                                                       attempts[-1].id))
    time.sleep(3)
    kinds = sorted(b.get("event") for _a, b in receiver.events(run))
    case.check(kinds == ["attempt_continued", "run_ended"], "events %s, expected attempt_continued and run_ended "
               "once each" % kinds)
    case.note("told: %s" % ", ".join(kinds))


def case_every_epoch(case, save_freq=8):
    """3 epochs of 8 steps with a checkpoint at every epoch's end (``save_freq`` 8, or verl's SFT word
    after_each_epoch): a worker killed right after the step-16 checkpoint; the run continues from it and ends at
    step 24 with the uninterrupted run's final train/loss (verl#7401 worked around)."""
    overrides = dict(EPOCHS, **{"trainer.save_freq": save_freq})
    base = baseline(case, overrides, stamp("base-epochs"), "epochs_baseline_%s" % save_freq)
    run, attempts, facts = run_with_kills(case, "epo", 1, ["other"], overrides=overrides, kill_at_checkpoint=16)
    case.check(facts["expected_resume"] == [16], "the kill landed after checkpoints %s, expected 16 to be the newest"
               % facts["expected_resume"])
    check_continued(case, run, attempts, facts, base)


def case_killed_other_worker(case):
    """The worker without the driver dies: the run continues and ends like an uninterrupted one."""
    base = baseline(case)
    run, attempts, facts = run_with_kills(case, "oth", 1, ["other"])
    check_continued(case, run, attempts, facts, base)


def case_submitter_killed(case):
    """The submitting ansible-playbook killed (SIGKILL) after the job started, then the worker without the driver:
    the job controller alone heals the cluster, continues the run as <id>-r1 and it ends like the uninterrupted run."""
    base = baseline(case)
    run, attempts, facts = run_with_kills(case, "sub", 1, ["other"], nobody="submitter")
    check_continued(case, run, attempts, facts, base)


def case_controller_killed(case):
    """The job controller killed (SIGKILL) mid-training, then a worker: its keeper starts it again, it picks the
    run up and continues it; the run ends trained with exactly one attempt per restart."""
    base = baseline(case)
    run, attempts, facts = run_with_kills(case, "ctl", 2, ["other"], nobody="controller")
    check_continued(case, run, attempts, facts, base)
    made = sorted(d for d in os.listdir(os.path.join(case.cluster.host_shared, "jobs"))
                  if d == attempts[0].id or d.startswith(attempts[0].id + "-r"))
    case.check(made == [a.id for a in attempts] == [attempts[0].id, attempts[0].id + "-r1"],
               "attempts made %s, expected %s and -r1 only" % (made, attempts[0].id))
    back = controller_pid(case.cluster)
    case.check(back and back != facts.get("controller_killed"), "the job controller did not come back (pid %s, "
               "killed %s)" % (back, facts.get("controller_killed")))
    case.note("the keeper started the job controller again (pid %s after %s)" % (back, facts.get("controller_killed")))


def case_restarts_exhausted(case):
    """max_restarts 1 and two lost nodes: FAILED, the message lists both attempts and their causes."""
    # two epochs (16 steps): the second attempt still trains when its worker is killed
    run, attempts, _facts = run_with_kills(case, "max", 1, ["other", "other"],
                                           overrides=dict(OVERRIDES, **{"trainer.total_epochs": 2}))
    case.check(run.rc != 0, "submit.yml succeeded although every attempt lost a node")
    text = run.text
    for job in attempts:
        case.check(job.id + ": FAILED [node_lost]" in text, "the failure does not list %s with its cause" % job.id)
    case.check("max_restarts 1" in text, "the failure does not name max_restarts")
    case.check(not os.path.exists(os.path.join(attempts[-1].dir, "logs", "restart.json")),
               "the last attempt was linked to a next one")
    case.check(not os.path.isdir(os.path.join(case.cluster.host_shared, "jobs", attempts[0].id + "-r2")),
               "a third attempt was submitted past max_restarts")


def case_site_restarts_a_run(case):
    """site.yml with a change that restarts the workers' Ray while an SFT run trains: refused by default
    (the run named, nothing touched, it trains on); with mvp_running_jobs=restart the play stops it (cause
    cluster_changed, naming site.yml), changes the workers, and submit.yml continues it as <id>-r1 from its
    newest complete checkpoint to the uninterrupted run's last step and final loss."""
    cluster = case.cluster
    base = baseline(case, LONG, stamp("base-long"), "long_baseline")
    case.ensure_cluster()
    case.wait_jobs_idle()
    first = Job(case, stamp("site"))
    change = restart_forcing_change(cluster)
    args = ["-e", "workload=sft", "-e", "submission_id=" + first.id] + extra_vars(
        trainer_overrides=LONG, submit_job_watchdog=WATCHDOG, max_restarts=1)
    started = time.time()
    argv, proc = start_playbook(cluster, "submit.yml", args)
    attempts, facts = [first], {"kills": []}
    try:
        deadline = time.time() + 600
        while len(first.steps()) < KILL_AFTER_STEPS:
            if proc.poll() is not None or time.time() > deadline:
                raise CaseFailed("%s logged %d steps before submit.yml ended" % (first.id, len(first.steps())))
            time.sleep(0.5)
        before = cluster.alive()
        refused = case.play("site.yml", change, label="site.yml %s while the run trains" % change[1])
        case.check(refused.rc not in (0, None) and first.id in refused.text and "Nothing was changed" in refused.text,
                   "site.yml rc=%s: expected a refusal naming %s" % (refused.rc, first.id))
        case.check(cluster.alive() == before and cluster.job_status(first.id) == "RUNNING",
                   "the refused play touched a node or the run (%s)" % cluster.job_status(first.id))
        steps_before = max(first.steps())
        restarted = case.play("site.yml", change + ["-e", "mvp_running_jobs=restart"],
                              label="site.yml %s mvp_running_jobs=restart" % change[1])
        case.check(restarted.rc == 0, "site.yml -e mvp_running_jobs=restart rc=%s" % restarted.rc)
        ckpt = complete_steps(os.path.join(first.dir, "checkpoints"))
        facts["kills"].append({"at": time.time(), "job": first.id, "ip": "site.yml", "last_step": max(first.steps())})
        facts["expected_resume"] = [max(ckpt or [0])]
        case.note("interrupted after step %d (refused first at step %d)" % (max(first.steps()), steps_before))
        nxt = Job(case, first.id + "-r1")
        while not nxt.steps():
            if proc.poll() is not None or time.time() > deadline + 600:
                raise CaseFailed("no step of %s before submit.yml ended" % nxt.id)
            time.sleep(0.5)
        attempts.append(nxt)
    finally:
        run = finish_playbook(argv, proc, started, RUN_TIMEOUT)
        case.keep(run, "submit sft max_restarts=1")
    check_continued(case, run, attempts, facts, base, cause="cluster_changed")
    restored = case.play("site.yml", label="site.yml with the inventory's settings again")
    case.check(restored.rc == 0, "site.yml restoring the inventory's settings rc=%s" % restored.rc)


# A run long enough (320 steps, about 3 minutes here) that its raylets give up on a lost GCS (60 s) and a
# cluster play's refusal lands well before its end, with a checkpoint at every epoch's end (8 steps an epoch),
# as most users save.
LONG = dict(OVERRIDES, **{"trainer.total_epochs": 40, "trainer.save_freq": 8})
# A run nobody waits for survives its head: seconds the job controller has to bring the run to its end.
HEAD_LOST_TIMEOUT = 900


def case_killed_head(case, remove=False):
    """docker kill of the head while an SFT run trains, nobody acting (submit.yml -e wait=false: the job controller
    follows it): the controller heals the cluster and the run reaches the uninterrupted run's last step
    and final loss - the same attempt when the head kept its job table (GCS storage), else <id>-r1 (head_lost)
    from the newest complete checkpoint. The controller writes logs/run_end.json;
    status.yml lists every attempt with its verdict. ``remove``: the head's container is removed (docker rm -f),
    so the new head has an empty job table: the attempt (a 320-step run, far longer than the 60 s its raylets wait
    for the lost GCS) is judged from its job directory - status LOST, cause head_lost - and continued as <id>-r1."""
    cluster = case.cluster
    overrides = LONG if remove else OVERRIDES
    base = baseline(case, LONG, stamp("base-long"), "long_baseline") if remove else baseline(case)
    case.ensure_cluster()
    case.wait_jobs_idle()
    first = Job(case, stamp("head"))
    run = case.play("submit.yml", ["-e", "workload=sft", "-e", "wait=false", "-e", "submission_id=" + first.id]
                    + extra_vars(trainer_overrides=overrides, submit_job_watchdog=WATCHDOG, max_restarts=1),
                    label="submit sft wait=false max_restarts=1")
    if run.rc != 0:
        raise CaseFailed("submit.yml -e wait=false rc=%s" % run.rc)
    case.check("followed by the job controller" in run.text, "submit.yml does not say the job controller follows "
               "the run")
    deadline = time.time() + 600
    while len(first.steps()) < 2:
        if time.time() > deadline:
            raise CaseFailed("%s logged %d steps in 600 s" % (first.id, len(first.steps())))
        time.sleep(0.5)
    killed_at, killed_step = time.time(), max(first.steps())
    cluster.docker(*(["rm", "-f"] if remove else ["kill"]), cluster.container[cluster.head])
    case.note("%s the head after step %d" % ("removed" if remove else "killed", killed_step))
    ended = os.path.join(first.dir, "logs", "run_end.json")
    nxt = Job(case, first.id + "-r1")
    answered = None
    while not os.path.exists(ended):
        if time.time() > killed_at + HEAD_LOST_TIMEOUT:
            raise CaseFailed("the job controller did not end the run within %d s of the kill" % HEAD_LOST_TIMEOUT)
        if answered is None and cluster.head_state() is not None:
            answered = time.time()  # the head the controller brought back answers
        if "head_lost_to_first_new_step_s" not in case.seconds and (
                nxt.steps() or max(first.steps() or [0]) > killed_step):
            # The first step after the kill: the same attempt going on (the head kept its job table) or <id>-r1.
            case.seconds["head_lost_to_first_new_step_s"] = round(time.time() - killed_at, 1)
            case.seconds["head_lost_to_answer_s"] = round((answered or time.time()) - killed_at, 1)
        time.sleep(0.5)
    case.seconds.setdefault("head_lost_to_end_s", []).append(round(time.time() - killed_at, 1))
    record = read_json(ended) or {}
    case.check(record.get("state") == "ended" and record.get("trained") is True,
               "logs/run_end.json %s, expected ended and trained" % record)
    attempts = [first]
    status = read_json(os.path.join(first.dir, "logs", "status.json")) or {}
    case.check(not remove or (status.get("status"), status.get("cause")) == ("LOST", "head_lost"),
               "%s: %s %s, expected LOST, head_lost (the head's job table went with its container)"
               % (first.id, status.get("status"), status.get("cause")))
    if status.get("cause") == "head_lost":
        attempts.append(Job(case, first.id + "-r1"))
        spec = read_json(os.path.join(attempts[1].dir, "config", "job_spec.json")) or {}
        resumed = (spec.get("resume_from") or {}).get("step") or 0
        steps = sorted(metrics(attempts[1].dir))
        case.check(steps and steps[0] == resumed + 1, "%s first step %s, expected %d" % (attempts[1].id, steps[:1],
                                                                                          resumed + 1))
    else:
        case.check(status.get("verdict") == "trained", "%s: %s %s, expected trained (the head kept its job table) or "
                   "head_lost" % (first.id, status.get("cause"), status.get("summary")))
    final, base_last = metrics(attempts[-1].dir), max(base)
    loss, base_loss = final.get(base_last, {}).get("train/loss"), base[base_last].get("train/loss")
    case.check(max(final or [0]) == base_last and loss is not None
               and abs(loss - base_loss) <= 1e-6 * max(1.0, abs(base_loss)),
               "%s ended at step %s with train/loss %s; the uninterrupted run: step %d, %s"
               % (attempts[-1].id, max(final or [0]), loss, base_last, base_loss))
    listed = case.play("status.yml", ["-e", "last=20"], label="status.yml")
    for job in attempts:
        line = next((l for l in listed.text.splitlines() if job.id + " " in l and "|" in l), "")
        case.check(line, "status.yml does not list %s with its verdict" % job.id)
    case.note("%s: %s; final train/loss %s = uninterrupted %s" % (
        " -> ".join(j.id for j in attempts), status.get("cause") or status.get("verdict"), loss, base_loss))


# GRPO on the local inventory: 8 steps, a checkpoint every 2; a watchdog that catches a frozen rank
# in tens of seconds (its first step includes vLLM's start-up).
GRPO_OVERRIDES = {"trainer.total_training_steps": 8, "trainer.save_freq": 2}
GRPO_WATCHDOG = {"first_step_s": 300, "floor_s": 20, "factor": 5}


def case_frozen_grpo_rank(case):
    """A GRPO training process freezes (SIGSTOP): the watchdog stops the attempt (hang), the cluster
    is whole (nothing to heal), <id>-r1 continues from the newest complete checkpoint and trains to the end."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    first = Job(case, stamp("hang"))
    args = ["-e", "workload=grpo", "-e", "submission_id=" + first.id] + extra_vars(
        trainer_overrides=GRPO_OVERRIDES, submit_job_watchdog=GRPO_WATCHDOG, max_restarts=1)
    started = time.time()
    argv, proc = start_playbook(cluster, "submit.yml", args)
    frozen = None
    try:
        deadline = time.time() + 600
        while len(first.steps()) < 3:
            if proc.poll() is not None or time.time() > deadline:
                raise CaseFailed("%s logged %d steps before submit.yml ended" % (first.id, len(first.steps())))
            time.sleep(0.5)
        found = [(h, training_pids(cluster, h)) for h in cluster.workers]
        host, ranks = next(((h, r) for h, r in found if r), (None, None))
        if not case.check(ranks, "no training actor process found on the workers"):
            return
        frozen = (host, ranks[0][0])
        cluster.docker("exec", cluster.container[host], "kill", "-STOP", str(frozen[1]))
        case.note("froze pid %d in %s after step %d" % (frozen[1], host, max(first.steps())))
    finally:
        run = finish_playbook(argv, proc, started, RUN_TIMEOUT)
        if frozen:
            cluster.docker("exec", cluster.container[frozen[0]], "sh", "-c", "kill -CONT %d || true" % frozen[1])
        case.keep(run, "submit grpo max_restarts=1")
    status = read_json(os.path.join(first.dir, "logs", "status.json")) or {}
    case.check(status.get("cause") == "hang", "%s: cause %r, expected hang" % (first.id, status.get("cause")))
    nxt = Job(case, first.id + "-r1")
    spec = read_json(os.path.join(nxt.dir, "config", "job_spec.json")) or {}
    resumed = (spec.get("resume_from") or {}).get("step")
    steps = sorted(metrics(nxt.dir))
    case.check(resumed and steps and steps[0] == resumed + 1, "%s resumed at %s, first step %s" % (
        nxt.id, resumed, steps[:1]))
    last = read_json(os.path.join(nxt.dir, "logs", "status.json")) or {}
    case.check(run.rc == 0 and last.get("verdict") == "trained", "submit rc=%s, %s verdict %r (%s)" % (
        run.rc, nxt.id, last.get("verdict"), last.get("summary")))
    case.check(max(steps or [0]) == GRPO_OVERRIDES["trainer.total_training_steps"], "last step %s" % steps[-1:])
    case.check("nothing to heal" in run.text, "the cluster was healed although every node was up")
    case.note("%s: hang; %s continued from step %s and %s" % (first.id, nxt.id, resumed, last.get("summary")))


def case_two_grpo_at_once(case):
    """Two GRPO runs submitted at once: both train; the second waits for the first (one TransferQueue
    controller per cluster) and says so, and no TransferQueueController is shared."""
    case.ensure_cluster()
    case.wait_jobs_idle()
    group = stamp("pair")
    run = case.play("submit.yml", ["-e", "workload=grpo", "-e", "submission_id=" + group, "-e", "repeat=2",
                                   "-e", "repeat_mode=parallel"]
                    + extra_vars(trainer_overrides={"trainer.total_training_steps": 4}, max_restarts=0),
                    timeout=RUN_TIMEOUT, label="submit grpo x2 parallel")
    case.check(run.rc == 0, "submit.yml rc=%s: both runs must train" % run.rc)
    jobs = [Job(case, "%s-%d" % (group, i)) for i in (1, 2)]
    for job in jobs:
        status = read_json(os.path.join(job.dir, "logs", "status.json")) or {}
        case.check(status.get("verdict") == "trained", "%s verdict %r" % (job.id, status.get("verdict")))
    logs = {}
    for job in jobs:
        try:
            logs[job.id] = open(os.path.join(job.dir, "logs", "driver.log"), encoding="utf-8").read()
        except OSError:
            logs[job.id] = ""
    waited = [j.id for j in jobs if "MVP_GATE_WAIT=" in logs[j.id]]
    case.check(len(waited) == 1, "jobs that waited for the TransferQueue lock: %s, expected exactly one" % waited)
    if waited:
        other = next(j.id for j in jobs if j.id != waited[0])
        line = next(text for text in logs[waited[0]].splitlines() if "MVP_GATE_WAIT=" in text)
        case.check(other in line, "the wait line does not name %s: %s" % (other, line[:200]))
        ended = (read_json(os.path.join(case.cluster.host_shared, "jobs", other, "logs", "status.json")) or {})
        case.note("%s waited for %s" % (waited[0], other))
        case.check(ended.get("end_time"), "no end time recorded for %s" % other)
    # Ray's actor table: each run had its own TransferQueueController (one per Ray job), none shared.
    cluster = case.cluster
    ray_jobs = {j["submission_id"]: j.get("job_id") for j in (cluster.head_state() or {"jobs": []})["jobs"]}
    controllers = actors_of_class(cluster.container[cluster.head], cluster.python, cluster.address,
                                  "TransferQueueController", cluster.token_path)
    for job in jobs:
        mine = [a for a in controllers if ray_jobs.get(job.id) and a["job_id"] == ray_jobs[job.id]]
        case.check(len(mine) == 1, "%s (Ray job %s): %d TransferQueueController actors in Ray's actor table, "
                   "expected its own one" % (job.id, ray_jobs.get(job.id), len(mine)))
    case.note("Ray's actor table: TransferQueueController per job %s" % {
        job.id: [a["actor_id"][:8] for a in controllers if a["job_id"] == ray_jobs.get(job.id)] for job in jobs})


# An RL run of two epochs of 2 steps (8 of the sample's prompts in batches of 4): the first run trains one epoch
# and saves at its last step; a second continues it (resume_from) to two epochs.
RL_EPOCH = {"trainer.total_training_steps": None, "data.train_max_samples": 8, "trainer.save_freq": 2}


def case_rl_epoch_boundary(case, workload):
    """GRPO or PPO (verl's V1 trainer, which restores its data-loader state unguarded) continued from a
    checkpoint at an epoch's last step: the continued run logs the step after it first and reaches the last step
    verl planned (verl#5725's symptom was 0 new steps). Nothing is adjusted: the catalog declares no data state
    for main_ppo, whose step loop starts a new pass of the data loader when one ends."""
    case.ensure_cluster()
    case.wait_jobs_idle()
    first, second = Job(case, stamp(workload + "e1")), Job(case, stamp(workload + "e2"))
    for job, extra, epochs in ((first, [], 1), (second, ["-e", "resume_from=" + first.id], 2)):
        run = case.play("submit.yml", ["-e", "workload=" + workload, "-e", "submission_id=" + job.id] + extra
                        + extra_vars(trainer_overrides=dict(RL_EPOCH, **{"trainer.total_epochs": epochs}),
                                     max_restarts=0), label="%s %d epoch(s)" % (workload, epochs))
        case.check(run.rc == 0, "%s rc=%s" % (job.id, run.rc))
    planned = 2 * RL_EPOCH["data.train_max_samples"] // int(_rl_batch(second))
    boundary = RL_EPOCH["data.train_max_samples"] // int(_rl_batch(first))
    steps = sorted(metrics(second.dir))
    resumed = (read_json(os.path.join(second.dir, "config", "job_spec.json")) or {}).get("resume_from") or {}
    case.check(resumed.get("step") == boundary and not resumed.get("adjusted"),
               "%s resume_from step %s adjusted %s, expected step %d as saved" % (
                   second.id, resumed.get("step"), resumed.get("adjusted"), boundary))
    case.check(steps and steps[0] == boundary + 1 and steps[-1] == planned,
               "%s logged steps %s, expected %d..%d" % (second.id, steps, boundary + 1, planned))
    case.note("%s continued from step %d (an epoch's last step) and trained to step %d of %d" % (
        second.id, boundary, steps[-1] if steps else 0, planned))


def _rl_batch(job):
    """data.train_batch_size of an RL job (its spec)."""
    spec = read_json(os.path.join(job.dir, "config", "job_spec.json")) or {}
    return spec["trainer_overrides"]["data.train_batch_size"]


CASES = [
    ("killed driver worker, corrupt newest", "heals, continues from the checkpoint before the corrupted one "
     "as <id>-r1 at its step + 1 (the waiting play follows it there, then is killed), ends with the uninterrupted "
     "run's last step and train/loss",
     case_killed_driver_worker_corrupt),
    ("every epoch", "save_freq 8 of 8-step epochs, a worker killed right after the step-16 checkpoint: continues "
     "from it without its data-loader state (verl#7401) and ends at step 24 like the uninterrupted run",
     case_every_epoch),
    ("after each epoch", "the same with verl's save_freq after_each_epoch",
     lambda case: case_every_epoch(case, "after_each_epoch")),
    ("grpo epoch boundary", "GRPO continued from a checkpoint at an epoch's last step reaches its planned last step",
     lambda case: case_rl_epoch_boundary(case, "grpo")),
    ("ppo epoch boundary", "the same for PPO (critic)", lambda case: case_rl_epoch_boundary(case, "ppo")),
    ("killed other worker", "heals, continues as <id>-r1, ends like the uninterrupted run", case_killed_other_worker),
    ("submitter killed", "the waiting submit.yml killed (SIGKILL), then the other worker: the job controller alone "
     "continues the run as <id>-r1; it ends like the uninterrupted run", case_submitter_killed),
    ("controller killed", "the job controller killed (SIGKILL), then the other worker: it comes back (its keeper), "
     "continues the run as <id>-r1 only; it ends like the uninterrupted run", case_controller_killed),
    ("killed head", "nobody acting (wait=false): the job controller heals the cluster; the run ends like the uninterrupted run "
     "(the same attempt, or <id>-r1 after head_lost); logs/run_end.json says so; status.yml lists the attempts",
     case_killed_head),
    ("removed head", "the head's container removed (its job table gone) early in a 320-step run: LOST, head_lost; "
     "<id>-r1 continues at the checkpoint's step + 1 and ends like the uninterrupted run; status.yml lists both",
     lambda case: case_killed_head(case, remove=True)),
    ("site.yml restarts a run", "a change restarting the workers' Ray: refused naming the run; with "
     "mvp_running_jobs=restart: cause cluster_changed, <id>-r1 continues at the checkpoint's step + 1 and ends like "
     "the uninterrupted run", case_site_restarts_a_run),
    ("restarts exhausted", "max_restarts 1, two lost nodes: FAILED listing both attempts and causes",
     case_restarts_exhausted),
    ("frozen grpo rank", "hang; nothing to heal; <id>-r1 continues at the checkpoint's step + 1 and trains to the end",
     case_frozen_grpo_rank),
    ("two grpo at once", "both train; the second waits for the first (TransferQueue lock) naming it",
     case_two_grpo_at_once),
]


def main():
    """Run the table and print it; return the exit code."""
    parser = suite_parser(__doc__, CASES)
    parser.add_argument("--baseline", help="an uninterrupted SFT run of the same request (else one is run)")
    parser.add_argument("--seconds-out", help="write the measured figures as JSON here")
    args = parser.parse_args()
    seconds = {}
    shared = {"baseline": args.baseline}

    def prepare(case):
        case.seconds = seconds
        case.shared = shared

    cluster = Cluster(args.inventory, args.host_shared)
    code = run_cases(CASES, cluster, args.only, "resume", prepare)
    write_figures(args.seconds_out, seconds)
    return code


if __name__ == "__main__":
    sys.exit(main())
