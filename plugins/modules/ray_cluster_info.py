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
from ansible_collections.mvp.ray.plugins.module_utils.mvp_ray import (
    CONNECTION_ARGS, connect, job_row, list_nodes, summarize)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            CONNECTION_ARGS,
            timeout=dict(type="int", default=30),
            resource=dict(type="str", default="worker_node"),
            jobs=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    client, state = connect(module)
    address = module.params["address"]
    try:
        nodes = list_nodes(state, address, module.params["timeout"])
    except Exception as exc:  # Ray raises several types for an unreachable dashboard
        module.fail_json(msg="Cannot list Ray nodes at %s: %s" % (address, exc))
    result = dict(changed=False, nodes=nodes, summary=summarize(nodes, module.params["resource"]))
    if module.params["jobs"]:
        try:
            jobs = client.list_jobs()
        except Exception as exc:
            module.fail_json(msg="Cannot list Ray jobs at %s: %s" % (address, exc), **result)
        result["jobs"] = sorted((job_row(j) for j in jobs), key=lambda r: r["start_time"] or 0)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
