"""Unit tests of module_utils mvp_job_create's pure parts: paths stay inside the job directory, shared files are rewritten
only when they differ."""
import os

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import write_text_atomic as write_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import differs
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job_create import safe_join


def test_job_dir_paths_stay_inside_and_shared_files_are_rewritten_only_when_they_differ(tmp_path):
    assert safe_join("/private/jobs/a", "config/job_spec.json") == "/private/jobs/a/config/job_spec.json"
    for bad in ("../b/x", "/etc/passwd"):
        with pytest.raises(ValueError):
            safe_join("/private/jobs/a", bad)
    target = tmp_path / "tools" / "mvp_entry.py"
    assert differs(str(target), "v1")
    write_atomic(str(target), "v1")
    assert target.read_text() == "v1" and oct(target.stat().st_mode & 0o777) == "0o644"
    assert not differs(str(target), "v1") and differs(str(target), "v2")
    assert os.listdir(tmp_path / "tools") == ["mvp_entry.py"]
