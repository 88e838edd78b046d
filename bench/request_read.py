#!/usr/bin/env python3
"""Benchmark of the strict request reader (module_utils mvp_request_read) against yaml.safe_load.

For every JobSpec (``jobspecs/*.yaml`` by default) times ``load_text`` (libyaml's event parser when PyYAML has
it, as used), the same reader on pure-Python PyYAML, and ``yaml.safe_load``, ``--repeat`` times each after one
warm-up, and reports the median (and the fastest) per file in milliseconds; the goal is at most ``--goal-ms``
(50 ms) per ordinary request. Then times the refusals of a few hostile documents (the billion laughs and a bomb of
merge keys, refused at their first anchor; a merge key alone; a flow list of 131,000 scalars at the size limit) with
the reader's peak Python allocation (tracemalloc): ``yaml.safe_load`` is not run on those (the merge bomb alone takes
it seconds).

Writes the figures as JSON (``--out``) with the machine's Python and PyYAML versions.

Usage: python bench/request_read.py [--repeat 300] [--goal-ms 50] [--out bench/results/request_read.json]
           [FILE ...]
"""
import argparse
import glob
import json
import os
import platform
import statistics
import sys
import time
import tracemalloc

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.mvp.ray.plugins.module_utils.request import (  # noqa: E402 pylint: disable=C0413
    mvp_request, mvp_request_read)

# The builder's defaults for the whole check of a request (the local cluster's shape, the role's priority classes);
# the catalog is the shipped one.
DEFAULTS = {"shared_root": "/private", "code_id": "verl-0.9.1", "python": "python", "worker_resource": "worker_node",
            "address": "http://127.0.0.1:8265", "expect_workers": 2, "model": "Qwen2.5-0.5B-Instruct"}


def catalog():
    """The shipped workload catalog (mvp_workloads)."""
    with open(os.path.join(ROOT, "inventories/common/all/00-mvp-workloads.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["mvp_workloads"]


def timings_ms(call, repeat):
    """Run ``call`` once to warm up, then ``repeat`` times; return (median, fastest) in ms."""
    call()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        call()
        times.append((time.perf_counter() - began) * 1000.0)
    return round(statistics.median(times), 3), round(min(times), 3)


def hostile():
    """The hostile documents: name -> (text, what it would expand to)."""
    lines = ["workload: sft", "trainer_overrides:", "  l0: &l0 [%s]" % ",".join(["lol"] * 10)]
    for level in range(1, 7):
        lines.append("  l%d: &l%d [%s]" % (level, level, ",".join(["*l%d" % (level - 1)] * 10)))
    laughs = "\n".join(lines) + "\n"
    lines = ["m0: &m0 {%s}" % ", ".join("%s: %d" % (name, i) for i, name in enumerate("abcdefghij"))]
    for level in range(1, 8):
        lines.append("m%d: &m%d {<<: [%s]}" % (level, level, ", ".join(["*m%d" % (level - 1)] * 10)))
    merges = "\n".join(lines) + "\n"
    count = (mvp_request_read.LIMITS["max_bytes"] - 5) // 2
    flow = "a: [" + ",".join(["x"] * count) + "]\n"
    merge = "workload: sft\ntrainer_overrides:\n  <<: {trainer.nnodes: 1}\n"
    return {"billion_laughs": (laughs, "10**7 strings"), "merge_bomb": (merges, "10**8 merged key copies"),
            "merge_key": (merge, "one merged mapping"), "flow_list_at_max_bytes": (flow, "%d scalars" % count)}


def refusal(name, text, libyaml):
    """Time one refusal and measure its peak allocation; return a dict."""
    limits = dict(mvp_request_read.LIMITS)
    began = time.perf_counter()
    try:
        mvp_request_read._read_yaml(text, name, limits, libyaml=libyaml)  # pylint: disable=protected-access
        message = None
    except mvp_request_read.RequestReadError as exc:
        message = str(exc)
    seconds = time.perf_counter() - began
    tracemalloc.start()
    try:
        mvp_request_read._read_yaml(text, name, limits, libyaml=libyaml)  # pylint: disable=protected-access
    except mvp_request_read.RequestReadError:
        pass
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"ms": round(seconds * 1000.0, 1), "peak_mib": round(peak / 1048576.0, 2), "refused": message}


def main():
    """Time the reader over the JobSpecs and the hostile documents; write --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="JobSpec files (default: jobspecs/*.yaml)")
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--goal-ms", type=float, default=50.0)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/request_read.json"))
    args = parser.parse_args()
    files = args.files or sorted(glob.glob(os.path.join(ROOT, "jobspecs", "*.yaml")))
    if not files:
        raise SystemExit("no JobSpec files")
    limits = dict(mvp_request_read.LIMITS)
    workloads = catalog()
    with open(os.path.join(ROOT, "roles/submit_job/defaults/main.yml"), encoding="utf-8") as handle:
        defaults = dict(DEFAULTS, priority_classes=yaml.safe_load(handle)["submit_job_priority_classes"])
    per_file = []
    for path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        source = "jobspec " + os.path.relpath(path, ROOT)
        if mvp_request_read.load_text(data, source) != yaml.safe_load(data):
            raise SystemExit("%s: load_text and yaml.safe_load disagree" % path)
        text = data.decode("utf-8")
        reader, reader_min = timings_ms(lambda: mvp_request_read.load_text(data, source), args.repeat)
        pure, pure_min = timings_ms(lambda: mvp_request_read._read_yaml(  # pylint: disable=protected-access
            text, source, limits, libyaml=False), args.repeat)
        safe, safe_min = timings_ms(lambda: yaml.safe_load(data), args.repeat)
        # The whole front door of the ray_job_request action: the strict read, then every field's own rules.
        # (ray-base.yaml is the inventory's submit_job_ray_base given with -e @file, not a request: read only.)
        whole = whole_min = None
        if set(mvp_request.mvp_parse_jobspec(data, path)) <= mvp_request.REQUEST_KEYS:
            whole, whole_min = timings_ms(lambda: mvp_request.check_request(
                dict(mvp_request.mvp_parse_jobspec(data, path), submission_id="bench-1"), workloads, defaults),
                args.repeat)
        per_file.append({"file": os.path.relpath(path, ROOT), "bytes": len(data),
                         "load_text_ms": reader, "load_text_min_ms": reader_min,
                         "load_text_pure_python_ms": pure, "load_text_pure_python_min_ms": pure_min,
                         "safe_load_ms": safe, "safe_load_min_ms": safe_min,
                         "read_and_check_ms": whole, "read_and_check_min_ms": whole_min,
                         "ratio": round(reader / safe, 2) if safe else None})
    refusals = {}
    for name, (text, expands) in hostile().items():
        refusals[name] = {"bytes": len(text.encode("utf-8")), "expands_to": expands,
                          "libyaml": refusal(name, text, True), "pure_python": refusal(name, text, False)}
    worst = max(max(entry["load_text_ms"], entry["read_and_check_ms"] or 0) for entry in per_file)
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.node(),
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "python_implementation": platform.python_implementation(), "pyyaml": yaml.__version__,
        "libyaml": bool(getattr(yaml, "__with_libyaml__", False)), "repeat": args.repeat,
        "limits": limits, "goal_ms": args.goal_ms, "worst_load_text_ms": worst, "within_goal": worst <= args.goal_ms,
        "files": per_file, "refusals": refusals,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result, indent=2))
    return 0 if result["within_goal"] else 1


if __name__ == "__main__":
    sys.exit(main())
