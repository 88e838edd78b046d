#!/usr/bin/env python3
"""Variation matrix: what verl users change first (tests/matrix/cases.yml), trained for real.

Each case is submitted as a user would: a JobSpec file (the case's workload and ``trainer_overrides``
from verl's example scripts, ``trainer.total_training_steps`` and ``trainer.save_freq`` set to the
matrix's ``steps`` N) written to a temporary folder and ``submit.yml -e jobspec=<file>`` on the
cluster (the local inventory's CPU overrides stay under the request). Then:

* expectation ``trains``: submit.yml exits 0, the verdict is ``trained`` and says "trained N of N
  steps", ``checkpoints/global_step_N`` is complete as the project judges it
  (``mvp_runs.checkpoint_problems``: every rank's shard of each kind, one world size), a LoRA case's
  checkpoint records the rank (verl's ``lora_train_meta.json`` or an ``adapter_config.json``: its
  ``r`` equals the case's ``lora_rank``), and a second JobSpec with ``resume_from: <id>`` and
  N + 1 steps trains: verdict ``trained``, first logged step N + 1;
* expectation ``platform_unsupported`` (or another cause): submit.yml fails and the job's verdict has
  that cause; ``refused``: submit.yml fails and no job directory was written.

Expected values come from cases.yml and the job directories (status.json, metrics.jsonl, the
checkpoint folder), never from the code under test. Results go to ``build/matrix.json`` (per case:
result, expectation, observed cause and summary, steps, wall seconds of the run and of its resume,
job ids), merged into what an earlier run wrote so ``--only`` updates its cases;
``tests/matrix/docs.py`` turns it into the docs' table and benchmark. Prints the table; exits 1 when
a case fails.

Usage:
    python tests/matrix/run.py --inventory inventories/local --host-shared /srv/mvp/private
        [--only CASE ...] [--ci] [--out build/matrix.json]
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "reliability"))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import checkpoint_problems  # noqa: E402
from faults import Cluster, run_cases, suite_parser  # noqa: E402
from resume import metrics  # noqa: E402
from verdicts import Job, extra_vars, read_json  # noqa: E402

CASES_FILE = os.path.join(HERE, "cases.yml")
DEFAULT_OUT = os.path.join(ROOT, "build", "matrix.json")
# One submit.yml run of a tiny job (vLLM's start-up included); a hang fails the case, not the matrix.
RUN_TIMEOUT = 900


def load_cases(path=CASES_FILE):
    """``(steps, [case dict, ...])`` of a cases file."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    return int(data["steps"]), data["cases"]


def stamp(name):
    """A fresh submission id for a case."""
    return "matrix-%s-%s-%04x" % (name, time.strftime("%H%M%S", time.gmtime()), os.getpid() & 0xFFFF)


def submit(case, spec, job_id, folder, label):
    """Write ``spec`` as a JobSpec file in ``folder`` and run submit.yml with it; returns the playbook run."""
    path = os.path.join(folder, job_id + ".yml")
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(spec, handle, sort_keys=False)
    return case.play("submit.yml", ["-e", "jobspec=" + path, "-e", "submission_id=" + job_id]
                     + extra_vars(max_restarts=0), timeout=RUN_TIMEOUT, label=label)


def lora_rank_saved(step_dir):
    """The LoRA rank a checkpoint records (verl's lora_train_meta.json or a PEFT adapter_config.json), or None."""
    for root, _dirs, files in os.walk(step_dir):
        for name in ("lora_train_meta.json", "adapter_config.json"):
            if name in files:
                data = read_json(os.path.join(root, name)) or {}
                if data.get("r") is not None:
                    return int(data["r"])
    return None


def check_trained(case, job, steps, first=1):
    """The job's verdict is trained and it logged steps ``first``..``steps``; returns its status."""
    status = read_json(os.path.join(job.dir, "logs", "status.json")) or {}
    logged = sorted(metrics(job.dir))
    case.check(status.get("verdict") == "trained", "%s: verdict %r cause %r (%s)" % (
        job.id, status.get("verdict"), status.get("cause"), status.get("summary")))
    case.check(logged[:1] == [first] and logged[-1:] == [steps], "%s logged steps %s, expected %d..%d" % (
        job.id, logged, first, steps))
    return status


def run_row(case, spec, steps, results):
    """Run one case and record its row in ``results[name]`` (result pass/fail and the problems)."""
    case.result = results[spec["name"]] = {"workload": spec["workload"], "expectation": spec["expectation"],
                                           "observed": None}
    error = None
    try:
        run_case(case, spec, steps)
    except Exception as exc:  # pylint: disable=broad-except - recorded, then run_cases reports it too
        error = "%s: %s" % (type(exc).__name__, exc)
        raise
    finally:
        problems = list(case.problems) + ([error] if error else [])
        case.result.update(result="pass" if not problems else "fail", problems=problems,
                           at=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           load_avg=round(os.getloadavg()[0], 1))


def run_case(case, spec, steps):
    """One row of the matrix (see the module docstring); fills ``case.result``."""
    result = case.result
    case.ensure_cluster()
    case.wait_jobs_idle()
    overrides = dict(spec.get("trainer_overrides") or {})
    overrides.update({"trainer.total_training_steps": steps, "trainer.save_freq": steps})
    job = Job(case, stamp(spec["name"]))
    result["jobs"] = [job.id]
    with tempfile.TemporaryDirectory(prefix="mvp-matrix-") as folder:
        run = submit(case, {"workload": spec["workload"], "trainer_overrides": overrides}, job.id, folder,
                     "submit %s" % spec["workload"])
        result["wall_s"] = round(run.seconds, 1)
        status = read_json(os.path.join(job.dir, "logs", "status.json")) or {}
        result.update(cause=status.get("cause"), summary=status.get("summary") or "",
                      steps=(status.get("steps") or {}).get("logged"))
        expectation = spec["expectation"]
        if expectation == "refused":
            case.check(run.rc not in (0, None) and not os.path.isdir(job.dir),
                       "submit.yml rc=%s, job directory %s: expected a refusal before submission"
                       % (run.rc, "written" if os.path.isdir(job.dir) else "absent"))
            result["observed"] = "refused" if run.rc and not os.path.isdir(job.dir) else status.get("cause")
            refusal = next((line for line in run.output.splitlines() if "Task failed" in line), "")
            result["summary"] = refusal.split("Module failed:", 1)[-1].strip()[:300]
            return
        if expectation != "trains":
            case.check(run.rc not in (0, None), "submit.yml rc=%s: expected a failure" % run.rc)
            case.check(status.get("cause") == expectation, "%s: cause %r (%s), expected %s" % (
                job.id, status.get("cause"), status.get("summary"), expectation))
            result["observed"] = status.get("cause") or ("refused" if run.rc and not os.path.isdir(job.dir)
                                                         else status.get("verdict"))
            case.note("%s: %s" % (job.id, status.get("summary")))
            return
        result["observed"] = status.get("verdict")
        case.check(run.rc == 0, "submit.yml rc=%s" % run.rc)
        check_trained(case, job, steps)
        case.check(status.get("summary", "").startswith("trained %d of %d" % (steps, steps)),
                   "%s: summary %r, expected 'trained %d of %d ...'" % (job.id, status.get("summary"), steps, steps))
        step_dir = os.path.join(job.dir, "checkpoints", "global_step_%d" % steps)
        problems = checkpoint_problems(step_dir) if os.path.isdir(step_dir) else ["no %s" % step_dir]
        case.check(not problems, "%s: checkpoint incomplete: %s" % (job.id, "; ".join(problems)))
        if spec.get("lora_rank"):
            saved = lora_rank_saved(step_dir)
            case.check(saved == spec["lora_rank"], "%s: the checkpoint records LoRA rank %s, expected %s"
                       % (job.id, saved, spec["lora_rank"]))
            result["lora_rank_saved"] = saved
        if case.problems:
            return
        resumed = Job(case, job.id + "-resume")
        result["jobs"].append(resumed.id)
        overrides["trainer.total_training_steps"] = steps + 1
        run2 = submit(case, {"workload": spec["workload"], "trainer_overrides": overrides, "resume_from": job.id},
                      resumed.id, folder, "resume %s" % spec["workload"])
        result["resume_wall_s"] = round(run2.seconds, 1)
        case.check(run2.rc == 0, "resume: submit.yml rc=%s" % run2.rc)
        after = check_trained(case, resumed, steps + 1, first=steps + 1)
        result["resume_summary"] = after.get("summary") or ""
        case.note("%s: %s; %s: %s" % (job.id, status.get("summary"), resumed.id, after.get("summary")))


def write_results(path, results, cases):
    """Merge this run's rows into ``path`` (a case not run keeps its earlier row) and write it."""
    data = read_json(path) or {}
    rows = data.get("cases") or {}
    rows.update(results)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    order = [c["name"] for c in cases]
    data = {"updated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "commit": commit, "host_cpus": os.cpu_count(),
            "cases": {name: rows[name] for name in order if name in rows}}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
        handle.write("\n")


def main():
    """Run the matrix (all cases, ``--ci``'s subset or ``--only``'s), print the table; return the exit code."""
    steps, specs = load_cases()
    table, results = [], {}
    for spec in specs:
        expected = "trained %d of %d, checkpoint complete, resume starts at %d" % (steps, steps, steps + 1) \
            if spec["expectation"] == "trains" else spec["expectation"]
        table.append((spec["name"], expected, lambda case, spec=spec: run_row(case, spec, steps, results)))
    parser = suite_parser(__doc__, table)
    parser.add_argument("--ci", action="store_true", help="only the cases marked ci: true")
    parser.add_argument("--out", default=DEFAULT_OUT, help="results JSON (merged with an earlier run's)")
    args = parser.parse_args()
    only = list(args.only or []) + ([s["name"] for s in specs if s.get("ci")] if args.ci else [])
    cluster = Cluster(args.inventory, args.host_shared)
    code = run_cases(table, cluster, only or None, "matrix")
    write_results(args.out, results, specs)
    return code


if __name__ == "__main__":
    sys.exit(main())
