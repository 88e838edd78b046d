"""Unit tests of mvp_proc: command lines read from a /proc tree."""


def test_find_argv_reads_nul_separated_command_lines_of_a_proc_tree(tmp_path):
    from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_proc import argv_of, find_argv

    for pid, argv in (("12", [b"/usr/bin/python3", b"-m", b"http.server"]),
                      ("34", [b"/opt/ray/core/src/ray/raylet/raylet", b"--node_ip_address=10.0.0.3"])):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "cmdline").write_bytes(b"\0".join(argv) + b"\0")
    (tmp_path / "self").mkdir()
    assert find_argv("raylet", str(tmp_path)) == ["/opt/ray/core/src/ray/raylet/raylet", "--node_ip_address=10.0.0.3"]
    assert find_argv("gcs_server", str(tmp_path)) is None
    assert argv_of("99", str(tmp_path)) == []
