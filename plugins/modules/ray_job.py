#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: submit, inspect, wait for and stop Ray jobs by submission_id."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job
short_description: Manage a Ray job through JobSubmissionClient, idempotent by submission_id
description:
  - Submits a job to a Ray cluster with C(ray.job_submission.JobSubmissionClient),
    reports its status, waits for placement or a terminal status, saves its
    driver log, stops it or deletes it.
  - Idempotent by I(submission_id) - a job that already exists is reported,
    never submitted again.
  - Once the job has left PENDING, its C(driver_node_id) is mapped to an IP with
    C(ray.util.state.list_nodes) and returned as C(driver_node_ip).
  - Runs where the dashboard is reachable (normally on the head, talking to
    C(http://127.0.0.1:<dashboard port>)) with a Python that has C(ray[default]).
  - Full check mode - nothing is submitted, stopped or written.
options:
  submission_id:
    description: Ray submission id of the job.
    type: str
    required: true
  state:
    description:
      - C(submitted) submits the job unless it exists.
      - C(info) only reports (and waits, if I(wait) asks).
      - C(stopped) stops a job that is not terminal and waits until it is.
      - C(absent) deletes a terminal job from the job table.
    type: str
    choices: [submitted, info, stopped, absent]
    default: submitted
  address:
    description: Dashboard URL of the cluster (Jobs and State API); the project passes C(mvp_ray_jobs_address).
    type: str
    required: true
  auth_token:
    description: Ray auth token sent as C(Authorization Bearer) (Ray 2.52+ token mode).
    type: str
  entrypoint:
    description: Shell command of the driver. Required with I(state=submitted).
    type: str
  runtime_env:
    description: Ray runtime_env dict (env_vars, working_dir, ...).
    type: dict
  entrypoint_resources:
    description: Custom resources the driver needs, for example C({"worker_node" 1}).
    type: dict
  entrypoint_num_cpus:
    description: CPUs reserved for the driver.
    type: float
  metadata:
    description: String metadata stored with the job.
    type: dict
  wait:
    description:
      - C(none) returns at once; C(placed) waits until the job has left PENDING;
        C(terminal) waits until SUCCEEDED, FAILED or STOPPED.
    type: str
    choices: [none, placed, terminal]
    default: none
  pending_timeout:
    description:
      - Seconds a job may stay PENDING. Past it the job is stopped and the module
        fails with a message naming the resources nobody offers.
    type: int
    default: 300
  pg_pending_timeout:
    description:
      - Seconds a placement group created by this RUNNING job may stay PENDING
        (Ray's state API, age from the group's creation request). Past it the job
        is stopped and the module fails naming each group's bundle shape and what
        the ALIVE nodes offer. Checked while waiting and, with I(state=info), once.
        C(0) turns the check off.
    type: int
    default: 0
  pg_check_interval:
    description: Seconds between two placement group checks while waiting.
    type: float
    default: 5.0
  running_timeout:
    description: Seconds to wait for a terminal status after placement (I(wait=terminal)).
    type: int
    default: 3600
  poll_interval:
    description: Seconds between status polls.
    type: float
    default: 1.0
  log_dest:
    description:
      - File to write the driver log to (C(get_job_logs)), written once the job
        is terminal or, with I(state=info), whenever the module runs. The file is
        written to a temporary name, then renamed.
    type: path
  status_dest:
    description:
      - File to write the job's status to, as JSON with C(submission_id), C(status),
        C(message), C(start_time), C(end_time) (ms since the epoch), C(driver_exit_code)
        and C(recorded_at) (s since the epoch); written whenever I(log_dest) is. The
        job directory keeps it after Ray forgets the job (status.yml, report.yml).
    type: path
  placement_dest:
    description:
      - File to write the placement to once the job has a driver node, as JSON with
        C(submission_id), C(status), C(driver_node_id), C(driver_node_ip), C(head_node_ip)
        and C(worker_ips) (ALIVE nodes carrying I(worker_resource)). Temporary name, then rename.
    type: path
  worker_resource:
    description: Custom resource that marks worker nodes (for C(worker_ips)).
    type: str
    default: worker_node
author: MVP project
"""

EXAMPLES = r"""
- name: Submit | Submit the job from the head and wait for placement
  ray_job:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    entrypoint: python -u /private/common/code/mvp_tools/selftest.py
    runtime_env:
      env_vars:
        PYTHONPATH: /private/common/code/verl/verl-0.9.1:${PYTHONPATH}
    entrypoint_resources: {worker_node: 1}
    entrypoint_num_cpus: 1
    wait: placed
  register: job

- name: Wait | Wait for the end and save the driver log
  ray_job:
    submission_id: "{{ job.job.submission_id }}"
    address: "{{ mvp_ray_jobs_address }}"
    state: info
    wait: terminal
    log_dest: /private/jobs/{{ job.job.submission_id }}/logs/ray_driver.log

- name: Stop | Stop a running job
  ray_job:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    state: stopped
"""

RETURN = r"""
stalled_placement_groups:
  description: On a placement-group failure, each stalled group (name, id, shape, waited_s, scheduling_state).
  type: list
  elements: dict
  returned: when pg_pending_timeout stopped the job
job:
  description: Ray JobDetails of the job (null when it does not exist) plus node IPs.
  type: dict
  returned: always
  contains:
    submission_id: {description: the id, type: str}
    status: {description: PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED, type: str}
    message: {description: Ray's status message, type: str}
    driver_node_id: {description: Ray node id of the driver, type: str}
    driver_node_ip: {description: IP of that node (state API), type: str}
    driver_exit_code: {description: exit code of the entrypoint, type: int}
    start_time: {description: milliseconds since the epoch, type: int}
    end_time: {description: milliseconds since the epoch, type: int}
existed:
  description: True when the job was already in the job table before this run.
  type: bool
  returned: always
head_node_ip:
  description: IP of the ALIVE head node (state API).
  type: str
  returned: when the job was placed
worker_ips:
  description: IPs of the ALIVE nodes carrying I(worker_resource) (state API).
  type: list
  elements: str
  returned: when the job was placed
log_dest:
  description: Path of the written driver log.
  type: str
  returned: when written
log_error:
  description: Why Ray could not return the driver log (for example its node died); the file then says so.
  type: str
  returned: when fetching the log failed
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.mvp_files import write_text_atomic
from ansible.module_utils.mvp_ray import (
    TERMINAL_STATUSES, auth_headers, bundle_shapes, import_ray, job_info_or_none, list_nodes,
    list_pending_placement_groups, node_ip_for, schedulable_resources, stalled_message, stalled_placement_groups,
    status_name, summarize)


def details_to_dict(details):
    """Turn Ray's JobDetails (pydantic model or dataclass) into a JSON-safe dict."""
    if details is None:
        return None
    if hasattr(details, "model_dump"):
        data = details.model_dump()
    elif hasattr(details, "dict"):
        data = details.dict()
    else:  # pragma: no cover - older Ray
        data = dict(details.__dict__)
    return json.loads(json.dumps(data, default=str))


def status_of(job):
    """Return the status string of a job dict ('JobStatus.RUNNING' -> 'RUNNING')."""
    return status_name(job.get("status"))


def pending_message(job, params, nodes):
    """Say why a job is still PENDING: the resources it asked for vs what ALIVE nodes offer."""
    offered = {}
    for node in nodes:
        if node["state"] == "ALIVE":
            for key, value in schedulable_resources(node["resources_total"]).items():
                offered[key] = offered.get(key, 0) + value
    return (
        "Ray job %s still PENDING after %ss: no ALIVE node offers entrypoint_resources=%s "
        "with entrypoint_num_cpus=%s (ALIVE nodes offer %s). The job was stopped. Start workers "
        "carrying that resource (ray_worker role) or raise pending_timeout."
        % (job.get("submission_id"), params["pending_timeout"],
           json.dumps(params["entrypoint_resources"] or {}), params["entrypoint_num_cpus"],
           json.dumps(offered, sort_keys=True))
    )


class RayJob(object):
    """Thin state machine over JobSubmissionClient for one submission id."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        client_cls, self.state_api = import_ray(module)
        try:
            self.client = client_cls(self.params["address"],
                                     headers=auth_headers(self.params["auth_token"]))
        except Exception as exc:
            module.fail_json(msg="Cannot reach the Ray Jobs API at %s: %s" % (self.params["address"], exc))

    def info(self):
        """Return the job dict or None when the id is unknown to Ray."""
        return details_to_dict(job_info_or_none(self.client, self.params["submission_id"]))

    def check_placement_groups(self, job, first_seen):
        """Stop the job and fail when one of its placement groups is PENDING past pg_pending_timeout.

        A trainer that asks for a placement group no node can hold waits forever
        (verl calls ``ray.get(pg.ready())`` without a deadline). Reads Ray's state
        API; does nothing when the deadline is 0, the job is not RUNNING or has no
        Ray job id yet.
        """
        timeout = self.params["pg_pending_timeout"]
        if not timeout or status_of(job) != "RUNNING" or not job.get("job_id"):
            return
        try:
            groups = list_pending_placement_groups(self.state_api, self.params["address"])
        except Exception:  # the state API is best effort here; the next poll tries again
            return
        stalled = stalled_placement_groups(groups, job["job_id"], time.time(), timeout, first_seen)
        if not stalled:
            return
        nodes = list_nodes(self.state_api, self.params["address"])
        msg = stalled_message(self.params["submission_id"], stalled, nodes, timeout)
        if not self.module.check_mode:
            self.client.stop_job(self.params["submission_id"])
        self.module.fail_json(msg=msg, job=job, changed=True, stalled_placement_groups=[
            {"name": group["name"], "placement_group_id": group["placement_group_id"],
             "shape": bundle_shapes(group), "waited_s": round(age, 1),
             "scheduling_state": (group.get("stats") or {}).get("scheduling_state")}
            for group, age in stalled])

    def wait(self, job, until):
        """Poll until the job leaves PENDING (until='placed') or is terminal ('terminal')."""
        started = time.time()
        placed_at = None
        first_seen = {}
        last_pg_check = 0.0
        while True:
            status = status_of(job)
            if status != "PENDING" and placed_at is None:
                placed_at = time.time()
                if until == "placed":
                    return job
            if status in TERMINAL_STATUSES:
                return job
            now = time.time()
            if status == "PENDING" and now - started > self.params["pending_timeout"]:
                nodes = list_nodes(self.state_api, self.params["address"])
                msg = pending_message(job, self.params, nodes)
                self.client.stop_job(self.params["submission_id"])
                self.module.fail_json(msg=msg, job=job, changed=True)
            if now - last_pg_check >= self.params["pg_check_interval"]:
                last_pg_check = now
                self.check_placement_groups(job, first_seen)
            if placed_at is not None and now - placed_at > self.params["running_timeout"]:
                self.module.fail_json(
                    msg="Ray job %s still %s after running_timeout=%ss while waiting for a "
                        "terminal status; it was left running (stop it with stop.yml)."
                        % (self.params["submission_id"], status, self.params["running_timeout"]),
                    job=job)
            time.sleep(self.params["poll_interval"])
            job = self.info()

    def write_log(self, result):
        """Write the driver log atomically to log_dest and record the path in result."""
        dest = self.params["log_dest"]
        if not dest or self.module.check_mode:
            return
        try:
            logs = self.client.get_job_logs(self.params["submission_id"])
        except Exception as exc:  # the driver's node (and its log agent) may be gone
            result["log_error"] = str(exc).splitlines()[0]
            logs = ("# Ray could not return the driver log of %s (%s).\n# The copy written by the "
                    "entrypoint is logs/driver.log.\n" % (self.params["submission_id"], result["log_error"]))
        write_text_atomic(dest, logs)
        result["log_dest"] = dest
        result["changed"] = True

    def write_status(self, job, result):
        """Write the job's status atomically to status_dest."""
        dest = self.params["status_dest"]
        if not dest or self.module.check_mode or job is None:
            return
        record = {key: job.get(key) for key in ("submission_id", "message", "start_time", "end_time",
                                                 "driver_exit_code")}
        record.update(status=status_of(job), recorded_at=round(time.time(), 3))
        write_text_atomic(dest, json.dumps(record, indent=4, sort_keys=True) + "\n")
        result["changed"] = True

    def add_placement(self, job, result):
        """Add driver_node_ip and head_node_ip once the job has a driver node."""
        if not job or not job.get("driver_node_id"):
            return
        nodes = list_nodes(self.state_api, self.params["address"])
        job["driver_node_ip"] = node_ip_for(nodes, job["driver_node_id"])
        summary = summarize(nodes, self.params["worker_resource"])
        result["head_node_ip"] = summary["head"]["node_ip"] if summary["head"] else None
        result["worker_ips"] = summary["worker_ips"]
        dest = self.params["placement_dest"]
        if dest and not self.module.check_mode:
            placement = {"submission_id": self.params["submission_id"], "status": status_of(job),
                         "driver_node_id": job["driver_node_id"], "driver_node_ip": job["driver_node_ip"],
                         "head_node_ip": result["head_node_ip"], "worker_ips": result["worker_ips"]}
            write_text_atomic(dest, json.dumps(placement, indent=4, sort_keys=True) + "\n")
            result["changed"] = True

    def run(self):
        """Apply the requested state and exit the module."""
        params = self.params
        job = self.info()
        result = {"changed": False, "existed": job is not None}
        state = params["state"]
        if state == "submitted" and job is None:
            if not params["entrypoint"]:
                self.module.fail_json(msg="entrypoint is required to submit job %s" % params["submission_id"])
            result["changed"] = True
            if self.module.check_mode:
                self.module.exit_json(job=None, **result)
            kwargs = dict(entrypoint=params["entrypoint"], submission_id=params["submission_id"],
                          runtime_env=params["runtime_env"], metadata=params["metadata"],
                          entrypoint_resources=params["entrypoint_resources"],
                          entrypoint_num_cpus=params["entrypoint_num_cpus"])
            self.client.submit_job(**kwargs)
            job = self.info()
        elif state == "stopped" and job is not None and status_of(job) not in TERMINAL_STATUSES:
            result["changed"] = True
            if not self.module.check_mode:
                self.client.stop_job(params["submission_id"])
                job = self.wait(self.info(), "terminal")
        elif state == "absent" and job is not None:
            if status_of(job) not in TERMINAL_STATUSES:
                self.module.fail_json(msg="Ray job %s is %s: stop it before deleting it."
                                      % (params["submission_id"], status_of(job)), job=job)
            result["changed"] = True
            if not self.module.check_mode:
                self.client.delete_job(params["submission_id"])
            self.module.exit_json(job=job, **result)
        elif state in ("info", "stopped") and job is None:
            if state == "stopped":
                self.module.fail_json(msg="Ray job %s does not exist." % params["submission_id"])
            self.module.exit_json(job=None, **result)

        if job is not None and params["wait"] != "none" and not self.module.check_mode:
            job = self.wait(job, params["wait"])
        elif job is not None and state == "info":
            self.check_placement_groups(job, {})
        if job is not None and (state == "info" or status_of(job) in TERMINAL_STATUSES):
            self.write_log(result)
            self.write_status(job, result)
        self.add_placement(job, result)
        self.module.exit_json(job=job, **result)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            submission_id=dict(type="str", required=True),
            state=dict(type="str", default="submitted",
                       choices=["submitted", "info", "stopped", "absent"]),
            address=dict(type="str", required=True),
            auth_token=dict(type="str", no_log=True),
            entrypoint=dict(type="str"),
            runtime_env=dict(type="dict"),
            entrypoint_resources=dict(type="dict"),
            entrypoint_num_cpus=dict(type="float"),
            metadata=dict(type="dict"),
            wait=dict(type="str", default="none", choices=["none", "placed", "terminal"]),
            pending_timeout=dict(type="int", default=300),
            running_timeout=dict(type="int", default=3600),
            poll_interval=dict(type="float", default=1.0),
            pg_pending_timeout=dict(type="int", default=0),
            pg_check_interval=dict(type="float", default=5.0),
            log_dest=dict(type="path"),
            placement_dest=dict(type="path"),
            status_dest=dict(type="path"),
            worker_resource=dict(type="str", default="worker_node"),
        ),
        supports_check_mode=True,
    )
    RayJob(module).run()


if __name__ == "__main__":
    main()
