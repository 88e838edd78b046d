# -*- coding: utf-8 -*-
"""Jinja2 filters that show a job's verdict (module_utils ``mvp_verdict``) in a play's output."""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_verdict import one_line


def mvp_verdict_line(record):
    """The verdict as one line: ``trained 8 of 8 steps`` or ``FAILED [node_lost] node lost: ...``.

    :param record: dict, the ``verdict`` returned by ``ray_job_record`` (or None).
    :returns: str (``no verdict`` for None or an empty record).
    """
    return one_line(record or None)


def mvp_evidence_line(item):
    """One evidence item as ``<file>:<line>: <text>`` or ``<source>: <text>``.

    :param item: dict with ``text`` and either ``file`` (and ``line``) or ``source``.
    :returns: str.
    """
    item = item or {}
    where = item.get("file") or item.get("source") or "?"
    if item.get("line"):
        where = "%s:%s" % (where, item["line"])
    return "%s: %s" % (where, item.get("text", ""))


class FilterModule(object):
    """Verdict filters: mvp_verdict_line, mvp_evidence_line."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_verdict_line": mvp_verdict_line, "mvp_evidence_line": mvp_evidence_line}
