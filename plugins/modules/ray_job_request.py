#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Documentation of the ray_job_request action plugin (plugins/action/ray_job_request.py); it runs on the Ansible controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_request
short_description: Gather one job request from a JobSpec file and the request keys given to the play, and check it
description:
  - Runs on the Ansible controller only. Builds the request the job spec builder (filter P(mvp.ray.mvp_job_spec#filter))
    reads, from exactly three places, later ones winning key by key - the JobSpec YAML file
    (I(jobspec)), the request keys set as variables of the play (C(vars) of the play or of
    C(import_playbook)), and the request keys given with C(-e) on the command line; or whole, from I(request).
  - The request keys are the same in each place - module_utils C(mvp_request.REQUEST_TABLE), listed under
    RV(request) - so a key given with C(-e) is read exactly as the same key in a JobSpec file. Unknown keys of
    the file are refused; other C(-e) variables are the play's own settings and never join the request.
  - Inventory variables, facts and role defaults never join the request, so a host variable that
    happens to be called C(model) or C(dataset) changes nothing.
  - Gives the request a fresh submission id (C(<workload>-<YYYYmmdd-HHMMSS>-<6 hex>), module_utils
    C(mvp_job.new_submission_id)) when none is given; the runs of a repeat given one id are numbered
    C(<id>-1) ... C(<id>-N).
  - Reads the JobSpec file strictly and within bounds (module_utils C(mvp_request_read)) - size, UTF-8, YAML,
    no anchors, aliases or merge keys (naming the line), a key given twice in one mapping, nesting depth, keys and
    scalars - and bounds every C(-e) request key the same way before anything else looks at it; fails naming the
    file or key, the field and the limit.
  - With I(catalog), applies every rule of the request once (module_utils C(mvp_request.check_request)) - a bad
    field fails here, before any task talks to the head, and the request returned is the checked one, every key
    typed and its default filled in, which the builder takes as given.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
options:
  request:
    description:
      - A request given whole (the next attempt of a run, from the job controller's C(submit_job_restart)), checked
        like a gathered one; then I(jobspec), the play's variables and C(-e) are not read, and its id is not numbered.
    type: dict
    default: {}
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
    jobspec: "{{ jobspec | default('') }}"
  register: request

- name: Spec | Gather and check the request
  mvp.ray.ray_job_request:
    jobspec: "{{ jobspec | default('') }}"
    catalog: "{{ mvp_workloads }}"
    defaults: "{{ spec_defaults }}"
  register: checked
"""

RETURN = r"""
request:
  description:
    - The request, with C(submission_id) always set; with I(catalog) the checked request, every key below typed
      and its default filled in; without it only the keys given.
  type: dict
  returned: always
  contains:
      workload:
        description: >-
          A workload of the catalog (mvp_workloads), exactly as written. Default: none (required).
        type: str
        returned: with I(catalog)
      submission_id:
        description: >-
          Letters, digits, '.', '_', '-', starting with a letter or digit, at most 128 characters
          (SUBMISSION_ID_RE); the job directory is <shared_root>/jobs/<submission_id>. Default: generated:
          <workload>-<YYYYmmdd-HHMMSS>-<6 hex>.
        type: str
        returned: with I(catalog)
      shared_root:
        description: >-
          An absolute path. Default: the inventory's mvp_shared_root.
        type: str
        returned: with I(catalog)
      code_id:
        description: >-
          A snapshot under <shared_root>/common/code/verl/ (a name: letters, digits, '.', '_', '-'); none when
          code_path is given. Default: the inventory's submit_job_code_id.
        type: str
        returned: with I(catalog)
      code_path:
        description: >-
          A folder under shared_root. Default: <shared_root>/common/code/verl/<code_id>.
        type: str
        returned: with I(catalog)
      model:
        description: >-
          A folder name under <shared_root>/common/models, or an absolute path there; a verl workload needs
          one. Default: the inventory's submit_job_model.
        type: str
        returned: with I(catalog)
      dataset:
        description: >-
          A folder under <shared_root>/datasets (no absolute path, no '..') holding the workload's data files.
          Default: none.
        type: str
        returned: with I(catalog)
      reward_fn_path:
        description: >-
          An absolute path under <shared_root>/user/code/. Default: the inventory's
          submit_job_site_overrides.<workload>.reward_fn_path.
        type: str
        returned: with I(catalog)
      ray:
        description: >-
          Keys among address (this cluster's Jobs API only), entrypoint_resources (must ask for the worker
          resource), entrypoint_num_cpus, runtime_env (env_vars, config, worker_process_setup_hook, nsight),
          over submit_job_ray_base. Default: {}.
        type: dict
        returned: with I(catalog)
      trainer_overrides:
        description: >-
          Hydra dotted keys -> values, e.g. {trainer.total_epochs: 1}; not the keys the builder sets, none for
          a script workload. Default: {}.
        type: dict
        returned: with I(catalog)
      env_vars:
        description: >-
          NAME: value pairs (a text, number or boolean); not the variables the project sets. Default: {}.
        type: dict
        returned: with I(catalog)
      resume_from:
        description: >-
          The submission id of an earlier job of the same workload, whose newest complete checkpoint the job
          continues. Default: none.
        type: str
        returned: with I(catalog)
      max_restarts:
        description: >-
          A whole number >= 0 of automatic restarts (0 for a workload that cannot resume). Default: the
          inventory's submit_job_max_restarts.
        type: int
        returned: with I(catalog)
      priority:
        description: >-
          A class of submit_job_priority_classes. Default: normal.
        type: str
        returned: with I(catalog)
      preemptible:
        description: >-
          False: nothing may stop the job for a more urgent one. Default: true.
        type: bool
        returned: with I(catalog)
      accept_unsupported_release:
        description: >-
          True: submit a snapshot whose verl release the nodes' platform layer does not declare. Default:
          false.
        type: bool
        returned: with I(catalog)
      owner:
        description: >-
          Who the run is for: at most 64 letters, digits, '.', '_', '-' (the GPU-hour ledger adds runs up by
          it). Default: the submitting user's name (the Ansible controller's user).
        type: str
        returned: with I(catalog)
      team:
        description: >-
          A label: at most 64 letters, digits, '.', '_', '-' (the ledger's team). Default: none.
        type: str
        returned: with I(catalog)
      project:
        description: >-
          A label: at most 64 letters, digits, '.', '_', '-' (the ledger's project). Default: none.
        type: str
        returned: with I(catalog)
      notify:
        description: >-
          Webhooks told what happens to the run: a URL (http/https; the controller's host, 127.0.0.1, allowed), or
          a list of {url, format (json, slack), events, checkpoint_every, name}; no secret (job_controller_webhooks
          holds signed ones). Default: [].
        type: list
        returned: with I(catalog)
given_id:
  description: The submission id the user gave (empty when generated); a repeat group is named by it.
  type: str
  returned: always
sources:
  description: Where each key of the request came from - C(jobspec), C(play), C(extra vars) or C(request), or C(generated).
  type: dict
  returned: always
"""
