#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: create a job directory exclusively and write its files, in one call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job_dir
short_description: Create C(jobs/<submission_id>/) exclusively, its sub-folders and files, and install shared files
description:
  - Creates I(path) with one C(mkdir) call, which fails when it exists, so two
    submissions can never share a job directory and an existing one is never reused or
    overwritten. Then creates I(subdirs) inside it and writes I(files) (paths relative
    to I(path)).
  - Before that, writes I(shared_files) (absolute paths, such as the job tools under
    the shared storage) only where the content differs; each file is written to a
    temporary name and renamed, so a running job never reads half a file.
  - Fails with the path when the job directory exists; nothing is written then.
  - Check mode reports what would be created and writes nothing.
options:
  path:
    description: The job directory (C(<shared_root>/jobs/<submission_id>)); its parent must exist.
    type: path
    required: true
  subdirs:
    description: Folders created inside I(path) (the job contract's folders, module_utils C(mvp_job.SUBDIRS)).
    type: list
    elements: str
    default: [config, logs, checkpoints, debug]
  files:
    description:
      - Mapping of a path inside I(path) -> text content; relative to I(path) (e.g. C(config/job_spec.json))
        or absolute (the job spec's C(paths), e.g. C(/private/jobs/<id>/config/job_spec.json)).
    type: dict
    default: {}
  shared_files:
    description: Mapping of an absolute path -> text content, written only when it differs.
    type: dict
    default: {}
  mode:
    description: Octal mode of the folders created (string such as C("0775")); files get 0644.
    type: str
    default: "0775"
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Jobdir | Create the job directory and write its config
  mvp.ray.ray_job_dir:
    path: /private/jobs/selftest-20261122-120000-1a2b3c
    files:
      config/job_spec.json: "{{ spec | to_nice_json }}"
    shared_files:
      /private/common/code/mvp_tools/mvp_entry.py: "{{ lookup('ansible.builtin.file', 'job_tools/mvp_entry.py') }}"
"""

RETURN = r"""
written:
  description: Absolute paths written by this call (job files, and shared files that changed).
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.mvp_job import SUBDIRS
from ansible_collections.mvp.ray.plugins.module_utils.mvp_job_dir import JobDirError, create_job_dir


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            subdirs=dict(type="list", elements="str", default=list(SUBDIRS)),
            files=dict(type="dict", default={}),
            shared_files=dict(type="dict", default={}),
            mode=dict(type="str", default="0775"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        written = create_job_dir(params["path"], params["files"], params["subdirs"], params["mode"],
                                 params["shared_files"], module.check_mode)
    except JobDirError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=True, written=written)


if __name__ == "__main__":
    main()
