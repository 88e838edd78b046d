#!/usr/bin/env python3
"""Queue suite: real jobs share the local cluster - they wait their turn by their whole shape, busy is never a failure.

Runs real ``submit.yml``, ``status.yml``, ``stop.yml`` and ``collect.yml`` against a running local
cluster (two workers with one logical GPU and 16 logical CPUs each) and checks what the jobs and the
plays did, from the files the jobs wrote (``logs/driver.log``, ``logs/queue.json``,
``logs/status.json``, ``logs/metrics.jsonl``) and Ray's job table:

* "shared cluster": an SFT run (240 steps) holds both workers' GPUs (2 nodes x 1 GPU); a GRPO run (1 x 1), a
  second SFT (2 x 1) and a one-node SFT (1 x 1, ``-e priority=high``) are submitted behind it in that order.
  The queue shows the high one first, then the others in submission order (status.yml, each gate's
  queue.json), a shape bigger than the cluster is refused before
  submission (no job directory, no Ray job, the running job untouched), the second SFT is stopped
  while queued (``stopped``, "never started") and the queue closes up; the others start in
  that order as resources free, none fails, and the first SFT ends with the final
  ``train/loss`` of the same request run alone (the baseline, run first unless ``--baseline`` names one;
  ``--no-alone`` leaves that comparison out: the molecule train scenario, for CI time).
* "preempted": an SFT run (48 steps, a checkpoint every 9) at ``-e priority=low`` trains on both workers;
  once it passed its first checkpoint a GRPO run (1 x 1; ``--preemptor sft``: a one-node SFT run) at
  ``-e priority=high`` is submitted. The job
  controller decides to preempt the SFT run (``logs/preempt.json``: by whom, 100 over -100) and stops it
  right after its next complete checkpoint (``logs/stopped_by.json``: cause ``preempted``, a step newer than
  the one it had, at most RECOMPUTED_MAX steps logged past it); its verdict is ``preempted``; it continues
  as ``<id>-r1`` (``max_restarts`` 0: not counted) from that step, waits in the queue at priority -100
  while the GRPO run trains 2 of 2 (its ``logs/preempting.json`` names the SFT run), then trains to its
  end: first step = the checkpoint's step + 1, final ``train/loss`` = the run alone's (unless
  ``--no-alone``); status.yml shows both sides. The holder of "shared cluster" is ``preemptible: false``:
  the high job there waits for its end and it is never preempted.
* "grace passed": the same with 160 steps, checkpoints every 60, and the controller's ``job_controller_preempt_grace_s`` set to
  GRACE_S (``playbooks/controller.yml -e``, put back after): the victim is stopped at once between its
  checkpoints (``stopped_by.json`` says the grace passed), loses at most 60 steps, continues from step 60
  and ends with the final loss of the run alone.
* "busy at start": the GPUs a GRPO run was admitted to are taken (a placement group made outside the
  queue) before verl reserves them: verl refuses (``Total available GPUs 0 ...``), the verdict is
  ``busy`` (never ``config_rejected``), the run continues as ``<id>-r1``, which waits in the queue
  for the GPUs held outside it, and trains to its end once they are released.

Expected values come from the inputs (the shapes asked, the submission order, the steps asked) and
the baseline run's own metrics. Figures (``--seconds-out``): seconds from a job's end (Ray's
``end_time``) to the next queued job's start (its gate's ``MVP_GATE_GO``), the queue's cost
per submission (the gate's wait when nothing is ahead), and a preemption's phases (submission to
decision, the wait for the victim's checkpoint, the hand-over from its stop to the preemptor's
trainer start) with the steps recomputed.

Usage:
    python tests/reliability/jobqueue.py --inventory inventories/local --host-shared /srv/mvp/private
        [--only CASE ...] [--baseline ID] [--no-alone] [--preemptor grpo|sft] [--seconds-out FILE]
"""
import calendar
import os
import re
import subprocess
import sys
import time

from faults import CaseFailed, Cluster, finish_playbook, run_cases, start_playbook, suite_parser, write_figures
from ledger import check_closes, wait_for_ledger
from resume import baseline, metrics, wait_for_run_end
from verdicts import WATCHDOG, Job, extra_vars, read_json

# The first SFT holds both workers long enough for the others to be submitted behind it, stopped and moved
# up (30 epochs of the 64-row sample: 240 steps, 1.5-3 minutes; 120 steps ended before the queued job was
# stopped on an idle machine); the others are short: the queue is what is tested, not the training.
HOLDER = {"trainer.total_epochs": 30, "trainer.save_freq": 80}
# Its steps, from the inputs: 30 epochs of the local SFT's 64-row sample in batches of 8 (data.train_batch_size,
# inventories/local/group_vars/all/10-local.yml) - what the run alone logs, when --no-alone leaves it out.
HOLDER_STEPS = 30 * (64 // 8)
SHORT = {"trainer.total_training_steps": 2}
# The preempted run: both workers, a checkpoint at every epoch's end (6 epochs of the 64-row sample, 8 steps each:
# 48 steps), as most users save; it is preempted once it has passed its first checkpoint, so the one awaited is a
# later one - an epoch's last step, which it continues from (verl#7401, docs/jobs.md).
LOW = {"trainer.total_epochs": 6, "trainer.save_freq": 8}
LOW_STEPS = 6 * (64 // 8)
LOW_SAVE = LOW["trainer.save_freq"]
# The grace-time case: a checkpoint every 5 epochs (steps 40, 80, ... of 160), and a grace of a few seconds - the
# victim is stopped at once, between its checkpoints, and continues from an epoch's last step.
LATE = {"trainer.total_epochs": 20, "trainer.save_freq": 40}
LATE_STEPS = 20 * (64 // 8)
GRACE_S = 3
# Steps a preempted run may log past the checkpoint it is stopped after (a CPU step here takes about 0.5 s; the
# controller looks every 0.5 s while it waits for the checkpoint, and Ray's stop takes a moment to land).
RECOMPUTED_MAX = 2
SHORT_GRPO = {"trainer.total_training_steps": 2, "trainer.save_freq": 2}
# The local cluster: two workers, one logical GPU each.
WORKERS, GPUS_PER_WORKER = 2, 1
# Seconds between two looks of a gate at the queue (submit_job_queue.poll_s of the shipped inventories).
POLL_S = 2
# Seconds allowed for a gate to say something, and for a submit play that restarts once.
SAY_TIMEOUT = 120
RUN_TIMEOUT = 1500
# The placement group held outside the queue (the head's Python; released when the release file appears).
HOLD_SCRIPT = r'''
import os, sys, time, ray
from ray.util.placement_group import placement_group
ray.init(address="auto")
pg = placement_group([{"GPU": 1}] * int(sys.argv[1]), strategy="STRICT_SPREAD")
ray.get(pg.ready())
open(sys.argv[2] + ".held", "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.5)
'''


def stamp(kind):
    """A fresh submission id for a case."""
    return "queue-%s-%s-%04x" % (kind, time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)


def seconds_of(text):
    """Seconds since the epoch of a ``2026-11-25T16:40:09Z`` stamp (None for None)."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")) if text else None


def log_lines(job, prefix):
    """The lines of a job's driver.log that start with ``prefix``."""
    try:
        with open(os.path.join(job.dir, "logs", "driver.log"), encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle if line.startswith(prefix)]
    except OSError:
        return []


def wait_for(what, test, timeout=SAY_TIMEOUT):
    """Poll ``test`` every 0.5 s until it returns something true; raise CaseFailed at the deadline."""
    deadline = time.time() + timeout
    while True:
        found = test()
        if found:
            return found
        if time.time() > deadline:
            raise CaseFailed("%s: not within %ds" % (what, timeout))
        time.sleep(0.5)


def queue_state(job):
    """The gate's own record of a job (logs/queue.json), {} until it wrote one."""
    return read_json(os.path.join(job.dir, "logs", "queue.json")) or {}


def submit(case, job, workload, overrides, extra=()):
    """submit.yml -e wait=false for a job that must be accepted; raise CaseFailed when it is not."""
    run = job.submit(workload, overrides, extra=extra)
    if run.rc != 0:
        raise CaseFailed("submit %s %s: rc=%s" % (workload, job.id, run.rc))
    return run


def submit_in_order(case, jobs):
    """Submit ``jobs`` ((Job, workload, overrides, more -e arguments) each) with submit.yml -e wait=false, one after another in
    Ray's submission order but without waiting for each play's end: the next play starts once the job
    before it runs its gate (its logs/queue.json exists, so Ray has its submission time)."""
    started = []
    for job, workload, overrides, more in jobs:
        # verl's own checks on the head (torch's import, 10-30 s a job) are not what the queue case tests: the
        # holder ran them; without them the three queued jobs are in line well before the holder ends.
        args = ["-e", "workload=" + workload, "-e", "submission_id=" + job.id, "-e", "wait=false",
                "-e", "submit_job_verl_checks=false"]
        args += extra_vars(trainer_overrides=overrides, submit_job_watchdog=WATCHDOG, max_restarts=0) + list(more)
        started.append((job, start_playbook(case.cluster, "submit.yml", args), time.time()))
        wait_for("%s at its gate" % job.id, lambda j=job: queue_state(j), timeout=180)
    for job, (argv, proc), since in started:
        run = finish_playbook(argv, proc, since, 300)
        case.keep(run, "submit %s" % job.id.split("-")[1])
        if run.rc != 0:
            raise CaseFailed("submit %s: rc=%s" % (job.id, run.rc))


def case_shared_cluster(case):
    """Four jobs of three shapes and one too big, on two workers: they queue, none fails."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    # The run alone (its final loss is the holder's) unless --no-alone (CI time: `make queue` compares it).
    base = None if case.shared.get("no_alone") else baseline(case, HOLDER, stamp("alone"))
    holder_steps = max(base) if base else HOLDER_STEPS
    sft, grpo, sft2, one = (Job(case, stamp(k)) for k in ("sft", "grpo", "sft2", "one"))
    shapes = {sft.id: (WORKERS, GPUS_PER_WORKER), grpo.id: (1, 1), sft2.id: (WORKERS, GPUS_PER_WORKER), one.id: (1, 1)}
    # preemptible: false - the high job queued behind it waits for its end instead of preempting it.
    submit(case, sft, "sft", HOLDER, ("-e", "preemptible=false"))
    wait_for("%s admitted" % sft.id, lambda: queue_state(sft).get("state") == "admitted")
    submit_in_order(case, [(grpo, "grpo", SHORT_GRPO, ()), (sft2, "sft", SHORT, ()),
                           (one, "sft", dict(SHORT, **{"trainer.nnodes": 1}), ("-e", "priority=high"))])
    # The holder started; then the high one (submitted last), then the normal ones in submission order.
    order = [sft.id, one.id, grpo.id, sft2.id]
    case.check(cluster.job_status(sft.id) == "RUNNING" and len(metrics(sft.dir)) < holder_steps,
               "%s ended before the others were queued behind it: the case proves nothing" % sft.id)
    for job in (grpo, sft2, one):
        position = order.index(job.id) + 1
        # A gate says its place again at its next look (every POLL_S) after a job of a higher priority arrived.
        state = wait_for("%s queued at position %d" % (job.id, position),
                         lambda j=job, p=position: queue_state(j).get("state") == "waiting"
                         and queue_state(j).get("position") == p and queue_state(j), timeout=SAY_TIMEOUT)
        nodes, gpus = shapes[job.id]
        case.check(state["shape"]["gpus"] == nodes * gpus and len(state["shape"]["pools"]) == 1
                   and state["shape"]["pools"][0]["nodes"] == nodes,
                   "%s: queue.json shape %s, expected %d x %d" % (job.id, state.get("shape_text"), nodes, gpus))
    wait_line = wait_for("%s's wait line at position 3" % grpo.id, lambda: [
        line for line in log_lines(grpo, "MVP_GATE_WAIT=") if "position 3 of " in line] or None)[-1]
    case.check("its turn: %s is ahead" % one.id in wait_line,
               "%s's driver.log does not say it waits at position 3 behind %s (priority high): %r"
               % (grpo.id, one.id, wait_line[:300]))
    high = queue_state(one)
    high_line = (log_lines(one, "MVP_GATE_WAIT=") or [""])[-1]
    case.check(high.get("priority") == 100 and "priority 100" in high_line and "position 2 of " in high_line
               and "held by %s" % sft.id in high_line,
               "%s (-e priority=high): queue.json priority %r, wait line %r, expected position 2 held by %s"
               % (one.id, high.get("priority"), high_line[:300], sft.id))

    # The queue as status.yml shows it: the four jobs, in submission order (Ansible may wrap a line anywhere).
    status = case.play("status.yml", ["-e", "queue=true"], label="status.yml -e queue=true")
    text = " ".join(status.text.split())
    shown = {sid: re.search(r"(\d+)\. %s: (started|queued)" % re.escape(sid), text) for sid in order}
    listed = sorted((int(m.group(1)), sid) for sid, m in shown.items() if m)
    case.check([sid for _n, sid in listed] == order and [n for n, _sid in listed] == list(range(1, len(order) + 1)),
               "status.yml's queue lists %s, expected %s at 1..%d" % (listed, order, len(order)))
    case.check(status.rc == 0 and "queued since" in text, "status.yml rc=%s without queued jobs" % status.rc)

    # A shape no pair of these workers can hold: refused before submission, nothing written, nobody disturbed.
    big = Job(case, stamp("big"))
    nodes = WORKERS * 4
    run = case.play("submit.yml", ["-e", "workload=sft", "-e", "submission_id=" + big.id]
                    + extra_vars(trainer_overrides={"trainer.nnodes": nodes}, max_restarts=0), label="submit too big")
    case.check(run.rc != 0 and "can never fit this cluster's ALIVE workers" in run.text
               and "%d nodes x 1 GPU" % nodes in run.text, "the too-big job was not refused naming its shape (rc=%s)"
               % run.rc)
    case.check(not os.path.exists(big.dir), "the refused job got a job directory %s" % big.dir)
    case.check(cluster.job_status(big.id) is None, "Ray has a job %s" % big.id)
    case.check(cluster.job_status(sft.id) == "RUNNING", "%s is %s after the refusal" % (sft.id, cluster.job_status(sft.id)))

    # The second SFT is stopped while queued: never started; the job behind it moves up.
    stop = case.play("stop.yml", ["-e", "submission_id=" + sft2.id], label="stop.yml queued")
    stopped = read_json(os.path.join(sft2.dir, "logs", "status.json")) or {}
    case.check(stop.rc == 0 and stopped.get("cause") == "stopped" and "never started" in (stopped.get("summary") or ""),
               "%s stopped while queued: rc=%s verdict %r %r" % (sft2.id, stop.rc, stopped.get("cause"),
                                                                  stopped.get("summary")))
    case.check(not log_lines(sft2, "MVP_PRECHECK_"), "%s's program started although it was stopped while queued" % sft2.id)
    moved = wait_for("the queue behind %s closes up" % grpo.id, lambda: [
        line for line in log_lines(grpo, "MVP_GATE_WAIT=") if "position 3 of 3" in line])
    case.note("%s: %s" % (grpo.id, moved[0].split(";")[0]))

    # Everyone else trains to the end, in submission order, none failed.
    ends = {}
    for job, steps in ((sft, holder_steps), (grpo, SHORT_GRPO["trainer.total_training_steps"]),
                       (one, SHORT["trainer.total_training_steps"])):
        collected, record = job.collect()
        ends[job.id] = record
        case.check(record.get("verdict") == "trained" and "trained %d of %d" % (steps, steps) in record.get("summary", ""),
                   "%s: %r %r, expected trained %d of %d" % (job.id, record.get("verdict"), record.get("summary"),
                                                           steps, steps))
    started = {job.id: queue_state(job).get("admitted_at_s") or seconds_of(queue_state(job).get("admitted_at"))
               for job in (sft, grpo, one)}
    # In queue order; two jobs admitted by the same plan (both fit once the holder ended) start
    # within one look of each other, whichever gate looks first.
    case.check(None not in started.values() and started[sft.id] <= started[one.id] <= started[grpo.id] + POLL_S,
               "start order %s, expected %s then %s then %s" % (started, sft.id, one.id, grpo.id))
    sft_end = (ends[sft.id].get("end_time") or 0) / 1000.0
    first = min(started[one.id], started[grpo.id])
    case.check(first + 1 >= sft_end, "%s or %s started at %s, before %s ended at %.0f" % (
        one.id, grpo.id, first, sft.id, sft_end))
    case.check(not os.path.exists(os.path.join(sft.dir, "logs", "preempt.json"))
               and not os.path.exists(os.path.join(sft.dir, "logs", "stopped_by.json")),
               "%s (preemptible: false) was preempted for %s" % (sft.id, one.id))
    loss = metrics(sft.dir).get(holder_steps, {}).get("train/loss")
    if base:
        base_loss = base[holder_steps].get("train/loss")
        case.check(loss is not None and abs(loss - base_loss) <= 1e-6 * max(1.0, abs(base_loss)),
                   "%s final train/loss %s, the run alone %s" % (sft.id, loss, base_loss))
    free_to_start = first - sft_end
    case.seconds.setdefault("free_to_next_start_s", []).append(round(free_to_start, 1))
    # The queue's cost for a job with nothing ahead: from Ray's submission time to its trainer's start.
    case.seconds.setdefault("submission_to_trainer_start_nothing_ahead_s", []).append(
        round(started[sft.id] - (ends[sft.id].get("start_time") or 0) / 1000.0, 2))
    holder = queue_state(sft)
    if holder.get("gate_started_s"):
        case.seconds.setdefault("gate_cost_nothing_ahead_s", []).append(
            round(holder["admitted_at_s"] - holder["gate_started_s"], 2))
    case.note("%s ended %.1f s before the next started; %s and %s side by side: %s; %s's final train/loss %s %s"
              % (sft.id, free_to_start, grpo.id, one.id,
                 started[one.id] < (ends[grpo.id].get("end_time") or 0) / 1000.0, sft.id, loss,
                 "= alone" if base else "(not compared with the run alone: --no-alone)"))


URGENT_OWNER = "queue-urgent"


def check_preemption_ledgers(case, low, nxt, high, stopped, recomputed):
    """Issue 63: the hand-over and the queue waits land on the right run. The victim's ledger: its first attempt's
    time after its last step to its end is ``preemption`` (more than 0, at most the stop's time to Ray's end plus the
    checkpoint's save), the steps it trained past the checkpoint are recomputed, and its next attempt's queue wait is
    that attempt's own gate record; the preemptor's ledger: its own queue wait (it waited for the hand-over), none
    of the victim's buckets. Both close within 1%."""
    victim, urgent = wait_for_ledger(case, low.dir), wait_for_ledger(case, high.dir)
    check_closes(case, victim, low.id)
    check_closes(case, urgent, high.id)
    first = (victim.get("attempts") or [{}])[0]
    status = read_json(os.path.join(low.dir, "logs", "status.json")) or {}
    bound = status.get("end_time", 0) / 1000.0 - stopped["at_s"]
    handed = (first.get("seconds") or {}).get("preemption", 0)
    case.check(0 < handed, "the victim's ledger: preemption %.1f s, expected more than 0" % handed)
    case.check(victim["steps"]["recomputed"] == recomputed, "the victim's ledger: %s steps recomputed, it logged %d "
               "past its checkpoint" % (victim["steps"]["recomputed"], recomputed))
    for job, ledger, index in ((nxt, victim, 1), (high, urgent, 0)):
        gate = queue_state(job)
        own = (gate.get("admitted_at_s") or 0) - (gate.get("gate_started_s") or 0)
        got = ((ledger.get("attempts") or [])[index:index + 1] or [{}])[0].get("queue_wait_s")
        case.check(got is not None and abs(got - own) < 0.05, "%s: queue wait %s s in its run's ledger, its gate says "
                   "%.1f s" % (job.id, got, own))
    case.check(urgent.get("owner") == URGENT_OWNER, "the preemptor's ledger names owner %r, submitted as %s"
               % (urgent.get("owner"), URGENT_OWNER))
    case.check(all(v == 0 for k, v in urgent["buckets"].items() if k in ("preemption", "recomputed")),
               "the preemptor's ledger holds the victim's buckets: %s" % urgent["buckets"])
    case.note("ledgers: %s preemption %.1f s (stop to Ray's end %.1f s), next attempt queued %.1f s; %s queued %.1f s"
              % (low.id, handed, bound, victim["attempts"][-1]["queue_wait_s"], high.id, urgent["no_gpu"]["queue_wait_s"]))


def case_preempted(case):
    """A low SFT run on both workers is preempted by a high GRPO run right after its next checkpoint, continues."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    base = None if case.shared.get("no_alone") else baseline(case, LOW, stamp("alone"), key="preempt_baseline")
    low_steps = max(base) if base else LOW_STEPS
    low, high = Job(case, stamp("low")), Job(case, stamp("high"))
    nxt = Job(case, low.id + "-r1")
    # max_restarts 0: a preemption continues the run all the same (it is not counted). Submitted with wait=true:
    # the submitting play follows the run across the preemption to its end.
    argv, proc = start_playbook(cluster, "submit.yml", [
        "-e", "workload=sft", "-e", "submission_id=" + low.id, "-e", "wait=true", "-e", "priority=low",
        "-e", "submit_job_verl_checks=false"]
        + extra_vars(trainer_overrides=LOW, submit_job_watchdog=WATCHDOG, max_restarts=0))
    since = time.time()

    def past_first_checkpoint():
        if proc.poll() is not None:
            raise CaseFailed("submit.yml of %s ended (rc=%s) before it trained" % (low.id, proc.returncode))
        return len(metrics(low.dir)) > LOW_SAVE + 1
    wait_for("%s past its first checkpoint" % low.id, past_first_checkpoint, timeout=300)
    submitted = time.time()
    preemptor = case.shared.get("preemptor") or "grpo"
    # its own owner (issue 63): ledger.yml's rows per owner (tests/reliability/ledger.py "ledger.yml sums") hold two
    submit(case, high, preemptor, SHORT_GRPO if preemptor == "grpo" else dict(SHORT, **{"trainer.nnodes": 1}),
           ("-e", "priority=high", "-e", "submit_job_verl_checks=false", "-e", "owner=" + URGENT_OWNER))
    note = wait_for("%s's preemption decided" % low.id, lambda: read_json(os.path.join(low.dir, "logs", "preempt.json")))
    case.check(note.get("by") == high.id and note.get("by_priority") == 100 and note.get("priority") == -100,
               "%s's preempt.json %s, expected by %s (100 over -100)" % (low.id, note, high.id))
    stopped = wait_for("%s stopped" % low.id, lambda: read_json(os.path.join(low.dir, "logs", "stopped_by.json")),
                       timeout=300)
    step = stopped.get("step")
    case.check(stopped.get("cause") == "preempted" and stopped.get("preempted_by") == high.id and step
               and step % LOW_SAVE == 0 and step > (note.get("checkpoint_before") or 0),
               "%s stopped_by %s: expected preempted by %s right after a checkpoint newer than step %s"
               % (low.id, stopped, high.id, note.get("checkpoint_before")))
    record = wait_for("%s judged" % low.id, lambda: (read_json(os.path.join(low.dir, "logs", "status.json")) or {})
                      .get("cause"), timeout=300)
    case.check(record == "preempted", "%s's verdict cause %r, expected preempted" % (low.id, record))
    spec = wait_for("%s made" % nxt.id, lambda: read_json(os.path.join(nxt.dir, "config", "job_spec.json")), timeout=300)
    restart = spec.get("restart") or {}
    case.check((spec.get("resume_from") or {}).get("step") == step and restart.get("preemptions") == 1
               and restart.get("restarts") == 0,
               "%s resumes %s with restart %s, expected step %s, 1 preemption, 0 restarts counted"
               % (nxt.id, spec.get("resume_from"), restart, step))
    # The high run trains; its record says what it preempted.
    _collected, ended = high.collect()
    steps = SHORT_GRPO["trainer.total_training_steps"]
    case.check(ended.get("verdict") == "trained" and "trained %d of %d" % (steps, steps) in ended.get("summary", ""),
               "%s: %r %r, expected trained %d of %d" % (high.id, ended.get("verdict"), ended.get("summary"), steps,
                                                        steps))
    preempting = (read_json(os.path.join(high.dir, "logs", "preempting.json")) or {}).get("preemptions") or [{}]
    case.check(preempting[0].get("victims") == [low.id] and low.id in (preempting[0].get("stopped") or {}),
               "%s's preempting.json %s" % (high.id, preempting))
    # The continued attempt starts only once the high run left room; while it waits, its gate says its priority.
    again = wait_for("%s's trainer start" % nxt.id, lambda: queue_state(nxt).get("admitted_at_s"), timeout=RUN_TIMEOUT)
    high_end = (ended.get("end_time") or 0) / 1000.0
    waits = log_lines(nxt, "MVP_GATE_WAIT=")
    case.check(again + 1 >= high_end and all("priority -100" in line for line in waits),
               "%s started at %.1f, %s ended at %.1f; its wait lines %s" % (nxt.id, again, high.id, high_end, waits))
    status = case.play("status.yml", ["-e", "last=8"], label="status.yml")
    text = " ".join(status.text.split())
    case.check("preempted by %s" % high.id in text and "preempted %s (stopped at step %d" % (low.id, step) in text,
               "status.yml does not show the preemption on both runs")
    # The run continues from that checkpoint and ends as the run alone did; the play that submitted it says so.
    end = wait_for_run_end(case, low.id, RUN_TIMEOUT)
    play = finish_playbook(argv, proc, since, RUN_TIMEOUT)
    case.keep(play, "submit sft wait=true (the victim)")
    case.check(play.rc == 0 and nxt.id in play.text and "preempted" in play.text,
               "the victim's submit.yml wait=true: rc=%s, names %s: %s, says preempted: %s"
               % (play.rc, nxt.id, nxt.id in play.text, "preempted" in play.text))
    first, second = metrics(low.dir), metrics(nxt.dir)
    case.check(end.rc == 0 and second and min(second) == step + 1 and max(second) == low_steps,
               "%s: first step %s, last %s; expected %d..%d (%s)" % (nxt.id, min(second or [0]), max(second or [0]),
                                                                    step + 1, low_steps, end.text[-300:]))
    recomputed = max(first) - step
    case.check(0 <= recomputed <= RECOMPUTED_MAX, "%s logged %d step(s) past its checkpoint of step %d (at most %d)"
               % (low.id, recomputed, step, RECOMPUTED_MAX))
    loss = second.get(low_steps, {}).get("train/loss")
    if base:
        base_loss = base[low_steps].get("train/loss")
        case.check(loss is not None and abs(loss - base_loss) <= 1e-6 * max(1.0, abs(base_loss)),
                   "%s final train/loss %s, the run alone %s" % (nxt.id, loss, base_loss))
    check_preemption_ledgers(case, low, nxt, high, stopped, recomputed)
    # Figures: the wait for the checkpoint, the hand-over (the victim's stop to the preemptor's trainer start).
    gate = queue_state(high)
    wait_s = stopped["at_s"] - note["decided_at_s"]
    handover_s = (gate.get("admitted_at_s") or 0) - stopped["at_s"]
    case.seconds.setdefault("preempt_submit_to_decision_s", []).append(round(note["decided_at_s"] - submitted, 1))
    case.seconds.setdefault("preempt_wait_for_checkpoint_s", []).append(round(wait_s, 1))
    case.seconds.setdefault("preempt_handover_s", []).append(round(handover_s, 1))
    case.seconds.setdefault("preempt_steps_recomputed", []).append(recomputed)
    if ended.get("start_time") and gate.get("admitted_at_s"):
        case.seconds.setdefault("preempt_ray_submission_to_trainer_start_s", []).append(
            round(gate["admitted_at_s"] - ended["start_time"] / 1000.0, 1))
    case.note("%s preempted at step %d (%.1f s after the decision, %d step(s) past it), %s started %.1f s later; %s "
              "continued at step %d, final train/loss %s %s" % (
                  low.id, step, wait_s, recomputed, high.id, handover_s, nxt.id, step + 1, loss,
                  "= alone" if base else "(not compared with the run alone: --no-alone)"))


def case_grace_passed(case):
    """The grace time passes before the victim's next checkpoint: it is stopped at once, loses at most save_freq
    steps, and still ends as the run alone."""
    case.ensure_cluster()
    case.wait_jobs_idle()
    base = None if case.shared.get("no_alone") else baseline(case, LATE, stamp("alone"), key="grace_baseline")
    low_steps = max(base) if base else LATE_STEPS
    save = LATE["trainer.save_freq"]
    ran = case.play("playbooks/controller.yml", ["-e", "job_controller_preempt_grace_s=%d" % GRACE_S],
                    label="controller.yml grace %d s" % GRACE_S)
    if ran.rc != 0:
        raise CaseFailed("controller.yml -e job_controller_preempt_grace_s=%d: rc=%s" % (GRACE_S, ran.rc))
    try:
        low, high = Job(case, stamp("late")), Job(case, stamp("now"))
        nxt = Job(case, low.id + "-r1")
        submit(case, low, "sft", LATE, ("-e", "priority=low"))
        wait_for("%s past its checkpoint of step %d" % (low.id, save), lambda: len(metrics(low.dir)) > save + 1,
                 timeout=300)
        submit(case, high, "grpo", SHORT_GRPO, ("-e", "priority=high", "-e", "submit_job_verl_checks=false"))
        stopped = wait_for("%s stopped" % low.id, lambda: read_json(os.path.join(low.dir, "logs", "stopped_by.json")),
                           timeout=300)
        case.check(stopped.get("cause") == "preempted" and "grace time (job_controller_preempt_grace_s, %d s) passed" % GRACE_S
                   in stopped.get("why", "") and stopped.get("step") == save,
                   "%s stopped_by %s: expected preempted at once when %d s passed, newest checkpoint %d"
                   % (low.id, stopped, GRACE_S, save))
        end = wait_for_run_end(case, low.id, RUN_TIMEOUT)
        case.keep(end, "run %s" % low.id)
    finally:
        back = case.play("playbooks/controller.yml", [], label="controller.yml (the inventory's grace)")
        case.check(back.rc == 0, "controller.yml could not put the inventory's grace back (rc=%s)" % back.rc)
    first, second = metrics(low.dir), metrics(nxt.dir)
    lost = max(first) - save
    case.check(end.rc == 0 and second and min(second) == save + 1 and max(second) == low_steps and 0 < lost <= save,
               "%s logged up to %s (lost %d, at most %d); %s %s..%s, expected %d..%d"
               % (low.id, max(first), lost, save, nxt.id, min(second or [0]), max(second or [0]), save + 1, low_steps))
    loss = second.get(low_steps, {}).get("train/loss")
    if base:
        base_loss = base[low_steps].get("train/loss")
        case.check(loss is not None and abs(loss - base_loss) <= 1e-6 * max(1.0, abs(base_loss)),
                   "%s final train/loss %s, the run alone %s" % (nxt.id, loss, base_loss))
    case.note("%s stopped at once after %.1f s (grace %d s) at step %d, %d step(s) past its checkpoint of step %d; %s "
              "continued at step %d, final train/loss %s %s" % (
                  low.id, stopped.get("waited_s"), GRACE_S, max(first), lost, save, nxt.id, save + 1, loss,
                  "= alone" if base else "(not compared with the run alone: --no-alone)"))


def case_busy_at_start(case):
    """The GPUs a GRPO run was admitted to are taken before verl reserves them: busy, continued, trained."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    job = Job(case, stamp("busy"))
    steps = SHORT_GRPO["trainer.total_training_steps"]
    argv, proc = start_playbook(cluster, "submit.yml", ["-e", "workload=grpo", "-e", "submission_id=" + job.id]
                                + extra_vars(trainer_overrides=SHORT_GRPO, max_restarts=1))
    started = time.time()
    release = "/tmp/%s.release" % job.id
    head = cluster.container[cluster.head]
    holder = None
    try:
        wait_for("%s admitted" % job.id, lambda: queue_state(job).get("state") == "admitted")
        holder = subprocess.Popen(["docker", "exec", "-e", "RAY_AUTH_MODE=token", "-e", "RAY_AUTH_TOKEN_PATH=" + cluster.token_path,
                                   head, cluster.python, "-c", HOLD_SCRIPT, str(WORKERS), release],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("the hold on both GPUs", lambda: subprocess.run(
            ["docker", "exec", head, "test", "-e", release + ".held"]).returncode == 0, timeout=60)
        nxt = Job(case, job.id + "-r1")
        def waiting():
            if proc.poll() is not None:
                raise CaseFailed("submit.yml ended (rc=%s) before %s waited for the held GPUs" % (proc.returncode, nxt.id))
            return [x for x in log_lines(nxt, "MVP_GATE_WAIT=") if "held outside the queue" in x]
        line = wait_for("%s waits for the GPUs held outside the queue" % nxt.id, waiting, timeout=600)
        case.note("%s: %s" % (nxt.id, line[0].split("; waits for ")[-1][:90]))
    finally:
        # Whatever happened, the hold ends (the placement group goes with its driver).
        subprocess.run(["docker", "exec", head, "touch", release], check=False)
        if holder is not None:
            try:
                holder.wait(timeout=60)
            except subprocess.TimeoutExpired:
                holder.kill()
        run = finish_playbook(argv, proc, started, RUN_TIMEOUT)
        case.keep(run, "submit grpo max_restarts=1")
    first = read_json(os.path.join(job.dir, "logs", "status.json")) or {}
    case.check(first.get("cause") == "busy" and "Total available GPUs" in str(first.get("evidence")),
               "%s: cause %r (%s), expected busy with verl's resource message" % (job.id, first.get("cause"),
                                                                                 first.get("summary")))
    link = read_json(os.path.join(job.dir, "logs", "restart.json")) or {}
    case.check(link.get("next") == nxt.id and link.get("cause") == "busy", "restart.json %s" % link)
    spec = read_json(os.path.join(nxt.dir, "config", "job_spec.json")) or {}
    case.check(not spec.get("resume_from"), "%s resumes %s although no attempt trained" % (nxt.id, spec.get("resume_from")))
    last = read_json(os.path.join(nxt.dir, "logs", "status.json")) or {}
    case.check(run.rc == 0 and last.get("verdict") == "trained" and "trained %d of %d" % (steps, steps)
               in (last.get("summary") or ""), "submit rc=%s, %s: %r %r" % (run.rc, nxt.id, last.get("verdict"),
                                                                          last.get("summary")))
    case.note("%s: %s; %s: %s" % (job.id, first.get("summary", "")[:80], nxt.id, last.get("summary")))


CASES = [
    ("shared cluster", "SFT 2x1 (preemptible: false) trains, never preempted; GRPO 1x1, SFT 2x1, then SFT 1x1 priority high queue: the high one first, the "
     "others in submission order (status.yml); too big refused, nothing written; the queued SFT stopped: never "
     "started, the queue closes up; the rest train in that order, the first SFT with the final loss of the run alone",
     case_shared_cluster),
    ("preempted", "SFT 2x1 at low trains past a checkpoint; GRPO 1x1 (or SFT, --preemptor) at high is submitted: the SFT run stops right "
     "after its next checkpoint (cause preempted), GRPO trains, the SFT run continues uncounted from that checkpoint "
     "(first step = its step + 1) and ends with the final loss of the run alone; status.yml shows both sides",
     case_preempted),
    ("grace passed", "SFT at low with checkpoints every 60 steps, the controller's grace 3 s: preempted between "
     "checkpoints it is stopped at once, loses at most 60 steps, continues from step 60 and ends as the run alone",
     case_grace_passed),
    ("busy at start", "GPUs taken between admission and start: verdict busy, <id>-r1 waits for them in the queue, "
     "then trains to the end", case_busy_at_start),
]


def main():
    """Run the table and print it; return the exit code."""
    parser = suite_parser(__doc__, CASES)
    parser.add_argument("--baseline", help="an SFT run of the holder's request (HOLDER) run alone (else one is run)")
    parser.add_argument("--no-alone", action="store_true",
                        help="\"shared cluster\" without the run alone: the holder's final loss is not compared")
    parser.add_argument("--preemptor", choices=("grpo", "sft"), default="grpo",
                        help="\"preempted\": the high run's workload (1 x 1, 2 steps; sft starts in a third of "
                        "grpo's time: the molecule train scenario, for CI time)")
    parser.add_argument("--seconds-out", help="write the measured figures as JSON here")
    args = parser.parse_args()
    seconds, shared = {}, {"baseline": args.baseline, "no_alone": args.no_alone, "preemptor": args.preemptor}

    def prepare(case):
        case.seconds = seconds
        case.shared = shared

    code = run_cases(CASES, Cluster(args.inventory, args.host_shared), args.only, "queue", prepare)
    write_figures(args.seconds_out, seconds)
    return code


if __name__ == "__main__":
    sys.exit(main())
