# -*- coding: utf-8 -*-
"""The controller's secret files (the Ray auth token, the tracking server's password): kept when 0600, else refused,
generated when missing.

Shared by the module ray_auth_token_file and its action plugin, which runs ``generate_token`` in the controller's own
process when the task runs on the controller over the local connection (no module process: issue 52).
"""

from __future__ import annotations

import os
import secrets
import stat

from ansible_collections.mvp.ray.plugins.module_utils.mvp_files import octal_mode, write_text_if_changed

TOKEN_MODE = 0o600
"""Permission bits of a token file: its owner only."""

TOKEN_BYTES = 32
"""Random bytes of a generated token (256 bits, Python ``secrets``; URL-safe base64 text of 43 characters)."""


def kept_token_problem(path):
    """Return why the token file ``path`` cannot be kept ('' when it can): its mode must be 0600.

    :param path: str, an existing path.
    :returns: str, the problem naming ``path`` and the fix, or ''.
    """
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return "The Ray auth token file %s is not a regular file: remove it (site.yml then generates a new " \
               "token) or set mvp_ray_auth_token_file to a file." % path
    mode = stat.S_IMODE(info.st_mode)
    if mode != TOKEN_MODE:
        return "The Ray auth token file %s has mode %04o; only its owner may read it: run `chmod 0600 %s` " \
               "(if others could read it, delete it instead: site.yml generates a new token and restarts " \
               "the cluster with it)." % (path, mode, path)
    if info.st_size == 0:
        return "The Ray auth token file %s is empty: delete it (site.yml generates a new token) or put the " \
               "cluster's token in it." % path
    return ""


def generate_token(path, dir_mode, check_mode=False):
    """Keep the token file ``path`` (0600) or, when it is missing, write a new random token there.

    :param path: str, the controller's token file. :param dir_mode: int, bits of a folder made now.
    :param check_mode: bool, change nothing, only say what would change.
    :returns: tuple (changed: bool, problem: str); ``problem`` non-empty: the file is refused.
    :raises OSError: when the folder or the file cannot be written.
    """
    if os.path.lexists(path):
        return False, kept_token_problem(path)
    folder = os.path.dirname(path) or "."
    if not check_mode:
        os.makedirs(folder, mode=dir_mode, exist_ok=True)
        write_text_if_changed(path, secrets.token_urlsafe(TOKEN_BYTES), mode=TOKEN_MODE)
    return True, ""


def generate_result(path, dir_mode, check_mode=False):
    """``generate_token`` as a task result: the module's and the action plugin's (they must not differ).

    :param path: str, the controller's token file (mvp_ray_auth_token_file or mvp_mlflow_password_file).
    :param dir_mode: str, octal bits of a folder made now (``"0700"``).
    :param check_mode: bool, change nothing, only say what would change.
    :returns: dict, ``changed``/``path``/``written``, or ``failed`` with ``msg`` naming the file or the option and
        the fix (never raises; the token is never in it).
    """
    try:
        changed, problem = generate_token(path, octal_mode(dir_mode), check_mode)
    except ValueError as exc:
        return {"failed": True, "msg": "dir_mode %s" % exc}
    except OSError as exc:
        return {"failed": True, "msg": "cannot write the Ray auth token file %s (mvp_ray_auth_token_file): %s"
                                       % (path, exc.strerror or exc)}
    if problem:
        return {"failed": True, "msg": problem, "path": path}
    return {"changed": changed, "path": path, "written": changed}
