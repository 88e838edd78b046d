# -*- coding: utf-8 -*-
"""The jobs a cluster play would interrupt, and what an interruption costs them.

A play that changes the cluster (``site.yml``/``cluster.yml`` restarting Ray on a node or
recreating a node's container, ``down.yml``) looks at the jobs first. This module holds the rules:

* :func:`active_jobs`: every PENDING or RUNNING job of Ray's job table (queued jobs included:
  they hold a driver on a worker) with the nodes it runs on (its driver's node and its actors'
  nodes, Ray's state API), its last logged step and its newest complete checkpoint step
  (read from its job directory with ``mvp_runs``), and the steps a restart would cost;
* :func:`interrupted`: which of those jobs a set of planned node changes hits (a change of the
  head, or of a node whose IP is unknown, hits every job; otherwise a job is hit when one of its
  nodes changes);
* :func:`job_line` and :func:`refusal`: the words of the play's output.

The planned changes come from the cluster play's own probes (the ``ray_head``/``ray_worker``
modules in check mode, the container plan): a list of dicts ``{"host": inventory name,
"node_ip": IP or "", "head": bool, "reason": why the play would restart Ray there}``.
"""

from __future__ import annotations

import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import FILES
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_queue import ACTIVE
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import latest_checkpoint, read_metrics


def progress(job_dir):
    """How far a job got, from its job directory.

    :param job_dir: str or None, ``<shared_root>/jobs/<submission_id>`` as the reader sees it.
    :returns: dict ``{"last_step": int (0: no step logged), "checkpoint_step": int or None (the
        newest complete checkpoint, ``mvp_runs.latest_checkpoint``), "steps_at_risk": int (the steps
        a restart from that checkpoint trains again)}``.
    """
    if not job_dir:
        return {"last_step": 0, "checkpoint_step": None, "steps_at_risk": 0}
    last = read_metrics(os.path.join(job_dir, FILES["metrics"]), keys=())["last_step"]
    checkpoint = latest_checkpoint(os.path.join(job_dir, FILES["checkpoints"])) or {}
    step = checkpoint.get("step")
    return {"last_step": last, "checkpoint_step": step, "steps_at_risk": max(last - (step or 0), 0)}


def active_jobs(jobs, nodes, actor_ips=None, progress_of=progress):
    """The jobs a change of the cluster could interrupt, oldest first.

    :param jobs: list of dicts of Ray's JobDetails fields (``mvp_ray.job_row`` plus ``job_id``).
    :param nodes: list of node dicts (``mvp_ray.node_to_dict``): the driver's node id to its IP.
    :param actor_ips: callable(job dict) -> list of the IPs of the job's ALIVE actors, or None.
    :param progress_of: callable(job_dir) -> :func:`progress` (tests pass their own).
    :returns: list of dicts ``{"submission_id", "status", "job_dir", "metadata" ({"job_dir"}: the job
        table's shape, for the plays that stop jobs), "node_ips" (sorted; [] when unknown), "last_step",
        "checkpoint_step", "steps_at_risk"}``.
    """
    ips = {n.get("node_id"): n.get("node_ip") for n in nodes or []}
    out = []
    for job in sorted(jobs or [], key=lambda j: j.get("start_time") or 0):
        if job.get("status") not in ACTIVE or not job.get("submission_id"):
            continue
        job_dir = (job.get("metadata") or {}).get("job_dir") or ""
        found = set(actor_ips(job) if actor_ips else [])
        if ips.get(job.get("driver_node_id")):
            found.add(ips[job["driver_node_id"]])
        row = {"submission_id": job["submission_id"], "status": job["status"], "job_dir": job_dir,
               "metadata": {"job_dir": job_dir} if job_dir else {}, "node_ips": sorted(ip for ip in found if ip)}
        row.update(progress_of(job_dir))
        out.append(row)
    return out


def interrupted(active, changes):
    """The active jobs that planned changes would interrupt.

    :param active: list of :func:`active_jobs` rows.
    :param changes: list of dicts ``{"host", "node_ip", "head", "reason"}``; entries without a
        ``reason`` change nothing.
    :returns: list of the rows of ``active`` that are hit, each with ``"changes"``: the hosts whose
        change hits it.
    """
    real = [c for c in changes or [] if c.get("reason")]
    hit = []
    for job in active or []:
        hosts = [c["host"] for c in real
                 if c.get("head") or not c.get("node_ip") or not job.get("node_ips")
                 or c["node_ip"] in job["node_ips"]]
        if hosts:
            hit.append(dict(job, changes=hosts))
    return hit


def job_line(job):
    """One job as the play names it: id, status, nodes, last step, checkpoint and the steps at risk (str)."""
    where = " on %s" % ", ".join(job["node_ips"]) if job.get("node_ips") else ""
    if not job.get("last_step"):
        cost = "no step logged yet"
    elif job.get("checkpoint_step") is None:
        cost = "last step %d, no complete checkpoint (a restart trains all %d steps again)" % (
            job["last_step"], job["steps_at_risk"])
    else:
        cost = "last step %d, newest complete checkpoint step %d (a restart trains %d steps again)" % (
            job["last_step"], job["checkpoint_step"], job["steps_at_risk"])
    return "%s (%s%s): %s" % (job["submission_id"], job["status"], where, cost)


def refusal(hit, changes, play):
    """The refusal of a play that would interrupt jobs: what it would change, whom it hits, the ways on.

    :param hit: list of :func:`interrupted` rows (not empty).
    :param changes: the planned changes (as :func:`interrupted`).
    :param play: str, the play's name for the message (``site.yml``).
    :returns: str, one paragraph.
    """
    what = "; ".join("%s: %s" % (c["host"], c["reason"]) for c in changes if c.get("reason"))
    jobs = "; ".join(job_line(j) for j in hit)
    return ("%s would interrupt %d running or queued job(s); changes planned: %s. Jobs: %s. Nothing was changed. "
            "Either let them end first: -e mvp_running_jobs=wait (the play waits for them, at most "
            "running_jobs_wait_timeout_s), or restart them: -e mvp_running_jobs=restart (each is stopped, "
            "its verdict says this play interrupted it - cause cluster_changed, restartable - and the job controller "
            "following its run waits until this play ends, then continues the run as its next attempt <run>-rN from "
            "its newest complete checkpoint, while the run's max_restarts allow and job_controller_restart_causes "
            "has cluster_changed; status.yml shows the controller and the runs)."
            % (play, len(hit), what, jobs))
