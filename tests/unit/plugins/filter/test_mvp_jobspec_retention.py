"""The job spec builder's checkpoint retention (verl's keep-last-k keys set from submit_job_checkpoints_keep, a request's
or the inventory's own value winning) and the refusal when the shared storage has no room for the checkpoints."""
import pytest

from mvp_jobspec import mvp_submit_problems
from request_then_spec import mvp_job_spec
from mvp_retention import DEFAULT_KEEP, checkpoint_bytes, human


@pytest.fixture
def build(catalog, spec_defaults):
    """Build job-1 of ``workload`` with the shared defaults, ``defaults`` merged over them."""
    def make(workload="sft", defaults=None, **request):
        return mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), catalog,
                            dict(spec_defaults, **(defaults or {})))
    return make


@pytest.mark.parametrize("workload", ["sft", "ppo", "grpo"])
def test_each_trainer_gets_its_verl_keys_at_the_setting(workload, build, catalog):
    spec = build(workload, defaults={"checkpoints_keep": 3})
    keys = sorted(catalog[workload]["retention"].values())
    assert sorted(o for o in spec["hydra_overrides"] if "ckpt_to_keep" in o) == ["%s=3" % key for key in keys]
    assert all(spec["override_sources"][key] == "project" for key in keys)
    assert {m["key"]: m["keep"] for m in spec["checkpoints"]["models"].values()} == {key: 3 for key in keys}


def test_without_the_setting_the_builder_keeps_the_default(build):
    spec = build("sft")
    assert spec["trainer_overrides"]["trainer.max_ckpt_to_keep"] == DEFAULT_KEEP == 2


def test_the_critic_counts_for_ppo_and_not_for_grpo(build):
    assert build("ppo")["checkpoints"]["models"]["critic"]["counted"] is True
    assert build("grpo")["checkpoints"]["models"]["critic"]["counted"] is False
    switched = build("grpo", trainer_overrides={"algorithm.adv_estimator": "gae"})
    assert switched["checkpoints"]["models"]["critic"]["counted"] is True


def test_the_selftest_keeps_no_checkpoints(build):
    assert build("selftest")["checkpoints"] is None


def test_a_request_value_wins_and_is_reported(build):
    spec = build("sft", defaults={"checkpoints_keep": 2}, trainer_overrides={"trainer.max_ckpt_to_keep": 5})
    assert spec["trainer_overrides"]["trainer.max_ckpt_to_keep"] == 5
    assert spec["override_sources"]["trainer.max_ckpt_to_keep"] == "request"
    model = spec["checkpoints"]["models"]["model"]
    assert model == {"key": "trainer.max_ckpt_to_keep", "keep": 5, "source": "request",
                     "field": "trainer_overrides.trainer.max_ckpt_to_keep", "counted": True}
    assert "trainer.max_ckpt_to_keep=5 from the request wins over submit_job_checkpoints_keep=2" in spec["notes"]


def test_the_inventory_value_wins_over_the_setting_and_the_request_over_both(build):
    site = {"ppo": {"trainer_overrides": {"trainer.max_critic_ckpt_to_keep": 1}}}
    spec = build("ppo", defaults={"site_overrides": site, "checkpoints_keep": 4})
    models = spec["checkpoints"]["models"]
    assert (models["actor"]["keep"], models["critic"]["keep"]) == (4, 1)
    assert models["critic"]["field"] == "submit_job_site_overrides.ppo.trainer_overrides.trainer.max_critic_ckpt_to_keep"
    spec = build("ppo", defaults={"site_overrides": site}, trainer_overrides={"trainer.max_critic_ckpt_to_keep": 3})
    assert spec["checkpoints"]["models"]["critic"]["keep"] == 3


def test_a_request_keeping_every_checkpoint_is_told_what_verl_does(build):
    spec = build("sft", trainer_overrides={"trainer.max_ckpt_to_keep": 0})
    assert spec["checkpoints"]["models"]["model"]["keep"] is None
    assert any("keeps every checkpoint (verl reads null, 0 and less as no limit)" in n for n in spec["notes"])


def test_a_null_setting_leaves_verl_keeping_all(build):
    spec = build("sft", defaults={"checkpoints_keep": None})
    assert "trainer.max_ckpt_to_keep" not in spec["trainer_overrides"]


@pytest.mark.parametrize("defaults, request_, field", [
    ({"checkpoints_keep": 0}, {}, "submit_job_checkpoints_keep"),
    ({"checkpoints_keep": "many"}, {}, "submit_job_checkpoints_keep"),
    ({}, {"trainer_overrides": {"trainer.max_ckpt_to_keep": 2.5}}, "trainer_overrides.trainer.max_ckpt_to_keep"),
])
def test_bad_values_are_refused_naming_the_field(defaults, request_, field, build):
    with pytest.raises(Exception) as err:
        build("sft", defaults=defaults, **request_)
    assert "field '%s'" % field in str(err.value)


def check_with_room(params, files, free):
    return {"missing": {}, "hydra_errors": [], "job_dir_exists": False, "existing_job": None,
            "summary": {"total_gpus": 0, "alive_workers": [{"node_ip": "10.0.0.2", "resources_total": {}}]},
            "room": {"params": params, "files_bytes": files, "free_bytes": free, "path": "/private/jobs"}}


def test_the_room_refusal_is_a_submit_problem_with_the_numbers(build):
    spec = build("sft", defaults={"checkpoints_keep": 1000})
    one = checkpoint_bytes(361600, 1473873)
    free = 1000 * one
    (problem,) = mvp_submit_problems(check_with_room(361600, 1473873, free), spec, "worker_node", False)
    assert "one checkpoint is about %s (361,600 parameters" % human(one) in problem
    assert "model: 1001 x %s (trainer.max_ckpt_to_keep=1000 kept + 1 being written)" % human(one) in problem
    assert "%s needed, /private/jobs has %s free" % (human(1001 * one), human(free)) in problem
    assert "Fix: lower submit_job_checkpoints_keep (at most 999 kept checkpoints fit)" in problem
    assert mvp_submit_problems(check_with_room(361600, 1473873, 1001 * one), spec, "worker_node", False) == []


def test_ppo_needs_room_for_the_actor_and_the_critic(build):
    spec = build("ppo", defaults={"checkpoints_keep": 2})
    one = checkpoint_bytes(1000, 0)
    assert mvp_submit_problems(check_with_room(1000, 0, 6 * one), spec, "worker_node", False) == []
    (problem,) = mvp_submit_problems(check_with_room(1000, 0, 6 * one - 1), spec, "worker_node", False)
    assert "actor: 3 x" in problem and "critic: 3 x" in problem
