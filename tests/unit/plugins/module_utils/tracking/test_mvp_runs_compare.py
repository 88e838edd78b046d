"""Unit tests of mvp_runs.compare_runs: reading what differs between runs from job directories and snapshots."""
import difflib
import json
import os

import yaml

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import compare_runs, read_run, read_yaml
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_snapshot import write_manifest

ACTOR = "verl/trainer/config/actor/actor.yaml"
GENERATED = "verl/trainer/config/_generated_ppo_trainer.yaml"
TRAINER = "verl/trainer/config/ppo_trainer.yaml"


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _snapshot(root, code_id, lr, manifest=True):
    """A snapshot whose actor config sets optim.lr to ``lr`` (YAML text, as verl writes it: 1e-6)."""
    path = os.path.join(root, "common/code/verl", code_id)
    _write(os.path.join(path, "verl/__init__.py"), "")
    _write(os.path.join(path, ACTOR), "optim:\n  # Learning rate\n  lr: %s\n  weight_decay: 0.01\n" % lr)
    _write(os.path.join(path, GENERATED), "actor_rollout_ref:\n  actor:\n    optim:\n      lr: 1.0e-06\n")
    _write(os.path.join(path, TRAINER), "data:\n  train_batch_size: 1024\n")
    if manifest:
        write_manifest(code_id, path)
    return path


def _job(root, rid, code_path, config, sources):
    """A job directory with its spec and (unless config is None) its resolved_config.yaml; returns the run."""
    job_dir = os.path.join(root, "jobs", rid)
    spec = {"submission_id": rid, "workload": "ppo", "code_path": code_path,
            "code_id": os.path.basename(code_path), "override_sources": sources}
    _write(os.path.join(job_dir, FILES["job_spec"]), json.dumps(spec))
    if config is not None:
        _write(os.path.join(job_dir, FILES["resolved_config"]),
               config if isinstance(config, str) else yaml.safe_dump(config))
    return read_run(job_dir)


def _config(lr, batch, rid):
    return {"actor_rollout_ref": {"actor": {"optim": {"lr": lr, "weight_decay": 0.01}}},
            "data": {"train_batch_size": batch}, "trainer": {"experiment_name": rid}}


SOURCES = {"data.train_batch_size": "request", "trainer.experiment_name": "project"}


def _three_runs(root):
    a = _snapshot(root, "verl-a", "1e-6")
    b = _snapshot(root, "verl-b", "3e-6", manifest=False)
    return a, b, [_job(root, "r1", a, _config(1e-6, 16, "r1"), SOURCES),
                  _job(root, "r2", b, _config(3e-6, 16, "r2"), SOURCES),
                  _job(root, "r3", a, _config(1e-6, 32, "r3"), SOURCES)]


def test_read_yaml_reads_floats_without_a_dot_as_hydra_does(tmp_path):
    path = str(tmp_path / "c.yaml")
    _write(path, "lr: 1e-6\nx: 1.0e-06\nn: 3\ns: '1e-6'\ni: ${oc.env:HOME}\n")
    assert read_yaml(path) == ({"lr": 1e-6, "x": 1e-6, "n": 3, "s": "1e-6", "i": "${oc.env:HOME}"}, None)
    assert read_yaml(str(tmp_path / "none.yaml")) == (None, "missing")


def test_a_changed_default_is_named_with_both_values_and_the_snapshot_file(tmp_path):
    _a, _b, runs = _three_runs(str(tmp_path))
    configs, _code, _full = compare_runs(runs)
    rows = {row["key"]: row for row in configs["rows"]}
    assert sorted(rows) == ["actor_rollout_ref.actor.optim.lr", "data.train_batch_size"]
    lr = rows["actor_rollout_ref.actor.optim.lr"]
    assert lr["values"] == {"r1": json.dumps(1e-6), "r2": json.dumps(3e-6), "r3": json.dumps(1e-6)}
    assert lr["sources"] == ["default"]
    # The file that differs between the snapshots comes before the generated reference that holds the same value.
    assert lr["origins"]["r1"]["files"] == [ACTOR, GENERATED]
    assert lr["origins"]["r2"]["files"] == [ACTOR]
    assert lr["origins"]["r2"]["label"] == "default of verl-b: %s" % ACTOR
    batch = rows["data.train_batch_size"]
    assert batch["sources"] == ["request"] and batch["values"]["r3"] == json.dumps(32)
    assert configs["compared"] == ["r1", "r2", "r3"] and configs["missing"] == [] and configs["errors"] == {}


def test_the_code_diff_compares_each_other_snapshot_with_the_baseline(tmp_path):
    a, b, runs = _three_runs(str(tmp_path))
    _configs, code, full = compare_runs(runs)
    assert (code["baseline"], code["baseline_code_id"]) == ("r1", "verl-a")
    assert code["records"] == {"verl-a": "recorded", "verl-b": "computed"}
    (pair,) = code["pairs"]
    assert (pair["from"], pair["to"], pair["runs"]) == ("verl-a", "verl-b", ["r2"])
    assert [r["path"] for r in pair["changed"]] == [ACTOR] and pair["added"] == pair["removed"] == []
    with open(os.path.join(a, ACTOR), encoding="utf-8") as old, open(os.path.join(b, ACTOR), encoding="utf-8") as new:
        expected = "".join(difflib.unified_diff(old.readlines(), new.readlines(), "verl-a/" + ACTOR, "verl-b/" + ACTOR))
    assert pair["diff"] == expected and expected in full


def test_another_baseline_turns_the_comparison_around(tmp_path):
    _a, _b, runs = _three_runs(str(tmp_path))
    _configs, code, _full = compare_runs(runs, baseline_id="r2")
    (pair,) = code["pairs"]
    assert (code["baseline"], pair["from"], pair["to"], pair["runs"]) == ("r2", "verl-b", "verl-a", ["r1", "r3"])
    # An id that is not a run: the first run.
    assert compare_runs(runs, baseline_id="nope")[1]["baseline"] == "r1"


def test_runs_of_one_snapshot_have_no_code_pairs(tmp_path):
    a = _snapshot(str(tmp_path), "verl-a", "1e-6")
    runs = [_job(str(tmp_path), rid, a, _config(1e-6, batch, rid), SOURCES) for rid, batch in (("r1", 16), ("r2", 32))]
    configs, code, full = compare_runs(runs)
    assert code["pairs"] == [] and full == ""
    assert [row["key"] for row in configs["rows"]] == ["data.train_batch_size"]


def test_jobs_without_or_with_a_broken_resolved_config(tmp_path):
    root = str(tmp_path)
    a = _snapshot(root, "verl-a", "1e-6")
    runs = [_job(root, "r1", a, _config(1e-6, 16, "r1"), SOURCES), _job(root, "s1", a, None, {}),
            _job(root, "r2", a, "a: [unclosed\n", SOURCES)]
    configs, _code, _full = compare_runs(runs)
    assert configs["compared"] == ["r1"] and configs["missing"] == ["s1", "r2"] and configs["rows"] == []
    assert list(configs["errors"]) == ["r2"]


def test_a_deleted_snapshot_is_reported_not_raised(tmp_path):
    root = str(tmp_path)
    a = _snapshot(root, "verl-a", "1e-6")
    gone = os.path.join(root, "common/code/verl/verl-gone")
    runs = [_job(root, "r1", a, _config(1e-6, 16, "r1"), SOURCES), _job(root, "r2", gone, _config(1e-6, 16, "r2"), SOURCES)]
    _configs, code, full = compare_runs(runs)
    assert "has no verl/ package" in code["pairs"][0]["error"] and full == ""


def test_no_runs():
    configs, code, full = compare_runs([])
    assert configs["rows"] == [] and code["pairs"] == [] and full == ""
