"""Issue 40: a bad-input case that cannot run (its head lacks the module the check needs) fails the table unless
the scenario declares it expected, and the scenarios name real cases: the local scenario (no torch on its
head) declares the verl-backed ones skipped, the train scenario (verl-cpu image) runs exactly those.

The table's playbook runs and docker calls are replaced here (pure logic of the skip rule); the cases run
for real in molecule (local and train) and ``make reliability``.
"""
import os
import sys

import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "reliability"))

import bad_inputs  # noqa: E402
from suite import print_table, skipped_row  # noqa: E402

TORCH_CASES = sorted(case[0] for case in bad_inputs.cases("/tmp", "x") if case[4:] == ("torch",))
# What the local scenario's node image lacks and the train scenario's verl-cpu image has: torch, and the CPU
# platform plugin that declares the verl releases it runs (issue 51).
VERL_IMAGE_CASES = sorted(case[0] for case in bad_inputs.cases("/tmp", "x") if case[4:] in (("torch",),
                                                                                         ("mvp_verl_cpu",)))


@pytest.fixture
def table(monkeypatch, capsys):
    """Run bad_inputs.main with ``argv`` on a head without torch; return (exit code, printed table)."""
    monkeypatch.setattr(bad_inputs, "prepare", lambda host_shared, head: (lambda: None))
    monkeypatch.setattr(bad_inputs, "head_imports", lambda head, python, module: module != "torch")
    monkeypatch.setattr(bad_inputs, "run_case", lambda args, case: (case[0], case[3], "failed, message found", 0,
                                                                   "PASS"))

    def run(*argv):
        monkeypatch.setattr(sys, "argv", ["bad_inputs.py", "--existing-id", "x"] + list(argv))
        code = bad_inputs.main()
        return code, capsys.readouterr().out
    return run


def test_the_verl_backed_cases_are_the_ones_that_need_torch():
    assert "batch smaller than verl's mini batch" in TORCH_CASES and len(TORCH_CASES) >= 4


def test_a_skip_nobody_declared_fails_the_table(table):
    code, out = table("--only", "unknown workload", TORCH_CASES[0])
    assert code == 1
    assert "FAIL (skipped, not declared)" in out and "bad inputs: 1 passed, 1 failed" in out


def test_a_declared_skip_is_listed_and_does_not_count_as_passed(table):
    code, out = table("--only", "unknown workload", TORCH_CASES[0], "--expect-skipped", TORCH_CASES[0])
    assert code == 0
    assert "bad inputs: 1 passed, 0 failed, 1 skipped (declared expected)" in out


def test_a_declared_name_that_is_no_case_is_an_error(table):
    code, _ = table("--expect-skipped", "no such case")
    assert code == 2


def test_skipped_rows_and_the_closing_line():
    rows = [("a", "m", "failed, message found", 0, "PASS"), skipped_row("b", "m", "torch missing", True)]
    assert rows[1][-1] == "SKIPPED" and skipped_row("b", "m", "r", False)[-1].startswith("FAIL")
    assert print_table(("case", "expected", "observed", "files", "result"), rows, "t", 0, skipped=1) == 0


def argv_after(play_file, option):
    """The names given after ``option`` in the bad-input runner's argv of a molecule verify file."""
    with open(os.path.join(ROOT, play_file)) as handle:
        plays = yaml.safe_load(handle)
    for play in plays:
        for task in play.get("tasks") or []:
            argv = (task.get("ansible.builtin.command") or {}).get("argv") or []
            if any(str(a).endswith("tests/reliability/bad_inputs.py") for a in argv) and option in argv:
                names = []
                for arg in argv[argv.index(option) + 1:]:
                    if str(arg).startswith("--"):
                        break
                    names.append(arg)
                return sorted(names)
    return None


def test_local_declares_the_verl_backed_cases_skipped_and_train_runs_them():
    # issue 51: the release outside the platform's range, and the same accepted at the user's risk (its own code
    # asks Ray for a resource no node offers)
    platform = sorted(case[0] for case in bad_inputs.cases("/tmp", "x") if case[4:] == ("mvp_verl_cpu",))
    assert platform == ["snapshot of a release the platform does not run",
                        "snapshot whose resource request no node offers"]
    assert VERL_IMAGE_CASES == sorted(TORCH_CASES + platform)
    assert argv_after("molecule/local/verify/bad_inputs.yml", "--expect-skipped") == VERL_IMAGE_CASES
    assert argv_after("molecule/train/verify.yml", "--only") == VERL_IMAGE_CASES


def test_the_old_release_snapshot_is_made_only_when_its_case_runs(table, monkeypatch):
    # issue 51: the verl 0.8.0 snapshot (snapshot.yml from PyPI) is made before the cases that name it, not otherwise
    made = []
    monkeypatch.setattr(bad_inputs, "make_old_release", lambda inventory: made.append(inventory))
    table("--only", "snapshot whose resource request no node offers")
    assert len(made) == 1
    table("--only", "unknown workload")
    assert len(made) == 1
