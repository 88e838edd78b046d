#!/usr/bin/env python3
"""Record one real job's classifier inputs as a fixture of
tests/unit/plugins/module_utils/lifecycle/test_mvp_verdict.py.

Usage (on the docker host, while the cluster that ran the job is up):
    python tests/data/verdicts/record.py --host-shared /srv/mvp/private --job ID \
        --cause node_lost --summary-has 172.18.0.2 --name killed-worker [--head mvp-ray-head]

Reads the job's logs/status.json (Ray's status, message, times, exit code), the last 80 lines
of logs/driver.log, the steps of logs/metrics.jsonl, logs/watchdog.json and config/job_spec.json
(reward function, resume point), and Ray's node table (list_nodes detail, read in the head
container) and the job's actors with their death causes. Writes tests/data/verdicts/<name>.json
with the cause a person names for it (--cause), checked by the unit test.
"""
import argparse
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
READ_TABLES = r"""
import json, sys
from ray.util import state
from ray.job_submission import JobSubmissionClient
address = "http://127.0.0.1:8265"
job = JobSubmissionClient(address).get_job_info(sys.argv[1])
nodes = [n.__dict__ for n in state.list_nodes(address=address, detail=True)]
keep = ("node_id", "node_ip", "node_name", "state", "state_message", "end_time_ms", "is_head_node")
actors = state.list_actors(address=address, filters=[("job_id", "=", job.job_id)], detail=True) if job.job_id else []
ips = {n["node_id"]: n["node_ip"] for n in nodes}
print(json.dumps({"nodes": [{k: n.get(k) for k in keep} for n in nodes],
                  "actors": [{"class_name": a.class_name, "pid": a.pid, "state": a.state,
                              "node_ip": ips.get(a.node_id), "death_cause": a.death_cause}
                             for a in actors if a.state == "DEAD"]}, default=str))
"""


def main():
    """Write the fixture."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-shared", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--cause", required=True, help="the cause a person names (none: it trained)")
    parser.add_argument("--summary-has", action="append", default=[])
    parser.add_argument("--name", required=True)
    parser.add_argument("--head", default="mvp-ray-head")
    parser.add_argument("--python", default="/opt/mvp/venv/bin/python")
    args = parser.parse_args()
    job_dir = os.path.join(args.host_shared, "jobs", args.job)

    def read(rel, default=""):
        try:
            with open(os.path.join(job_dir, rel), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return default

    status = json.loads(read("logs/status.json", "{}"))
    spec = json.loads(read("config/job_spec.json", "{}"))
    steps = [json.loads(line)["step"] for line in read("logs/metrics.jsonl").splitlines() if line.endswith("}")]
    tables = json.loads(subprocess.run(["docker", "exec", args.head, args.python, "-c", READ_TABLES, args.job],
                                       capture_output=True, text=True, check=True).stdout)
    fixture = {
        "recorded_from": "job %s on the local cluster (tests/reliability/verdicts.py)" % args.job,
        "status": status.get("status"), "exit_code": status.get("driver_exit_code"),
        "message": status.get("message") or "", "start_ms": status.get("start_time"),
        "end_ms": status.get("end_time"),
        "log_tail": "\n".join(read("logs/driver.log").splitlines()[-80:]) + "\n",
        "steps": steps, "resumed": (spec.get("resume_from") or {}).get("step") or 0,
        "user_files": [spec["reward_fn_path"]] if spec.get("reward_fn_path") else [],
        "watchdog": json.loads(read("logs/watchdog.json", "null")),
        "nodes": tables["nodes"], "actors": tables["actors"],
        "expect": {"cause": None if args.cause in ("none", "null") else args.cause, "summary_has": args.summary_has},
    }
    if "Total" not in fixture["log_tail"]:  # the planned step count is printed early: keep that line too
        fixture["planned_line"] = next((l for l in read("logs/driver.log").splitlines()
                                        if "Total training steps:" in l or "Total steps:" in l), None)
    with open(os.path.join(HERE, args.name + ".json"), "w", encoding="utf-8") as handle:
        json.dump(fixture, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print("wrote %s.json (%d log lines, %d steps)" % (args.name, fixture["log_tail"].count("\n"), len(steps)))


if __name__ == "__main__":
    main()
