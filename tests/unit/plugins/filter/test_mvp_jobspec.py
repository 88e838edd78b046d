"""Unit tests of the job spec filters against the shipped workload catalog."""
import os
import datetime
import json
import shlex

import pytest

import mvp_spec
from mvp_jobspec import hydra_value, mvp_submit_cmd
from request_then_spec import mvp_job_spec

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import new_submission_id
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import JobSpecError, check_request


@pytest.fixture
def spec(catalog, spec_defaults):
    """Build a job spec from a request (submission id job-1 unless given) with the shared defaults."""
    def build(**request):
        request.setdefault("submission_id", "job-1")
        return mvp_job_spec(request, catalog, spec_defaults)
    return build


def argv(entrypoint):
    return shlex.split(entrypoint)


@pytest.mark.parametrize("workload", ["selftest", "ppo", "grpo", "sft"])
def test_every_workload_runs_on_a_worker_with_the_snapshot_first(workload, catalog, spec_defaults, spec):
    result = spec(workload=workload)
    assert result["entrypoint_resources"] == {"worker_node": 1}
    assert result["entrypoint_num_cpus"] == 1
    path = result["runtime_env"]["env_vars"]["PYTHONPATH"].split(":")
    assert path[0] == "/private/common/code/verl/verl-0.9.1"
    assert path[-1] == "${PYTHONPATH}"
    assert result["job_dir"] == "/private/jobs/job-1"
    words = argv(result["entrypoint"])
    # Trainers (a shape to queue; ppo, grpo also a cluster lock: verl's TransferQueue) start behind
    # mvp_gate.py, with one --pool per resource pool of the shape; scripts reserve nothing.
    lock = catalog[workload].get("cluster_lock")
    assert result["cluster_lock"] == lock
    shape = result["shape"]
    assert bool(shape["pools"]) == bool(catalog[workload].get("module"))
    if shape["pools"]:
        gate = words[:words.index("--") + 1]
        pools = ["%s=%dx%d:%g" % (p["name"], p["nodes"], p["gpus_per_node"], p["cpus_per_node"]) for p in shape["pools"]]
        queue = dict(mvp_spec.QUEUE_DEFAULTS, **(spec_defaults.get("queue") or {}))
        assert gate == (["python", "-u", "/private/common/code/mvp_tools/mvp_gate.py"]
                        + [w for pool in pools for w in ("--pool", pool)] + (["--lock", lock] if lock else [])
                        + ["--log", "/private/jobs/job-1/logs/driver.log",
                           "--dashboard-port", str(spec_defaults.get("dashboard_port") or 8265),
                           "--worker-resource", spec_defaults["worker_resource"],
                           "--poll", "%g" % float(queue["poll_s"]), "--max-wait", "%g" % float(queue["max_wait_s"]),
                           "--unfit-wait", "%g" % float(queue["unfit_wait_s"]), "--"])
        words = words[len(gate):]
    assert words[:3] == ["python", "-u", "/private/common/code/mvp_tools/mvp_entry.py"]
    assert words[3:5] == ["--log", "/private/jobs/job-1/logs/driver.log"]
    program = words[words.index("--") + 1:]
    assert program[:2] == ["python", "-u"]
    # verl trainers are watched (metrics file and limits from the defaults); scripts are not, but their metrics
    # lines (if they write any) are stamped for the ledger: the job's metrics file, no watchdog.
    options = words[5:words.index("--")]
    assert options[options.index("--metrics") + 1] == "/private/jobs/job-1/logs/metrics.jsonl"
    if catalog[workload].get("module"):
        watchdog = spec_defaults["watchdog"]
        assert options[options.index("--watchdog") + 1] == "%g,%g,%g" % (
            watchdog["first_step_s"], watchdog["floor_s"], watchdog["factor"])
    else:
        assert "--watchdog" not in options


def test_grpo_uses_ppo_entrypoint_with_grpo_estimator_and_group_rollouts(spec):
    words = argv(spec(workload="grpo")["entrypoint"])
    assert words[words.index("-m", 6) + 1] == "verl.trainer.main_ppo"
    assert "algorithm.adv_estimator=grpo" in words
    n = [w for w in words if w.startswith("actor_rollout_ref.rollout.n=")]
    assert n and int(n[0].split("=")[1]) > 1
    assert "trainer.default_local_dir=/private/jobs/job-1/checkpoints" in words
    assert "data.train_files=/private/datasets/gsm8k/train.parquet" in words
    assert "actor_rollout_ref.model.path=/private/common/models/Qwen2.5-0.5B-Instruct" in words


def test_sft_connects_with_ray_address_auto_and_cpu_driver(spec):
    result = spec(workload="sft")
    assert result["runtime_env"]["env_vars"]["RAY_ADDRESS"] == "auto"
    words = argv(result["entrypoint"])
    assert "verl.trainer.sft_trainer_ray" in words
    assert "trainer.device=cpu" in words
    assert "trainer.total_epochs=1" in words and "trainer.save_freq=10" in words
    assert "data.train_files=/private/datasets/gsm8k_sft/train.parquet" in words
    assert "model.path=/private/common/models/Qwen2.5-0.5B-Instruct" in words


def test_gpu_request_is_nodes_times_gpus_per_node(spec):
    assert spec(workload="ppo", trainer_overrides={"trainer.nnodes": 3})["gpus_requested"] == 12
    assert spec(workload="selftest")["gpus_requested"] == 0


def test_selftest_passes_expected_workers_and_both_datasets(spec):
    words = argv(spec(workload="selftest")["entrypoint"])
    program = words[words.index("--") + 1:]
    assert program[:3] == ["python", "-u", "/private/common/code/mvp_tools/selftest.py"]
    assert program[program.index("--expect-workers") + 1] == "2"
    assert "rl_train=/private/datasets/gsm8k/train.parquet" in program
    assert "sft_train=/private/datasets/gsm8k_sft/train.parquet" in program


def test_code_id_selects_another_snapshot(spec):
    result = spec(workload="selftest", code_id="codeB")
    assert result["runtime_env"]["env_vars"]["PYTHONPATH"].startswith("/private/common/code/verl/codeB:")


@pytest.mark.parametrize("bad", ["a/b", "../x", "has space", "", "-lead", "x" * 129])
def test_bad_submission_ids_are_refused(bad, spec):
    with pytest.raises(Exception, match="submission_id"):
        spec(workload="selftest", submission_id=bad)


@pytest.mark.parametrize("request_, field", [
    ({"workload": "nope"}, "workload"),
    ({"workload": "selftest", "worklaod": "x"}, "worklaod"),
    ({"workload": "ppo", "trainer_overrides": {"trainer.save_freq": 0}}, "trainer.save_freq"),
    # verl's SFT word: main_ppo compares save_freq with 0 and fails on it (TypeError)
    ({"workload": "grpo", "trainer_overrides": {"trainer.save_freq": "after_each_epoch"}}, "trainer.save_freq"),
    ({"workload": "sft", "trainer_overrides": {"trainer.save_freq": "every_epoch"}}, "trainer.save_freq"),
    ({"workload": "selftest", "code_path": "/elsewhere/verl"}, "code_path"),
    ({"workload": "selftest", "ray": {"adress": "x"}}, "ray.adress"),
])
def test_invalid_requests_name_the_field(request_, field, spec):
    with pytest.raises(Exception, match=r"field '[^']*%s'" % field.replace(".", r"\.")):
        spec(**request_)


def test_sft_takes_verls_after_each_epoch(spec):
    result = spec(workload="sft", trainer_overrides={"trainer.save_freq": "after_each_epoch"})
    assert "trainer.save_freq=after_each_epoch" in argv(result["entrypoint"])


def test_hydra_values():
    assert hydra_value(True) == "true"
    assert hydra_value(None) == "null"
    assert hydra_value(5) == "5"
    assert hydra_value("vllm") == "vllm"
    assert hydra_value("a b") == "'a b'"
    assert hydra_value([1, "x"]) == "[1,x]"


def test_submit_cmd_is_an_equivalent_ray_job_submit_line(spec):
    result = spec(workload="selftest")
    words = shlex.split(mvp_submit_cmd(result))
    assert words[:3] == ["ray", "job", "submit"]
    assert json.loads(words[words.index("--entrypoint-resources") + 1]) == {"worker_node": 1}
    assert words[words.index("--entrypoint-num-cpus") + 1] == "1"
    assert json.loads(words[words.index("--runtime-env-json") + 1]) == result["runtime_env"]
    assert words[words.index("--submission-id") + 1] == "job-1"
    assert " ".join(words[words.index("--no-wait") + 2:]) == " ".join(argv(result["entrypoint"]))


def test_generated_submission_id_is_valid(spec):
    now = datetime.datetime(2026, 11, 21, 12, 0, 0, tzinfo=datetime.timezone.utc)
    result = spec(workload="selftest", submission_id=new_submission_id("selftest", now=now, suffix="0a1b2c"))
    assert result["submission_id"] == "selftest-%s-0a1b2c" % now.strftime("%Y%m%d-%H%M%S")


def test_sft_keeps_snapshot_device_when_the_snapshot_shares_it_with_workers(catalog, spec_defaults):
    result = mvp_job_spec({"workload": "sft", "submission_id": "j"}, catalog,
                          dict(spec_defaults, snapshot_shares_device=True))
    assert not [w for w in argv(result["entrypoint"]) if w.startswith("trainer.device=")]
    assert result["notes"] and "trainer.device" in result["notes"][0]
    user = mvp_job_spec({"workload": "sft", "submission_id": "j",
                         "trainer_overrides": {"trainer.device": "cpu"}}, catalog,
                        dict(spec_defaults, snapshot_shares_device=True))
    assert "trainer.device=cpu" in argv(user["entrypoint"])


def test_the_device_probe_names_the_snapshot_file_only_when_the_builder_would_set_the_device(catalog, spec_defaults):
    from mvp_jobspec import mvp_driver_device_probe

    def probe(**request):  # the role probes the request the action checked
        return mvp_driver_device_probe(check_request(dict(request, submission_id="j"), catalog, spec_defaults),
                                       catalog, spec_defaults)

    device = catalog["sft"]["driver_device"]
    built = mvp_job_spec({"workload": "sft", "submission_id": "j"}, catalog, spec_defaults)
    assert probe(workload="sft") == {"path": built["code_path"] + "/" + device["probe_file"],
                                     "marker": device["probe_marker"]}
    # The request sets the key itself, or the workload has no driver device: nothing to read.
    assert probe(workload="sft", trainer_overrides={device["key"]: "cpu"}) is None
    without = [w for w, entry in catalog.items() if not entry.get("driver_device")]
    assert without and all(probe(workload=w) is None for w in without)


def test_jobspec_files_parse_or_fail_naming_the_file():
    from mvp_request import mvp_parse_jobspec  # the action ray_job_request reads JobSpec files with it

    assert mvp_parse_jobspec("workload: grpo\ntrainer_overrides:\n  trainer.nnodes: 2\n", "g.yaml") == {
        "workload": "grpo", "trainer_overrides": {"trainer.nnodes": 2}}
    assert mvp_parse_jobspec("", "empty.yaml") == {}
    with pytest.raises(Exception, match="jobspec bad.yaml: is not valid YAML .* at line 2, column 5"):
        mvp_parse_jobspec("workload: x\n  id: [oops\n", "bad.yaml")
    with pytest.raises(Exception, match="jobspec list.yaml: holds a list at the top level"):
        mvp_parse_jobspec("- a\n- b\n", "list.yaml")
    with pytest.raises(Exception, match="key 'workload' is given twice in one mapping \\(line 1 and line 3\\)"):
        mvp_parse_jobspec(b"workload: sft\nmodel: m\nworkload: grpo\n", "twice.yaml")


@pytest.mark.parametrize("workload", ["ppo", "grpo", "sft"])
def test_verl_workloads_log_to_console_and_a_metrics_file_in_the_job_dir(workload, spec):
    result = spec(workload=workload)
    assert result["trainer_overrides"]["trainer.logger"] == ["console", "file"]
    assert "trainer.logger=[console,file]" in argv(result["entrypoint"])
    expected = posixpath_join(result["job_dir"], "logs", "metrics.jsonl")
    assert result["runtime_env"]["env_vars"]["VERL_FILE_LOGGER_PATH"] == expected
    assert result["metrics_file"] == expected
    assert result["trainer_overrides"]["trainer.experiment_name"] == result["submission_id"]


def posixpath_join(*parts):
    return "/".join(p.rstrip("/") for p in parts)


def test_selftest_has_no_metrics_file(spec):
    result = spec(workload="selftest")
    assert "VERL_FILE_LOGGER_PATH" not in result["runtime_env"]["env_vars"]
    assert result["metrics_file"] is None


@pytest.mark.parametrize("logger", [["console", "wandb"], "wandb"])
def test_wandb_logger_is_refused_without_a_key(logger, catalog, spec_defaults, spec):
    with pytest.raises(Exception) as err:
        spec(workload="ppo", trainer_overrides={"trainer.logger": logger})
    assert "trainer.logger" in str(err.value) and "mvp_wandb_api_key" in str(err.value)
    accepted = mvp_job_spec({"workload": "ppo", "submission_id": "j", "trainer_overrides": {"trainer.logger": logger}},
                            catalog, dict(spec_defaults, wandb_key_set=True))
    assert accepted["metrics_file"] is None


def test_a_single_logger_string_without_file_sets_no_metrics_path(spec):
    result = spec(workload="sft", trainer_overrides={"trainer.logger": "console"})
    assert "VERL_FILE_LOGGER_PATH" not in result["runtime_env"]["env_vars"]


def test_inventory_overrides_apply_between_catalog_and_request(catalog, spec_defaults, spec, local_job_overrides):
    site = local_job_overrides
    defaults = dict(spec_defaults, site_overrides=site)
    result = mvp_job_spec({"workload": "sft", "submission_id": "j"}, catalog, defaults)
    for key, value in site["sft"]["trainer_overrides"].items():
        assert result["trainer_overrides"][key] == value
    assert result["site_overrides"] == site["sft"]
    # the catalog's save_freq (10) is replaced by the inventory's, a request's wins over both
    assert catalog["sft"]["trainer_overrides"]["trainer.save_freq"] != site["sft"]["trainer_overrides"]["trainer.save_freq"]
    user = mvp_job_spec({"workload": "sft", "submission_id": "j", "trainer_overrides": {"trainer.save_freq": 3}},
                        catalog, defaults)
    assert user["trainer_overrides"]["trainer.save_freq"] == 3
    # other workloads are untouched by the sft entry
    assert spec(workload="selftest")["site_overrides"] == {}


def test_inventory_device_override_wins_over_the_snapshot_probe(catalog, spec_defaults, spec):
    defaults = dict(spec_defaults, site_overrides={"sft": {"trainer_overrides": {"trainer.device": "cpu"}}},
                    snapshot_shares_device=True)
    result = mvp_job_spec({"workload": "sft", "submission_id": "j"}, catalog, defaults)
    assert "trainer.device=cpu" in argv(result["entrypoint"])
    assert not [n for n in result["notes"] if "snapshot's default" in n]
    # a job that trains on CPUs asks for no GPUs
    assert result["needs_gpus"] is False and result["gpus_requested"] == 0
    assert spec(workload="sft")["needs_gpus"] is True


def test_malformed_inventory_overrides_name_the_setting(catalog, spec_defaults):
    with pytest.raises(Exception) as err:
        mvp_job_spec({"workload": "sft", "submission_id": "j"}, catalog,
                     dict(spec_defaults, site_overrides={"sft": {"trainer_override": {}}}))
    assert "submit_job_site_overrides.sft" in str(err.value)


def test_inventory_reward_function_is_used_unless_the_request_names_one(catalog, spec_defaults):
    site = {"grpo": {"reward_fn_path": "/private/user/code/rewards/graded.py"}}
    defaults = dict(spec_defaults, site_overrides=site)
    key = catalog["grpo"]["reward_fn_key"]
    result = mvp_job_spec({"workload": "grpo", "submission_id": "j"}, catalog, defaults)
    assert result["reward_fn_path"] == site["grpo"]["reward_fn_path"]
    assert result["trainer_overrides"][key] == site["grpo"]["reward_fn_path"]
    own = mvp_job_spec({"workload": "grpo", "submission_id": "j", "reward_fn_path": "/private/user/code/mine.py"},
                       catalog, defaults)
    assert own["trainer_overrides"][key] == "/private/user/code/mine.py"
    with pytest.raises(Exception) as err:
        mvp_job_spec({"workload": "grpo", "submission_id": "j"}, catalog,
                     dict(spec_defaults, site_overrides={"grpo": {"reward_fn_path": "/etc/reward.py"}}))
    assert "reward_fn_path" in str(err.value)


@pytest.fixture
def earlier_run(catalog):
    """An earlier run as ray_job_runs returns it (checkpoint world size from the catalog's shape by default);
    ``changes`` replace its fields."""
    def make(workload="sft", step=6, world_size=None, submission_id="sft-old", **changes):
        overrides = catalog[workload]["trainer_overrides"]
        if world_size is None:
            world_size = overrides["trainer.nnodes"] * overrides["trainer.n_gpus_per_node"]
        path = "/private/jobs/%s/checkpoints/global_step_%d" % (submission_id, step)
        return dict({"submission_id": submission_id, "workload": workload,
                     "checkpoint": {"step": step, "path": path, "world_size": world_size}}, **changes)
    return make


@pytest.fixture
def resume_spec(catalog, spec_defaults):
    """Build job-2 continuing from sft-old, with ``run`` as what ray_job_runs found of sft-old."""
    def build(run, **request):
        request.setdefault("submission_id", "job-2")
        request.setdefault("resume_from", "sft-old")
        return mvp_job_spec(request, catalog, dict(spec_defaults, resume_run=run))
    return build


@pytest.mark.parametrize("workload", ["sft", "grpo", "ppo"])
def test_resume_from_points_the_trainer_at_the_newest_checkpoint(workload, catalog, earlier_run, resume_spec):
    run = earlier_run(workload, step=6)
    result = resume_spec(run, workload=workload)
    keys = catalog[workload]["resume"]
    words = argv(result["entrypoint"])
    assert "%s=resume_path" % keys["mode_key"] in words
    assert "%s=%s" % (keys["path_key"], run["checkpoint"]["path"]) in words
    assert result["resume_from"] == {"submission_id": "sft-old", "step": 6, "path": run["checkpoint"]["path"],
                                     "world_size": run["checkpoint"]["world_size"], "checkpoint_of": "sft-old",
                                     "skipped": [], "loaded_from": run["checkpoint"]["path"], "adjusted": [],
                                     "links": {}}
    # The new job still writes its own checkpoints.
    assert "trainer.default_local_dir=/private/jobs/job-2/checkpoints" in words


def _handler_source():
    from tests.unit.conftest import unpacked_verl
    with open(os.path.join(unpacked_verl(), "verl/utils/checkpoint/checkpoint_handler.py"), encoding="utf-8") as f:
        return f.read()


SFT_ENTRIES = ["data_0.pt", "extra_state_world_size_2_rank_0.pt", "extra_state_world_size_2_rank_1.pt",
               "model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt", "optim_world_size_2_rank_0.pt",
               "optim_world_size_2_rank_1.pt"]


@pytest.mark.parametrize("step, steps_per_epoch, fixed, view", [
    (16, 8, False, True),   # the end of epoch 2 on verl 0.9.1: the data-loader state is left out
    (12, 8, False, False),  # mid-epoch: the state is where the run was
    (16, 8, True, False),   # a release whose handler checks for the epoch boundary itself
])
def test_sft_resumed_at_an_epoch_boundary_loads_a_view_without_the_data_state(
        step, steps_per_epoch, fixed, view, catalog, earlier_run, spec_defaults):
    run = earlier_run("sft", step=step, epoch={"steps_per_epoch": steps_per_epoch, "how": "test"})
    run["checkpoint"]["entries"] = list(SFT_ENTRIES)
    source = _handler_source()
    if fixed:
        source = source.replace("self._load_dataloader_state(checkpoint_path)",
                                "if resume_step % self.steps_per_epoch:\n"
                                "            self._load_dataloader_state(checkpoint_path)")
    result = mvp_job_spec({"workload": "sft", "submission_id": "job-2", "resume_from": "sft-old"}, catalog,
                          dict(spec_defaults, resume_run=run, resume_restore_source=source))
    saved = run["checkpoint"]["path"]
    expected = "/private/jobs/job-2/config/resume/global_step_%d" % step if view else saved
    assert "trainer.resume_from_path=%s" % expected in argv(result["entrypoint"])
    resumed = result["resume_from"]
    assert (resumed["path"], resumed["loaded_from"]) == (saved, expected)
    if view:
        assert [fix["issue"] for fix in resumed["adjusted"]] == ["verl#7401"]
        assert resumed["adjusted"][0]["left_out"] == ["data_0.pt"]
        assert len(resumed["links"]) == len(SFT_ENTRIES) - 1
        assert any("verl#7401" in note for note in result["notes"])
    else:
        assert resumed["adjusted"] == [] and resumed["links"] == {}


@pytest.mark.parametrize("run, request_extra, message", [
    # run: earlier_run's arguments (None: no such run)
    (None, {}, "no job directory /private/jobs/sft-old"),
    ({"workload": "grpo"}, {}, "sft-old is a grpo job, this is sft"),
    ({"checkpoint": None}, {}, "sft-old saved no checkpoint"),
    ({"world_size": 3}, {}, "sft-old was trained with world size 3"),
    ({}, {"resume_from": "../x"}, "'../x' is not a submission id"),
    ({}, {"trainer_overrides": {"trainer.resume_mode": "auto"}}, "is set by resume_from"),
])
def test_resume_from_refusals_name_the_field(earlier_run, resume_spec, run, request_extra, message):
    run = None if run is None else earlier_run(**run)
    with pytest.raises(Exception) as err:
        resume_spec(run, workload="sft", **request_extra)
    assert message in str(err.value)
    assert "resume_from" in str(err.value)


def test_resume_world_size_follows_the_request_overrides(earlier_run, resume_spec):
    run = earlier_run(world_size=6)
    result = resume_spec(run, workload="sft",
                         trainer_overrides={"trainer.nnodes": 3, "trainer.n_gpus_per_node": 2})
    assert result["world_size"] == 6 and result["resume_from"]["world_size"] == 6


def test_resume_falls_back_to_the_run_the_failed_attempt_continued(catalog, earlier_run, spec_defaults):
    """An attempt that saved no complete checkpoint: the checkpoint of the attempt it continued is used, and said."""
    parent = earlier_run(step=4, submission_id="run-a")
    skipped = [{"step": 6, "path": "/private/jobs/run-a-r1/checkpoints/global_step_6", "why": "optim missing"}]
    attempt = earlier_run(submission_id="run-a-r1", spec={"resume_from": {"submission_id": "run-a", "step": 4}})
    attempt["checkpoint"] = {"step": None, "path": None, "world_size": None, "skipped": skipped}
    result = mvp_job_spec({"workload": "sft", "submission_id": "run-a-r2", "resume_from": "run-a-r1"}, catalog,
                          dict(spec_defaults, resume_run=attempt, resume_parents=[parent]))
    assert result["resume_from"]["path"] == parent["checkpoint"]["path"]
    assert result["resume_from"]["checkpoint_of"] == "run-a"
    assert result["resume_from"]["skipped"] == [dict(skipped[0], submission_id="run-a-r1")]
    notes = " ".join(result["notes"])
    assert "skipped checkpoint global_step_6 of run-a-r1: optim missing" in notes
    assert "continues run-a-r1 from the checkpoint at step 4 of run-a" in notes


def test_resume_refuses_when_no_attempt_has_a_complete_checkpoint(catalog, earlier_run, spec_defaults):
    attempt = earlier_run(submission_id="run-b")
    attempt["checkpoint"] = {"step": None, "path": None, "world_size": None,
                             "skipped": [{"step": 2, "path": "p", "why": "model_world_size_2_rank_{1}.pt missing"}]}
    with pytest.raises(Exception) as err:
        mvp_job_spec({"workload": "sft", "submission_id": "run-b-r1", "resume_from": "run-b"}, catalog,
                     dict(spec_defaults, resume_run=attempt))
    assert "run-b saved no complete checkpoint" in str(err.value)
    assert "global_step_2 (model_world_size_2_rank_{1}.pt missing)" in str(err.value)


@pytest.mark.parametrize("request_value, default, workload, expected", [
    (None, 2, "sft", 2), (0, 2, "sft", 0), ("3", 0, "grpo", 3), (None, 2, "selftest", 0)])
def test_max_restarts_comes_from_the_request_or_the_setting(catalog, spec_defaults, request_value, default,
                                                            workload, expected):
    request = {"workload": workload, "submission_id": "job-3"}
    if request_value is not None:
        request["max_restarts"] = request_value
    result = mvp_job_spec(request, catalog, dict(spec_defaults, max_restarts=default))
    assert result["max_restarts"] == expected
    # The spec records the checked request: every key given, max_restarts as the whole number it resolved to.
    recorded = {key: result["request"][key] for key in list(request) + ["max_restarts"]}
    assert recorded == dict(request, max_restarts=expected)
    assert result["restart"] is None


@pytest.mark.parametrize("request_value, workload, message", [
    (-1, "sft", "-1 is not a whole number"), ("two", "sft", "'two' is not a whole number"),
    (True, "sft", "True is not a whole number"), (1, "selftest", "selftest cannot continue from a checkpoint")])
def test_max_restarts_refusals_name_the_field(catalog, spec_defaults, request_value, workload, message):
    with pytest.raises(Exception) as err:
        mvp_job_spec({"workload": workload, "submission_id": "job-4", "max_restarts": request_value}, catalog,
                     spec_defaults)
    assert message in str(err.value) and "max_restarts" in str(err.value)


def test_selftest_cannot_resume(earlier_run, resume_spec):
    with pytest.raises(Exception) as err:
        resume_spec(earlier_run("selftest", world_size=1), workload="selftest")
    assert "workload selftest cannot continue from a checkpoint" in str(err.value)


def test_repeat_is_recorded_and_absent_without_repeat(catalog, spec_defaults, spec):
    repeat = {"group": "sft-grp", "index": 2, "count": 3}
    assert mvp_job_spec({"workload": "sft", "submission_id": "sft-grp-2"}, catalog,
                        dict(spec_defaults, repeat=repeat))["repeat"] == repeat
    assert spec(workload="sft")["repeat"] is None and spec(workload="sft")["resume_from"] is None


def test_resume_at_the_earlier_run_end_notes_that_nothing_is_left_to_train(earlier_run, resume_spec):
    """A checkpoint at the earlier run's last step, with the same length settings, trains nothing
    (verl restores the data loader at its end); raising the length drops the note."""
    run = earlier_run(step=6)
    run["last_step"] = 6
    run["spec"] = {"trainer_overrides": resume_spec(dict(run), workload="sft")["trainer_overrides"]}
    ended = resume_spec(run, workload="sft")
    assert any("nothing left to train" in note and "sft-old ended at step 6" in note for note in ended["notes"])
    longer = resume_spec(run, workload="sft", trainer_overrides={"trainer.total_training_steps": 8})
    assert not any("nothing left to train" in note for note in longer["notes"])
    run["last_step"] = 8  # the checkpoint is older than the run's last step: steps remain
    assert not any("nothing left to train" in note for note in resume_spec(run, workload="sft")["notes"])


def test_transfer_queue_jobs_take_the_cluster_lock_unless_the_legacy_trainer_is_asked(catalog, spec):
    assert catalog["grpo"]["cluster_lock"] == catalog["ppo"]["cluster_lock"] == "transfer_queue"
    grpo = spec(workload="grpo", submission_id="grpo-7")
    assert grpo["cluster_lock"] == "transfer_queue"
    assert [n for n in grpo["notes"] if n.startswith("cluster lock transfer_queue: grpo-7 runs after")]
    assert argv(grpo["entrypoint"]).count("--lock") == 1
    # The legacy trainer takes no lock, but is still queued by its shape (the gate without --lock).
    legacy = spec(workload="grpo", trainer_overrides={"trainer.use_v1": False})
    assert legacy["cluster_lock"] is None and "--lock" not in argv(legacy["entrypoint"])
    assert "mvp_gate.py" in legacy["entrypoint"] and legacy["shape"]["pools"]
    assert spec(workload="sft")["cluster_lock"] is None


def _tracking(spec_defaults, enabled=True, **more):
    """The builder's defaults with the head's MLflow tracking server (mvp_mlflow_*)."""
    return dict(spec_defaults, mlflow={"enabled": enabled, "port": 5123, "ui_url": "",
                                       "credentials_file": "/tmp/ray/mvp-services/mlflow_auth.ini",
                                       "service_dir": "/tmp/ray/mvp-services"}, **more)


@pytest.mark.parametrize("workload", ["sft", "grpo", "ppo"])
def test_with_a_tracking_server_a_trainer_logs_to_mlflow_beside_its_loggers(workload, catalog, spec_defaults):
    before = catalog[workload]["trainer_overrides"].get("trainer.logger")
    result = mvp_job_spec({"workload": workload, "submission_id": "j-1"}, catalog, _tracking(spec_defaults))
    assert result["trainer_overrides"]["trainer.logger"] == list(before) + ["mlflow"]
    assert "trainer.logger=[%s]" % ",".join(list(before) + ["mlflow"]) in result["entrypoint"]
    assert result["mlflow"] == {"experiment": workload, "run_name": "j-1", "port": 5123, "ui_url": "",
                                "credentials_file": "/tmp/ray/mvp-services/mlflow_auth.ini",
                                "service_dir": "/tmp/ray/mvp-services"}
    # The run's variables are set by ray_job at submission, never by the builder.
    assert not any(k.startswith("MLFLOW_") for k in result["runtime_env"]["env_vars"])


def test_a_restarted_attempt_names_the_runs_first_id_as_its_mlflow_run(catalog, spec_defaults):
    result = mvp_job_spec({"workload": "sft", "submission_id": "j-1-r2"}, catalog,
                          _tracking(spec_defaults, restart={"run": "j-1", "attempt": 3}))
    assert result["mlflow"]["run_name"] == "j-1"


def test_a_logger_that_names_mlflow_already_is_not_doubled(catalog, spec_defaults):
    result = mvp_job_spec({"workload": "sft", "submission_id": "j", "trainer_overrides": {
        "trainer.logger": ["console", "mlflow", "file"]}}, catalog, _tracking(spec_defaults))
    assert result["trainer_overrides"]["trainer.logger"] == ["console", "mlflow", "file"]


def test_without_a_tracking_server_mlflow_is_refused_and_nothing_is_added(catalog, spec_defaults):
    plain = mvp_job_spec({"workload": "sft", "submission_id": "j"}, catalog, _tracking(spec_defaults, enabled=False))
    assert plain["mlflow"] is None and "mlflow" not in plain["trainer_overrides"]["trainer.logger"]
    with pytest.raises(Exception) as err:
        mvp_job_spec({"workload": "sft", "submission_id": "j", "trainer_overrides": {"trainer.logger": "mlflow"}},
                     catalog, _tracking(spec_defaults, enabled=False))
    assert "trainer.logger" in str(err.value) and "mvp_mlflow_enabled" in str(err.value)


@pytest.mark.parametrize("name", ["MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID"])
def test_a_request_may_not_set_the_mlflow_variables_the_project_owns(name, catalog, spec_defaults):
    with pytest.raises(Exception) as err:
        mvp_job_spec({"workload": "sft", "submission_id": "j", "env_vars": {name: "x"}}, catalog,
                     _tracking(spec_defaults))
    assert name in str(err.value)


def test_a_script_workload_is_not_tracked(catalog, spec_defaults):
    assert mvp_job_spec({"workload": "selftest", "submission_id": "j"}, catalog, _tracking(spec_defaults))["mlflow"] is None


def test_the_builder_makes_the_head_checks_inputs(catalog, spec_defaults):
    from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_copies import COPIES

    reward = "/private/user/code/rewards/gsm8k.py"
    key = catalog["grpo"]["reward_fn_key"]
    prefix = key.rsplit(".", 1)[0]
    built = mvp_job_spec({"workload": "grpo", "submission_id": "j", "reward_fn_path": reward,
                          "trainer_overrides": {prefix + ".name": "my_score",
                                                prefix + ".reward_kwargs": {"scale": 2},
                                                "+trainer.rollout_data_dir": "/private/outputs/j/rollouts"}},
                         catalog, dict(spec_defaults, verl_checks={"enabled": True, "timeout": 77}))
    check = built["check"]
    tools = COPIES["job_tools"]["files"] + tuple(p.rsplit("/", 1)[-1] for p in COPIES["job_tools"]["module_utils"])
    assert sorted(n for n in check["paths"] if n.startswith("job_tools/")) == sorted("job_tools/" + t for t in tools)
    assert check["paths"]["reward_fn_path"] == reward and check["paths"]["model"] == built["model_path"]
    assert all(check["paths"][k] == v for k, v in built["data_files"].items())
    assert check["hydra"] == {"config_dir": built["code_path"] + "/verl/trainer/config",
                              "config_name": catalog["grpo"]["hydra_config"], "overrides": built["hydra_overrides"]}
    assert check["verl_checks"] == {"python": spec_defaults["python"], "snapshot": built["code_path"], "timeout": 77}
    assert check["reward"] == {"python": spec_defaults["python"], "snapshot": built["code_path"], "path": reward,
                               "name": "my_score", "name_key": prefix + ".name", "kwargs": {"scale": 2}}
    roots = {item["field"]: item["root"] for item in check["confine"]}
    assert roots["reward_fn_path"] == "/private/user/code" and roots["model"] == "/private"
    assert roots["code_path"] == "/private"
    assert roots["trainer_overrides.+trainer.rollout_data_dir"] == "/private"  # named as the user wrote it
    paths = [item["path"] for item in check["confine"]]
    assert "/private/outputs/j/rollouts" in paths and len(paths) == len(set(paths))
    # Without the reward, nothing to import; verl's checks off: none asked for.
    plain = mvp_job_spec({"workload": "grpo", "submission_id": "j"}, catalog, spec_defaults)["check"]
    assert plain["reward"] is None and plain["verl_checks"] is None


def test_an_id_or_code_id_with_a_trailing_newline_is_refused(catalog, spec_defaults):
    from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import is_submission_id

    assert is_submission_id("heldout-newline") and not is_submission_id("heldout-newline\n")
    for key, value in (("code_id", "verl-0.9.1\n"), ("submission_id", "heldout-newline\n")):
        request = dict({"workload": "sft", "submission_id": "j"}, **{key: value})
        with pytest.raises(JobSpecError, match="job spec field '%s'" % key):
            check_request(request, catalog, spec_defaults)


def test_a_request_names_its_priority_class_and_the_gate_gets_its_number(spec, catalog, spec_defaults):
    normal = spec(workload="sft")
    assert normal["priority"] == {"class": "normal", "value": 0}
    # The default class (0) adds nothing to the entrypoint: the gate's default is 0.
    assert "--priority" not in argv(normal["entrypoint"])
    classes = {"low": -100, "normal": 0, "urgent": 250}
    high = mvp_job_spec({"submission_id": "j-2", "workload": "sft", "priority": "urgent"}, catalog,
                        dict(spec_defaults, priority_classes=classes))
    assert high["priority"] == {"class": "urgent", "value": 250}
    words = argv(high["entrypoint"])
    gate_words = words[:words.index("--")]
    assert gate_words[gate_words.index("--priority") + 1] == "250"
    # A script (no shape) is never queued: no gate, whatever its priority.
    assert "mvp_gate.py" not in spec(workload="selftest", priority="high")["entrypoint"]


@pytest.mark.parametrize("request_priority, classes, field, words", [
    ("urgent", None, "priority", "low (-100), normal (0), high (100)"),
    (3, None, "priority", "3 is not a text. Fix: use one of low, normal, high"),
    ("high", {"high": "very"}, "submit_job_priority_classes", "not a whole number"),
    ("normal", ["normal"], "submit_job_priority_classes", "not a mapping"),
])
def test_a_priority_the_cluster_does_not_define_is_refused_naming_the_field(request_priority, classes, field, words,
                                                                              catalog, spec_defaults):
    defaults = dict(spec_defaults, **({"priority_classes": classes} if classes is not None else {}))
    with pytest.raises(Exception) as raised:
        mvp_job_spec({"submission_id": "j-3", "workload": "sft", "priority": request_priority}, catalog, defaults)
    assert field in str(raised.value) and words in str(raised.value)


@pytest.mark.parametrize("request_priority, given, expected, words", [
    (None, None, True, "may preempt it after its next complete checkpoint"),
    ("low", "true", True, "higher priority than low (-100)"),
    ("normal", False, False, "preemptible: false"),
    ("normal", "false", False, "preemptible: false"),      # -e preemptible=false arrives as a string
    ("high", None, False, "highest priority class (high)"),  # nothing may preempt the highest class
])
def test_preemptible_is_recorded_in_the_spec(request_priority, given, expected, words, catalog, spec_defaults):
    request = {"submission_id": "j-4", "workload": "sft"}
    request.update({k: v for k, v in (("priority", request_priority), ("preemptible", given)) if v is not None})
    record = mvp_job_spec(request, catalog, spec_defaults)["preemptible"]
    assert record["value"] is expected and words in record["why"]


def test_a_preemptible_that_is_not_a_boolean_is_refused_naming_it(catalog, spec_defaults):
    with pytest.raises(Exception) as raised:
        mvp_job_spec({"submission_id": "j-5", "workload": "sft", "preemptible": "sometimes"}, catalog, spec_defaults)
    assert "preemptible" in str(raised.value) and "true or false" in str(raised.value)


def test_a_continued_runs_gate_keeps_its_first_submission_time(catalog, spec_defaults):
    info = {"run": "j-6", "attempt": 1, "max_restarts": 0, "queued_since": 1764300000.25, "history": []}
    words = argv(mvp_job_spec({"submission_id": "j-6-r1", "workload": "sft"}, catalog,
                              dict(spec_defaults, restart=info))["entrypoint"])
    gate_words = words[:words.index("--")]
    assert gate_words[gate_words.index("--since") + 1] == "1764300000.250"
