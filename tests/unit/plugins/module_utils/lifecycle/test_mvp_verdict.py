"""The cause classifier (module_utils mvp_verdict) on driver output and Ray tables.

``tests/data/verdicts/*.json`` are excerpts recorded from real runs on the local cluster
(tests/data/verdicts/README.md says how each was made): each holds what the classifier reads
(Ray's status, the driver output's tail, the steps logged, Ray's node and actor rows) and the
cause a person would name; the test runs the classifier on it. The other tests build inputs
to pin each rule, good and bad.
"""
import glob
import json
import os

import pytest

import mvp_verdict

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIXTURES = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "verdicts", "*.json")))


def lines(*texts):
    return "\n".join(texts) + "\n"


@pytest.mark.parametrize("path", FIXTURES, ids=[os.path.basename(p) for p in FIXTURES])
def test_recorded_runs_get_the_cause_a_person_would_name(path):
    with open(path) as handle:
        case = json.load(handle)
    # the recorder keeps the log's tail, and the line where verl printed its planned step count
    log_text = (case.get("planned_line") or "") + "\n" + case.get("log_tail", "")
    record = mvp_verdict.classify(case["status"], exit_code=case.get("exit_code"), message=case.get("message", ""),
                                  log_text=log_text, steps=case.get("steps", []),
                                  planned=case.get("planned"), resumed=case.get("resumed", 0),
                                  watchdog=case.get("watchdog"), nodes=case.get("nodes", []),
                                  actors=case.get("actors", []), start_ms=case.get("start_ms"),
                                  end_ms=case.get("end_ms"), user_files=case.get("user_files", []))
    assert record["cause"] == case["expect"]["cause"], record
    for text in case["expect"].get("summary_has", []):
        assert text in record["summary"], record["summary"]
    if case["expect"]["cause"] is None:
        assert record["verdict"] == "trained" and record["steps"]["logged"] == record["steps"]["planned"]
    else:
        assert record["verdict"] == "failed" and record["evidence"], "a cause comes with evidence"


@pytest.mark.parametrize("printed", ["Total training steps: 8", "(TrainingWorker pid=1) Total steps: 8, num_warmup_steps: 0"])
def test_enough_steps_is_trained(printed):
    # validation logs a second line for the last step: steps are counted once
    record = mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text=printed + "\n", steps=list(range(1, 9)) + [8])
    assert record["verdict"] == "trained" and record["cause"] is None
    assert record["summary"] == "trained 8 of 8 steps"


@pytest.mark.parametrize("steps,planned", [([], 8), ([1, 2, 3], 8), ([], None), ([], -8)])
def test_succeeded_with_fewer_steps_than_planned_is_short_training(steps, planned):
    log = "Total training steps: %d\n" % planned if planned is not None else "done\n"
    record = mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text=log, steps=steps)
    assert record["verdict"] == "failed" and record["cause"] == "short_training"
    expected = "trained %d of %d steps" % (len(steps), max(planned, 0)) if planned is not None \
        else "trained %d steps" % len(steps)
    assert expected in record["summary"]


def test_resumed_job_counts_only_its_new_steps():
    record = mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text="Total training steps: 8\n",
                                  steps=[5, 6, 7, 8], resumed=4)
    assert record["verdict"] == "trained" and record["steps"]["logged"] == 4
    assert "trained 4 of 4 steps after resuming at step 4" == record["summary"]
    nothing = mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text="Total training steps: 8\n",
                                   steps=[], resumed=8)
    assert nothing["cause"] == "short_training" and "trained 0 of 0 steps" in nothing["summary"]


@pytest.mark.parametrize("status", ["SUCCEEDED", "FAILED"])
def test_a_resumed_job_that_started_over_made_no_progress(status):
    """verl#5725/#7401: a resume that restarts at step 1 is not a resume, whatever Ray says."""
    resumed, planned = 4, 8
    steps = list(range(1, planned + 1))
    record = mvp_verdict.classify(status, exit_code=0 if status == "SUCCEEDED" else 1,
                                  log_text="Total training steps: %d\n" % planned, steps=steps, resumed=resumed)
    assert record["verdict"] == "failed" and record["cause"] == "no_progress"
    assert "resumed without progress" in record["summary"]
    assert "first step was %d, the checkpoint's step + 1 is %d" % (min(steps), resumed + 1) in record["summary"]
    assert record["cause"] not in mvp_verdict.RETRYABLE_CAUSES


def test_a_resumed_job_that_logged_nothing_with_steps_left_made_no_progress():
    record = mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text="Total training steps: 8\n", steps=[], resumed=4)
    assert record["cause"] == "no_progress" and "logged no step after resuming at step 4" in record["summary"]


def test_a_resumed_job_that_failed_again_before_its_first_step_keeps_the_failure_cause():
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text="ray.exceptions.NodeDiedError: gone\n",
                                  steps=[], resumed=4)
    assert record["cause"] == "node_lost" and record["cause"] in mvp_verdict.RETRYABLE_CAUSES


def test_a_script_workload_only_needs_to_succeed():
    record = mvp_verdict.classify("SUCCEEDED", exit_code=0, log_text="ok\n", training=False)
    assert record["verdict"] == "succeeded" and record["cause"] is None


def test_stopped_is_stopped_by_a_person_unless_the_watchdog_did_it():
    assert mvp_verdict.classify("STOPPED", message="Job was intentionally stopped.")["cause"] == "stopped"
    hang = {"hang": True, "summary": "no new training step for 61 s after step 3", "stacks": ["debug/x.txt"]}
    record = mvp_verdict.classify("FAILED", exit_code=124, watchdog=hang)
    assert record["cause"] == "hang" and record["summary"].startswith("no new training step")
    assert {"file": "debug/x.txt", "text": "Python stacks"} in record["evidence"]


def test_a_node_that_died_during_the_job_is_named_with_rays_reason():
    nodes = [{"node_ip": "172.18.0.3", "node_name": "w0", "node_id": "ab" * 28, "state": "ALIVE"},
             {"node_ip": "172.18.0.4", "node_name": "w1", "node_id": "cd" * 28, "state": "DEAD",
              "end_time_ms": 2000, "state_message": "Health check failed due to missing heartbeats"},
             {"node_ip": "172.18.0.9", "node_name": "old", "node_id": "ef" * 28, "state": "DEAD",
              "end_time_ms": 500, "state_message": "Expected termination"}]
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=lines("step 3", "Traceback ...",
                                                                        "RuntimeError: Connection closed by peer"),
                                  steps=[1, 2, 3], nodes=nodes, start_ms=1000, end_ms=3000)
    assert record["cause"] == "node_lost"
    assert "172.18.0.4" in record["summary"] and "172.18.0.9" not in record["summary"]
    assert any("missing heartbeats" in e["text"] for e in record["evidence"])


def test_a_collective_error_without_a_dead_node_is_collective():
    log = lines("Traceback (most recent call last):",
                "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
                "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=ALLREDUCE)")
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log, steps=[1, 2])
    assert record["cause"] == "collective"
    assert {e["line"] for e in record["evidence"]} == {2, 3}


@pytest.mark.parametrize("text,cause", [
    ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.", "host_oom"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "device_oom"),
])
def test_memory_errors(text, cause):
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=lines("Traceback (most recent call last):", text))
    assert record["cause"] == cause and record["evidence"][0]["text"] == text


def test_host_oom_from_the_actor_table():
    actors = [{"class_name": "WorkerDict", "pid": 77, "node_ip": "172.18.0.4", "state": "DEAD",
               "death_cause": {"oom_context": {"error_message": "Memory on the node was 7.9GB / 8GB"}}}]
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text="ActorDiedError\n", actors=actors)
    assert record["cause"] == "host_oom" and "WorkerDict" in record["evidence"][0]["text"]


def test_an_actor_whose_node_died_names_node_lost_without_a_dead_node_in_the_table():
    """Ray's actor table says the node died, the node table has no DEAD node in the job's time (it was replaced):
    node_lost from the actor's evidence (this raised KeyError 'node_lost' before 2026-11-29)."""
    actors = [{"class_name": "WorkerDict", "pid": 78, "node_ip": "172.18.0.3", "state": "DEAD",
               "death_cause": {"actor_died_error_context": {"node_death_info": {"reason": "UNEXPECTED_TERMINATION"}}}}]
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text="something failed\n", actors=actors)
    assert record["cause"] == "node_lost" and "WorkerDict" in record["evidence"][0]["text"]


def test_a_traceback_through_the_reward_function_is_user_code():
    reward = "/private/user/code/rewards/mine.py"
    log = lines("Traceback (most recent call last):",
                '  File "/private/common/code/verl/verl-0.9.1/verl/workers/reward.py", line 10, in compute',
                '  File "%s", line 3, in compute_score' % reward,
                "ZeroDivisionError: division by zero")
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log, steps=[1], user_files=[reward])
    assert record["cause"] == "user_code" and "line 3" in record["summary"]
    assert record["evidence"][-1]["text"] == "ZeroDivisionError: division by zero"


def test_an_exception_before_the_first_step_is_configuration_rejected():
    log = lines("Traceback (most recent call last):",
                "ValueError: [actor] Please set at least one of 'actor.ppo_micro_batch_size' or "
                "'actor.ppo_micro_batch_size_per_gpu' if use_dynamic_bsz is not enabled.")
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log, steps=[])
    assert record["cause"] == "config_rejected" and "ppo_micro_batch_size" in record["summary"]
    # the same exception after training started is not a configuration problem
    assert mvp_verdict.classify("FAILED", exit_code=1, log_text=log, steps=[1, 2])["cause"] == "unknown"


def test_unknown_keeps_the_last_exception_and_rays_message():
    record = mvp_verdict.classify("FAILED", exit_code=3, message="Job entrypoint command failed with exit code 3",
                                  log_text=lines("x", "SystemExit: 3"), steps=[1])
    assert record["cause"] == "unknown" and "exit code 3" in record["summary"]
    assert record["evidence"][0]["text"] == "SystemExit: 3"
    assert record["evidence"][-1]["source"] == "ray job"


def test_running_jobs_have_no_cause_yet():
    record = mvp_verdict.classify("RUNNING", steps=[1, 2], log_text="Total training steps: 8\n")
    assert record["verdict"] == "running" and record["cause"] is None and "trained 2 of 8" in record["summary"]


def test_every_cause_is_in_the_vocabulary():
    records = [mvp_verdict.classify("FAILED", exit_code=1, log_text=t) for t in (
        "CUDA out of memory", "NodeDiedError", "ncclInternalError", "x")]
    assert {r["cause"] for r in records} <= set(mvp_verdict.CAUSES)


def test_read_metrics_skips_bad_lines():
    text = '{"step": 1, "data": {}}\nnot json\n{"step": true}\n{"step": 2, "data": {}}\n{"step": 3, "da'
    assert mvp_verdict.read_metrics(text) == [1, 2]


def test_judge_job_dir_reads_the_jobs_own_files(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "logs").mkdir()
    reward = "/private/user/code/r.py"
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps(
        {"hydra_config": "ppo_trainer", "reward_fn_path": reward, "resume_from": {"step": 2},
         "metrics_file": str(tmp_path / "logs" / "metrics.jsonl")}))
    (tmp_path / "logs" / "metrics.jsonl").write_text('{"step": 3, "data": {}}\n')
    (tmp_path / "logs" / "driver.log").write_text(lines("Total training steps: 6", "Traceback (most recent call last):",
                                                        '  File "%s", line 9, in f' % reward, "KeyError: 'x'"))
    record = mvp_verdict.judge_job_dir(str(tmp_path), "FAILED", exit_code=1)
    assert record["cause"] == "user_code"
    assert record["steps"] == {"logged": 1, "last": 3, "planned": 6, "resumed": 2}


def test_one_line():
    assert mvp_verdict.one_line(None) == "no verdict"
    assert mvp_verdict.one_line({"verdict": "trained", "summary": "trained 8 of 8 steps"}) == "trained 8 of 8 steps"
    assert mvp_verdict.one_line({"verdict": "failed", "cause": "hang", "summary": "s"}) == "FAILED [hang] s"


def test_hydras_failed_instantiate_before_the_first_step_is_configuration_rejected():
    log = lines("Error executing job with overrides: ['model.path=/private/common/models/x']",
                "Error in call to target 'verl.workers.config.model.HFModelConfig':",
                'ValueError("Couldn\'t instantiate the backend tokenizer")',
                "full_key: model", "MVP_EXIT_CODE=1")
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log, steps=[])
    assert record["cause"] == "config_rejected"
    assert "HFModelConfig" in record["summary"] and "backend tokenizer" in record["summary"]
    assert [e["line"] for e in record["evidence"]] == [1, 2, 3]


def test_the_projects_own_lines_are_never_evidence():
    log = lines("step 3 done", "MVP_VERDICT=FAILED [node_lost] node lost: 172.18.0.2 died", "MVP_EXIT_CODE=1")
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=log, steps=[1, 2, 3])
    assert record["cause"] == "unknown"
    assert all(not e.get("text", "").startswith("MVP_") for e in record["evidence"])


# ---- hang_bound: the progress watchdog's bound (mvp_entry.py runs the watchdog) ----

def test_bound_before_the_first_step_is_the_first_step_allowance():
    bound, how = mvp_verdict.hang_bound(0, [], first_step_s=600, floor_s=60, factor=5)
    assert bound == 600 and "first-step" in how


@pytest.mark.parametrize("first,floor", [(40, 60), (600, 60)])
def test_bound_after_one_step_is_the_larger_of_floor_and_first_allowance(first, floor):
    bound, _ = mvp_verdict.hang_bound(1, [], first_step_s=first, floor_s=floor, factor=5)
    assert bound == max(first, floor)


@pytest.mark.parametrize("durations,floor,factor", [([2, 2, 3, 2], 10, 5), ([30, 40, 50], 60, 3), ([1, 1, 100], 5, 4)])
def test_bound_is_a_multiple_of_the_median_step_with_a_floor(durations, floor, factor):
    ordered = sorted(durations)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
    bound, how = mvp_verdict.hang_bound(len(durations) + 1, durations, first_step_s=900, floor_s=floor,
                                        factor=factor)
    assert bound == max(floor, factor * median)
    assert "median" in how


@pytest.mark.parametrize("content, why", [
    (None, "cannot be read"), ("{not json", "is not JSON"), ("[1, 2]", "is not a JSON object")])
def test_a_spec_that_cannot_be_used_is_named_in_the_summary_and_first_in_the_evidence(tmp_path, content, why):
    (tmp_path / "config").mkdir()
    (tmp_path / "logs").mkdir()
    spec = tmp_path / "config" / "job_spec.json"
    if content is not None:
        spec.write_text(content)
    (tmp_path / "logs" / "driver.log").write_text(lines("Total training steps: 4"))
    record = mvp_verdict.judge_job_dir(str(tmp_path), "SUCCEEDED", exit_code=0)
    name = os.path.relpath(str(spec), str(tmp_path))
    assert record["cause"] == "short_training"  # no metrics file where the default says
    assert "(%s %s" % (name, why) in record["summary"]
    assert record["evidence"][0]["file"] == name and record["evidence"][0]["text"].startswith(why)
    assert mvp_verdict.judge_job_dir(str(tmp_path), "RUNNING")["evidence"] == []


def test_a_readable_spec_adds_nothing_to_the_verdict(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "logs").mkdir()
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps({"hydra_config": "sft_trainer"}))
    (tmp_path / "logs" / "metrics.jsonl").write_text("".join('{"step": %d, "data": {}}\n' % s for s in (1, 2)))
    (tmp_path / "logs" / "driver.log").write_text(lines("Total training steps: 2"))
    record = mvp_verdict.judge_job_dir(str(tmp_path), "SUCCEEDED", exit_code=0)
    assert record["verdict"] == "trained" and "job_spec" not in record["summary"]
    assert all(e.get("file") != "config/job_spec.json" for e in record["evidence"])


# ---- the queue (mvp_gate.py) and a busy cluster ----

BUSY = "ValueError: Total available GPUs 0 is less than total desired GPUs 1"
WAIT = "MVP_GATE_WAIT=queued since 2026-11-25T16:47:58Z, position 3 of 3, shape 2 nodes x 1 GPU (10 CPUs each); waits for its turn"
GO = "MVP_GATE_GO=shape 1 node x 1 GPU (3 CPUs each) admitted after 1 s"
PRECHECK = "MVP_PRECHECK_VERL_FILE=/private/common/code/verl/verl-0.9.1/verl/__init__.py"


def test_verls_resource_refusal_before_the_first_step_is_busy_and_restartable_naming_the_holders():
    holders = ["sft-1 (RUNNING)", "grpo-2 (RUNNING)"]
    record = mvp_verdict.classify("FAILED", exit_code=1, log_text=lines(GO, PRECHECK, "Traceback", BUSY),
                                  holders=holders)
    assert record["cause"] == "busy" and "busy" in mvp_verdict.RETRYABLE_CAUSES
    assert all(h in record["summary"] for h in holders)
    assert record["evidence"][0]["text"] == BUSY
    # Without the message it is a configuration error, as before; after a step it is not busy either.
    assert mvp_verdict.classify("FAILED", exit_code=1, log_text=lines(PRECHECK, "Traceback",
                                "ValueError: bad batch"))["cause"] == "config_rejected"
    assert mvp_verdict.classify("FAILED", exit_code=1, log_text=lines(PRECHECK, BUSY), steps=[1])["cause"] != "busy"


def test_a_queued_job_is_running_not_started_then_stopped_or_timed_out_never_started():
    running = mvp_verdict.classify("RUNNING", log_text=lines(WAIT))
    assert running["verdict"] == "running" and running["summary"].startswith("queued, not started: queued since")
    stopped = mvp_verdict.classify("STOPPED", log_text=lines(WAIT, "MVP_GATE_STOPPED=signal 15 after 40 s in the "
                                                             "queue: the program never started"))
    assert (stopped["cause"], stopped["summary"]) == ("stopped", "stopped while queued (ray job stop or stop.yml): "
                                                                 "never started")
    assert [e["text"].split("=")[0] for e in stopped["evidence"][:2]] == ["MVP_GATE_WAIT", "MVP_GATE_STOPPED"]
    # Stopped after the program started: the usual summary.
    late = mvp_verdict.classify("STOPPED", log_text=lines(WAIT, GO, PRECHECK), steps=[1, 2])
    assert late["summary"].startswith("stopped (ray job stop or stop.yml) after it trained 2 steps")
    why = "the ALIVE workers could not hold the shape for 21 s (unfit wait 20 s): workers that can hold ..."
    timed = mvp_verdict.classify("FAILED", exit_code=4, log_text=lines(WAIT, "MVP_GATE_TIMEOUT=%s: the program "
                                                                       "never started" % why))
    assert timed["cause"] == "queue_timeout" and why in timed["summary"] and "queue_timeout" not in mvp_verdict.RETRYABLE_CAUSES


def test_a_job_stopped_at_a_deadline_nothing_could_meet_is_infeasible_with_the_demand_and_offers():
    note = {"by": "the job controller c1", "at": "2026-11-27T15:00:00Z", "cause": "infeasible",
            "why": "Ray job j asked for placement groups that stayed PENDING longer than 180 s",
            "demand": ['1 x {"CPU": 3.0, "cpu": 1.0} (STRICT_PACK)'], "offers": {"10.0.0.2": {"CPU": 8.0}}}
    record = mvp_verdict.classify("STOPPED", log_text=lines(PRECHECK), stopped_by=note)
    assert (record["verdict"], record["cause"]) == ("failed", "infeasible")
    assert note["why"] in record["summary"] and "by the job controller c1 at 2026-11-27T15:00:00Z" in record["summary"]
    assert json.loads(record["evidence"][0]["text"]) == {"demand": note["demand"], "offers": note["offers"]}
    assert "infeasible" in mvp_verdict.CAUSES and "infeasible" not in mvp_verdict.RETRYABLE_CAUSES
    # A stop without that cause stays a stop, and says why.
    plain = mvp_verdict.classify("STOPPED", log_text=lines(PRECHECK), stopped_by=dict(note, cause=None))
    assert plain["cause"] == "stopped" and "(%s)" % note["why"] in plain["summary"]


def test_a_job_the_controller_preempted_is_preempted_naming_the_preemptor_step_and_checkpoint():
    note = {"by": "the job controller c1", "at": "2026-11-28T03:00:00Z", "cause": "preempted",
            "preempted_by": "grpo-high-1", "preemptor_priority": 100, "priority": -100, "step": 40,
            "checkpoint": "/private/jobs/sft-low-1/checkpoints/global_step_40",
            "why": "preempted for grpo-high-1 right after its checkpoint of step 40 (waited 3.2 s for it)"}
    record = mvp_verdict.classify("STOPPED", log_text=lines(PRECHECK), stopped_by=note)
    assert (record["verdict"], record["cause"]) == ("failed", "preempted")
    assert "preempted by grpo-high-1 (priority 100 over -100) at 2026-11-28T03:00:00Z" in record["summary"]
    assert note["why"] in record["summary"]
    assert json.loads(record["evidence"][0]["text"])["checkpoint"] == note["checkpoint"]
    # Stopped by a person (no cause in the note): a stop, not a preemption.
    assert mvp_verdict.classify("STOPPED", log_text=lines(PRECHECK), stopped_by=dict(note, cause=None))["cause"] == "stopped"


def test_judge_job_dir_takes_the_holders_the_entrypoint_recorded(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps({"hydra_config": "ppo_trainer"}))
    (tmp_path / "logs" / "driver.log").write_text(lines(GO, PRECHECK, BUSY))
    (tmp_path / "logs" / "verdict.json").write_text(json.dumps({"holders": ["other-1 (RUNNING)"]}))
    record = mvp_verdict.judge_job_dir(str(tmp_path), "FAILED", exit_code=1)
    assert record["cause"] == "busy" and "other-1 (RUNNING)" in record["summary"]
    assert "nobody (RUNNING)" in mvp_verdict.judge_job_dir(str(tmp_path), "FAILED", exit_code=1,
                                                         holders=["nobody (RUNNING)"])["summary"]


def test_a_job_stopped_by_a_cluster_play_names_the_play(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps({"hydra_config": "ppo_trainer"}))
    (tmp_path / "logs" / "driver.log").write_text(lines(GO, PRECHECK, "step 1"))
    by = {"by": "down.yml (mvp_running_jobs=stop)", "at": "2026-11-25T18:00:00Z", "status_before": "RUNNING"}
    assert mvp_verdict.judge_job_dir(str(tmp_path), "STOPPED")["summary"].startswith("stopped (ray job stop")
    (tmp_path / "logs" / "stopped_by.json").write_text(json.dumps(by))
    record = mvp_verdict.judge_job_dir(str(tmp_path), "STOPPED")
    assert record["cause"] == "stopped"
    assert record["summary"].startswith("stopped by %s at %s after it" % (by["by"], by["at"]))
    assert record["evidence"][0] == {"file": "logs/stopped_by.json", "text": json.dumps(by, sort_keys=True)}
    (tmp_path / "logs" / "stopped_by.json").write_text("[1, 2]")  # not a record: a person stopped it, as far as we know
    assert mvp_verdict.judge_job_dir(str(tmp_path), "STOPPED")["summary"].startswith("stopped (ray job stop")


def test_a_job_a_cluster_play_interrupted_is_cluster_changed_and_restartable(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "job_spec.json").write_text(json.dumps({"hydra_config": "sft_trainer_engine"}))
    (tmp_path / "logs" / "driver.log").write_text(lines(GO, PRECHECK, "step 1"))
    (tmp_path / "logs" / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "data": {"train/loss": 1.0}})
                                                             + "\n" for s in (1, 2, 3)))
    by = {"by": "site.yml (mvp_running_jobs=restart)", "at": "2026-11-25T23:40:00Z", "status_before": "RUNNING",
          "changes": ["mvp-ray-worker-0: restart Ray (its settings change)"], "play_id": "p1", "done_file": "/x/p1.json"}
    (tmp_path / "logs" / "interrupted_by.json").write_text(json.dumps(by))
    # A dead node in Ray's tables (its Ray was restarted by the play) does not make it node_lost.
    dead = [{"node_ip": "172.18.0.3", "state": "DEAD", "end_time_ms": 5000, "state_message": "restarted"}]
    for status in ("STOPPED", "FAILED"):
        record = mvp_verdict.judge_job_dir(str(tmp_path), status, exit_code=1, nodes=dead, start_ms=1000, end_ms=9000)
        assert record["cause"] == "cluster_changed", record
        assert by["by"] in record["summary"] and by["changes"][0] in record["summary"]
        assert "trained 3 steps" in record["summary"] or "3 steps" in record["summary"]
        assert record["evidence"][0] == {"file": "logs/interrupted_by.json", "text": json.dumps(by, sort_keys=True)}
    assert "cluster_changed" in mvp_verdict.RETRYABLE_CAUSES and "cluster_changed" in mvp_verdict.CAUSES
    # A job that trained to its end before the play stopped anything is judged on its training.
    (tmp_path / "logs" / "driver.log").write_text(lines(GO, PRECHECK, "Total steps: 3, num_warmup_steps: 0"))
    assert mvp_verdict.judge_job_dir(str(tmp_path), "SUCCEEDED", exit_code=0)["verdict"] == "trained"


def test_a_job_lost_with_its_head_is_head_lost_and_restartable_unless_it_logged_every_planned_step():
    planned = 8
    log = lines(GO, PRECHECK, "Total steps: %d, num_warmup_steps: 0" % planned)
    lost = mvp_verdict.classify(mvp_verdict.LOST_STATUS, log_text=log, steps=[1, 2, 3])
    assert (lost["verdict"], lost["cause"]) == ("failed", "head_lost") and lost["steps"]["last"] == 3
    assert "head lost" in lost["summary"] and "head_lost" in mvp_verdict.RETRYABLE_CAUSES
    done = mvp_verdict.classify(mvp_verdict.LOST_STATUS, log_text=log, steps=list(range(1, planned + 1)))
    assert done["verdict"] == "trained"
    script = mvp_verdict.classify(mvp_verdict.LOST_STATUS, log_text=lines(PRECHECK), training=False)
    assert script["cause"] == "head_lost" and "steps" not in script["summary"]


def test_the_shipped_restart_causes_are_the_retryable_causes():
    """job_controller_restart_causes (roles/job_controller/defaults/main.yml) names the verdict rules' one list
    (RETRYABLE_CAUSES) instead of repeating it: a cause added there restarts without a second edit."""
    import yaml
    from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_restart
    with open(os.path.join(ROOT, "roles", "job_controller", "defaults", "main.yml"), encoding="utf-8") as handle:
        shipped = yaml.safe_load(handle)["job_controller_restart_causes"]
    assert shipped == mvp_restart.ALL_RETRYABLE
    assert mvp_restart.restart_causes(shipped) == tuple(mvp_verdict.RETRYABLE_CAUSES)
    assert set(mvp_verdict.RETRYABLE_CAUSES) <= set(mvp_verdict.CAUSES)


def test_a_job_the_controller_stopped_when_its_workers_container_exited_is_node_lost_and_restartable():
    note = {"by": "the job controller c1", "at": "2026-11-28T21:00:02Z", "cause": "node_lost",
            "why": "the worker container(s) mvp-ray-worker-1 exited (exit code 137, finished at "
                   "2026-11-28T21:00:00Z); Ray still listed the node(s) 10.0.0.3 it ran on ALIVE",
            "nodes": [{"node_id": "wrk2", "node_ip": "10.0.0.3"}]}
    record = mvp_verdict.classify("STOPPED", log_text=lines(PRECHECK), stopped_by=note)
    assert (record["verdict"], record["cause"]) == ("failed", "node_lost")
    assert note["why"] in record["summary"] and "by the job controller c1 at 2026-11-28T21:00:02Z" in record["summary"]
    assert json.loads(record["evidence"][0]["text"])["nodes"] == note["nodes"]
    assert "node_lost" in mvp_verdict.RETRYABLE_CAUSES
    # A stop by a person stays a stop.
    assert mvp_verdict.classify("STOPPED", log_text=lines(PRECHECK), stopped_by=dict(note, cause=None))["cause"] == "stopped"
