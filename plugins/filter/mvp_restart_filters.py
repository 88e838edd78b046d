# -*- coding: utf-8 -*-
"""Jinja2 filter over the restart decision (module_utils ``mvp_restart``, a thin adapter)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.mvp.ray.plugins.module_utils import mvp_restart


def mvp_restart_decision(spec, verdict, causes=mvp_restart.ALL_RETRYABLE, follow_error=""):
    """Whether the run of an ended attempt continues, and as which next attempt (``mvp_restart.decide``).

    :raises AnsibleFilterError: for a bad ``mvp_restart_causes`` (the message names it and the fix).
    """
    try:
        return mvp_restart.decide(spec, verdict, causes, follow_error)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule(object):
    """Restart filters: mvp_restart_decision."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_restart_decision": mvp_restart_decision}
