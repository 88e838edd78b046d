# -*- coding: utf-8 -*-
"""Webhooks that tell people what happened to a run, delivered at least once (issue 64).

The job controller (``lifecycle/mvp_controller``) decides; this module turns a decision into an *event*, writes one
file per (event, endpoint) into the *outbox* on the shared storage before anything is sent, and a *sender* thread
delivers the outbox: off the controller's pass, a few workers at a time, retried with a backoff for at least a day.
A controller killed between the write and the send finds the file when it starts again and sends it then, so a
receiver may see an event twice, always with the same ``event_id`` (at least once, never lost while the shared
storage keeps the file).

* Endpoints (:func:`check_endpoints`): ``{"url", "format": "json"|"slack", "events": [...], "secret", "checkpoint_every",
  "name"}``; the inventory's ``job_controller_webhooks`` (a secret from Vault allowed) and a request's ``notify``
  (no secret).
* Events (:data:`EVENTS`) and their payload (:func:`build_event`, :func:`body_of`): the project's ``json`` payload, or
  ``{"text": ...}`` for Slack, Mattermost and other incoming webhooks (``slack``).
* Signature (:func:`sign`, :func:`verify_signature`): Determined AI's webhook scheme (its docs, "Signed Payload":
  ``docs/integrations/notification`` of determined-ai/determined) under this project's header names: the header
  :data:`TIMESTAMP_HEADER` holds the send time (whole seconds since the epoch), :data:`SIGNATURE_HEADER` the hex
  HMAC-SHA256, keyed by the secret, of ``"<timestamp>,<body>"`` where the body is the request's body as sent
  (compact JSON, ``separators=(",", ":")``, ASCII).
* Outbox (:class:`Outbox`): ``<shared>/controller/outbox/<event_id>-<endpoint key>.json``; delivered ones in
  ``outbox/done/`` (pruned after :data:`DONE_KEEP_S`).
* Sender (:class:`Sender`): HTTP through the standard library (``urllib.request``), :data:`TIMEOUT_S` per try.
"""

from __future__ import annotations

import concurrent.futures
import email.utils
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import read_json, write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import job_file
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import latest_checkpoint, read_metrics

EVENTS = ("run_ended", "attempt_continued", "run_preempted", "run_stopped", "queue_waiting", "checkpoint")
"""The events an endpoint may ask for: a run ended (trained, failed, stopped); an attempt failed and is continued
(its cause, restart n of m); a run preempted and continued; a run stopped by the controller (stalled, PENDING too
long, infeasible); an attempt waiting in the queue longer than ``notify_queue_wait_s``; the first complete
checkpoint after each ``checkpoint_every`` steps (only for an endpoint that sets it)."""

DEFAULT_EVENTS = tuple(e for e in EVENTS if e != "checkpoint")
"""An endpoint's events when it names none: every event but ``checkpoint``."""

FORMATS = ("json", "slack")
"""``json``: the project's payload (:func:`build_event`); ``slack``: ``{"text": ...}``, one message."""

ENDPOINT_KEYS = frozenset(["url", "format", "events", "secret", "checkpoint_every", "name"])

SIGNATURE_HEADER = "X-MVP-Signature"
"""Hex HMAC-SHA256 of ``"<timestamp>,<body>"`` keyed by the endpoint's secret (Determined's
``X-Determined-AI-Signature``)."""

TIMESTAMP_HEADER = "X-MVP-Signature-Timestamp"
"""The send time, whole seconds since the epoch (Determined's ``X-Determined-AI-Signature-Timestamp``)."""

EVENT_ID_HEADER = "X-MVP-Event-Id"
"""The event's ``event_id`` (also in the body), for a receiver that de-duplicates before it parses."""

TIMEOUT_S = 10.0
"""Seconds one try may take (connect and answer) before it counts as failed and is retried."""

FIRST_BACKOFF_S = 5.0
"""Seconds before the second try; doubled after each failed try, at most :data:`MAX_BACKOFF_S`."""

MAX_BACKOFF_S = 3600.0
"""The longest pause (seconds) between two tries of one delivery."""

RETRY_FOR_S = 86400.0
"""Seconds a delivery is retried from its event's decision before it is given up (state ``expired``)."""

DONE_KEEP_S = 7 * 86400.0
"""Seconds a delivered entry stays in ``outbox/done/`` before it is pruned."""

WORKERS = 4
"""Deliveries in flight at once (threads of the sender's pool)."""

PER_ENDPOINT = 2
"""Deliveries in flight at once to one endpoint URL: a receiver that hangs holds at most this many workers."""

MAX_EVIDENCE_LINES = 10
MAX_LINE_CHARS = 300
MAX_METRICS = 8
"""Bounds of a payload: the evidence's last lines (each cut to MAX_LINE_CHARS characters) and the final metrics."""

STATES = ("pending", "delivered", "refused", "expired")

FAULT_FILE = "faults/kill-after-outbox-write"
"""Under ``<shared>/controller``: when it exists the controller removes it and SIGKILLs itself right after the next
outbox entry is written, before it is sent (the reliability test ``tests/reliability/notify.py`` sets it)."""

_SECRET_WORDS = r"(?:[A-Za-z0-9]*_)?(?:token|secret|password|passwd|api_?key|credentials?)"
_REDACTIONS = (
    # NAME=value, NAME: value, "name": "value" where the name is secret-like (as mvp_hydra.SECRET_KEY_RE names them)
    (re.compile(r"(?i)(\b%s\b[\"']?\s*[=:]\s*[\"']?)([^\s\"',;}]+)" % _SECRET_WORDS), r"\1<redacted>"),
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), r"\1 <redacted>"),
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), r"\1<redacted>@"),  # user:password@ in a URL
    (re.compile(r"\b(hf_|ghp_|gho_|github_pat_|sk-|xox[abp]-)[A-Za-z0-9_-]{8,}"), r"\1<redacted>"),
)


class NotifyError(ValueError):
    """An endpoint's setting is refused: ``field`` (str, e.g. ``notify[0].url``), ``problem`` and ``fix`` (str)."""

    def __init__(self, field, problem, fix):
        ValueError.__init__(self, "%s: %s. Fix: %s" % (field, problem, fix))
        self.field, self.problem, self.fix = field, problem, fix


# -- endpoints --------------------------------------------------------------------------------------------------

def check_endpoints(value, field, allow_secret=True):
    """Check and normalise a list of endpoints (the inventory's ``job_controller_webhooks``, a request's ``notify``).

    :param value: None or [] (none), a str (one URL: format ``json``, the default events), or a list of str or
        mappings with the keys of :data:`ENDPOINT_KEYS`: ``url`` (http or https, with a host: the controller's own
        host, 127.0.0.1, is allowed), ``format`` (:data:`FORMATS`, default ``json``), ``events`` (a list of
        :data:`EVENTS`, default :data:`DEFAULT_EVENTS`), ``secret`` (str, the signing key), ``checkpoint_every``
        (int > 0 steps; needed by the event ``checkpoint``), ``name`` (str, shown in status.yml).
    :param field: str, the setting's name for messages (``notify``, ``job_controller_webhooks``).
    :param allow_secret: bool, False refuses ``secret`` (a request's endpoints: its files are readable by the team).
    :returns: list of dict with every key but ``secret`` (kept only when given) filled in.
    :raises NotifyError: naming the field (``notify[0].url``) and the fix.
    """
    if value is None or value == "" or value == []:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise NotifyError(field, "is a %s, not a URL or a list of endpoints" % type(value).__name__,
                          "give a URL (http://host:port/path) or a list of {url, format, events}")
    out = []
    for index, item in enumerate(items):
        where = "%s[%d]" % (field, index)
        item = {"url": item} if isinstance(item, str) else item
        if not isinstance(item, dict):
            raise NotifyError(where, "is a %s, not a URL or a mapping" % type(item).__name__,
                              "give a URL or {url, format, events}")
        unknown = sorted(set(map(str, item)) - ENDPOINT_KEYS)
        if unknown:
            raise NotifyError("%s.%s" % (where, unknown[0]), "unknown key",
                              "use only %s" % ", ".join(sorted(ENDPOINT_KEYS)))
        url = item.get("url")
        parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise NotifyError(where + ".url", "%r is not an http(s) URL" % (url,),
                              "give http://host[:port]/path or https://host/path")
        fmt = item.get("format") or "json"
        if fmt not in FORMATS:
            raise NotifyError(where + ".format", "%r is not a format" % (fmt,), "use one of %s" % ", ".join(FORMATS))
        events = item.get("events")
        events = list(DEFAULT_EVENTS) if events is None else events
        if isinstance(events, str) or not isinstance(events, (list, tuple)) or not events:
            raise NotifyError(where + ".events", "%r is not a list of events" % (events,),
                              "give a list among %s (or leave it out: all but checkpoint)" % ", ".join(EVENTS))
        bad = [e for e in events if e not in EVENTS]
        if bad:
            raise NotifyError(where + ".events", "%r is not an event" % (bad[0],), "use among %s" % ", ".join(EVENTS))
        every = item.get("checkpoint_every")
        if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every <= 0):
            raise NotifyError(where + ".checkpoint_every", "%r is not a whole number > 0" % (every,),
                              "give the steps between two checkpoint events, e.g. 100")
        if "checkpoint" in events and not every:
            raise NotifyError(where + ".checkpoint_every", "is needed by the event checkpoint",
                              "give the steps between two checkpoint events, e.g. 100, or drop checkpoint")
        if every and "checkpoint" not in events:
            events = list(events) + ["checkpoint"]
        endpoint = {"url": url, "format": fmt, "events": list(dict.fromkeys(events)), "checkpoint_every": every,
                    "name": str(item.get("name") or "")}
        if item.get("secret") not in (None, ""):
            if not allow_secret:
                raise NotifyError(where + ".secret", "a request's endpoint cannot carry a secret",
                                  "put it in job_controller_webhooks (Vault)")
            if not isinstance(item["secret"], str):
                raise NotifyError(where + ".secret", "is not a text", "give the signing key as a text (Vault)")
            endpoint["secret"] = item["secret"]
        out.append(endpoint)
    return out


def public_url(url):
    """``url`` without its user info, query and fragment (str): what a log line or status.yml may show."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = "[%s]" % host
        netloc = host + (":%d" % parts.port if parts.port else "")
        return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<an invalid URL>"


def endpoint_key(endpoint):
    """A short stable key of an endpoint (str, 12 hex): its source, index and URL."""
    text = "%s|%s|%s" % (endpoint.get("source", ""), endpoint.get("index", ""), endpoint.get("url", ""))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def wants(endpoint, kind):
    """Whether ``endpoint`` (a :func:`check_endpoints` item) asks for the event ``kind`` (bool)."""
    return kind in (endpoint.get("events") or DEFAULT_EVENTS)


# -- events -----------------------------------------------------------------------------------------------------

def event_id(run, attempt, kind, key):
    """The stable id of an event (str, 32 hex): the same decision taken again (a controller started again) gives the
    same id. :param key: str, what tells two events of one kind and attempt apart (the next attempt, a step)."""
    text = json.dumps([run, attempt, kind, str(key)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def redact_text(text, secrets=()):
    """``text`` with secret values replaced by ``<redacted>`` (str).

    Replaced: each of ``secrets`` (the controller's own: its Ray token, its environment's values, the webhooks'
    keys) wherever it appears; a value after a secret-like name (``HF_TOKEN=...``, ``"api_key": "..."``: the words
    of ``mvp_hydra.SECRET_KEY_RE``); ``Bearer``/``Basic`` credentials; a URL's ``user:password@``; tokens of known
    shapes (``hf_``, ``ghp_``, ``sk-``, ``xoxb-``).
    """
    text = str(text)
    for secret in sorted({s for s in secrets if isinstance(s, str) and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, "<redacted>")
    for pattern, replacement in _REDACTIONS:
        text = pattern.sub(replacement, text)
    return text


def _line(text, secrets):
    text = redact_text(" ".join(str(text).split()), secrets)
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS - 3] + "..."


def evidence_lines(evidence, secrets=()):
    """The last :data:`MAX_EVIDENCE_LINES` lines of a verdict's ``evidence`` (list of {file, line, text} or
    {source, text}, ``mvp_verdict``) as ``file:line: text``, each redacted and cut to :data:`MAX_LINE_CHARS`."""
    lines = []
    for item in evidence or []:
        if isinstance(item, dict):
            where = item.get("file") or item.get("source") or ""
            if item.get("line") is not None:
                where = "%s:%s" % (where, item["line"])
            lines.append(("%s: %s" % (where, item.get("text", ""))) if where else str(item.get("text", "")))
        else:
            lines.append(str(item))
    return [_line(text, secrets) for text in lines[-MAX_EVIDENCE_LINES:]]


def final_metrics(metrics_file, keys=()):
    """The last value of each key metric in verl's ``logs/metrics.jsonl`` (dict name -> float, at most
    :data:`MAX_METRICS`): ``keys`` in their order (the workload's catalog ``metrics``), or without keys the first
    names (sorted) of the metrics logged."""
    read = read_metrics(metrics_file, list(keys) or None)
    names = [k for k in keys if k in read["series"]] if keys else sorted(read["series"])
    return {name: read["series"][name][-1][1] for name in names[:MAX_METRICS]}


def _stamp(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def build_event(kind, run, attempt, attempt_dir, key, now, detail=None, verdict=None, spec=None, job_dir=None,
                key_metrics=(), secrets=(), node_path=None, summary=None, cause=None):
    """The project's ``json`` payload of one event (dict), read from the attempt's job directory.

    :param kind: str, one of :data:`EVENTS`. :param run: str, the run's first attempt's id. :param attempt: str, the
        attempt the event is about. :param attempt_dir: str, its job directory on this host.
    :param key: str, what tells this event from another of the same kind and attempt (:func:`event_id`).
    :param now: float seconds since the epoch, the decision's time (``at``).
    :param detail: dict, the event's own facts (``restart``/``of``/``next`` of a continued attempt, ``waited_s`` of a
        queue wait, ``step`` of a checkpoint, ``why``).
    :param verdict: dict or None, the attempt's ``logs/status.json`` (read when None): ``verdict``, ``cause``,
        ``summary``, ``steps`` ({last, planned}), ``evidence``. :param spec: dict or None, ``config/job_spec.json``
        (read when None): ``workload``, ``owner`` (or ``request.owner``).
    :param job_dir: str, the job directory as the nodes see it (``/private/jobs/<id>``; default ``attempt_dir``).
    :param key_metrics: list of str, the workload's key metrics (the catalog's ``metrics``).
    :param secrets: iterable of str, values never to send (:func:`redact_text`).
    :param node_path: callable(host path) -> the nodes' path (the checkpoint's path), or None (kept as is).
    :param summary, cause: str or None, instead of the verdict's (a stop decided by the controller).
    :returns: dict ``event, event_id, at, at_s, run, attempt, workload, owner, verdict, cause, summary, steps {trained,
        planned}, metrics {name: value}, checkpoint, job_dir, mlflow_run, evidence [str], detail``.
    """
    if verdict is None:
        verdict = read_json(job_file(attempt_dir, "status"))
    if spec is None:
        spec = read_json(job_file(attempt_dir, "job_spec"))
    request = spec.get("request") if isinstance(spec.get("request"), dict) else {}
    steps = verdict.get("steps") if isinstance(verdict.get("steps"), dict) else {}
    metrics_file = job_file(attempt_dir, "metrics")
    trained = steps.get("last")
    if trained is None and os.path.exists(metrics_file):
        trained = read_metrics(metrics_file, [])["last_step"] or None
    newest = latest_checkpoint(job_file(attempt_dir, "checkpoints")) or {}
    checkpoint = newest.get("path") if newest.get("step") is not None else None
    if checkpoint and node_path:
        checkpoint = node_path(checkpoint)
    mlflow = read_json(job_file(attempt_dir, "mlflow_run"))

    def clean(text):
        return None if text is None else _line(text, secrets)
    return {
        "event": kind, "event_id": event_id(run, attempt, kind, key), "at": _stamp(now), "at_s": round(now, 3),
        "run": run, "attempt": attempt, "workload": spec.get("workload"),
        "owner": spec.get("owner") or request.get("owner") or None,
        "verdict": verdict.get("verdict"), "cause": cause if cause is not None else verdict.get("cause"),
        "summary": clean(summary if summary is not None else verdict.get("summary")),
        "steps": {"trained": trained, "planned": steps.get("planned")},
        "metrics": final_metrics(metrics_file, key_metrics),
        "checkpoint": checkpoint, "job_dir": job_dir or attempt_dir,
        "mlflow_run": mlflow.get("ui_url") or mlflow.get("tracking_uri") or None,
        "evidence": evidence_lines(verdict.get("evidence"), secrets),
        "detail": {k: (clean(v) if isinstance(v, str) else v) for k, v in (detail or {}).items()},
    }


HEADLINES = {
    "run_ended": "run {run} ended: {verdict} ({cause})",
    "attempt_continued": "run {run}: attempt {attempt} failed ({cause}), continued",
    "run_preempted": "run {run}: attempt {attempt} preempted, continued",
    "run_stopped": "run {run}: attempt {attempt} stopped by the job controller ({cause})",
    "queue_waiting": "run {run}: attempt {attempt} waits in the queue",
    "checkpoint": "run {run}: a complete checkpoint at step {step}",
}


def slack_text(event):
    """The one-message summary of an event for a chat tool's incoming webhook (str, Slack's mrkdwn)."""
    detail = event.get("detail") or {}
    fields = dict(event, step=detail.get("step"), verdict=event.get("verdict") or "-", cause=event.get("cause") or "-")
    lines = ["*[mvp] %s*" % HEADLINES.get(event.get("event"), "run {run}: {event}").format(**fields)]
    if event.get("summary"):
        lines.append(event["summary"])
    if detail.get("why"):
        lines.append(detail["why"])
    steps = event.get("steps") or {}
    facts = ["workload %s" % event.get("workload")]
    if steps.get("trained") is not None:
        facts.append("steps %s/%s" % (steps["trained"], steps.get("planned") if steps.get("planned") else "?"))
    facts += ["%s %.4g" % item for item in sorted((event.get("metrics") or {}).items())[:4]]
    if event.get("owner"):
        facts.append("owner %s" % event["owner"])
    lines.append(", ".join(facts))
    lines.append("job dir `%s`" % event.get("job_dir"))
    if event.get("checkpoint"):
        lines.append("checkpoint `%s`" % event["checkpoint"])
    if event.get("mlflow_run"):
        lines.append("MLflow %s" % event["mlflow_run"])
    if event.get("evidence") and event.get("event") != "checkpoint":
        lines.append("```%s```" % "\n".join(event["evidence"][-3:]))
    return "\n".join(lines)


def body_of(event, fmt):
    """The request body of ``event`` in the endpoint's format (bytes): compact JSON (Determined's receiver example
    re-serialises the body that way before it checks the signature)."""
    value = {"text": slack_text(event)} if fmt == "slack" else event
    return json.dumps(value, separators=(",", ":"), sort_keys=False).encode("utf-8")


# -- the signature ----------------------------------------------------------------------------------------------

def sign(secret, timestamp, body):
    """The signature headers of one request (dict): Determined's scheme, hex HMAC-SHA256 of ``"<timestamp>,<body>"``.

    :param secret: str, the endpoint's key. :param timestamp: int seconds since the epoch. :param body: bytes.
    """
    mac = hmac.new(secret.encode("utf-8"), b"%d," % int(timestamp) + body, hashlib.sha256).hexdigest()
    return {TIMESTAMP_HEADER: str(int(timestamp)), SIGNATURE_HEADER: mac}


def verify_signature(secret, headers, body, max_age_s=300, now=None):
    """A receiver's check of a delivery (bool): the signature matches the body and the timestamp is at most
    ``max_age_s`` seconds old (or ahead: a replay or a wrong clock is refused).

    :param secret: str, the endpoint's key. :param headers: mapping header name -> value (any case).
    :param body: bytes, the request's body exactly as received. :param max_age_s: float seconds.
    :param now: float seconds since the epoch (default ``time.time()``).
    """
    lower = {str(k).lower(): v for k, v in dict(headers).items()}
    try:
        stamp = int(lower.get(TIMESTAMP_HEADER.lower(), ""))
    except ValueError:
        return False
    given = str(lower.get(SIGNATURE_HEADER.lower(), ""))
    if abs((time.time() if now is None else now) - stamp) > max_age_s:
        return False
    return hmac.compare_digest(sign(secret, stamp, body)[SIGNATURE_HEADER], given)


# -- the outbox -------------------------------------------------------------------------------------------------

def outbox_dir(shared_dir):
    """The outbox folder of a controller whose shared storage is ``shared_dir`` on this host (str)."""
    return os.path.join(shared_dir, "controller", "outbox")


class Outbox(object):
    """One JSON file per (event, endpoint) delivery, written atomically before any send.

    A file: ``{"id", "event" (the payload), "endpoint" ({url, format, events, name, source: config|request, index}:
    never the secret, looked up again by the sender), "tries", "next_try_at", "created_at", "last_error",
    "last_status", "state" (:data:`STATES`), "delivered_at"}``.

    :param folder: str (:func:`outbox_dir`). :param clock: callable() -> float seconds.
    :param fault_file: str or None, the fault point (:data:`FAULT_FILE`): when it exists, :meth:`put` removes it and
        SIGKILLs this process right after writing an entry.
    """

    def __init__(self, folder, clock=time.time, fault_file=None):
        self.folder = folder
        self.done = os.path.join(folder, "done")
        self.clock = clock
        self.fault_file = fault_file
        self.lock = threading.Lock()

    def name(self, eid, endpoint):
        """The file name of the delivery of event ``eid`` to ``endpoint`` (str)."""
        return "%s-%s.json" % (eid, endpoint_key(endpoint))

    def has(self, eid, endpoint):
        """Whether that delivery is in the outbox already (pending, given up, or delivered and not yet pruned)."""
        name = self.name(eid, endpoint)
        return os.path.exists(os.path.join(self.folder, name)) or os.path.exists(os.path.join(self.done, name))

    def put(self, event, endpoints):
        """Write the deliveries of ``event`` (a payload) to each of ``endpoints`` not in the outbox yet.

        :param endpoints: list of endpoint dicts with ``source`` and ``index``; their ``secret`` is never written.
        :returns: list of str, the files written (an event already there is not written twice).
        :raises OSError: the shared storage cannot be written.
        """
        written = []
        now = self.clock()
        for endpoint in endpoints:
            name = self.name(event["event_id"], endpoint)
            if self.has(event["event_id"], endpoint):
                continue
            entry = {"id": name[:-5], "event": event,
                     "endpoint": {k: v for k, v in endpoint.items() if k != "secret"},
                     "tries": 0, "next_try_at": now, "created_at": event.get("at_s") or now, "last_error": None,
                     "last_status": None, "state": "pending", "delivered_at": None}
            path = os.path.join(self.folder, name)
            write_text_atomic(path, json.dumps(entry, sort_keys=True) + "\n", mode=0o600)
            written.append(path)
            if self.fault_file and os.path.exists(self.fault_file):
                os.unlink(self.fault_file)
                os.kill(os.getpid(), signal.SIGKILL)
        return written

    def save(self, entry):
        """Write ``entry`` back; a delivered one moves to ``done/`` (the scan of pending ones stays small)."""
        name = entry["id"] + ".json"
        text = json.dumps(entry, sort_keys=True) + "\n"
        if entry["state"] == "delivered":
            write_text_atomic(os.path.join(self.done, name), text, mode=0o600)
            try:
                os.unlink(os.path.join(self.folder, name))
            except OSError:
                pass
        else:
            write_text_atomic(os.path.join(self.folder, name), text, mode=0o600)

    def names(self):
        """The file names of the entries in the outbox folder (not ``done/``), sorted (list of str)."""
        try:
            return sorted(n for n in os.listdir(self.folder) if n.endswith(".json") and not n.startswith("."))
        except OSError:
            return []

    def read(self, name):
        """The entry of file ``name`` (dict; {} when it is gone or unreadable)."""
        entry = read_json(os.path.join(self.folder, name))
        return entry if entry.get("id") else {}

    def entries(self, skip=()):
        """Every entry in the outbox folder (not ``done/``) as (name, dict), names in ``skip`` not read."""
        out = []
        for name in self.names():
            entry = {} if name in skip else self.read(name)
            if entry:
                out.append((name, entry))
        return out

    def prune(self, keep_s=DONE_KEEP_S):
        """Remove delivered entries older than ``keep_s`` seconds; returns how many (int)."""
        removed, now = 0, self.clock()
        try:
            names = os.listdir(self.done)
        except OSError:
            return 0
        for name in names:
            path = os.path.join(self.done, name)
            try:
                if now - os.stat(path).st_mtime > keep_s:
                    os.unlink(path)
                    removed += 1
            except OSError:
                pass
        return removed


def outbox_summary(folder):
    """What status.yml says of an outbox (dict): ``pending``, ``expired``, ``refused``, ``delivered`` (counts; the
    delivered ones still in ``done/``) and ``endpoints``: per endpoint URL (:func:`public_url`: no user info or query)
    its undelivered count and its newest ``last_error``."""
    result = {"pending": 0, "expired": 0, "refused": 0, "delivered": 0, "endpoints": {}}
    try:
        result["delivered"] = len([n for n in os.listdir(os.path.join(folder, "done")) if n.endswith(".json")])
    except OSError:
        pass
    for _name, entry in Outbox(folder).entries():
        state = entry.get("state")
        if state not in result or state == "delivered":
            continue
        result[state] += 1
        url = public_url((entry.get("endpoint") or {}).get("url") or "")
        row = result["endpoints"].setdefault(url, {"undelivered": 0, "last_error": None, "at": 0, "states": {}})
        row["undelivered"] += 1
        row["states"][state] = row["states"].get(state, 0) + 1
        at = entry.get("last_try_at") or 0
        if entry.get("last_error") and at >= row["at"]:
            row.update(last_error=entry["last_error"], at=at)
    return result


# -- delivery ---------------------------------------------------------------------------------------------------

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed (a POST's body would be dropped): it counts as a refusal (HTTPError 3xx)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # pylint: disable=too-many-arguments
        return None


def retry_after_s(value, now):
    """Seconds a ``Retry-After`` header asks to wait (float), or None: whole seconds or an HTTP date (RFC 9110)."""
    if not value:
        return None
    value = str(value).strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - now) if when else None


def post(url, body, headers, timeout=TIMEOUT_S, opener=None):
    """One POST through ``urllib.request`` (redirects not followed; the environment's proxy, but not for a loopback
    address); returns ``(status, error, retry_after)``.

    :returns: ``status`` int (the HTTP status) or None (no answer), ``error`` str or None (what failed: the status
        line, or the connection's error), ``retry_after`` str or None (the header of a 429 or 503).
    """
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers=dict(headers, **{"Content-Type": "application/json",
                                                              "User-Agent": "mvp-job-controller"}))
    if opener is None:
        host = urllib.parse.urlsplit(url).hostname or ""
        # The environment's proxy (http_proxy) serves the outside; a relay on this host is reached directly.
        local = host in ("localhost", "::1") or host.startswith("127.")
        opener = urllib.request.build_opener(_NoRedirect(), *([urllib.request.ProxyHandler({})] if local else []))
    try:
        with opener.open(request, timeout=timeout) as answer:
            answer.read(65536)
            return answer.status, None, None
    except urllib.error.HTTPError as exc:
        status = exc.code
        try:
            exc.read(4096)
        except (OSError, ValueError):
            pass
        return status, "HTTP %d %s" % (status, exc.reason), exc.headers.get("Retry-After") if exc.headers else None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, socket.timeout) or isinstance(exc, socket.timeout):
            return None, "no answer within %.0f s" % timeout, None
        return None, "%s: %s" % (type(reason).__name__, reason), None
    # http.client's own errors (BadStatusLine, IncompleteRead) are no OSError: the try failed all the same.
    except Exception as exc:  # pylint: disable=broad-except
        return None, "%s: %s" % (type(exc).__name__, exc), None


def retryable(status):
    """Whether a try's outcome is tried again (bool): no answer, 429 or 5xx; any other 4xx or 3xx is a refusal."""
    return status is None or status == 429 or status >= 500


class Sender(object):
    """Delivers an outbox in a daemon thread, a pool of workers sending, until :meth:`stop`.

    :param outbox: :class:`Outbox`.
    :param webhooks: list, the controller's endpoints (``job_controller_webhooks``, checked): where a ``config``
        endpoint's secret is found again (by its index, and its URL must match).
    :param retry_for_s: float, seconds from the decision a delivery is retried (then ``expired``).
    :param first_backoff_s, max_backoff_s: float, the pauses between tries (doubled from the first, at most the max).
    :param timeout_s: float, one try's bound. :param workers: int, the pool's size. :param per_endpoint: int,
        deliveries in flight to one URL at once.
    :param say: callable(str) or None, a log line (URLs without user info or query; never a secret).
    :param clock: callable() -> float seconds. :param post_fn: callable(url, body, headers, timeout) -> (status,
        error, retry_after), :func:`post` (tests may count calls).
    """

    def __init__(self, outbox, webhooks=(), retry_for_s=RETRY_FOR_S, first_backoff_s=FIRST_BACKOFF_S,
                 max_backoff_s=MAX_BACKOFF_S, timeout_s=TIMEOUT_S, workers=WORKERS, per_endpoint=PER_ENDPOINT,
                 say=None, clock=time.time, post_fn=None):
        self.outbox = outbox
        self.webhooks = list(webhooks or [])
        self.retry_for_s, self.timeout_s = float(retry_for_s), float(timeout_s)
        self.first_backoff_s, self.max_backoff_s = float(first_backoff_s), float(max_backoff_s)
        self.per_endpoint = max(1, int(per_endpoint))
        self.say = say or (lambda line: None)
        self.clock = clock
        self.post = post_fn or post
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(workers)),
                                                          thread_name_prefix="mvp-notify")
        self.wakeup = threading.Event()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.in_flight = {}   # file name -> URL
        self.final = set()    # names refused or expired: not read again
        self.due = {}         # file name -> next_try_at of a pending entry read once (a scan reads only due ones)
        self.thread = None
        self.pruned_at = 0.0
        self.first_try = {}   # event id -> seconds of its first try (bench)

    def start(self):
        """Start the sender's thread (a daemon: it never keeps the process alive); returns self."""
        self.thread = threading.Thread(target=self.loop, name="mvp-notify-sender", daemon=True)
        self.thread.start()
        return self

    def wake(self):
        """Make the sender look at the outbox now (the controller calls it after writing an entry)."""
        self.wakeup.set()

    def stop(self, wait=True):
        """Stop the thread and the pool (deliveries in flight end within their timeout when ``wait``)."""
        self.stopping.set()
        self.wakeup.set()
        if self.thread:
            self.thread.join(timeout=self.timeout_s + 1 if wait else 0)
        self.pool.shutdown(wait=wait)

    def loop(self):
        """Scan the outbox whenever woken, or when the next try is due (at most every second)."""
        while not self.stopping.is_set():
            try:
                due = self.scan()
            # The sender must outlive a bad file.
            except Exception as exc:  # pylint: disable=broad-except
                self.say("notify: the outbox scan failed: %s: %s" % (type(exc).__name__, exc))
                due = self.clock() + 1.0
            self.wakeup.wait(max(0.005, min(1.0, due - self.clock())))
            self.wakeup.clear()

    def scan(self):
        """Hand every due pending entry to a worker; returns the time (float) the next one is due."""
        now = self.clock()
        if now - self.pruned_at > 3600:
            self.pruned_at = now
            self.outbox.prune()
        with self.lock:
            busy = set(self.in_flight)
            per_url = {}
            for url in self.in_flight.values():
                per_url[url] = per_url.get(url, 0) + 1
        next_due = now + 1.0
        names = self.outbox.names()
        with self.lock:
            for gone in set(self.due) - set(names):
                self.due.pop(gone, None)
        for name in names:
            if name in busy or name in self.final:
                continue
            if self.due.get(name, 0) > now:
                next_due = min(next_due, self.due[name])
                continue
            entry = self.outbox.read(name)
            if entry.get("state") != "pending":
                if entry.get("state") in ("refused", "expired"):
                    self.final.add(name)
                continue
            self.due[name] = float(entry.get("next_try_at") or 0)
            if self.due[name] > now:
                next_due = min(next_due, self.due[name])
                continue
            url = (entry.get("endpoint") or {}).get("url")
            if per_url.get(url, 0) >= self.per_endpoint:
                continue
            per_url[url] = per_url.get(url, 0) + 1
            with self.lock:
                self.in_flight[name] = url
            self.pool.submit(self._deliver, name, entry)
        return next_due

    def _deliver(self, name, entry):
        state = None
        try:
            state = self.deliver(entry)
        except Exception as exc:  # pylint: disable=broad-except
            self.say("notify: delivering %s failed: %s: %s" % (name, type(exc).__name__, exc))
        finally:
            with self.lock:
                if state == "pending":
                    self.due[name] = float(entry["next_try_at"])
                elif state is None:  # the try or its record failed (the storage?): not again before the first pause
                    self.due[name] = self.clock() + self.first_backoff_s
                else:
                    self.due.pop(name, None)
                    if state in ("refused", "expired"):
                        self.final.add(name)
                self.in_flight.pop(name, None)
            self.wakeup.set()

    def secret_of(self, endpoint):
        """The signing key of an endpoint (str or None): a ``config`` endpoint's from the controller's webhooks,
        by its index when that one has the same URL, else by URL and name; a request's endpoint has none."""
        if endpoint.get("source") != "config":
            return None
        index = endpoint.get("index")
        if isinstance(index, int) and 0 <= index < len(self.webhooks) and \
                self.webhooks[index].get("url") == endpoint.get("url"):
            return self.webhooks[index].get("secret")
        for hook in self.webhooks:
            if hook.get("url") == endpoint.get("url") and (hook.get("name") or "") == (endpoint.get("name") or ""):
                return hook.get("secret")
        return None

    def deliver(self, entry):
        """One try of one delivery, and its outcome written to the outbox; returns the entry's new state (str)."""
        endpoint = entry["endpoint"]
        body = body_of(entry["event"], endpoint.get("format") or "json")
        headers = {EVENT_ID_HEADER: entry["event"]["event_id"]}
        secret = self.secret_of(endpoint)
        now = self.clock()
        if secret:
            headers.update(sign(secret, now, body))
        self.first_try.setdefault(entry["event"]["event_id"], now)
        status, error, retry_after = self.post(endpoint["url"], body, headers, self.timeout_s)
        done = self.clock()
        entry.update(tries=int(entry.get("tries") or 0) + 1, last_status=status, last_try_at=done)
        url = public_url(endpoint["url"])
        if status is not None and 200 <= status < 300:
            entry.update(state="delivered", delivered_at=done, last_error=None)
        elif not retryable(status):
            entry.update(state="refused", last_error=error)
            self.say("notify: %s refused event %s (%s): not tried again" % (url, entry["event"]["event_id"], error))
        else:
            wait = min(self.max_backoff_s, self.first_backoff_s * 2 ** (entry["tries"] - 1))
            asked = retry_after_s(retry_after, done)
            if asked is not None:
                wait = min(self.max_backoff_s, max(wait, asked))
            entry.update(last_error=error, next_try_at=done + wait)
            if done - float(entry.get("created_at") or done) >= self.retry_for_s:
                entry.update(state="expired")
                self.say("notify: event %s to %s given up after %d tries in %.0f s: %s" % (
                    entry["event"]["event_id"], url, entry["tries"], done - float(entry.get("created_at") or done),
                    error))
        self.outbox.save(entry)
        return entry["state"]
