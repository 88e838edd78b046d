"""Helpers shared by the reliability suites (bad_inputs.py, faults.py): file listings, Ray's tables read in the
head container, and the result table."""

import hashlib
import json
import os
import subprocess

# Runs on the head with the Ray venv: its node table and job table as JSON.
HEAD_STATE_PY = r"""
import json, os, sys
token = sys.argv[2]
if os.path.isfile(token) and os.path.getsize(token) > 0:
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_AUTH_TOKEN_PATH", token)
from ray.util.state import list_nodes
from ray.job_submission import JobSubmissionClient
address = sys.argv[1]
nodes = [{"node_id": n.node_id, "node_ip": n.node_ip, "state": str(getattr(n.state, "value", n.state)),
          "is_head_node": bool(n.is_head_node)} for n in list_nodes(address=address, limit=10000)]
jobs = [{"submission_id": j.submission_id, "status": str(getattr(j.status, "value", j.status)),
         "job_id": j.job_id or ""}
        for j in JobSubmissionClient(address).list_jobs()]
print(json.dumps({"nodes": nodes, "jobs": jobs}))
"""


def head_state(container, python, address, token_path=""):
    """Ray's node and job tables, read inside the head's container with its Ray venv.

    :param container: str, the head's container name; :param python: its Python with Ray;
    :param address: the Jobs/State API as seen in the head; :param token_path: Ray's auth
        token file there ('' or a missing file: no token).
    :returns: dict {"nodes": [...], "jobs": [{"submission_id", "status"}]}, or None when the head does not answer.
    """
    proc = subprocess.run(["docker", "exec", container, python, "-c", HEAD_STATE_PY, address, token_path],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])

# Runs on the head with the Ray venv: the actors of one class (any state, dead ones included) as JSON.
ACTORS_PY = r"""
import json, os, sys
token = sys.argv[2]
if os.path.isfile(token) and os.path.getsize(token) > 0:
    os.environ.setdefault("RAY_AUTH_MODE", "token")
    os.environ.setdefault("RAY_AUTH_TOKEN_PATH", token)
from ray.util.state import list_actors
actors = list_actors(address=sys.argv[1], filters=[("class_name", "=", sys.argv[3])], detail=True, limit=10000)
print(json.dumps([{"actor_id": a.actor_id, "job_id": a.job_id, "state": str(a.state), "name": a.name or "",
                   "ray_namespace": getattr(a, "ray_namespace", "") or ""} for a in actors]))
"""


def actors_of_class(container, python, address, class_name, token_path=""):
    """Ray's actor table rows of one class, read on the head (State API ``list_actors``, dead actors included).

    :returns: list of dict {"actor_id", "job_id", "state", "name", "ray_namespace"}; raises RuntimeError when
        the head does not answer.
    """
    proc = subprocess.run(["docker", "exec", container, python, "-c", ACTORS_PY, address, token_path, class_name],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode:
        raise RuntimeError("list_actors on the head failed: %s" % proc.stderr.strip()[-500:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


# The job controller's folder under the shared root: its heartbeat, rewritten at every pass while it runs, is
# no play's change; the before/after listings leave it out.
CONTROLLER_DIR = "controller"


def listing(folder, hashes=False, skip_dir=None):
    """Return {relative path: (size, mtime_ns[, sha256])} of every file and folder under ``folder``.

    The job controller's folder right under ``folder`` (``CONTROLLER_DIR``) is left out.

    :param hashes: bool, add the sha256 of each regular file's bytes.
    :param skip_dir: compiled regex or None; folders whose name matches are not entered or listed.
    """
    state = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        if dirpath == folder:
            dirnames[:] = [d for d in dirnames if d != CONTROLLER_DIR]
        if skip_dir is not None:
            dirnames[:] = [d for d in dirnames if not skip_dir.match(d)]
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            try:
                info = os.lstat(path)
            except FileNotFoundError:
                continue
            entry = (info.st_size, info.st_mtime_ns)
            if hashes and name in filenames and os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    entry += (hashlib.sha256(handle.read()).hexdigest(),)
            state[os.path.relpath(path, folder)] = entry
    return state


def differences(before, after):
    """Return the sorted relative paths added, removed or modified between two listings."""
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def print_table(header, rows, suite, failures, skipped=0):
    """Print ``rows`` under ``header`` as ``a | b | c`` columns, then ``<suite>: N passed, M failed[, K skipped]``.

    :param header: tuple of column titles.
    :param rows: list of tuples, as long as ``header``.
    :param suite: str, name in the closing line (``bad inputs``, ``faults``).
    :param failures: int, rows that failed (a case skipped that the scenario did not declare counts here).
    :param skipped: int, rows skipped that the scenario declared expected (neither passed nor failed).
    :returns: int, the exit code (1 when any row failed, else 0).
    """
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    print("%s: %d passed, %d failed%s" % (suite, len(rows) - failures - skipped, failures,
                                           ", %d skipped (declared expected)" % skipped if skipped else ""))
    return 1 if failures else 0


def skipped_row(name, expected, reason, declared):
    """The table row of a case that did not run: ``SKIPPED`` when the scenario declared it expected, else
    ``FAIL`` - a skip nobody declared must not pass as a pass.

    :param name: str, the case; :param expected: str, its expected message; :param reason: str, why it did not
        run; :param declared: bool, the scenario named it (``--expect-skipped``).
    :returns: tuple (name, expected, observed, files changed, result) as the suites' rows.
    """
    return (name, expected, "not run: " + reason, 0, "SKIPPED" if declared else "FAIL (skipped, not declared)")
