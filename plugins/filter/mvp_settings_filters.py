# -*- coding: utf-8 -*-
"""Jinja2 filter of the check every entry playbook runs first (playbooks/old_names.yml): settings given by the name
release 0.1.0 read (module_utils ``mvp_settings.RENAMED``)."""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_settings import old_names_given


def mvp_old_names(hostvars):
    """One sentence per old setting name some host's variables define (``mvp_settings.old_names_given``).

    :param hostvars: mapping host name (str) -> that host's variables (Ansible's ``hostvars``: the inventory's
        and ``-e`` values of every host); only the names are read, never a value.
    :returns: list of str, each naming the old name, the hosts given it and its new name; ``[]`` when none.
    """
    return old_names_given({host: hostvars[host] for host in hostvars})


class FilterModule(object):
    """Settings filters: mvp_old_names."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_old_names": mvp_old_names}
