#!/usr/bin/env python3
"""The job controller runs the collection its role installed (issue 62): real plays on the local cluster.

Cases:

* "code change": an SFT run submitted with ``-e wait=false`` trains; a controller module of the checkout is changed
  (one comment line appended to ``plugins/module_utils/lifecycle/mvp_restart.py``) and ``site.yml`` runs: the
  controller is restarted with the new content (the hash in its heartbeat changes, and its pid) while the run trains, follows it
  (the run in its heartbeat, a new step), and ends it with its record once it is stopped (``stop.yml``). The file is put back and ``site.yml`` runs again (the content hash returns).
* "installed from anywhere": the collection built with ``ansible-galaxy collection build`` and installed into a fresh
  folder, the local inventory copied beside it (``inventories/local`` and ``inventories/common``, its secrets
  included: the running cluster's token), then ``ansible-playbook mvp.ray.site`` and ``mvp.ray.submit -e
  wait=false`` from that folder (no ``ansible.cfg``, ``ANSIBLE_COLLECTIONS_PATH`` naming the folder): the controller
  runs from its own installed copy of that content (its settings' ``project_dir`` under its own folder, the source
  the installed copy) and ends the run with its record. ``site.yml`` from the checkout runs afterwards.

Expected values come from the inputs: the hash is the sha256 of the content's ``FILES.json`` as ``ansible-galaxy``
builds it here, not read from the code under test.

Usage: python tests/reliability/controller_content.py --inventory inventories/local --host-shared /srv/mvp/private
           [--only CASE ...]
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from faults import CaseFailed, Cluster, run_cases, suite_parser
from verdicts import Job, extra_vars, read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EDITED = os.path.join(ROOT, "plugins", "module_utils", "lifecycle", "mvp_restart.py")
# An SFT of 40 epochs (320 steps, about 8 minutes here): site.yml runs while it trains (it took up to 90 s on a busy
# machine); the run is stopped once the restarted controller has followed it through a new step.
OVERRIDES = {"trainer.total_epochs": 40}
RUN_END_TIMEOUT = 900


def heartbeat(cluster):
    """The job controller's heartbeat (dict; {} when missing)."""
    return read_json(os.path.join(cluster.host_shared, "controller", "heartbeat.json")) or {}


def content_hash(source):
    """The content hash of the collection at ``source`` as the role computes it: the first 16 hex digits of the
    sha256 of the ``FILES.json`` that ``ansible-galaxy collection build`` writes (built here into a temp folder)."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "ansible.cli.galaxy", "collection", "build", "--force", "--output-path",
                        out, source], check=True, capture_output=True, text=True)
        tarball = os.path.join(out, next(n for n in os.listdir(out) if n.endswith(".tar.gz")))
        with tarfile.open(tarball) as tar:
            return hashlib.sha256(tar.extractfile("FILES.json").read()).hexdigest()[:16]


def wait_for_beat(cluster, expected_hash, since, timeout=120):
    """Wait until the heartbeat comes from a controller running ``expected_hash`` and written after ``since``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        beat = heartbeat(cluster)
        if (beat.get("content") or {}).get("hash") == expected_hash and float(beat.get("at") or 0) >= since:
            return beat
        time.sleep(1)
    raise CaseFailed("no heartbeat from a controller running content %s within %d s (last: %s)"
                     % (expected_hash, timeout, heartbeat(cluster)))


def wait_run_end(job, timeout=RUN_END_TIMEOUT):
    """The run's end record (``logs/run_end.json`` of its first attempt), waited for."""
    path = os.path.join(job.dir, "logs", "run_end.json")
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise CaseFailed("%s has no logs/run_end.json %d s after its submission" % (job.id, timeout))
        time.sleep(2)
    return read_json(path) or {}


def case_code_change(case):
    """See the module's docstring ("code change")."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    before = heartbeat(cluster)
    original_hash = content_hash(ROOT)
    case.check((before.get("content") or {}).get("hash") == original_hash,
               "the controller runs content %s, expected the checkout's %s" % (before.get("content"), original_hash))
    job = Job(case, "content-%s" % time.strftime("%H%M%S", time.gmtime()))
    run = case.play("submit.yml", ["-e", "workload=sft", "-e", "wait=false", "-e", "submission_id=" + job.id]
                    + extra_vars(trainer_overrides=OVERRIDES), label="submit sft wait=false")
    if run.rc != 0:
        raise CaseFailed("submit.yml rc=%s" % run.rc)
    while len(job.steps()) < 2:
        time.sleep(0.5)
    with open(EDITED, encoding="utf-8") as handle:
        text = handle.read()
    try:
        with open(EDITED, "a", encoding="utf-8") as handle:
            handle.write("# a change of the controller's code (tests/reliability/controller_content.py)\n")
        changed_hash = content_hash(ROOT)
        case.check(changed_hash != original_hash, "the edit did not change the content hash")
        since = time.time()
        site = case.play("site.yml", label="site.yml after the edit")
        case.check(site.rc == 0 and "its code changed" in site.text,
                   "site.yml rc=%s did not say the controller's code changed" % site.rc)
        beat = wait_for_beat(cluster, changed_hash, since)
        case.check(beat.get("pid") != before.get("pid"), "the controller kept its pid %s" % beat.get("pid"))
        case.check(not os.path.exists(os.path.join(job.dir, "logs", "run_end.json")) and job.id in beat.get("runs", []),
                   "%s was not followed by the restarted controller (its heartbeat: %s)" % (job.id, beat.get("runs")))
        case.note("edited: the controller restarted (pid %s -> %s, content %s -> %s) while %s trained at step %s"
                  % (before.get("pid"), beat.get("pid"), original_hash, changed_hash, job.id, max(job.steps())))
    finally:
        with open(EDITED, "w", encoding="utf-8") as handle:
            handle.write(text)
    step = max(job.steps())
    deadline = time.time() + 300
    while max(job.steps()) <= step:
        if time.time() > deadline:
            raise CaseFailed("%s logged no step after the controller's restart (last %d)" % (job.id, step))
        time.sleep(1)
    stop = case.play("stop.yml", ["-e", "submission_id=" + job.id], label="stop.yml")
    case.check(stop.rc == 0, "stop.yml rc=%s" % stop.rc)
    end = wait_run_end(job)
    case.check(end.get("state") == "ended" and (end.get("verdict") or {}).get("cause") == "stopped",
               "%s ended %s, expected ended by the restarted controller with its verdict (stopped)" % (job.id, end))
    case.note("%s trained on to step %d under the restarted controller, was stopped and ended with its record"
              % (job.id, max(job.steps())))
    since = time.time()
    site = case.play("site.yml", label="site.yml with the file put back")
    case.check(site.rc == 0, "site.yml rc=%s after the file was put back" % site.rc)
    back_hash = content_hash(ROOT)  # the checkout's content now (the same as before unless it was edited meanwhile)
    wait_for_beat(cluster, back_hash, since)
    case.note("the file put back, the controller runs %s again" % back_hash)


def case_installed(case):
    """See the module's docstring ("installed from anywhere")."""
    cluster = case.cluster
    case.ensure_cluster()
    case.wait_jobs_idle()
    folder = tempfile.mkdtemp(prefix="mvp-installed.")
    try:
        built = subprocess.run([sys.executable, "-m", "ansible.cli.galaxy", "collection", "build", "--force",
                                "--output-path", folder, ROOT], capture_output=True, text=True, check=True)
        tarball = os.path.join(folder, next(n for n in os.listdir(folder) if n.endswith(".tar.gz")))
        with tarfile.open(tarball) as tar:
            names = tar.getnames()
            expected_hash = hashlib.sha256(tar.extractfile("FILES.json").read()).hexdigest()[:16]
        case.check(not any(".secrets" in n for n in names), "the built collection holds secrets: %s"
                   % [n for n in names if ".secrets" in n])
        subprocess.run([sys.executable, "-m", "ansible.cli.galaxy", "collection", "install", "--no-deps", "-p",
                        os.path.join(folder, "collections"), tarball], capture_output=True, text=True, check=True)
        for name in ("local", "common"):
            shutil.copytree(os.path.join(ROOT, "inventories", name), os.path.join(folder, "inventories", name),
                            symlinks=True)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(folder, "collections"))
        env.pop("ANSIBLE_CONFIG", None)
        inventory = os.path.join(folder, "inventories", "local")

        def play(args, label, timeout=1800):
            started = time.time()
            done = subprocess.run(["ansible-playbook", "-i", inventory] + args, cwd=folder, env=env,
                                  capture_output=True, text=True, timeout=timeout, check=False)
            case.note("%s rc=%d %.0fs" % (label, done.returncode, time.time() - started))
            return done

        since = time.time()
        site = play(["mvp.ray.site"], "mvp.ray.site from the installed copy")
        if site.returncode != 0:
            raise CaseFailed("mvp.ray.site from %s rc=%d: %s" % (folder, site.returncode, site.stdout[-2000:]))
        wait_for_beat(cluster, expected_hash, since)
        settings = read_json(os.path.join("/var/lib/mvp-controller", cluster.container[cluster.head],
                                          "settings.json")) or {}
        installed_under = os.path.join("/var/lib/mvp-controller", cluster.container[cluster.head], "collections",
                                       expected_hash)
        case.check(settings.get("project_dir", "").startswith(installed_under),
                   "the controller's project_dir is %s, expected its own copy under %s"
                   % (settings.get("project_dir"), installed_under))
        case.check((settings.get("content") or {}).get("source", "").startswith(os.path.join(folder, "collections")),
                   "the controller's content came from %s, expected the installed copy"
                   % (settings.get("content") or {}).get("source"))
        job = Job(case, "installed-%s" % time.strftime("%H%M%S", time.gmtime()))
        submit = play(["mvp.ray.submit", "-e", "workload=selftest", "-e", "wait=false", "-e",
                       "submission_id=" + job.id], "mvp.ray.submit -e wait=false")
        if submit.returncode != 0:
            raise CaseFailed("mvp.ray.submit rc=%d: %s" % (submit.returncode, submit.stdout[-2000:]))
        end = wait_run_end(job, 600)
        case.check(end.get("state") == "ended" and end.get("trained") is True,
                   "%s ended %s, expected ended (the self-test succeeded)" % (job.id, end))
        case.note("%s ended by the controller running its installed copy %s (%s)" % (
            job.id, expected_hash, built.stdout.strip().splitlines()[-1]))
    finally:
        since = time.time()
        back = case.play("site.yml", label="site.yml from the checkout")
        shutil.rmtree(folder, ignore_errors=True)
        if back.rc != 0:
            raise CaseFailed("site.yml from the checkout rc=%s afterwards" % back.rc)
        wait_for_beat(cluster, content_hash(ROOT), since)


CASES = [
    ("code change", "a controller module edited, site.yml: the controller restarts with the new content (hash, pid) "
     "while a run trains, follows it on and ends it with its record", case_code_change),
    ("installed from anywhere", "built, installed into a fresh folder with the local inventory beside it: mvp.ray.site "
     "and mvp.ray.submit -e wait=false from there; the controller runs its installed copy and ends the run",
     case_installed),
]


def main():
    """Run the table and print it; return the exit code."""
    parser = suite_parser(__doc__, CASES)
    args = parser.parse_args()
    return run_cases(CASES, Cluster(args.inventory, args.host_shared), args.only, "controller content", lambda c: None)


if __name__ == "__main__":
    sys.exit(main())
