# -*- coding: utf-8 -*-
"""Jinja2 filter for the settings a docker-host node container starts Ray from.

A thin adapter of ``module_utils/mvp_ray_start.py`` (the ``ray start`` command lines the ray_head and
ray_worker modules run too); documented for ``ansible-doc -t filter`` in ``mvp_ray_node_settings.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.mvp.ray.plugins.module_utils.mvp_ray_start import node_settings


def mvp_ray_node_settings(kind, options):
    """Return the node settings dict (see ``mvp_ray_start.node_settings``).

    :raises AnsibleFilterError: for an unknown kind or a missing option.
    """
    try:
        return node_settings(kind, dict(options or {}))
    except ValueError as exc:
        raise AnsibleFilterError("mvp_ray_node_settings: %s" % exc)


class FilterModule(object):
    """Ray start filters: mvp_ray_node_settings."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_ray_node_settings": mvp_ray_node_settings}
