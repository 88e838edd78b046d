"""Unit tests of the mvp_preflight_problems filter's input handling (the rules: test_mvp_preflight.py)."""
import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.mvp.ray.plugins.filter.mvp_preflight_filters import FilterModule, mvp_preflight_problems
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_preflight import EXPECT_KEYS

EXPECT = {key: "" for key in EXPECT_KEYS}
EXPECT.update(shared_root="/private", require_nfs=False, expected_gpus=0, min_shm_size="1g", min_free_gb=1,
              disk_paths={}, head="h", probe_dir="/private/ray/preflight", gpu_workers=[])
MISSING = {"versions": "python 3.11, ray 2.60", "shared_root": {"exists": False}}


def test_pairs_and_a_mapping_give_the_same_texts():
    pairs = mvp_preflight_problems([["w0", MISSING]], EXPECT)
    assert pairs == mvp_preflight_problems({"w0": MISSING}, EXPECT)
    assert len(pairs) == 1 and pairs[0].startswith("w0: /private (mvp_shared_root) is missing.")


@pytest.mark.parametrize("bad", ["w0", [["w0"]], [1, 2]])
def test_an_input_of_another_shape_is_refused(bad):
    with pytest.raises(AnsibleFilterError, match="list of \\[host, result\\] pairs"):
        mvp_preflight_problems(bad, EXPECT)


def test_a_missing_expectation_is_named():
    expect = dict(EXPECT)
    del expect["probe_dir"]
    with pytest.raises(AnsibleFilterError, match="expect misses probe_dir"):
        mvp_preflight_problems([], expect)


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"mvp_preflight_problems": mvp_preflight_problems}
