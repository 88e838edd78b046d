#!/usr/bin/env python3
"""selftest.py: the `selftest` workload, a cluster acceptance job that needs no GPU.

Checks, each printed as ``SELFTEST <name> OK|FAIL <detail>``:
  driver_placement  the driver's node carries --worker-resource and is not the head;
  workers           one task pinned to every ALIVE worker node returns its hostname,
                    and there are at least --expect-workers of them;
  data:<key>        each --data parquet reads with pyarrow and has the columns verl
                    needs (RL: data_source, prompt, ability, reward_model, extra_info;
                    SFT: messages);
  internal_token    when MVP_INTERNAL_TOKEN is set, or MVP_SELFTEST_REQUIRE_TOKEN=1:
                    the driver's environment holds the token (only its presence and
                    the first 12 hex digits of its sha256 are printed, never the value);
then, when MVP_SELFTEST_HOLD_SECONDS is set in the job's env_vars, stays alive
that long (to test concurrent jobs and stop.yml), writes
``<job-dir>/checkpoints/selftest_result.json`` and exits 1 when any check
failed (0 otherwise).
"""
import argparse
import hashlib
import json
import os
import socket
import sys
import time

RL_COLUMNS = {"data_source", "prompt", "ability", "reward_model", "extra_info"}
SFT_COLUMNS = {"messages"}


def check_parquet(path):
    """Return (ok, detail) for a dataset file: readable, non-empty, expected columns."""
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    columns = set(table.column_names)
    wanted = SFT_COLUMNS if "messages" in columns or "sft" in path else RL_COLUMNS
    missing = sorted(wanted - columns)
    if missing:
        return False, "%s lacks columns %s (has %s)" % (path, missing, sorted(columns))
    if table.num_rows == 0:
        return False, "%s has no rows" % path
    return True, "%s rows=%d columns=%s" % (path, table.num_rows, sorted(columns))


def main():
    """Run the checks and write the result file; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--shared-root", required=True)
    parser.add_argument("--expect-workers", type=int, default=1)
    parser.add_argument("--worker-resource", default="worker_node")
    parser.add_argument("--data", action="append", default=[], help="key=path of a parquet")
    args = parser.parse_args()

    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    checks = []

    def record(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})
        print("SELFTEST %s %s %s" % (name, "OK" if ok else "FAIL", detail), flush=True)

    ray.init(address="auto")
    my_node = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    me = next((n for n in nodes if n["NodeID"] == my_node), None)
    if me is None:
        record("driver_placement", False, "driver node %s not in ray.nodes()" % my_node)
    else:
        resources = me.get("Resources", {})
        is_head = "node:__internal_head__" in resources
        record("driver_placement", resources.get(args.worker_resource, 0) > 0 and not is_head,
               "node_id=%s ip=%s %s=%s head=%s" % (my_node, me["NodeManagerAddress"],
                                                   args.worker_resource,
                                                   resources.get(args.worker_resource), is_head))

    @ray.remote(num_cpus=0)
    def where():
        return socket.gethostname(), ray.get_runtime_context().get_node_id()

    workers = [n for n in nodes if n.get("Resources", {}).get(args.worker_resource, 0) > 0]
    refs = [where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
            .remote() for n in workers]
    answers = ray.get(refs, timeout=120)
    hostnames = sorted(h for h, _ in answers)
    pinned = all(node_id == n["NodeID"] for (_, node_id), n in zip(answers, workers))
    record("workers", len(workers) >= args.expect_workers and pinned,
           "expected>=%d found=%d hostnames=%s" % (args.expect_workers, len(workers),
                                                   ",".join(hostnames)))

    for item in args.data:
        key, _, path = item.partition("=")
        try:
            ok, detail = check_parquet(path)
        except Exception as exc:  # any read failure is a failed check
            ok, detail = False, "%s: %s" % (path, exc)
        record("data:" + key, ok, detail)

    token = os.environ.get("MVP_INTERNAL_TOKEN", "")
    if token or os.environ.get("MVP_SELFTEST_REQUIRE_TOKEN") == "1":
        record("internal_token", bool(token), "present=%s sha256_12=%s" % (
            bool(token), hashlib.sha256(token.encode()).hexdigest()[:12] if token else "-"))

    hold = float(os.environ.get("MVP_SELFTEST_HOLD_SECONDS", "0") or 0)
    if hold > 0:
        print("SELFTEST holding for %.0fs" % hold, flush=True)
        time.sleep(hold)

    result = {
        "submission_id": os.environ.get("MVP_SUBMISSION_ID"),
        "driver_host": socket.gethostname(),
        "driver_node_id": my_node,
        "worker_hostnames": hostnames,
        "checks": checks,
        "ok": all(c["ok"] for c in checks),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out_dir = os.path.join(args.job_dir, "checkpoints")
    os.makedirs(out_dir, exist_ok=True)
    tmp = os.path.join(out_dir, ".selftest_result.json.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    os.rename(tmp, os.path.join(out_dir, "selftest_result.json"))
    print("SELFTEST RESULT %s" % ("OK" if result["ok"] else "FAIL"), flush=True)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
