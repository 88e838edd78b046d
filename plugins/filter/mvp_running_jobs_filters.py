# -*- coding: utf-8 -*-
"""Jinja2 filters of a cluster play's look at the jobs it would interrupt (module_utils ``mvp_running_jobs``)."""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_running_jobs import interrupted, job_line, refusal


def mvp_interrupted_jobs(active, changes):
    """The active jobs that the planned node changes would interrupt.

    :param active: list of dicts, the ``active_jobs`` of ``ray_cluster_info`` (``active=true``).
    :param changes: list of dicts ``{"host", "node_ip", "head", "reason"}``: one per node the play
        would restart Ray on or recreate (``reason`` empty: no change there).
    :returns: list of the hit jobs (``active`` rows with ``changes``: the hosts that hit each).
    """
    return interrupted(active, changes)


def mvp_running_job_line(job):
    """One active job as a line: id, status, nodes, last step, newest complete checkpoint, steps at risk (str)."""
    return job_line(job)


def mvp_interrupt_refusal(hit, changes, play="site.yml"):
    """The message of a play refusing to interrupt ``hit`` (str): the changes, the jobs and the two ways on."""
    return refusal(hit, changes, play)


class FilterModule(object):
    """Running-job filters: mvp_interrupted_jobs, mvp_running_job_line, mvp_interrupt_refusal."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_interrupted_jobs": mvp_interrupted_jobs, "mvp_running_job_line": mvp_running_job_line,
                "mvp_interrupt_refusal": mvp_interrupt_refusal}
