"""Which verl releases the platform layer runs (module_utils/request/mvp_release.py): the version rules, the
declaration read in a real Python through a real entry point, the refusal and its words."""
import subprocess
import sys

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.request import mvp_release


@pytest.mark.parametrize("version,spec,inside", [
    ("0.9.1", ">=0.9.0,<0.10", True),
    ("0.9.0", ">=0.9.0,<0.10", True),
    ("0.8.0", ">=0.9.0,<0.10", False),
    ("0.8.0.dev", ">=0.9.0,<0.10", False),   # verl's v0.8.0 tag says 0.8.0.dev
    ("0.10.0", ">=0.9.0,<0.10", False),
    ("0.10.0.dev", ">=0.9.0,<0.10", False),
    ("0.9.7", "==0.9.*", True),
    ("0.10.1", "==0.9.*", False),
    ("0.9.3", "~=0.9.1", True),
    ("1.0.0", "~=0.9.1", False),
    ("0.9.1", "!=0.9.1", False),
])
def test_a_version_is_in_a_range_by_its_release_numbers(version, spec, inside):
    assert mvp_release.in_range(version, spec) is inside


def test_unreadable_versions_and_clauses_are_named():
    with pytest.raises(ValueError, match="'main'"):
        mvp_release.in_range("main", ">=0.9")
    with pytest.raises(ValueError, match="'=>0.9'"):
        mvp_release.in_range("0.9.1", "=>0.9")


def test_the_snapshot_version_is_verls_own_file(tmp_path):
    assert mvp_release.snapshot_version(str(tmp_path)) is None
    (tmp_path / "verl" / "version").mkdir(parents=True)
    (tmp_path / "verl" / "version" / "version").write_text("0.9.1\n")
    assert mvp_release.snapshot_version(str(tmp_path)) == "0.9.1"


def test_the_platform_layers_are_read_from_entry_points_in_the_given_python(tmp_path):
    # A real venv (as the nodes' /opt/mvp/venv) with a distribution whose dist-info declares one mvp.platform
    # entry point; the declaration is read in that venv's Python, not in this one.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    declared = {"layer": "fake layer 1.0", "verl": ">=0.9.0,<0.10", "why": "test"}
    (site / "fakeplat").mkdir()
    (site / "fakeplat" / "__init__.py").write_text("PLATFORM = %r\n" % declared)
    info = site / "fakeplat-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplat\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[mvp.platform]\nfake = fakeplat:PLATFORM\n")
    assert mvp_release.platform_layers(str(tmp_path / "venv" / "bin" / "python")) == [dict(declared, name="fake")]
    assert mvp_release.platform_layers(sys.executable) == []  # this venv declares none
    assert mvp_release.platform_layers(str(tmp_path / "no-python")) == []


def test_the_cpu_plugin_declares_its_releases_and_the_refusal_names_them():
    sys.path.insert(0, "images/verl-cpu/packages/mvp_verl_cpu")
    try:
        import mvp_verl_cpu
    finally:
        sys.path.pop(0)
    layer = dict(mvp_verl_cpu.PLATFORM, name="verl-cpu")
    release = {"version": "0.8.0", "platforms": [layer]}
    problem = mvp_release.release_problem(release, "verl-0.8.0")
    assert problem.startswith("code_id verl-0.8.0 is verl 0.8.0, outside the releases this cluster's platform layer "
                              "runs: %s runs verl %s" % (layer["layer"], mvp_verl_cpu.VERL_RELEASES))
    assert "accept_unsupported_release: true" in problem
    assert mvp_release.release_problem(release, "verl-0.8.0", accepted=True) == ""
    assert mvp_release.release_problem(dict(release, version="0.9.1"), "verl-0.9.1") == ""
    assert mvp_release.release_problem({"version": "0.8.0", "platforms": []}, "x") == ""  # nothing declared
    assert "unknown version" in mvp_release.release_problem(dict(release, version=None), "x")


@pytest.mark.parametrize("value,accepted", [(True, True), ("true", True), ("yes", True), (False, False),
                                            ("false", False), (None, False)])
def test_accept_unsupported_release_takes_ansibles_booleans(value, accepted, catalog, spec_defaults):
    # `-e accept_unsupported_release=true` gives the text 'true'; a JobSpec file a YAML boolean
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import check_request
    request = {"workload": "sft", "submission_id": "j"}
    if value is not None:
        request["accept_unsupported_release"] = value
    assert check_request(request, catalog, spec_defaults)["accept_unsupported_release"] is accepted


def test_accept_unsupported_release_refuses_anything_else_naming_the_field(catalog, spec_defaults):
    from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import JobSpecError, check_request
    with pytest.raises(JobSpecError) as error:
        check_request({"workload": "sft", "submission_id": "j", "accept_unsupported_release": "perhaps"}, catalog,
                      spec_defaults)
    assert "'accept_unsupported_release': 'perhaps' is not true or false" in str(error.value)
