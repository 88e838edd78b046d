# -*- coding: utf-8 -*-
"""Jinja2 filters for the settings a docker-host node container starts Ray from, and for what the
workers' starts of Ray have to say.

Thin adapters of ``module_utils/cluster/mvp_ray_start.py`` (the ``ray start`` command lines the ray_head and
ray_worker modules run too); documented for ``ansible-doc -t filter`` in ``mvp_ray_node_settings.yml``
and ``mvp_ray_start_notes.yml``.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_start import node_settings, start_notes


def mvp_ray_node_settings(kind, options):
    """Return the node settings dict (see ``mvp_ray_start.node_settings``).

    :raises AnsibleFilterError: for an unknown kind or a missing option.
    """
    try:
        return node_settings(kind, dict(options or {}))
    except ValueError as exc:
        raise AnsibleFilterError("mvp_ray_node_settings: %s" % exc)


def mvp_ray_start_notes(results, attempts):
    """Return the workers' start notes (see ``mvp_ray_start.start_notes``).

    :raises AnsibleFilterError: when ``results`` is not a list of ``[host, result]`` pairs or ``attempts`` not a number.
    """
    if not isinstance(results, (list, tuple)) or any(not isinstance(pair, (list, tuple)) or len(pair) != 2
                                                     for pair in results):
        raise AnsibleFilterError("mvp_ray_start_notes: the input must be a list of [host, result] pairs, got %r"
                                 % (results,))
    try:
        attempts = int(attempts)
    except (TypeError, ValueError):
        raise AnsibleFilterError("mvp_ray_start_notes: attempts must be a whole number, got %r" % (attempts,))
    return start_notes(results, attempts)


class FilterModule(object):
    """Ray start filters: mvp_ray_node_settings, mvp_ray_start_notes."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_ray_node_settings": mvp_ray_node_settings, "mvp_ray_start_notes": mvp_ray_start_notes}
