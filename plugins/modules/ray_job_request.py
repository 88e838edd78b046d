#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Documentation of the ray_job_request action plugin (plugins/action/ray_job_request.py); it runs on the Ansible controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_request
short_description: Gather one job request from a JobSpec file and the request keys given to the play
description:
  - Runs on the Ansible controller only. Builds the request the job spec builder (filter P(mvp.ray.mvp_job_spec#filter))
    reads, from exactly three places, later ones winning key by key - the JobSpec YAML file
    (I(jobspec)), the request keys set as variables of the play (C(vars) of the play or of
    C(import_playbook)), and the request keys given with C(-e) on the command line.
  - Inventory variables, facts and role defaults never join the request, so a host variable that
    happens to be called C(model) or C(dataset) changes nothing.
  - Gives the request a fresh submission id (C(<workload>-<YYYYmmdd-HHMMSS>-<6 hex>), module_utils
    C(mvp_job.new_submission_id)) when none is given; the runs of a repeat given one id are numbered
    C(<id>-1) ... C(<id>-N).
  - Reads the JobSpec file strictly and within bounds (module_utils C(mvp_request_read)) - size, UTF-8, YAML,
    a key given twice in one mapping, nesting depth, keys and scalars once aliases are resolved - and bounds every
    C(-e) request key the same way before anything else looks at it; fails naming the file or key, the field
    and the limit.
  - With I(catalog), applies every rule of the request's own fields (module_utils C(mvp_request.check_request)),
    a bad field fails here, before any task talks to the head.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
options:
  keys:
    description: The request keys (the builder's C(REQUEST_KEYS); unknown keys of the file are refused by the builder).
    type: list
    elements: str
    required: true
  jobspec:
    description: Path of a JobSpec YAML file, or an empty string for none.
    type: str
    default: ""
  repeat:
    description: Number of runs of this request (C(-e repeat=N)); with a given id and I(repeat) > 1 the id gets C(-<run_index>).
    type: int
    default: 1
  run_index:
    description: Which run of the repeat this is (1-based).
    type: int
    default: 1
  catalog:
    description: The workload catalog (C(mvp_workloads)); when given, the request's fields are checked against it.
    type: dict
  defaults:
    description: The job spec builder's defaults (shared root, code id, worker resource, the inventory's
      C(submit_job_site_overrides) as C(site_overrides), ...), used with I(catalog).
    type: dict
    default: {}
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Spec | Gather the request
  mvp.ray.ray_job_request:
    keys: [submission_id, workload, trainer_overrides]
    jobspec: "{{ jobspec | default('') }}"
  register: request
"""

RETURN = r"""
request:
  description: The request, with C(submission_id) always set.
  type: dict
  returned: always
given_id:
  description: The submission id the user gave (empty when generated); a repeat group is named by it.
  type: str
  returned: always
sources:
  description: Where each key of the request came from - C(jobspec), C(play) or C(extra vars), or C(generated).
  type: dict
  returned: always
"""
