#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: run diagnostic commands concurrently and save their output with a time stamp."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_debug_bundle
short_description: Save the output of diagnostic commands (ray status, ray job list, ...) into a folder
description:
  - With I(in_process) (the default), commands whose program is named C(ray) run one
    after another inside the module's process (its Python must import Ray) through Ray's own click CLI
    (C(ray.scripts.scripts.cli.main(args, standalone_mode=False))), so Ray is
    imported once instead of once per command (about a second of CPU each); their
    output is what the CLI prints, with terminal colour codes removed.
  - Other commands (and all of them with I(in_process=false)) start at once as
    subprocesses; the module waits for all of them and writes one file
    per command named C(<UTC time>-<stage>-<name>.txt) holding the command line,
    exit code, standard output and standard error.
  - A command that fails or times out is recorded in its file, never fatal - a
    bundle is most useful when things are broken.
  - Files are written to temporary names, then renamed. Check mode writes nothing.
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
    details:
      - Runs no command and writes nothing; returns the files a bundle would write (C(changed=true)).
  diff_mode:
    support: none
options:
  dest:
    description: Folder receiving the files (must exist).
    type: path
    required: true
  stage:
    description: Stage name used in the file names (submit, placed, final, stop, collect).
    type: str
    required: true
  commands:
    description: Items C({name, argv}); C(name) becomes part of the file name.
    type: list
    elements: dict
    required: true
  timeout:
    description: Seconds each command may run before it is killed (in-process - abandoned).
    type: int
    default: 60
  in_process:
    description: Run C(ray) CLI commands inside the module's process (see above).
    type: bool
    default: true
  detach:
    description:
      - Return at once and take the snapshots in a detached process on the node (a
        double fork, as Ansible's own async wrapper does, without its file transfers) -
        the commands run while the play goes on, e.g. while the job is submitted.
      - When the detached process is done it writes I(record) (JSON - C(files), C(rcs),
        C(then_files), or C(failed) and C(msg)); wait for that file (C(ansible.builtin.wait_for)).
    type: bool
    default: false
  then:
    description:
      - A second snapshot of the same commands taken once a file appears, e.g. the
        placement record C(debug/placement.json) that C(ray_job) writes when the driver
        is placed. Started in the background before the submission, one call takes the
        submission and the placement snapshots while the job is submitted.
      - When the file does not appear within I(then.timeout) seconds the second
        snapshot is not taken (C(then_files) is empty); the module still succeeds.
    type: dict
    suboptions:
      stage:
        description: Stage name of the second snapshot.
        type: str
        required: true
      after_file:
        description: File whose appearance starts the second snapshot.
        type: path
        required: true
      timeout:
        description: Seconds to wait for I(then.after_file).
        type: int
        default: 300
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Bundle | Snapshot the cluster into the job's debug folder
  mvp.ray.ray_debug_bundle:
    dest: /private/jobs/selftest-20261121-120000-1a2b3c/debug
    stage: placed
    commands:
      - {name: ray_status, argv: [ray, status]}
      - {name: ray_job_list, argv: [ray, job, list, --address, "http://127.0.0.1:8265"]}

- name: Bundle | Snapshot at submission, and again once the driver is placed (started in the background)
  mvp.ray.ray_debug_bundle:
    dest: /private/jobs/selftest-20261121-120000-1a2b3c/debug
    stage: submit
    commands:
      - {name: ray_status, argv: [ray, status]}
    then:
      stage: placed
      after_file: /private/jobs/selftest-20261121-120000-1a2b3c/debug/placement.json
      timeout: 330
    detach: true
  register: bundle

- name: Bundle | Wait until both snapshots are written
  ansible.builtin.wait_for:
    path: "{{ bundle.record }}"
    timeout: 450
"""

RETURN = r"""
files:
  description: Paths written, in the order of I(commands).
  type: list
  elements: str
  returned: always
stamp:
  description: UTC time stamp shared by the files (C(%Y%m%dT%H%M%SZ)).
  type: str
  returned: always
rcs:
  description: Exit code per command name (null when it timed out or could not start).
  type: dict
  returned: always
record:
  description: File C(<dest>/<stamp>-<stage>-bundle.json) the detached process writes when it is done.
  type: str
  returned: when I(detach) is true
max_seconds:
  description: >-
    Upper bound, in seconds, of the detached work - every command at its I(timeout) in each
    snapshot plus the wait of I(then) - for whoever waits for I(record) (int).
  type: int
  returned: when I(detach) is true
then_files:
  description: Paths written by the second snapshot (I(then)); empty when its file never appeared.
  type: list
  elements: str
  returned: when I(then) is set
then_waited:
  description: Seconds waited for I(then.after_file) (float).
  type: float
  returned: when I(then) is set
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import (
    BUNDLE_OPTIONS, bundle_paths, stamp_now, start_detached, take)


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(BUNDLE_OPTIONS, detach=dict(type="bool", default=False)),
        supports_check_mode=True,
    )
    params = module.params
    stamp = stamp_now()
    if module.check_mode:
        module.exit_json(changed=True, files=bundle_paths(params["dest"], stamp, params["stage"], params["commands"]),
                         stamp=stamp, rcs={})
    if not os.path.isdir(params["dest"]):
        module.fail_json(msg="debug folder %s does not exist" % params["dest"])
    if params["detach"]:
        module.exit_json(changed=True, **start_detached(params, stamp))
    module.exit_json(**take(params, stamp))


if __name__ == "__main__":
    main()
