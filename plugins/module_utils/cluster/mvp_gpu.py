# -*- coding: utf-8 -*-
"""Read a node's GPUs with nvidia-smi, and what else holds their memory.

Formats are nvidia-smi's CSV queries (``nvidia-smi --help-query-gpu`` and
``--help-query-compute-apps``) with ``--format=csv,noheader,nounits``:

* ``--query-gpu=index,uuid,name,memory.used,memory.total`` gives one line per GPU,
  e.g. ``0, GPU-5b3c..., NVIDIA A100-SXM4-80GB, 4, 81920`` (memory in MiB);
* ``--query-compute-apps=gpu_uuid,pid,process_name,used_memory`` gives one line per
  process holding GPU memory, e.g. ``GPU-5b3c..., 4242, /usr/bin/python3, 3000``
  (MiB), and nothing when none does. A value nvidia-smi cannot read is printed as
  ``[N/A]`` (or ``[Not Supported]``).

Used by ray_node_preflight on workers before Ray starts there.
"""

from __future__ import annotations

import subprocess

GPU_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total", "--format=csv,noheader,nounits"]
APPS_QUERY = ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
              "--format=csv,noheader,nounits"]


def _mib(text):
    """Return a MiB field as an int, or None for ``[N/A]``-style values."""
    text = text.strip()
    return int(float(text)) if text.replace(".", "", 1).isdigit() else None


def _rows(text, before, after):
    """Split CSV lines into ``before`` fields, a name that may hold commas, and ``after`` fields.

    :raises ValueError: for a non-empty line with fewer fields.
    """
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        head = line.split(",", before)
        tail = head.pop().rsplit(",", after) if len(head) == before + 1 else []
        if len(tail) != after + 1:
            raise ValueError("nvidia-smi line %r does not have %d fields" % (line, before + after + 1))
        rows.append([field.strip() for field in head + tail])
    return rows


def parse_gpus(text):
    """Parse ``--query-gpu=index,uuid,name,memory.used,memory.total`` output.

    :param text: str, nvidia-smi's stdout.
    :returns: list of dicts index (int), uuid, name, used_mib, total_mib (int or None).
    :raises ValueError: for a line without the five fields.
    """
    return [{"index": int(index), "uuid": uuid, "name": name, "used_mib": _mib(used), "total_mib": _mib(total)}
            for index, uuid, name, used, total in _rows(text, 2, 2)]


def parse_apps(text):
    """Parse ``--query-compute-apps=gpu_uuid,pid,process_name,used_memory`` output.

    :param text: str, nvidia-smi's stdout (empty when no process holds GPU memory).
    :returns: list of dicts gpu_uuid, pid (str), process, used_mib (int or None).
    :raises ValueError: for a line without the four fields.
    """
    return [{"gpu_uuid": uuid, "pid": pid, "process": name, "used_mib": _mib(used)}
            for uuid, pid, name, used in _rows(text, 2, 1)]


def foreign_apps(gpus, apps, is_ray):
    """The processes holding GPU memory that are not Ray's.

    :param gpus: list from parse_gpus.
    :param apps: list from parse_apps.
    :param is_ray: callable pid (str) -> (bool, description); see mvp_proc.describe.
    :returns: list of dicts gpu (index, or the uuid when unknown), pid, process
        (the description, or nvidia-smi's name when the pid is not visible here), used_mib.
    """
    index_of = {g["uuid"]: g["index"] for g in gpus}
    found = []
    for app in apps:
        ray, text = is_ray(app["pid"])
        if ray:
            continue
        found.append({"gpu": index_of.get(app["gpu_uuid"], app["gpu_uuid"]), "pid": app["pid"],
                      "process": text if not text.startswith("? ") else app["process"],
                      "used_mib": app["used_mib"]})
    return found


def read_gpus(is_ray, run=subprocess.run):
    """Query nvidia-smi for the GPUs and the foreign processes on them.

    :param is_ray: callable pid -> (bool, description).
    :param run: subprocess.run (a parameter for tests).
    :returns: dict gpus (count, -1 when nvidia-smi failed), gpu_list, gpu_foreign, gpu_error (str).
    """
    result = {"gpus": -1, "gpu_list": [], "gpu_foreign": [], "gpu_error": ""}
    try:
        proc = run(GPU_QUERY, capture_output=True, text=True, timeout=60, check=False)
        if proc.returncode:
            result["gpu_error"] = proc.stderr.strip() or proc.stdout.strip() or "rc=%d" % proc.returncode
            return result
        gpus = parse_gpus(proc.stdout)
        apps_proc = run(APPS_QUERY, capture_output=True, text=True, timeout=60, check=False)
        apps = parse_apps(apps_proc.stdout) if apps_proc.returncode == 0 else []
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        result["gpu_error"] = str(exc)
        return result
    result.update(gpus=len(gpus), gpu_list=gpus, gpu_foreign=foreign_apps(gpus, apps, is_ray))
    return result
