# -*- coding: utf-8 -*-
"""Jinja2 filters that show the cluster's job queue (module_utils ``submit_job_queue``) in a play's output."""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_queue import row_line


def mvp_queue_line(row):
    """One queued job as a line: ``2. grpo-...: queued since <time>, shape ...; waits for ...``.

    :param row: dict, one item of the ``queue`` that ``ray_cluster_info`` returns with ``queue=true``
        (``submission_id``, ``position``, ``state``, ``shape``, ``waits_for``, ``since``, ``admitted_at``).
    :returns: str.
    """
    return row_line(row)


class FilterModule(object):
    """Queue filters: mvp_queue_line."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_queue_line": mvp_queue_line}
