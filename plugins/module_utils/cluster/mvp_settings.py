# -*- coding: utf-8 -*-
"""The settings release 0.1.0 read under a name no role reads any more, and the check of them: the ``mvp_*`` names
that now carry their role's name, and the two deadlines ``submit_job`` enforced that are now the job controller's.

A role's own knobs are set by the role's names (``ray_worker_cpus``), declared once in the role's
``defaults/main.yml`` and ``meta/argument_specs.yml``; ``inventories/common/all`` holds only the facts several
roles share (issue 53). The old names are no longer read: a value given under one would be dropped, so the first
play of every entry playbook (``playbooks/old_names.yml``, filter ``mvp.ray.mvp_old_names``) fails when any host's
variables (the inventory's or ``-e``) define one, naming its new name, before anything runs.

Only names that a released version read are listed (``changelogs/changelog.yaml``); names that came and went
between two releases were never promised to anybody.
"""

from __future__ import annotations

# The last release that read the old names (changelogs/changelog.yaml; galaxy.yml's version) and the first that
# refuses them, the next one (docs/collection.md, "Documentation and changelog").
OLD_NAMES_RELEASE = "0.1.0"
NEW_NAMES_RELEASE = "0.2.0"

# Old name (read by release 0.1.0) -> the role knobs that replaced it (an old name that fed two roles names both).
RENAMED = {
    "mvp_code_id": ("submit_job_code_id",),
    "mvp_container_ipc_mode": ("containers_ipc_mode",),
    "mvp_container_shm_size": ("containers_shm_size",),
    "mvp_container_ulimits": ("containers_ulimits",),
    "mvp_gsm8k_source": ("prepare_data_gsm8k_source",),
    "mvp_internal_token": ("ray_worker_secret",),
    "mvp_job_overrides": ("submit_job_site_overrides",),
    "mvp_model": ("submit_job_model",),
    "mvp_models": ("prepare_data_models",),
    "mvp_node_image_base": ("docker_host_node_image_base",),
    "mvp_node_image_base_python": ("docker_host_node_image_base_python",),
    "mvp_node_image_build": ("docker_host_node_image_build",),
    "mvp_node_image_ref": ("containers_image",),
    "mvp_node_image_variant": ("docker_host_node_image_variant",),
    "mvp_preflight_min_free_gb": ("preflight_min_free_gb",),
    "mvp_preflight_min_shm_size": ("preflight_min_shm_size",),
    "mvp_ray_base": ("submit_job_ray_base",),
    "mvp_ray_dashboard_profiling": ("ray_head_dashboard_profiling",),
    "mvp_ray_gcs_storage_path": ("ray_head_gcs_storage_path",),
    "mvp_ray_ready_timeout": ("ray_head_ready_timeout", "ray_worker_ready_timeout"),
    "mvp_ray_socket_ifname": ("ray_worker_socket_ifname",),
    "mvp_ray_worker_cpus": ("ray_worker_cpus",),
    "mvp_ray_worker_gpus_logical": ("preflight_gpus_logical",),
    "mvp_ray_worker_resource_amount": ("ray_worker_resource_amount",),
    "mvp_report_local_dir": ("run_report_local_dir",),
    "mvp_require_nfs": ("preflight_require_nfs",),
    "mvp_shared_dirs": ("shared_storage_dirs",),
    "mvp_verl_snapshot_force": ("verl_snapshot_force",),
    "mvp_verl_snapshots": ("verl_snapshot_sources",),
    "mvp_watchdog": ("submit_job_watchdog",),
    # Issue 62: a stuck job is stopped by the job controller alone, at its deadlines (one setting each).
    "submit_job_pending_timeout": ("job_controller_pending_timeout_s",),
    "submit_job_pg_pending_timeout": ("job_controller_pg_pending_timeout_s",),
}

# At most this many hosts are named in one sentence (a -e value is defined for every host).
HOSTS_SHOWN = 3


def old_names_given(names_by_host):
    """Say, for each old name some host's variables define, its new name and where it was given.

    :param names_by_host: dict host name (str) -> a container of the variable names defined for that host (a set,
        or a mapping such as Ansible's ``hostvars[host]``: only ``in`` is used, never a value - ``mvp_internal_token``
        is a secret). Pass every host of the inventory: a name given with ``-e`` is defined for all of them.
    :returns: list of str, one sentence per old name given, sorted by old name; ``[]`` when none is given.
    """
    hosts_by_old = {}
    for host in sorted(names_by_host):
        names = names_by_host[host]
        for old in RENAMED:
            if old in names:
                hosts_by_old.setdefault(old, []).append(host)
    sentences = []
    for old in sorted(hosts_by_old):
        hosts = hosts_by_old[old]
        if len(hosts) == len(names_by_host) and len(hosts) > 1:
            where = "every host"
        elif len(hosts) > HOSTS_SHOWN:
            where = "%s and %d more hosts" % (", ".join(hosts[:HOSTS_SHOWN]), len(hosts) - HOSTS_SHOWN)
        else:
            where = ", ".join(hosts)
        new_names = " and ".join(RENAMED[old])
        sentences.append("%s (given for %s) is now %s (mvp.ray %s): rename it in the inventory or on the command "
                         "line; the old name is no longer read." % (old, where, new_names, NEW_NAMES_RELEASE))
    return sentences
