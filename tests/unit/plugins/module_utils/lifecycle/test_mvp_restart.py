"""The restart decision (plugins/module_utils/lifecycle/mvp_restart.py): which ended attempts continue, and as what."""
import pytest

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_restart, mvp_verdict


def spec(submission_id="sft-1", max_restarts=2, restart=None, resume_from=None, request=None):
    """An ended attempt's job spec, with only the keys the decision reads."""
    return {"submission_id": submission_id, "max_restarts": max_restarts, "restart": restart,
            "resume_from": resume_from, "request": dict(request or {"workload": "sft", "submission_id": submission_id})}


def verdict(cause, last=None, outcome="FAILED"):
    """A verdict record as ray_job_record returns it."""
    return {"verdict": outcome, "cause": cause, "summary": "%s happened" % cause,
            "steps": {"last": last} if last is not None else {}}


@pytest.mark.parametrize("cause", mvp_verdict.RETRYABLE_CAUSES)
def test_every_retryable_cause_continues_a_run_that_trained_from_its_checkpoint(cause):
    decision = mvp_restart.decide(spec(), verdict(cause, last=7))
    assert decision["restart"] is True
    following = decision["next"]
    assert following["submission_id"] == "sft-1-r1"
    assert following["request"]["submission_id"] == "sft-1-r1" and following["request"]["resume_from"] == "sft-1"
    assert following["info"]["attempt"] == 1 and following["info"]["run"] == "sft-1"
    assert following["info"]["history"][-1]["last_step"] == 7 and following["info"]["previous_cause"] == cause


@pytest.mark.parametrize("cause", sorted(set(mvp_verdict.CAUSES) - set(mvp_verdict.RETRYABLE_CAUSES) - {mvp_restart.PREEMPTED}))
def test_a_cause_that_is_not_retryable_ends_the_run(cause):
    decision = mvp_restart.decide(spec(), verdict(cause, last=7))
    assert decision["restart"] is False and decision["next"] is None and cause in decision["why"]


def test_a_run_that_never_trained_starts_afresh_and_drops_resume_from():
    first = spec(request={"workload": "sft", "submission_id": "sft-1", "resume_from": "older-run"})
    decision = mvp_restart.decide(first, verdict("busy"))
    assert decision["restart"] and "resume_from" not in decision["next"]["request"]
    assert "afresh" in decision["why"]


def test_the_chain_counts_attempts_from_the_run_and_stops_at_max_restarts():
    first = mvp_restart.decide(spec(max_restarts=2), verdict("node_lost", last=3))
    second_spec = spec(first["next"]["submission_id"], restart=first["next"]["info"], resume_from={"step": 3})
    second = mvp_restart.decide(second_spec, verdict("hang", last=5))
    assert second["next"]["submission_id"] == "sft-1-r2" and second["next"]["info"]["attempt"] == 2
    assert [h["submission_id"] for h in second["next"]["info"]["history"]] == ["sft-1", "sft-1-r1"]
    third_spec = spec(second["next"]["submission_id"], restart=second["next"]["info"], resume_from={"step": 5})
    third = mvp_restart.decide(third_spec, verdict("node_lost", last=6))
    assert third["restart"] is False and "2 restart" in third["why"]
    assert len(third["history"]) == 3 and third["history"][-1].startswith("sft-1-r2: ")


def test_trained_unreadable_or_narrowed_runs_do_not_continue():
    assert not mvp_restart.decide(spec(), verdict(None, last=8, outcome="trained"))["restart"]
    assert not mvp_restart.decide(spec(), None)["restart"]  # no verdict (status.json unreadable): no cause to restart
    narrowed = mvp_restart.decide(spec(), verdict("hang", last=3), causes=["node_lost"])
    assert not narrowed["restart"] and "node_lost" in narrowed["why"]
    assert mvp_restart.decide(spec(max_restarts=0), verdict("node_lost", last=3))["restart"] is False


@pytest.mark.parametrize("setting", ["node_lost", ["config_rejected"], [1]])
def test_a_bad_restart_causes_setting_names_itself_and_the_fix(setting):
    with pytest.raises(ValueError, match="job_controller_restart_causes"):
        mvp_restart.restart_causes(setting)


def test_retryable_means_the_verdict_rules_list():
    assert mvp_restart.restart_causes("retryable") == tuple(mvp_verdict.RETRYABLE_CAUSES)
    assert mvp_restart.restart_causes(["hang", "busy"]) == ("hang", "busy")


def test_a_preempted_attempt_always_continues_uncounted_and_keeps_its_place():
    # The site restarts no cause at all and the run has no restart left: a preemption still continues it.
    first = spec(max_restarts=0)
    decision = mvp_restart.decide(first, dict(verdict("preempted", last=40), start_time=1700000000500),
                                  causes=["busy"])
    assert decision["restart"] is True and "not counted against max_restarts" in decision["why"]
    info = decision["next"]["info"]
    assert info["restarts"] == 0 and info["preemptions"] == 1 and info["attempt"] == 1
    assert info["queued_since"] == 1700000000.5 and decision["next"]["request"]["resume_from"] == "sft-1"
    # Preempted again later: still free, the first submission time carried on.
    second = spec("sft-1-r1", max_restarts=0, restart=info, resume_from={"step": 40})
    again = mvp_restart.decide(second, dict(verdict("preempted", last=80), start_time=1700000999000), causes=["busy"])
    assert again["restart"] and again["next"]["info"]["preemptions"] == 2
    assert again["next"]["info"]["queued_since"] == 1700000000.5
    # A failure after the preemptions is counted from the restarts, not the attempts: max_restarts 1 allows one.
    third = spec("sft-1-r2", max_restarts=1, restart=dict(again["next"]["info"], max_restarts=1), resume_from={"step": 80})
    failed = mvp_restart.decide(third, verdict("node_lost", last=90))
    assert failed["restart"] and failed["next"]["info"]["restarts"] == 1 and failed["next"]["info"]["attempt"] == 3
    assert "restart 1 of 1" in failed["why"]
    fourth = spec("sft-1-r3", restart=failed["next"]["info"], resume_from={"step": 90})
    assert mvp_restart.decide(fourth, verdict("node_lost", last=95))["restart"] is False


def test_a_run_preempted_before_its_first_checkpoint_starts_afresh():
    decision = mvp_restart.decide(spec(max_restarts=0), dict(verdict("preempted", last=5), checkpoint_step=None))
    assert decision["restart"] and "resume_from" not in decision["next"]["request"] and "afresh" in decision["why"]
    # An attempt that itself continued an earlier one resumes from the chain's newest checkpoint.
    later = spec("sft-1-r1", max_restarts=0, resume_from={"step": 10}, restart={"run": "sft-1", "attempt": 1})
    decision = mvp_restart.decide(later, dict(verdict("preempted", last=15), checkpoint_step=None))
    assert decision["next"]["request"]["resume_from"] == "sft-1-r1"
