#!/usr/bin/env python3
"""The catalog's GPU defaults pass verl's own start-up checks, without GPUs (issue 28, item 3).

Builds every trainer workload's job spec as the dev and prod inventories build it (the
catalog, which they do not override, alone and with its JobSpec file from ``jobspecs/`` on
top), then runs the snapshot's own checks on each (``mvp_verl_rules.CHILD``: Hydra compose,
``verl.utils.config.validate_config`` as ``main_ppo`` calls it, the config classes) with the
nodes' Python inside a running node container that has torch (the verl-cpu image), and the
mirrored trainer checks on the controller. Prints one line per spec and exits 1 when any is
refused or the checks could not run.

Usage:
    python tests/reliability/catalog_checks.py [--head-container mvp-ray-head]
        [--python /opt/mvp/venv/bin/python] [--snapshot /private/common/code/verl/verl-0.9.1]
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for sub in ("collections", "plugins/filter"):
    sys.path.insert(0, os.path.join(ROOT, sub))

from mvp_jobspec import mvp_job_spec  # noqa: E402
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import check_request  # noqa: E402
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_verl_rules import CHILD, RESULT_MARK  # noqa: E402

INVENTORIES = ("dev", "prod")


def requests():
    """(inventory, label, request) of every trainer workload as the dev and prod inventories build it."""
    with open(os.path.join(ROOT, "inventories/common/all/00-mvp-workloads.yml")) as handle:
        catalog = yaml.safe_load(handle)["mvp_workloads"]
    out = []
    for inventory in INVENTORIES:
        with open(os.path.join(ROOT, "inventories", inventory, "group_vars/all/10-%s.yml" % inventory)) as handle:
            settings = yaml.safe_load(handle) or {}
        site = settings.get("submit_job_site_overrides") or {}
        for workload in sorted(w for w in catalog if catalog[w].get("module")):
            out.append((inventory, "catalog", {"workload": workload}, site, settings))
            path = os.path.join(ROOT, "jobspecs", workload + ".yaml")
            if os.path.isfile(path):
                with open(path) as handle:
                    out.append((inventory, "jobspecs/%s.yaml" % workload, yaml.safe_load(handle), site, settings))
    return catalog, out


def run_checks(args, spec):
    """Run the snapshot's own checks (mvp_verl_rules.CHILD) on one spec in the head container; return the result dict."""
    payload = json.dumps({"config_dir": args.snapshot + "/verl/trainer/config",
                          "config_name": spec["hydra_config"], "overrides": spec["hydra_overrides"]})
    proc = subprocess.run(["docker", "exec", "-e", "PYTHONPATH=" + args.snapshot, "-e", "CUDA_VISIBLE_DEVICES=",
                           "-e", "PYTHONDONTWRITEBYTECODE=1", "-w", args.snapshot, args.head_container,
                           args.python, "-c", CHILD, payload],
                          capture_output=True, text=True, check=False, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(RESULT_MARK)]
    return json.loads(lines[-1][len(RESULT_MARK):]) if lines else {
        "errors": [], "skipped": "no result (exit %s): %s" % (proc.returncode, proc.stderr[-300:])}


def main():
    """Run the checks for every distinct spec and print one line per spec; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-container", default="mvp-ray-head")
    parser.add_argument("--python", default="/opt/mvp/venv/bin/python")
    parser.add_argument("--snapshot", default="/private/common/code/verl/verl-0.9.1")
    # verl's critic config loads the model's config.json: a model that exists on the shared storage
    # (its size does not enter the batch-size checks).
    parser.add_argument("--model", default="tiny-qwen2", help="a model folder under <shared_root>/common/models")
    args = parser.parse_args()
    catalog, cases = requests()
    failures = 0
    specs = []
    for inventory, label, request, site, settings in cases:
        defaults = {"shared_root": settings.get("mvp_shared_root", "/private"), "code_id": "verl-0.9.1",
                    "python": args.python, "worker_resource": "worker_node", "expect_workers": 2,
                    "model": args.model, "address": "http://127.0.0.1:8265", "site_overrides": site,
                    "priority_classes": {"normal": 0}}
        request = dict(request, submission_id="catalog-check")
        request.pop("model", None)  # the JobSpec files name the GPU model (Qwen2.5-0.5B-Instruct)
        # as the role does: the ray_job_request action checks the request, the filter builds the spec from it
        specs.append((inventory, label, mvp_job_spec(check_request(request, catalog, defaults), catalog, defaults)))
    # dev and prod often build the same spec: each distinct config is checked once, two at a time (each check is
    # one Python on the head, mostly importing torch and verl)
    first = {}
    for inventory, label, spec in specs:
        first.setdefault((spec["hydra_config"], tuple(spec["hydra_overrides"])), (spec, "%s %s" % (inventory, label)))

    def timed(spec):
        start = time.time()
        return run_checks(args, spec), time.time() - start
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(first, pool.map(lambda key: timed(first[key][0]), first)))
    told = set()
    for inventory, label, spec in specs:
        key = (spec["hydra_config"], tuple(spec["hydra_overrides"]))
        (result, seconds), where = results[key], first[key][1]
        how = " (the same config as %s: checked once)" % where if key in told else ""
        told.add(key)
        ok = not result["errors"] and not result["skipped"]
        failures += not ok
        print("%-4s %-4s %-20s %s gpus=%-2s %5.1f s %s%s" % (
            inventory, spec["workload"], label, "PASS" if ok else "FAIL", spec["gpus_requested"],
            0.0 if how else seconds,
            "; ".join(result["errors"]) or result["skipped"] or "verl's start-up checks passed", how))
    print("catalog checks: %d passed, %d failed" % (len(cases) - failures, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
