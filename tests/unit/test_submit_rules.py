"""Issue 28: what verl would refuse only after the model is loaded is refused before submission.

Paths stay where they belong, loggers in any spelling, sizes, Hydra's own keys, dataset
columns (from the parquet schema), verl's string forms of numbers, and verl's own start-up
checks (mirrored ones here; the snapshot's own in a subprocess, skipped without torch).
"""
import os
import shlex
import subprocess
import sys

import pytest
import yaml

from mvp_jobspec import (HYDRA_SUBDIR, hydra_value, mvp_job_spec, mvp_loggers, mvp_submit_problems)
from test_jobspec import CATALOG, DEFAULTS
from test_submit_problems import healthy

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover
    AnsibleFilterError = ValueError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def spec(workload="grpo", **request):
    return mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), CATALOG, DEFAULTS)


def refused(field, text, workload="grpo", defaults=None, **request):
    with pytest.raises(AnsibleFilterError) as info:
        mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), CATALOG, defaults or DEFAULTS)
    message = str(info.value)
    assert "job spec field '%s'" % field in message and text in message and "Fix:" in message, message
    return message


def words(result):
    return shlex.split(result["entrypoint"])


# --- 2. every path stays where it belongs -------------------------------------------------

@pytest.mark.parametrize("model", ["../../../etc", "/etc/models/m", "/private/user/code/m", "a/../../b"])
def test_a_model_outside_common_models_is_refused(model):
    message = refused("model", "outside /private/common/models", model=model)
    assert posixpath_norm(model) in message


def posixpath_norm(model):
    import posixpath
    return posixpath.normpath(model if model.startswith("/") else "/private/common/models/" + model)


@pytest.mark.parametrize("model, path", [("m", "/private/common/models/m"),
                                         ("/private/common/models/org/m", "/private/common/models/org/m")])
def test_a_model_under_common_models_is_taken(model, path):
    result = spec(model=model)
    assert result["model_path"] == path
    assert "actor_rollout_ref.model.path=%s" % path in words(result)


@pytest.mark.parametrize("reward", ["/private/datasets/r.py", "/tmp/r.py", "/private/user/code/../../etc/r.py"])
def test_a_reward_outside_user_code_is_refused(reward):
    refused("reward_fn_path", "outside /private/user/code", reward_fn_path=reward)


def test_an_inventory_reward_outside_user_code_names_the_inventory_setting():
    site = {"grpo": {"reward_fn_path": "/opt/r.py"}}
    refused("mvp_job_overrides.grpo.reward_fn_path", "outside /private/user/code",
            defaults=dict(DEFAULTS, site_overrides=site))


@pytest.mark.parametrize("key, value, text", [
    ("trainer.rollout_data_dir", "/tmp/rollouts", "outside the shared storage"),
    ("trainer.validation_data_dir", "rollouts", "a relative path"),
    ("+data.tool_config_path", "/etc/tools.yaml", "outside the shared storage"),
    ("+data.extra_files", ["/private/a.parquet", "/srv/b.parquet"], "outside the shared storage"),
    ("global_profiler.save_path", "/private/../tmp/p", "outside the shared storage"),
])
def test_a_path_override_outside_the_shared_storage_is_refused(key, value, text):
    message = refused("trainer_overrides.%s" % key, text, trainer_overrides={key: value})
    assert "/private/jobs/job-1" in message


@pytest.mark.parametrize("key, value", [
    ("trainer.rollout_data_dir", "/private/jobs/job-1/rollouts"),
    ("+data.extra_files", ["/private/datasets/x/a.parquet"]),
    ("trainer.validation_data_dir", None),
    ("trainer.rollout_data_dir", "${trainer.default_local_dir}/r"),
])
def test_a_path_override_inside_the_shared_storage_is_taken(key, value):
    assert spec(trainer_overrides={key: value})["trainer_overrides"][key] == value


def test_hydra_output_goes_to_the_job_logs_and_the_request_cannot_move_it():
    result = spec()
    assert result["hydra_dir"] == "/private/jobs/job-1/" + HYDRA_SUBDIR
    assert "hydra.run.dir=/private/jobs/job-1/logs/hydra" in words(result)
    assert spec("selftest")["hydra_dir"] is None
    refused("trainer_overrides.hydra.run.dir", "is set by the job spec builder",
            trainer_overrides={"hydra.run.dir": "/etc"})


@pytest.mark.parametrize("key, value", [("hydra.sweep.dir", "/etc"), ("hydra.sweep.dir", "/private/jobs/other"),
                                        ("hydra.output_subdir", "../../etc"), ("hydra.output_subdir", "/etc")])
def test_hydra_output_keys_outside_the_job_are_refused(key, value):
    refused("trainer_overrides.%s" % key, "Hydra", trainer_overrides={key: value})


def test_hydra_output_keys_inside_the_job_are_taken():
    overrides = {"hydra.sweep.dir": "/private/jobs/job-1/logs/sweep", "hydra.output_subdir": ".hydra"}
    assert spec(trainer_overrides=overrides)["trainer_overrides"]["hydra.output_subdir"] == ".hydra"


# --- 5. loggers in any spelling ---------------------------------------------------------------

@pytest.mark.parametrize("given, names", [
    (["console", "file"], ["console", "file"]),
    ("[console,file]", ["console", "file"]),
    ("[ 'console' , \"file\" ]", ["console", "file"]),
    ("console, file", ["console", "file"]),
    ("console", ["console"]),
    (["console", "console"], ["console"]),
])
def test_loggers_are_normalised_once(given, names):
    assert mvp_loggers(given) == names
    result = spec(trainer_overrides={"trainer.logger": given})
    assert result["trainer_overrides"]["trainer.logger"] == names
    assert "trainer.logger=[%s]" % ",".join(names) in words(result)
    assert (result["runtime_env"]["env_vars"].get("VERL_FILE_LOGGER_PATH") is not None) == ("file" in names)


@pytest.mark.parametrize("given", ["[console,wandb]", "wandb", "console,wandb", ["console", "wandb"]])
def test_wandb_in_any_spelling_needs_the_key(given):
    refused("trainer_overrides.trainer.logger", "no W&B API key", trainer_overrides={"trainer.logger": given})
    taken = mvp_job_spec({"workload": "grpo", "submission_id": "j", "trainer_overrides": {"trainer.logger": given}},
                         CATALOG, dict(DEFAULTS, wandb_key_set=True))
    assert "wandb" in taken["trainer_overrides"]["trainer.logger"]


@pytest.mark.parametrize("given", [{"a": 1}, 5, "[]", [1]])
def test_a_logger_value_that_names_no_logger_is_refused(given):
    refused("trainer_overrides.trainer.logger", "", trainer_overrides={"trainer.logger": given})


# --- sizes, steps, epochs, GRPO's n -----------------------------------------------------------

@pytest.mark.parametrize("workload, key, value", [
    ("grpo", "trainer.nnodes", 0), ("grpo", "trainer.n_gpus_per_node", -1), ("sft", "trainer.total_epochs", -1),
    ("ppo", "trainer.total_epochs", 0), ("ppo", "trainer.total_training_steps", 0),
    ("grpo", "data.train_batch_size", 0), ("grpo", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 0),
    ("sft", "data.micro_batch_size_per_gpu", "0"), ("ppo", "trainer.total_epochs", 0.5),
])
def test_a_size_below_one_is_refused(workload, key, value):
    message = refused("trainer_overrides.%s" % key, "must be a whole number >= 1, got %r" % (value,), workload,
                      trainer_overrides={key: value})
    assert "set %s to 1 or more" % key in message


@pytest.mark.parametrize("key, value", [("trainer.total_training_steps", None), ("trainer.total_epochs", "2"),
                                        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", None)])
def test_a_size_of_one_or_more_or_a_nullable_null_is_taken(key, value):
    assert spec(trainer_overrides={key: value})["trainer_overrides"][key] == value


def test_text_in_a_size_is_left_to_the_type_check():
    assert spec(trainer_overrides={"trainer.total_epochs": "many"})["trainer_overrides"]["trainer.total_epochs"] == "many"


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_a_group_estimator_with_one_rollout_is_refused(estimator):
    refused("trainer_overrides.actor_rollout_ref.rollout.n", "compares the responses", "ppo",
            trainer_overrides={"algorithm.adv_estimator": estimator, "actor_rollout_ref.rollout.n": 1})


def test_gae_with_one_rollout_is_taken():
    assert spec("ppo", trainer_overrides={"actor_rollout_ref.rollout.n": 1})["trainer_overrides"][
        "actor_rollout_ref.rollout.n"] == 1


# --- 6. verl's string forms of numbers --------------------------------------------------------

@pytest.mark.parametrize("value, rendered", [("0.5_5", "'0.5_5'"), ("1_5", "'1_5'"), ("0.5_4.0", "'0.5_4.0'"),
                                             ("2.0", "2.0"), ("1e-6", "1e-6"), ("run_1", "run_1")])
def test_text_hydra_would_read_as_one_number_keeps_its_underscore(value, rendered):
    assert hydra_value(value) == rendered


def test_hydra_reads_the_quoted_lower_upper_form_as_text():
    from hydra.core.override_parser.overrides_parser import OverridesParser
    key = "algorithm.rollout_correction.rollout_is_threshold"
    for value in ("0.5_5", "0.5_4.0", "1_5"):
        (parsed,) = OverridesParser.create().parse_overrides(["%s=%s" % (key, hydra_value(value))])
        assert parsed.value() == value


# --- 1. dataset columns -----------------------------------------------------------------------

def test_rl_and_sft_workloads_name_the_columns_they_read():
    assert spec()["dataset_columns"] == {"prompt": "data.prompt_key", "data_source": "read by verl's reward managers",
                                         "reward_model.ground_truth": "read by verl's reward managers"}
    assert spec("sft")["dataset_columns"] == {"messages": "data.messages_key"}
    assert spec("sft", trainer_overrides={"data.messages_key": "conv"})["dataset_columns"] == {
        "conv": "data.messages_key"}
    assert spec("selftest")["dataset_columns"] == {}


RL_COLUMNS = ["data_source", "prompt", "ability", "reward_model", "reward_model.ground_truth", "extra_info"]


def columns_check(result, columns, prepared):
    check = healthy(result)
    check["dataset_columns"] = {key: columns for key in result["data_files"]}
    check["prepared_datasets"] = prepared
    return check


def test_a_dataset_without_the_columns_names_the_column_and_the_datasets_that_fit():
    result = spec(dataset="gsm8k_sft")
    prepared = {"gsm8k": {"train.parquet": RL_COLUMNS, "test.parquet": RL_COLUMNS},
                "gsm8k_sft": {"train.parquet": ["messages"], "test.parquet": ["messages"]}}
    (problem,) = mvp_submit_problems(columns_check(result, ["messages"], prepared), result, "worker_node", check_gpus=False)
    assert problem.startswith("dataset gsm8k_sft does not fit workload grpo")
    assert "/private/datasets/gsm8k_sft/train.parquet has no column prompt (data.prompt_key)" in problem
    assert "(prepared datasets that fit: gsm8k)" in problem and "Fix: set dataset" in problem


def test_a_dataset_with_the_columns_gives_no_problem():
    result = spec()
    check = columns_check(result, RL_COLUMNS, {"gsm8k": {"train.parquet": RL_COLUMNS, "test.parquet": RL_COLUMNS}})
    assert mvp_submit_problems(check, result, "worker_node", check_gpus=False) == []


def test_no_dataset_fits_says_so():
    result = spec("sft")
    (problem,) = mvp_submit_problems(columns_check(result, RL_COLUMNS, {"gsm8k": {"train.parquet": RL_COLUMNS}}),
                                     result, "worker_node", check_gpus=False)
    assert "has no column messages (data.messages_key)" in problem and "no dataset under /private/datasets fits" in problem


def test_the_head_reads_columns_from_the_parquet_schema(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import ray_submit_check
    rl = pa.table({"data_source": ["a"], "prompt": [[{"role": "user", "content": "q"}]],
                   "reward_model": [{"style": "rule", "ground_truth": "1"}]})
    sft = pa.table({"messages": [[{"role": "user", "content": "q"}]]})
    for name, table in (("rl", rl), ("sft", sft)):
        (tmp_path / name).mkdir()
        for base in ("train.parquet", "test.parquet"):
            pq.write_table(table, str(tmp_path / name / base))
    (tmp_path / "partial").mkdir()
    pq.write_table(rl, str(tmp_path / "partial" / "train.parquet"))
    files = {"data.train_files": str(tmp_path / "sft" / "train.parquet"),
             "data.val_files": str(tmp_path / "sft" / "test.parquet")}
    columns, prepared, skipped = ray_submit_check.dataset_columns({"dir": str(tmp_path), "files": files})
    assert skipped is None
    assert columns == {"data.train_files": ["messages"], "data.val_files": ["messages"]}
    assert sorted(prepared) == ["rl", "sft"]  # "partial" lacks test.parquet
    assert prepared["rl"]["train.parquet"] == ["data_source", "prompt", "reward_model", "reward_model.style",
                                               "reward_model.ground_truth"]
    missing, _, _ = ray_submit_check.dataset_columns({"dir": str(tmp_path), "files": {"x": str(tmp_path / "no")}})
    assert missing == {"x": None}


# --- 4. verl's own checks: mirrored ones and the snapshot's ---------------------------------

from mvp_verl_rules import composed_problems, mirrored_problems, run_snapshot_checks  # noqa: E402


def test_mirrored_checks_name_the_key_and_the_verl_function():
    base = {"trainer": {"nnodes": 1, "n_gpus_per_node": 1, "total_epochs": 1}, "data": {"train_batch_size": 4},
            "actor_rollout_ref": {"rollout": {"n": 1}}, "algorithm": {"adv_estimator": "gae"}}
    assert mirrored_problems(base) == []
    grpo = dict(base, algorithm={"adv_estimator": "grpo"})
    (problem,) = mirrored_problems(grpo)
    assert problem.startswith("actor_rollout_ref.rollout.n=1 with algorithm.adv_estimator=grpo")
    assert "compute_grpo_outcome_advantage" in problem
    epochs = dict(base, trainer=dict(base["trainer"], total_epochs=-1))
    (problem,) = mirrored_problems(epochs)
    assert problem.startswith("trainer.total_epochs=-1: must be >= 1")
    groups = dict(base, algorithm={"adv_estimator": "gae", "filter_groups": {"enable": True, "metric": None}})
    assert "_resolve_filter_groups_metric" in mirrored_problems(groups)[0]
    resume = dict(base, trainer=dict(base["trainer"], resume_mode="resume_path", resume_from_path="/private/jobs/x"))
    assert mirrored_problems(resume)[0].startswith("trainer.resume_from_path='/private/jobs/x'")


@pytest.fixture(scope="module")
def wheel_config_dir():
    from test_verl_examples import _fetch_wheel_tree
    return os.path.join(_fetch_wheel_tree(), "verl", "trainer", "config")


INVENTORIES = {
    # dev and prod add no mvp_job_overrides: their jobs are the catalog's, with the JobSpec files on top.
    "dev": os.path.join(ROOT, "inventories/dev/group_vars/all/10-dev.yml"),
    "prod": os.path.join(ROOT, "inventories/prod/group_vars/all/10-prod.yml"),
}


def gpu_requests():
    """(inventory, request) for each workload of the catalog as the dev and prod inventories build it,
    alone and with its JobSpec file from jobspecs/ on top."""
    cases = []
    for inventory, path in sorted(INVENTORIES.items()):
        with open(path) as handle:
            assert not (yaml.safe_load(handle) or {}).get("mvp_job_overrides"), "%s now has site overrides" % path
        for workload in sorted(w for w in CATALOG if CATALOG[w].get("module")):
            cases.append((inventory, {"workload": workload}))
            jobspec = os.path.join(ROOT, "jobspecs", workload + ".yaml")
            if os.path.isfile(jobspec):
                with open(jobspec) as handle:
                    cases.append((inventory, yaml.safe_load(handle)))
    return cases


GPU_REQUESTS = gpu_requests()


@pytest.mark.parametrize("inventory, request_", GPU_REQUESTS,
                         ids=["%s-%s-%s" % (i, r["workload"], "jobspec" if len(r) > 1 else "catalog")
                              for i, r in GPU_REQUESTS])
def test_the_catalog_passes_the_mirrored_checks_as_gpu_inventories_build_it(wheel_config_dir, inventory, request_):
    result = mvp_job_spec(dict(request_, submission_id="j"), CATALOG, DEFAULTS)
    assert result["needs_gpus"] and result["gpus_requested"] == 8
    assert composed_problems(wheel_config_dir, result["hydra_config"], result["hydra_overrides"]) == []


def test_grpo_without_n_fails_the_mirrored_check_on_verls_default(wheel_config_dir):
    # the builder refuses this already (test_a_group_estimator_with_one_rollout_is_refused); the head's
    # mirrored check sees verl's default n=1 on the composed config too
    result = spec("ppo")
    overrides = [o.replace("algorithm.adv_estimator=gae", "algorithm.adv_estimator=grpo")
                 for o in result["hydra_overrides"]]
    assert "algorithm.adv_estimator=grpo" in overrides
    (problem,) = composed_problems(wheel_config_dir, result["hydra_config"], overrides)
    assert problem.startswith("actor_rollout_ref.rollout.n=1 with algorithm.adv_estimator=grpo")


def verl_python():
    """A Python that can run verl's own checks (torch and verl's dependencies): MVP_TEST_VERL_PYTHON."""
    return os.environ.get("MVP_TEST_VERL_PYTHON")


def test_the_snapshots_checks_are_skipped_not_failed_without_torch(wheel_config_dir):
    probe = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("this Python has torch")
    result = spec()
    report = run_snapshot_checks(sys.executable, os.path.dirname(os.path.dirname(os.path.dirname(wheel_config_dir))),
                                 wheel_config_dir, "ppo_trainer", result["hydra_overrides"], timeout=120)
    assert report["errors"] == [] and report["skipped"].startswith("torch cannot be imported by %s" % sys.executable)


@pytest.mark.skipif(not verl_python(), reason="MVP_TEST_VERL_PYTHON (a Python with torch and verl's dependencies) unset")
@pytest.mark.parametrize("inventory, request_", GPU_REQUESTS,
                         ids=["%s-%s-%s" % (i, r["workload"], "jobspec" if len(r) > 1 else "catalog")
                              for i, r in GPU_REQUESTS])
def test_the_catalog_passes_verls_own_checks_as_gpu_inventories_build_it(wheel_config_dir, inventory, request_):
    result = mvp_job_spec(dict(request_, submission_id="j"), CATALOG, DEFAULTS)
    root = os.path.dirname(os.path.dirname(os.path.dirname(wheel_config_dir)))
    report = run_snapshot_checks(verl_python(), root, wheel_config_dir, result["hydra_config"],
                                 result["hydra_overrides"], timeout=300)
    assert report["skipped"] is None and report["errors"] == []


@pytest.mark.parametrize("key, value", [
    ("algorithm.rollout_correction.rollout_is_threshold", "0.5_5"),
    ("algorithm.rollout_correction.rollout_is_threshold", "0.5_4.0"),
    ("algorithm.rollout_correction.rollout_is_threshold", 2.0),
    ("algorithm.rollout_correction.rollout_rs_threshold", "0.999_1.001"),
    ("algorithm.rollout_correction.rollout_rs_threshold", "0.6_1.6,2.5"),
])
def test_verls_lower_upper_forms_pass_through_the_builder_and_the_head_check(wheel_config_dir, key, value):
    from ansible_collections.mvp.ray.plugins.module_utils.mvp_hydra import _compose, validate_overrides
    result = spec(trainer_overrides={key: value})
    assert validate_overrides(wheel_config_dir, result["hydra_config"], result["hydra_overrides"]) == []
    composed = _compose(wheel_config_dir, result["hydra_config"], result["hydra_overrides"])
    # verl receives what was written (rollout_corr_helper splits text at "_"; a number stays a number)
    assert composed.algorithm.rollout_correction[key.rsplit(".", 1)[-1]] == value


def test_a_result_is_kept_per_config_and_the_jobs_own_id_and_folder_do_not_count(tmp_path, wheel_config_dir):
    """A stand-in Python that answers like CHILD and counts its runs: the second job with the same
    config (another id and job directory) is answered from the cache without running it again."""
    from mvp_verl_rules import finish_snapshot_checks, save_snapshot_checks, start_snapshot_checks
    runs = tmp_path / "runs"
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho run >> %s\necho 'verl prints progress'\n"
                    "echo 'MVP_VERL_CHECK_RESULT={\"errors\": [\"verl.utils.config.validate_config: ValueError: x\"], "
                    "\"skipped\": null, \"seconds\": {\"total\": 1.0}}'\n" % runs)
    fake.chmod(0o755)
    root = os.path.dirname(os.path.dirname(os.path.dirname(wheel_config_dir)))

    def check(job):
        overrides = [
            o.replace("job-1", job) for o in spec()["hydra_overrides"]]
        handle = start_snapshot_checks(str(fake), root, wheel_config_dir, "ppo_trainer", overrides, 60,
                                       cache_dir=str(tmp_path / "cache"), job_dir="/private/jobs/" + job,
                                       submission_id=job)
        result = finish_snapshot_checks(handle)
        save_snapshot_checks(handle, dict(result, mirrored=["m"]))
        return result

    first, second = check("job-a"), check("job-b")
    assert first["errors"] == second["errors"] == ["verl.utils.config.validate_config: ValueError: x"]
    assert (first["cached"], second["cached"]) == (False, True) and second["mirrored"] == ["m"]
    assert runs.read_text().count("run") == 1
    check_other = start_snapshot_checks(str(fake), root, wheel_config_dir, "ppo_trainer", ["trainer.total_epochs=2"],
                                        60, cache_dir=str(tmp_path / "cache"))
    assert not finish_snapshot_checks(check_other)["cached"] and runs.read_text().count("run") == 2


def test_every_value_of_verls_example_launches_survives_the_builders_rendering():
    """Each override value of the corpus (tests/data/verl_examples_0.9.1.json), as Hydra reads it, rendered by
    hydra_value and read again, is the same value: a request carrying it gets what verl's script passes."""
    import json
    from hydra.core.override_parser.overrides_parser import OverridesParser
    parser = OverridesParser.create()
    with open(os.path.join(ROOT, "tests/data/verl_examples_0.9.1.json")) as handle:
        corpus = json.load(handle)
    checked = 0
    for entry in corpus:
        for parsed in parser.parse_overrides(entry["overrides"]):
            if parsed.is_delete() or parsed.is_sweep_override():
                continue
            value = parsed.value()
            (again,) = parser.parse_overrides(["%s=%s" % (parsed.key_or_group, hydra_value(value))])
            assert again.value() == value, (entry["script"], parsed.input_line)
            checked += 1
    assert checked > 5000
