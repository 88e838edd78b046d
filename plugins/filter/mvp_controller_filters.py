# -*- coding: utf-8 -*-
"""Jinja2 filter over the job controller's heartbeat (module_utils ``mvp_run_state``, a thin adapter)."""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_run_state


def mvp_controller_line(runs, heartbeat, now):
    """One line saying who follows ``runs`` now (``mvp_run_state.controller_line``; None: the runs the heartbeat
    names), from the heartbeat's text (str)."""
    return mvp_run_state.controller_line(None if runs is None else list(runs), heartbeat or "", float(now))


class FilterModule(object):
    """Controller filters: mvp_controller_line."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_controller_line": mvp_controller_line}
