# -*- coding: utf-8 -*-
"""The settings that moved from an ``mvp_*`` inventory name to their role's own name (issue 53).

A role's own knobs are set in the inventory by the role's names (``ray_worker_start_attempts``), declared
once in the role's ``defaults/main.yml`` and ``meta/argument_specs.yml``; ``inventories/common/all`` holds
only the facts several roles share. An inventory written for the old names keeps working for one release (until 0.3.0):
the action ``mvp.ray.ray_moved_settings`` (first task of every role entry point that has a moved knob) sets
the new name from the old one and prints a deprecation warning naming the new name.
"""

from __future__ import annotations

# Old inventory name -> the role knobs that replaced it (an old name that fed two roles feeds both).
MOVED = {
    "mvp_checkpoints_keep": ("submit_job_checkpoints_keep",),
    "mvp_code_id": ("submit_job_code_id",),
    "mvp_container_ipc_mode": ("containers_ipc_mode",),
    "mvp_container_shm_size": ("containers_shm_size",),
    "mvp_container_ulimits": ("containers_ulimits",),
    "mvp_controller_dir": ("job_controller_dir",),
    "mvp_controller_env_names": ("job_controller_env_names",),
    "mvp_controller_name": ("job_controller_name",),
    "mvp_controller_pending_timeout_s": ("job_controller_pending_timeout_s",),
    "mvp_controller_poll_s": ("job_controller_poll_s",),
    "mvp_controller_project_dir": ("job_controller_project_dir",),
    "mvp_controller_shared_dir": ("job_controller_shared_dir",),
    "mvp_controller_venv": ("job_controller_venv",),
    "mvp_gsm8k_source": ("prepare_data_gsm8k_source",),
    "mvp_host_node_dir": ("containers_host_node_dir",),
    "mvp_internal_token": ("ray_worker_secret",),
    "mvp_job_overrides": ("submit_job_site_overrides",),
    "mvp_max_restarts": ("submit_job_max_restarts",),
    "mvp_mlflow_bin": ("mlflow_server_bin",),
    "mvp_mlflow_dir": ("mlflow_server_dir",),
    "mvp_model": ("submit_job_model",),
    "mvp_models": ("prepare_data_models",),
    "mvp_node_image_base": ("docker_host_node_image_base",),
    "mvp_node_image_base_python": ("docker_host_node_image_base_python",),
    "mvp_node_image_build": ("docker_host_node_image_build",),
    "mvp_node_image_ref": ("containers_image",),
    "mvp_node_image_variant": ("docker_host_node_image_variant",),
    "mvp_node_image_verl_releases": ("docker_host_node_image_verl_releases",),
    "mvp_preempt_grace_s": ("job_controller_preempt_grace_s",),
    "mvp_preflight_min_free_gb": ("preflight_min_free_gb",),
    "mvp_preflight_min_shm_size": ("preflight_min_shm_size",),
    "mvp_priority_classes": ("submit_job_priority_classes",),
    "mvp_progress_interval_s": ("submit_job_progress_interval_s",),
    "mvp_queue": ("submit_job_queue",),
    "mvp_ray_base": ("submit_job_ray_base",),
    "mvp_ray_dashboard_profiling": ("ray_head_dashboard_profiling",),
    "mvp_ray_gcs_storage_path": ("ray_head_gcs_storage_path",),
    "mvp_ray_head_extra_args": ("ray_head_extra_args",),
    "mvp_ray_ready_timeout": ("ray_worker_ready_timeout", "ray_head_ready_timeout"),
    "mvp_ray_socket_ifname": ("ray_worker_socket_ifname",),
    "mvp_ray_start_attempts": ("ray_worker_start_attempts", "ray_head_start_attempts"),
    "mvp_ray_start_parallel": ("ray_worker_start_parallel",),
    "mvp_ray_start_retry_delay_s": ("ray_worker_start_retry_delay_s", "ray_head_start_retry_delay_s"),
    "mvp_ray_worker_cpus": ("ray_worker_cpus",),
    "mvp_ray_worker_extra_args": ("ray_worker_extra_args",),
    "mvp_ray_worker_gpus_logical": ("preflight_gpus_logical",),
    "mvp_ray_worker_resource_amount": ("ray_worker_resource_amount",),
    "mvp_report_local_dir": ("run_report_local_dir",),
    "mvp_require_nfs": ("preflight_require_nfs",),
    "mvp_restart_causes": ("job_controller_restart_causes",),
    "mvp_running_jobs_wait_timeout_s": ("running_jobs_wait_timeout_s",),
    "mvp_shared_dirs": ("shared_storage_dirs",),
    "mvp_verl_snapshot_force": ("verl_snapshot_force",),
    "mvp_verl_snapshots": ("verl_snapshot_sources",),
    "mvp_watchdog": ("submit_job_watchdog",),
}


def moved_to(role):
    """{old name: [new names of ``role``]} - the moved settings one role reads (str -> list of str)."""
    prefix = role + "_"
    return {old: [n for n in news if n.startswith(prefix)] for old, news in MOVED.items()
            if any(n.startswith(prefix) for n in news)}


def resolve(role, given, user_set):
    """The values the old names give a role's knobs, and what to say about them.

    :param role: str, the role's short name (``ray_worker``).
    :param given: dict, old name -> its value, for the old names the play's variables define.
    :param user_set: callable(new name) -> bool, whether the new name itself was set (not the role default).
    :returns: (dict new name -> value, list of str deprecation messages) - a new name set on its own wins
        over its old name, which is then named as ignored.
    """
    values, messages = {}, []
    for old, news in sorted(moved_to(role).items()):
        if old not in given:
            continue
        for new in news:
            if user_set(new):
                messages.append("%s is set and so is its old name %s: %s wins; remove %s from the inventory."
                                % (new, old, new, old))
            else:
                values[new] = given[old]
                messages.append("The setting %s is now %s (the role %s's own name): rename it in the inventory "
                                "(docs/inventories.md)." % (old, new, role))
    return values, messages
