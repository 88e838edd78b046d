#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Documentation of the ray_playbook action plugin (plugins/action/ray_playbook.py); it runs on the controller."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_playbook
short_description: Run a playbook of this collection from a play, with ansible-runner, and read its events
description:
  - Runs on the controller only. Runs I(playbook) with ansible-runner (the library AWX runs playbooks with)
    against the inventories of the play that calls it and with the play's C(ansible.cfg), and returns what
    the run's events say - the per-host counts of the C(playbook_on_stats) event and the failed tasks of the
    C(runner_on_failed) and C(runner_on_unreachable) events - never parsed from the recap text.
  - The restart loop of C(submit_job) heals the cluster with it (the cluster playbook, retried within
    I(retry_within) seconds until it succeeds); C(submit.yml -e wait=false) starts a supervisor with it in the
    background (I(background), C(ansible-runner start), a daemon whose pid file is C(<private_data_dir>/pid)
    while it runs).
  - Fails, naming the playbook, the last failed task, its host and message, when the playbook did not succeed;
    fails naming the fix when ansible-runner is not installed (controller requirements, C(make setup)).
version_added: 0.2.0
extends_documentation_fragment:
  - mvp.ray.attributes
options:
  playbook:
    description: A playbook path or a collection playbook's name (C(mvp.ray.cluster)).
    type: str
    required: true
  inventory:
    description: Inventory sources; default the play's own (C(ansible_inventory_sources)).
    type: list
    elements: str
  extra_vars:
    description: Variables given to the playbook with C(-e).
    type: dict
  ident:
    description: The run's name (its artifacts are C(<private_data_dir>/artifacts/<ident>)); letters, digits, C(.), C(_), C(-).
    type: str
    default: run
  private_data_dir:
    description: ansible-runner's folder for the run; required with I(background), else a fresh temporary folder.
    type: path
  background:
    description: Start the playbook detached from this play (C(ansible-runner start)) and return at once.
    type: bool
    default: false
  retry_within:
    description: Seconds after the first attempt within which a failed run is started again (0 - one attempt).
    type: float
    default: 0
  retry_delay:
    description: Seconds between the end of a failed attempt and the next.
    type: float
    default: 10
attributes:
  check_mode:
    support: none
    details:
      - In check mode nothing is run (the task reports skipped).
  diff_mode:
    support: none
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Heal | Run the cluster playbook until every node is back
  mvp.ray.ray_playbook:
    playbook: mvp.ray.cluster
    ident: heal-sft-20261121-120000-1a2b3c
    retry_within: 900
    retry_delay: 15
  delegate_to: localhost
  run_once: true
  register: healed

- name: After | Supervise a run in the background
  mvp.ray.ray_playbook:
    playbook: mvp.ray.supervise
    extra_vars: {submission_id: sft-20261121-120000-1a2b3c}
    background: true
    private_data_dir: /home/me/.local/state/mvp-ray/supervisors/sft-20261121-120000-1a2b3c
    ident: sft-20261121-120000-1a2b3c
"""

RETURN = r"""
rc:
  description: The playbook's exit code (last attempt).
  type: int
  returned: when not background
status:
  description: ansible-runner's status of the last attempt (C(successful), C(failed), C(timeout), C(canceled)).
  type: str
  returned: when not background
attempts:
  description: How many times the playbook ran.
  type: int
  returned: when not background
hosts:
  description: Per host, the counts of the last attempt (C(ok), C(changed), C(failed), C(unreachable), C(skipped), C(rescued), C(ignored)).
  type: dict
  returned: when not background
recap:
  description: "One line per host from I(hosts): C(<host> : ok=N changed=N unreachable=N failed=N)."
  type: list
  elements: str
  returned: when not background
changed:
  description: Whether the last attempt changed anything on any host.
  type: bool
  returned: always
failed_tasks:
  description: The last attempt's failed or unreachable tasks (C(host), C(task), C(msg), C(unreachable)), at most 10.
  type: list
  elements: dict
  returned: when not background
artifacts:
  description: The folder of the run's events and output (C(<private_data_dir>/artifacts/<ident>)).
  type: str
  returned: always
pid_file:
  description: The background run's pid file (present while it runs).
  type: str
  returned: when background
stdout:
  description: The background run's output file.
  type: str
  returned: when background
"""
