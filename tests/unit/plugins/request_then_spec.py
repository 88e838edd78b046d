"""A job spec built from a request as the submit_job role builds it: the ``ray_job_request`` action checks and
normalises the request once (``mvp_request.check_request``), then the ``mvp_job_spec`` filter builds the spec from
the checked request (``mvp_spec.mvp_job_spec`` takes it as given)."""
import mvp_jobspec

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import check_request


def mvp_job_spec(request, catalog, defaults):
    """The job spec of ``request`` (as given with -e or in a JobSpec), checked first as the action checks it.

    :raises JobSpecError: a refusal of the request's own rules (the action's).
    :raises AnsibleFilterError: a refusal of the builder's rules (the filter's).
    """
    return mvp_jobspec.mvp_job_spec(check_request(request, catalog, defaults), catalog, defaults)
