#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: read, in one call on the head, what a submission must be checked against."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_submit_check
short_description: Look at a job's inputs on the shared storage, its code snapshot and the Ray cluster, in one call
description:
  - Reports which of I(paths) do not exist on the node, whether the job directory
    exists, whether Ray already has a job with I(submission_id)
    (C(JobSubmissionClient.get_job_info)) and the ALIVE nodes
    (C(ray.util.state.list_nodes)), so the submit_job role can fail with messages
    naming the variable to fix before it writes anything.
  - With I(probe), whether a file of the code snapshot contains a marker text (the
    snapshot's trainer passes the driver's device on to its workers).
  - With I(hydra), composes the trainer overrides against the snapshot's own Hydra
    config (module_utils C(mvp_hydra.validate_overrides); needs hydra-core and
    omegaconf, not torch) and returns the problems.
  - Read-only; never fails on what it finds (only when the Jobs/State API cannot be
    reached, with the address in the message, or hydra-core is missing). Supports check mode.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.connection
options:
  submission_id:
    description: The submission id to look up in Ray's job table.
    type: str
    required: true
  job_dir:
    description: The job directory that must not exist yet.
    type: path
    required: true
  paths:
    description: Mapping of a name (e.g. C(code_marker), C(model)) -> a path that must exist. Empty values are skipped.
    type: dict
    default: {}
  probe:
    description: C({path, marker}) - report in C(probe_found) whether the file at C(path) contains C(marker).
    type: dict
  hydra:
    description: >-
      C({config_dir, config_name, overrides}) - compose the overrides (C(key=value) strings, as the
      entrypoint passes them) against C(config_dir/config_name.yaml) and report problems in C(hydra_errors).
    type: dict
  resource:
    description: Custom resource that marks worker nodes (counted in C(summary)).
    type: str
    default: worker_node
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Validate | Look at the inputs and the cluster
  mvp.ray.ray_submit_check:
    submission_id: selftest-20261122-120000-1a2b3c
    job_dir: /private/jobs/selftest-20261122-120000-1a2b3c
    paths:
      code_marker: /private/common/code/verl/verl-0.9.1/mvp_marker.py
      train_files: /private/datasets/gsm8k/train.parquet
    address: http://127.0.0.1:8265
    probe: {path: /private/common/code/verl/verl-0.9.1/verl/trainer/sft_trainer_ray.py, marker: config.trainer.device}
    hydra:
      config_dir: /private/common/code/verl/verl-0.9.1/verl/trainer/config
      config_name: sft_trainer_engine
      overrides: [trainer.total_epochs=1]
  register: check
"""

RETURN = r"""
missing:
  description: The entries of I(paths) that do not exist (name -> path).
  type: dict
  returned: always
job_dir_exists:
  description: True when I(job_dir) exists (file, folder or link).
  type: bool
  returned: always
existing_job:
  description: Status of the Ray job with this submission id (e.g. C(SUCCEEDED)), or null when Ray has none.
  type: str
  returned: always
summary:
  description: ALIVE nodes - head, alive_workers, worker_ips, total_gpus (as ray_cluster_info returns it).
  type: dict
  returned: always
probe_found:
  description: Whether the I(probe) file exists and contains the marker (false without I(probe)).
  type: bool
  returned: always
hydra_errors:
  description: Problems composing the overrides, each naming the key (empty without I(hydra) or when they compose).
  type: list
  elements: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.mvp_ray import (
    CONNECTION_ARGS, import_ray, job_info_or_none, list_nodes, status_name, summarize, use_auth_token)


def missing_paths(paths):
    """Return {name: path} for the non-empty paths of ``paths`` that do not exist."""
    return {name: path for name, path in sorted(paths.items()) if path and not os.path.lexists(str(path))}


def probe_found(probe):
    """Return True when ``probe["path"]`` is a readable file containing ``probe["marker"]`` (str)."""
    if not probe:
        return False
    try:
        with open(probe["path"], encoding="utf-8", errors="replace") as handle:
            return probe["marker"] in handle.read()
    except OSError:
        return False


def hydra_errors(module, hydra):
    """Compose ``hydra`` (config_dir, config_name, overrides) and return the problems (list of str)."""
    if not hydra:
        return []
    config = os.path.join(hydra["config_dir"], hydra["config_name"] + ".yaml")
    if not os.path.isfile(config):
        return ["%s does not exist: the code snapshot has no such trainer config" % config]
    try:
        from ansible_collections.mvp.ray.plugins.module_utils.mvp_hydra import validate_overrides
        return validate_overrides(hydra["config_dir"], hydra["config_name"], list(hydra.get("overrides") or []))
    except ImportError as exc:
        module.fail_json(msg="hydra-core/omegaconf missing on the head (%s)" % exc)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            CONNECTION_ARGS,
            submission_id=dict(type="str", required=True),
            job_dir=dict(type="path", required=True),
            paths=dict(type="dict", default={}),
            resource=dict(type="str", default="worker_node"),
            probe=dict(type="dict"),
            hydra=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, missing=missing_paths(params["paths"]),
                  job_dir_exists=os.path.lexists(params["job_dir"]),
                  probe_found=probe_found(params["probe"]),
                  hydra_errors=hydra_errors(module, params["hydra"]))
    client_cls, state = import_ray(module)
    headers = use_auth_token(params["auth_token"])
    address = params["address"]
    try:
        nodes = list_nodes(state, address, timeout=10)
    except Exception as exc:  # Ray raises several types for an unreachable dashboard
        module.fail_json(msg="Cannot list Ray nodes at %s: %s. Is the cluster up (site.yml)?" % (address, exc),
                         **result)
    result["summary"] = summarize(nodes, params["resource"])
    try:
        details = job_info_or_none(client_cls(address, headers=headers), params["submission_id"])
    except RuntimeError as exc:
        module.fail_json(msg="Cannot read Ray job %s at %s: %s" % (params["submission_id"], address, exc), **result)
    result["existing_job"] = status_name(details.status) if details is not None else None
    module.exit_json(**result)


if __name__ == "__main__":
    main()
