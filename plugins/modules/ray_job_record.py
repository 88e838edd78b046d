#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: save a Ray job's record (Ray's driver log, its status and the verdict) into its job directory."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_record
short_description: Save a Ray job's driver log, status and verdict into its job directory
description:
  - Reads one job by I(submission_id) through Ray's Jobs REST API on the dashboard (module_utils mvp_ray_rest, no Ray import) and writes
    what the job directory keeps after Ray forgets the job - Ray's copy of the driver log
    (C(logs/ray_driver.log)) and C(logs/status.json), Ray's status beside the project's verdict -
    each written to a temporary name, then renamed. File names come from the job contract
    (module_utils C(mvp_job.FILES)).
  - The verdict (module_utils C(mvp_verdict.judge_job_dir)) is read from the job's own files
    (C(config/job_spec.json), C(logs/driver.log), the metrics file, C(logs/watchdog.json)) and
    Ray's node and actor tables now, so a node Ray declared DEAD after the trainer ended still
    names the cause; the entrypoint's own C(logs/verdict.json) is kept, and named when it differs.
  - An ended job with an MLflow run (C(config/mlflow_run.json)) gets its verdict on the run (tags C(mvp.verdict),
    C(mvp.cause), C(mvp.summary)) and the run's status C(FINISHED) or C(FAILED); a restarted attempt's metrics
    (its C(logs/metrics.jsonl), the steps after the checkpoint it resumed from) are copied from its child run into
    the run (module_utils C(mvp_mlflow.record_verdict)). A tracking server that does not answer is named in the
    result's C(mlflow).
  - Reading and waiting is M(mvp.ray.ray_job_info); this module records what it sees once, running
    or ended. Check mode reads and judges but writes nothing.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.connection
  - mvp.ray.attributes
  - mvp.ray.attributes.actiongroup_ray
attributes:
  check_mode:
    support: partial
    details:
      - Reads the job and judges its verdict, but writes neither file and reports C(changed=false).
  diff_mode:
    support: none
options:
  submission_id:
    description: Ray submission id of the job.
    type: str
    required: true
  job_dir:
    description: The job's directory (C(<shared_root>/jobs/<submission_id>)); it must exist.
    type: path
    required: true
  lost_with_head:
    description:
      - The Ray head that ran the job was lost, and its job table with it (the job controller saw the head go,
        then healed the cluster; it records the attempt through C(playbooks/record.yml)). A job the head that answers now does not know is then judged
        from its job directory alone, with the status C(LOST) (module_utils C(mvp_verdict.LOST_STATUS)) - the cause
        C(head_lost) unless it had logged every planned step - and its record is written; without it such a job
        gets no record.
    type: bool
    default: false
  ledger_only:
    description:
      - Only put the run's final ledger (C(logs/ledger.json) of its first attempt, written by the job controller once
        the run ended) on its MLflow run, and nothing else - no Ray call, no file written. The job controller runs
        the record playbook this way after a run's end, since the attempt's record came before the final ledger.
    type: bool
    default: false
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Save | Ray's driver log, the status and the verdict
  mvp.ray.ray_job_record:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    job_dir: /private/jobs/selftest-20261121-120000-1a2b3c
  register: record
"""

RETURN = r"""
mlflow:
  description: What was put on the job's MLflow run (C(tagged <run id>)), why not, or '' for an untracked job.
  returned: when the job ended and the record was written
  type: str
ledger_mlflow:
  description: What was put on the run's MLflow run from its ledger (C(ledger on <run id>) with the tags and how many metrics), or why not.
  returned: when the job ended, the record was written and the run has a ledger.json; always with O(ledger_only)
  type: str
job:
  description: Ray JobDetails of the job as read (null when Ray does not know the id; nothing is written then).
  type: dict
  returned: always
verdict:
  description: >-
    The project's verdict - verdict (C(trained), C(succeeded), C(failed), C(running)), cause (C(node_lost),
    C(head_lost), C(host_oom), C(device_oom), C(collective), C(hang), C(busy), C(cluster_changed), C(queue_timeout), C(infeasible),
    C(config_rejected), C(platform_unsupported), C(user_code), C(stopped),
    C(short_training), C(no_progress), C(unknown)), summary (one line), evidence (list of {file, line, text} or
    {source, text}), steps ({logged, last, planned, resumed}); also written into the status file.
  type: dict
  returned: when Ray knows the job
log_dest:
  description: Path of the saved driver log.
  type: str
  returned: when Ray knows the job
status_dest:
  description: Path of the saved status (JSON - submission_id, status, message, start_time, end_time (ms since the epoch),
    driver_exit_code, recorded_at (s since the epoch) and the verdict's keys).
  type: str
  returned: when Ray knows the job
log_error:
  description: Why Ray could not return the driver log (for example its node died); the file then says so.
  type: str
  returned: when fetching the log failed
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import read_json, write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import job_file
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import log_ledger, record_verdict
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_ledger_sum import LEDGER_FILE
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import (
    LOST_STATUS, judge_job_dir, stopped_while_pending)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    CONNECTION_ARGS, TERMINAL_STATUSES, JobModule, list_job_actors, list_nodes, status_name)

STATUS_KEYS = ("submission_id", "message", "start_time", "end_time", "driver_exit_code")


class RayJobRecord(JobModule):
    """Write the record of one submission id into its job directory."""

    def judge(self, job):
        """The verdict of the job (mvp_verdict.judge_job_dir) with Ray's node and actor tables read now.

        :returns: dict, judge_job_dir's record, plus ``worker_error_files`` (the entrypoint's list)
            and ``entrypoint_verdict`` when the entrypoint named another cause.
        """
        job_dir = self.params["job_dir"]
        nodes, actors = [], []
        try:
            nodes = list_nodes(self.state_api, self.params["address"], detail=True)
            if job.get("job_id"):
                actors = list_job_actors(self.state_api, self.params["address"], job["job_id"], nodes)
        except Exception:  # the state API is best effort: the job's files still decide
            pass
        record = judge_job_dir(job_dir, status_name(job.get("status")), exit_code=job.get("driver_exit_code"),
                               message=job.get("message") or "", nodes=nodes,
                               actors=[a for a in actors if str(a.get("state")).upper() == "DEAD"],
                               start_ms=job.get("start_time"), end_ms=job.get("end_time"))
        try:
            with open(job_file(job_dir, "verdict"), encoding="utf-8") as handle:
                own = json.load(handle)
            record["worker_error_files"] = own.get("worker_error_files") or []
            if own.get("cause") != record.get("cause"):
                record["entrypoint_verdict"] = {"cause": own.get("cause"), "summary": own.get("summary")}
        except (OSError, ValueError):
            pass
        return record

    def driver_log(self, result):
        """Ray's copy of the driver log, or a note saying why Ray could not return it (str)."""
        try:
            return self.client.get_job_logs(self.params["submission_id"])
        except Exception as exc:  # the driver's node (and its log agent) may be gone
            result["log_error"] = str(exc).splitlines()[0]
            return ("# Ray could not return the driver log of %s (%s).\n# The copy written by the "
                    "entrypoint is %s.\n" % (self.params["submission_id"], result["log_error"],
                                             job_file("", "driver_log")))

    def run(self):
        """Read the job, judge it, write the two files and exit the module."""
        job_dir = self.params["job_dir"]
        if not os.path.isdir(job_dir):
            self.module.fail_json(msg="job_dir %s does not exist: give the job's directory "
                                      "(<shared_root>/jobs/<submission_id>)" % job_dir)
        if self.params["ledger_only"]:
            ledger = None if self.module.check_mode else self.ledger_on_mlflow(job_dir)
            self.module.exit_json(changed=False, ledger_mlflow=ledger if ledger is not None else "no ledger.json")
        job = self.info()
        if job is None and self.params["lost_with_head"]:
            job = {"submission_id": self.params["submission_id"], "status": LOST_STATUS,
                   "message": "the Ray head that ran it was lost with its job table; the head that answers now "
                              "does not know it"}
        stopped_by = read_json(job_file(job_dir, "stopped_by"))
        if job is not None and stopped_while_pending(status_name(job.get("status")), stopped_by):
            job = dict(job, status="STOPPED", message="stopped by %s while PENDING (Ray still lists it PENDING: it "
                                                      "never placed its driver)" % stopped_by.get("by"))
        result = {"changed": False, "job": job}
        if job is None:
            self.module.exit_json(**result)
        result["verdict"] = self.judge(job)
        result["log_dest"] = job_file(job_dir, "ray_driver_log")
        result["status_dest"] = job_file(job_dir, "status")
        logs = (self.driver_log(result) if job.get("status") != LOST_STATUS else
                "# Ray has no driver log of %s: the head that ran it was lost with its job table.\n# The copy written "
                "by the entrypoint is %s.\n" % (self.params["submission_id"], job_file("", "driver_log")))
        if not self.module.check_mode:
            record = {key: job.get(key) for key in STATUS_KEYS}
            record.update(status=status_name(job.get("status")), recorded_at=round(time.time(), 3))
            record.update(result["verdict"])
            write_text_atomic(result["log_dest"], logs)
            write_text_atomic(result["status_dest"], json.dumps(record, indent=4, sort_keys=True) + "\n")
            result["changed"] = True
            if status_name(job.get("status")) in TERMINAL_STATUSES + (LOST_STATUS,):
                spec = read_json(job_file(job_dir, "job_spec"))
                result["mlflow"] = record_verdict(job_file(job_dir, "mlflow_run"), result["verdict"],
                                                  job_file(job_dir, "metrics"),
                                                  int((spec.get("resume_from") or {}).get("step") or 0))
                ledger = self.ledger_on_mlflow(job_dir)
                if ledger is not None:
                    result["ledger_mlflow"] = ledger
        self.module.exit_json(**result)

    def ledger_on_mlflow(self, job_dir):
        """Put the run's ledger on its MLflow run (module_utils ``mvp_mlflow.log_ledger``), or None without one.

        The run's ledger is ``logs/ledger.json`` of its first attempt (``config/controller.json``'s ``run``, this
        attempt when it has none), and its MLflow run is that attempt's ``config/mlflow_run.json``.
        """
        run = read_json(job_file(job_dir, "controller")).get("run") or self.params["submission_id"]
        first = os.path.join(os.path.dirname(os.path.normpath(job_dir)), run)
        ledger = read_json(os.path.join(first, LEDGER_FILE))
        if not ledger:
            return None
        settings = read_json(job_file(first, "mlflow_run"))
        return log_ledger(settings, [settings.get("run_id")], ledger)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            CONNECTION_ARGS,
            submission_id=dict(type="str", required=True),
            job_dir=dict(type="path", required=True),
            lost_with_head=dict(type="bool", default=False),
            ledger_only=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    RayJobRecord(module).run()


if __name__ == "__main__":
    main()
