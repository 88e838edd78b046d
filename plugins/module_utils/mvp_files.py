# -*- coding: utf-8 -*-
"""Atomic text files for the project's modules (job directory, placement, logs, bundles, probes).

A file is written under a temporary name in its own folder, then renamed over the
destination, so a reader (a running job, a user, another node over NFS) sees the old
content or the new one, never half of it.
"""

from __future__ import annotations

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
