# -*- coding: utf-8 -*-
"""Doc fragment mvp.ray.connection: how a module reaches a Ray cluster's dashboard."""

from __future__ import annotations


class ModuleDocFragment(object):
    """Options shared by the modules that call Ray's Jobs and State APIs (action group C(mvp.ray.ray))."""

    DOCUMENTATION = r"""
options:
  address:
    description:
      - Dashboard URL of the cluster, for example C(http://127.0.0.1:8265) - Ray's Jobs API
        and State API both live there; the modules speak them over HTTP (module_utils
        C(mvp_ray_rest), the methods of C(JobSubmissionClient) and C(ray.util.state) without importing Ray).
      - The project's roles pass C(mvp_ray_jobs_address), built from C(mvp_ray_dashboard_port).
    type: str
    required: true
  auth_token:
    description:
      - Ray auth token of a cluster started with C(RAY_AUTH_MODE=token) (Ray 2.52+). Sent as
        C(Authorization Bearer) with every request, as Ray's own clients send it.
      - Omitted, Ray's own lookup applies when the task's environment has C(RAY_AUTH_MODE=token)
        (C(RAY_AUTH_TOKEN), then the file C(RAY_AUTH_TOKEN_PATH), then C(~/.ray/auth_token)).
    type: str
requirements:
  - Python 3 standard library only; Ray itself runs behind the dashboard.
notes:
  - Runs where the dashboard is reachable, normally on the head.
"""
