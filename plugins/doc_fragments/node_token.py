# -*- coding: utf-8 -*-
"""Doc fragment mvp.ray.node_token: the node's Ray auth token file, written by the call that starts Ray there."""

from __future__ import annotations


class ModuleDocFragment(object):
    """Options of the modules that start Ray on a node (ray_head, ray_worker): module_utils mvp_secret_file.NODE_TOKEN_ARGS."""

    DOCUMENTATION = r"""
options:
  auth_token:
    description:
      - The cluster's Ray auth token, written to I(auth_token_path) (0600, its folder 0777) before anything else
        this call does, unless the file already holds it - the ray_auth_token role's node task folded into the call
        that starts Ray (issue 52). Never returned or shown.
    type: str
    default: ""
  auth_token_path:
    description:
      - The node's token file every Ray process reads (C(RAY_AUTH_TOKEN_PATH), mvp_ray_auth_token_path); empty -
        token authentication is off and nothing is written. A path with an empty I(auth_token) fails, naming the fix.
    type: path
    default: ""
"""
