"""Unit tests of the pure parts of the verl CPU platform plugin (images/verl-cpu)."""
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "images/verl-cpu/packages/mvp_verl_cpu"))

from mvp_verl_cpu.patches import dedupe_backend  # noqa: E402


@pytest.mark.parametrize("given, expected", [
    ("cpu:gloo,cpu:gloo", "cpu:gloo"),
    ("cpu:gloo,cuda:nccl", "cpu:gloo,cuda:nccl"),
    ("cpu:gloo, cpu:gloo ,cuda:nccl", "cpu:gloo,cuda:nccl"),
    ("gloo", "gloo"),
    (None, None),
])
def test_backend_strings_lose_repeated_devices(given, expected):
    assert dedupe_backend(given) == expected


def test_entry_point_is_declared_for_verls_plugin_group():
    with open(os.path.join(ROOT, "images/verl-cpu/packages/mvp_verl_cpu/pyproject.toml")) as handle:
        text = handle.read()
    assert '[project.entry-points."verl.plugins"]' in text
    assert 'cpu = "mvp_verl_cpu.autoload"' in text


def test_cpu_uses_the_cuda_engine_registration_and_nothing_else_changes():
    from mvp_verl_cpu.patches import engine_fallback

    fsdp, other = object(), object()
    assert engine_fallback({"cuda": fsdp, "npu": other}, "cpu") is fsdp
    assert engine_fallback({("cuda", "nvidia"): fsdp, "cuda": other}, "cpu") is fsdp
    assert engine_fallback({"npu": other}, "cpu") is None
    assert engine_fallback({"cuda": fsdp}, "cuda") is None


def test_after_import_patches_a_module_when_it_is_first_imported(tmp_path, monkeypatch):
    from mvp_verl_cpu.patches import after_import

    (tmp_path / "mvp_probe_mod.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    after_import("mvp_probe_mod", lambda module: seen.append(module.VALUE))
    assert seen == []
    import mvp_probe_mod  # noqa: F401

    assert seen == [1]
    after_import("mvp_probe_mod", lambda module: seen.append(module.VALUE + 1))
    assert seen == [1, 2]
    sys.modules.pop("mvp_probe_mod", None)
