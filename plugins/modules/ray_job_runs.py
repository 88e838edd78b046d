#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read job directories on the shared storage as training runs."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_runs
short_description: Read job directories as training runs (status, steps, metrics, checkpoints)
description:
  - Reads C(<jobs_dir>/<submission_id>/) as written by submit.yml and verl - the job spec
    (C(config/job_spec.json)), the last recorded status (C(logs/status.json)), verl's
    metrics (C(logs/metrics.jsonl), file logger) and the newest checkpoint (C(checkpoints/)).
  - The job directories outlive the cluster; when I(address) answers, Ray's job table
    gives the live status of the jobs it knows (one C(list_jobs) call), else the
    recorded status is used.
  - Selects runs by id (I(submission_ids)), or the newest I(last) of a workload or of a
    repeat group; runs a selected run resumed from are returned in C(parents).
  - With I(compare), also says what differs between the selected runs (report.yml) -
    their effective configurations (C(config/resolved_config.yaml)) key by key with where
    each value came from, and when their code snapshots (the specs' C(code_path)) differ,
    the files that differ (from the snapshots' C(MANIFEST.json), computed for older
    snapshots) with a unified diff of the changed text files capped at I(diff_max_lines)
    and I(diff_max_bytes). The full diff goes to I(diff_file).
  - Read only, except I(diff_file); runs on a node that mounts the shared storage (the head).
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads only; the full code diff (I(diff_file)) is not written.
  diff_mode:
    support: N/A
    details:
      - The runs' configuration and code differences are return values (C(config_diff), C(code)), not Ansible's diff.
options:
  jobs_dir:
    description: The jobs folder, C(<mvp_shared_root>/jobs).
    type: path
    required: true
  submission_ids:
    description: Runs to read, in this order. Ids without a job directory are returned in C(missing).
    type: list
    elements: str
    default: []
  workload:
    description: Without I(submission_ids), only runs of this workload.
    type: str
  group:
    description: Without I(submission_ids), only runs of this repeat group (C(repeat.group) of the spec).
    type: str
  last:
    description: Without I(submission_ids), the newest N matching runs (0 - all), returned oldest first.
    type: int
    default: 0
  metrics:
    description: Metric names to read from C(metrics.jsonl); empty - every metric.
    type: list
    elements: str
    default: []
  series:
    description: Return each metric's full series (C([[step, value], ...])); false - the last values only.
    type: bool
    default: true
  address:
    description: Ray Jobs API (dashboard) for live statuses; empty - recorded statuses only.
    type: str
    default: ""
  mlflow_ui_url:
    description:
      - The MLflow tracking server as browsers reach it (mvp_mlflow_ui_url), for each tracked run's C(mlflow.ui_url).
      - Empty - the head's node IP now (from I(address)) with the port the run was logged to; without an answer,
        the link recorded at submission.
    type: str
    default: ""
  compare:
    description:
      - Return C(config_diff) and C(code_diff) of the selected runs (not of I(parents)).
      - A config value differs when its JSON text differs after each run's own submission id
        is replaced by C(<submission_id>); a key no override of the run set is the snapshot's
        default, named with the file under C(verl/trainer/config/) that sets it when one is found.
    type: bool
    default: false
  baseline:
    description: With I(compare), the run whose snapshot the others are compared with; empty or unknown - the first run.
    type: str
    default: ""
  diff_file:
    description:
      - With I(compare), write the full unified diff of the snapshots here (every added, removed
        and changed file; binary files named only) when they differ; the folder is created.
        Omitted - not written. Not written in check mode.
    type: path
  diff_max_lines:
    description: With I(compare), lines of the inline code diff returned in C(code_diff) (shared by every snapshot pair).
    type: int
    default: 200
  diff_max_bytes:
    description: With I(compare), bytes (UTF-8) of the inline code diff.
    type: int
    default: 20000
  epochs:
    description:
      - Return each run's and parent's C(epoch), the steps of one epoch of its trainer (module_utils
        C(mvp_resume.epoch_info)), for a resume. They are verl's planned steps over C(trainer.total_epochs) from the
        driver log, else the training rows (parquet metadata) over C(data.train_batch_size).
    type: bool
    default: false
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Report | Read the last three SFT runs
  mvp.ray.ray_job_runs:
    jobs_dir: /private/jobs
    workload: sft
    last: 3
    metrics: [train/loss, val/loss]
    address: http://127.0.0.1:8265
  register: runs

- name: Report | Read two runs and what differs between them (configs, code)
  mvp.ray.ray_job_runs:
    jobs_dir: /private/jobs
    submission_ids: [sft-20261122-143029-669f9a, sft-20261122-150112-0c2d41]
    compare: true
    diff_file: /tmp/report-code.diff
  register: runs

- name: Submit | Find the checkpoint to resume from
  mvp.ray.ray_job_runs:
    jobs_dir: /private/jobs
    submission_ids: [sft-20261122-143029-669f9a]
    series: false
    epochs: true
"""

RETURN = r"""
runs:
  description: The selected runs, in the order asked (by id) or oldest first.
  type: list
  elements: dict
  returned: always
  contains:
    submission_id: {description: "the job's id", type: str}
    job_dir: {description: "its folder", type: str}
    spec: {description: "config/job_spec.json (null when unreadable)", type: dict}
    workload: {description: "from the spec", type: str}
    code_id: {description: "from the spec", type: str}
    model: {description: "from the spec", type: str}
    created: {description: "when job_spec.json was written (seconds since the epoch)", type: float}
    status: {description: "Ray's live status, else the recorded one, else UNKNOWN", type: str}
    status_source: {description: "ray, recorded or none", type: str}
    start_time: {description: "ms since the epoch (Ray's)", type: int}
    end_time: {description: "ms since the epoch (Ray's), null while running", type: int}
    wall_s: {description: "seconds from start to end (or to now while running)", type: float}
    verdict: {description: "the recorded verdict in one line (trained N of M steps, or FAILED [cause] ...), or null", type: str}
    last_step: {description: "highest step in metrics.jsonl (0 - none yet)", type: int}
    last: {description: "last value of each read metric", type: dict}
    series: {description: "metric -> [[step, value], ...] (with series=true)", type: dict}
    checkpoint: {description: "newest checkpoint {step, path, world_size, skipped, tracker, entries} or null", type: dict}
    epoch: {description: "with epochs=true, {steps_per_epoch (int or null), how (where it comes from, or why unknown)}", type: dict}
    resume_from: {description: "the spec's resume_from {submission_id, step, path, world_size} or null", type: dict}
    repeat: {description: "the spec's repeat {group, index, count} or null", type: dict}
    mlflow: {description: "its MLflow run {run_id, experiment_id, tracking_uri, ui_url} (ui_url as reached now, see mlflow_ui_url), or null", type: dict}
    preemption: {description: "what preemption did to it (by whom, at which step, what it preempted, waits), '' for nothing", type: str}
    ledger:
      description: >-
        the GPU-hour ledger of its run (logs/ledger.json of the run's first attempt, module_utils mvp_runs.read_ledger),
        null for a run older than the ledger
      type: dict
parents:
  description: Runs a selected run resumed from (recursively), not selected themselves.
  type: list
  elements: dict
  returned: always
missing:
  description: Asked ids that have no job directory.
  type: list
  elements: str
  returned: always
ray_error:
  description: Why Ray's job table could not be read (statuses are then the recorded ones).
  type: str
  returned: when address was given and Ray did not answer
config_diff:
  description: The runs' effective configurations compared key by key (module_utils mvp_report.config_diff).
  type: dict
  returned: with compare
  contains:
    compared: {description: "ids of the runs that have a config/resolved_config.yaml (none compared with fewer than two)", type: list}
    missing: {description: "ids without one - scripts, jobs from before it was kept (the report uses their job spec diff)", type: list}
    errors: {description: "id -> why its resolved_config.yaml could not be read", type: dict}
    rows:
      description:
        - One per differing key, sorted by key - C(key) (dotted; a key holding a dot is bracketed),
          C(values) (id -> JSON text, or C((unset)) when the run has no such key),
          C(origins) (id -> C({key, source, override, code_id, files, label})) and C(sources) (the distinct sources).
        - C(source) is C(request), C(inventory), C(catalog), C(project) (the spec's C(override_sources),
          the longest override key that is the key or a mapping above it, in C(override)) or
          C(default) (the snapshot's own value; C(files) are the snapshot's config files that set it, best first).
      type: list
      elements: dict
    redacted: {description: "keys with a redacted secret in some run (values not known; equal <redacted> is not a difference)", type: list}
    more: {description: "differing keys left out beyond 500 rows", type: int}
code_diff:
  description: The runs' code snapshots compared with the baseline's (module_utils mvp_report.code_diff).
  type: dict
  returned: with compare
  contains:
    baseline: {description: "the baseline run", type: str}
    baseline_code_id: {description: "its snapshot", type: str}
    records: {description: "code_id -> recorded (MANIFEST.json) or computed (hashed now: a snapshot older than manifests)", type: dict}
    pairs:
      description:
        - One per other snapshot - C(from), C(to) (code_ids), C(runs) (ids on C(to)), C(error) (why it could not
          be compared), C(changed), C(added), C(removed) (file records C({path, binary, too_large, added_lines,
          removed_lines, error}), changed ones with C(shown) - full, part or no - and configuration files first),
          C(diff) (the inline unified diff of the changed text files) and C(truncated) (it was cut at a cap).
        - Empty when every run used the baseline's snapshot; a pair without files - the same content.
      type: list
      elements: dict
    max_lines: {description: "the inline cap in lines", type: int}
    max_bytes: {description: "the inline cap in bytes", type: int}
    shown_lines: {description: "lines of the inline diffs", type: int}
    shown_bytes: {description: "bytes of the inline diffs", type: int}
    full_lines: {description: "lines of the full diff", type: int}
    full_bytes: {description: "bytes of the full diff", type: int}
    truncated: {description: "an inline diff was cut", type: bool}
    full_file: {description: "where the full diff was written (diff_file), null when not written (no difference, no diff_file, check mode)", type: str}
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_resume import epoch_info
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import compare_runs, list_job_dirs, read_run
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import ui_url
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import clients, job_row, list_nodes, summarize
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import one_line

ID_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def ray_table(address):
    """Return ({submission_id: job row}, error text or None) from Ray's job table."""
    if not address:
        return {}, None
    try:
        jobs = clients(address)[0].list_jobs()
    except Exception as exc:  # Ray unreachable or the cluster is gone (mvp_ray_rest errors, a non-JSON answer)
        return {}, ("%s" % exc).splitlines()[0] if str(exc) else type(exc).__name__
    return {row["submission_id"]: row for row in (job_row(j) for j in jobs) if row["submission_id"]}, None


def mlflow_links(runs, base, address):
    """Point each tracked run's ``mlflow.ui_url`` at the tracking server as it is reached now.

    ``base`` (mvp_mlflow_ui_url) wins; else the head's node IP now (Ray's node table at ``address``: a recreated
    head container may have another IP than at submission) with the port the run was logged to; else the
    link recorded at submission stays.
    """
    head_ip = None
    if not base and address and any(r.get("mlflow") for r in runs):
        try:
            head_ip = (summarize(list_nodes(clients(address)[1], address), "")["head"] or {}).get("node_ip")
        except Exception:  # Ray unreachable: the recorded links stay
            head_ip = None
    for run in runs:
        record = run.get("mlflow")
        if not record:
            continue
        port = (record.get("tracking_uri") or "").rpartition(":")[2]
        now = base or ("http://%s:%s" % (head_ip, port) if head_ip and port else None)
        if now:
            record["ui_url"] = ui_url(now, record["experiment_id"], record["run_id"])


def add_status(run, table, now):
    """Set status, status_source, start_time, end_time, wall_s and verdict (one line or None) of a run."""
    live = table.get(run["submission_id"])
    recorded = run.get("recorded_status") if isinstance(run.get("recorded_status"), dict) else None
    source = live or recorded
    run["status"] = (source or {}).get("status") or "UNKNOWN"
    run["status_source"] = "ray" if live else ("recorded" if recorded else "none")
    run["start_time"] = (source or {}).get("start_time")
    run["end_time"] = (source or {}).get("end_time")
    run["wall_s"] = None
    # The project's verdict (mvp_verdict, recorded in status.json when the job ended): one line.
    run["verdict"] = one_line(recorded) if recorded and recorded.get("verdict") else None
    if run["start_time"]:
        end = run["end_time"] or (now * 1000.0 if run["status"] in ("RUNNING", "PENDING") else None)
        if end:
            run["wall_s"] = round((end - run["start_time"]) / 1000.0, 1)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            jobs_dir=dict(type="path", required=True),
            submission_ids=dict(type="list", elements="str", default=[]),
            workload=dict(type="str"),
            group=dict(type="str"),
            last=dict(type="int", default=0),
            metrics=dict(type="list", elements="str", default=[]),
            series=dict(type="bool", default=True),
            address=dict(type="str", default=""),
            mlflow_ui_url=dict(type="str", default=""),
            compare=dict(type="bool", default=False),
            baseline=dict(type="str", default=""),
            diff_file=dict(type="path"),
            diff_max_lines=dict(type="int", default=200),
            diff_max_bytes=dict(type="int", default=20000),
            epochs=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    jobs_dir = params["jobs_dir"]
    keys = params["metrics"] or None
    if not os.path.isdir(jobs_dir):
        module.fail_json(msg="jobs_dir %s is not a folder: is the shared storage mounted (site.yml)?" % jobs_dir)
    for rid in params["submission_ids"]:
        if not rid or set(rid) - ID_CHARS or rid[0] in "._-":
            module.fail_json(msg="submission_ids: %r is not a submission id (letters, digits, '.', '_', '-')" % rid)
    for name in ("diff_max_lines", "diff_max_bytes"):
        if params[name] < 0:
            module.fail_json(msg="%s is %d: give 0 (no inline diff) or more" % (name, params[name]))

    def read(rid):
        return read_run(os.path.join(jobs_dir, rid), keys, params["series"])

    missing = []
    runs = []
    if params["submission_ids"]:
        for rid in params["submission_ids"]:
            if os.path.isdir(os.path.join(jobs_dir, rid)):
                runs.append(read(rid))
            else:
                missing.append(rid)
    else:
        for rid, _path in list_job_dirs(jobs_dir):
            run = read(rid)
            if params["workload"] and run["workload"] != params["workload"]:
                continue
            if params["group"] and (run.get("repeat") or {}).get("group") != params["group"]:
                continue
            runs.append(run)
            if params["last"] and len(runs) >= params["last"]:
                break
        runs.reverse()

    selected = {r["submission_id"] for r in runs}
    parents = []
    queue = list(runs)
    while queue:
        parent_id = ((queue.pop(0).get("resume_from") or {}).get("submission_id"))
        if parent_id and parent_id not in selected and os.path.isdir(os.path.join(jobs_dir, parent_id)):
            selected.add(parent_id)
            parent = read(parent_id)
            parents.append(parent)
            queue.append(parent)

    table, ray_error = ray_table(params["address"])
    now = time.time()
    for run in runs + parents:
        add_status(run, table, now)
        if params["epochs"]:
            run["epoch"] = epoch_info(run["job_dir"])
    mlflow_links(runs + parents, params["mlflow_ui_url"], params["address"])
    result = dict(changed=False, runs=runs, parents=parents, missing=missing)
    if ray_error:
        result["ray_error"] = ray_error
    if params["compare"]:
        configs, code, full = compare_runs(runs, params["baseline"] or None, params["diff_max_lines"],
                                           params["diff_max_bytes"])
        code["full_file"] = None
        if full and params["diff_file"] and not module.check_mode:
            try:
                write_text_atomic(params["diff_file"], full)
            except OSError as exc:
                module.fail_json(msg="cannot write the code diff to %s: %s" % (params["diff_file"], exc))
            code["full_file"] = params["diff_file"]
            result["changed"] = True
        result.update(config_diff=configs, code_diff=code)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
