"""Issue 28: what verl would refuse only after the model is loaded is refused before submission.

Paths stay where they belong, loggers in any spelling, sizes, Hydra's own keys, dataset
columns, verl's string forms of numbers. The head's side of them: the parquet schema
(plugins/module_utils/request/test_mvp_submit_check.py), verl's own start-up checks
(plugins/module_utils/request/test_mvp_verl_rules.py) and the Hydra check of the forms
(plugins/module_utils/request/test_mvp_hydra.py).
"""
import os
import shlex

import pytest

from mvp_jobspec import HYDRA_SUBDIR, hydra_value, mvp_loggers, mvp_submit_problems
from request_then_spec import mvp_job_spec
from test_mvp_jobspec_submit_problems import healthy

try:
    from ansible.errors import AnsibleFilterError
except ImportError:  # pragma: no cover
    AnsibleFilterError = ValueError

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


@pytest.fixture
def spec(catalog, spec_defaults):
    """Build job-1 of ``workload`` with the shared defaults."""
    def build(workload="grpo", **request):
        return mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), catalog, spec_defaults)
    return build


@pytest.fixture
def refused(catalog, spec_defaults):
    """Build, expect a refusal naming ``field`` with ``text`` and a fix, and return its message.

    The request's own rules refuse in the ray_job_request action (JobSpecError, a ValueError), the builder's in
    the filter (AnsibleFilterError)."""
    def refused_(field, text, workload="grpo", defaults=None, **request):
        with pytest.raises((AnsibleFilterError, ValueError)) as info:
            mvp_job_spec(dict(workload=workload, submission_id="job-1", **request), catalog,
                         defaults or spec_defaults)
        message = str(info.value)
        assert "job spec field '%s'" % field in message and text in message and "Fix:" in message, message
        return message
    return refused_


def words(result):
    return shlex.split(result["entrypoint"])


# --- 2. every path stays where it belongs -------------------------------------------------

@pytest.mark.parametrize("model", ["../../../etc", "/etc/models/m", "/private/user/code/m", "a/../../b"])
def test_a_model_outside_common_models_is_refused(model, refused):
    message = refused("model", "outside /private/common/models", model=model)
    assert posixpath_norm(model) in message


def posixpath_norm(model):
    import posixpath
    return posixpath.normpath(model if model.startswith("/") else "/private/common/models/" + model)


@pytest.mark.parametrize("model, path", [("m", "/private/common/models/m"),
                                         ("/private/common/models/org/m", "/private/common/models/org/m")])
def test_a_model_under_common_models_is_taken(model, path, spec):
    result = spec(model=model)
    assert result["model_path"] == path
    assert "actor_rollout_ref.model.path=%s" % path in words(result)


@pytest.mark.parametrize("reward", ["/private/datasets/r.py", "/tmp/r.py", "/private/user/code/../../etc/r.py"])
def test_a_reward_outside_user_code_is_refused(reward, refused):
    refused("reward_fn_path", "outside /private/user/code", reward_fn_path=reward)


def test_an_inventory_reward_outside_user_code_names_the_inventory_setting(spec_defaults, refused):
    site = {"grpo": {"reward_fn_path": "/opt/r.py"}}
    refused("submit_job_site_overrides.grpo.reward_fn_path", "outside /private/user/code",
            defaults=dict(spec_defaults, site_overrides=site))


@pytest.mark.parametrize("key, value, text", [
    ("trainer.rollout_data_dir", "/tmp/rollouts", "outside the shared storage"),
    ("trainer.validation_data_dir", "rollouts", "a relative path"),
    ("+data.tool_config_path", "/etc/tools.yaml", "outside the shared storage"),
    ("+data.extra_files", ["/private/a.parquet", "/srv/b.parquet"], "outside the shared storage"),
    ("global_profiler.save_path", "/private/../tmp/p", "outside the shared storage"),
])
def test_a_path_override_outside_the_shared_storage_is_refused(key, value, text, refused):
    message = refused("trainer_overrides.%s" % key, text, trainer_overrides={key: value})
    assert "/private/jobs/job-1" in message


@pytest.mark.parametrize("key, value", [
    ("trainer.rollout_data_dir", "/private/jobs/job-1/rollouts"),
    ("+data.extra_files", ["/private/datasets/x/a.parquet"]),
    ("trainer.validation_data_dir", None),
    ("trainer.rollout_data_dir", "${trainer.default_local_dir}/r"),
])
def test_a_path_override_inside_the_shared_storage_is_taken(key, value, spec):
    assert spec(trainer_overrides={key: value})["trainer_overrides"][key] == value


def test_hydra_output_goes_to_the_job_logs_and_the_request_cannot_move_it(spec, refused):
    result = spec()
    assert result["hydra_dir"] == "/private/jobs/job-1/" + HYDRA_SUBDIR
    assert "hydra.run.dir=/private/jobs/job-1/logs/hydra" in words(result)
    assert spec("selftest")["hydra_dir"] is None
    refused("trainer_overrides.hydra.run.dir", "is set by the job spec builder",
            trainer_overrides={"hydra.run.dir": "/etc"})


@pytest.mark.parametrize("key, value", [("hydra.sweep.dir", "/etc"), ("hydra.sweep.dir", "/private/jobs/other"),
                                        ("hydra.output_subdir", "../../etc"), ("hydra.output_subdir", "/etc")])
def test_hydra_output_keys_outside_the_job_are_refused(key, value, refused):
    refused("trainer_overrides.%s" % key, "Hydra", trainer_overrides={key: value})


def test_hydra_output_keys_inside_the_job_are_taken(spec):
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
def test_loggers_are_normalised_once(given, names, spec):
    assert mvp_loggers(given) == names
    result = spec(trainer_overrides={"trainer.logger": given})
    assert result["trainer_overrides"]["trainer.logger"] == names
    assert "trainer.logger=[%s]" % ",".join(names) in words(result)
    assert (result["runtime_env"]["env_vars"].get("VERL_FILE_LOGGER_PATH") is not None) == ("file" in names)


@pytest.mark.parametrize("given", ["[console,wandb]", "wandb", "console,wandb", ["console", "wandb"]])
def test_wandb_in_any_spelling_needs_the_key(given, catalog, spec_defaults, refused):
    refused("trainer_overrides.trainer.logger", "no W&B API key", trainer_overrides={"trainer.logger": given})
    taken = mvp_job_spec({"workload": "grpo", "submission_id": "j", "trainer_overrides": {"trainer.logger": given}},
                         catalog, dict(spec_defaults, wandb_key_set=True))
    assert "wandb" in taken["trainer_overrides"]["trainer.logger"]


@pytest.mark.parametrize("given", [{"a": 1}, 5, "[]", [1]])
def test_a_logger_value_that_names_no_logger_is_refused(given, refused):
    refused("trainer_overrides.trainer.logger", "", trainer_overrides={"trainer.logger": given})


# --- sizes, steps, epochs, GRPO's n -----------------------------------------------------------

@pytest.mark.parametrize("workload, key, value", [
    ("grpo", "trainer.nnodes", 0), ("grpo", "trainer.n_gpus_per_node", -1), ("sft", "trainer.total_epochs", -1),
    ("ppo", "trainer.total_epochs", 0), ("ppo", "trainer.total_training_steps", 0),
    ("grpo", "data.train_batch_size", 0), ("grpo", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 0),
    ("sft", "data.micro_batch_size_per_gpu", "0"), ("ppo", "trainer.total_epochs", 0.5),
])
def test_a_size_below_one_is_refused(workload, key, value, refused):
    message = refused("trainer_overrides.%s" % key, "must be a whole number >= 1, got %r" % (value,), workload,
                      trainer_overrides={key: value})
    assert "set %s to 1 or more" % key in message


@pytest.mark.parametrize("key, value", [("trainer.total_training_steps", None), ("trainer.total_epochs", "2"),
                                        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", None)])
def test_a_size_of_one_or_more_or_a_nullable_null_is_taken(key, value, spec):
    assert spec(trainer_overrides={key: value})["trainer_overrides"][key] == value


def test_text_in_a_size_is_left_to_the_type_check(spec):
    assert spec(trainer_overrides={"trainer.total_epochs": "many"})["trainer_overrides"]["trainer.total_epochs"] == "many"


@pytest.mark.parametrize("estimator", ["grpo", "rloo"])
def test_a_group_estimator_with_one_rollout_is_refused(estimator, refused):
    refused("trainer_overrides.actor_rollout_ref.rollout.n", "compares the responses", "ppo",
            trainer_overrides={"algorithm.adv_estimator": estimator, "actor_rollout_ref.rollout.n": 1})


def test_gae_with_one_rollout_is_taken(spec):
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


# --- 1. dataset columns -----------------------------------------------------------------------

def test_rl_and_sft_workloads_name_the_columns_they_read(spec):
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


def test_a_dataset_without_the_columns_names_the_column_and_the_datasets_that_fit(spec):
    result = spec(dataset="gsm8k_sft")
    prepared = {"gsm8k": {"train.parquet": RL_COLUMNS, "test.parquet": RL_COLUMNS},
                "gsm8k_sft": {"train.parquet": ["messages"], "test.parquet": ["messages"]}}
    (problem,) = mvp_submit_problems(columns_check(result, ["messages"], prepared), result, "worker_node", check_gpus=False)
    assert problem.startswith("dataset gsm8k_sft does not fit workload grpo")
    assert "/private/datasets/gsm8k_sft/train.parquet has no column prompt (data.prompt_key)" in problem
    assert "(prepared datasets that fit: gsm8k)" in problem and "Fix: set dataset" in problem


def test_a_dataset_with_the_columns_gives_no_problem(spec):
    result = spec()
    check = columns_check(result, RL_COLUMNS, {"gsm8k": {"train.parquet": RL_COLUMNS, "test.parquet": RL_COLUMNS}})
    assert mvp_submit_problems(check, result, "worker_node", check_gpus=False) == []


def test_no_dataset_fits_says_so(spec):
    result = spec("sft")
    (problem,) = mvp_submit_problems(columns_check(result, RL_COLUMNS, {"gsm8k": {"train.parquet": RL_COLUMNS}}),
                                     result, "worker_node", check_gpus=False)
    assert "has no column messages (data.messages_key)" in problem and "no dataset under /private/datasets fits" in problem
