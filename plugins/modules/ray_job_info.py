#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read a Ray job - status, placement, driver log - optionally waiting for its end."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_info
short_description: Read a Ray job's status, placement and driver log, optionally waiting for its end
description:
  - Reads one job by I(submission_id) through Ray's Jobs REST API on the dashboard (module_utils mvp_ray_rest, no Ray import) and, once it
    has a driver node, where that runs (the State API's node list over HTTP). Submitting and stopping
    is M(mvp.ray.ray_job).
  - With I(wait=terminal) polls until SUCCEEDED, FAILED or STOPPED. A job that cannot make
    progress - PENDING past I(pending_timeout), or an infeasible placement group of it PENDING
    past I(pg_pending_timeout) - makes the module fail with C(stalled=true) and a message naming
    what nobody offers; the module never stops a job (the caller decides, with M(mvp.ray.ray_job)).
  - A placement group of the job that is PENDING is either infeasible - Ray's
    C(stats.scheduling_state) is C(INFEASIBLE), or (without a decisive state) its shape is bigger
    than what the ALIVE nodes offer in total - and then stalled once older than
    I(pg_pending_timeout); or it fits the cluster and waits for resources other jobs hold (Ray says
    C(NO_RESOURCES)) - then it is never stalled, however long it waits, and is returned in
    C(waiting_placement_groups) with the jobs holding the resources.
  - Changes nothing and writes no file (an C(_info) module); saving the driver log, the status and
    the verdict into the job directory is M(mvp.ray.ray_job_record).
  - With I(wait_at_most), a wait returns after that many seconds even when the job has not ended
    (C(done=false)), with I(wait_state) to pass to the next call so its deadlines and placement
    group ages continue; the action plugin M(mvp.ray.ray_job_follow) waits in such chunks and
    prints the job's progress (I(progress)) between them.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.connection
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
  - mvp.ray.attributes.actiongroup_ray
options:
  submission_id:
    description: Ray submission id of the job.
    type: str
    required: true
  wait:
    description: C(none) reads once; C(terminal) waits until SUCCEEDED, FAILED or STOPPED.
    type: str
    choices: [none, terminal]
    default: none
  pending_timeout:
    description: Seconds the job may stay PENDING while waiting.
    type: int
    default: 300
  running_timeout:
    description: Seconds to wait for a terminal status once the job has left PENDING.
    type: int
    default: 3600
  pg_pending_timeout:
    description:
      - Seconds a placement group created by this RUNNING job that no node can ever hold may stay
        PENDING (Ray's state API, age from the group's creation request). A group waiting for
        resources other jobs hold is reported, never stalled. Checked while waiting and, without
        I(wait), once. C(0) turns the check (and the waiting report) off.
    type: int
    default: 0
  pg_check_interval:
    description: Seconds between two placement group checks while waiting.
    type: float
    default: 5.0
  poll_interval:
    description: Seconds between status polls.
    type: float
    default: 1.0
  worker_resource:
    description: Custom resource that marks worker nodes (for C(placement.worker_ips)).
    type: str
    default: worker_node
  wait_at_most:
    description:
      - With I(wait=terminal), seconds after which the module returns even when the job has not
        ended (C(done=false), no C(placement)). C(0) waits until the end (or a timeout).
    type: float
    default: 0
  wait_state:
    description:
      - The C(wait_state) an earlier call of a chunked wait returned, so that I(pending_timeout),
        I(running_timeout) and the placement groups' ages count from the first call. Empty for
        the first call.
    type: dict
    default: {}
  progress:
    description:
      - Read the job's progress from its job directory (Ray's C(metadata.job_dir); module_utils
        mvp_progress) and return it in C(progress). The job directory must be readable where the
        module runs (the head).
    type: bool
    default: false
  progress_metric:
    description: The workload's key metric for C(progress) (verl's name); empty picks C(train/loss) or C(critic/score/mean).
    type: str
    default: ""
  progress_workloads:
    description:
      - The workload catalog (C(mvp_workloads)); the key metric of C(progress), when I(progress_metric)
        is empty, is the first of the C(metrics) of the job's workload (Ray's C(metadata.workload)).
    type: dict
    default: {}
  progress_planned:
    description: The planned step count when already known (the driver log is then not read); C(0) reads it.
    type: int
    default: 0
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Wait | Wait for the end (stalled placement groups fail the task after 600 s)
  mvp.ray.ray_job_info:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    wait: terminal
    pg_pending_timeout: 600
  register: final

- name: Follow | Wait at most 30 s, with the job's progress
  mvp.ray.ray_job_info:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    wait: terminal
    wait_at_most: 30
    progress: true
  register: chunk

- name: Status | Read a job
  mvp.ray.ray_job_info:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
  register: job
"""

RETURN = r"""
job:
  description: Ray JobDetails of the job (null when Ray does not know the id), plus C(driver_node_ip) once placed.
  type: dict
  returned: always
  contains:
    submission_id: {description: the id, type: str}
    status: {description: "PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED", type: str}
    message: {description: Ray's status message, type: str}
    driver_node_id: {description: Ray node id of the driver, type: str}
    driver_node_ip: {description: IP of that node (state API), type: str}
    driver_exit_code: {description: exit code of the entrypoint, type: int}
    start_time: {description: milliseconds since the epoch, type: int}
    end_time: {description: milliseconds since the epoch, type: int}
placement:
  description: >-
    Where the driver runs - C(submission_id), C(status), C(driver_node_id), C(driver_node_ip),
    C(head_node_ip), C(worker_ips); the format of a job directory's C(debug/placement.json).
  type: dict
  returned: when the job has a driver node
stalled:
  description: True when the module failed because the job cannot make progress (PENDING or a stalled placement group).
  type: bool
  returned: on failure
stalled_placement_groups:
  description: Each stalled (infeasible) group (name, placement_group_id, shape, waited_s, scheduling_state).
  type: list
  elements: dict
  returned: when an infeasible placement group stalled past I(pg_pending_timeout)
waiting_placement_groups:
  description:
    - The job's PENDING placement groups that fit the cluster and wait for resources in use, as last
      seen (with I(wait=terminal), the last check before the end). Each has C(name),
      C(placement_group_id), C(shape), C(waited_s), C(scheduling_state) and C(waits_for), the other
      jobs whose placed groups hold resources (C(submission_id), C(job_id), C(status), C(holds)).
  type: list
  elements: dict
  returned: when I(pg_pending_timeout) is not 0
waiting_msg:
  description: A sentence saying what the job waits for (empty when nothing waits).
  type: str
  returned: when I(pg_pending_timeout) is not 0
http_requests:
  description: HTTP requests this call sent to the dashboard (the head round trips of docs/benchmarks.md).
  type: int
  returned: success
done:
  description: False when I(wait_at_most) ended the wait before the job's end.
  type: bool
  returned: with I(wait=terminal)
wait_state:
  description: What the next call of a chunked wait passes as I(wait_state) (seconds waited, running, placement group ages).
  type: dict
  returned: with I(wait=terminal)
progress:
  description:
    - The job's progress (module_utils mvp_progress.read_progress) - C(last_step), C(planned),
      C(metric), C(first) and C(last) ([step, value]), C(step_time_s), C(metrics_mtime),
      C(resumed_step), C(restart_attempt), C(max_restarts), C(watchdog), C(goodput) (the run's goodput so
      far, from its C(logs/ledger.json)), C(read_at) (the head's clock) - and C(line), the line the plays print. Null when the job has no job directory.
  type: dict
  returned: with I(progress)
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_progress import (
    key_metric, progress_line, read_progress)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    CONNECTION_ARGS, TERMINAL_STATUSES, JobModule, bundle_shapes, is_infeasible, job_row, list_nodes,
    list_placement_groups, pending_groups, pending_message, placement, resource_holders, stalled_message,
    stalled_placement_groups, status_name, waiting_message)


class RayJobInfo(JobModule):
    """Read (and wait for) one submission id through Ray's Jobs REST API (mvp_ray_rest.JobsClient)."""

    waiting = None
    waiting_msg = ""
    done = True
    wait_state = None

    def __init__(self, module):
        JobModule.__init__(self, module)
        self.requests = 0
        for api in (self.client, self.state_api):
            api.call = self._counted(api.call)

    def _counted(self, call):
        """``call`` (one HTTP request to the dashboard), counted in ``self.requests``."""
        def counted(*args, **kwargs):
            self.requests += 1
            return call(*args, **kwargs)
        return counted

    def check_placement_groups(self, job, first_seen):
        """Fail when an infeasible placement group of the RUNNING job is PENDING past pg_pending_timeout.

        A trainer that asks for a placement group no node can hold waits forever (verl calls
        ``ray.get(pg.ready())`` without a deadline). A group that fits but waits for resources
        other jobs hold is recorded in ``self.waiting`` / ``self.waiting_msg`` instead. Does
        nothing when the deadline is 0, the job is not RUNNING or has no Ray job id yet.
        """
        timeout = self.params["pg_pending_timeout"]
        if not timeout or status_name(job.get("status")) != "RUNNING" or not job.get("job_id"):
            return
        now = time.time()
        try:
            groups = list_placement_groups(self.state_api, self.params["address"])
            pending = pending_groups(groups, job["job_id"], now, first_seen)
            nodes = list_nodes(self.state_api, self.params["address"]) if pending else []
        except Exception:  # the state API is best effort here; the next poll tries again
            return
        stalled = stalled_placement_groups([group for group, _age in pending], job["job_id"], now, timeout, nodes,
                                           first_seen)
        waiting = [(g, age) for g, age in pending if not is_infeasible(g, nodes)]
        self.waiting, self.waiting_msg = [], ""
        if waiting:
            try:
                jobs = [dict(job_row(d), job_id=d.get("job_id")) for d in self.client.list_jobs()]
            except Exception:  # naming the holders is best effort; their Ray job ids remain
                jobs = []
            holders = resource_holders(groups, jobs, job["job_id"])
            self.waiting = [dict(self._group_row(g, age), waits_for=holders) for g, age in waiting]
            self.waiting_msg = waiting_message(self.params["submission_id"], waiting, holders)
        if stalled:
            self.module.fail_json(
                msg=stalled_message(self.params["submission_id"], stalled, nodes, timeout), job=job, stalled=True,
                stalled_placement_groups=[self._group_row(g, age) for g, age in stalled],
                **self._waiting_result())

    @staticmethod
    def _group_row(group, age):
        """One placement group as the module returns it."""
        return {"name": group["name"], "placement_group_id": group["placement_group_id"],
                "shape": bundle_shapes(group), "waited_s": round(age, 1),
                "scheduling_state": (group.get("stats") or {}).get("scheduling_state")}

    def _waiting_result(self):
        """The waiting report's return values (none when the check is off)."""
        if not self.params["pg_pending_timeout"]:
            return {}
        return {"waiting_placement_groups": self.waiting or [], "waiting_msg": self.waiting_msg}

    def wait_terminal(self, job):
        """Poll until the job is terminal; fail (stalled) or time out as the options say.

        With ``wait_at_most``, returns once that many seconds passed (``self.done`` False); the
        state of the wait (``self.wait_state``) lets the next call continue its deadlines.
        """
        begun = time.time()
        state = self.params["wait_state"] or {}
        started = begun - float(state.get("waited_s") or 0)
        placed_at = None if state.get("running_s") is None else begun - float(state["running_s"])
        first_seen = {key: begun - float(age) for key, age in (state.get("pg_ages") or {}).items()}
        last_pg_check = begun - float(state["pg_checked_s"]) if state.get("pg_checked_s") is not None else 0.0
        bound = self.params["wait_at_most"]
        self.done = True
        while status_name(job.get("status")) not in TERMINAL_STATUSES:
            status = status_name(job.get("status"))
            now = time.time()
            if bound and now - begun >= bound:
                self.done = False
                break
            if status != "PENDING" and placed_at is None:
                placed_at = now
            if status == "PENDING" and now - started > self.params["pending_timeout"]:
                nodes = list_nodes(self.state_api, self.params["address"])
                msg = pending_message(job, self.params["pending_timeout"], nodes,
                                      "It was left as it is: stop it with stop.yml, or start workers carrying that resource.")
                self.module.fail_json(msg=msg, job=job, stalled=True)
            if now - last_pg_check >= self.params["pg_check_interval"]:
                last_pg_check = now
                self.check_placement_groups(job, first_seen)
            if placed_at is not None and now - placed_at > self.params["running_timeout"]:
                self.module.fail_json(
                    msg="Ray job %s still %s after running_timeout=%ss while waiting for a terminal "
                        "status; it was left running (stop it with stop.yml)."
                        % (self.params["submission_id"], status, self.params["running_timeout"]), job=job)
            time.sleep(self.params["poll_interval"])
            if bound and time.time() - begun >= bound:  # the next chunk's first read is this poll's
                self.done = False
                break
            job = self.info()
        now = time.time()
        if placed_at is None and status_name(job.get("status")) != "PENDING":
            placed_at = now
        self.wait_state = {"waited_s": round(now - started, 3),
                           "running_s": None if placed_at is None else round(now - placed_at, 3),
                           "pg_ages": {key: round(now - seen, 3) for key, seen in first_seen.items()},
                           "pg_checked_s": round(now - last_pg_check, 3) if last_pg_check else None}
        return job

    def progress(self, job):
        """The job's progress from its job directory, with the line (None without a job directory)."""
        metadata = job.get("metadata") or {}
        job_dir = metadata.get("job_dir") or ""
        if not job_dir:
            return None
        metric = self.params["progress_metric"] or key_metric(self.params["progress_workloads"], metadata.get("workload"))
        found = read_progress(job_dir, metric, self.params["progress_planned"] or None)
        found["read_at"] = time.time()
        found["line"] = progress_line(found, status_name(job.get("status")), found["read_at"],
                                      start_ms=job.get("start_time"))
        return found

    def run(self):
        """Read (and wait) and exit the module."""
        job = self.info()
        result = {"changed": False}
        if job is None:
            self.module.exit_json(job=None, http_requests=self.requests, **result)
        if self.params["wait"] == "terminal":
            job = self.wait_terminal(job)
            result.update(done=self.done, wait_state=self.wait_state)
        else:
            self.check_placement_groups(job, {})
        if self.done:  # a chunk of a longer wait leaves the placement to the call that sees the end
            where = placement(self.state_api, self.params["address"], job, self.params["worker_resource"])
            if where:
                result["placement"] = where
        if self.params["progress"]:
            result["progress"] = self.progress(job)
        result.update(self._waiting_result())
        self.module.exit_json(job=job, http_requests=self.requests, **result)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            CONNECTION_ARGS,
            submission_id=dict(type="str", required=True),
            wait=dict(type="str", default="none", choices=["none", "terminal"]),
            pending_timeout=dict(type="int", default=300),
            running_timeout=dict(type="int", default=3600),
            pg_pending_timeout=dict(type="int", default=0),
            pg_check_interval=dict(type="float", default=5.0),
            poll_interval=dict(type="float", default=1.0),
            worker_resource=dict(type="str", default="worker_node"),
            wait_at_most=dict(type="float", default=0),
            wait_state=dict(type="dict", default={}),
            progress=dict(type="bool", default=False),
            progress_metric=dict(type="str", default=""),
            progress_workloads=dict(type="dict", default={}),
            progress_planned=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    RayJobInfo(module).run()


if __name__ == "__main__":
    main()
