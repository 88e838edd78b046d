"""Pure logic of the variation matrix: the ranking of example settings, the cases file against the
counts, the docs' markers (``python -m pytest -q tests/matrix/test_matrix.py``)."""
import json
import os
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import derive  # noqa: E402
import docs  # noqa: E402


def entry(script, *overrides):
    """One corpus entry as extract_verl_examples writes it."""
    return {"script": script, "module": "verl.trainer.main_ppo", "overrides": list(overrides)}


def test_rank_counts_scripts_not_calls():
    """A setting counts once per script; booleans and a leading + are normalised; sizes and paths are left out."""
    corpus = [
        entry("a.sh", "actor_rollout_ref.actor.use_kl_loss=True", "data.train_batch_size=8",
              "actor_rollout_ref.model.path=/m"),
        entry("a.sh", "actor_rollout_ref.actor.use_kl_loss=true"),
        entry("b.sh", "+actor_rollout_ref.actor.use_kl_loss=true", "algorithm.adv_estimator=rloo"),
        entry("c.sh", "actor_rollout_ref.actor.use_kl_loss=False"),
    ]
    counts = derive.rank(corpus)
    settings = {s["setting"]: s["scripts"] for s in counts["settings"]}
    assert settings == {"actor_rollout_ref.actor.use_kl_loss=true": 2, "actor_rollout_ref.actor.use_kl_loss=false": 1,
                        "algorithm.adv_estimator=rloo": 1}
    assert counts["settings"][0]["setting"] == "actor_rollout_ref.actor.use_kl_loss=true"
    assert counts["scripts"] == 3 and counts["trainer_calls"] == 4
    assert derive.lookup(counts, "actor_rollout_ref.actor.use_kl_loss") == 3
    assert derive.lookup(counts, "actor_rollout_ref.actor.use_kl_loss=True") == 2


def test_cases_match_the_committed_counts():
    """Every case's count is what the committed counts file says for its setting."""
    assert derive.check_cases(os.path.join(HERE, "cases.yml"), derive.DEFAULT_OUT) == []


def test_cases_are_well_formed():
    """Each case names a catalog workload, an expectation, and a reason when it expects a failure."""
    with open(os.path.join(HERE, "cases.yml"), encoding="utf-8") as handle:
        cases = yaml.safe_load(handle)["cases"]
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names))
    for case in cases:
        assert case["workload"] in ("sft", "grpo", "ppo")
        assert case["expectation"] in ("trains", "platform_unsupported", "refused")
        assert case["expectation"] == "trains" or case.get("reason")
        assert case.get("counted") or case.get("source")
    assert any(c.get("ci") for c in cases)


def test_replace_between_markers(tmp_path):
    """The generated body replaces what lies between the markers, and a missing marker is an error."""
    text = "head\n<!-- m:begin -->\nold\n<!-- m:end -->\ntail\n"
    assert docs.replace_between(text, "<!-- m:begin -->", "<!-- m:end -->", "new", "f") == \
        "head\n<!-- m:begin -->\nnew\n<!-- m:end -->\ntail\n"
    with pytest.raises(SystemExit):
        docs.replace_between("no markers", "<!-- m:begin -->", "<!-- m:end -->", "new", "f")


def test_outcome_texts():
    """A trained row says the summary and the resume; a failure says the cause seen; no row is 'not run'."""
    assert docs.outcome(None, 2) == "not run"
    row = {"expectation": "trains", "result": "pass", "summary": "trained 2 of 2 steps"}
    assert docs.outcome(row, 2) == "PASS: trained 2 of 2 steps; resumed from step 2, continued at 3"
    row = {"expectation": "platform_unsupported", "result": "fail", "observed": "config_rejected",
           "summary": "x", "problems": ["cause 'config_rejected'"]}
    assert docs.outcome(row, 2) == "FAIL: config_rejected (x); expected platform_unsupported"
    assert json.dumps(row)  # rows are plain JSON
