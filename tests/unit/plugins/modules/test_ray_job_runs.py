"""Unit tests of ray_job_runs with compare: what differs between runs, and the full code diff file."""
import json
import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
from ray_job_runs import main


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _cluster(root):
    """Two snapshots differing in one file and a run on each; returns the jobs folder."""
    for code_id, body in (("verl-a", "x = 1\n"), ("verl-b", "x = 2\n")):
        _write(os.path.join(root, "code", code_id, "verl/__init__.py"), body)
        rid = "run-" + code_id
        _write(os.path.join(root, "jobs", rid, FILES["job_spec"]),
               json.dumps({"submission_id": rid, "workload": "sft", "code_id": code_id,
                           "code_path": os.path.join(root, "code", code_id), "override_sources": {"a": "request"}}))
        _write(os.path.join(root, "jobs", rid, FILES["resolved_config"]), "a: %d\n" % len(body))
    return os.path.join(root, "jobs")


ARGS = {"submission_ids": ["run-verl-a", "run-verl-b"], "compare": True}


def test_compare_returns_both_diffs_and_writes_the_full_diff(tmp_path, run_module):
    jobs = _cluster(str(tmp_path))
    diff_file = str(tmp_path / "out" / "code.diff")
    result = run_module(main, dict(ARGS, jobs_dir=jobs, diff_file=diff_file, diff_max_lines=3))
    assert result["changed"] and result["code_diff"]["full_file"] == diff_file
    with open(diff_file, encoding="utf-8") as handle:
        text = handle.read()
    assert "-x = 1\n+x = 2\n" in text and result["code_diff"]["full_bytes"] == len(text.encode())
    pair = result["code_diff"]["pairs"][0]
    assert pair["diff"].count("\n") == 3 and pair["truncated"]
    assert result["config_diff"]["compared"] == ARGS["submission_ids"] and result["config_diff"]["rows"] == []


def test_check_mode_and_no_diff_file_write_nothing(tmp_path, run_module):
    jobs = _cluster(str(tmp_path))
    diff_file = str(tmp_path / "code.diff")
    result = run_module(main, dict(ARGS, jobs_dir=jobs, diff_file=diff_file), check_mode=True)
    assert not result["changed"] and result["code_diff"]["full_file"] is None and not os.path.exists(diff_file)
    result = run_module(main, dict(ARGS, jobs_dir=jobs))
    assert not result["changed"] and result["code_diff"]["full_file"] is None


def test_without_compare_no_diffs(tmp_path, run_module):
    result = run_module(main, {"jobs_dir": _cluster(str(tmp_path)), "submission_ids": ARGS["submission_ids"]})
    assert "config_diff" not in result and "code_diff" not in result


def test_negative_caps_are_refused(tmp_path, run_module):
    result = run_module(main, dict(ARGS, jobs_dir=_cluster(str(tmp_path)), diff_max_bytes=-1))
    assert result["failed"] and "diff_max_bytes" in result["msg"]
