# -*- coding: utf-8 -*-
"""Action plugin ray_shared_tree: make the shared tree in the controller's own process when the task runs here.

Documented in plugins/modules/ray_shared_tree.py (Ansible reads an action plugin's documentation there).
On the local connection as the same user (the docker host that is this machine: its folder mvp_host_shared_dir is
what the node containers mount at mvp_shared_root) the work is ``mvp_shared_tree.tree_result``, done here - a
module call for it cost 0.5-0.8 s of every cold bring-up (issue 52). Any other task runs the module.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.mvp.ray.plugins.module_utils.mvp_shared_tree import tree_result
from ansible_collections.mvp.ray.plugins.plugin_utils.mvp_in_process import on_controller, path_option

MODULE = "mvp.ray.ray_shared_tree"
OPTIONS = ("root", "dirs", "mode")


class ActionModule(ActionBase):
    """Make the shared tree in process on the controller; else run the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        """Return the module's result for this task (see the module's RETURN)."""
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        plain = set(args) <= set(OPTIONS) and bool(args.get("root")) and isinstance(args.get("dirs"), list)
        if not (plain and on_controller(self._connection, self._play_context)):
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            return result
        result.update(tree_result(path_option(args["root"]), [str(d) for d in args["dirs"]],
                                  str(args.get("mode") or "0775"), bool(self._task.check_mode)))
        return result
