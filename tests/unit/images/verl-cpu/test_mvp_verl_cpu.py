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


@pytest.mark.parametrize("requested, accelerator", [(True, True), (True, False), (False, True), (False, False)])
def test_offloaded_shards_are_pinned_only_where_an_accelerator_can_pin_them(requested, accelerator):
    from mvp_verl_cpu.patches import offload_pin_memory

    assert offload_pin_memory(requested, accelerator) is (requested and accelerator)


def test_the_offload_policy_class_itself_is_patched_once_for_every_holder_of_it(monkeypatch):
    """verl's FSDP engine builds CPUOffloadPolicy(pin_memory=True) for the reference policy (issue 41); the
    patch changes the class, so a name imported before the patch builds unpinned policies too."""
    import dataclasses
    import types

    from mvp_verl_cpu import patches

    @dataclasses.dataclass
    class CPUOffloadPolicy:  # the shape of torch.distributed.fsdp.CPUOffloadPolicy
        pin_memory: bool = True

    imported_before = CPUOffloadPolicy
    fsdp = types.SimpleNamespace(CPUOffloadPolicy=CPUOffloadPolicy)
    monkeypatch.setattr(patches, "accelerator_available", lambda: False)
    patches._patch_cpu_offload_policy(fsdp)
    patches._patch_cpu_offload_policy(fsdp)  # idempotent: one wrapper
    assert imported_before(pin_memory=True).pin_memory is False and imported_before().pin_memory is False
    assert not getattr(CPUOffloadPolicy.__init__.__wrapped__, "_mvp_verl_cpu", False)
    monkeypatch.setattr(patches, "accelerator_available", lambda: True)
    assert imported_before().pin_memory is True and imported_before(pin_memory=False).pin_memory is False

