"""The job controller's control flow (plugins/module_utils/lifecycle/mvp_controller.py) against a fake Ray dashboard.

The playbooks it runs (record, heal, submit) are stand-ins here that do to the job directories what the real
ones do (tests/reliability/resume.py runs the real ones on the local cluster); what is checked is the
controller's own logic: which attempt it judges, what it writes before it acts, that a decided attempt is
started exactly once across a restart of the controller, that a lost head is healed and its attempt judged
from its job directory.
"""
import json
import os
import time

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_controller, mvp_run_state

RUN = "sft-20261127-120000-abcdef"


def write(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle)


def read(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


class Playbooks(object):
    """Stand-ins for the record, heal and submit playbooks: they write what the real ones write."""

    def __init__(self, config, fake, verdicts):
        self.config, self.fake, self.verdicts, self.calls = config, fake, verdicts, []
        self.heal_fixes_head = True

    def __call__(self, playbook, extra_vars, ident):
        self.calls.append((os.path.basename(playbook), dict(extra_vars)))
        name = os.path.basename(playbook)
        if name == "record.yml" and extra_vars.get("submit_job_record_ledger_only"):
            pass  # only the run's ledger onto its MLflow run: no file of the job directory is written
        elif name == "record.yml":
            sid = extra_vars["submit_job_collect_id"]
            status = "LOST" if extra_vars["submit_job_lost_with_head"] else self.fake.status_of(sid)
            write(mvp_controller.attempt_file(self.config, sid, "status"), dict(self.verdicts[sid], status=status))
        elif name == "cluster.yml":
            if self.heal_fixes_head:
                self.fake.unreachable = None
        elif name == "submit.yml":
            request = extra_vars["submit_job_restart"]["request"]
            info = extra_vars["submit_job_restart"]["info"]
            make_attempt(self.config, request["submission_id"], info["run"], info["attempt"],
                         dict(request=request, restart=info, max_restarts=info["max_restarts"],
                              resume_from={"submission_id": request.get("resume_from")}))
            self.fake.add_job(request["submission_id"], "RUNNING", job_id="02000000")
        return {"rc": 0, "status": "successful", "hosts": {}, "failed_tasks": []}

    def names(self):
        return [name for name, _ in self.calls]


def make_attempt(config, sid, run, attempt, spec):
    write(mvp_controller.attempt_file(config, sid, "job_spec"), dict(spec, submission_id=sid))
    write(mvp_controller.attempt_file(config, sid, "controller"), {"run": run, "attempt": attempt})


@pytest.fixture(name="config")
def fixture_config(tmp_path):
    shared = tmp_path / "shared"
    (shared / "jobs").mkdir(parents=True)
    return mvp_controller.load_config(write_config(tmp_path, {
        "name": "ctl-test", "inventory": ["/inv"], "project_dir": str(tmp_path), "shared_root": "/private",
        "shared_dir": str(shared), "head": {"address": "10.0.0.1"}, "dashboard_port": 8265,
        "state_dir": str(tmp_path / "state"), "expect_workers": 2, "heal_timeout_s": 60, "heal_delay_s": 0,
        "env": {"MVP_INTERNAL_TOKEN": "s3cret"}}))


def write_config(tmp_path, value):
    path = str(tmp_path / "controller.json")
    write(path, value)
    return path


def first_attempt(config, fake, status="RUNNING", max_restarts=1):
    make_attempt(config, RUN, RUN, 0, {"request": {"workload": "sft", "submission_id": RUN},
                                       "max_restarts": max_restarts, "resume_from": None, "restart": None})
    fake.add_job(RUN, status, job_id="01000000")


def controller(config, playbooks, clock=time.time):
    return mvp_controller.Controller(config, playbooks, say=lambda line: None, clock=clock)


def test_a_handed_over_run_that_trained_ends_with_its_verdict(config, fake_ray):
    first_attempt(config, fake_ray, "SUCCEEDED")
    verdict = {"verdict": "trained", "cause": None, "summary": "trained 8 of 8 steps", "steps": {"last": 8}}
    playbooks = Playbooks(config, fake_ray, {RUN: verdict})
    ctl = controller(config, playbooks)
    assert ctl.tick() == [RUN]
    end = read(mvp_controller.attempt_file(config, RUN, "run_end"))
    assert (end["state"], end["trained"], end["attempts"]) == ("ended", True, [RUN])
    assert end["verdict"] == dict(verdict, status="SUCCEEDED")
    assert playbooks.calls == [("record.yml", {"submit_job_collect_id": RUN, "submit_job_lost_with_head": False})]
    # Ended: the next pass follows nothing and runs nothing.
    assert ctl.tick() == [] and len(playbooks.calls) == 1
    beat = read(os.path.join(config["shared_dir"], "controller", "heartbeat.json"))
    assert beat["runs"] == [] and beat["name"] == "ctl-test"


def test_running_attempts_are_only_looked_at_with_two_requests_per_pass_for_all(config, fake_ray):
    first_attempt(config, fake_ray, "RUNNING")
    other = RUN.replace("sft", "grpo")
    make_attempt(config, other, other, 0, {"request": {}, "max_restarts": 0})
    fake_ray.add_job(other, "RUNNING", job_id="03000000")
    playbooks = Playbooks(config, fake_ray, {})
    ctl = controller(config, playbooks)
    assert ctl.tick() == sorted([RUN, other]) and playbooks.calls == []
    # The job list and the placement groups, once per pass for every run together; and once a minute the node list
    # for the cluster's capacity record.
    assert ctl.requests == 3
    assert ctl.tick() and ctl.requests == 3 + 2


def test_a_lost_node_continues_as_the_next_attempt_decided_before_it_starts(config, fake_ray):
    first_attempt(config, fake_ray, "FAILED", max_restarts=1)
    lost = {"verdict": "failed", "cause": "node_lost", "summary": "node 10.0.0.3 lost", "steps": {"last": 4}}
    playbooks = Playbooks(config, fake_ray, {RUN: lost})
    ctl = controller(config, playbooks)
    ctl.tick()
    link = read(mvp_controller.attempt_file(config, RUN, "restart"))
    assert (link["next"], link["cause"], link["attempt"]) == (RUN + "-r1", "node_lost", 0)
    # Both workers are ALIVE: nothing to heal; the next attempt continues from the attempt that trained.
    assert playbooks.names() == ["record.yml", "submit.yml"]
    started = playbooks.calls[-1][1]
    assert started["submit_job_wait"] is False
    assert started["submit_job_restart"]["request"]["submission_id"] == RUN + "-r1"
    assert started["submit_job_restart"]["request"]["resume_from"] == RUN
    assert mvp_controller.run_state(config, RUN)["attempts"] == [RUN, RUN + "-r1"]
    phases = read(mvp_controller.attempt_file(config, RUN, "continued"))
    assert phases["next"] == RUN + "-r1" and phases["heal_s"] >= 0 and phases["start_s"] >= 0
    fake_ray.jobs[RUN + "-r1"]["status"] = type(fake_ray.jobs[RUN]["status"])("SUCCEEDED")
    playbooks.verdicts[RUN + "-r1"] = {"verdict": "trained", "cause": None, "summary": "ok", "steps": {"last": 8}}
    ctl.tick()
    end = read(mvp_controller.attempt_file(config, RUN, "run_end"))
    assert (end["trained"], end["attempts"]) == (True, [RUN, RUN + "-r1"])


def test_a_restarted_controller_starts_a_decided_attempt_exactly_once(config, fake_ray):
    first_attempt(config, fake_ray, "FAILED", max_restarts=2)
    lost = {"verdict": "failed", "cause": "node_lost", "summary": "lost", "steps": {"last": 4}}
    playbooks = Playbooks(config, fake_ray, {RUN: lost})
    write(mvp_controller.attempt_file(config, RUN, "status"), dict(lost, status="FAILED"))
    # The controller that decided was killed between the decision and the start.
    write(mvp_controller.attempt_file(config, RUN, "restart"), {"next": RUN + "-r1", "cause": "node_lost"})
    ctl = controller(config, playbooks)
    ctl.tick()
    ctl.tick()
    controller(config, playbooks).tick()
    assert playbooks.names() == ["submit.yml"]
    assert mvp_controller.run_state(config, RUN)["current"] == RUN + "-r1"


def test_a_heal_that_does_not_succeed_within_its_bound_stops_the_run_saying_so(config, fake_ray):
    first_attempt(config, fake_ray, "FAILED", max_restarts=1)
    lost = {"verdict": "failed", "cause": "node_lost", "summary": "lost", "steps": {"last": 4}}
    fake_ray.nodes = fake_ray.nodes[:2]  # one worker left of the two the cluster has
    config["heal_timeout_s"] = 1  # each heal retries the playbook for this many (real) seconds
    playbooks = Playbooks(config, fake_ray, {RUN: lost})
    failing = {"rc": 2, "status": "failed", "hosts": {}, "failed_tasks": [
        {"host": "w1", "task": "Preflight | Check", "msg": "unreachable", "unreachable": True}]}

    def run(playbook, extra_vars, ident):
        if playbook.endswith("cluster.yml"):
            playbooks.calls.append(("cluster.yml", {}))
            return failing
        return playbooks(playbook, extra_vars, ident)
    later = [time.time()]
    ctl = controller(config, run, clock=lambda: later[0])
    ctl.tick()
    assert "cluster.yml" in playbooks.names() and "submit.yml" not in playbooks.names()
    assert not os.path.exists(mvp_controller.attempt_file(config, RUN, "run_end"))
    later[0] += config["heal_timeout_s"] + 1
    ctl.tick()
    end = read(mvp_controller.attempt_file(config, RUN, "run_end"))
    assert end["state"] == "stopped" and "could not be healed within 1 s" in end["why"]
    assert "submit.yml" not in playbooks.names()


def test_a_request_cause_ends_the_run_without_a_restart(config, fake_ray):
    first_attempt(config, fake_ray, "FAILED", max_restarts=2)
    bad = {"verdict": "failed", "cause": "config_rejected", "summary": "Could not override", "steps": {}}
    playbooks = Playbooks(config, fake_ray, {RUN: bad})
    controller(config, playbooks).tick()
    end = read(mvp_controller.attempt_file(config, RUN, "run_end"))
    assert (end["state"], end["trained"]) == ("ended", False) and "config_rejected" in end["why"]
    assert not os.path.exists(mvp_controller.attempt_file(config, RUN, "restart"))
    assert playbooks.names() == ["record.yml"]


def test_a_lost_head_is_healed_then_its_attempt_judged_from_the_job_directory(config, fake_ray):
    first_attempt(config, fake_ray, "RUNNING", max_restarts=1)
    lost = {"verdict": "failed", "cause": "head_lost", "summary": "head lost", "steps": {"last": 6}}
    playbooks = Playbooks(config, fake_ray, {RUN: lost})
    fake_ray.unreachable = ConnectionRefusedError(111, "Connection refused")
    # The attempt was handed over a moment ago; the head that ran it was replaced since: judged at once.
    ctl = controller(config, playbooks)
    ctl.tick()
    assert playbooks.names() == ["cluster.yml"]
    # The new head does not know the attempt: judged from its job directory (LOST, head_lost), then continued.
    del fake_ray.jobs[RUN]
    ctl.tick()
    assert playbooks.calls[1] == ("record.yml", {"submit_job_collect_id": RUN, "submit_job_lost_with_head": True})
    assert playbooks.names()[2:] == ["submit.yml"]


def test_an_attempt_handed_over_a_moment_ago_is_not_judged_before_ray_knows_it(config, fake_ray):
    first_attempt(config, fake_ray)
    del fake_ray.jobs[RUN]
    playbooks = Playbooks(config, fake_ray, {})
    controller(config, playbooks).tick()
    assert playbooks.calls == []
    later = time.time() + mvp_controller.HANDOFF_GRACE_S + 1
    playbooks.verdicts[RUN] = {"verdict": "failed", "cause": "head_lost", "summary": "lost", "steps": {}}
    controller(config, playbooks, clock=lambda: later).tick()
    assert playbooks.calls[0] == ("record.yml", {"submit_job_collect_id": RUN, "submit_job_lost_with_head": True})


@pytest.mark.parametrize("resources", [{"worker_node": 1, "gpu_node": 1}, {"worker_node": 1}])
def test_an_attempt_pending_past_its_deadline_is_stopped_with_a_note(config, fake_ray, resources):
    """The one PENDING deadline of a followed run (the submitting play sets none): the note names what the job spec
    asked for and what the ALIVE nodes offer; infeasible only when no node could ever hold the entrypoint."""
    first_attempt(config, fake_ray, "PENDING")
    spec = read(mvp_controller.attempt_file(config, RUN, "job_spec"))
    write(mvp_controller.attempt_file(config, RUN, "job_spec"),
          dict(spec, entrypoint_resources=resources, entrypoint_num_cpus=1))
    timeout = config["pending_timeout_s"]
    fake_ray.jobs[RUN]["start_time"] = (time.time() - timeout - 5) * 1000
    controller(config, Playbooks(config, fake_ray, {})).tick()
    assert fake_ray.called("stop_job") == [RUN]
    note = read(mvp_controller.attempt_file(config, RUN, "stopped_by"))
    assert note["by"] == "the job controller ctl-test"
    assert "Ray job %s still PENDING after %ds: no ALIVE node offers entrypoint_resources=%s" % (
        RUN, timeout, json.dumps(resources, sort_keys=True)) in note["why"]
    assert "The job was stopped by the job controller ctl-test" in note["why"]
    assert json.loads(note["demand"][0]) == dict(resources, CPU=1)
    alive = [n for n in fake_ray.nodes if n["state"] == "ALIVE"]
    offered = any(all(n["resources_total"].get(k, 0) >= v for k, v in resources.items()) for n in alive)
    assert note.get("cause") == (None if offered else "infeasible")


def test_an_attempt_pending_within_its_deadline_is_left_alone(config, fake_ray):
    first_attempt(config, fake_ray, "PENDING")
    fake_ray.jobs[RUN]["start_time"] = (time.time() - config["pending_timeout_s"] + 30) * 1000
    controller(config, Playbooks(config, fake_ray, {})).tick()
    assert fake_ray.called("stop_job") == []
    assert not os.path.exists(mvp_controller.attempt_file(config, RUN, "stopped_by"))


def test_a_running_attempt_without_a_placement_file_gets_one(config, fake_ray):
    """An attempt the controller starts is submitted without the wait for placement: it writes debug/placement.json
    itself (once), where the placed snapshot and the fault tests read the driver's node."""
    first_attempt(config, fake_ray, "RUNNING")
    driver = next(n for n in fake_ray.nodes if n["state"] == "ALIVE" and n["resources_total"].get("worker_node"))
    fake_ray.jobs[RUN]["driver_node_id"] = driver["node_id"]
    ctl = controller(config, Playbooks(config, fake_ray, {}))
    ctl.tick()
    where = read(mvp_controller.attempt_file(config, RUN, "placement"))
    assert (where["submission_id"], where["driver_node_ip"]) == (RUN, driver["node_ip"])
    assert where["worker_ips"] == sorted(n["node_ip"] for n in fake_ray.nodes
                                         if n["state"] == "ALIVE" and n["resources_total"].get("worker_node"))
    requests = ctl.requests
    ctl.tick()
    assert ctl.requests - requests == 2  # written once: the next pass reads the job list and the groups only


def test_a_placement_group_no_node_can_hold_is_stopped_at_its_deadline_as_infeasible(config, fake_ray):
    first_attempt(config, fake_ray, "RUNNING")
    bundle = {"CPU": 3.0, "cpu": 1.0}  # what verl 0.8.0 asks for on the CPU platform: no node has "cpu"
    fake_ray.placement_groups = [{
        "placement_group_id": "pg1", "name": "verl_pool", "creator_job_id": "01000000", "state": "PENDING",
        "strategy": "STRICT_PACK", "bundles": [{"bundle_id": 0, "unit_resources": bundle}],
        "stats": {"scheduling_state": "INFEASIBLE", "creation_request_received_ns": (time.time() - 600) * 1e9}}]
    controller(config, Playbooks(config, fake_ray, {})).tick()
    assert fake_ray.called("stop_job") == [RUN]
    note = read(mvp_controller.attempt_file(config, RUN, "stopped_by"))
    assert note["cause"] == "infeasible" and "placement-group deadline" in note["why"]
    assert note["demand"] == ['1 x {"CPU": 3.0, "cpu": 1.0} (STRICT_PACK)']
    alive = [n for n in fake_ray.nodes if n["state"] == "ALIVE"]
    assert sorted(note["offers"]) == sorted(n["node_ip"] for n in alive)


def test_only_runs_handed_over_are_followed(config, fake_ray):
    old = os.path.join(config["shared_dir"], "jobs", "old-job")
    os.makedirs(os.path.join(old, "config"))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    first_attempt(config, fake_ray)
    make_attempt(config, RUN + "-r1", RUN, 1, {})
    assert mvp_controller.discover(config, {}) == [RUN]


def test_a_run_ended_by_an_older_version_is_read_under_its_old_name_and_not_followed(config, fake_ray):
    """Versions before the rename wrote the run's end as logs/supervisor.json; such runs stay on the shared storage."""
    first_attempt(config, fake_ray, "SUCCEEDED")
    old_end = {"run": RUN, "state": "ended", "trained": True, "why": "old", "attempts": [RUN]}
    write(os.path.join(config["shared_dir"], "jobs", RUN, "logs", "supervisor.json"), old_end)
    assert mvp_controller.discover(config, {}) == []
    assert mvp_controller.run_state(config, RUN)["ended"] == old_end
    playbooks = Playbooks(config, fake_ray, {})
    assert controller(config, playbooks).tick() == [] and playbooks.calls == []
    assert not os.path.exists(os.path.join(config["shared_dir"], "jobs", RUN, "logs", "run_end.json"))
    new_end = dict(old_end, why="new")
    write(os.path.join(config["shared_dir"], "jobs", RUN, "logs", "run_end.json"), new_end)
    assert mvp_controller.run_state(config, RUN)["ended"] == new_end


def test_playbooks_get_the_inventorys_host_key_checking_and_no_inherited_ansible_variables(config):
    env = mvp_controller.runner_env(config, "/opt/venv/bin/python")
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert env["ANSIBLE_CONFIG"] == os.path.join(config["project_dir"], "ansible.cfg")
    assert env["MVP_INTERNAL_TOKEN"] == "s3cret" and env["PATH"].startswith("/opt/venv/bin" + os.pathsep)
    environ = {"ANSIBLE_STDOUT_CALLBACK": "awx_display", "ANSIBLE_CALLBACK_PLUGINS": "/x", "RUNNER_OMIT_EVENTS": "1",
               "ANSIBLE_HOST_KEY_CHECKING": "False", "HOME": "/root"}
    assert mvp_controller.clean_environ(environ) == {"HOME": "/root"}


def test_a_configuration_without_a_required_key_names_it(tmp_path):
    with pytest.raises(mvp_controller.ConfigError, match="lacks head"):
        mvp_controller.load_config(write_config(tmp_path, {
            "name": "x", "inventory": [], "project_dir": "/", "shared_root": "/private", "shared_dir": "/s",
            "dashboard_port": 1, "state_dir": "/t"}))
    assert mvp_controller.host_path({"shared_root": "/private", "shared_dir": "/srv/p"},
                                    "/private/jobs/a/logs/x.json") == "/srv/p/jobs/a/logs/x.json"
    with pytest.raises(ValueError):
        mvp_controller.host_path({"shared_root": "/private", "shared_dir": "/srv/p"}, "/etc/passwd")


def test_an_attempt_stopped_while_pending_is_judged_though_ray_still_lists_it_pending(config, fake_ray):
    # Ray keeps a job whose driver it never placed PENDING after a stop; the stop note ends the attempt.
    first_attempt(config, fake_ray, "PENDING", max_restarts=0)
    write(mvp_controller.attempt_file(config, RUN, "stopped_by"), {"by": "submit.yml", "cause": "infeasible"})
    playbooks = Playbooks(config, fake_ray, {RUN: {"verdict": "failed", "cause": "infeasible", "summary": "s"}})
    controller(config, playbooks).tick()
    assert playbooks.names() == ["record.yml"]
    assert read(mvp_controller.attempt_file(config, RUN, "run_end"))


GATE_WORDS = "python -u /private/common/code/tools/mvp_gate.py --pool global_pool=1x2:6 --priority %d --log l -- p"


def preemption_case(config, fake, save_freq=10, preemptible=True, clock_at=1000.0):
    """A low run this controller follows holds wrk2's two GPUs (its gate admitted it); a high job waits for them."""
    make_attempt(config, RUN, RUN, 0, {"request": {"workload": "sft", "submission_id": RUN}, "max_restarts": 0,
                                       "resume_from": None, "restart": None,
                                       "trainer_overrides": {"trainer.save_freq": save_freq},
                                       "preemptible": {"value": preemptible}})
    write(mvp_controller.attempt_file(config, RUN, "queue"), {"state": "admitted", "admitted_at_s": clock_at - 100})
    fake.add_job(RUN, "RUNNING", job_id="01000000", entrypoint=GATE_WORDS % -100, start_time=(clock_at - 110) * 1000)
    high = "grpo-20261127-130000-fedcba"
    write(mvp_controller.attempt_file(config, high, "queue"), {"state": "waiting"})
    fake.add_job(high, "RUNNING", job_id="02000000", entrypoint=GATE_WORDS % 100, start_time=(clock_at - 5) * 1000)
    return high


def checkpoint(config, sid, step):
    """A complete verl checkpoint of ``step`` (one rank's shards, the tracker naming it)."""
    folder = os.path.join(mvp_controller.attempt_file(config, sid, "checkpoints"), "global_step_%d" % step)
    os.makedirs(folder, exist_ok=True)
    for kind in ("model", "optim", "extra_state"):
        with open(os.path.join(folder, "%s_world_size_1_rank_0.pt" % kind), "w") as handle:
            handle.write("x")
    with open(os.path.join(os.path.dirname(folder), "latest_checkpointed_iteration.txt"), "w") as handle:
        handle.write(str(step))


def test_a_lower_run_is_preempted_right_after_its_next_checkpoint_and_continues_uncounted(config, fake_ray):
    now = [1000.0]
    high = preemption_case(config, fake_ray)
    checkpoint(config, RUN, 10)  # the checkpoint it had before: not the one awaited
    verdict = {"verdict": "failed", "cause": "preempted", "summary": "preempted", "steps": {"last": 20},
               "start_time": 890000}
    playbooks = Playbooks(config, fake_ray, {RUN: verdict})
    ctl = controller(config, playbooks, clock=lambda: now[0])
    ctl.tick()
    note = read(mvp_controller.attempt_file(config, RUN, "preempt"))
    assert (note["state"], note["by"], note["by_priority"], note["priority"]) == (
        "waiting_for_checkpoint", high, 100, -100)
    assert note["checkpoint_before"] == 10 and note["deadline_s"] == 1000.0 + 600
    assert fake_ray.called("stop_job") == [] and ctl.urgent is True
    # No new checkpoint yet: it trains on.
    now[0] += 5
    ctl.tick()
    assert fake_ray.called("stop_job") == [] and ctl.urgent is True
    # Its next complete checkpoint: stopped at once, saying by whom and at which step.
    checkpoint(config, RUN, 20)
    now[0] += 0.5
    ctl.tick()
    assert fake_ray.called("stop_job") == [RUN] and ctl.urgent is False
    stopped = read(mvp_controller.attempt_file(config, RUN, "stopped_by"))
    assert (stopped["cause"], stopped["preempted_by"], stopped["step"]) == ("preempted", high, 20)
    assert stopped["checkpoint"] == "/private/jobs/%s/checkpoints/global_step_20" % RUN and stopped["waited_s"] == 5.5
    record = read(mvp_controller.attempt_file(config, high, "preempting"))["preemptions"]
    assert record[0]["victims"] == [RUN] and record[0]["stopped"][RUN]["step"] == 20
    # Ray ends it; the controller judges it preempted and continues it though max_restarts is 0.
    fake_ray.jobs[RUN]["status"] = type(fake_ray.jobs[RUN]["status"])("STOPPED")
    ctl.tick()
    link = read(mvp_controller.attempt_file(config, RUN, "restart"))
    assert (link["next"], link["cause"]) == (RUN + "-r1", "preempted")
    started = [extra for name, extra in playbooks.calls if name == "submit.yml"]
    info = started[0]["submit_job_restart"]["info"]
    assert (info["restarts"], info["preemptions"], info["queued_since"]) == (0, 1, 890.0)
    assert started[0]["submit_job_restart"]["request"]["resume_from"] == RUN


def test_past_the_grace_time_the_victim_is_stopped_at_once_and_a_job_that_never_saves_at_once(config, fake_ray):
    now = [1000.0]
    preemption_case(config, fake_ray)
    ctl = controller(config, Playbooks(config, fake_ray, {}), clock=lambda: now[0])
    ctl.tick()
    assert fake_ray.called("stop_job") == []
    now[0] += 601
    ctl.tick()
    stopped = read(mvp_controller.attempt_file(config, RUN, "stopped_by"))
    assert fake_ray.called("stop_job") == [RUN] and "grace time (job_controller_preempt_grace_s, 600 s) passed" in stopped["why"]
    assert stopped["step"] is None and "newest complete checkpoint is none" in stopped["why"]


@pytest.mark.parametrize("save_freq, preemptible, stops", [(-1, True, True), (10, False, False)])
def test_a_job_that_never_saves_is_stopped_at_once_and_a_non_preemptible_one_never(config, fake_ray, save_freq,
                                                                                    preemptible, stops):
    preemption_case(config, fake_ray, save_freq=save_freq, preemptible=preemptible)
    controller(config, Playbooks(config, fake_ray, {}), clock=lambda: 1000.0).tick()
    assert fake_ray.called("stop_job") == ([RUN] if stops else [])
    assert os.path.exists(mvp_controller.attempt_file(config, RUN, "preempt")) is stops


def test_a_job_saving_after_each_epoch_is_stopped_after_its_next_checkpoint_not_at_once(config, fake_ray):
    # verl's SFT word for save_freq: the job saves at each epoch's end, so it waits for that checkpoint.
    preemption_case(config, fake_ray, save_freq="after_each_epoch")
    controller(config, Playbooks(config, fake_ray, {}), clock=lambda: 1000.0).tick()
    assert fake_ray.called("stop_job") == []
    assert read(mvp_controller.attempt_file(config, RUN, "preempt"))["state"] == "waiting_for_checkpoint"


def test_a_preemption_is_cancelled_once_its_preemptor_no_longer_waits(config, fake_ray):
    high = preemption_case(config, fake_ray)
    ctl = controller(config, Playbooks(config, fake_ray, {}), clock=lambda: 1000.0)
    ctl.tick()
    fake_ray.jobs[high]["status"] = type(fake_ray.jobs[high]["status"])("STOPPED")
    ctl.tick()
    note = read(mvp_controller.attempt_file(config, RUN, "preempt"))
    assert note["state"] == "cancelled" and high in note["why"] and fake_ray.called("stop_job") == []


def test_a_restarted_controller_goes_on_with_a_preemption_it_decided_from_the_files(config, fake_ray):
    high = preemption_case(config, fake_ray)
    controller(config, Playbooks(config, fake_ray, {}), clock=lambda: 1000.0).tick()
    decided = read(mvp_controller.attempt_file(config, RUN, "preempt"))
    # A new process (killed and started again by its keeper): nothing in memory, the decision on disk.
    again = controller(config, Playbooks(config, fake_ray, {}), clock=lambda: 1001.0)
    again.tick()
    assert again.urgent is True and fake_ray.called("stop_job") == []
    assert read(mvp_controller.attempt_file(config, RUN, "preempt")) == decided  # not decided a second time
    checkpoint(config, RUN, 10)
    again.tick()
    assert fake_ray.called("stop_job") == [RUN]
    assert read(mvp_controller.attempt_file(config, RUN, "stopped_by"))["preempted_by"] == high


class FakeContainer(object):
    """A container as the Docker SDK's ``containers.get`` returns it: ``status`` and ``attrs``."""

    def __init__(self, status, ip="", exit_code=0, ip_on_start=""):
        self.status, self.ip_on_start, self.starts, self.reloads, self.exits_after = status, ip_on_start, 0, 0, None
        self.attrs = {"State": {"ExitCode": exit_code, "FinishedAt": "2026-11-28T21:00:00Z"},
                      "NetworkSettings": {"Networks": {"mvp-ray-net": {"IPAddress": ip}}}}

    def reload(self):
        """Docker's state again: ``exits_after`` reloads of a running container, then exited."""
        self.reloads += 1
        if self.status == "running" and self.exits_after is not None and self.reloads >= self.exits_after:
            self.status = "exited"

    def start(self):
        self.status, self.starts, self.exits_after = "running", self.starts + 1, None
        self.attrs["NetworkSettings"]["Networks"]["mvp-ray-net"]["IPAddress"] = self.ip_on_start


class FakeDocker(object):
    """The Docker engine's answers about containers by name (a missing name is ``docker.errors.NotFound``)."""

    def __init__(self, containers):
        self.by_name = containers
        self.containers = self

    def get(self, name):
        import docker.errors  # pylint: disable=import-outside-toplevel
        if name not in self.by_name:
            raise docker.errors.NotFound("No such container: %s" % name)
        return self.by_name[name]


def lost_worker_case(config, fake, down="wrk2", ip_on_start="10.0.0.3"):
    """A running attempt whose placement group has a bundle on each worker (10.0.0.2, 10.0.0.3); the worker
    container ``down`` exited (killed: exit code 137) while Ray still lists its node ALIVE; started again, it gets
    ``ip_on_start`` (Docker gives the same address back on this network; None: the container is gone)."""
    config["workers"] = ["wrk1", "wrk2"]
    first_attempt(config, fake, "RUNNING")
    fake.jobs[RUN]["driver_node_id"] = "wrk1"
    fake.placement_groups = [{
        "placement_group_id": "pg1", "name": "", "creator_job_id": "01000000", "state": "CREATED",
        "strategy": "PACK", "bundles": [{"bundle_id": 0, "node_id": "wrk1", "unit_resources": {"CPU": 1.0}},
                                        {"bundle_id": 1, "node_id": "wrk2", "unit_resources": {"CPU": 1.0}}],
        "stats": {}}]
    ips = {"wrk1": "10.0.0.2", "wrk2": "10.0.0.3"}
    containers = {name: FakeContainer("running", ip) for name, ip in ips.items()}
    containers[down] = FakeContainer("exited", exit_code=137, ip_on_start=ip_on_start)
    if ip_on_start is None:
        del containers[down]
    return FakeDocker(containers)


def test_a_worker_whose_container_exited_stops_its_attempt_at_once_as_node_lost_and_the_run_continues(
        config, fake_ray):
    engine = lost_worker_case(config, fake_ray)
    fake_ray.when_stopped(RUN, "STOPPED")
    lost = {"verdict": "failed", "cause": "node_lost", "summary": "node lost", "steps": {"last": 4}}
    playbooks = Playbooks(config, fake_ray, {RUN: lost})
    ctl = mvp_controller.Controller(config, playbooks, docker=lambda: engine, say=lambda line: None)
    ctl.tick()
    # Stopped in the pass that saw the container exited, its note first (Ray still lists 10.0.0.3 ALIVE).
    assert fake_ray.called("stop_job") == [RUN]
    note = read(mvp_controller.attempt_file(config, RUN, "stopped_by"))
    assert note["cause"] == "node_lost" and note["nodes"] == [{"node_id": "wrk2", "node_ip": "10.0.0.3"}]
    assert "wrk2 exited (exit code 137" in note["why"] and "10.0.0.3" in note["why"]
    assert note["containers"] == {"wrk2": "exited (exit code 137, finished at 2026-11-28T21:00:00Z)"}
    # ... and its container started again at once (same address: Ray replaces the lost node when its raylet joins).
    assert engine.by_name["wrk2"].starts == 1
    # Once Ray says STOPPED: judged, and continued without the heal playbook (both workers are back).
    fake_ray.jobs[RUN]["status"] = type(fake_ray.jobs[RUN]["status"])("STOPPED")
    ctl.tick()
    assert playbooks.names() == ["record.yml", "submit.yml"]
    assert len(fake_ray.called("stop_job")) == 1 and engine.by_name["wrk2"].starts == 1


def test_a_worker_container_back_at_another_address_heals_once_ray_knows_the_old_node_dead(config, fake_ray):
    engine = lost_worker_case(config, fake_ray, ip_on_start="10.0.0.9")
    fake_ray.when_stopped(RUN, "STOPPED")
    playbooks = Playbooks(config, fake_ray, {RUN: {"verdict": "failed", "cause": "node_lost", "summary": "lost",
                                                   "steps": {"last": 4}}})
    now = [1000.0]
    ctl = mvp_controller.Controller(config, playbooks, docker=lambda: engine, say=lambda line: None,
                                    clock=lambda: now[0])
    waits = []

    def sleep(seconds):  # Ray's health checks declare 10.0.0.3 dead after a few seconds; the new node is ALIVE
        waits.append(seconds)
        now[0] += seconds
        if len(waits) == 3:
            next(n for n in fake_ray.nodes if n["node_id"] == "wrk2")["state"] = "DEAD"
            fake_ray.nodes.append(dict(next(n for n in fake_ray.nodes if n["node_id"] == "wrk1"), node_id="wrk9",
                                       node_ip="10.0.0.9"))
    ctl.sleep = sleep
    ctl.tick()
    fake_ray.jobs[RUN]["status"] = type(fake_ray.jobs[RUN]["status"])("STOPPED")
    ctl.tick()
    # While Ray listed the old node ALIVE the cluster was not whole (a placement group could go there): waited.
    assert len(waits) == 3 and playbooks.names() == ["record.yml", "submit.yml"]


def test_a_worker_container_that_is_gone_is_made_again_by_the_heal_playbook(config, fake_ray):
    engine = lost_worker_case(config, fake_ray, ip_on_start=None)
    fake_ray.when_stopped(RUN, "STOPPED")
    playbooks = Playbooks(config, fake_ray, {RUN: {"verdict": "failed", "cause": "node_lost", "summary": "lost",
                                                   "steps": {"last": 4}}})
    ctl = mvp_controller.Controller(config, playbooks, docker=lambda: engine, say=lambda line: None)
    ctl.tick()
    assert read(mvp_controller.attempt_file(config, RUN, "stopped_by"))["containers"] == {"wrk2": "gone"}
    fake_ray.jobs[RUN]["status"] = type(fake_ray.jobs[RUN]["status"])("STOPPED")
    ctl.tick()
    assert playbooks.names() == ["record.yml", "cluster.yml", "submit.yml"]


def test_a_running_attempt_is_not_stopped_when_its_nodes_containers_run_or_ray_knows_the_node_dead(
        config, fake_ray):
    engine = lost_worker_case(config, fake_ray)
    # Its bundles and driver are on wrk1 only: the exited wrk2 is not its node.
    fake_ray.placement_groups[0]["bundles"] = fake_ray.placement_groups[0]["bundles"][:1]
    ctl = mvp_controller.Controller(config, Playbooks(config, fake_ray, {}), docker=lambda: engine,
                                    say=lambda line: None)
    ctl.tick()
    assert fake_ray.called("stop_job") == [] and not os.path.exists(
        mvp_controller.attempt_file(config, RUN, "stopped_by"))
    # Ray already declared wrk2 dead: Ray ends the attempt itself, the controller does not stop it.
    engine = lost_worker_case(config, fake_ray)
    for row in fake_ray.nodes:
        if row["node_id"] == "wrk2":
            row["state"] = "DEAD"
    mvp_controller.Controller(config, Playbooks(config, fake_ray, {}), docker=lambda: engine,
                              say=lambda line: None).tick()
    assert fake_ray.called("stop_job") == []


def test_the_heartbeat_names_the_content_the_controller_runs():
    now = 1_000_000.0
    content = {"source": "/work/main", "version": "0.1.0", "hash": "0123456789abcdef"}
    beat = json.dumps({"name": "ctl", "host": "h1", "pid": 7, "at": now - 1, "poll_s": 2, "runs": [],
                       "content": content})
    assert "(pid 7) running mvp.ray 0.1.0 (content 0123456789abcdef) is alive" in mvp_run_state.controller_line(
        None, beat, now)
    checkout = json.dumps({"name": "ctl", "host": "h1", "pid": 7, "at": now - 1, "poll_s": 2, "runs": ["a"],
                           "content": {"source": "/home/dev/mvp", "version": "", "hash": ""}})
    assert "(pid 7) running the checkout /home/dev/mvp:" in mvp_run_state.controller_line(None, checkout, now)


def test_a_controller_that_keeps_dying_is_started_again_later_and_later_and_the_keeper_says_why(tmp_path):
    """The keeper against a real service folder whose controller exits at once (``python -c 'raise SystemExit(3)'``)."""
    import sys
    state = tmp_path / "state"
    services = state / "services"
    services.mkdir(parents=True)
    shared = tmp_path / "shared"
    write(str(state / "settings.json"), {"shared_dir": str(shared)})
    (state / "controller.log").write_text("Traceback (most recent call last):\nModuleNotFoundError: No module named "
                                          "'ansible_collections.mvp'\n")
    write(str(services / "controller.json"), {"argv": [sys.executable, "-c", "raise SystemExit(3)"], "env": {},
                                               "log": str(tmp_path / "out.log"), "cwd": str(tmp_path)})
    beat_path = shared / "controller" / "heartbeat.json"
    write(str(beat_path), {"name": "ctl", "at": 50.0, "poll_s": 2, "runs": ["a"]})
    now, starts, lines = [100.0], [], []

    def sleep(seconds):
        now[0] += seconds
        time.sleep(0.05)  # the started program ends meanwhile

    def say(line):
        lines.append(line)
        if line.startswith("started controller again"):
            starts.append(now[0])
    mvp_controller.keeper(str(services), say, lambda: now[0] > 100.0 + 120, interval=2.0, clock=lambda: now[0],
                          sleep=sleep)
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    # Each quick death doubles the pause: 2 s between the first two starts (no death seen yet), then 4, 8, 16, 32 ...
    expected = [2.0] + [2.0 * 2 ** n for n in range(1, len(gaps))]
    assert len(gaps) >= 4 and gaps == expected[:len(gaps)]
    said = [l for l in lines if "ended" in l and "in a row" in l]
    assert said and "No module named 'ansible_collections.mvp'" in said[-1]
    beat = read(str(beat_path))
    assert beat["at"] == 50.0 and beat["keeper"]["failures"] == len(starts) - 1
    line = mvp_run_state.controller_line(None, json.dumps(beat), now[0])
    assert "NOT supervised - the job controller keeps dying" in line and "No module named" in line
    assert [mvp_controller.backoff_s(n) for n in (0, 1, 2, 8, 20)] == [0.0, 4.0, 8.0, 300.0, 300.0]


def test_a_head_whose_container_exited_is_started_again_without_the_heal_playbook(config, fake_ray):
    first_attempt(config, fake_ray, "RUNNING")
    config["head"] = {"container": "head0", "network": "mvp-ray-net"}
    head = FakeContainer("exited", exit_code=137, ip_on_start="10.0.0.1")
    engine = FakeDocker({"head0": head})
    playbooks = Playbooks(config, fake_ray, {})
    ctl = mvp_controller.Controller(config, playbooks, docker=lambda: engine, say=lambda line: None)
    ctl.tick()
    # Started again; it answered with both workers ALIVE (the job table kept): no playbook, the attempt followed on.
    assert head.starts == 1 and playbooks.calls == [] and ctl.head_lost_since is None
    ctl.tick()
    assert playbooks.calls == [] and fake_ray.called("stop_job") == []
    # Killed: its dashboard refuses connections while Docker still says running for a moment; then exited.
    head.status, head.exits_after = "running", 3
    fake_ray.unreachable = ConnectionRefusedError(111, "Connection refused")
    now = [time.time()]

    def sleep(seconds):  # the restarted head answers once it was started again
        now[0] += seconds
        if head.starts == 2:
            fake_ray.unreachable = None
    ctl.clock, ctl.sleep = (lambda: now[0]), sleep
    ctl.tick()
    assert head.starts == 2 and head.reloads == 3 and playbooks.calls == []
    # A head whose container is gone is made by the heal playbook.
    fake_ray.unreachable = ConnectionRefusedError(111, "Connection refused")
    ctl.sleep = lambda seconds: None
    engine.by_name.clear()
    ctl.tick()
    assert playbooks.names() == ["cluster.yml"]
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
YAML_TYPES = {"str": str, "bool": bool, "dict": dict, "list": list, "int": int}


def load_yaml(*parts):
    import yaml  # pylint: disable=import-outside-toplevel
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def entry_point_of(playbook):
    """The role and entry point a playbook of the checkout runs on the head: ``roles:`` (main) or an include_role's
    ``tasks_from`` (that file's name)."""
    for play in load_yaml(playbook):
        for item in play.get("roles") or []:
            return item["role"].split(".")[-1], "main"
        for task in play.get("tasks") or []:
            include = task.get("ansible.builtin.include_role")
            if include:
                return include["name"].split(".")[-1], os.path.splitext(include.get("tasks_from", "main"))[0]
    raise AssertionError("%s runs no role" % playbook)


def test_the_extra_vars_the_controller_passes_are_inputs_of_the_entry_point_its_playbook_runs():
    """No renaming layer: the controller passes the role's own input names (declared, of their declared type) to
    the playbooks it runs, so that a renamed input fails here rather than being dropped in a run."""
    nxt = {"submission_id": RUN + "-r1", "request": {"submission_id": RUN + "-r1"}, "info": {"run": RUN, "attempt": 1}}
    for playbook, extra_vars in ((mvp_controller.PLAYBOOKS["record"], mvp_controller.record_vars(RUN, True)),
                                 (mvp_controller.PLAYBOOKS["submit"], mvp_controller.start_vars(nxt))):
        role, entry = entry_point_of(playbook)
        options = load_yaml("roles", role, "meta", "argument_specs.yml")["argument_specs"][entry]["options"]
        for name, value in extra_vars.items():
            assert name in options, (playbook, entry, name)
            assert isinstance(value, YAML_TYPES[options[name]["type"]]), (playbook, name, value)
    assert mvp_controller.start_vars(nxt)["submit_job_restart"] == {"request": nxt["request"], "info": nxt["info"]}


def test_the_controllers_defaults_are_its_settings_defaults():
    """DEFAULTS is the one table: each optional key's setting (SETTINGS) has that value as its default - the role's
    defaults/main.yml and argument spec, or the shared inventories/common/all - unless the default is computed from
    the inventory (then the argument spec declares none); the role passes every key from that setting."""
    defaults = load_yaml("roles", "job_controller", "defaults", "main.yml")
    options = load_yaml("roles", "job_controller", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    shared = {}
    for name in sorted(os.listdir(os.path.join(ROOT, "inventories", "common", "all"))):
        shared.update(load_yaml("inventories", "common", "all", name))
    task = next(t for t in load_yaml("roles", "job_controller", "tasks", "main.yml")
                if "mvp.ray.ray_job_controller" in t)["mvp.ray.ray_job_controller"]
    passed = dict(task["config"], **task["secrets"])
    # playbooks: tests point it elsewhere; collections_path and content: what the role installed (install.yml);
    # key_metrics: the catalog's (mvp_workloads).
    assert set(mvp_controller.SETTINGS) == set(mvp_controller.DEFAULTS) - {"playbooks", "collections_path", "content",
                                                                           "key_metrics"}
    for key, setting in mvp_controller.SETTINGS.items():
        assert setting in passed[key], (key, passed[key])
        value = defaults[setting] if setting in defaults else shared[setting]
        if isinstance(value, str) and "{{" in value:
            assert "default" not in options.get(setting, {}), setting
            continue
        assert value == mvp_controller.DEFAULTS[key], (key, setting, value)
        if "default" in options.get(setting, {}):
            assert options[setting]["default"] == mvp_controller.DEFAULTS[key], (key, setting)


def stamps(config, sid, rows):
    path = mvp_run_state.attempt_file(mvp_controller.jobs_dir(config), sid, "steps")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(row) + "\n" for row in rows))


def test_a_run_that_ends_gets_its_ledger_and_its_goodput_line_in_run_end(config, fake_ray):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger
    first_attempt(config, fake_ray, "SUCCEEDED")
    spec_path = mvp_controller.attempt_file(config, RUN, "job_spec")
    write(spec_path, dict(read(spec_path), trainer_overrides={"trainer.nnodes": 2, "trainer.n_gpus_per_node": 1}))
    start, startup, step, steps, shutdown = 1000.0, 20.0, 5.0, 4, 3.0
    stamps(config, RUN, [{"step": n, "at": start + startup + n * step} for n in range(1, steps + 1)])
    end = start + startup + steps * step + shutdown
    verdict = {"verdict": "trained", "cause": None, "summary": "ok", "steps": {"last": steps},
               "start_time": int(start * 1000), "end_time": int(end * 1000)}
    ctl = controller(config, Playbooks(config, fake_ray, {RUN: verdict}))
    ctl.tick()
    ledger = read(mvp_controller.attempt_file(config, RUN, "ledger"))
    assert ledger["state"] == "ended" and ledger["verdict"] == "trained"
    assert ledger["gpu_seconds_held"] == pytest.approx((end - start) * 2)
    # the first step's own duration is the median interval (step): start-up is what the test chose
    assert ledger["buckets"]["startup"] == pytest.approx(startup * 2)
    assert ledger["goodput"] == pytest.approx(steps * step / (end - start))
    assert read(mvp_controller.attempt_file(config, RUN, "run_end"))["goodput"] == mvp_ledger.summary_line(ledger)


def test_a_running_runs_ledger_is_written_when_its_files_change_and_a_failure_is_said_once(config, fake_ray,
                                                                                           monkeypatch):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger
    first_attempt(config, fake_ray, "RUNNING")
    spec_path = mvp_controller.attempt_file(config, RUN, "job_spec")
    write(spec_path, dict(read(spec_path), trainer_overrides={"trainer.nnodes": 1, "trainer.n_gpus_per_node": 2}))
    write(mvp_controller.attempt_file(config, RUN, "queue"), {"gate_started_s": 990.0, "admitted_at_s": 1000.0})
    stamps(config, RUN, [{"step": 1, "at": 1030.0}, {"step": 2, "at": 1040.0}])
    now = [1041.0]
    lines = []
    ctl = mvp_controller.Controller(config, Playbooks(config, fake_ray, {}), say=lines.append, clock=lambda: now[0])
    ctl.tick()
    path = mvp_controller.attempt_file(config, RUN, "ledger")
    first = read(path)
    assert first["state"] == "running" and first["computed_at"] == 1041.0
    assert first["gpu_seconds_held"] == pytest.approx((1041.0 - 1000.0) * 2)
    now[0] = 1042.0
    ctl.tick()
    assert read(path) == first  # nothing changed: not computed again
    now[0] = 1042.0 + mvp_controller.LEDGER_REFRESH_S
    ctl.tick()
    assert read(path)["computed_at"] == now[0]  # refreshed: its held time grew
    stamps(config, RUN, [{"step": 3, "at": now[0]}])
    now[0] += 1
    ctl.tick()
    assert read(path)["attempts"][0]["steps"]["last"] == 3
    monkeypatch.setattr(mvp_ledger, "compute_ledger", lambda *a: 1 / 0)
    stamps(config, RUN, [{"step": 4, "at": now[0]}])
    for _ in range(3):
        now[0] += 1
        assert ctl.tick() == [RUN]  # the controller goes on
        stamps(config, RUN, [{"step": 5 + _, "at": now[0]}])
    assert len([line for line in lines if "ledger could not be written" in line]) == 1


def capacity_lines(config):
    folder = os.path.join(config["shared_dir"], "controller")
    lines = []
    for name in sorted(os.listdir(folder)):
        if name.startswith("capacity-"):
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                lines += [json.loads(line) for line in handle]
    return lines


def test_the_cluster_capacity_is_appended_once_a_minute_with_or_without_runs(config, fake_ray, cluster_nodes):
    from ansible_collections.mvp.ray.plugins.module_utils.tracking import mvp_ledger_sum
    now = [1795909620.0]
    ctl = controller(config, Playbooks(config, fake_ray, {}), clock=lambda: now[0])
    alive = [n for n in cluster_nodes if n["state"] == "ALIVE" and n["resources_total"].get("worker_node")]
    gpus = sum(n["resources_total"].get("GPU", 0.0) for n in alive)
    assert ctl.tick() == []  # no run: the idle cluster is recorded all the same
    now[0] += 30
    ctl.tick()
    now[0] += 31
    ctl.tick()
    lines = capacity_lines(config)
    assert [(x["nodes"], x["gpus"], x["interval_s"]) for x in lines] == [(len(alive), gpus, 0.0),
                                                                         (len(alive), gpus, 61.0)]
    # The head stops answering: no line, and the first line after it covers nothing of the time it was away.
    fake_ray.unreachable = "connection refused"
    now[0] += 60
    ctl.tick()
    fake_ray.unreachable = None
    now[0] += 60
    ctl.tick()
    lines = capacity_lines(config)
    assert len(lines) == 3 and lines[-1]["interval_s"] == 0.0
    held = mvp_ledger_sum.cluster_gpu_seconds(config["shared_dir"], 0, now[0])
    assert held["gpu_seconds"] == 61.0 * gpus and held["node_seconds"] == 61.0 * len(alive)


def test_a_tracked_runs_final_ledger_goes_to_its_mlflow_run_through_the_record_playbook(config, fake_ray):
    """The attempt's record (and its MLflow tags) comes before the run's final ledger: once the run ended and its
    ledger is written, the record playbook runs once more with ledger_only for the run; an untracked run has none."""
    first_attempt(config, fake_ray, "SUCCEEDED")
    write(mvp_controller.attempt_file(config, RUN, "mlflow_run"), {"run_id": "abc", "tracking_uri": "http://h:5000"})
    verdict = {"verdict": "trained", "cause": None, "summary": "ok", "steps": {"last": 1},
               "start_time": 1000000, "end_time": 1010000}
    books = Playbooks(config, fake_ray, {RUN: verdict})
    controller(config, books).tick()
    assert read(mvp_controller.attempt_file(config, RUN, "ledger"))["state"] == "ended"
    records = [extra for name, extra in books.calls if name == "record.yml"]
    assert records == [{"submit_job_collect_id": RUN, "submit_job_lost_with_head": False},
                       {"submit_job_collect_id": RUN, "submit_job_record_ledger_only": True}]


# -- webhooks (issue 64): the controller's decisions written to the outbox (delivery: notify/test_mvp_notify.py) ----

def outbox_events(config):
    """The events in the outbox (pending ones, and delivered ones in done/), as (event kind, endpoint url) sorted."""
    folder = os.path.join(config["shared_dir"], "controller", "outbox")
    out = []
    for sub in (folder, os.path.join(folder, "done")):
        for name in sorted(os.listdir(sub)) if os.path.isdir(sub) else []:
            if name.endswith(".json"):
                entry = read(os.path.join(sub, name))
                out.append((entry["event"]["event"], entry["endpoint"]["url"], entry["event"]["event_id"]))
    return sorted(out)


def with_notify(config, url="http://127.0.0.1:9/hook", events=None):
    spec = read(mvp_controller.attempt_file(config, RUN, "job_spec"))
    given = {"url": url} if events is None else {"url": url, "events": events}
    spec["request"]["notify"] = [given]
    write(mvp_controller.attempt_file(config, RUN, "job_spec"), spec)


def test_a_continued_then_ended_run_writes_each_event_once_for_the_requests_endpoint(config, fake_ray):
    first_attempt(config, fake_ray, "FAILED", max_restarts=1)
    with_notify(config)
    lost = {"verdict": "failed", "cause": "node_lost", "summary": "node lost", "steps": {"last": 4, "planned": 8}}
    playbooks = Playbooks(config, fake_ray, {RUN: lost})
    ctl = controller(config, playbooks)
    woken = []
    ctl.wake = lambda: woken.append(True)
    ctl.tick()
    [(kind, url, _eid)] = outbox_events(config)
    assert (kind, url) == ("attempt_continued", "http://127.0.0.1:9/hook") and woken
    fake_ray.jobs[RUN + "-r1"]["status"] = type(fake_ray.jobs[RUN]["status"])("SUCCEEDED")
    playbooks.verdicts[RUN + "-r1"] = {"verdict": "trained", "cause": None, "summary": "ok", "steps": {"last": 8}}
    ctl.tick()
    assert [k for k, _u, _e in outbox_events(config)] == ["attempt_continued", "run_ended"]
    folder = os.path.join(config["shared_dir"], "controller", "outbox")
    ended = next(read(os.path.join(folder, n)) for n in os.listdir(folder) if n.endswith(".json")
                 and read(os.path.join(folder, n))["event"]["event"] == "run_ended")["event"]
    assert (ended["run"], ended["attempt"], ended["verdict"]) == (RUN, RUN + "-r1", "trained")
    assert ended["job_dir"] == "/private/jobs/%s-r1" % RUN
    # A controller started again and taking the same decision writes nothing twice.
    ctl2 = controller(config, playbooks)
    ctl2.end(mvp_controller.run_state(config, RUN), "ended", True, "again", None)
    assert len(outbox_events(config)) == 2


def test_an_attempt_stopped_pending_writes_run_stopped_and_the_endpoint_choosing_events_gets_only_those(
        config, fake_ray):
    first_attempt(config, fake_ray, "PENDING")
    with_notify(config, events=["run_ended"])
    config["webhooks"] = [{"url": "http://127.0.0.1:8/team", "format": "slack", "events": ["run_stopped"],
                           "secret": "vault-key", "checkpoint_every": None, "name": "team"}]
    fake_ray.jobs[RUN]["start_time"] = (time.time() - config["pending_timeout_s"] - 5) * 1000
    controller(config, Playbooks(config, fake_ray, {})).tick()
    assert [(k, u) for k, u, _e in outbox_events(config)] == [("run_stopped", "http://127.0.0.1:8/team")]
    folder = os.path.join(config["shared_dir"], "controller", "outbox")
    for name in os.listdir(folder):
        text = open(os.path.join(folder, name), encoding="utf-8").read()
        # the cause names why it stopped: PENDING past pending_timeout_s (not "stalled")
        assert json.loads(text)["event"]["cause"] == "pending_timeout"
        assert "vault-key" not in text and "s3cret" not in text  # no secret in the outbox


def test_a_queue_wait_past_notify_queue_wait_s_and_a_checkpoint_crossing_checkpoint_every_are_told_once(
        config, fake_ray):
    first_attempt(config, fake_ray, "RUNNING")
    with_notify(config)
    spec = read(mvp_controller.attempt_file(config, RUN, "job_spec"))
    spec["request"]["notify"].append({"url": "http://127.0.0.1:9/eval", "events": ["checkpoint"],
                                      "checkpoint_every": 5})
    write(mvp_controller.attempt_file(config, RUN, "job_spec"), spec)
    wait = config["notify_queue_wait_s"]
    write(mvp_controller.attempt_file(config, RUN, "queue"), {"state": "waiting", "since_s": time.time() - wait - 1})
    checkpoints = mvp_controller.attempt_file(config, RUN, "checkpoints")

    def save(step):  # a complete checkpoint: its shard, then verl's tracker file
        os.makedirs(os.path.join(checkpoints, "global_step_%d" % step))
        with open(os.path.join(checkpoints, "global_step_%d" % step, "model_world_size_1_rank_0.pt"), "w",
                  encoding="utf-8") as handle:
            handle.write("w")
        with open(os.path.join(checkpoints, "latest_checkpointed_iteration.txt"), "w", encoding="utf-8") as handle:
            handle.write(str(step))
    save(4)
    ctl = controller(config, Playbooks(config, fake_ray, {}))
    ctl.tick()
    assert [k for k, _u, _e in outbox_events(config)] == ["queue_waiting"]  # step 4 < 5: no checkpoint event
    save(6)
    ctl.tick()
    ctl.tick()
    assert [(k, u) for k, u, _e in outbox_events(config)] == [("checkpoint", "http://127.0.0.1:9/eval"),
                                                              ("queue_waiting", "http://127.0.0.1:9/hook")]


def test_a_webhook_of_the_configuration_is_checked_naming_its_field(tmp_path):
    path = write_config(tmp_path, {"name": "c", "inventory": [], "project_dir": "/", "shared_root": "/private",
                                   "shared_dir": str(tmp_path), "head": {"address": "h"}, "dashboard_port": 1,
                                   "state_dir": str(tmp_path), "webhooks": [{"url": "ftp://x"}]})
    with pytest.raises(mvp_controller.ConfigError, match=r"job_controller_webhooks\[0\]\.url"):
        mvp_controller.load_config(path)
