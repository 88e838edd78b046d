"""Unit tests of mvp_resume: verl's known resume bugs, the epoch length, and the resume view of verl#7401."""
import json
import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_resume
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job_create import create_job_dir
from tests.unit.conftest import ROOT, unpacked_verl

HANDLER = "verl/utils/checkpoint/checkpoint_handler.py"
LEGACY_PPO = "verl/trainer/ppo/ray_trainer.py"
V1_PPO = "verl/trainer/ppo/v1/trainer_base.py"


def _source(release, rel):
    with open(os.path.join(unpacked_verl(release), rel), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("release", ["verl==0.9.0", "verl==0.9.1"])
def test_the_supported_releases_sft_handler_restores_the_data_state_unguarded(release):
    # verl#7401 is open: both supported releases restore data_<rank>.pt at an epoch's end.
    assert mvp_resume.restore_guarded(_source(release, HANDLER)) is False


@pytest.mark.parametrize("release", ["verl==0.9.0", "verl==0.9.1"])
def test_the_legacy_ppo_trainer_has_the_guard_of_verl_5725(release):
    assert mvp_resume.restore_guarded(_source(release, LEGACY_PPO)) is True


def test_the_v1_trainer_restores_unguarded_and_its_epoch_arithmetic_is_not_taken_for_a_guard():
    # trainer_base.py divides by steps_per_epoch (//) in fit(), which calls no restore: not a guard.
    source = _source("verl==0.9.1", V1_PPO)
    assert "// self.steps_per_epoch" in source
    assert mvp_resume.restore_guarded(source) is False


def _with_fix(source, where):
    """The 0.9.1 handler with an epoch-boundary guard added the way the open fixes describe it.

    ``where``: ``restore`` puts the check in _load_dataloader_state (verl#7974: skip when the resumed step is a
    multiple of steps_per_epoch), ``caller`` in load_checkpoint around the call.
    """
    if where == "restore":
        fixed, count = re.subn(
            r"(def _load_dataloader_state\(self, checkpoint_path: str\):\n(\s+)\"\"\"[^\n]*\"\"\"\n)",
            r"\1\2if self.steps_per_epoch and self.resume_global_step % self.steps_per_epoch == 0:\n\2    return\n",
            source)
    else:
        fixed, count = re.subn(
            r"\n(\s+)self\._load_dataloader_state\(checkpoint_path\)",
            r"\n\1if resume_step % self.steps_per_epoch:\n\1    self._load_dataloader_state(checkpoint_path)", source)
    assert count == 1
    return fixed


@pytest.mark.parametrize("where", ["restore", "caller"])
def test_a_release_with_the_fix_is_recognised_from_its_code(where):
    source = _with_fix(_source("verl==0.9.1", HANDLER), where)
    assert mvp_resume.restore_guarded(source) is True


@pytest.mark.parametrize("source", [None, "", "def (:", "x = 1\n"])
def test_unreadable_or_unrelated_code_cannot_tell(source):
    assert mvp_resume.restore_guarded(source) is None


@pytest.mark.parametrize("config, planned, rows, expected", [
    # verl's planned steps over the epochs, when total_training_steps is not set
    ({"trainer": {"total_epochs": 3, "total_training_steps": None}, "data": {"train_batch_size": 8}}, 24, None, 8),
    # total_training_steps set: the rows over the batch, the last partial batch dropped
    ({"trainer": {"total_epochs": 3, "total_training_steps": 5}, "data": {"train_batch_size": 8}}, 5, 70, 8),
    # train_max_samples caps the rows
    ({"trainer": {"total_epochs": 1, "total_training_steps": 5},
      "data": {"train_batch_size": 8, "train_max_samples": 33}}, 5, 64, 4),
    ({"trainer": {"total_epochs": 1, "total_training_steps": 5},
      "data": {"train_batch_size": 8, "train_max_samples": -1}}, 5, 64, 8),
    # nothing to count with
    ({"trainer": {"total_epochs": 3, "total_training_steps": 5}, "data": {"train_batch_size": 8}}, 5, None, None),
    ({}, None, None, None),
])
def test_steps_per_epoch(config, planned, rows, expected):
    steps, how = mvp_resume.steps_per_epoch(config, planned, rows)
    assert steps == expected
    assert how


def _job_dir(tmp_path, rows, batch, epochs, total=None, planned=True):
    """A finished SFT attempt's job directory: its data file, resolved config and driver log."""
    data = tmp_path / "datasets" / "train.parquet"
    data.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"messages": ["m%d" % i for i in range(rows)]}), str(data))
    job = tmp_path / "jobs" / "sft-a"
    (job / "config").mkdir(parents=True)
    (job / "logs").mkdir()
    (job / "config" / "resolved_config.yaml").write_text(json.dumps({
        "trainer": {"total_epochs": epochs, "total_training_steps": total},
        "data": {"train_batch_size": batch, "train_files": str(data)}}))
    plan = total if total is not None else rows // batch * epochs
    (job / "logs" / "driver.log").write_text(
        "dataset len: %d\n%s" % (rows, "Total training steps: %d,\n" % plan if planned else ""))
    return str(job)


def test_epoch_info_from_the_driver_log(tmp_path):
    info = mvp_resume.epoch_info(_job_dir(tmp_path, rows=64, batch=8, epochs=3))
    assert info["steps_per_epoch"] == 64 // 8
    assert "driver log" in info["how"]


def test_epoch_info_from_the_data_when_total_training_steps_is_set(tmp_path):
    info = mvp_resume.epoch_info(_job_dir(tmp_path, rows=70, batch=8, epochs=3, total=20))
    assert info["steps_per_epoch"] == 70 // 8
    assert "70 training rows" in info["how"]


def test_epoch_info_of_an_attempt_that_died_before_planning(tmp_path):
    info = mvp_resume.epoch_info(_job_dir(tmp_path, rows=64, batch=16, epochs=3, planned=False))
    assert info["steps_per_epoch"] == 64 // 16


DATA_STATE = {"files": "data_*.pt", "restore_file": HANDLER}
ENTRIES = ["data_0.pt", "extra_state_world_size_2_rank_0.pt", "extra_state_world_size_2_rank_1.pt", "huggingface",
           "model_world_size_2_rank_0.pt", "model_world_size_2_rank_1.pt", "optim_world_size_2_rank_0.pt",
           "optim_world_size_2_rank_1.pt"]


def _ckpt(step):
    return {"step": step, "path": "/private/jobs/sft-a/checkpoints/global_step_%d" % step, "entries": list(ENTRIES)}


def test_plan_at_an_epoch_boundary_on_an_unguarded_release():
    view_dir = "/private/jobs/sft-a-r1/config/resume"
    adjusted, notes = mvp_resume.plan(DATA_STATE, _ckpt(16), {"steps_per_epoch": 8, "how": "h"}, False, view_dir)
    view = view_dir + "/global_step_16"
    assert adjusted["loaded_from"] == view
    assert adjusted["issue"] == "verl#7401"
    assert adjusted["left_out"] == ["data_0.pt"]
    # every other entry is linked, relative to the view, to the checkpoint as saved
    assert sorted(adjusted["links"]) == sorted(view + "/" + name for name in ENTRIES if name != "data_0.pt")
    for link, target in adjusted["links"].items():
        assert os.path.normpath(os.path.join(view, target)) == _ckpt(16)["path"] + "/" + os.path.basename(link)
    assert "epoch 2" in adjusted["why"] and "verl#7401" in notes[0]


@pytest.mark.parametrize("step, epoch, guarded, note", [
    (12, {"steps_per_epoch": 8, "how": "h"}, False, None),            # mid-epoch: the state is the position
    (16, {"steps_per_epoch": 8, "how": "h"}, True, "skips the data loader's state"),   # fixed release
    (16, {"steps_per_epoch": None, "how": "no log"}, False, "cannot tell whether step 16 ends an epoch"),
])
def test_plan_leaves_the_checkpoint_as_saved(step, epoch, guarded, note):
    adjusted, notes = mvp_resume.plan(DATA_STATE, _ckpt(step), epoch, guarded, "/v")
    assert adjusted is None
    assert (note in notes[0]) if note else notes == []


def test_plan_without_a_data_state_file_or_declaration():
    ckpt = dict(_ckpt(16), entries=[n for n in ENTRIES if not n.startswith("data_")])
    assert mvp_resume.plan(DATA_STATE, ckpt, {"steps_per_epoch": 8}, False, "/v") == (None, [])
    assert mvp_resume.plan(None, _ckpt(16), {"steps_per_epoch": 8}, False, "/v") == (None, [])


def test_the_view_reads_the_checkpoint_and_leaves_it_unchanged(tmp_path):
    saved = tmp_path / "jobs" / "sft-a" / "checkpoints" / "global_step_16"
    saved.mkdir(parents=True)
    for name in ENTRIES:
        if name == "huggingface":
            (saved / name).mkdir()
            (saved / name / "config.json").write_text("{}")
        else:
            (saved / name).write_bytes(name.encode())
    before = {p.name: p.stat().st_mtime_ns for p in saved.iterdir()}
    ckpt = {"step": 16, "path": str(saved), "entries": sorted(os.listdir(str(saved)))}
    job = tmp_path / "jobs" / "sft-a-r1"
    adjusted, _notes = mvp_resume.plan(DATA_STATE, ckpt, {"steps_per_epoch": 8, "how": "h"}, None,
                                       str(job / "config" / "resume"))
    create_job_dir(str(job), {"config/job_spec.json": "{}"}, links=adjusted["links"])
    view = job / "config" / "resume" / "global_step_16"
    assert sorted(os.listdir(str(view))) == sorted(n for n in ENTRIES if n != "data_0.pt")
    assert (view / "model_world_size_2_rank_1.pt").read_bytes() == b"model_world_size_2_rank_1.pt"
    assert (view / "huggingface" / "config.json").read_text() == "{}"
    assert {p.name: p.stat().st_mtime_ns for p in saved.iterdir()} == before
    assert (saved / "data_0.pt").exists()


def test_the_docs_table_lists_every_known_bug():
    with open(os.path.join(ROOT, "docs", "jobs.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text[text.index("### verl's known resume bugs"):]
    section = section[:section.index("\n## ")] if "\n## " in section else section
    rows = [line for line in section.splitlines() if line.startswith("| [verl#")]
    by_issue = {re.match(r"\| \[(verl#\d+)\]", line).group(1): line for line in rows}
    assert sorted(by_issue) == sorted(bug["issue"] for bug in mvp_resume.KNOWN_BUGS)
    for bug in mvp_resume.KNOWN_BUGS:
        assert bug["url"] in by_issue[bug["issue"]]
        assert bug["action"] in by_issue[bug["issue"]]
