#!/usr/bin/env python3
"""Print a job's summary a person reads: the job, its verdict, steps trained, first and last loss, where things are.

Reads the job directory only (the job contract's files: config/job_spec.json, logs/status.json or
logs/verdict.json, verl's metrics file, checkpoints/), so it works after Ray forgot the job and
from the docker host, where the shared storage is a plain folder.

Usage: python scripts/job_summary.py --jobs-dir /srv/mvp/private/jobs (--submission-id ID | --workload sft)
  --submission-id  the job to summarise; --workload: the newest job directory of that workload.
  --metric         the loss to show (default: the first of train/loss, critic/vf_loss, actor/pg_loss logged).
Exit status: 0 when the job trained (verdict trained or succeeded), 1 otherwise, 2 when no job was found.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES  # noqa: E402
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import list_job_dirs, read_run  # noqa: E402

LOSSES = ("train/loss", "critic/vf_loss", "actor/pg_loss", "actor/entropy")


def read_json(path):
    """The JSON object in ``path``, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def find_job(jobs_dir, submission_id=None, workload=None):
    """The job directory to summarise: the one named, else the newest of ``workload``; None when there is none."""
    if submission_id:
        path = os.path.join(jobs_dir, submission_id)
        return path if os.path.isdir(path) else None
    for name, _mtime in list_job_dirs(jobs_dir):
        spec = read_json(os.path.join(jobs_dir, name, FILES["job_spec"])) or {}
        if workload is None or spec.get("workload") == workload:
            return os.path.join(jobs_dir, name)
    return None


def summary_lines(job_dir, metric=None):
    """The summary as a list of str (see the module docstring); the verdict from status.json, else verdict.json."""
    run = read_run(job_dir)
    verdict = run["recorded_status"] or read_json(os.path.join(job_dir, FILES["verdict"])) or {}
    steps = verdict.get("steps") or {}
    series = run.get("series") or {}
    key = metric or next((name for name in LOSSES if series.get(name)), None)
    lines = ["== summary of job %s (%s) ==" % (run["submission_id"], run["workload"] or "unknown workload"),
             "verdict:      %s" % (verdict.get("summary") or verdict.get("verdict") or "none recorded yet")]
    if steps:
        lines.append("steps:        %s logged, last step %s of the %s verl planned"
                     % (steps.get("logged"), steps.get("last"), "?" if steps.get("planned") is None else steps["planned"]))
    if key and series.get(key):
        (first_step, first), (last_step, last) = series[key][0], series[key][-1]
        lines.append("loss:         %s first %.4g (step %d) -> last %.4g (step %d)" % (key, first, first_step, last, last_step))
    else:
        lines.append("loss:         none logged (no metrics file, or trainer.logger without file)")
    checkpoint = run.get("checkpoint") or {}
    if checkpoint.get("step") is not None:
        newest = " (newest complete: global_step_%d)" % checkpoint["step"]
    else:
        newest = " (none complete)" if checkpoint else " (none)"
    lines.append("checkpoints:  %s%s" % (os.path.join(job_dir, FILES["checkpoints"]), newest))
    lines.append("metrics:      %s" % os.path.join(job_dir, FILES["metrics"]))
    lines.append("logs:         %s (driver.log: the trainer's output)" % os.path.join(job_dir, "logs"))
    lines.append("compare runs: ansible-playbook report.yml -e workload=%s -e last=2" % (run["workload"] or "sft"))
    return lines


def main(argv=None):
    """Command line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-dir", required=True)
    parser.add_argument("--submission-id")
    parser.add_argument("--workload")
    parser.add_argument("--metric")
    args = parser.parse_args(argv)
    job_dir = find_job(args.jobs_dir, args.submission_id, args.workload)
    if job_dir is None:
        print("no job %s under %s" % (args.submission_id or ("of workload %s" % args.workload), args.jobs_dir))
        return 2
    print("\n".join(summary_lines(job_dir, args.metric)))
    status = read_json(os.path.join(job_dir, FILES["status"])) or read_json(os.path.join(job_dir, FILES["verdict"])) or {}
    return 0 if status.get("verdict") in ("trained", "succeeded") else 1


if __name__ == "__main__":
    sys.exit(main())
