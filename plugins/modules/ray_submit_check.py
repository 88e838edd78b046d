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
    (Ray's Jobs REST API, C(GET /api/jobs/<id>)) and the ALIVE nodes (the State API's
    node list, C(GET /api/v0/nodes)), both over HTTP without importing Ray, so the submit_job role can fail with messages
    naming the variable to fix before it writes anything.
  - With I(probe), whether a file of the code snapshot contains a marker text (the
    snapshot's trainer passes the driver's device on to its workers).
  - With I(hydra), composes the trainer overrides against the snapshot's own Hydra
    config (module_utils C(mvp_hydra.validate_overrides); needs hydra-core and
    omegaconf, not torch) and returns the problems.
  - With I(datasets), reads the column names of each data file and of the prepared datasets
    files of the same names from the parquet schema (C(pyarrow.parquet.read_schema); no rows are
    read), so a dataset that does not fit the workload is named with the datasets that do.
  - With I(verl_checks) (and I(hydra)), runs the snapshot's own start-up checks on the composed
    config in a subprocess of the nodes' Python (module_utils C(mvp_verl_rules) - verl's
    C(validate_config) and config classes; skipped, not failed, without torch) and checks
    that exist in verl only inside a trainer, mirrored; reports them in C(verl_errors).
  - With I(room), the model's parameter count and the shared storage's free bytes, so a job is refused
    when the checkpoints it keeps (the workload's verl retention keys) would not fit.
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
  datasets:
    description: >-
      C({dir, files}) - C(files) maps a name (the trainer override, e.g. C(data.train_files)) to a
      parquet file whose columns are reported in C(dataset_columns); every folder of C(dir) holding
      files of the same base names is reported in C(prepared_datasets).
    type: dict
  verl_checks:
    description: >-
      C({python, snapshot, timeout, cache_dir}) - with I(hydra), run verl's own start-up checks of the
      snapshot with that Python (the nodes' venv) and report them in C(verl_errors) and C(verl_check).
      Results are kept per config in C(cache_dir) on the node (default C(<tmp>/mvp-verl-checks)), so
      the same config of a later job is answered without importing verl again.
    type: dict
  room:
    description: >-
      C({model_path, shared_root}) - count the model's parameters (safetensors headers, else weight file
      sizes, else config.json; module_utils C(mvp_retention.model_size)) and the free bytes of the file
      system holding C(shared_root)/jobs (C(os.statvfs)), for the check that the job's checkpoints fit.
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
resolved_config:
  description: >-
    The trainer's config composed from the snapshot's own Hydra config and the overrides, as YAML
    (interpolations kept as C(${...}), values of secret-like keys C(<redacted>)); what submit_job
    saves as C(config/resolved_config.yaml). Null without I(hydra) or when the overrides do not compose.
  type: str
  returned: always
dataset_columns:
  description: >-
    Name in I(datasets.files) -> its column names (C(a.b) for field C(b) of a struct column C(a)), or null
    when the file is missing or unreadable.
  type: dict
  returned: always
prepared_datasets:
  description: Folder name under I(datasets.dir) -> {file base name -> column names} for the same file names.
  type: dict
  returned: always
dataset_schema_skipped:
  description: Why the columns were not read (pyarrow missing on the head), else null.
  type: str
  returned: always
verl_errors:
  description: >-
    verl's own start-up checks that fail, each C(<verl function>: <exception>: <verl's message>), then
    the mirrored trainer checks (empty without I(verl_checks)).
  type: list
  elements: str
  returned: always
room:
  description: >-
    C({params, source, files_bytes, free_bytes, total_bytes, path}) - the model's parameter count (null when
    it could not be read; C(source) says how or why not), its files' bytes, and the free and total bytes
    (for an unprivileged user) of the file system of C(path), the shared storage's jobs folder. Null without I(room).
  type: dict
  returned: always
verl_check:
  description: >-
    C({skipped, seconds, wall, cached}) of the snapshot's checks (null without I(verl_checks)); C(seconds)
    splits the child's time (C(import_torch), C(compose), C(checks), C(total)) and the mirrored checks'.
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.mvp_ray import CONNECTION_ARGS, connect
from ansible_collections.mvp.ray.plugins.module_utils.mvp_submit_check import SubmitCheckError, look


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
            datasets=dict(type="dict"),
            verl_checks=dict(type="dict"),
            room=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    client, state = connect(module)
    try:
        result = look(module.params, client, state, module.params["address"])
    except SubmitCheckError as exc:
        module.fail_json(msg=str(exc), changed=False, **exc.result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
