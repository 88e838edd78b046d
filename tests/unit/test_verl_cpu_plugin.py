"""Unit tests of the pure parts of the verl CPU platform plugin (images/verl-cpu)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
    assert 'cpu = "mvp_verl_cpu:register"' in text
