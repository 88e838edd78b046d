#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Documentation of the action plugin ray_moved_settings (plugins/action/ray_moved_settings.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_moved_settings
short_description: Accept the old mvp_* inventory name of a setting that moved to its role's name
description:
  - A role's own knobs are set in the inventory by the role's names (C(ray_worker_start_attempts)); the old
    C(mvp_*) names they replaced (module_utils C(mvp_settings.MOVED)) are read for one more release.
  - For each old name the play defines, sets the role's new name to its value (as a host fact, above the
    inventory and the role default) unless the new name is set too, and prints a deprecation warning naming the
    new name (or, when both are set, that the old one is ignored).
  - Runs on the Ansible controller; changes nothing on a host. Its result hides the values (a moved setting may be a
    secret, C(ray_worker_secret)).
version_added: 0.2.0
extends_documentation_fragment:
  - mvp.ray.attributes
  - mvp.ray.attributes.info_module
options:
  role:
    description: The role whose moved knobs to set (its short name); default the role the task belongs to.
    type: str
    required: false
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Accept the settings this role renamed (their old names, deprecated)
  mvp.ray.ray_moved_settings:
    role: ray_worker
"""

RETURN = r"""
moved:
  description: The role knobs set from an old name (the values are in the host facts, not shown).
  returned: always
  type: list
  elements: str
  sample: [ray_worker_start_attempts]
"""
