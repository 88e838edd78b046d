# -*- coding: utf-8 -*-
"""Doc fragment mvp.ray.attributes: what a module's ``attributes`` mean (check mode, diff mode, platform, action group).

The same attributes as ansible-core's and community.docker's modules (their ``attributes`` doc fragments); each
module says in its own ``attributes:`` block how far it supports each one.
"""

from __future__ import annotations


class ModuleDocFragment(object):
    """Descriptions of the attributes every module of the collection declares, and the sets some share."""

    # Standard fragment: every module extends it and sets the support of check_mode and diff_mode itself.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description: Can run in C(check_mode) and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in C(check_mode)), when in diff mode.
"""

    # With the standard fragment, for a module that only reads.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
"""

    # With the standard fragment, for a module that reads the node's /proc (processes, sockets, mounts).
    PLATFORM_LINUX = r"""
options: {}
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: linux
"""

    # With the standard fragment, for the modules of the action group mvp.ray.ray (meta/runtime.yml).
    ACTIONGROUP_RAY = r"""
options: {}
attributes:
  action_group:
    description: Use C(group/mvp.ray.ray) in C(module_defaults) to set defaults for this module.
    support: full
    membership:
      - mvp.ray.ray
"""
