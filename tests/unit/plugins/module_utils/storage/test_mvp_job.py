"""The job contract (plugins/module_utils/storage/mvp_job.py): ids, the job directory, its file names, and who uses
them."""
import datetime
import glob
import os
import re

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.storage import mvp_job
from request_then_spec import mvp_job_spec
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job_create import safe_join

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))


@pytest.mark.parametrize("value,ok", [
    ("sft-20261121-120000-3fa2c1", True), ("a", True), ("A.b_c-1", True), ("x" * 128, True),
    ("x" * 129, False), ("-lead", False), (".hidden", False), ("a/b", False), ("../etc", False),
    ("a b", False), ("", False), (None, False), (7, False),
])
def test_submission_ids(value, ok):
    assert mvp_job.is_submission_id(value) is ok


def test_new_submission_id_is_prefix_utc_stamp_and_six_hex_digits():
    now = datetime.datetime(2026, 11, 21, 12, 0, 5, tzinfo=datetime.timezone.utc)
    assert mvp_job.new_submission_id("grpo", now=now, suffix="00ff10") == "grpo-20261121-120005-00ff10"
    fresh = {mvp_job.new_submission_id("sft") for _ in range(20)}
    assert len(fresh) == 20 and all(re.match(r"^sft-\d{8}-\d{6}-[0-9a-f]{6}$", value) for value in fresh)
    with pytest.raises(ValueError, match="prefix"):
        mvp_job.new_submission_id("a/b")


def test_job_dir_and_every_path_of_it():
    directory = mvp_job.job_dir("/private", "sft-1")
    assert directory == "/private/jobs/sft-1"
    with pytest.raises(ValueError):
        mvp_job.job_dir("/private", "../etc")
    paths = mvp_job.job_paths(directory)
    assert paths["job_dir"] == directory
    assert set(paths) == set(mvp_job.FILES) | {"job_dir"}
    for name, rel in mvp_job.FILES.items():
        assert paths[name] == directory + "/" + rel == mvp_job.job_file(directory, name)
        # every file lives in one of the folders made with the job directory
        assert rel.split("/")[0] in mvp_job.SUBDIRS


def test_the_spec_carries_the_contract_paths_and_the_job_dir_writer_accepts_them():
    """The builder's paths are the contract's, and the module that writes the job directory takes them as they are."""
    import yaml
    with open(os.path.join(ROOT, "inventories/common/all/00-mvp-workloads.yml")) as handle:
        catalog = yaml.safe_load(handle)["mvp_workloads"]
    defaults = {"shared_root": "/private", "code_id": "verl-0.9.1", "python": "python", "worker_resource": "worker_node",
                "address": "http://127.0.0.1:8265", "model": "tiny", "expect_workers": 2,
                "priority_classes": {"normal": 0}}
    spec = mvp_job_spec({"workload": "sft", "submission_id": "sft-x"}, catalog, defaults)
    assert spec["paths"] == mvp_job.job_paths("/private/jobs/sft-x")
    assert spec["metrics_file"] == spec["paths"]["metrics"]
    assert spec["hydra_dir"] == spec["paths"]["hydra"]
    assert spec["trainer_overrides"]["trainer.default_local_dir"] == spec["paths"]["checkpoints"]
    assert ("--log " + spec["paths"]["driver_log"]) in spec["entrypoint"]
    for name in ("job_spec", "runtime_env", "submit_cmd"):
        assert safe_join(spec["job_dir"], spec["paths"][name]) == spec["paths"][name]
    for outside in ("/private/jobs/sft-y/config/job_spec.json", "/private/jobs/sft-x/../sft-y/x"):
        with pytest.raises(ValueError):
            safe_join(spec["job_dir"], outside)


def test_no_module_or_job_tool_spells_a_job_file_name_itself():
    """Every job file name is taken from mvp_job.FILES: the literal names appear nowhere else in the code."""
    names = [rel for rel in mvp_job.FILES.values() if "." in rel]  # files, not folders
    offenders = []
    packages = sorted(os.path.dirname(os.path.relpath(path, ROOT))
                      for path in glob.glob(os.path.join(ROOT, "plugins", "module_utils", "*", "__init__.py")))
    for folder in ["plugins/modules", "plugins/filter", "plugins/action", "roles/job_tools/files"] + packages:
        for entry in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not entry.endswith(".py") or entry == "mvp_job.py":
                continue
            with open(os.path.join(ROOT, folder, entry)) as handle:
                code = [line for line in handle if not line.lstrip().startswith("#")]
            # docstrings and DOCUMENTATION may name the files; code lines that build paths may not
            for number, line in enumerate(code, 1):
                if ("os.path.join" in line or "posixpath.join" in line) and any(
                        '"%s"' % part in line for name in names for part in name.split("/")[1:]):
                    offenders.append("%s/%s: %s" % (folder, entry, line.strip()))
    assert offenders == []


def test_no_task_template_or_playbook_joins_a_job_path_itself():
    """Roles, playbooks and templates ask the contract for job paths (filters mvp_jobs_dir, mvp_job_dir, mvp_job_file,
    or a spec's ``paths``): a path built with ``~ '/logs/...'`` or ``}}/jobs/`` would drift from mvp_job.FILES."""
    folders = {part for rel in mvp_job.FILES.values() for part in rel.split("/")[:1]} | {mvp_job.JOBS_SUBDIR}
    joined = re.compile(r"""(~\s*['"]/(%s)\b)|(\}\}/(%s)\b)""" % ("|".join(sorted(folders)), "|".join(sorted(folders))))
    offenders = []
    for base in ("roles", "playbooks"):
        for where, _dirs, files in os.walk(os.path.join(ROOT, base)):
            if "/files" in where:
                continue
            for entry in files:
                if not entry.endswith((".yml", ".j2")):
                    continue
                with open(os.path.join(where, entry), encoding="utf-8") as handle:
                    for number, line in enumerate(handle, 1):
                        if not line.lstrip().startswith("#") and joined.search(line):
                            offenders.append("%s:%d: %s" % (os.path.relpath(os.path.join(where, entry), ROOT), number,
                                                            line.strip()))
    assert offenders == []


def test_the_submission_id_rule_is_written_once():
    """The id pattern lives in mvp_job.SUBMISSION_ID_RE; code, tasks and docs name it instead of repeating it."""
    pattern = mvp_job.SUBMISSION_ID_RE.pattern.strip("^$")
    offenders = []
    for base in ("plugins", "roles", "playbooks", "docs", "inventories"):
        for where, _dirs, files in os.walk(os.path.join(ROOT, base)):
            for entry in files:
                path = os.path.join(where, entry)
                if entry.endswith((".py", ".yml", ".j2", ".md")) and not path.endswith("storage/mvp_job.py"):
                    with open(path, encoding="utf-8") as handle:
                        if pattern in handle.read():
                            offenders.append(os.path.relpath(path, ROOT))
    assert offenders == []
