# -*- coding: utf-8 -*-
"""Files for the project's modules: atomic text (job directory, placement, logs, bundles, probes, node
settings), JSON objects and sha256 digests read back.

A file is written under a temporary name in its own folder, then renamed over the
destination, so a reader (a running job, a user, another node over NFS) sees the old
content or the new one, never half of it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile


def write_text_atomic(path, text, mode=0o644):
    """Write ``text`` (str) to ``path`` through a temporary file and a rename.

    :param path: str, destination; its folder is created when missing.
    :param text: str, the whole content (UTF-8).
    :param mode: int, permission bits of the file (default 0o644).
    :raises OSError: when the folder cannot be written; the temporary file is removed.
    """
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def differs(path, text):
    """Whether ``path`` is missing, unreadable as UTF-8 or holds something else than ``text`` (bool)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read() != text
    except (OSError, ValueError):
        return True


def write_text_if_changed(path, text, mode=0o644, check_mode=False):
    """Write ``text`` to ``path`` atomically (:func:`write_text_atomic`) unless it already holds exactly that.

    :param path: str, destination; its folder is created when missing.
    :param text: str, the whole content (UTF-8).
    :param mode: int, permission bits of a file written now (default 0o644).
    :param check_mode: bool, only say whether it would be written.
    :returns: bool, True when the file was (or would be) written.
    :raises OSError: when it cannot be written.
    """
    if not differs(path, text):
        return False
    if not check_mode:
        write_text_atomic(path, text, mode)
    return True


def mtime(path, missing=None):
    """The modification time of ``path`` (float seconds since the epoch), ``missing`` when it cannot be read."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return missing


def read_json(path):
    """The JSON object in ``path``, or {} when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def sha256_file(path, missing=None):
    """Return the hex sha256 of a file's bytes, read in 1 MiB blocks.

    :param path: str, the file.
    :param missing: returned when the file cannot be read (or ``path`` is empty); None (the default)
        raises instead.
    :raises OSError: when it cannot be read and *missing* is None.
    """
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        if missing is None:
            raise
        return missing
    return digest.hexdigest()


def octal_mode(text):
    """Permission bits from an octal mode string such as ``"0644"`` (int).

    :raises ValueError: naming the text, when it is not octal.
    """
    try:
        return int(str(text), 8)
    except ValueError:
        raise ValueError("%r is not an octal mode such as '0644'" % (text,))
