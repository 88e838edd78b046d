"""Unit tests of module_utils/cluster/mvp_gpu: nvidia-smi's CSV output parsed, foreign processes found.

The outputs are those of the stand-in tests/standins/nvidia-smi (shaped like real
nvidia-smi output), run for real here: the stand-in is a shell script.
"""
import os
import subprocess

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_gpu import (
    foreign_apps, parse_apps, parse_gpus, read_gpus)

STANDIN = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "standins", "nvidia-smi"))


@pytest.fixture()
def standin(tmp_path):
    """A copy of the stand-in in a temporary folder; returns (path, set_shape)."""
    path = tmp_path / "nvidia-smi"
    path.write_text(open(STANDIN).read())
    path.chmod(0o755)
    return str(path), lambda shape: (tmp_path / "nvidia-smi.shape").write_text(shape)


def _run_with(path):
    """subprocess.run that calls the stand-in at ``path`` for nvidia-smi."""
    def run(argv, **kw):
        return subprocess.run([path] + argv[1:], **kw)
    return run


def test_parse_gpus_reads_each_field_and_na_as_none():
    gpus = parse_gpus("0, GPU-a, NVIDIA A100-SXM4-80GB, 4, 81920\n1, GPU-b, Tesla, V100, [N/A], 16384\n")
    assert gpus == [{"index": 0, "uuid": "GPU-a", "name": "NVIDIA A100-SXM4-80GB", "used_mib": 4, "total_mib": 81920},
                    {"index": 1, "uuid": "GPU-b", "name": "Tesla, V100", "used_mib": None, "total_mib": 16384}]


def test_parse_apps_keeps_commas_in_process_names_and_empty_output_is_none():
    assert parse_apps("") == []
    assert parse_apps("GPU-b, 77, python train.py --a=1,2, 512\n") == [
        {"gpu_uuid": "GPU-b", "pid": "77", "process": "python train.py --a=1,2", "used_mib": 512}]


@pytest.mark.parametrize("text", ["0, GPU-a, 4\n", "garbage\n"])
def test_short_lines_are_refused(text):
    with pytest.raises(ValueError):
        parse_gpus(text)


def test_ray_processes_are_not_foreign():
    gpus = parse_gpus("0, GPU-a, A100, 10, 80\n1, GPU-b, A100, 10, 80\n")
    apps = parse_apps("GPU-a, 11, ray::WorkerDict, 5000\nGPU-b, 12, python3, 700\n")
    described = {"11": (True, "ray::WorkerDict (pid 11: ray::WorkerDict)"), "12": (False, "python3 (pid 12: python3 x.py)")}
    found = foreign_apps(gpus, apps, described.get)
    assert found == [{"gpu": 1, "pid": "12", "process": "python3 (pid 12: python3 x.py)", "used_mib": 700}]


def test_a_pid_not_visible_here_keeps_nvidia_smi_name():
    gpus = parse_gpus("0, GPU-a, A100, 10, 80\n")
    found = foreign_apps(gpus, parse_apps("GPU-a, 999999, /usr/bin/python3, 64\n"), lambda pid: (False, "? (pid %s: )" % pid))
    assert found[0]["process"] == "/usr/bin/python3" and found[0]["gpu"] == 0


@pytest.mark.parametrize("shape, count, busy", [("two-free", 2, []), ("one-busy", 2, [(1, "4194301", 3000)]),
                                                ("one-missing", 1, [])])
def test_read_gpus_with_the_standin(standin, shape, count, busy):
    path, set_shape = standin
    set_shape(shape)
    result = read_gpus(lambda pid: (False, "? (pid %s: )" % pid), run=_run_with(path))
    assert result["gpu_error"] == ""
    assert result["gpus"] == count == len(result["gpu_list"])
    assert [(a["gpu"], a["pid"], a["used_mib"]) for a in result["gpu_foreign"]] == busy


def test_read_gpus_reports_a_failing_nvidia_smi(standin):
    path, _ = standin
    def broken(argv, **kw):
        return subprocess.run([path, "--bad"], **kw)
    result = read_gpus(lambda pid: (False, ""), run=broken)
    assert result["gpus"] == -1 and "NVIDIA driver" in result["gpu_error"]
    missing = read_gpus(lambda pid: (False, ""), run=lambda argv, **kw: subprocess.run(["/no/such/nvidia-smi"], **kw))
    assert missing["gpus"] == -1 and missing["gpu_error"]
