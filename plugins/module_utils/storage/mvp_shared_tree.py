# -*- coding: utf-8 -*-
"""The shared tree: the folders under the shared storage every job and node expects, made where missing.

Shared by the module ray_shared_tree and its action plugin, which makes them in the controller's own process when the
task runs on the controller over the local connection - the docker host that is this machine, whose folder
(mvp_host_shared_dir) the node containers mount (no module process: issue 52).
"""

from __future__ import annotations

import os

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import octal_mode


def plan(root, dirs):
    """Return (missing, not_folders): absolute paths of ``dirs`` under ``root`` to create, and those in the way.

    :param root: str, existing folder.
    :param dirs: list of str, relative paths; ``..`` components are refused with ValueError.
    :raises ValueError: for an absolute path or one that leaves ``root``.
    """
    missing, in_the_way = [], []
    for rel in dirs:
        if os.path.isabs(rel) or ".." in rel.split("/"):
            raise ValueError("%r is not a folder relative to %s" % (rel, root))
        path = os.path.join(root, rel)
        if os.path.isdir(path):
            continue
        (in_the_way if os.path.lexists(path) else missing).append(path)
    return missing, in_the_way


def tree_result(root, dirs, mode, check_mode=False):
    """Make the folders ``dirs`` (list of str, relative) under ``root`` (str) with ``mode`` (str, octal); a task result.

    :param check_mode: bool, make nothing, only say what would be made.
    :returns: dict ``changed``/``created`` (absolute paths made now), or ``failed`` with ``msg`` naming the setting
        (mvp_shared_root, mvp_host_shared_dir, shared_storage_dirs) and the fix; never raises, removes or replaces.
    """
    if not os.path.isdir(root):
        return {"failed": True, "msg": "%s (mvp_shared_root; on a docker host mvp_host_shared_dir) is not a folder: "
                                       "mount the shared storage there." % root}
    try:
        bits = octal_mode(mode)
        missing, in_the_way = plan(root, dirs)
    except ValueError as exc:
        return {"failed": True, "msg": "Bad shared_storage_dirs entry or mode: %s" % exc}
    if in_the_way:
        return {"failed": True, "msg": "Not folders, refusing to replace them: %s. Move them away and re-run."
                                       % ", ".join(in_the_way)}
    if not check_mode:
        for path in missing:
            os.makedirs(path, exist_ok=True)
            os.chmod(path, bits)
    return {"changed": bool(missing), "created": missing}
