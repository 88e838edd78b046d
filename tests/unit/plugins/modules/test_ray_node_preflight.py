"""Unit tests of ray_node_preflight's pure parts: the mount table, the shared-storage probes, foreign ports,
files read as slurp returns them (which the interconnect filter reads)."""
import base64
import json
import os
import socket

import pytest

from ray_head import port_taken
from ansible_collections.mvp.ray.plugins.filter.mvp_interconnect_filters import mvp_interconnect_check
from ray_node_preflight import foreign_ports, mismatched, mount_fstype, read_file, write_probe


MOUNTINFO = (
    "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
    "30 22 0:40 / /private rw,relatime - nfs4 server:/export rw,vers=4.2\n"
    "31 30 0:41 / /private/scratch rw,relatime - tmpfs tmpfs rw\n"
    "32 22 0:42 / /privateer rw - ext4 /dev/sda1 rw\n"
)


@pytest.mark.parametrize("path, expected", [
    ("/private", "nfs4"), ("/private/jobs", "nfs4"), ("/private/scratch/x", "tmpfs"),
    ("/privateer", "ext4"), ("/tmp", "overlay")])
def test_mount_fstype_picks_the_longest_mount_point_holding_the_path(tmp_path, path, expected):
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    assert mount_fstype(path, str(info)) == expected


def test_mount_fstype_without_mountinfo_is_unknown(tmp_path):
    assert mount_fstype("/", str(tmp_path / "absent")) == "unknown"


def test_probes_written_by_one_node_are_read_back_and_others_reported(tmp_path):
    write_probe(str(tmp_path / "probe"), "w0", "token-1")
    write_probe(str(tmp_path / "probe"), "w1", "stale")
    assert mismatched(str(tmp_path / "probe"), {"w0": "token-1", "w1": "token-1", "w2": "token-1"}) == ["w1", "w2"]


def test_a_port_held_by_a_foreign_program_is_reported_and_a_free_one_is_not():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    busy = sock.getsockname()[1]
    free_sock = socket.socket()
    free_sock.bind(("127.0.0.1", 0))
    free = free_sock.getsockname()[1]
    free_sock.close()
    try:
        taken = foreign_ports({"mvp_ray_dashboard_port": busy, "mvp_ray_gcs_port": free})
        assert list(taken) == ["mvp_ray_dashboard_port"]
        assert taken["mvp_ray_dashboard_port"]["port"] == busy
        assert "pid %d" % os.getpid() in taken["mvp_ray_dashboard_port"]["owner"]
        assert port_taken(busy) and not port_taken(free)
    finally:
        sock.close()


def test_read_file_returns_what_slurp_would_and_a_missing_file_reads_as_not_there(tmp_path):
    record = {"state": "measured", "sizes": []}
    path = tmp_path / "interconnect_latest.json"
    path.write_text(json.dumps(record))
    found = read_file(str(path))
    assert found == {"content": base64.b64encode(path.read_bytes()).decode(), "encoding": "base64",
                     "source": str(path)}
    missing = read_file(str(tmp_path / "interconnect_baseline.json"))
    assert missing["failed"] and str(tmp_path / "interconnect_baseline.json") in missing["msg"]
    # The interconnect filter takes both as it takes slurp's results: no baseline yet.
    assert mvp_interconnect_check(found, missing)["state"] == mvp_interconnect_check(record, None)["state"]
