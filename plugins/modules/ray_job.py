#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: submit and stop Ray jobs by submission_id."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job
short_description: Submit, stop or delete a Ray job, idempotent by submission_id
description:
  - Submits a job to a Ray cluster through Ray's Jobs REST API on the dashboard (module_utils mvp_ray_rest, no Ray import), stops it
    or deletes it from the job table. Reading a job (status, placement, logs) is
    M(mvp.ray.ray_job_info).
  - Idempotent by I(submission_id) - a job that already exists is reported, never
    submitted again.
  - With I(wait=placed) the module returns once the job has left PENDING, with the node its
    driver runs on (C(driver_node_id) mapped to C(driver_node_ip) with the State API's node list over HTTP)
    and the head and worker IPs. A job still PENDING after I(pending_timeout) is stopped and
    the module fails naming the resources no ALIVE node offers.
  - With I(job_dir) the same call first creates the job's directory exclusively (one C(mkdir) that
    fails when it exists; nothing is submitted then) and writes its config files, and with
    I(debug_bundle) it starts the cluster snapshots in a detached process before it submits, as
    M(mvp.ray.ray_debug_bundle) with I(detach=true) does - one module run on the head (module_utils
    C(mvp_job_create), C(mvp_debug_bundle)).
  - Full check mode - nothing is submitted, stopped or deleted.
version_added: 0.1.0
extends_documentation_fragment:
  - mvp.ray.connection
  - mvp.ray.attributes
  - mvp.ray.attributes.actiongroup_ray
attributes:
  check_mode:
    support: full
    details:
      - Nothing is submitted, stopped or deleted and no job directory is made; with I(job_dir) the result says
        what it would hold. I(wait=placed) does not wait.
  diff_mode:
    support: none
options:
  submission_id:
    description: Ray submission id of the job.
    type: str
    required: true
  state:
    description:
      - C(submitted) submits the job unless it exists.
      - C(stopped) stops a job that is not terminal and waits until it is (at most I(stop_timeout)).
      - C(absent) deletes a terminal job from the job table.
    type: str
    choices: [submitted, stopped, absent]
    default: submitted
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
      - C(none) returns once Ray has the job; C(placed) waits until the job has left PENDING
        and returns its placement.
    type: str
    choices: [none, placed]
    default: none
  pending_timeout:
    description:
      - Seconds a job may stay PENDING with I(wait=placed). Past it the job is stopped and the
        module fails with a message naming the resources nobody offers.
      - C(0) sets no deadline of its own - the job controller's deadline for the runs it follows (submit_job
        uses it) - and waits until the job leaves PENDING or, with I(job_dir), until its C(logs/stopped_by.json)
        says it was stopped (Ray keeps such a job PENDING a while); a job stopped before its driver was placed
        fails the module with that file's C(by) and C(why).
    type: int
    default: 300
  stop_timeout:
    description: Seconds to wait for a stopped job to reach a terminal status (I(state=stopped)).
    type: int
    default: 120
  poll_interval:
    description: Seconds between status polls.
    type: float
    default: 1.0
  placement_dest:
    description:
      - File to save the returned C(placement) to, as JSON (sorted keys, written to a temporary
        name, then renamed) - a job directory's C(debug/placement.json). Written once the job
        is placed with I(wait=placed); never in check mode.
    type: path
  worker_resource:
    description: Custom resource that marks worker nodes (for C(worker_ips)).
    type: str
    default: worker_node
  job_dir:
    description:
      - With I(state=submitted), the job directory to create before anything else, exclusively
        (the module fails naming it when it exists, and submits nothing), with its folders and files.
    type: dict
    suboptions:
      path:
        description: The job directory (C(<shared_root>/jobs/<submission_id>)); its parent must exist.
        type: path
        required: true
      files:
        description: Mapping of a path inside I(job_dir.path) (relative or absolute) -> text content.
        type: dict
        default: {}
      subdirs:
        description: Folders created inside it (module_utils C(mvp_job.SUBDIRS) by default).
        type: list
        elements: str
      mode:
        description: Octal mode of the folders (files get 0644).
        type: str
        default: "0775"
      links:
        description:
          - Mapping of a path inside I(job_dir.path) -> the target of a symbolic link made there after the files
            (folders made as needed; a relative target is read from the link's folder).
          - A resume's view of an earlier attempt's checkpoint without a file verl must not load (the job spec's
            C(resume_from.links), module_utils C(mvp_resume)); the earlier checkpoint is not changed.
        type: dict
        default: {}
  check:
    description:
      - With I(state=submitted) and I(job_dir), look at the job first, in the same call on the head (module_utils
        C(mvp_submit_check.look); I(submission_id) and I(job_dir) are this call's).
      - With I(refuse), nothing is written or submitted when the look finds a problem.
    type: dict
    suboptions:
      paths:
        description: Name -> a path that must exist (empty values skipped).
        type: dict
        default: {}
      resource:
        description: The custom resource counted as workers (default I(worker_resource)).
        type: str
      hydra:
        description: Compose the overrides against the snapshot's Hydra config (C(config_dir), C(config_name), C(overrides)).
        type: dict
        suboptions:
          config_dir:
            description: The snapshot's C(verl/trainer/config).
            type: path
            required: true
          config_name:
            description: The trainer's config name (C(ppo_trainer), C(sft_trainer)).
            type: str
            required: true
          overrides:
            description: Hydra override strings (C(key=value)).
            type: list
            elements: str
            default: []
      datasets:
        description: The parquet columns of each of C(files) (name -> path) and of the prepared datasets under C(dir).
        type: dict
        suboptions:
          dir:
            description: The shared storage's C(datasets) folder.
            type: path
            required: true
          files:
            description: Name -> parquet file.
            type: dict
            default: {}
      verl_checks:
        description: >-
          With I(check.hydra), verl's own start-up checks in a subprocess of the nodes' Python - the config
          classes, the model folder as verl reads it (HF config and tokenizer, no weights), the resource pools
          verl builds, the data files (schema, row count, verl's dataset class on the first rows); see
          docs/jobs.md, What verl does before the weights.
        type: dict
        suboptions:
          python:
            description: The Python with verl's requirements (the nodes' Python); default this module's.
            type: path
          snapshot:
            description: The code snapshot put first on that Python's path.
            type: path
            required: true
          timeout:
            description: Seconds the checks may take.
            type: int
            default: 180
          cache_dir:
            description: Folder of the per-config cache of their results (module_utils C(mvp_verl_rules) default when unset).
            type: path
          sample_rows:
            description: Rows of each data file verl's own dataset class is run on (the first ones; the rest is never read; 0 reads no data file).
            type: int
            default: 16
      room:
        description: The model's parameters and the free bytes of the jobs folder (C(model_path), C(shared_root)).
        type: dict
        suboptions:
          model_path:
            description: The model folder.
            type: path
            required: true
          shared_root:
            description: The shared storage as the nodes see it.
            type: path
            required: true
      resolved_config_file:
        description: Path inside the job directory that gets the trainer's composed config when it composed.
        type: path
      confine:
        description:
          - Paths whose resolved form (every link followed, C(os.path.realpath)) must stay inside a folder
            (module_utils C(mvp_submit_check.escaped_paths)); the builder makes them (C(mvp_spec.head_check)).
          - A path that leads out through a link is a problem naming the link and its target.
        type: list
        elements: dict
        default: []
        suboptions:
          field:
            description: The request field or override the path came from (named in the message).
            type: str
            required: true
          path:
            description: The absolute path as the job will use it.
            type: str
            required: true
          root:
            description: The folder its resolved form must stay in.
            type: str
            required: true
      release:
        description:
          - The code snapshot's verl release (its C(verl/version/version)) and the platform layers the nodes' Python
            declares (entry point group C(mvp.platform), module_utils C(mvp_release)); a release outside a
            declared range is a problem unless the spec accepts it (C(accept_unsupported_release)).
        type: dict
        suboptions:
          python:
            description: The nodes' Python (default the module's own).
            type: str
          snapshot:
            description: The code snapshot.
            type: path
            required: true
      reward:
        description:
          - The reward file imported in the nodes' Python with the code snapshot first on the path, as verl's
            loader does (module_utils C(mvp_reward_check.check_reward)), while the rest is looked at; a file that
            does not import, lacks the function or whose function does not take verl's arguments is a problem.
        type: dict
        suboptions:
          python:
            description: The nodes' Python (default the module's own).
            type: str
          snapshot:
            description: The code snapshot put first on the path.
            type: path
            required: true
          path:
            description: The reward file.
            type: path
            required: true
          name:
            description: The function verl calls (C(reward.custom_reward_function.name)).
            type: str
            default: compute_score
          name_key:
            description: The override that names the function (for messages).
            type: str
          kwargs:
            description: Extra keyword arguments verl binds (C(reward.custom_reward_function.reward_kwargs)).
            type: dict
            default: {}
          timeout:
            description: Seconds the import may take.
            type: int
            default: 60
  mlflow:
    description:
      - With I(state=submitted), the job's MLflow run on the head's tracking server, made (or, for a restarted
        attempt, continued - same I(run_name)) just before the submission (module_utils C(mvp_mlflow.job_run)).
      - C(MLFLOW_TRACKING_URI) (the head's node IP and I(port)) and C(MLFLOW_RUN_ID) join the submitted
        runtime_env, so verl's C(mlflow) logger logs into that run - for a restarted attempt into a child run of it,
        whose metrics M(mvp.ray.ray_job_record) copies into the run when the attempt ends (verl logs its config as
        params, which MLflow never lets change).
      - A server that does not answer leaves the job untracked; the result's C(note) says so.
    type: dict
    suboptions:
      experiment:
        description: The MLflow experiment (the workload).
        type: str
        required: true
      run_name:
        description: The run's name (the run's first submission id).
        type: str
        required: true
      port:
        description: The tracking server's port on the head.
        type: int
        default: 5000
      ui_url:
        description: The server as browsers reach it, for C(ui_url); empty - the tracking URI.
        type: str
        default: ""
      tags:
        description: Tags set on the run (values as text).
        type: dict
        default: {}
      artifacts:
        description: Paths among I(job_dir.files) stored as the run's artifacts under C(<submission_id>/).
        type: list
        elements: path
        default: []
      credentials_file:
        description:
          - The server's basic-auth config on the head (role mlflow_server's C(mlflow_auth.ini), 0600); its user and
            password are sent (module_utils C(mvp_mlflow.credentials_headers)). Empty - the server asks for none.
        type: path
        default: ""
      service_dir:
        description:
          - The tracking server's service folder on the head (role mlflow_server's, module M(mvp.ray.ray_mlflow_server)).
            While the server started there does not answer yet (C(cluster.yml) does not wait for its start), the
            submission waits for it up to I(start_timeout) seconds and the job is tracked once it answers; a
            server that is not running is not waited for. Empty - never waited for.
        type: path
        default: ""
      start_timeout:
        description: Seconds a submission waits for a tracking server still starting (I(service_dir)).
        type: int
        default: 120
      record_file:
        description: Path among I(job_dir)'s files that receives the run's record (JSON, the C(mlflow) result).
        type: path
      runtime_env_file:
        description: Path among I(job_dir)'s files rewritten with the runtime_env as submitted (with the MLflow variables).
        type: path
      timeout:
        description: Seconds per call to the tracking server.
        type: int
        default: 10
  refuse:
    description:
      - With I(check), judge the look with C(mvp_refuse.mvp_submit_problems) (the rules of the filter
        P(mvp.ray.mvp_submit_problems#filter)) and fail with the first problem, before the job directory
        is made.
    type: dict
    suboptions:
      spec:
        description: The job spec (the filter P(mvp.ray.mvp_job_spec#filter)), built once, before this call.
        type: dict
        required: true
      worker_resource:
        description: The custom resource counted as workers (default I(worker_resource)).
        type: str
      check_gpus:
        description: Refuse a GPU workload asking for more GPUs than the ALIVE workers offer.
        type: bool
        default: true
  debug_bundle:
    description:
      - With I(state=submitted), cluster snapshots started in a detached process once the job
        directory exists and before the submission; the options of M(mvp.ray.ray_debug_bundle)
        (I(dest), I(stage), I(commands), I(timeout), I(in_process), I(then)). The detached process
        writes the returned C(debug_bundle.record) when it is done; wait for that file. Not in check mode.
    type: dict
    suboptions:
      dest:
        description: Folder receiving the files (must exist, e.g. the job directory's C(debug)).
        type: path
        required: true
      stage:
        description: Stage name in the file names.
        type: str
        required: true
      commands:
        description: Items C({name, argv}).
        type: list
        elements: dict
        required: true
      timeout:
        description: Seconds each command may run.
        type: int
        default: 60
      in_process:
        description: Run C(ray) CLI commands inside the detached process (one Ray import).
        type: bool
        default: true
      then:
        description: A second snapshot once a file appears (C(stage), C(after_file), C(timeout) seconds).
        type: dict
        suboptions:
          stage:
            description: Stage name of the second snapshot.
            type: str
            required: true
          after_file:
            description: File whose appearance starts it (the I(placement_dest) this call writes).
            type: path
            required: true
          timeout:
            description: Seconds to wait for I(then.after_file).
            type: int
            default: 300
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Submit | Submit the job from the head and wait for placement
  mvp.ray.ray_job:
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

- name: Submit | Create the job directory, start the snapshots, submit, wait for placement (one call)
  mvp.ray.ray_job:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    entrypoint: python -u /private/common/code/mvp_tools/selftest.py
    entrypoint_resources: {worker_node: 1}
    entrypoint_num_cpus: 1
    job_dir:
      path: /private/jobs/selftest-20261121-120000-1a2b3c
      files:
        config/job_spec.json: "{{ spec | to_nice_json }}"
    debug_bundle:
      dest: /private/jobs/selftest-20261121-120000-1a2b3c/debug
      stage: submit
      commands:
        - {name: ray_status, argv: [ray, status]}
      then:
        stage: placed
        after_file: /private/jobs/selftest-20261121-120000-1a2b3c/debug/placement.json
    wait: placed
    placement_dest: /private/jobs/selftest-20261121-120000-1a2b3c/debug/placement.json
  register: job

- name: Submit | Wait for the snapshots taken in the background
  ansible.builtin.wait_for:
    path: "{{ job.debug_bundle.record }}"
    timeout: "{{ job.debug_bundle.max_seconds + 30 }}"

- name: Submit | Look at the job, refuse it on the first problem, else make its directory and submit
  mvp.ray.ray_job:
    submission_id: "{{ spec.submission_id }}"
    address: "{{ mvp_ray_jobs_address }}"
    entrypoint: "{{ spec.entrypoint }}"
    runtime_env: "{{ spec.runtime_env }}"
    entrypoint_resources: {worker_node: 1}
    entrypoint_num_cpus: 1
    check:
      paths: {model: "{{ spec.model_path }}", mvp_marker.py: "{{ spec.code_path }}/mvp_marker.py"}
      resolved_config_file: config/resolved_config.yaml
    refuse: {spec: "{{ spec }}", check_gpus: true}
    job_dir:
      path: "{{ spec.job_dir }}"
      files:
        config/job_spec.json: "{{ spec | to_nice_json }}"
    wait: placed
  register: job

- name: Stop | Stop a running job
  mvp.ray.ray_job:
    submission_id: selftest-20261121-120000-1a2b3c
    address: "{{ mvp_ray_jobs_address }}"
    state: stopped
"""

RETURN = r"""
mlflow:
  description:
    - The job's MLflow run - run_id, attempt_run_id (where this attempt logs - the run, or for a restarted attempt
      its child run), experiment_id, experiment, run_name, continued (bool), submission_ids (the run's attempts),
      tracking_uri, ui_url, credentials_file (a path, never the password); None when untracked.
  returned: with I(mlflow), when the job was submitted by this call
  type: dict
job:
  description: Ray JobDetails of the job (null when it does not exist), plus C(driver_node_ip) once placed.
  type: dict
  returned: always
  contains:
    submission_id: {description: the id, type: str}
    status: {description: "PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED", type: str}
    message: {description: Ray's status message, type: str}
    driver_node_id: {description: Ray node id of the driver, type: str}
    driver_node_ip: {description: IP of that node (state API), type: str}
    entrypoint: {description: the driver's command, type: str}
existed:
  description: True when the job was already in the job table before this run.
  type: bool
  returned: always
placement:
  description: >-
    Where the driver runs - C(submission_id), C(status), C(driver_node_id), C(driver_node_ip),
    C(head_node_ip) and C(worker_ips) (ALIVE nodes carrying I(worker_resource)); the format of
    a job directory's C(debug/placement.json).
  type: dict
  returned: when the job has a driver node and I(wait=placed)
placement_dest:
  description: Path I(placement) was saved to.
  type: str
  returned: when written
check:
  description: >-
    What I(check) found (module_utils C(mvp_submit_check.look)) - C(missing) (name -> path), C(job_dir_exists),
    C(existing_job) (the status of a Ray job with the id, or null), C(summary) (the ALIVE nodes, as
    M(mvp.ray.ray_cluster_info) returns them), C(hydra_errors), C(resolved_config),
    C(dataset_columns), C(prepared_datasets), C(dataset_schema_skipped), C(verl_errors), C(verl_check) (C(skipped),
    C(seconds), C(cached), C(resource_pools): the pools verl's own code built) and
    C(room) (C({params, source, files_bytes, free_bytes, total_bytes, path})).
  type: dict
  returned: when I(check) is set
spec:
  description: The job spec judged and submitted (I(refuse.spec)).
  type: dict
  returned: when I(refuse) is set
problems:
  description: Every problem I(refuse) found, in the order of C(mvp_refuse.mvp_submit_problems) (empty when the job was submitted).
  type: list
  elements: str
  returned: when I(refuse) is set and the job was not refused
other_problems:
  description: When I(refuse) refuses the job, the problems after the first one (the first is C(msg)).
  type: list
  elements: str
  returned: when refused
note:
  description: What the look could not do that the user should know (verl's own start-up checks skipped, and why); '' otherwise.
  type: str
  returned: when I(check) is set
job_dir_written:
  description: Absolute paths written into the new job directory (I(job_dir)), sorted.
  type: list
  elements: str
  returned: when I(job_dir) is set
debug_bundle:
  description: >-
    The snapshots started in the background (I(debug_bundle)) - C(stamp), C(files), C(record) (the
    JSON file the detached process writes when done) and C(max_seconds) (int, its upper bound), as
    M(mvp.ray.ray_debug_bundle) returns with I(detach=true).
  type: dict
  returned: when I(debug_bundle) is set, not in check mode
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import BUNDLE_OPTIONS
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import CONNECTION_ARGS
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_submission import (
    CHECK_OPTIONS, MLFLOW_OPTIONS, RayJob)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            CONNECTION_ARGS,
            submission_id=dict(type="str", required=True),
            state=dict(type="str", default="submitted", choices=["submitted", "stopped", "absent"]),
            entrypoint=dict(type="str"),
            runtime_env=dict(type="dict"),
            entrypoint_resources=dict(type="dict"),
            entrypoint_num_cpus=dict(type="float"),
            metadata=dict(type="dict"),
            wait=dict(type="str", default="none", choices=["none", "placed"]),
            pending_timeout=dict(type="int", default=300),
            stop_timeout=dict(type="int", default=120),
            poll_interval=dict(type="float", default=1.0),
            placement_dest=dict(type="path"),
            worker_resource=dict(type="str", default="worker_node"),
            job_dir=dict(type="dict", options=dict(
                path=dict(type="path", required=True),
                files=dict(type="dict", default={}),
                subdirs=dict(type="list", elements="str"),
                mode=dict(type="str", default="0775"),
                links=dict(type="dict", default={}),
            )),
            debug_bundle=dict(type="dict", options=BUNDLE_OPTIONS),
            check=dict(type="dict", options=CHECK_OPTIONS),
            mlflow=dict(type="dict", options=MLFLOW_OPTIONS),
            refuse=dict(type="dict", options=dict(
                spec=dict(type="dict", required=True),
                worker_resource=dict(type="str"),
                check_gpus=dict(type="bool", default=True),
            )),
        ),
        supports_check_mode=True,
    )
    RayJob(module).run()


if __name__ == "__main__":
    main()
