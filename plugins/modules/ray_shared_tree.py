#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: create the folders of the shared tree in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_shared_tree
short_description: Create missing folders under the shared storage root, in one call
description:
  - Creates every folder of I(dirs) under I(root) that does not exist yet (with
    parents), with mode I(mode). Existing folders are left exactly as they are
    (mode and contents untouched), so re-runs change nothing.
  - Replaces a loop of C(ansible.builtin.file) tasks, each of which costs a round
    trip to the node.
  - Fails when I(root) is missing, or when a path exists but is not a folder.
  - Supports check mode (reports what would be created).
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  root:
    description: Shared storage root (mvp_shared_root); must exist.
    type: path
    required: true
  dirs:
    description: Folders relative to I(root), e.g. C(jobs) or C(common/code).
    type: list
    elements: str
    required: true
  mode:
    description: Octal mode of the folders created (string such as C("0775")).
    type: str
    default: "0775"
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Shared | Create the shared tree
  mvp.ray.ray_shared_tree:
    root: /private
    dirs: [datasets, hf, jobs, outputs, ray, common/models, common/datasets, common/code, user/code]
"""

RETURN = r"""
created:
  description: Absolute paths created by this call (empty on a re-run).
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_shared_tree import tree_result


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            root=dict(type="path", required=True),
            dirs=dict(type="list", elements="str", required=True),
            mode=dict(type="str", default="0775"),
        ),
        supports_check_mode=True,
    )
    result = tree_result(module.params["root"], module.params["dirs"], module.params["mode"], module.check_mode)
    if result.get("failed"):
        module.fail_json(msg=result["msg"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
