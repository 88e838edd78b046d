"""Unit tests of mvp_reward_check: a reward file imported in a real subprocess, as verl's reward workers would.

Each test makes a code snapshot holding a fake ``verl`` package with a marker, and a reward file that imports
``verl`` and raises unless it got the snapshot's one: the check must put the snapshot first on ``sys.path``.
"""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.request import mvp_reward_check
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_reward_check import (
    CHECK_SCRIPT, REWARD_KWARGS, check_reward)

MARKER = "mvp-fake-snapshot-7f3a"
GUARD = [
    "import verl",
    "if getattr(verl, 'MVP_SNAPSHOT_MARKER', None) != %r:" % MARKER,
    "    raise RuntimeError('imported the wrong verl: %s' % getattr(verl, '__file__', None))",
]
GOOD = ["def compute_score(data_source, solution_str, ground_truth, extra_info=None):",
        "    return float(solution_str == ground_truth)"]


@pytest.fixture
def snapshot(tmp_path):
    root = tmp_path / "snapshot"
    (root / "verl").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text("MVP_SNAPSHOT_MARKER = %r\n" % MARKER)
    return root


def _reward(tmp_path, lines, name="reward.py"):
    """Write the guard and ``lines`` to a reward file; return (path, {1-based line of each marked line})."""
    folder = tmp_path / "user" / "code" / "rewards"
    folder.mkdir(parents=True, exist_ok=True)
    text = GUARD + list(lines)
    path = folder / name
    path.write_text("\n".join(line.replace("  # <K>", "") for line in text) + "\n")
    marked = [number for number, line in enumerate(text, 1) if line.endswith("  # <K>")]
    return str(path), (marked[0] if marked else None)


def _check(snapshot, path, **kwargs):
    return check_reward(sys.executable, str(snapshot), path, **kwargs)


def test_a_good_file_passes_and_imports_the_snapshots_verl(tmp_path, snapshot):
    path, _ = _reward(tmp_path, GOOD)
    assert _check(snapshot, path) == ""


def test_the_guard_refuses_a_verl_that_is_not_the_snapshots(tmp_path, snapshot):
    # the same file with a snapshot whose verl lacks the marker: proves the guard (and the path order) is judged
    (snapshot / "verl" / "__init__.py").write_text("MVP_SNAPSHOT_MARKER = 'another'\n")
    path, _ = _reward(tmp_path, GOOD)
    problem = _check(snapshot, path)
    assert "RuntimeError: imported the wrong verl: %s" % (snapshot / "verl" / "__init__.py") in problem
    assert "at line 3" in problem


def test_a_syntax_error_names_its_line(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["def compute_score(data_source, solution_str, ground_truth, extra_info=None):",
                                    "    x = (1,",
                                    "    return x ]  # <K>"])
    problem = _check(snapshot, path)
    assert problem.startswith("reward_fn_path %s does not compile: SyntaxError: " % path)
    assert "at line %d " % line in problem
    assert problem.endswith("Nothing was written.")
    assert "Traceback" not in problem


def test_an_indentation_error_is_a_syntax_error_too(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["def compute_score(data_source, solution_str, ground_truth, extra_info=None):",
                                    "return 1.0  # <K>"])
    problem = _check(snapshot, path)
    assert "IndentationError: " in problem and "at line %d " % line in problem


def test_an_exception_at_import_names_the_exception_and_its_line(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["TABLE = {'a': 1}",
                                    "WEIGHT = TABLE['b']  # <K>"] + GOOD)
    problem = _check(snapshot, path)
    assert problem.startswith("reward_fn_path %s fails when imported: KeyError: 'b' at line %d " % (path, line))
    assert problem.endswith("Nothing was written.")


def test_the_innermost_line_in_the_file_is_named(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["def _load():",
                                    "    return 1 / 0  # <K>",
                                    "SCALE = _load()"] + GOOD)
    problem = _check(snapshot, path)
    assert "ZeroDivisionError: division by zero at line %d " % line in problem


def test_a_missing_module_is_named_at_its_import_line(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["import mvp_no_such_module_for_rewards  # <K>"] + GOOD)
    problem = _check(snapshot, path)
    assert "ModuleNotFoundError: No module named 'mvp_no_such_module_for_rewards' at line %d " % line in problem


def test_a_syntax_error_in_a_module_the_file_imports_names_that_file(tmp_path, snapshot):
    (snapshot / "mvp_helper.py").write_text("X = 1\ndef broken(:\n    pass\n")
    path, _ = _reward(tmp_path, ["import mvp_helper"] + GOOD)
    problem = _check(snapshot, path)
    assert "SyntaxError: " in problem and "at %s line 2 " % (snapshot / "mvp_helper.py") in problem


def test_a_missing_function_names_it_and_the_override_key(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["def score(data_source, solution_str, ground_truth, extra_info=None):",
                                 "    return 0.0"])
    problem = _check(snapshot, path)
    assert problem == ("reward_fn_path %s has no function compute_score (reward.custom_reward_function.name). "
                       "Fix: define compute_score in the file, or set reward.custom_reward_function.name in "
                       "trainer_overrides to the function's name. Nothing was written." % path)


def test_a_name_that_is_not_callable_is_refused(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["compute_score = 0.5"])
    problem = _check(snapshot, path)
    assert "compute_score (reward.custom_reward_function.name) is not callable (compute_score is a float)" in problem


def test_a_wrong_signature_names_verls_arguments(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["def compute_score(a, b):  # <K>",
                                    "    return 0.0"])
    problem = _check(snapshot, path)
    assert problem.startswith("reward_fn_path %s: compute_score(...) at line %d does not accept verl's arguments "
                              "data_source, solution_str, ground_truth, extra_info: TypeError: " % (path, line))
    assert "(signature compute_score(a, b))" in problem
    assert problem.endswith("Nothing was written.")


def test_an_unknown_keyword_is_refused_too(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["def compute_score(data_source, solution_str, ground_truth):",
                                 "    return 0.0"])
    problem = _check(snapshot, path)
    assert "does not accept verl's arguments" in problem and "extra_info" in problem.split("TypeError: ")[1]


def test_a_function_taking_kwargs_passes(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["def compute_score(**kwargs):",
                                 "    return 0.0"])
    assert _check(snapshot, path) == ""


def test_an_async_function_passes(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["async def compute_score(data_source, solution_str, ground_truth, extra_info):",
                                 "    return 0.0"])
    assert _check(snapshot, path) == ""


def test_a_custom_name(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["def my_reward(data_source, solution_str, ground_truth, extra_info=None):",
                                 "    return 0.0"])
    assert _check(snapshot, path, name="my_reward") == ""
    problem = _check(snapshot, path)
    assert "has no function compute_score" in problem
    problem = _check(snapshot, path, name="other_reward")
    assert "has no function other_reward (reward.custom_reward_function.name)" in problem


def test_reward_kwargs_are_bound(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["def compute_score(data_source, solution_str, ground_truth, extra_info, *, scale):",
                                 "    return scale"])
    assert _check(snapshot, path, reward_kwargs={"scale": 2.0}) == ""
    problem = _check(snapshot, path)
    assert "does not accept verl's arguments data_source, solution_str, ground_truth, extra_info: " in problem
    assert "scale" in problem.split("TypeError: ")[1]
    # a reward kwarg the function does not take
    problem = _check(snapshot, path, reward_kwargs={"scale": 1, "bonus": 1})
    assert "and reward.custom_reward_function.reward_kwargs bonus, scale: TypeError: " in problem


def test_reward_model_arguments_when_the_job_has_a_reward_model(tmp_path, snapshot):
    path, _ = _reward(tmp_path, GOOD)
    assert _check(snapshot, path) == ""
    problem = _check(snapshot, path, reward_model=True)
    assert "reward_router_address" in problem


def test_a_slow_import_is_stopped_at_the_timeout(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["import time", "time.sleep(30)"] + GOOD)
    problem = _check(snapshot, path, timeout=2)
    assert problem.startswith("reward_fn_path %s was not judged: " % path)
    assert "did not finish within the check's timeout of 2 s" in problem
    assert problem.endswith("Nothing was written.")


def test_prints_at_import_and_threads_do_not_spoil_the_result(tmp_path, snapshot):
    path, _ = _reward(tmp_path, ["print('{\"ok\": false}')",
                                 "import threading, time",
                                 "threading.Thread(target=time.sleep, args=(30,)).start()"] + GOOD)
    assert _check(snapshot, path, timeout=20) == ""


def test_nothing_is_written_beside_the_file_or_in_the_snapshot(tmp_path, snapshot):
    (snapshot / "mvp_helper.py").write_text("X = 1\n")
    path, _ = _reward(tmp_path, ["import mvp_helper"] + GOOD)
    assert _check(snapshot, path) == ""
    written = [os.path.join(folder, name) for top in (snapshot, tmp_path / "user")
               for folder, dirs, files in os.walk(str(top)) for name in dirs + files if "__pycache__" in name]
    assert written == []


def test_a_missing_file(tmp_path, snapshot):
    path = str(tmp_path / "nope.py")
    problem = _check(snapshot, path)
    assert problem.startswith("reward_fn_path %s does not exist" % path)


def test_a_file_uri_is_loaded_as_verl_does(tmp_path, snapshot):
    path, _ = _reward(tmp_path, GOOD)
    assert _check(snapshot, "file://" + path) == ""


def test_a_python_that_does_not_start(tmp_path, snapshot):
    path, _ = _reward(tmp_path, GOOD)
    problem = check_reward(str(tmp_path / "no-python"), str(snapshot), path)
    assert "was not judged: the nodes' Python" in problem and problem.endswith("Nothing was written.")


def test_output_without_a_result_is_a_problem(tmp_path, snapshot, monkeypatch):
    monkeypatch.setattr(mvp_reward_check, "CHECK_SCRIPT", "import sys; sys.stderr.write('boom'); sys.exit(3)")
    path, _ = _reward(tmp_path, GOOD)
    problem = _check(snapshot, path)
    assert "printed no result (exit 3): boom" in problem


def test_the_script_prints_one_json_line_and_exits_0(tmp_path, snapshot):
    path, line = _reward(tmp_path, ["X = 1 / 0  # <K>"])
    proc = subprocess.run([sys.executable, "-I", "-c", CHECK_SCRIPT, str(snapshot), path, "compute_score", "{}"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60, cwd=str(snapshot))
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    result = json.loads(lines[0])
    assert result["ok"] is False and result["problem"] == "import" and result["line"] == line
    assert result["error"] == "ZeroDivisionError: division by zero"
    assert REWARD_KWARGS == ("data_source", "solution_str", "ground_truth", "extra_info")
