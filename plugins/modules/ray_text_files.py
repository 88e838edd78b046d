#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: write several text files into one folder in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_text_files
short_description: Write several text files into one folder on a host, in one call
description:
  - Makes I(dest) (with parents, mode I(dir_mode) when it is created) and writes every file of
    I(files) into it whose content differs from what is there (write to a temporary file, then
    rename), with mode I(mode). A file that already holds its content is left as it is.
  - Replaces a loop of C(ansible.builtin.copy) tasks, each of which costs a C(stat) and a C(copy)
    run on the host (0.6 s per file cold on the local docker host; docs/benchmarks.md). The
    contents travel as module arguments, so keep them to small text files (the node entrypoint and
    the four collection files it imports, about 35 kB).
  - Supports check mode (reports which files would be written).
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
options:
  dest:
    description: The folder the files go into.
    type: path
    required: true
  files:
    description: File name (no folder part) -> its whole content (UTF-8 text). Written and returned in this order.
    type: dict
    required: true
  mode:
    description: Octal mode of the files written (string such as C("0644")).
    type: str
    default: "0644"
  dir_mode:
    description: Octal mode of I(dest) when it is created.
    type: str
    default: "0755"
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Containers | Install the node entrypoint
  mvp.ray.ray_text_files:
    dest: /var/lib/mvp/node
    files: "{{ dict(paths | map('basename') | zip(query('ansible.builtin.file', *paths, rstrip=false))) }}"
  vars:
    paths: [/src/mvp_ray_node.py, /src/mvp_files.py]
"""

RETURN = r"""
written:
  description: Names of the files written (or, in check mode, that would be) by this call.
  type: list
  elements: str
  returned: always
results:
  description: One entry per file of I(files), in their order - C(name), C(path) and C(checksum) (the sha1 of its
    content, the checksum C(ansible.builtin.copy) returns).
  type: list
  elements: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_text_files import text_files_result


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            files=dict(type="dict", required=True),
            mode=dict(type="str", default="0644"),
            dir_mode=dict(type="str", default="0755"),
        ),
        supports_check_mode=True,
    )
    result = text_files_result(module.params["dest"], module.params["files"], module.params["mode"],
                               module.params["dir_mode"], module.check_mode)
    if result.get("failed"):
        module.fail_json(msg=result["msg"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
