"""Fixtures the unit tests share: the workload catalog, the job spec defaults, one cached verl release.

The tests mirror the code: ``plugins/{modules,filter}/test_<name>.py`` test ``plugins/<kind>/<name>.py``,
``plugins/module_utils/<package>/test_<name>.py`` test ``plugins/module_utils/<package>/<name>.py``; ``roles/``,
``scripts/``, ``images/`` and ``inventories/`` hold the tests of the files of the same place in the checkout.
``tests/conftest.py`` makes the plugins importable; ``plugins/modules/conftest.py`` holds the fake of Ray's Jobs
and State APIs.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON = os.path.join(ROOT, "inventories", "common", "all")
LOCAL_INVENTORY = os.path.join(ROOT, "inventories", "local", "group_vars", "all", "10-local.yml")

# The verl release the snapshot's Hydra configs come from (the catalog's and the corpus' version).
VERL_PIN = "verl==0.9.1"
# Wheels and their unpacked ``verl`` packages, kept across runs (pure Python, about 1.7 MB each).
VERL_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "mvp-tests")


def _setting(file_name, name):
    with open(os.path.join(COMMON, file_name), encoding="utf-8") as handle:
        return yaml.safe_load(handle)[name]


def _role_default(role, name):
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)[name]


# Read once: the parameters of gpu_request come from it too.
CATALOG = _setting("00-mvp-workloads.yml", "mvp_workloads")


@pytest.fixture(scope="session")
def catalog():
    """The shipped workload catalog: ``mvp_workloads`` of inventories/common/all/00-mvp-workloads.yml."""
    return CATALOG


@pytest.fixture(scope="session")
def spec_defaults():
    """The defaults the job spec builder gets besides the catalog (``mvp_job_spec(request, catalog, defaults)``).

    A cluster with the shared root /private, the snapshot verl-0.9.1, two workers carrying
    ``worker_node``, the Jobs API on the default port, and the shared watchdog limits, queue settings and
    priority classes (``submit_job_watchdog``, ``submit_job_queue``, ``submit_job_priority_classes`` of
    roles/submit_job/defaults/main.yml).
    """
    return {"shared_root": "/private", "code_id": "verl-0.9.1", "python": "python",
            "worker_resource": "worker_node", "expect_workers": 2, "model": "Qwen2.5-0.5B-Instruct",
            "address": "http://127.0.0.1:8265",
            "watchdog": _role_default("submit_job", "submit_job_watchdog"),
            "queue": _role_default("submit_job", "submit_job_queue"),
            "priority_classes": _role_default("submit_job", "submit_job_priority_classes")}


@pytest.fixture(scope="session")
def local_job_overrides(spec_defaults):
    """The local inventory's ``submit_job_site_overrides``, its one Jinja expression (the shared root) rendered."""
    with open(LOCAL_INVENTORY, encoding="utf-8") as handle:
        return json.loads(json.dumps(yaml.safe_load(handle)["submit_job_site_overrides"]).replace(
            "{{ mvp_shared_root }}", spec_defaults["shared_root"]))


# The GPU inventories. They add no submit_job_site_overrides: their jobs are the catalog's, with the JobSpec files on top.
GPU_INVENTORIES = {
    "dev": os.path.join(ROOT, "inventories", "dev", "group_vars", "all", "10-dev.yml"),
    "prod": os.path.join(ROOT, "inventories", "prod", "group_vars", "all", "10-prod.yml"),
}


def _gpu_requests():
    """(inventory, request) for each verl workload of the catalog, alone and with its JobSpec file from jobspecs/."""
    cases = []
    for inventory in sorted(GPU_INVENTORIES):
        for workload in sorted(w for w in CATALOG if CATALOG[w].get("module")):
            cases.append((inventory, {"workload": workload}))
            jobspec = os.path.join(ROOT, "jobspecs", workload + ".yaml")
            if os.path.isfile(jobspec):
                with open(jobspec, encoding="utf-8") as handle:
                    cases.append((inventory, yaml.safe_load(handle)))
    return cases


GPU_REQUESTS = _gpu_requests()


@pytest.fixture(params=GPU_REQUESTS, ids=["%s-%s-%s" % (i, r["workload"], "jobspec" if len(r) > 1 else "catalog")
                                          for i, r in GPU_REQUESTS])
def gpu_request(request):
    """(inventory, request): a verl workload as the dev or prod inventory builds it
    (``<inventory>-<workload>-catalog``), and with its JobSpec file on top (``-jobspec``); one test per pair."""
    inventory, request_ = request.param
    path = GPU_INVENTORIES[inventory]
    with open(path, encoding="utf-8") as handle:
        assert not (yaml.safe_load(handle) or {}).get("submit_job_site_overrides"), "%s now has site overrides" % path
    return inventory, request_


def _unpacked(tree):
    return os.path.isfile(os.path.join(tree, "verl", "trainer", "config", "ppo_trainer.yaml"))


def _cached_wheel(version):
    wheels = sorted(f for f in os.listdir(VERL_CACHE) if f.startswith("verl-%s-" % version) and f.endswith(".whl"))
    return os.path.join(VERL_CACHE, wheels[0]) if wheels else None


def unpacked_verl(requirement=None):
    """The folder holding the ``verl`` package of a release's wheel, unpacked whole under VERL_CACHE.

    :param requirement: pip requirement of the release (``verl==0.9.1`` when None or empty).
        The wheel is downloaded (``pip download --no-deps``) on first use only; a pinned
        version already unpacked is used as it is.
    :returns: str, ``<cache>/verl-<version>`` (its ``verl/trainer/config`` is the Hydra config tree;
        the validators also read the dataclass sources next to it).
    """
    requirement = (requirement or VERL_PIN).strip()
    pinned = re.fullmatch(r"verl==([0-9][0-9A-Za-z.+!]*)", requirement)
    if pinned and _unpacked(os.path.join(VERL_CACHE, "verl-" + pinned.group(1))):
        return os.path.join(VERL_CACHE, "verl-" + pinned.group(1))
    os.makedirs(VERL_CACHE, exist_ok=True)
    wheel = _cached_wheel(pinned.group(1)) if pinned else None
    if wheel is None:
        download = tempfile.mkdtemp(dir=VERL_CACHE)
        try:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                            "--disable-pip-version-check", "--dest", download, requirement], check=True)
            (name,) = [f for f in os.listdir(download) if f.endswith(".whl")]
            wheel = os.path.join(VERL_CACHE, name)
            os.replace(os.path.join(download, name), wheel)
        finally:
            shutil.rmtree(download, ignore_errors=True)
    tree = os.path.join(VERL_CACHE, "verl-" + os.path.basename(wheel).split("-")[1])
    if _unpacked(tree):
        return tree
    staging = tempfile.mkdtemp(dir=VERL_CACHE)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(staging, [m for m in archive.namelist() if m.startswith("verl/")])
    try:
        os.rename(staging, tree)
    except OSError:  # another run unpacked it meanwhile
        shutil.rmtree(staging, ignore_errors=True)
    return tree


@pytest.fixture(scope="session")
def verl_release():
    """``unpacked_verl``: the unpacked release of a pip requirement (None: the pinned one), cached."""
    return unpacked_verl


@pytest.fixture(scope="session")
def verl_tree(verl_release):
    """The folder holding the ``verl`` package of the pinned release (VERL_PIN)."""
    return verl_release(VERL_PIN)


@pytest.fixture(scope="session")
def verl_config_dir(verl_tree):
    """``verl/trainer/config`` of the pinned release: the Hydra configs the snapshot's trainers compose."""
    return os.path.join(verl_tree, "verl", "trainer", "config")
