#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read a Ray cluster's node table through Ray's state API."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_cluster_info
short_description: List a Ray cluster's nodes and their resources
description:
  - Reads Ray's State API node list (C(GET /api/v0/nodes), over HTTP, no Ray import) from the
    dashboard of a running Ray cluster and returns every node with its IP, head flag, state and total
    resources, plus a summary of ALIVE nodes.
  - Runs on a node that can reach the dashboard (normally the head).
  - Read-only; supports check mode.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.connection
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
  - mvp.ray.attributes.actiongroup_ray
options:
  timeout:
    description: Seconds allowed for the state API call.
    type: int
    default: 30
  resource:
    description: Custom resource that marks worker nodes; counted in C(summary).
    type: str
    default: worker_node
  jobs:
    description: Also return the job table (Ray's Jobs REST API, C(GET /api/jobs/)).
    type: bool
    default: false
  queue:
    description:
      - Also return the cluster's job queue (implies I(jobs)) - every PENDING or RUNNING job whose
        entrypoint starts with the gate C(mvp_gate.py), in submission order, with its shape, whether its
        program started, and what it waits for (module_utils C(mvp_queue.plan) over the job table and the
        ALIVE workers' totals, with each job's own C(logs/queue.json) read from its job directory, the
        C(job_dir) of its submission metadata).
    type: bool
    default: false
  active:
    description:
      - Also return the jobs a change of the cluster would interrupt (implies I(jobs)) - every PENDING or
        RUNNING job with the IPs of the nodes its driver and ALIVE actors run on (Ray's state API), its last
        logged step and its newest complete checkpoint step, read from its job directory (module_utils
        C(mvp_running_jobs.active_jobs)). The cluster play reads this before it restarts Ray or recreates a
        node's container.
    type: bool
    default: false
  authentication_mode:
    description:
      - Also ask the head, first, whether it requires Ray's token - Ray's public C(GET /api/authentication_mode) - and
        return its answer as C(authentication_mode), also when the node table cannot be read. The cluster play's
        look asks it so that the ray_auth_token role needs no call of its own (issue 52).
    type: bool
    default: false
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Cluster | Read the node table
  mvp.ray.ray_cluster_info:
    address: http://127.0.0.1:8265
  register: cluster

- name: Cluster | Wait until two workers are alive
  mvp.ray.ray_cluster_info:
    address: "{{ mvp_ray_jobs_address }}"
  register: cluster
  until: cluster.summary.alive_workers | length >= 2
  retries: 30
  delay: 2
"""

RETURN = r"""
nodes:
  description: Every node Ray knows (ALIVE and DEAD), from Ray's State API (C(GET /api/v0/nodes)).
  type: list
  elements: dict
  returned: always
  sample:
    - node_id: 5d1c...
      node_ip: 172.18.0.3
      node_name: 172.18.0.3
      is_head_node: false
      state: ALIVE
      resources_total: {CPU: 2.0, worker_node: 100.0, memory: 1.0e9}
summary:
  description: ALIVE nodes only.
  type: dict
  returned: always
  contains:
    head: {description: the ALIVE head node dict or null, type: dict}
    alive_workers: {description: ALIVE nodes carrying I(resource), type: list}
    worker_ips: {description: IPs of alive_workers, type: list}
    total_gpus: {description: GPUs of all ALIVE nodes (float), type: float}
queue:
  description: With I(queue=true), the queue, first in line first (module_utils C(mvp_queue.queue_rows)).
  type: list
  elements: dict
  returned: when queue is true
  sample:
    - {submission_id: sft-20261125-120000-1a2b3c, position: 1, state: started, shape: 2 nodes x 1 GPU (10 CPUs each),
       locks: [], waits_for: "", since: "2026-11-25T12:00:01Z", admitted_at: "2026-11-25T12:00:03Z"}
    - {submission_id: grpo-20261125-120100-4d5e6f, position: 2, state: queued, shape: 1 node x 1 GPU (3 CPUs each),
       locks: [transfer_queue], waits_for: "1 node x 1 GPU (3 CPUs each) to be free, held by sft-...",
       since: "2026-11-25T12:01:02Z", admitted_at: null}
active_jobs:
  description: With I(active=true), the PENDING and RUNNING jobs, oldest first.
  type: list
  elements: dict
  returned: when active is true
  sample:
    - {submission_id: sft-20261125-120000-1a2b3c, status: RUNNING, job_dir: /private/jobs/sft-20261125-120000-1a2b3c,
       node_ips: [172.18.0.3, 172.18.0.4], last_step: 12, checkpoint_step: 10, steps_at_risk: 2}
authentication_mode:
  description: >-
    With I(authentication_mode=true), the head's answer (C(token), C(disabled), ...); empty when nothing answers
    (no Ray runs there) or the head predates the endpoint (404).
  type: str
  returned: when authentication_mode is true, also on failure
jobs:
  description: With I(jobs=true), every job sorted by start time, oldest first.
  type: list
  elements: dict
  returned: when jobs is true
  sample:
    - {submission_id: selftest-20261121-120000-1a2b3c, status: SUCCEEDED, start_time: 1763726400000,
       end_time: 1763726420000, driver_node_id: 5d1c..., entrypoint: python -u ...}
"""


from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_queue
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_running_jobs import active_jobs
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import queue_states
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    CONNECTION_ARGS, connect, job_row, list_job_actors, list_nodes, summarize)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_rest import authentication_mode


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            CONNECTION_ARGS,
            timeout=dict(type="int", default=30),
            resource=dict(type="str", default="worker_node"),
            jobs=dict(type="bool", default=False),
            queue=dict(type="bool", default=False),
            active=dict(type="bool", default=False),
            authentication_mode=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    client, state = connect(module)
    address = module.params["address"]
    asked = dict(authentication_mode=authentication_mode(client)) if module.params["authentication_mode"] else {}
    try:
        nodes = list_nodes(state, address, module.params["timeout"])
    except Exception as exc:  # Ray raises several types for an unreachable dashboard
        module.fail_json(msg="Cannot list Ray nodes at %s: %s" % (address, exc), **asked)
    result = dict(changed=False, nodes=nodes, summary=summarize(nodes, module.params["resource"]), **asked)
    if module.params["jobs"] or module.params["queue"] or module.params["active"]:
        try:
            jobs = client.list_jobs()
        except Exception as exc:
            module.fail_json(msg="Cannot list Ray jobs at %s: %s" % (address, exc), **result)
        result["jobs"] = sorted((job_row(j) for j in jobs), key=lambda r: r["start_time"] or 0)
    if module.params["active"]:
        ray_ids = dict((j.get("submission_id"), j.get("job_id")) for j in jobs if isinstance(j, dict))

        def actor_ips(job):
            """The IPs of the job's ALIVE actors; none when Ray's state API cannot say."""
            if not ray_ids.get(job["submission_id"]):
                return []
            try:
                actors = list_job_actors(state, address, ray_ids[job["submission_id"]], nodes, module.params["timeout"])
            except Exception:  # the look names the driver's node at least
                return []
            return [a["node_ip"] for a in actors if a.get("state") == "ALIVE"]

        result["active_jobs"] = active_jobs(result["jobs"], nodes, actor_ips)
    if module.params["queue"]:
        states = queue_states(result["jobs"])
        entries = mvp_queue.plan(result["jobs"], mvp_queue.worker_totals(result["summary"]["alive_workers"]),
                                 mvp_queue.started_ids(states))
        result["queue"] = mvp_queue.queue_rows(entries, states)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
