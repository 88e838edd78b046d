# -*- coding: utf-8 -*-
"""The submission pipeline of the ``ray_job`` module: look and refuse, track, make the job directory, submit, wait.

``RayJob(module).run()`` applies the module's I(state) for one submission id through Ray's Jobs REST API
(``mvp_ray_rest.JobsClient``): with I(check) the head's look (``mvp_submit_check.look``) judged by
``mvp_refuse.mvp_submit_problems`` (nothing written on a problem), the job's MLflow run (I(mlflow)), the job
directory made with one exclusive mkdir (I(job_dir)), the snapshots in the background (I(debug_bundle)), the
submission and the wait until the job leaves PENDING (I(wait)). The module (plugins/modules/ray_job.py) keeps
its argument spec and documentation; ``CHECK_OPTIONS`` and ``MLFLOW_OPTIONS`` are its typed sub-options.
"""

from __future__ import annotations

import json
import os
import time

from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_debug_bundle import start_detached
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import read_json, write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES, SUBDIRS
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job_create import JobDirError, create_job_dir
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_mlflow import (
    MlflowClient, MlflowHttpError, MlflowUnreachable, credentials_headers, job_run, ui_url)
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_ray import (
    TERMINAL_STATUSES, JobModule, list_nodes, pending_stop, placement, status_name, summarize)
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_refuse import mvp_submit_problems
from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_service import paths as service_paths, running_pid
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_submit_check import (
    SubmitCheckError, look, verl_skipped_note)


# The look's options (module_utils mvp_submit_check.look): typed, so a misspelt key fails before the head looks.
CHECK_OPTIONS = dict(
    paths=dict(type="dict", default={}),
    resource=dict(type="str"),
    hydra=dict(type="dict", options=dict(
        config_dir=dict(type="path", required=True),
        config_name=dict(type="str", required=True),
        overrides=dict(type="list", elements="str", default=[]),
    )),
    datasets=dict(type="dict", options=dict(
        dir=dict(type="path", required=True),
        files=dict(type="dict", default={}),
    )),
    verl_checks=dict(type="dict", options=dict(
        python=dict(type="path"),
        snapshot=dict(type="path", required=True),
        timeout=dict(type="int", default=180),
        cache_dir=dict(type="path"),
        sample_rows=dict(type="int", default=16),
    )),
    room=dict(type="dict", options=dict(
        model_path=dict(type="path", required=True),
        shared_root=dict(type="path", required=True),
    )),
    resolved_config_file=dict(type="path"),
    confine=dict(type="list", elements="dict", default=[], options=dict(
        field=dict(type="str", required=True),
        path=dict(type="str", required=True),
        root=dict(type="str", required=True),
    )),
    release=dict(type="dict", options=dict(
        python=dict(type="str"),
        snapshot=dict(type="path", required=True),
    )),
    reward=dict(type="dict", options=dict(
        python=dict(type="str"),
        snapshot=dict(type="path", required=True),
        path=dict(type="path", required=True),
        name=dict(type="str", default="compute_score"),
        name_key=dict(type="str", no_log=False),
        kwargs=dict(type="dict", default={}),
        timeout=dict(type="int", default=60),
    )),
)
# The job's MLflow run (module_utils mvp_mlflow.job_run), made or continued just before the submission.
MLFLOW_OPTIONS = dict(
    experiment=dict(type="str", required=True),
    run_name=dict(type="str", required=True),
    port=dict(type="int", default=5000),
    ui_url=dict(type="str", default=""),
    tags=dict(type="dict", default={}),
    artifacts=dict(type="list", elements="path", default=[]),
    credentials_file=dict(type="path", default=""),
    service_dir=dict(type="path", default=""),
    start_timeout=dict(type="int", default=120),
    record_file=dict(type="path"),
    runtime_env_file=dict(type="path"),
    timeout=dict(type="int", default=10),
)


def wait_for_starting_server(client, service_dir, timeout, sleep=time.sleep, clock=time.monotonic,
                             pid_of=running_pid):
    """Wait for a tracking server that was started but does not answer yet (cluster.yml does not wait for it).

    :param client: MlflowClient of the server (its ``healthy(timeout)``).
    :param service_dir: str, the server's service folder (``<service_dir>/mlflow.pid``, module ray_mlflow_server);
        '' - nothing is waited for.
    :param timeout: float, seconds to wait at most.
    :param pid_of: callable(pid_file) -> int or None, the running server's pid (mvp_service.running_pid).
    :returns: float or None: seconds waited until it answered; None when it answered at once, when no server
        of ours runs there (not started, or ended - waiting would not help), or when it did not answer in time
        (the tracking call that follows then says why not).
    """
    if not service_dir or client.healthy(timeout=2):
        return None
    pid_file = service_paths(service_dir, "mlflow")["pid"]
    start = clock()
    while pid_of(pid_file) is not None and clock() - start < timeout:
        sleep(0.5)
        if client.healthy(timeout=2):
            return round(clock() - start, 1)
    return None


class RayJob(JobModule):
    """Submit/stop/delete one submission id through Ray's Jobs REST API (mvp_ray_rest.JobsClient)."""

    def poll(self, job, done, timeout, on_timeout):
        """Poll until ``done(status)``; after ``timeout`` seconds (None: never) call ``on_timeout(job)``."""
        started = time.time()
        while not done(status_name(job.get("status"))):
            if timeout is not None and time.time() - started > timeout:
                on_timeout(job)
            time.sleep(self.params["poll_interval"])
            job = self.info()
        return job

    def stopped_by(self):
        """With I(job_dir), its ``logs/stopped_by.json`` (dict): who stopped the job and why; {} without one."""
        if not self.params["job_dir"]:
            return {}
        return read_json(os.path.join(self.params["job_dir"]["path"], FILES["stopped_by"]))

    def left_pending(self, status):
        """Whether the wait for placement ends: the job left PENDING, or (with I(job_dir)) its stop note says it was
        stopped - Ray keeps a job stopped before its driver was placed PENDING a while (mvp_verdict)."""
        return status != "PENDING" or bool(self.stopped_by())

    def stop_pending(self, job):
        """Stop a job PENDING past pending_timeout and fail naming what nobody offers.

        With I(job_dir), ``logs/stopped_by.json`` says so first (``mvp_ray.pending_stop``), so the job's verdict
        names the deadline: cause ``infeasible`` when no ALIVE node offers the entrypoint's resources at all (the
        demand and the offers as evidence), else ``stopped``.
        """
        nodes = list_nodes(self.state_api, self.params["address"])
        asked = dict(job, entrypoint_resources=self.params["entrypoint_resources"],
                     entrypoint_num_cpus=self.params["entrypoint_num_cpus"])
        note = pending_stop(asked, self.params["pending_timeout"], nodes,
                            "The job was stopped. Start workers carrying that resource (ray_worker role) or raise "
                            "pending_timeout.")
        if self.params["job_dir"]:
            note.update(by="ray_job pending_timeout %s s" % self.params["pending_timeout"], status_before="PENDING",
                        at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            write_text_atomic(os.path.join(self.params["job_dir"]["path"], FILES["stopped_by"]),
                              json.dumps(note, indent=2, sort_keys=True) + "\n")
        self.client.stop_job(self.params["submission_id"])
        self.module.fail_json(msg=note["why"], job=job, changed=True)

    def stop_timed_out(self, job):
        """Fail: a stopped job is still not terminal after stop_timeout."""
        self.module.fail_json(msg="Ray job %s still %s %ss after it was asked to stop." % (
            self.params["submission_id"], status_name(job.get("status")), self.params["stop_timeout"]),
            job=job, changed=True)

    def check_first(self):
        """I(check): look at the job on the head, and with I(refuse) fail on the first problem before anything is written; return the result keys (dict).
        """
        params, module = self.params, self.module
        if not params["check"]:
            if params["refuse"]:
                module.fail_json(msg="refuse goes with check.")
            return {}
        if params["state"] != "submitted" or not params["job_dir"]:
            module.fail_json(msg="check goes with state=submitted and job_dir (got state=%s)." % params["state"])
        options = dict(params["check"], submission_id=params["submission_id"], job_dir=params["job_dir"]["path"])
        options["resource"] = options.get("resource") or params["worker_resource"]
        try:
            check = look(options, self.client, self.state_api, params["address"])
        except SubmitCheckError as exc:
            module.fail_json(msg=str(exc), changed=False)
        result = {"check": check, "note": verl_skipped_note(check)}
        spec = (params["refuse"] or {}).get("spec")
        if isinstance(check.get("resolved_config"), str) and params["check"].get("resolved_config_file"):
            params["job_dir"]["files"][params["check"]["resolved_config_file"]] = check["resolved_config"]
        if params["refuse"]:
            refuse = params["refuse"]
            problems = mvp_submit_problems(check, spec, refuse.get("worker_resource") or params["worker_resource"],
                                           bool(refuse.get("check_gpus", True)))
            result.update(spec=spec, problems=problems)
            if problems:  # only the problems: the look itself would bury the message in the play's output
                module.fail_json(msg=problems[0] + result["note"], changed=False, other_problems=problems[1:])
        return result

    def track(self, checked):
        """I(mlflow): make or continue the job's MLflow run; return the result keys (dict).

        :param checked: dict, :meth:`check_first`'s result (its look's node summary names the head).

        Adds ``MLFLOW_TRACKING_URI`` (the head's node IP, as the workers reach it) and ``MLFLOW_RUN_ID`` to the
        runtime_env it submits, and writes them into I(mlflow.runtime_env_file) and the run's record
        (I(mlflow.record_file)) among I(job_dir)'s files. A server that does not answer leaves the job untracked
        (a note says so); it never stops the submission.
        """
        params, opts = self.params, self.params["mlflow"]
        if not opts or params["state"] != "submitted" or self.module.check_mode:
            return {}
        files = (params["job_dir"] or {}).get("files") or {}
        client = MlflowClient("http://127.0.0.1:%d" % opts["port"], timeout=opts["timeout"],
                              headers=credentials_headers(opts["credentials_file"]))
        waited = wait_for_starting_server(client, opts["service_dir"], opts["start_timeout"])
        try:
            # The ALIVE head as the look just read it (I(check)), else as Ray's node table says now.
            summary = (checked.get("check") or {}).get("summary") or summarize(
                list_nodes(self.state_api, params["address"]), params["worker_resource"])
            uri = "http://%s:%d" % ((summary["head"] or {}).get("node_ip") or "127.0.0.1", opts["port"])
            run = job_run(client, opts["experiment"], opts["run_name"], params["submission_id"], opts["tags"],
                          {os.path.basename(p): files[p] for p in opts["artifacts"] if isinstance(files.get(p), str)})
        except (MlflowUnreachable, MlflowHttpError, ValueError, KeyError) as exc:
            return {"mlflow": None, "note": " Not tracked in MLflow: %s." % exc}
        run.update(tracking_uri=uri, ui_url=ui_url(opts["ui_url"] or uri, run["experiment_id"], run["run_id"]),
                   credentials_file=opts["credentials_file"])
        env_vars = dict((params["runtime_env"] or {}).get("env_vars") or {},
                        MLFLOW_TRACKING_URI=uri, MLFLOW_RUN_ID=run["attempt_run_id"])
        params["runtime_env"] = dict(params["runtime_env"] or {}, env_vars=env_vars)
        if opts["runtime_env_file"]:
            files[opts["runtime_env_file"]] = json.dumps(params["runtime_env"], indent=4, sort_keys=True) + "\n"
        if opts["record_file"]:
            files[opts["record_file"]] = json.dumps(run, indent=4, sort_keys=True) + "\n"
        if waited is not None:
            return {"mlflow": run, "note": " Tracked in MLflow once its server, still starting, answered (%.1f s)."
                    % waited}
        return {"mlflow": run}

    def prepare(self):
        """Create I(job_dir) and start I(debug_bundle) (state=submitted); return their result keys (dict).

        Fails the module, naming the folder, when the job directory exists: nothing is written or submitted.
        """
        params, module, result = self.params, self.module, {}
        if params["state"] != "submitted" and (params["job_dir"] or params["debug_bundle"]):
            module.fail_json(msg="job_dir and debug_bundle go with state=submitted (got state=%s)." % params["state"])
        spec = params["job_dir"]
        if spec:
            try:
                result["job_dir_written"] = create_job_dir(
                    spec["path"], spec["files"], SUBDIRS if spec["subdirs"] is None else spec["subdirs"],
                    spec["mode"], check_mode=module.check_mode, links=spec["links"])
            except JobDirError as exc:
                module.fail_json(msg=str(exc), changed=False)
        bundle = params["debug_bundle"]
        if bundle and not module.check_mode:
            if not os.path.isdir(bundle["dest"]):
                module.fail_json(msg="debug_bundle.dest %s does not exist (it is made with job_dir's folders)."
                                 % bundle["dest"], changed=bool(spec))
            result["debug_bundle"] = start_detached(bundle)
        return result

    def run(self):
        """Apply the requested state and exit the module."""
        params, module = self.params, self.module
        checked = self.check_first()
        tracked = self.track(checked) if self.params["mlflow"] and self.info() is None else {}
        prepared = self.prepare()
        job = self.info()
        result = dict(checked, **prepared)
        result["mlflow"] = tracked.get("mlflow")
        result["note"] = result.get("note", "") + tracked.get("note", "")
        result.update(changed=bool(prepared), existed=job is not None)
        state = params["state"]
        if state == "submitted":
            if job is None:
                if not params["entrypoint"]:
                    module.fail_json(msg="entrypoint is required to submit job %s" % params["submission_id"])
                result["changed"] = True
                if module.check_mode:
                    module.exit_json(job=None, **result)
                self.client.submit_job(
                    entrypoint=params["entrypoint"], submission_id=params["submission_id"],
                    runtime_env=params["runtime_env"], metadata=params["metadata"],
                    entrypoint_resources=params["entrypoint_resources"],
                    entrypoint_num_cpus=params["entrypoint_num_cpus"])
                job = self.info()
            if params["wait"] == "placed" and not module.check_mode:
                job = self.poll(job, self.left_pending, params["pending_timeout"] or None, self.stop_pending)
                where = placement(self.state_api, params["address"], job, params["worker_resource"])
                stopped = self.stopped_by()
                if not where and stopped:
                    module.fail_json(msg="Ray job %s was stopped before its driver was placed, by %s: %s" % (
                        params["submission_id"], stopped.get("by") or "?", stopped.get("why") or "no reason given"),
                        job=job, stopped_by=stopped, **result)
                if where:
                    result["placement"] = where
                    if params["placement_dest"]:
                        write_text_atomic(params["placement_dest"], json.dumps(where, indent=4, sort_keys=True) + "\n")
                        result.update(placement_dest=params["placement_dest"], changed=True)
        elif job is None:
            if state == "stopped":
                module.fail_json(msg="Ray job %s does not exist." % params["submission_id"])
        elif state == "stopped" and status_name(job.get("status")) not in TERMINAL_STATUSES:
            result["changed"] = True
            if not module.check_mode:
                self.client.stop_job(params["submission_id"])
                job = self.poll(self.info(), lambda status: status in TERMINAL_STATUSES,
                                params["stop_timeout"], self.stop_timed_out)
        elif state == "absent":
            if status_name(job.get("status")) not in TERMINAL_STATUSES:
                module.fail_json(msg="Ray job %s is %s: stop it before deleting it."
                                 % (params["submission_id"], status_name(job.get("status"))), job=job)
            result["changed"] = True
            if not module.check_mode:
                self.client.delete_job(params["submission_id"])
        module.exit_json(job=job, **result)
