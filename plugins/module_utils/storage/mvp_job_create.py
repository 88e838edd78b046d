# -*- coding: utf-8 -*-
"""Create a job directory exclusively and write its files (module_utils of ray_job's submission).

The layout itself - the id rule, the folders, every file's name - is the job contract, ``mvp_job.py``.

A job directory (``<shared_root>/jobs/<submission_id>``, its folders ``mvp_job.SUBDIRS``) is made
with one ``mkdir`` that fails when it exists, so two submissions never share one and an
existing one is never reused or overwritten; every file is written to a temporary name and
renamed (``mvp_files.write_text_atomic``).
"""

from __future__ import annotations

import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import differs, octal_mode, write_text_atomic
from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import SUBDIRS


class JobDirError(Exception):
    """A job directory that cannot be made: it exists, or a path leaves it (the message says which)."""


def safe_join(root, rel):
    """Join ``rel`` under ``root``; raise ValueError for a path leaving ``root``.

    ``rel`` is relative to ``root``, or absolute inside it (the job spec's ``paths``).
    """
    if os.path.isabs(rel):
        if not os.path.normpath(rel).startswith(os.path.normpath(root) + os.sep):
            raise ValueError("%r must be a path inside %s" % (rel, root))
        rel = os.path.relpath(os.path.normpath(rel), os.path.normpath(root))
    if ".." in rel.replace("\\", "/").split("/"):
        raise ValueError("%r must be a path inside %s" % (rel, root))
    return os.path.join(root, rel)


def create_job_dir(job_dir, files=None, subdirs=SUBDIRS, mode="0775", shared_files=None, check_mode=False,
                   links=None):
    """Make ``job_dir`` with one ``mkdir`` (fails if it exists), its ``subdirs``, ``files`` and ``links``.

    :param job_dir: str, absolute path; its parent must exist.
    :param files: dict path -> text; a path relative to ``job_dir`` or absolute inside it.
    :param subdirs: iterable of str, folders made inside ``job_dir``.
    :param mode: str, octal mode of the folders (files get 0644).
    :param shared_files: dict absolute path -> text, written before, only where the content differs.
    :param check_mode: bool, say what would be written and write nothing.
    :param links: dict path -> target of symbolic links made inside ``job_dir`` (their folders made as needed);
        a target is written as given (a relative one is read from the link's folder), never followed or
        changed here: a resume's view of an earlier attempt's checkpoint (mvp_resume.plan).
    :returns: sorted list of the absolute paths written (shared files that changed, then the job's files
        and links).
    :raises JobDirError: when ``job_dir`` exists (nothing is written then), a path leaves it or
        ``mode`` is not octal.
    """
    try:
        octal = octal_mode(mode)
        folders = [safe_join(job_dir, d) for d in subdirs]
        texts = {safe_join(job_dir, rel): str(text) for rel, text in (files or {}).items()}
        made_links = {safe_join(job_dir, rel): str(target) for rel, target in (links or {}).items()}
    except ValueError as exc:
        raise JobDirError("job directory: %s" % exc)
    if os.path.lexists(job_dir):
        raise JobDirError("job directory %s exists: job directories are never reused; choose another "
                          "submission_id or omit it to get a fresh one." % job_dir)
    shared = {p: str(t) for p, t in (shared_files or {}).items() if differs(p, str(t))}
    written = sorted(shared) + sorted(list(texts) + list(made_links))
    if check_mode:
        return written
    for path, text in shared.items():
        write_text_atomic(path, text)
    try:
        os.mkdir(job_dir, octal)
    except FileExistsError:
        raise JobDirError("job directory %s was created by someone else a moment ago: choose another "
                          "submission_id or omit it to get a fresh one." % job_dir)
    os.chmod(job_dir, octal)
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, octal)
    for path, text in texts.items():
        write_text_atomic(path, text)
    for path, target in made_links.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)
    return written
