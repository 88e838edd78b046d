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
        (C(JobSubmissionClient)) and State API (C(ray.util.state)) both live there.
      - The project's roles pass C(mvp_ray_jobs_address), built from C(mvp_ray_dashboard_port).
    type: str
    required: true
  auth_token:
    description:
      - Ray auth token of a cluster started with C(RAY_AUTH_MODE=token) (Ray 2.52+). Sent as
        C(Authorization Bearer) to the Jobs API and put in C(RAY_AUTH_TOKEN) of the module's
        own process for the State API.
      - Omitted, Ray's own lookup applies (C(RAY_AUTH_TOKEN) of the task's environment, then
        Ray's token file).
    type: str
requirements:
  - C(ray[default]) in the Python that runs the module (normally the head's).
notes:
  - Runs where the dashboard is reachable, normally on the head.
"""
