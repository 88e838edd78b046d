#!/usr/bin/env python3
"""Check that a trained verl job's MLflow run holds what its own metrics file holds, from the docker host.

Usage:
    python tests/integration/check_mlflow.py --host-shared /srv/mvp/private --job ID [--job ID ...]
        [--metric train/loss] [--user mvp --password-file inventories/local/.secrets/mlflow_password]

For each job, every expectation comes from the job directory, read on the docker host (never from the
code under test):

* ``config/mlflow_run.json`` (written at submission) names the run, the experiment and the tracking
  URI (the head's node IP: the docker host reaches the containers' network);
* the run exists on the server (MLflow's REST API ``runs/get``), its name is the run's first submission
  id (this job's id, or for a restarted attempt the id its ``config/job_spec.json`` ``restart.run``
  names) and its experiment is the job's workload;
* the metric's history (``metrics/get-history``) has exactly the steps of the job's
  ``logs/metrics.jsonl`` that carry it (verl's file logger, one ``{"step", "data"}`` line per step), and
  the same last value;
* the run carries the verdict of ``logs/status.json`` (tag ``mvp.verdict``) and the status that goes with
  it (``FINISHED`` for trained, else ``FAILED``);
* the artifact ``<submission_id>/resolved_config.yaml`` is the job's ``config/resolved_config.yaml``,
  byte for byte (read back through the server's artifact proxy).

Prints one line per check and ``check_mlflow: N passed, M failed``; exits 1 when any check fails.
"""
import argparse
import base64
import json
import os
import sys
import urllib.parse
import urllib.request


AUTH = {}
"""The Authorization header of the server's basic auth (main() fills it from --user and --password-file)."""


def get(base, path, params=None, raw=False):
    """GET ``base + path`` (query ``params``); the decoded JSON answer, or the body's text with ``raw``."""
    url = base.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(urllib.request.Request(url, headers=AUTH), timeout=30) as answer:
        text = answer.read().decode("utf-8")
    return text if raw else json.loads(text)


def metric_series(path, metric):
    """``{step: value}`` of one metric in a verl file-logger file (lines ``{"step": N, "data": {...}}``)."""
    series = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                if metric in row.get("data", {}):
                    series[int(row["step"])] = float(row["data"][metric])
    return series


def check_job(host_shared, job, metric):
    """Return [(name, ok, detail)] for one job."""
    job_dir = os.path.join(host_shared, "jobs", job)
    with open(os.path.join(job_dir, "config", "mlflow_run.json"), encoding="utf-8") as handle:
        record = json.load(handle)
    with open(os.path.join(job_dir, "config", "job_spec.json"), encoding="utf-8") as handle:
        spec = json.load(handle)
    with open(os.path.join(job_dir, "logs", "status.json"), encoding="utf-8") as handle:
        status = json.load(handle)
    base = record["tracking_uri"]
    checks = []
    run = get(base, "/api/2.0/mlflow/runs/get", {"run_id": record["run_id"]})["run"]
    experiment = get(base, "/api/2.0/mlflow/experiments/get", {"experiment_id": run["info"]["experiment_id"]})
    first_id = (spec.get("restart") or {}).get("run") or job
    checks.append(("run name is the run's first submission id", run["info"]["run_name"] == first_id,
                   "%s (expected %s)" % (run["info"]["run_name"], first_id)))
    checks.append(("experiment is the workload", experiment["experiment"]["name"] == spec["workload"],
                   "%s (expected %s)" % (experiment["experiment"]["name"], spec["workload"])))
    expected = metric_series(os.path.join(job_dir, "logs", "metrics.jsonl"), metric)
    history = get(base, "/api/2.0/mlflow/metrics/get-history", {"run_id": record["run_id"], "metric_key": metric})
    logged = {int(m["step"]): float(m["value"]) for m in history.get("metrics") or []}
    mine = {s: v for s, v in logged.items() if s in expected} if spec.get("restart") else logged
    checks.append(("%s steps equal metrics.jsonl's" % metric, sorted(mine) == sorted(expected) and expected != {},
                   "mlflow %d steps %s, metrics.jsonl %d steps %s" % (len(mine), sorted(mine)[:3] + ["..."],
                                                                     len(expected), sorted(expected)[:3] + ["..."])))
    last = max(expected) if expected else None
    checks.append(("last %s equals metrics.jsonl's" % metric,
                   last is not None and abs(logged.get(last, float("nan")) - expected[last]) <= 1e-6 * max(1.0, abs(expected[last])),
                   "step %s: mlflow %s, metrics.jsonl %s" % (last, logged.get(last), expected.get(last))))
    tags = {t["key"]: t["value"] for t in run["data"].get("tags") or []}
    verdict = status.get("verdict")
    want_status = "FINISHED" if verdict in ("trained", "succeeded") else "FAILED"
    checks.append(("verdict on the run", tags.get("mvp.verdict") == verdict and run["info"]["status"] == want_status,
                   "tag %s, status %s (expected %s, %s)" % (tags.get("mvp.verdict"), run["info"]["status"], verdict,
                                                            want_status)))
    artifact = "%s/%s/artifacts/%s/resolved_config.yaml" % (run["info"]["experiment_id"], record["run_id"], job)
    with open(os.path.join(job_dir, "config", "resolved_config.yaml"), encoding="utf-8") as handle:
        resolved = handle.read()
    stored = get(base, "/api/2.0/mlflow-artifacts/artifacts/" + urllib.parse.quote(artifact), raw=True)
    checks.append(("resolved config stored as an artifact", stored == resolved,
                   "%d bytes (expected %d)" % (len(stored), len(resolved))))
    return checks


def main(argv=None):
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-shared", required=True, help="the shared folder on the docker host")
    parser.add_argument("--job", action="append", required=True, help="a submission id (repeatable)")
    parser.add_argument("--metric", default="train/loss", help="the metric compared (default train/loss)")
    parser.add_argument("--user", default="mvp", help="the server's basic-auth user (mvp_mlflow_username)")
    parser.add_argument("--password-file", help="file holding its password (mvp_mlflow_password_file); none: no login")
    args = parser.parse_args(argv)
    if args.password_file:
        with open(args.password_file, encoding="utf-8") as handle:
            pair = "%s:%s" % (args.user, handle.read().strip())
        AUTH["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    passed = failed = 0
    for job in args.job:
        try:
            checks = check_job(args.host_shared, job, args.metric)
        except (OSError, ValueError, KeyError) as exc:
            checks = [("read the job and its run", False, "%s: %s" % (type(exc).__name__, exc))]
        for name, ok, detail in checks:
            print("%s %s: %s - %s" % ("PASS" if ok else "FAIL", job, name, detail))
            passed, failed = passed + bool(ok), failed + (not ok)
    print("check_mlflow: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
