# -*- coding: utf-8 -*-
"""MLflow's tracking REST API with the standard library: the experiment and the run of a job.

The head's MLflow tracking server (role mlflow_server) keeps one experiment per workload and
one run per job, named after the job's first submission id; its restarted attempts continue
the same run (verl's ``mlflow`` logger reads ``MLFLOW_RUN_ID``, verl/utils/tracking.py), so the
curve is one line. The modules on the head talk to it over HTTP like they talk to Ray's
dashboard (module_utils.cluster.mvp_ray_rest), without importing mlflow: the node venv of the base
image has no MLflow client, and the server's own venv is apart (images/node/build.sh).

Routes and payloads are MLflow's documented REST API 2.0 (mlflow.org/docs/latest/rest-api.html;
MLflow 3.17 ``mlflow/server/handlers.py``): ``experiments/get-by-name``, ``experiments/create``,
``runs/search``, ``runs/create``, ``runs/get``, ``runs/log-batch``, ``runs/update``,
``metrics/get-history``; artifacts through the server's proxy, ``PUT
/api/2.0/mlflow-artifacts/artifacts/<path>`` (the server runs with ``--artifacts-destination``,
so a run's ``artifact_uri`` is ``mlflow-artifacts:/<experiment id>/<run id>/artifacts``).
Times are milliseconds since the epoch, as MLflow keeps them.
"""

from __future__ import annotations

import base64
import configparser
import json
import math
import os
import re
import time
from urllib.parse import quote

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import read_json
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray_rest import HttpJson

API = "/api/2.0/mlflow"
ARTIFACTS_API = "/api/2.0/mlflow-artifacts/artifacts"
TAG_PREFIX = "mvp."
"""Prefix of the tags the project sets on a run (``mvp.workload``, ``mvp.submission_ids``, ...)."""
MAX_TAG_VALUE = 8000
"""MLflow's longest tag value (characters, ``mlflow/utils/validation.py`` MAX_TAG_VAL_LENGTH)."""


class MlflowUnreachable(ConnectionError):
    """The tracking server at the address did not answer."""


class MlflowHttpError(RuntimeError):
    """The tracking server answered with an HTTP error; ``status`` and MLflow's ``error_code`` kept."""

    def __init__(self, status, body, url):
        self.status = status
        self.url = url
        try:
            self.error_code = (json.loads(body) or {}).get("error_code", "")
        except ValueError:
            self.error_code = ""
        hint = ""
        if status in (401, 403):
            hint = (" The tracking server asks for credentials (mvp_mlflow_auth): the client sends "
                    "MLFLOW_TRACKING_USERNAME/MLFLOW_TRACKING_PASSWORD or MLFLOW_TRACKING_TOKEN from its environment.")
        RuntimeError.__init__(self, "MLflow answered %s at %s: %s.%s" % (status, url, body.strip()[:500], hint))


def auth_headers(environ=None):
    """Return the Authorization header MLflow's own client would send, from its environment variables.

    ``MLFLOW_TRACKING_TOKEN`` gives ``Bearer <token>``; ``MLFLOW_TRACKING_USERNAME`` and
    ``MLFLOW_TRACKING_PASSWORD`` give HTTP basic auth (MLflow's ``mlflow/utils/rest_utils.py``).
    :param environ: mapping, ``os.environ`` when None. :returns: dict (empty without credentials).
    """
    env = os.environ if environ is None else environ
    if env.get("MLFLOW_TRACKING_TOKEN"):
        return {"Authorization": "Bearer %s" % env["MLFLOW_TRACKING_TOKEN"]}
    if env.get("MLFLOW_TRACKING_USERNAME") and env.get("MLFLOW_TRACKING_PASSWORD"):
        pair = "%s:%s" % (env["MLFLOW_TRACKING_USERNAME"], env["MLFLOW_TRACKING_PASSWORD"])
        return {"Authorization": "Basic %s" % base64.b64encode(pair.encode("utf-8")).decode("ascii")}
    return {}


def credentials_headers(config_file):
    """The basic-auth header of the user the server's auth config names (role mlflow_server's mlflow_auth.ini).

    MLflow's basic-auth app reads ``admin_username`` and ``admin_password`` from the ``[mlflow]`` section of
    that file (``MLFLOW_AUTH_CONFIG_PATH``); the head's modules read the same file (0600) instead of taking
    the password as an argument.
    :param config_file: str path, or '' / None without auth.
    :returns: dict (empty without a path or a readable file holding both).
    """
    if not config_file:
        return {}
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(config_file, encoding="utf-8")
        section = parser["mlflow"]
        user, password = section.get("admin_username"), section.get("admin_password")
    except (OSError, KeyError, configparser.Error):
        return {}
    return auth_headers({"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password}) if user and password else {}


def ui_url(base, experiment_id, run_id=None):
    """Return the MLflow UI's page of a run (or of an experiment without ``run_id``).

    :param base: str, the server as a person's browser reaches it (``http://10.0.0.5:5000``).
    :returns: str, ``<base>/#/experiments/<experiment id>/runs/<run id>`` (the UI's own routes).
    """
    page = "%s/#/experiments/%s" % (base.rstrip("/"), experiment_id)
    return page + ("/runs/%s" % run_id if run_id else "")


class MlflowClient(HttpJson):
    """The calls of MLflow's ``MlflowClient`` the project makes, over HTTP.

    :param address: str, the tracking server's URL (``http://127.0.0.1:5000`` on the head).
    :param headers: dict or None, extra headers (:func:`auth_headers` when None).
    :param timeout: float seconds per request.
    """

    def __init__(self, address, headers=None, timeout=30):
        HttpJson.__init__(self, address, auth_headers() if headers is None else headers, timeout)

    def error(self, status, body, url):
        """MlflowHttpError for an HTTP status of 400 or more."""
        return MlflowHttpError(status, body, url)

    def unreachable(self, exc):
        """MlflowUnreachable naming the address."""
        return MlflowUnreachable("the MLflow tracking server at %s does not answer (%s)" % (self.address, exc))

    def healthy(self, timeout=5):
        """True when ``GET /health`` answers (MLflow answers ``OK``, which is not JSON)."""
        try:
            self.call("GET", "/health", timeout=timeout)
        except ValueError:
            return True
        except (MlflowUnreachable, MlflowHttpError):
            return False
        return True

    def experiment_id(self, name, create=True):
        """Return the id (str) of the experiment called ``name``; create it when missing and ``create``.

        :returns: str, or None when it is missing and ``create`` is False.
        :raises MlflowHttpError: for any answer but "does not exist".
        """
        try:
            found = self.call("GET", API + "/experiments/get-by-name", params={"experiment_name": name})
            return found["experiment"]["experiment_id"]
        except MlflowHttpError as exc:
            if exc.error_code != "RESOURCE_DOES_NOT_EXIST" and exc.status != 404:
                raise
        if not create:
            return None
        return self.call("POST", API + "/experiments/create", body={"name": name})["experiment_id"]

    def find_run(self, experiment_id, run_name):
        """Return the newest run called ``run_name`` in the experiment (MLflow's run dict), or None."""
        answer = self.call("POST", API + "/runs/search", body={
            "experiment_ids": [experiment_id], "filter": "attributes.run_name = '%s'" % run_name.replace("'", ""),
            "max_results": 1, "order_by": ["attributes.start_time DESC"]}) or {}
        runs = answer.get("runs") or []
        return runs[0] if runs else None

    def create_run(self, experiment_id, run_name, tags=None):
        """Create a run and return MLflow's run dict (``info.run_id``, ``info.artifact_uri``)."""
        return self.call("POST", API + "/runs/create", body={
            "experiment_id": experiment_id, "run_name": run_name, "start_time": int(time.time() * 1000),
            "tags": _tag_list(tags)})["run"]

    def get_run(self, run_id):
        """Return MLflow's run dict (``info``, ``data.metrics`` with each metric's last value, ``data.tags``)."""
        return self.call("GET", API + "/runs/get", params={"run_id": run_id})["run"]

    def set_tags(self, run_id, tags):
        """Set several tags of a run in one call (``runs/log-batch``)."""
        if tags:
            self.call("POST", API + "/runs/log-batch", body={"run_id": run_id, "tags": _tag_list(tags)})

    def set_status(self, run_id, status):
        """Set a run's status (``RUNNING``, ``FINISHED``, ``FAILED``, ``KILLED``) and its end time."""
        body = {"run_id": run_id, "status": status}
        if status != "RUNNING":
            body["end_time"] = int(time.time() * 1000)
        self.call("POST", API + "/runs/update", body=body)

    def metric_history(self, run_id, key):
        """Return every logged value of one metric: list of dicts ``{key, value, timestamp, step}``."""
        out, token = [], None
        while True:
            params = {"run_id": run_id, "metric_key": key, "max_results": 25000}
            if token:
                params["page_token"] = token
            answer = self.call("GET", API + "/metrics/get-history", params=params) or {}
            out.extend(answer.get("metrics") or [])
            token = answer.get("next_page_token")
            if not token:
                return out

    def upload_text(self, artifact_uri, name, text):
        """Store ``text`` as the artifact ``name`` (a relative path) of the run whose ``artifact_uri`` is given.

        :raises ValueError: an artifact URI the server does not proxy (not ``mlflow-artifacts:``).
        """
        if not artifact_uri.startswith("mlflow-artifacts:"):
            raise ValueError("artifact_uri %r is not served by the tracking server (mlflow-artifacts:); "
                             "start it with --artifacts-destination" % artifact_uri)
        path = artifact_uri[len("mlflow-artifacts:"):]
        if path.startswith("//"):  # mlflow-artifacts://host:port/<path>
            path = path[2:].partition("/")[2]
        path = path.strip("/")
        self.call("PUT", "%s/%s/%s" % (ARTIFACTS_API, quote(path), quote(name)), raw=text.encode("utf-8"))


def _tag_list(tags):
    """MLflow's tag list ``[{key, value}]`` from a dict; values as str, cut at MAX_TAG_VALUE characters."""
    return [{"key": str(k), "value": str(v)[:MAX_TAG_VALUE]} for k, v in sorted((tags or {}).items())
            if v is not None]


def job_run(client, experiment, run_name, submission_id, tags=None, artifacts=None):
    """The MLflow runs of one attempt of a job: the run named ``run_name`` (created when missing) and, for a
    restarted attempt, a child run of it where verl logs.

    verl's ``mlflow`` logger logs the trainer's whole config as the run's params when it starts
    (verl/utils/tracking.py), and MLflow never lets a param change: a restarted attempt (another
    ``trainer.default_local_dir``, ``trainer.experiment_name``, resume path) continuing the run itself
    would be refused and train untracked. So the first attempt logs into the run, and each restarted
    attempt into a child run (tag ``mlflow.parentRunId``, named after the attempt) whose metrics
    :func:`record_verdict` copies into the run when the attempt ends: the run's curve is one line.

    :param client: MlflowClient. :param experiment: str, the experiment's name (the workload).
    :param run_name: str, the job's first submission id (every attempt of a restart chain shares it).
    :param submission_id: str, this attempt's id: added to the run's ``mvp.submission_ids`` tag
        (comma-separated, in order) and set as ``mvp.attempt``.
    :param tags: dict of more tags (``mvp.workload``, ``mvp.code_id``, ...), set on every attempt.
    :param artifacts: dict relative name -> text, stored under ``<submission_id>/`` in the run's artifacts.
    :returns: dict ``run_id`` (the run), ``attempt_run_id`` (where this attempt logs: the run, or its child),
        ``experiment_id``, ``experiment``, ``run_name``, ``continued`` (bool: the run existed, this attempt
        continues it), ``submission_ids`` (list of str).
    :raises MlflowUnreachable, MlflowHttpError: the server did not answer or refused a call.
    """
    experiment_id = client.experiment_id(experiment)
    run = client.find_run(experiment_id, run_name)
    chain = []
    if run is not None:
        found = {t["key"]: t["value"] for t in (run.get("data") or {}).get("tags") or []}
        chain = [i for i in found.get(TAG_PREFIX + "submission_ids", "").split(",") if i]
    if submission_id not in chain:
        chain.append(submission_id)
    all_tags = dict(tags or {})
    all_tags.update({TAG_PREFIX + "submission_ids": ",".join(chain), TAG_PREFIX + "attempt": submission_id})
    attempt = None
    if run is None:
        run = client.create_run(experiment_id, run_name, all_tags)
    else:
        client.set_tags(run["info"]["run_id"], all_tags)
        client.set_status(run["info"]["run_id"], "RUNNING")
        attempt = client.create_run(experiment_id, submission_id, dict(
            all_tags, **{"mlflow.parentRunId": run["info"]["run_id"]}))
    for name, text in sorted((artifacts or {}).items()):
        client.upload_text(run["info"]["artifact_uri"], "%s/%s" % (submission_id, name), text)
    return {"run_id": run["info"]["run_id"], "attempt_run_id": (attempt or run)["info"]["run_id"],
            "experiment_id": experiment_id, "experiment": experiment, "run_name": run_name,
            "continued": len(chain) > 1, "submission_ids": chain}


def metric_key(name):
    """MLflow's form of a metric name, as verl's mlflow logger gives it (verl/utils/tracking.py, its key
    sanitising): ``@`` becomes ``_at_``, repeated slashes one, and each character MLflow refuses (it allows
    word characters, ``/ . - :`` and spaces) ``_``; so copied values land on the curve verl drew."""
    key = re.sub(r"/+", "/", str(name).replace("@", "_at_"))
    return re.sub(r"[^/\w.\- :]", "_", key)


def metrics_batches(metrics_file, after_step=0, size=1000):
    """The metrics of a verl file-logger file (``{"step": N, "data": {...}}`` lines) as MLflow ``log-batch``
    metric lists of at most ``size`` (MLflow's limit per call), for the steps above ``after_step``.

    Non-numeric and non-finite values are left out (MLflow's JSON takes neither). Lines that are not JSON
    objects are skipped. :returns: list of lists of ``{key, value, timestamp, step}``.
    """
    now = int(time.time() * 1000)
    out = []
    try:
        with open(metrics_file, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            row = json.loads(line)
            step = int(row["step"])
        except (ValueError, TypeError, KeyError):
            continue
        if step <= after_step or not isinstance(row.get("data"), dict):
            continue
        for key, value in sorted(row["data"].items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.append({"key": metric_key(key), "value": float(value), "timestamp": now, "step": step})
    return [out[i:i + size] for i in range(0, len(out), size)]


def record_client(record, timeout=10):
    """The MlflowClient of a job's ``config/mlflow_run.json`` record, as a module on the head reaches the server.

    :param record: dict, the record (``tracking_uri``: its port is used on 127.0.0.1, 5000 without one;
        ``credentials_file``: the server's auth config, :func:`credentials_headers`).
    :param timeout: float seconds per call.
    """
    port = (record.get("tracking_uri") or "").rpartition(":")[2]
    return MlflowClient("http://127.0.0.1:%s" % (port or "5000"), timeout=timeout,
                        headers=credentials_headers(record.get("credentials_file")))


LEDGER_TAGS = ("owner", "team", "project")
"""The ledger's keys set as tags ``mvp.<key>`` on the run (a null one is not set)."""


def ledger_metrics(ledger):
    """The run's ledger as MLflow metrics (dict key -> float): ``ledger/gpu_hours_held``, ``ledger/goodput`` (0..1,
    left out when null) and ``ledger/<bucket>_gpu_hours`` for each bucket of ``ledger["buckets"]`` (GPU-hours)."""
    out = {"ledger/gpu_hours_held": float(ledger.get("gpu_seconds_held") or 0) / 3600.0}
    if ledger.get("goodput") is not None:
        out["ledger/goodput"] = float(ledger["goodput"])
    for name, value in sorted((ledger.get("buckets") or {}).items()):
        out[metric_key("ledger/%s_gpu_hours" % name)] = float(value or 0) / 3600.0
    return {k: v for k, v in out.items() if math.isfinite(v)}


def log_ledger(mlflow_settings, run_ids, ledger, timeout=10):
    """Put a run's GPU-hour ledger (its first attempt's ``logs/ledger.json``, issue 63) on its MLflow run(s).

    Tags ``mvp.owner``, ``mvp.team``, ``mvp.project`` always; the metrics of :func:`ledger_metrics` once the run
    ended (``ledger["state"] == "ended"``), at step 0 with the ledger's ``computed_at`` as their time. Idempotent:
    a metric whose latest value on the run already has that value and time is not logged again (``runs/get``), so
    the record step and the job controller's final ledger may both call it; a later ledger (another
    ``computed_at``) becomes the metric's latest value.

    :param mlflow_settings: dict, the run's ``config/mlflow_run.json`` record (:func:`record_client`); {} or None -
        nothing is done.
    :param run_ids: list of str, the MLflow runs to put it on (the run's ``run_id``; a child run's id too if wanted).
    :param ledger: dict, the ledger.json (``owner``, ``team``, ``project``, ``state``, ``computed_at`` (s since the
        epoch), ``gpu_seconds_held``, ``buckets``, ``goodput``).
    :param timeout: float seconds per call.
    :returns: str, what was done (``ledger on <ids>: N metrics``) or why not ('' without settings or runs).
    """
    ids = [i for i in (run_ids or []) if i]
    if not mlflow_settings or not ids:
        return ""
    client = record_client(mlflow_settings, timeout)
    tags = {TAG_PREFIX + key: ledger.get(key) for key in LEDGER_TAGS}
    ended = ledger.get("state") == "ended"
    stamp = int(float(ledger.get("computed_at") or time.time()) * 1000)
    wanted = ledger_metrics(ledger) if ended else {}
    logged = 0
    try:
        for run_id in ids:
            have = {m["key"]: (m.get("value"), int(m.get("timestamp") or 0))
                    for m in ((client.get_run(run_id).get("data") or {}).get("metrics") or [])} if wanted else {}
            metrics = [{"key": key, "value": value, "timestamp": stamp, "step": 0}
                       for key, value in sorted(wanted.items()) if have.get(key) != (value, stamp)]
            body = {"run_id": run_id, "tags": _tag_list(tags)}
            if metrics:
                body["metrics"] = metrics
            client.call("POST", API + "/runs/log-batch", body=body)
            logged += len(metrics)
    except (MlflowUnreachable, MlflowHttpError) as exc:
        return "ledger not put on %s: %s" % (", ".join(ids), exc)
    return "ledger on %s: tags, %d metrics%s" % (", ".join(ids), logged,
                                                 "" if ended else " (none before the run ended)")


def record_verdict(record_file, verdict, metrics_file=None, after_step=0, timeout=10):
    """Put an ended attempt's verdict on its MLflow run(s): tags ``mvp.verdict``, ``mvp.cause``, ``mvp.summary``
    and the status (``FINISHED`` when it trained or succeeded, else ``FAILED``). A restarted attempt's metrics
    (its child run's, see :func:`job_run`) are copied into the run from ``metrics_file``, steps above
    ``after_step`` (the checkpoint it resumed from), so the run's curve goes on.

    :param record_file: str, the job's ``config/mlflow_run.json`` (written by ray_job at submission; its
        ``credentials_file`` names the server's auth config on the head); a job without one (untracked, or
        from before tracking) is left alone.
    :param verdict: dict, the verdict record (module_utils mvp_verdict: ``verdict``, ``cause``, ``summary``);
        a ``running`` verdict changes nothing.
    :param metrics_file: str, the attempt's ``logs/metrics.jsonl``, or None.
    :param after_step: int, the step the attempt resumed from (0 for a first attempt).
    :param timeout: float seconds per call.
    :returns: str, what was done (``tagged <run id>``) or why nothing was ('' without a record file).
    """
    run = read_json(record_file)
    if not run.get("run_id"):
        return ""
    if verdict.get("verdict") in (None, "running"):
        return "run %s left as it is" % run["run_id"]
    client = record_client(run, timeout)
    status = "FINISHED" if verdict.get("verdict") in ("trained", "succeeded") else "FAILED"
    tags = {TAG_PREFIX + "verdict": verdict.get("verdict"), TAG_PREFIX + "cause": verdict.get("cause") or "",
            TAG_PREFIX + "summary": verdict.get("summary") or ""}
    attempt = run.get("attempt_run_id") or run["run_id"]
    copied = 0
    try:
        if attempt != run["run_id"] and metrics_file:
            for batch in metrics_batches(metrics_file, after_step):
                client.call("POST", API + "/runs/log-batch", body={"run_id": run["run_id"], "metrics": batch})
                copied += len(batch)
        for run_id in sorted({run["run_id"], attempt}):
            client.set_tags(run_id, tags)
            client.set_status(run_id, status)
    except (MlflowUnreachable, MlflowHttpError) as exc:
        return "run %s not tagged: %s" % (run["run_id"], exc)
    return "tagged %s" % run["run_id"] + (" (copied %d values of attempt run %s)" % (copied, attempt) if copied else "")
