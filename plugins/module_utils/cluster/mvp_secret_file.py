# -*- coding: utf-8 -*-
"""The controller's secret files (the Ray auth token, the tracking server's password): kept when 0600, else refused,
generated when missing.

Shared by the module ray_auth_token_file and its action plugin, which runs ``generate_token`` in the controller's own
process when the task runs on the controller over the local connection (no module process: issue 52), and by the
modules ray_head and ray_worker, which write a node's token file (``node_token_result``) in the call that starts Ray.
"""

from __future__ import annotations

import os
import secrets
import stat

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import octal_mode, write_text_if_changed

TOKEN_MODE = 0o600
"""Permission bits of a token file: its owner only."""

TOKEN_BYTES = 32
"""Random bytes of a generated token (256 bits, Python ``secrets``; URL-safe base64 text of 43 characters)."""


def ensure_mode(path, mode, check_mode):
    """Give ``path`` the permission bits ``mode`` (int); return True when they were (or would be) changed."""
    if stat.S_IMODE(os.stat(path).st_mode) == mode:
        return False
    if not check_mode:
        os.chmod(path, mode)
    return True


def write_token(path, token, dir_mode, check_mode=False):
    """Make the folder of ``path``, write ``token`` there (0600) unless it already holds it.

    :param path: str, the token file.
    :param token: str, the token (written as is, without a newline).
    :param dir_mode: int, permission bits of the folder.
    :param check_mode: bool, change nothing, only say what would change.
    :returns: tuple (changed: bool, written: bool).
    :raises OSError: when the folder or the file cannot be written.
    """
    folder = os.path.dirname(path) or "."
    changed = False
    if not os.path.isdir(folder):
        changed = True
        if not check_mode:
            os.makedirs(folder, exist_ok=True)
    if os.path.isdir(folder):
        changed = ensure_mode(folder, dir_mode, check_mode) or changed
    written = write_text_if_changed(path, token, mode=TOKEN_MODE, check_mode=check_mode)
    if not written and os.path.exists(path):
        changed = ensure_mode(path, TOKEN_MODE, check_mode) or changed
    return changed or written, written


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


NODE_TOKEN_DIR_MODE = 0o777
"""Bits of the folder of a node's token file (the Ray temp dir: what ``ray start`` sets on it)."""


def node_token_result(path, token, check_mode=False):
    """Write a node's Ray auth token file (0600, its folder 0777) unless it holds ``token``; a task result.

    :param path: str, the node's token file (mvp_ray_auth_token_path); '' - token auth is off, nothing is written.
    :param token: str, the token; empty with a path is refused (the controller's file was not generated).
    :param check_mode: bool, change nothing, only say what would change.
    :returns: dict - ``changed``/``written`` (bools), or ``failed`` with ``msg`` naming the setting and the fix
        (never raises; the token is never in it).
    """
    if not path:
        return {"changed": False, "written": False}
    if not token:
        return {"failed": True, "msg": "The Ray auth token is empty: set mvp_ray_auth_token (Vault), or run the "
                                       "ray_auth_token role first (site.yml/cluster.yml does) so that it generates "
                                       "mvp_ray_auth_token_file."}
    try:
        changed, written = write_token(path, token, NODE_TOKEN_DIR_MODE, check_mode)
    except OSError as exc:
        return {"failed": True, "msg": "Cannot write the Ray auth token file %s (mvp_ray_auth_token_path): %s"
                                       % (path, exc.strerror or exc)}
    return {"changed": changed, "written": written}


NODE_TOKEN_ARGS = dict(
    auth_token=dict(type="str", default="", no_log=True),
    auth_token_path=dict(type="path", default=""),
)
"""argument_spec entries of the modules that start Ray on a node (ray_head, ray_worker): its token file."""


def write_node_token(module):
    """Write the node's token file from the module's I(auth_token)/I(auth_token_path) before Ray starts.

    Fails the module with ``node_token_result``'s message on a problem. Every later ``exit_json`` of ``module``
    carries ``auth_token_written`` and counts a written file as a change (the wrapper below), so the modules need
    not repeat it at each of their exits.

    :param module: AnsibleModule with NODE_TOKEN_ARGS among its options.
    :returns: bool, whether the file was (or in check mode would be) written.
    """
    result = node_token_result(module.params["auth_token_path"] or "", module.params["auth_token"] or "",
                               module.check_mode)
    if result.get("failed"):
        module.fail_json(msg=result["msg"])
    exit_json = module.exit_json

    def exit_with_token(**kwargs):
        """``module.exit_json`` with the token file's part of the result."""
        kwargs["changed"] = bool(kwargs.get("changed")) or result["changed"]
        kwargs["auth_token_written"] = result["written"]
        exit_json(**kwargs)

    module.exit_json = exit_with_token
    return result["written"]
