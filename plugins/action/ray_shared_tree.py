# -*- coding: utf-8 -*-
"""Action plugin ray_shared_tree: make the shared tree in the controller's own process when the task runs here.

Documented in plugins/modules/ray_shared_tree.py (Ansible reads an action plugin's documentation there).
On the local connection as the same user (the docker host that is this machine: its folder mvp_host_shared_dir is
what the node containers mount at mvp_shared_root) the work is ``mvp_shared_tree.tree_result``, done here - a
module call for it cost 0.5-0.8 s of every cold bring-up (issue 52). Any other task runs the module.
"""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_shared_tree import tree_result
from ansible_collections.mvp.ray.plugins.plugin_utils.mvp_in_process import InProcessAction, path_option


class ActionModule(InProcessAction):
    """Make the shared tree in process on the controller; else run the module."""

    MODULE = "mvp.ray.ray_shared_tree"
    OPTIONS = ("root", "dirs", "mode")

    def handles(self, args):
        """A root and a list of folders (anything else: the module says what is wrong)."""
        return bool(args.get("root")) and isinstance(args.get("dirs"), list)

    def work(self, args, check_mode):
        """``tree_result`` for the task's folders, as the module returns it."""
        return tree_result(path_option(args["root"]), [str(d) for d in args["dirs"]], str(args.get("mode") or "0775"),
                           check_mode)
