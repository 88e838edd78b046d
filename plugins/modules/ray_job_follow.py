#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Documentation of the ray_job_follow action plugin (plugins/action/ray_job_follow.py); it runs on the Ansible controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_follow
short_description: Wait for a Ray job's end and print its progress every few seconds
description:
  - Runs on the Ansible controller and calls M(mvp.ray.ray_job_info) on the task's host (the head). Takes
    every option of M(mvp.ray.ray_job_info) and passes it on.
  - With I(wait=terminal) and I(progress_interval) above 0, waits in chunks of I(progress_interval)
    seconds (the first one at most 5 s, so that a running job shows its first line soon; ray_job_info's
    I(wait_at_most), its I(wait_state) carried from chunk to chunk so the deadlines and the placement
    groups' ages count from the start) and, between two chunks, prints one
    line in the play's normal output - the step and the planned steps, the workload's key metric
    (first and last value), seconds per step, the ETA, the restarts so far and the progress watchdog's
    bound (module_utils mvp_progress).
  - "For example C(sft-1: RUNNING step 5/8 | train/loss 6.234 -> 5.25 | 2.1 s/step | ETA 6s | restarts 0 of 2 |
    watchdog: hang after 5m00s without a new step (quiet 3s))."
  - Each chunk polls the Jobs API as one long call would, so the dashboard sees the same requests per
    minute; the chunks add one module call per I(progress_interval) (docs/benchmarks.md).
  - Before the first line it prints the command that follows the job again, and again when the play
    is interrupted (Ctrl-C), which leaves the job running.
  - With I(run), I(submission_id) is a run's first attempt and the wait lasts until the run's end - each
    attempt is followed as above; when one ends, the job controller (module_utils mvp_controller) judges it and
    either continues the run (C(logs/restart.json) names the next attempt, which is followed next) or ends it
    (C(logs/run_end.json) of the first attempt - C(logs/supervisor.json) in runs of older versions -, returned as
    C(run_end)), the next attempt followed once its job directory exists. The files and the job controller's
    heartbeat are read on the task's host (C(ansible.builtin.slurp), and C(ansible.builtin.stat) for a next
    attempt's folder) by the rules the job controller reads them with (module_utils mvp_run_state). The job
    controller owns the deadlines; this only watches, and says so when the head does not answer (the job controller
    heals it) or when no job controller's heartbeat is recent.
  - Otherwise (I(wait=none), or I(progress_interval=0)) it is one call of M(mvp.ray.ray_job_info).
  - Returns what the last call of M(mvp.ray.ray_job_info) returned, plus C(progress_lines), C(module_calls)
    and C(http_requests) (of all the calls).
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.connection
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
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
  run:
    description: Follow the run whose first attempt is I(submission_id) until the job controller wrote its end.
    type: bool
    default: false
  jobs_dir:
    description: With I(run), the jobs folder on the task's host (C(<shared_root>/jobs)).
    type: str
    default: ""
  run_timeout:
    description: With I(run), seconds after which the play stops watching (the job controller goes on); C(0) - 30 days.
    type: float
    default: 0
  progress_interval:
    description: Seconds between two progress lines while waiting; C(0) waits in one module call and prints nothing.
    type: float
    default: 30
  progress_metric:
    description: The workload's key metric (verl's name); empty picks C(train/loss) or C(critic/score/mean).
    type: str
    default: ""
  progress_workloads:
    description: The workload catalog; the key metric is the first of the job's workload's C(metrics) (see M(mvp.ray.ray_job_info)).
    type: dict
    default: {}
  pending_timeout:
    description: See M(mvp.ray.ray_job_info).
    type: int
    default: 300
  running_timeout:
    description: See M(mvp.ray.ray_job_info).
    type: int
    default: 3600
  pg_pending_timeout:
    description: See M(mvp.ray.ray_job_info).
    type: int
    default: 0
  pg_check_interval:
    description: See M(mvp.ray.ray_job_info).
    type: float
    default: 5.0
  poll_interval:
    description: See M(mvp.ray.ray_job_info).
    type: float
    default: 1.0
  worker_resource:
    description: See M(mvp.ray.ray_job_info).
    type: str
    default: worker_node
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Follow | Wait for the end, a progress line every 30 s
  mvp.ray.ray_job_follow:
    submission_id: sft-20261126-031500-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    wait: terminal
    progress_interval: 30
    progress_workloads: "{{ mvp_workloads }}"
  register: followed
"""

RETURN = r"""
job:
  description: Ray JobDetails of the job at the end of the wait (see M(mvp.ray.ray_job_info)).
  type: dict
  returned: always
progress:
  description: The job's progress as the last call read it (see M(mvp.ray.ray_job_info)).
  type: dict
  returned: with I(wait=terminal) and I(progress_interval) above 0
progress_lines:
  description: The progress lines printed while waiting.
  type: list
  elements: str
  returned: with I(wait=terminal) and I(progress_interval) above 0
run_end:
  description: >-
    With I(run), the run's end as the job controller wrote it (C(state), C(trained), C(why), C(attempts), C(verdict),
    C(goodput): the GPU-hour ledger's summary line, e.g. C(goodput 86%: 41 min productive, 4 min start-up, ...)).
  type: dict
  returned: with I(run)
status:
  description: With I(run), the last attempt's C(logs/status.json) (Ray's status and the verdict).
  type: dict
  returned: with I(run)
submission_id:
  description: With I(run), the last attempt's id.
  type: str
  returned: with I(run)
http_requests:
  description: HTTP requests to the dashboard of every call of M(mvp.ray.ray_job_info) the wait took.
  type: int
  returned: success
module_calls:
  description: Calls of M(mvp.ray.ray_job_info) the wait took.
  type: int
  returned: with I(wait=terminal) and I(progress_interval) above 0
"""
