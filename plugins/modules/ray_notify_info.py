#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: say which webhook deliveries of the job controller's outbox are not delivered, and why."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_notify_info
short_description: Read the job controller's webhook outbox - undelivered events and why
description:
  - Reads the outbox the job controller writes every webhook delivery into before it sends it
    (C(<shared_root>/controller/outbox), module_utils C(mvp_notify.outbox_summary)) and counts the deliveries
    still pending (being retried), expired (given up after C(job_controller_notify_retry_for_s)) and refused (a
    4xx answer other than 429), with the newest error per endpoint.
  - An endpoint is shown by its URL without user info, query or fragment (a token in a URL stays out of the output).
  - Read-only; supports check mode. Runs where the shared storage is (the head, in C(status.yml)).
version_added: 0.2.0
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
options:
  outbox:
    description: The outbox folder (C(<shared_root>/controller/outbox)); a missing folder has nothing undelivered.
    type: path
    required: true
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Status | Read the webhooks' outbox
  mvp.ray.ray_notify_info:
    outbox: "{{ mvp_shared_root }}/controller/outbox"
  register: status_webhooks
"""

RETURN = r"""
pending:
  description: Deliveries being retried (connection refused, timeout, 5xx, 429).
  type: int
  returned: always
expired:
  description: Deliveries given up after the retry time.
  type: int
  returned: always
refused:
  description: Deliveries a receiver refused (4xx other than 429), not retried.
  type: int
  returned: always
delivered:
  description: Deliveries delivered and not yet pruned (7 days).
  type: int
  returned: always
endpoints:
  description: Per endpoint URL (no user info, query or fragment) - C(undelivered), C(states) (count per state) and
    C(last_error) (the newest).
  type: dict
  returned: always
lines:
  description: One line per endpoint with undelivered events (empty when every event was delivered).
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.notify.mvp_notify import outbox_summary


def summary_lines(summary):
    """One line per endpoint with undelivered events (list of str), e.g. ``http://h/hook: 2 undelivered (pending 2);
    last error: HTTP 503 Service Unavailable``."""
    lines = []
    for url, row in sorted(summary["endpoints"].items()):
        states = ", ".join("%s %d" % item for item in sorted(row["states"].items()))
        lines.append("%s: %d undelivered (%s); last error: %s" % (url, row["undelivered"], states,
                                                                  row["last_error"] or "none yet"))
    return lines


def main():
    """Module entry point."""
    module = AnsibleModule(argument_spec=dict(outbox=dict(type="path", required=True)), supports_check_mode=True)
    summary = outbox_summary(module.params["outbox"])
    module.exit_json(changed=False, lines=summary_lines(summary), **summary)


if __name__ == "__main__":
    main()
