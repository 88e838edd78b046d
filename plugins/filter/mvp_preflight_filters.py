# -*- coding: utf-8 -*-
"""Jinja2 filter over the preflight's rules (a thin adapter of ``module_utils/cluster/mvp_preflight.py``).

The preflight role inspects every node with ``mvp.ray.ray_node_preflight`` and then checks the
whole cluster in one task on the controller with this filter. The filter is documented for
``ansible-doc -t filter`` in ``mvp_preflight_problems.yml`` beside this file.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.mvp.ray.plugins.module_utils.cluster import mvp_preflight


def mvp_preflight_problems(nodes, expect):
    """The preflight's failure texts for the whole cluster (``mvp_preflight.cluster_problems``).

    :param nodes: list of ``[host, result]`` pairs (``ray_node_preflight`` results), or a dict host -> result.
    :param expect: dict with every key of ``mvp_preflight.EXPECT_KEYS``.
    :returns: list of str, empty when every node passes.
    :raises AnsibleFilterError: when ``nodes`` is neither a list of pairs nor a dict, or ``expect`` misses a key.
    """
    if isinstance(nodes, dict):
        nodes = list(nodes.items())
    if not isinstance(nodes, (list, tuple)) or any(not isinstance(pair, (list, tuple)) or len(pair) != 2
                                                   for pair in nodes):
        raise AnsibleFilterError("mvp_preflight_problems: the input must be a list of [host, result] pairs or a dict, "
                                 "got %r" % (nodes,))
    missing = [key for key in mvp_preflight.EXPECT_KEYS if key not in (expect or {})]
    if missing:
        raise AnsibleFilterError("mvp_preflight_problems: expect misses %s" % ", ".join(missing))
    return mvp_preflight.cluster_problems(nodes, expect)


class FilterModule(object):
    """Preflight filter: mvp_preflight_problems."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_preflight_problems": mvp_preflight_problems}
