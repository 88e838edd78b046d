# -*- coding: utf-8 -*-
"""Ray's Jobs and State APIs over HTTP, without importing Ray (the project's modules on the head).

``import ray`` costs about 0.85 s of CPU per module call on a 2-core node (issue 27: the submit
path paid it twice). The dashboard serves both APIs as JSON over HTTP; these two clients speak
them with the standard library and offer the methods the modules used from Ray's Python clients,
with the same names and arguments, so the rest of module_utils.cluster.mvp_ray is unchanged:

* ``JobsClient``: ``ray.job_submission.JobSubmissionClient``'s ``get_job_info``, ``list_jobs``,
  ``submit_job``, ``stop_job``, ``delete_job``, ``get_job_logs``. Ray's documented Jobs REST API
  (docs.ray.io, "Ray Jobs REST API"; routes in Ray 2.60 ``dashboard/modules/job/job_head.py``):
  ``GET/POST /api/jobs/``, ``GET/DELETE /api/jobs/<id>``, ``POST /api/jobs/<id>/stop``,
  ``GET /api/jobs/<id>/logs``. Jobs come back as dicts with Ray's JobDetails fields, the status
  a plain string (``"RUNNING"``), times in milliseconds since the epoch.
* ``StateClient``: ``ray.util.state``'s ``list_nodes``, ``list_actors``, ``list_placement_groups``
  (``GET /api/v0/<resource>`` with ``limit``, ``timeout``, ``detail`` and filters as
  ``filter_keys``/``filter_predicates``/``filter_values``, which is how Ray's own
  ``StateApiClient._make_param`` sends them; Ray 2.60 ``dashboard/modules/state/state_head.py``).
  Rows come back as dicts with the fields of Ray's NodeState, ActorState, PlacementGroupState.

What Ray's Python client does beyond the HTTP call and these clients do not: uploading a local
``working_dir``/``py_modules`` (the job spec refuses those keys, module_utils.request.mvp_request) and a
version check for ``entrypoint_resources`` (every node runs the same Ray, checked by the preflight).
Token authentication (``RAY_AUTH_MODE=token``) is the same header Ray's clients send,
``Authorization: Bearer <token>`` (module_utils.cluster.mvp_ray.auth_headers). Requests go through
Ansible's own ``ansible.module_utils.urls.open_url`` (urllib underneath), without proxies: the
dashboard is the cluster's own (normally ``127.0.0.1`` on the head).
"""

from __future__ import annotations

import json
import socket
from urllib.error import HTTPError, URLError
from urllib.parse import quote, urlencode

from ansible.module_utils.urls import open_url

DEFAULT_TIMEOUT = 30
"""Seconds an HTTP call may take when the caller names no timeout."""

STATE_LIMIT = 10000
"""Rows a State API list asks for (Ray's RAY_MAX_LIMIT_FROM_API_SERVER default)."""


class RayUnreachable(ConnectionError):
    """The dashboard at the address did not answer (refused, timed out, name not resolved)."""


class RayHttpError(RuntimeError):
    """The dashboard answered with an HTTP error; ``status`` holds the code.

    The message starts as Ray's own clients word it ("Request failed with status code 404: ..."),
    so callers that look for "does not exist" or "404" keep working.
    """

    def __init__(self, status, body, url):
        self.status = status
        self.body = body
        self.url = url
        hint = ""
        if status == 401:
            hint = (" The cluster requires the Ray auth token and the request carried none: run the task with "
                    "environment mvp_ray_auth_env (RAY_AUTH_MODE=token and the node's token file, which site.yml "
                    "writes) or pass auth_token.")
        elif status == 403:
            hint = (" The Ray auth token was refused: it differs from the cluster's (mvp_ray_auth_token, or the "
                    "generated one in mvp_ray_auth_token_file); site.yml writes it on every node and restarts Ray.")
        RuntimeError.__init__(self, "Request failed with status code %s: %s.%s" % (status, body.strip(), hint))


class HttpJson(object):
    """One HTTP address and its headers; every call is one request, JSON in and out.

    The base of the Ray clients here and of MLflow's (module_utils.tracking.mvp_mlflow), which override
    :meth:`error` and :meth:`unreachable` to raise their own exceptions.

    :param address: str, the server's URL (``http://127.0.0.1:8265``); a trailing slash is dropped.
    :param headers: dict of extra request headers (the auth header), or None.
    :param timeout: float, seconds per request when a call names none.
    """

    def __init__(self, address, headers=None, timeout=DEFAULT_TIMEOUT):
        self.address = (address or "").rstrip("/")
        self.headers = dict(headers or {})
        self.timeout = timeout

    def error(self, status, body, url):
        """Return the exception for an HTTP status of 400 or more (here RayHttpError)."""
        return RayHttpError(status, body, url)

    def unreachable(self, exc):
        """Return the exception for no answer at the address (here RayUnreachable)."""
        return RayUnreachable("Failed to connect to Ray at address: %s (%s)" % (self.address, exc))

    def call(self, method, path, params=None, body=None, timeout=None, raw=None):
        """Send one request and return the decoded JSON answer (None for an empty body).

        :param method: str, ``GET``, ``POST``, ``PUT`` or ``DELETE``.
        :param path: str, the route (``/api/jobs/``); ``params`` become its query string
            (lists repeat the key).
        :param body: JSON-serialisable object sent as ``application/json``, or None.
        :param timeout: float seconds, or None for the client's default.
        :param raw: bytes sent as ``application/octet-stream`` instead of ``body``, or None.
        :raises RayUnreachable: no answer from the address (a subclass's :meth:`unreachable`).
        :raises RayHttpError: an HTTP status of 400 or more, its body in the message (:meth:`error`).
        :raises ValueError: an answer that is not JSON.
        """
        url = self.address + path
        if params:
            url += "?" + urlencode(params, doseq=True)
        headers = dict(self.headers)
        data = None
        if raw is not None:
            data = raw
            headers["Content-Type"] = "application/octet-stream"
        elif body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        try:
            response = open_url(url, data=data, headers=headers, method=method, use_proxy=False,
                                timeout=timeout or self.timeout, follow_redirects="none")
            text = response.read().decode("utf-8")
        except HTTPError as exc:
            raise self.error(exc.code, exc.read().decode("utf-8", "replace"), url)
        except (URLError, socket.timeout, OSError) as exc:
            raise self.unreachable(exc)
        return json.loads(text) if text.strip() else None


def authentication_mode(client, path="/api/authentication_mode"):
    """A Ray head's answer to its public ``GET /api/authentication_mode`` (str: ``token``, ``disabled``, ...).

    :param client: HttpJson (or a subclass) of the head's dashboard. :param path: str, the route below its address
        ('' when the address is the route itself).
    :returns: str, '' when nothing answers, the head predates the route (404) or the answer is not JSON with that key.
    """
    try:
        answer = client.call("GET", path, timeout=10)
    except Exception:  # unreachable, an HTTP error, not JSON: no answer
        return ""
    return str(answer.get("authentication_mode") or "") if isinstance(answer, dict) else ""


class JobsClient(HttpJson):
    """Ray's Jobs API over HTTP: the methods of ``JobSubmissionClient`` the modules use.

    :param address: str, the dashboard URL. :param headers: dict or None (auth header).
    """

    def get_job_info(self, submission_id):
        """Return the job as a dict of Ray's JobDetails fields (status a plain str).

        :raises RayHttpError: status 404 "Job <id> does not exist" for an unknown id.
        """
        return self.call("GET", "/api/jobs/%s" % quote(submission_id, safe=""))

    def list_jobs(self):
        """Return every job Ray knows (submitted ones and drivers started otherwise), as dicts."""
        return self.call("GET", "/api/jobs/")

    def submit_job(self, entrypoint, submission_id=None, runtime_env=None, metadata=None,
                   entrypoint_num_cpus=None, entrypoint_num_gpus=None, entrypoint_memory=None,
                   entrypoint_resources=None):
        """Submit a job (Ray's JobSubmitRequest; keys left None are not sent) and return its submission id.

        :raises RayHttpError: status 400 for a request Ray refuses, for example a submission id
            it already has ("Job with submission_id ... already exists").
        """
        request = {"entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env or {},
                   "metadata": metadata or {}, "entrypoint_num_cpus": entrypoint_num_cpus,
                   "entrypoint_num_gpus": entrypoint_num_gpus, "entrypoint_memory": entrypoint_memory,
                   "entrypoint_resources": entrypoint_resources}
        answer = self.call("POST", "/api/jobs/", body={k: v for k, v in request.items() if v is not None})
        return (answer or {}).get("submission_id") or submission_id

    def stop_job(self, submission_id):
        """Ask Ray to stop the job; return True when it was running (Ray's ``stopped``)."""
        return bool((self.call("POST", "/api/jobs/%s/stop" % quote(submission_id, safe="")) or {}).get("stopped"))

    def delete_job(self, submission_id):
        """Delete a job that ended, with its logs, from Ray's job table; return Ray's ``deleted``."""
        return bool((self.call("DELETE", "/api/jobs/%s" % quote(submission_id, safe="")) or {}).get("deleted"))

    def get_job_logs(self, submission_id):
        """Return the driver's log as Ray keeps it (str)."""
        return (self.call("GET", "/api/jobs/%s/logs" % quote(submission_id, safe="")) or {}).get("logs", "")


class StateClient(HttpJson):
    """Ray's State API over HTTP: ``ray.util.state``'s list functions the modules use.

    Each takes the keyword arguments of its ``ray.util.state`` namesake; ``address`` (when given)
    must be the client's own, ``raise_on_missing_output`` is accepted and ignored (the modules pass False).
    """

    def _list(self, resource, filters=None, limit=STATE_LIMIT, timeout=DEFAULT_TIMEOUT, detail=False):
        """Return the rows of one State API list as dicts.

        :param resource: str, ``nodes``, ``actors`` or ``placement_groups``.
        :param filters: list of (key, predicate, value) tuples, predicate ``=`` or ``!=``.
        :param limit: int rows. :param timeout: int seconds, the server-side timeout too.
        :param detail: bool, Ray's detailed rows (why and when a node died, actor death causes).
        :raises RuntimeError: Ray's answer says the list failed (``result`` false, status 500), with its
            message; RayHttpError for any other HTTP error; RayUnreachable when nothing answers.
        """
        filters = list(filters or [])
        params = {"limit": int(limit or STATE_LIMIT), "timeout": int(timeout or DEFAULT_TIMEOUT),
                  "detail": "true" if detail else "false"}
        if filters:
            params.update(filter_keys=[f[0] for f in filters], filter_predicates=[f[1] for f in filters],
                          filter_values=[str(f[2]) for f in filters])
        try:
            answer = self.call("GET", "/api/v0/%s" % resource, params=params,
                               timeout=int(timeout or DEFAULT_TIMEOUT) + 5)
        except RayHttpError as exc:  # Ray answers a failed list with 500 and its JSON reply
            try:
                answer = json.loads(exc.body)
            except ValueError:
                raise exc
            if not isinstance(answer, dict):
                raise exc
        if not answer or answer.get("result") is False:
            raise RuntimeError("Ray's State API could not list %s at %s: %s"
                               % (resource, self.address, (answer or {}).get("msg") or "empty answer"))
        return list(((answer.get("data") or {}).get("result") or {}).get("result") or [])

    def _checked(self, address):
        """Refuse an address other than the client's own (a caller mixing clusters)."""
        if address and address.rstrip("/") != self.address:
            raise ValueError("This State API client talks to %s, not %s" % (self.address, address))

    def list_nodes(self, address=None, filters=None, limit=STATE_LIMIT, timeout=DEFAULT_TIMEOUT, detail=False,
                   raise_on_missing_output=False):
        """Rows of Ray's node table (NodeState fields: node_id, node_ip, is_head_node, state, ...)."""
        self._checked(address)
        return self._list("nodes", filters, limit, timeout, detail)

    def list_actors(self, address=None, filters=None, limit=STATE_LIMIT, timeout=DEFAULT_TIMEOUT, detail=False,
                    raise_on_missing_output=False):
        """Rows of Ray's actor table (ActorState fields: actor_id, class_name, state, pid, node_id, ...)."""
        self._checked(address)
        return self._list("actors", filters, limit, timeout, detail)

    def list_placement_groups(self, address=None, filters=None, limit=STATE_LIMIT, timeout=DEFAULT_TIMEOUT,
                              detail=False, raise_on_missing_output=False):
        """Rows of Ray's placement group table (PlacementGroupState fields: state, bundles, stats, ...)."""
        self._checked(address)
        return self._list("placement_groups", filters, limit, timeout, detail)
