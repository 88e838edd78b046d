"""A fake of Ray's dashboard: the Jobs REST API and the State API answered from a cluster a test describes.

``FakeRay.handle`` answers one request as Ray 2.60's routes do (``dashboard/modules/job/job_head.py``,
``dashboard/modules/state/state_head.py``): the module tests put it behind ``open_url`` of
module_utils mvp_ray_rest (tests/unit/plugins/modules/conftest.py, fixture ``fake_ray``), the tests
of mvp_ray_rest behind a real HTTP server (tests/unit/plugins/module_utils/cluster/test_mvp_ray_rest.py).
"""
import contextlib
import enum
import io
import json
import threading
import urllib.error
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JobStatus(str, enum.Enum):
    """Ray's ``ray.job_submission.JobStatus`` (a str enum: ``str()`` gives ``JobStatus.RUNNING``)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class Unanswered(object):
    """A request Ray answers with HTTP 500 and ``text`` (for example a driver log whose node is gone)."""

    def __init__(self, text):
        self.text = text


def _matches(row, filters):
    """Whether a State API row passes ``filters`` ([(key, "=", value)], values as the query string has them)."""
    return all(str(row.get(key)) == str(value) for key, op, value in filters or () if op == "=")


class FakeRay(object):
    """A Ray cluster as its dashboard's Jobs REST API and State API show it.

    :ivar nodes: node rows (dicts as ``GET /api/v0/nodes`` gives them).
    :ivar jobs: submission id -> JobDetails fields of the jobs Ray knows.
    :ivar placement_groups: placement group rows (``GET /api/v0/placement_groups``).
    :ivar actors: actor rows (``GET /api/v0/actors``).
    :ivar logs: submission id -> driver log text, or ``Unanswered(text)``: Ray answers 500 with it.
    :ivar calls: (method, argument) of every call that changes a job (submit_job with the request's
        JSON body, stop_job, delete_job with the id).
    :ivar clients: (path, Authorization header or None) of every request the modules sent.
    :ivar unreachable: an OSError: nothing answers (urllib raises URLError with it).
    :ivar state_error: str: the State API answers 500 ``{"result": false, "msg": <str>}``.
    :ivar info_error: str: ``GET /api/jobs/<id>`` answers 500 with that text.
    """

    Unanswered = Unanswered

    def __init__(self):
        self.nodes = []
        self.jobs = {}
        self.placement_groups = []
        self.actors = []
        self.logs = {}
        self.calls = []
        self.clients = []
        self.next_fields = {}
        self.after_stop = {}
        self.unreachable = None
        self.state_error = None
        self.info_error = None
        self.info_reads = 0

    # -- describing the cluster --

    def add_job(self, submission_id, status, **fields):
        """A job Ray knows, with ``status`` (a JobStatus name) and more JobDetails fields."""
        self.jobs[submission_id] = dict({"submission_id": submission_id, "job_id": None, "driver_node_id": None,
                                         "message": "", "entrypoint": "python -u job.py", "metadata": {},
                                         "start_time": None, "end_time": None, "driver_exit_code": None},
                                        **fields)
        self.jobs[submission_id]["status"] = JobStatus(status)

    def then(self, submission_id, *changes):
        """How the job moves on: each later ``get_job_info`` applies the next change (the last one stays).

        :param changes: dicts of JobDetails fields; a plain str is ``{"status": <str>}``.
        """
        self.next_fields[submission_id] = [self._change(change) for change in changes]

    def when_stopped(self, submission_id, *changes):
        """How the job moves on once ``stop_job`` is called (see :meth:`then`)."""
        self.after_stop[submission_id] = [self._change(change) for change in changes]

    @staticmethod
    def _change(change):
        change = {"status": change} if isinstance(change, str) else dict(change)
        if "status" in change:
            change["status"] = JobStatus(change["status"])
        return change

    def status_of(self, submission_id):
        return self.jobs[submission_id]["status"].value

    def called(self, method):
        return [arg for name, arg in self.calls if name == method]

    # -- Ray's dashboard: the Jobs REST API and the State API, as HTTP routes --

    def job_json(self, submission_id):
        """A job as ``GET /api/jobs/<id>`` returns it: JobDetails fields, the status a plain string."""
        return json.loads(json.dumps(dict(self.jobs[submission_id], type="SUBMISSION"), default=str))

    def handle(self, method, path, query, headers, body):
        """Answer one dashboard request as Ray 2.60 does (job_head.py, state_head.py routes).

        :param query: dict name -> list of values (``urllib.parse.parse_qs``).
        :param headers: dict of the request's headers. :param body: decoded JSON body or None.
        :returns: tuple (HTTP status, JSON-serialisable answer or a str body).
        """
        self.clients.append((path, headers.get("Authorization")))
        if path.startswith("/api/v0/"):
            if self.state_error is not None:  # Ray's answer for a State API failure: 500, JSON result false
                return 500, {"result": False, "msg": self.state_error, "data": {}}
            table = {"nodes": self.nodes, "actors": self.actors,
                     "placement_groups": self.placement_groups}[path[len("/api/v0/"):]]
            filters = list(zip(query.get("filter_keys", []), query.get("filter_predicates", []),
                               query.get("filter_values", [])))
            rows = [dict(row) for row in table if _matches(row, filters)]
            return 200, {"result": True, "msg": "", "data": {"result": {
                "total": len(rows), "num_after_truncation": len(rows), "num_filtered": len(rows), "result": rows}}}
        # Split, then decode each part, as aiohttp's match_info does (an id may hold a quoted "/").
        parts = [urllib.parse.unquote(part) for part in path[len("/api/jobs/"):].split("/") if part]
        if not parts:
            if method == "GET":
                return 200, [self.job_json(sid) for sid in self.jobs]
            self.calls.append(("submit_job", body))
            if body["submission_id"] in self.jobs:
                return 400, "ValueError: Job with submission_id %s already exists." % body["submission_id"]
            self.add_job(body["submission_id"], "PENDING", entrypoint=body["entrypoint"],
                         metadata=body.get("metadata") or {})
            return 200, {"job_id": None, "submission_id": body["submission_id"]}
        submission_id = parts[0]
        if method == "GET" and len(parts) == 1:
            self.info_reads += 1
            if self.info_error is not None:
                return 500, self.info_error
            if submission_id not in self.jobs:
                return 404, "Job %s does not exist" % submission_id
            queue = self.next_fields.get(submission_id)
            if queue:
                self.jobs[submission_id].update(queue.pop(0) if len(queue) > 1 else queue[0])
            return 200, self.job_json(submission_id)
        if method == "GET" and parts[1:] == ["logs"]:
            logs = self.logs.get(submission_id, "")
            return (500, logs.text) if isinstance(logs, Unanswered) else (200, {"logs": logs})
        if method == "POST" and parts[1:] == ["stop"]:
            self.calls.append(("stop_job", submission_id))
            if submission_id in self.after_stop:
                self.next_fields[submission_id] = list(self.after_stop[submission_id])
            return 200, {"stopped": True}
        if method == "DELETE":
            self.calls.append(("delete_job", submission_id))
            del self.jobs[submission_id]
            return 200, {"deleted": True}
        return 404, "no route %s %s" % (method, path)

    def open_url(self, url, data=None, headers=None, method=None, **_options):
        """Stand-in for ``ansible.module_utils.urls.open_url`` (what mvp_ray_rest calls): the request goes
        to :meth:`handle` in this process; an HTTP error status raises ``HTTPError`` as open_url does."""
        if self.unreachable is not None:
            raise urllib.error.URLError(self.unreachable)
        parts = urllib.parse.urlsplit(url)
        body = json.loads(data.decode("utf-8")) if data else None
        status, answer = self.handle(method or ("POST" if data else "GET"), parts.path,
                                     urllib.parse.parse_qs(parts.query), dict(headers or {}), body)
        text = answer if isinstance(answer, str) else json.dumps(answer)
        if status >= 400:
            raise urllib.error.HTTPError(url, status, "error", {}, io.BytesIO(text.encode("utf-8")))
        return io.BytesIO(text.encode("utf-8"))


def node(node_id, ip, head=False, state="ALIVE", **resources):
    """A node row of ``list_nodes``: its schedulable resources plus Ray's own ``node:<ip>`` and memory entries."""
    total = dict(resources, memory=8e9, object_store_memory=2e9)
    total["node:%s" % ip] = 1.0
    return {"node_id": node_id, "node_ip": ip, "node_name": ip, "is_head_node": head, "state": state,
            "resources_total": total}


@contextlib.contextmanager
def served(fake):
    """``fake`` answering HTTP on a free port of 127.0.0.1 in a thread; yields its address (str).

    ``fake.handle(method, path, query, headers, body)`` returns (status, payload); ``body`` is the decoded
    JSON, or the raw bytes of a request sent as another content type (an artifact upload).
    """

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else b""
            body = (json.loads(data) if "json" in (self.headers.get("Content-Type") or "json") else data) if length else None
            status, payload = fake.handle(self.command, url.path, urllib.parse.parse_qs(url.query),
                                          dict(self.headers.items()), body)
            text = (payload if isinstance(payload, str) else json.dumps(payload)).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Length", str(len(text)))
            self.end_headers()
            self.wfile.write(text)

        do_GET = do_POST = do_PUT = do_DELETE = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield "http://127.0.0.1:%d" % server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
