"""Unit tests of the preflight's rules (module_utils mvp_preflight): every check, its text and what passes.

Each case builds a node's inspection (the RETURN keys of ray_node_preflight) from a healthy one and
changes one thing; the expected texts are built from the case's own inputs.
"""
import copy

import pytest
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_preflight import GIB, cluster_problems, node_problems

EXPECT = {"shared_root": "/private", "require_nfs": False, "expected_gpus": 2, "min_shm_size": "8g",
          "min_free_gb": 20, "disk_paths": {"mvp_ray_temp_dir": "/tmp/ray", "mvp_shared_root": "/private"},
          "head": "head0", "probe_dir": "/private/ray/preflight", "gpu_workers": ["w0", "w1"]}


def healthy(gpus=None):
    """A node that passes every check; with ``gpus``, a GPU worker's inspection with that many free GPUs."""
    found = {"versions": "python 3.11.2, ray 2.60.0", "ports_taken": {}, "mismatched_probes": [],
             "shared_root": {"exists": True, "isdir": True, "writable": True, "fstype": "nfs4"},
             "shm_bytes": 16 * GIB, "free_bytes": {"mvp_ray_temp_dir": 100 * GIB, "mvp_shared_root": 500 * GIB}}
    if gpus is not None:
        found.update(gpus=gpus, gpu_error="", gpu_foreign=[])
    return found


def with_changes(found, **changes):
    """A deep copy of ``found`` with ``changes`` applied (dicts merged one level deep)."""
    out = copy.deepcopy(found)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = value
    return out


def test_a_healthy_cluster_has_no_problem():
    nodes = [["head0", healthy()], ["w0", healthy(2)], ["w1", healthy(2)]]
    assert cluster_problems(nodes, EXPECT) == []


def test_a_port_taken_on_the_head_names_the_port_the_variable_and_the_owner():
    owner = "python3 (pid 77: python3 -m http.server)"
    found = with_changes(healthy(), ports_taken={"mvp_ray_dashboard_port": {"port": 18265, "owner": owner}})
    [text] = node_problems("head0", found, EXPECT)
    assert text == ("Port 18265 (mvp_ray_dashboard_port) is already taken on the head by %s. "
                    "Stop that program, or set the variable to a free port." % owner)


@pytest.mark.parametrize("storage, word", [
    ({"exists": False, "isdir": False, "writable": False}, "missing"),
    ({"exists": True, "isdir": True, "writable": False}, "not a writable directory"),
    ({"exists": True, "isdir": False, "writable": False}, "not a writable directory"),
])
def test_shared_storage_missing_or_read_only(storage, word):
    [text] = node_problems("w0", with_changes(healthy(), shared_root=storage), EXPECT)
    assert text.startswith("w0: %s (mvp_shared_root) is %s. " % (EXPECT["shared_root"], word))


def test_nfs_is_required_only_with_require_nfs():
    local = with_changes(healthy(), shared_root={"fstype": "ext4"})
    assert node_problems("w0", local, EXPECT) == []
    [text] = node_problems("w0", local, dict(EXPECT, require_nfs="true"))
    assert text.startswith("w0: /private is ext4, not NFS (preflight_require_nfs is true).")
    assert node_problems("w0", healthy(), dict(EXPECT, require_nfs=True)) == []  # nfs4 passes
    assert node_problems("w0", local, dict(EXPECT, require_nfs="False")) == []  # a text from the inventory


def test_a_node_without_the_heads_probe_names_the_head_and_the_folder():
    [text] = node_problems("w1", with_changes(healthy(), mismatched_probes=["probe"]), EXPECT)
    assert text.startswith("w1 does not see the head's /private: the probe file the head (%s) just wrote under %s"
                           % (EXPECT["head"], EXPECT["probe_dir"]))


def test_gpu_checks_apply_only_where_gpus_were_counted():
    # A CPU node with no /dev/shm and full disks passes: those checks are for GPU workers.
    cpu = with_changes(healthy(), shm_bytes=0, free_bytes={"mvp_ray_temp_dir": 0, "mvp_shared_root": 0})
    assert node_problems("w0", cpu, EXPECT) == []


@pytest.mark.parametrize("gpus, error, shown", [(1, "", "1 GPUs (nvidia-smi ok)"),
                                                (-1, "nvidia-smi: not found", "no GPUs (nvidia-smi: not found)")])
def test_a_gpu_count_other_than_expected(gpus, error, shown):
    [text] = node_problems("w0", with_changes(healthy(gpus), gpu_error=error), EXPECT)
    assert text == "w0 sees %s, the inventory expects %d (mvp_ray_worker_gpus)." % (shown, EXPECT["expected_gpus"])


def test_foreign_gpu_memory_lists_every_process():
    apps = [{"gpu": 1, "pid": 4194301, "process": "/usr/bin/python3", "used_mib": 3000},
            {"gpu": 0, "pid": 12, "process": "train", "used_mib": 5}]
    [text] = node_problems("w0", with_changes(healthy(2), gpu_foreign=apps), EXPECT)
    listed = "; ".join("GPU %(gpu)s pid %(pid)s %(process)s (%(used_mib)s MiB)" % app for app in apps)
    assert text.startswith("w0: GPU memory is held by processes that are not Ray's: %s. A job" % listed)


def test_shm_below_the_setting_is_shown_in_gib():
    shm = 3 * GIB // 2
    [text] = node_problems("w0", with_changes(healthy(2), shm_bytes=shm), EXPECT)
    assert text.startswith("w0: /dev/shm is %.1f GiB, below %s (preflight_min_shm_size)"
                           % (shm / GIB, EXPECT["min_shm_size"]))
    exact = with_changes(healthy(2), shm_bytes=8 * GIB)
    assert node_problems("w0", exact, EXPECT) == []


def test_every_disk_below_the_setting_is_named_with_its_variable():
    free = {"mvp_ray_temp_dir": 5 * GIB, "mvp_shared_root": 19 * GIB}
    [text] = node_problems("w0", with_changes(healthy(2), free_bytes=free), EXPECT)
    for var, path in EXPECT["disk_paths"].items():
        assert "w0: %s (%s) has %.1f GiB free, below %s GiB (preflight_min_free_gb)" % (
            path, var, free[var] / GIB, EXPECT["min_free_gb"]) in text
    assert node_problems("w0", with_changes(healthy(2), free_bytes=free), dict(EXPECT, min_free_gb="0.01")) == []


def test_versions_that_differ_name_every_node_and_its_version():
    other = "python 3.11.2, ray 2.59.0"
    nodes = [["head0", healthy()], ["w0", healthy()], ["w1", with_changes(healthy(), versions=other)]]
    [text] = cluster_problems(nodes, EXPECT)
    assert "head0 has %s; w0 has %s; w1 has %s." % (healthy()["versions"], healthy()["versions"], other) in text
    assert text.startswith("Python/Ray versions differ across the Ray nodes:")


def test_gpu_counts_that_differ_among_gpu_workers():
    nodes = [["head0", healthy()], ["w0", healthy(2)], ["w1", healthy(1)]]
    texts = cluster_problems(nodes, EXPECT)
    assert texts[0].startswith("w1 sees 1 GPUs")  # the node's own problem first
    assert texts[1].startswith("The GPU workers offer different GPU counts (w0: 2, w1: 1)")
    assert cluster_problems(nodes, dict(EXPECT, gpu_workers=[])) == texts[:1]


def test_skipped_results_are_left_out_and_each_nodes_problems_come_in_input_order():
    nodes = [["head0", {"skipped": True, "changed": False}], ["w1", with_changes(healthy(), mismatched_probes=["p"])],
             ["w0", with_changes(healthy(), shared_root={"exists": False, "isdir": False, "writable": False})]]
    texts = cluster_problems(nodes, EXPECT)
    assert [text.split()[0] for text in texts] == ["w1", "w0:"]
