"""Helpers shared by the reliability suites (bad_inputs.py, faults.py): file listings and the result table."""

import hashlib
import os


def listing(folder, hashes=False, skip_dir=None):
    """Return {relative path: (size, mtime_ns[, sha256])} of every file and folder under ``folder``.

    :param hashes: bool, add the sha256 of each regular file's bytes.
    :param skip_dir: compiled regex or None; folders whose name matches are not entered or listed.
    """
    state = {}
    for dirpath, dirnames, filenames in os.walk(folder):
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


def print_table(header, rows, suite, failures):
    """Print ``rows`` under ``header`` as ``a | b | c`` columns, then ``<suite>: N passed, M failed``.

    :param header: tuple of column titles.
    :param rows: list of tuples, as long as ``header``.
    :param suite: str, name in the closing line (``bad inputs``, ``faults``).
    :param failures: int, rows that failed.
    :returns: int, the exit code (1 when any row failed, else 0).
    """
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        print(" | ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    print("%s: %d passed, %d failed" % (suite, len(rows) - failures, failures))
    return 1 if failures else 0
