#!/usr/bin/python
# -*- coding: utf-8 -*-
"""Ansible module: write the Ray auth token file (0600) and its folder in one call, or generate one."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_auth_token_file
short_description: Write the Ray auth token file and its folder on a Ray node, in one call
description:
  - Makes the folder of I(path) (with parents) and gives it I(dir_mode), then writes I(token)
    to I(path) with mode C(0600) when the file is missing or holds something else (write to a
    temporary file, then rename), and sets C(0600) on a file that has another mode.
  - Replaces an C(ansible.builtin.file) task and an C(ansible.builtin.copy) task (a C(stat) and
    a C(copy) run) - one round trip to the node instead of three, which is what the Ansible
    controller pays per node at 64 nodes (docs/benchmarks.md, "8 to 64 nodes over SSH").
  - The token is never returned, logged or shown in a diff (I(token) is C(no_log)).
  - With I(generate=true) (the Ansible controller's copy, mvp_ray_auth_token_file), writes a new random token
    (Python C(secrets), 256 bits) when I(path) is missing and keeps the one there otherwise; a file that
    other users could read or write (any mode but C(0600)), is empty or is not a regular file is refused,
    naming it. The token is never returned either.
  - Supports check mode (reports whether it would change anything).
extends_documentation_fragment:
  - mvp.ray.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
    details:
      - The token is never shown; C(changed) says whether the file was (or would be) written.
options:
  path:
    description: The token file every node's Ray reads (C(RAY_AUTH_TOKEN_PATH), mvp_ray_auth_token_path).
    type: path
    required: true
  token:
    description:
      - The Ray auth token (mvp_ray_auth_token; keep it in Ansible Vault). Must not be empty.
      - Required unless I(generate=true), which takes none.
    type: str
  dir_mode:
    description: Octal mode of the token file's folder (C("0777") is what C(ray start) sets on its temp dir).
    type: str
    default: "0777"
  generate:
    description:
      - Keep the token already in I(path) (mode C(0600) only), or write a new random one there when it is missing.
    type: bool
    default: false
  authentication_mode_url:
    description:
      - Also ask a running Ray head, in the same call, whether it requires the token - Ray's public
        C(GET /api/authentication_mode) on its dashboard (for example C(http://127.0.0.1:8265/api/authentication_mode)
        on the head) - and return its answer as C(authentication_mode) (module_utils C(mvp_ray_rest.authentication_mode),
        as ray_cluster_info asks it for the cluster play's look).
      - Empty - nothing is asked.
    type: str
    default: ""
author: MVP project (@mvp)
"""

EXAMPLES = r"""
- name: Auth | Write the Ray auth token file (0600)
  mvp.ray.ray_auth_token_file:
    path: /tmp/ray/auth_token
    token: "{{ mvp_ray_auth_token }}"
  no_log: true

- name: Auth | Generate the token on the Ansible controller once (0600), or keep the one there
  mvp.ray.ray_auth_token_file:
    path: "{{ mvp_ray_auth_token_file }}"
    generate: true
    dir_mode: "0700"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
path:
  description: The token file.
  type: str
  returned: always
written:
  description: Whether the token was (or, in check mode, would be) written now.
  type: bool
  returned: always
authentication_mode:
  description: >-
    The running head's answer to I(authentication_mode_url) (C(token), C(disabled), ...); empty when nothing was
    asked, no Ray runs there (connection refused), or the head predates the endpoint (404).
  type: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import octal_mode
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_rest import HttpJson, authentication_mode
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_secret_file import generate_result, write_token


def asked(url):
    """The head's answer at ``url`` (the route itself, mvp_ray_rest.authentication_mode); '' when ``url`` is empty."""
    return authentication_mode(HttpJson(url), path="") if url else ""


def main():
    """Module entry point."""
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            token=dict(type="str", no_log=True),
            dir_mode=dict(type="str", default="0777"),
            generate=dict(type="bool", default=False),
            authentication_mode_url=dict(type="str", default=""),
        ),
        mutually_exclusive=[("token", "generate")],
        supports_check_mode=True,
    )
    params = module.params
    if params["generate"]:
        result = generate_result(params["path"], params["dir_mode"], module.check_mode)
        if result.get("failed"):
            module.fail_json(**{k: v for k, v in result.items() if k != "failed"})
        module.exit_json(authentication_mode=asked(params["authentication_mode_url"]), **result)
    if not params["token"]:
        module.fail_json(msg="token is empty: set mvp_ray_auth_token, or leave it empty to have site.yml generate "
                             "one (mvp_ray_auth_token_file)")
    try:
        dir_mode = octal_mode(params["dir_mode"])
    except ValueError as exc:
        module.fail_json(msg="dir_mode %s" % exc)
    try:
        changed, written = write_token(params["path"], params["token"], dir_mode, module.check_mode)
    except OSError as exc:
        module.fail_json(msg="cannot write the Ray auth token file %s (mvp_ray_auth_token_path): %s"
                             % (params["path"], exc.strerror or exc))
    module.exit_json(changed=changed, path=params["path"], written=written,
                     authentication_mode=asked(params["authentication_mode_url"]))


if __name__ == "__main__":
    main()
