# -*- coding: utf-8 -*-
"""The verdict of a training job: did it train, and if not, why (one named cause with its evidence).

Pure Python (standard library only), so the same file serves two places:

* the job tools: ``verl_snapshot`` installs a copy next to ``mvp_entry.py``, whose progress
  watchdog uses :func:`hang_bound` and which writes ``logs/verdict.json`` with :func:`classify`
  when the trainer ends (the job decides its own verdict, whether or not a play is waiting);
* the modules: ``ray_job_record`` writes ``logs/status.json`` with Ray's status and this verdict
  side by side, classifying itself when the entrypoint could not (its node died).

Inputs come from where Ray and verl put them, never from guesses:

* the driver output (``logs/driver.log``, the entrypoint's copy of the trainer's stdout and stderr);
* verl's file logger lines ``{"step": N, "data": {...}}`` (``logs/metrics.jsonl``;
  ``verl/utils/tracking.py`` FileLogger) and the step count verl prints before the first step
  (``TOTAL_STEPS_RE``);
* Ray's node table (``ray.util.state.list_nodes``: state, ``state_message``, end time) and actor
  table (``list_actors``: ``death_cause``), as plain dicts;
* the watchdog's record (``logs/watchdog.json``).

Causes (the fixed vocabulary, ``CAUSES``): ``node_lost`` (Ray declared a node of the job dead, or the job controller
saw a worker's container exit and stopped the job first: ``logs/stopped_by.json`` with cause ``node_lost``), ``head_lost`` (the Ray head that ran the job
was lost with its job table - status ``LOST`` - before the job ended; judged from the job directory
alone), ``host_oom``, ``device_oom``,
``collective`` (NCCL/Gloo timeout or abort), ``hang`` (the watchdog), ``busy`` (the resources the
queue admitted the job to were taken before verl reserved them: verl's resource check refused,
naming the jobs that held them; the configuration is fine), ``queue_timeout`` (the job waited in the
cluster's queue longer than allowed and never started), ``infeasible`` (a deadline the project enforces stopped
it because what it asks Ray for - a placement group, the entrypoint's resources - no ALIVE node offers: the
``cause`` of ``logs/stopped_by.json``, with the demand and the nodes' offers as evidence; not restartable),
``platform_unsupported`` (the node's
platform layer cannot run it: no accelerator driver, a device the node lacks, a torch build or
kernel or kernel package the image lacks; the layer and the missing piece are named, the
configuration may be valid elsewhere), ``config_rejected``
(before the first step), ``user_code`` (the reward function), ``stopped`` (by a person, or by the cluster play that
``logs/stopped_by.json`` names; "never started" when it was stopped while queued), ``preempted`` (the job
controller stopped it right after a complete checkpoint - or when ``job_controller_preempt_grace_s`` passed - so that
a job of a higher priority could start: ``logs/stopped_by.json`` names that job, the step and the
checkpoint; the run always continues from it, not counted against ``max_restarts``), ``cluster_changed``
(a cluster play, ``site.yml -e mvp_running_jobs=restart``, stopped it to restart Ray or recreate a
container under it: ``logs/interrupted_by.json``; restartable, the configuration is fine),
``short_training`` (SUCCEEDED with fewer steps than verl planned), ``no_progress`` (a resumed
job whose first step is not the checkpoint's step + 1, or that logged none: "resumed without
progress"), ``unknown``. ``RETRYABLE_CAUSES`` are the ones an automatic restart may follow.
"""

from __future__ import annotations

import json
import os
import re

try:
    from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
except ImportError:  # the job tools' copy: verl_snapshot installs mvp_job.py beside this file
    from mvp_job import FILES  # pylint: disable=import-error

CAUSES = ("node_lost", "head_lost", "host_oom", "device_oom", "collective", "hang", "busy", "cluster_changed",
          "queue_timeout", "infeasible", "platform_unsupported", "config_rejected", "user_code", "stopped", "preempted",
          "short_training", "no_progress", "unknown")
# Causes a run may be restarted for (from its newest complete checkpoint): the cluster or the
# machine failed, not the job's configuration or code (submit_job's max_restarts).
RETRYABLE_CAUSES = ("node_lost", "head_lost", "host_oom", "collective", "hang", "busy", "cluster_changed")


def stopped_while_pending(status, stopped_by):
    """Whether a job Ray still lists PENDING was ended by the project's stop (its ``logs/stopped_by.json``).

    Ray keeps a job whose driver it never placed PENDING after a stop, until its own start timeout fails it;
    the job controller judges such an attempt at once and ``ray_job_record`` records it STOPPED.

    :param status: str, Ray's status; :param stopped_by: dict or None, the stop note.
    :returns: bool.
    """
    return status == "PENDING" and bool(stopped_by)


# The status a job gets when the Ray head that ran it was lost with its job table (Ray has no such
# status: ray_job_record gives it to a job the new head does not know, lost_with_head).
LOST_STATUS = "LOST"
# verl's refusal of a cluster whose free GPUs are fewer than its resource pools ask
# (ResourcePoolManager._check_resource_available, verl/single_controller/ray/base.py): the
# resources were taken, not misconfigured.
BUSY_RE = re.compile(r"Total available GPUs \S+ is less than total desired GPUs \S+")
# The gate's own lines (mvp_gate.py): stopped or timed out while queued - the program never started.
GATE_STOPPED_RE = re.compile(r"^MVP_GATE_STOPPED=")
GATE_TIMEOUT_RE = re.compile(r"^MVP_GATE_TIMEOUT=(.*)")
# The step count verl plans: RayPPOTrainer prints "Total training steps: N" once its data loaders
# exist (verl/trainer/ppo/ray_trainer.py); the FSDP engine of an SFT run prints "Total steps: N,
# num_warmup_steps: W" when it builds the LR scheduler (verl/workers/engine/fsdp/transformer_impl.py).
TOTAL_STEPS_RE = re.compile(r"Total training steps: (-?\d+)|Total steps: (-?\d+), num_warmup_steps")
# A Python traceback frame: File "<path>", line N, in <function>.
FRAME_RE = re.compile(r'File "([^"]+)", line (\d+)')
# Patterns per cause, in the order they are tried on the driver output; each names what it reads.
LOG_PATTERNS = (
    ("host_oom", re.compile(
        r"ray\.exceptions\.OutOfMemoryError|node running low on memory|Memory on the node .* was|"
        r"Out of memory: Kill(ed)? process|oom-kill|OOM killer|Task was killed due to the node running low")),
    ("device_oom", re.compile(
        r"CUDA out of memory|torch\.(cuda\.)?OutOfMemoryError|HIP out of memory|NPU out of memory|"
        r"CUBLAS_STATUS_ALLOC_FAILED")),
    ("node_lost", re.compile(
        r"NodeDiedError|RayletDiedError|node (with node id: \S+ )?.*has been marked dead|"
        r"because its node (has )?died|The node .* has died|"
        r"owner .* died|ActorDiedError.*(node|raylet)|Node failure|node .* is dead", re.IGNORECASE)),
    ("collective", re.compile(
        r"NCCL (error|timeout|WARN.*Timeout)|ncclInternalError|ncclSystemError|ncclRemoteError|"
        r"Watchdog caught collective operation timeout|ProcessGroupNCCL.*(timeout|abort)|"
        r"DistBackendError|Gloo.*(timed out|Timed out|Connection closed by peer|Connection reset)|"
        r"\[\.\./third_party/gloo/.*\] (Timed out|Connection closed)|"
        r"Connection closed by peer|Socket Timeout|c10d.*(timed out|Timeout)")),
)
# Failures of the node's platform layer, each read in an exception line (torch's, triton's, vLLM's
# or transformers' own message): (pattern, layer, what is missing; ``{0}``, ``{1}`` take the
# pattern's groups). The request may be valid (verl's validate_config passes it, it would train on a
# node that has the piece); this node cannot run it. The first rule that matches the latest such line wins.
PLATFORM_RULES = (
    (re.compile(r"Found no NVIDIA driver on your system"), "torch CUDA runtime", "the NVIDIA driver"),
    (re.compile(r"(libcuda\.so[.\d]*): cannot open shared object file"), "CUDA driver library",
     "{0} (the NVIDIA driver)"),
    (re.compile(r"No CUDA GPUs are available|no CUDA-capable device is detected"), "CUDA runtime", "a CUDA GPU"),
    (re.compile(r"Torch not compiled with CUDA enabled"), "torch build", "CUDA (a CPU-only torch)"),
    (re.compile(r"Distributed package doesn't have NCCL built in|ProcessGroupNCCL is only supported with GPUs"),
     "torch.distributed", "NCCL (GPUs)"),
    (re.compile(r"Could not run '([\w:.]+)' with arguments from the '(\w+)' backend"), "torch kernels",
     "{0} for the {1} backend"),
    (re.compile(r"\"(\w+)\" not implemented for '(\w+)'"), "torch kernels", "{0} for {1}"),
    (re.compile(r"\b0 active drivers \(\[\]\)"), "triton", "a GPU driver"),
    (re.compile(r"FlashAttention2 has been toggled on, but it cannot be used due to the following error: ([^.]{1,160})"),
     "attention kernels", "FlashAttention 2 ({0})"),
    (re.compile(r"No module named '(flash_attn|flashinfer|liger_kernel|apex|transformer_engine|deep_gemm)\b"),
     "image packages", "{0} (GPU kernels)"),
    (re.compile(r"No module named '(sglang|megatron)\b"), "image packages", "{0} (an engine this image does not carry)"),
    (re.compile(r"The module has CPU parameters or buffers when sync_module_states=True"), "FSDP1",
     "GPU parameters (FSDP1's sync_module_states; fsdp2 runs on CPU)"),
    (re.compile(r"Failed to infer device type"), "vLLM platform", "a device vLLM supports"),
    (re.compile(r"(\w[\w .-]{0,80}?) (?:is|are) not supported on (?:the )?current platform"), "current platform",
     "{0}"),
)
# pydantic's exception line: the validators' messages follow on the next lines.
VALIDATION_RE = re.compile(r"ValidationError: \d+ validation errors? for ")
# A Ray actor's prefix on the lines it printed: "(WorkerDict pid=449) " (with colour codes, an ip).
RAY_PREFIX_RE = re.compile(r"^(\x1b\[[\d;]*m)*\([\w.:-]+ pid=\d+(, ip=[\d.]+)?\)(\x1b\[[\d;]*m)* ?")
# Exception names that mean verl (or Hydra, OmegaConf) refused its configuration.
CONFIG_EXC_RE = re.compile(
    r"^(\w+\.)*(ValueError|AssertionError|ConfigCompositionException|ConfigAttributeError|ConfigKeyError|"
    r"MissingMandatoryValue|ValidationError|InterpolationResolutionError|TypeError|KeyError|"
    r"NotImplementedError|FileNotFoundError|OSError)\b")
# The line that names an exception: "SomeError: message" (optionally qualified), or its repr
# "SomeError('message')" as Hydra prints the cause of a failed instantiate.
EXC_LINE_RE = re.compile(r"^\s*((\w+\.)*\w*(Error|Exception|Exit|Interrupt))((: .*)?$|\()")
# Hydra's own report of a trainer that could not start: a config node whose _target_ refused its
# values, or the job's overrides (hydra/_internal/utils.py, instantiate/_instantiate2.py).
HYDRA_START_RE = re.compile(r"^Error in call to target '|^Error executing job with overrides")
# Most lines of evidence kept per source.
MAX_EVIDENCE = 8


def read_metrics(text):
    """Steps logged by verl's file logger.

    :param text: str, content of ``metrics.jsonl`` (one JSON object per line; bad lines are skipped,
        the last line may be half-written).
    :returns: list of int, the ``step`` of each line in file order.
    """
    steps = []
    for line in (text or "").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and not isinstance(row.get("step"), bool):
            steps.append(row["step"])
    return steps


def planned_steps(log_text):
    """The step count verl planned (its last line matching ``TOTAL_STEPS_RE``), or None.

    :param log_text: str, driver output.
    :returns: int or None.
    """
    found = TOTAL_STEPS_RE.findall(log_text or "")
    return int(found[-1][0] or found[-1][1]) if found else None


def median(values):
    """Median of a non-empty list of numbers (float)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def hang_bound(steps_seen, durations, first_step_s, floor_s, factor):
    """Seconds without a new step after which the trainer counts as hung.

    :param steps_seen: int, steps logged so far.
    :param durations: list of float, seconds each step after the first took (the first one also
        holds model load and engine start, so it is left out).
    :param first_step_s: float, allowance before the first step (model load, rollout engine start);
        also the least bound until a second step gives a step time.
    :param floor_s: float, the least bound once step times are known (seconds).
    :param factor: float, multiple of the median step time.
    :returns: (float bound in seconds, str how it was computed).
    """
    if not steps_seen:
        return float(first_step_s), "first-step allowance %gs" % first_step_s
    if not durations:
        return float(max(floor_s, first_step_s)), "max(floor %gs, first-step allowance %gs) until step 2" % (
            floor_s, first_step_s)
    typical = median(durations)
    return max(float(floor_s), factor * typical), "max(floor %gs, %g x median step %.1fs)" % (
        floor_s, factor, typical)


def _evidence(lines, name, pattern, limit=MAX_EVIDENCE, own=False):
    """Lines of ``lines`` matching ``pattern`` as evidence dicts {file, line, text} (the last ``limit``).

    The project's own ``MVP_*`` lines (an earlier verdict, the watchdog's notes) are never evidence,
    unless ``own`` asks for them (the gate's queue lines).
    """
    found = [{"file": name, "line": number, "text": text.strip()[:500]}
             for number, text in enumerate(lines, 1) if pattern.search(text) and (own or not text.startswith("MVP_"))]
    return found[-limit:]


def _last_exception(lines, name):
    """The last line naming an exception in a traceback-bearing output, as evidence, or None."""
    for number in range(len(lines), 0, -1):
        text = lines[number - 1]
        match = EXC_LINE_RE.match(text)
        if match and not text.startswith("MVP_"):
            return {"file": name, "line": number, "text": text.strip()[:500]}
    return None


def platform_failure(lines, name):
    """The latest exception line that a rule of ``PLATFORM_RULES`` explains, with the code that raised it.

    Exception lines are read with or without a Ray actor's prefix (``(WorkerDict pid=1) ...``); the
    project's own ``MVP_*`` lines and warnings (``UserWarning: CUDA initialization: ...``) never count.

    :param lines: list of str, driver output (or Ray's job message) lines.
    :param name: str, how the evidence names the source.
    :returns: None, or dict with ``layer``, ``missing`` (str) and ``evidence`` (the nearest traceback
        frame above the line, when there is one, then the line itself: {file, line, text}).
    """
    for number in range(len(lines), 0, -1):
        text = lines[number - 1]
        if text.startswith("MVP_"):
            continue
        bare = RAY_PREFIX_RE.sub("", text)
        if not EXC_LINE_RE.match(bare):
            continue
        # pydantic puts a validator's message on the lines after "ValidationError: N validation error for X".
        if VALIDATION_RE.search(bare):
            bare = " ".join([bare] + [RAY_PREFIX_RE.sub("", lines[k]).strip()
                                      for k in range(number, min(number + 3, len(lines)))])
        for pattern, layer, missing in PLATFORM_RULES:
            match = pattern.search(bare)
            if not match:
                continue
            groups = [" ".join(g.split()).rstrip(" .") for g in match.groups() if g]
            evidence = [{"file": name, "line": number, "text": text.strip()[:500]}]
            for above in range(number - 1, max(number - 6, 0), -1):
                if FRAME_RE.search(lines[above - 1]):
                    evidence.insert(0, {"file": name, "line": above, "text": lines[above - 1].strip()[:500]})
                    break
            return {"layer": layer, "missing": missing.format(*groups), "evidence": evidence}
    return None


def _user_frames(lines, name, user_files):
    """Traceback frames in one of ``user_files`` (the reward function), as evidence dicts."""
    if not user_files:
        return []
    out = []
    for number, text in enumerate(lines, 1):
        match = FRAME_RE.search(text)
        if match and match.group(1) in user_files:
            out.append({"file": name, "line": number, "text": text.strip()[:500]})
    return out[-MAX_EVIDENCE:]


def dead_nodes_during(nodes, start_ms, end_ms=None):
    """Nodes of Ray's node table that died while the job ran.

    :param nodes: list of dict (``state``, ``node_ip``, ``node_id``, ``node_name``, ``state_message``,
        ``end_time_ms``) as ``ray.util.state.list_nodes(detail=True)`` returns them.
    :param start_ms: int, the job's start (ms since the epoch, Ray's ``start_time``).
    :param end_ms: int or None, the job's end; a node dead up to 60 s after it counts (Ray
        marks a node DEAD when its health checks fail, which can come after the job ended).
    :returns: list of dict (the same node dicts).
    """
    out = []
    for node in nodes or []:
        if str(node.get("state", "")).upper() != "DEAD":
            continue
        died = node.get("end_time_ms") or 0
        if start_ms and died and died < start_ms:
            continue
        if end_ms and died and died > end_ms + 60000:
            continue
        out.append(node)
    return out


def _node_text(node):
    """One line naming a dead node: its IP, name, id and Ray's reason."""
    return "node %s (%s, id %s) DEAD: %s" % (
        node.get("node_ip") or "?", node.get("node_name") or "?", str(node.get("node_id") or "?")[:12],
        " ".join(str(node.get("state_message") or "no reason recorded").split())[:300])


def _actor_text(actor):
    """One line naming a dead actor and its death cause (Ray's actor table)."""
    cause = actor.get("death_cause") or {}
    return "actor %s (pid %s on %s) DEAD: %s" % (
        actor.get("class_name") or "?", actor.get("pid") or "?", actor.get("node_ip") or actor.get("node_id") or "?",
        " ".join(json.dumps(cause, sort_keys=True).split())[:400])


def _actor_cause(actor):
    """The cause an actor's ``death_cause`` names, or None (Ray: oom_context, node died, ...)."""
    text = json.dumps(actor.get("death_cause") or {})
    if "oom_context" in text or "OUT_OF_MEMORY" in text or "running low on memory" in text:
        return "host_oom"
    if "NODE_DIED" in text or "node_death_info" in text or "its node died" in text.lower():
        return "node_lost"
    return None


def _steps_text(logged, planned, resumed):
    """'trained K of N steps' (with the resume point when there is one)."""
    if planned is None:
        text = "trained %d steps" % logged
    else:
        text = "trained %d of %d steps" % (logged, max(planned - resumed, 0))
    if resumed and planned is not None and planned <= resumed:
        return text + ": it resumed at step %d of the %d verl planned, so nothing was left to train" % (
            resumed, planned)
    return text + (" after resuming at step %d" % resumed if resumed else "")


def _resume_problem(steps, resumed, planned, status):
    """Why a resumed job made no progress from its checkpoint, or None.

    verl continues at the checkpoint's step + 1 (``global_steps`` restored, then incremented), so
    the first step a resumed job logs must be ``resumed + 1``; a lower one means it started over
    (verl#5725, verl#7401). A resumed job that ended SUCCEEDED without a step, with steps left to
    train, made no progress either.

    :param steps: list of int, the steps logged (verl's file logger).
    :param resumed: int, the checkpoint step the job continued from (0: not resumed).
    :param planned: int or None, the steps verl planned.
    :param status: str, Ray's status (upper case).
    :returns: str or None.
    """
    if not resumed:
        return None
    if steps and min(steps) != resumed + 1:
        return "its first step was %d, the checkpoint's step + 1 is %d" % (min(steps), resumed + 1)
    if not steps and status == "SUCCEEDED" and not (planned is not None and planned <= resumed):
        return "it logged no step after resuming at step %d" % resumed
    return None


def classify(status, exit_code=None, message="", log_text="", log_name=FILES["driver_log"],
             steps=(), planned=None, resumed=0, watchdog=None, nodes=(), actors=(), start_ms=None,
             end_ms=None, user_files=(), training=True, holders=(), stopped_by=None, interrupted_by=None):
    """The verdict of one job.

    :param status: str, Ray's job status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED), or ``LOST_STATUS``
        for a job whose head was lost with its job table (``head_lost`` unless it logged every planned step).
    :param exit_code: int or None, the driver's exit code (Ray's ``driver_exit_code``).
    :param message: str, Ray's job message.
    :param log_text: str, the driver output (the entrypoint's ``logs/driver.log``).
    :param log_name: str, how the evidence names that file.
    :param steps: list of int, the steps verl's file logger wrote (:func:`read_metrics`).
    :param planned: int or None, the step count the trainer planned; None reads it from ``log_text``
        (:func:`planned_steps`).
    :param resumed: int, the checkpoint step the job continued from (0 for a fresh run).
    :param watchdog: dict or None, the watchdog's record (``hang`` true when it stopped the trainer).
    :param nodes: list of node dicts (Ray's node table, :func:`dead_nodes_during`).
    :param actors: list of actor dicts of this job (Ray's actor table with ``death_cause``).
    :param start_ms: int or None, the job's start (ms); end_ms: its end.
    :param user_files: list of str, files of the user's code (the reward function) whose frames in a
        traceback mean the user's code failed.
    :param training: bool, the workload is a trainer (a script workload only needs to succeed).
    :param holders: list of str, the other jobs active when it ended (``id (STATUS)``): named as the
        holders of the resources when verl refused a busy cluster.
    :param stopped_by: dict or None, ``logs/stopped_by.json``: the cluster play that stopped the job
        (``by``, ``at``), named in the summary of a STOPPED job instead of a person.
    :param interrupted_by: dict or None, ``logs/interrupted_by.json``: the cluster play that stopped
        the job to change its nodes (``by``, ``at``, ``changes``); a job that did not succeed is then
        judged ``cluster_changed``, whatever Ray's tables say of its nodes.
    :returns: dict with ``verdict`` (``trained``, ``succeeded`` for a script, ``failed`` or
        ``running``), ``cause`` (one of CAUSES, or None), ``summary`` (one line),
        ``steps`` ({logged, last, planned, resumed}) and ``evidence`` (list of
        {file, line, text} or {source, text}).
    """
    status = str(status or "").upper()
    lines = (log_text or "").splitlines()
    if planned is None:
        planned = planned_steps(log_text)
    steps = list(steps or [])
    new_steps = sorted(set(s for s in steps if s > resumed))  # validation repeats a step number
    last = max(steps) if steps else None
    record = {"steps": {"logged": len(new_steps), "last": last, "planned": planned, "resumed": resumed},
              "evidence": []}

    def done(verdict, cause, summary, evidence=()):
        record.update(verdict=verdict, cause=cause, summary=summary, evidence=list(evidence)[:2 * MAX_EVIDENCE])
        return record

    queued = _evidence(lines, log_name, re.compile(r"^MVP_GATE_(WAIT|STOPPED|TIMEOUT)="), 2, own=True)
    never_started = not any(text.startswith("MVP_PRECHECK_") for text in lines)
    if status in ("PENDING", "RUNNING", ""):
        if status == "RUNNING" and never_started and queued:
            return done("running", None, "queued, not started: %s" % queued[-1]["text"].split("=", 1)[1][:300],
                        queued)
        return done("running", None, "%s, %s so far" % (status or "unknown status", _steps_text(
            len(new_steps), planned, resumed)))
    trained = _steps_text(len(new_steps), planned, resumed)
    if status == LOST_STATUS and not (planned is not None and last is not None and last >= planned):
        return done("failed", "head_lost", "head lost: the Ray head that ran the job was lost with its job table "
                    "while the job ran%s" % ("; it %s" % trained if training else ""),
                    [{"source": "ray job", "text": message or "unknown to the Ray head that answers now"},
                     {"file": FILES["metrics"], "text": "%d step lines, last step %s" % (len(steps), last)}])
    if status == LOST_STATUS:
        status = "SUCCEEDED"  # it logged every step it planned before its head was lost
    stalled = _resume_problem(steps, resumed, planned, status)
    if stalled:
        return done("failed", "no_progress", "resumed without progress: %s" % stalled,
                    [{"file": FILES["metrics"], "text": "%d step lines, first step %s, last step %s" % (
                        len(steps), min(steps) if steps else None, last)}])
    if watchdog and watchdog.get("hang"):
        return done("failed", "hang", watchdog.get("summary") or "no progress: stopped by the watchdog",
                    [{"file": FILES["watchdog"], "text": watchdog.get("summary", "")}]
                    + [{"file": f, "text": "Python stacks"} for f in watchdog.get("stacks") or []])
    if status == "SUCCEEDED":
        if not training:
            return done("succeeded", None, "succeeded")
        short = not new_steps or (planned is not None and (last or 0) < planned) or (planned is not None
                                                                                     and planned <= resumed)
        if short:
            evidence = [{"file": FILES["metrics"], "text": "%d step lines, last step %s" % (len(steps), last)}]
            evidence += _evidence(lines, log_name, TOTAL_STEPS_RE, 2)
            return done("failed", "short_training", "Ray says SUCCEEDED but the job %s" % trained, evidence)
        return done("trained", None, trained)
    if interrupted_by:
        changes = "; ".join(str(c) for c in interrupted_by.get("changes") or []) or "its nodes"
        return done("failed", "cluster_changed", "interrupted by %s at %s to change the cluster (%s) after it %s; "
                    "the configuration is fine (a run that may restart continues from its newest complete checkpoint)" % (
                        interrupted_by.get("by"), interrupted_by.get("at"), changes, trained),
                    [{"file": FILES["interrupted_by"], "text": json.dumps(interrupted_by, sort_keys=True)},
                     {"source": "ray job", "text": message or status}])
    if status == "STOPPED" and (stopped_by or {}).get("cause") == "infeasible":
        evidence = [{"file": FILES["stopped_by"], "text": json.dumps(
            {key: stopped_by.get(key) for key in ("demand", "offers") if stopped_by.get(key) is not None},
            sort_keys=True)}] + [{"source": "ray job", "text": message or "STOPPED"}]
        return done("failed", "infeasible", "stopped by %s at %s after it %s: %s" % (
            stopped_by.get("by"), stopped_by.get("at"), trained, stopped_by.get("why") or "no ALIVE node offers what "
            "it asks for"), evidence)
    if status == "STOPPED" and (stopped_by or {}).get("cause") == "preempted":
        record["checkpoint_step"] = stopped_by.get("step")  # None: it had saved no complete checkpoint
        return done("failed", "preempted", "preempted by %s (priority %s over %s) at %s after it %s: %s" % (
            stopped_by.get("preempted_by"), stopped_by.get("preemptor_priority"), stopped_by.get("priority"),
            stopped_by.get("at"), trained, stopped_by.get("why") or "stopped for a job of a higher priority"),
            [{"file": FILES["stopped_by"], "text": json.dumps(stopped_by, sort_keys=True)},
             {"source": "ray job", "text": message or "STOPPED"}])
    if status == "STOPPED" and (stopped_by or {}).get("cause") == "node_lost":
        # The job controller saw a worker's container exit and stopped the attempt before Ray's health checks did.
        dead = dead_nodes_during(nodes, start_ms, end_ms)
        return done("failed", "node_lost", "node lost: %s while the job ran (stopped by %s at %s); it %s" % (
            stopped_by.get("why") or "a worker's container exited", stopped_by.get("by"), stopped_by.get("at"), trained),
            [{"file": FILES["stopped_by"], "text": json.dumps(stopped_by, sort_keys=True)}]
            + [{"source": "ray list nodes", "text": _node_text(n)} for n in dead]
            + [{"source": "ray job", "text": message or "STOPPED"}])
    if status == "STOPPED" or (never_started and any(GATE_STOPPED_RE.match(t) for t in lines)):
        who = ("by %s at %s%s" % (stopped_by.get("by"), stopped_by.get("at"),
                                  " (%s)" % stopped_by["why"] if stopped_by.get("why") else "") if stopped_by
               else "(ray job stop or stop.yml)")
        evidence = ([{"file": FILES["stopped_by"], "text": json.dumps(stopped_by, sort_keys=True)}] if stopped_by
                    else []) + [{"source": "ray job", "text": message or "STOPPED"}]
        if never_started and queued:
            return done("failed", "stopped", "stopped while queued %s: never started" % who, queued + evidence)
        return done("failed", "stopped", "stopped %s after it %s" % (who, trained), evidence)
    timed_out = [GATE_TIMEOUT_RE.match(t).group(1) for t in lines if GATE_TIMEOUT_RE.match(t)]
    if timed_out and never_started:
        return done("failed", "queue_timeout", "waited in the cluster's queue too long and never started: %s"
                    % timed_out[-1][:300], queued)

    # FAILED: the most specific evidence wins, in the order of LOG_PATTERNS, then Ray's tables.
    dead = dead_nodes_during(nodes, start_ms, end_ms)
    node_evidence = [{"source": "ray list nodes", "text": _node_text(n)} for n in dead]
    actor_causes = [(a, _actor_cause(a)) for a in actors or []]
    message_lines = (message or "").splitlines()
    for cause, pattern in LOG_PATTERNS:
        found = _evidence(lines, log_name, pattern) + _evidence(message_lines, "ray job message", pattern, 2)
        from_actors = [{"source": "ray list actors", "text": _actor_text(a)} for a, c in actor_causes if c == cause]
        if cause == "node_lost" and (dead or found or from_actors):
            names = ", ".join(n.get("node_ip") or "?" for n in dead) or "a node"
            return done("failed", cause, "node lost: %s died while the job ran; it %s" % (names, trained),
                        node_evidence + from_actors + found)
        if found or from_actors:
            what = {"host_oom": "host out of memory", "device_oom": "device (GPU) out of memory",
                    "collective": "collective operation timed out or aborted (NCCL/Gloo)"}[cause]
            return done("failed", cause, "%s; it %s" % (what, trained), from_actors + found + node_evidence)
    busy = _evidence(lines, log_name, BUSY_RE, 2)
    if busy and not new_steps:
        held = ", ".join(holders) if holders else "nothing the queue knows of (a job started without the gate?)"
        return done("failed", "busy", "busy: the GPUs it was admitted to were taken before verl reserved them "
                    "(active jobs: %s); the configuration is fine, the run continues when they are free" % held,
                    busy + [{"source": "ray job list", "text": "active: %s" % held}])
    exception = _last_exception(lines, log_name)
    user = _user_frames(lines, log_name, set(user_files or ()))
    if user:
        return done("failed", "user_code", "error in user code (%s); it %s" % (
            user[-1]["text"], trained), user + ([exception] if exception else []))
    platform = platform_failure(lines, log_name) or platform_failure(message_lines, "ray job message")
    if platform:
        return done("failed", "platform_unsupported", "the node's platform cannot run it: %s lacks %s (the request "
                    "may be valid on a node that has it); it %s" % (platform["layer"], platform["missing"], trained),
                    [{"source": "platform layer", "text": "layer: %s; missing: %s" % (
                        platform["layer"], platform["missing"])}] + platform["evidence"])
    hydra = _evidence(lines, log_name, HYDRA_START_RE, 2)
    if not new_steps and exception and (hydra or CONFIG_EXC_RE.match(exception["text"])):
        where = [e["text"] for e in hydra if e["text"].startswith("Error in call")]
        return done("failed", "config_rejected", "configuration rejected before the first step: %s%s"
                    % (where[0] + " " if where else "", exception["text"][:300]), hydra + [exception])
    tail = [(number, text) for number, text in enumerate(lines, 1) if text.strip() and not text.startswith("MVP_")]
    evidence = [exception] if exception else [
        {"file": log_name, "line": number, "text": text.strip()[:500]} for number, text in tail[-5:]]
    if message:
        evidence.append({"source": "ray job", "text": message[:500]})
    return done("failed", "unknown", "failed (exit code %s) for a reason not recognised; it %s" % (
        exit_code, trained), evidence + node_evidence)


def _read(path):
    """A file's text, or "" when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _read_json(path):
    """A JSON file's content, or None when it is missing or not JSON."""
    try:
        return json.loads(_read(path) or "null")
    except ValueError:
        return None


def judge_job_dir(job_dir, status, exit_code=None, message="", nodes=(), actors=(), start_ms=None, end_ms=None,
                  holders=None):
    """The verdict of the job whose directory is ``job_dir``, from its own files and Ray's tables.

    Reads ``config/job_spec.json`` (a trainer has a ``hydra_config``; its ``reward_fn_path`` is
    user code; ``resume_from.step`` is where it continued), ``logs/driver.log``, the metrics file
    the spec names (``metrics_file``) and ``logs/watchdog.json``. A spec that is missing, unreadable
    or not a JSON object is named in the summary and as the first evidence (the job is then judged
    as a trainer writing the default metrics file), so a verdict such as ``short_training`` points at it.

    :param job_dir: str, the job directory (``<shared_root>/jobs/<submission_id>``).
    :param status: str, Ray's status; the other parameters as :func:`classify`.
    :param holders: list of str or None: None takes the ``holders`` the entrypoint's own
        ``logs/verdict.json`` recorded when the trainer ended (the jobs active then).
    :returns: dict, :func:`classify`'s record.
    """
    spec, spec_problem = _read_spec(os.path.join(job_dir, FILES["job_spec"]))
    if holders is None:
        holders = (_read_json(os.path.join(job_dir, FILES["verdict"])) or {}).get("holders") or []
    metrics = spec.get("metrics_file") or os.path.join(job_dir, FILES["metrics"])
    resumed = (spec.get("resume_from") or {}).get("step") or 0
    record = classify(status, exit_code=exit_code, message=message,
                      log_text=_read(os.path.join(job_dir, FILES["driver_log"])),
                      steps=read_metrics(_read(metrics)), resumed=resumed,
                      watchdog=_read_json(os.path.join(job_dir, FILES["watchdog"])),
                      nodes=nodes, actors=actors, start_ms=start_ms, end_ms=end_ms,
                      user_files=[spec["reward_fn_path"]] if spec.get("reward_fn_path") else [],
                      training=bool(spec.get("hydra_config")) if spec else True, holders=holders,
                      stopped_by=_as_dict(_read_json(os.path.join(job_dir, FILES["stopped_by"]))),
                      interrupted_by=_as_dict(_read_json(os.path.join(job_dir, FILES["interrupted_by"]))))
    if spec_problem and record.get("verdict") != "running":
        record["summary"] = "%s (%s %s: the default metrics file %s and a trainer were assumed)" % (
            record["summary"], FILES["job_spec"], spec_problem, FILES["metrics"])
        record["evidence"].insert(0, {"file": FILES["job_spec"], "text": spec_problem})
    return record


def _as_dict(value):
    """``value`` when it is a dict, else None (a file that holds something else says nothing)."""
    return value if isinstance(value, dict) else None


def _read_spec(path):
    """(the job spec dict, '') from ``path``; ({}, why it cannot be used) when missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError as exc:
        return {}, "cannot be read (%s)" % (exc.strerror or exc)
    try:
        spec = json.loads(text)
    except ValueError as exc:
        return {}, "is not JSON (%s)" % exc
    if not isinstance(spec, dict):
        return {}, "is not a JSON object"
    return spec, ""


def one_line(record):
    """The verdict as one line for a play's output: ``trained 8 of 8 steps`` or ``FAILED [cause] ...``."""
    if not record:
        return "no verdict"
    if record.get("verdict") in ("trained", "succeeded", "running"):
        return record.get("summary") or record["verdict"]
    return "FAILED [%s] %s" % (record.get("cause"), record.get("summary"))
