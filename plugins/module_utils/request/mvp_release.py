# -*- coding: utf-8 -*-
"""Which verl releases the nodes' platform layer runs, and whether a code snapshot is one of them.

A platform layer of a node image (the CPU plugin of ``images/verl-cpu``; a GPU image's pins) declares the
verl releases it runs through an entry point of the group ``mvp.platform``: an object (a dict) with ``layer``
(str, what it is), ``verl`` (str, a version specifier such as ``>=0.9.0,<0.10``) and ``why``. The head's look
before a submission (``mvp_submit_check.look``) reads them in the nodes' Python (:data:`PLATFORM_SCRIPT`) and
the snapshot's version from ``<snapshot>/verl/version/version`` (verl's own file), and the refusals
(``mvp_refuse``) compare the two with :func:`release_problem`. Nodes whose image declares nothing are not
judged.

Standard library only; versions are compared by their release numbers (``0.8.0.dev`` is 0.8.0, which is
below ``0.9.0`` and equal to ``0.8.0`` for ``==``; pre- and dev-releases are not ordered below their release).
"""

from __future__ import annotations

import json
import os
import re
import subprocess

# Run as [python, "-I", "-c", PLATFORM_SCRIPT]: prints one JSON list of the declared platform layers.
PLATFORM_SCRIPT = r'''
import json
from importlib.metadata import entry_points
out = []
for point in entry_points(group="mvp.platform"):
    try:
        value = point.load()
        out.append(dict(value, name=point.name) if isinstance(value, dict) else {"name": point.name, "error": "not a dict"})
    except Exception as exc:  # a broken declaration is reported, not fatal
        out.append({"name": point.name, "error": "%s: %s" % (type(exc).__name__, exc)})
print(json.dumps(out))
'''
_CLAUSE_RE = re.compile(r"^\s*(==|!=|>=|<=|>|<|~=)\s*([0-9]+(?:\.[0-9]+)*)(?:\.\*)?\s*$")


def release_numbers(text):
    """The release numbers of a version text: ``"0.9.1"`` -> (0, 9, 1); ``"0.8.0.dev"`` -> (0, 8, 0).

    :param text: str.
    :returns: tuple of int, or None when the text does not start with a number.
    """
    match = re.match(r"^\s*v?([0-9]+(?:\.[0-9]+)*)", str(text or ""))
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def _padded(left, right):
    """Both tuples padded with zeros to the same length."""
    size = max(len(left), len(right))
    return left + (0,) * (size - len(left)), right + (0,) * (size - len(right))


def in_range(version, specifier):
    """Whether ``version`` satisfies every comma-separated clause of ``specifier``.

    :param version: str, e.g. ``0.9.1``.
    :param specifier: str, clauses joined by commas, each an operator (``==``, ``!=``, ``>=``, ``<=``, ``>``,
        ``<``, ``~=``) and release numbers (``==0.9.*`` matches every 0.9 release).
    :returns: bool.
    :raises ValueError: for a version or clause that cannot be read, naming it.
    """
    have = release_numbers(version)
    if have is None:
        raise ValueError("version %r has no release numbers" % (version,))
    for clause in [c for c in str(specifier).split(",") if c.strip()]:
        match = _CLAUSE_RE.match(clause)
        if not match:
            raise ValueError("clause %r of %r is not an operator and a version" % (clause.strip(), specifier))
        operator, want_text = match.groups()
        want = release_numbers(want_text)
        if clause.strip().endswith(".*"):
            same = have[:len(want)] == want
            if (operator == "==" and not same) or (operator == "!=" and same):
                return False
            continue
        left, right = _padded(have, want)
        if operator == "~=":
            ok = left >= right and have[:len(want) - 1] == want[:len(want) - 1]
        else:
            ok = {"==": left == right, "!=": left != right, ">=": left >= right, "<=": left <= right,
                  ">": left > right, "<": left < right}[operator]
        if not ok:
            return False
    return True


def snapshot_version(snapshot):
    """The verl version of a code snapshot, from verl's own ``verl/version/version`` file.

    :param snapshot: str, the snapshot folder.
    :returns: str, or None when the file is missing or empty.
    """
    try:
        with open(os.path.join(snapshot, "verl", "version", "version"), encoding="utf-8") as handle:
            return handle.read(200).strip() or None
    except OSError:
        return None


def platform_layers(python, timeout=30):
    """The platform layers the nodes' Python declares (entry point group ``mvp.platform``).

    :param python: str, the nodes' Python.
    :param timeout: int, seconds.
    :returns: list of dicts (``name``, ``layer``, ``verl``, ``why``, or ``error``); [] when Python cannot run it.
    """
    try:
        done = subprocess.run([python, "-I", "-c", PLATFORM_SCRIPT], capture_output=True, text=True,
                              timeout=timeout, check=False)
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() else []
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return []


def release_problem(release, code_id, accepted=False):
    """Say why the snapshot's verl release is outside what a platform layer runs ("" when it is inside).

    :param release: dict from the look (``version``: the snapshot's, ``platforms``: :func:`platform_layers`), or
        None when it was not looked at.
    :param code_id: str, the snapshot's name (for the message).
    :param accepted: bool, the request's ``accept_unsupported_release``: no problem.
    :returns: str, the message naming the version, the layer and its range, and the fix; or "".
    """
    if not release or accepted:
        return ""
    version = release.get("version")
    for layer in release.get("platforms") or []:
        wanted = layer.get("verl")
        if not wanted or layer.get("error"):
            continue
        try:
            inside = version is not None and in_range(version, wanted)
        except ValueError:
            inside = False
        if not inside:
            return ("code_id %s is verl %s, outside the releases this cluster's platform layer runs: %s runs verl "
                    "%s (%s). Fix: pick a snapshot in that range (code_id), or set accept_unsupported_release: true "
                    "in the request to submit anyway." % (
                        code_id, version or "of unknown version (no verl/version/version)", layer.get("layer") or
                        layer.get("name"), wanted, layer.get("why") or "declared by the node image"))
    return ""
