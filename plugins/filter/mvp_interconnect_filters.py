# -*- coding: utf-8 -*-
"""Jinja2 filters over the interconnect rules (a thin adapter of ``module_utils/cluster/mvp_interconnect.py``).

The preflight reads the cluster's interconnect baseline and the latest selftest's measurement
from the shared storage (``ansible.builtin.slurp`` on the head) and shows their comparison;
the rules (bus bandwidth, what counts as below the baseline) live in the module_utils, which
the selftest uses too. Each filter is documented for ``ansible-doc -t filter`` in the YAML
file of its name beside this one.
"""

from __future__ import annotations

import base64
import json

from ansible.errors import AnsibleFilterError

from ansible_collections.mvp.ray.plugins.module_utils.cluster import mvp_interconnect


def _record(value):
    """A record from a parsed dict, a slurp result (base64 ``content``) or nothing.

    :returns: tuple (dict or None, str or None: why a file could not be read).
    """
    if value is None or value == "":
        return None, None
    if not isinstance(value, dict):
        raise AnsibleFilterError("an interconnect record must be a dict or a slurp result, got %s" % type(value).__name__)
    if "encoding" not in value and "content" not in value and ("failed" in value or "msg" in value):
        return None, None  # a slurp of a file that is not there
    if "content" in value and value.get("encoding", "base64") == "base64":
        try:
            return json.loads(base64.b64decode(value["content"]).decode("utf-8")), None
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            return None, "%s is not JSON (%s)" % (value.get("source", "the file"), exc)
    return value, None


def mvp_interconnect_files(shared_root):
    """Paths of the cluster's interconnect baseline and latest result under the shared root.

    :param shared_root: str, e.g. ``/private``.
    :returns: dict ``{"baseline": str, "latest": str}``.
    """
    if not isinstance(shared_root, str) or not shared_root.startswith("/"):
        raise AnsibleFilterError("the shared root must be an absolute path, got %r" % (shared_root,))
    return mvp_interconnect.files(shared_root)


def mvp_interconnect_check(latest, baseline, fraction=mvp_interconnect.DEFAULT_WARN_FRACTION):
    """Compare the latest interconnect measurement with the baseline (``mvp_interconnect.compare``).

    :param latest: dict record, a slurp result of the latest file, or None.
    :param baseline: the same for the baseline file.
    :param fraction: float > 0: values below fraction x baseline are warnings.
    :returns: dict ``{"state", "warnings", "lines", "below", "fraction"}`` (see ``compare``);
        an unreadable file adds a line saying so.
    :raises AnsibleFilterError: for a fraction that is not a positive number or an input of another type.
    """
    latest_record, latest_error = _record(latest)
    baseline_record, baseline_error = _record(baseline)
    try:
        out = mvp_interconnect.compare(latest_record, baseline_record, fraction)
    except ValueError as exc:
        raise AnsibleFilterError("mvp_interconnect_warn_fraction: %s" % exc) from None
    out["lines"].extend(e for e in (latest_error, baseline_error) if e)
    return out


class FilterModule(object):
    """Interconnect filters: mvp_interconnect_files, mvp_interconnect_check."""

    def filters(self):
        """Return the filter table."""
        return {"mvp_interconnect_files": mvp_interconnect_files, "mvp_interconnect_check": mvp_interconnect_check}
