# -*- coding: utf-8 -*-
"""Several small text files written into one folder, each only when its content differs.

Shared by the module ray_text_files and its action plugin, which writes them in the controller's own process when
the task runs on the controller over the local connection (no module process: issue 52).
"""

from __future__ import annotations

import hashlib
import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import octal_mode, write_text_if_changed


def write_files(dest, files, mode, dir_mode, check_mode=False):
    """Write ``files`` (dict name -> text) into ``dest`` where they differ.

    :param dest: str, the folder (made with ``dir_mode`` when missing, unless ``check_mode``).
    :param files: dict str -> str; a name with a folder part, ``.`` or ``..`` raises ValueError.
    :param mode: int, permission bits of the files written.
    :param dir_mode: int, permission bits of a folder made now.
    :param check_mode: bool, write nothing.
    :returns: tuple (written: list of names, results: list of dicts name/path/checksum).
    :raises ValueError: for a bad name; OSError when the folder or a file cannot be written.
    """
    bad = [name for name in files if not name or os.path.basename(name) != name or name in (".", "..")]
    if bad:
        raise ValueError("file names must not hold a folder part: %s" % ", ".join(repr(name) for name in bad))
    if not os.path.isdir(dest) and not check_mode:
        os.makedirs(dest, exist_ok=True)
        os.chmod(dest, dir_mode)
    written, results = [], []
    for name, text in files.items():
        path = os.path.join(dest, name)
        if write_text_if_changed(path, text, mode=mode, check_mode=check_mode):
            written.append(name)
        results.append({"name": name, "path": path, "checksum": hashlib.sha1(text.encode("utf-8")).hexdigest()})
    return written, results


def text_files_result(dest, files, mode, dir_mode, check_mode=False):
    """``write_files`` as a task result: the module's and the action plugin's (they must not differ).

    :param dest: str, the folder. :param files: dict name -> text (``None`` is written as empty).
    :param mode: str, octal bits of the files (``"0644"``). :param dir_mode: str, octal bits of a folder made now.
    :param check_mode: bool, write nothing.
    :returns: dict ``changed``/``written``/``results`` (see the module's RETURN), or ``failed`` with ``msg`` naming
        the option (``mode``, ``dir_mode``, ``files``) or the folder (never raises).
    """
    modes = {}
    for name, text in (("mode", mode), ("dir_mode", dir_mode)):
        try:
            modes[name] = octal_mode(text)
        except ValueError as exc:
            return {"failed": True, "msg": "%s %s" % (name, exc)}
    files = {str(name): "" if text is None else str(text) for name, text in files.items()}
    try:
        written, results = write_files(dest, files, modes["mode"], modes["dir_mode"], check_mode)
    except ValueError as exc:
        return {"failed": True, "msg": "files: %s" % exc}
    except OSError as exc:
        return {"failed": True, "msg": "cannot write into %s: %s" % (dest, exc)}
    return {"changed": bool(written), "written": written, "results": results}
