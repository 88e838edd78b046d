# -*- coding: utf-8 -*-
"""Action plugin ray_text_files: write the files in the controller's own process when the task runs here.

Documented in plugins/modules/ray_text_files.py (Ansible reads an action plugin's documentation there).
On the local connection as the same user (the docker host that is this machine: the node entrypoint's files, issue
52) the work is ``mvp_text_files.text_files_result``, done here - a module process for it cost 0.7 s of every cold
bring-up. Any other task (a remote docker host, become) runs the module.
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.mvp.ray.plugins.module_utils.mvp_text_files import text_files_result
from ansible_collections.mvp.ray.plugins.plugin_utils.mvp_in_process import on_controller, path_option

MODULE = "mvp.ray.ray_text_files"
OPTIONS = ("dest", "files", "mode", "dir_mode")


class ActionModule(ActionBase):
    """Write the text files in process on the controller; else run the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        """Return the module's result for this task (see the module's RETURN)."""
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        plain = (set(args) <= set(OPTIONS) and bool(args.get("dest")) and isinstance(args.get("files"), dict))
        if not (plain and on_controller(self._connection, self._play_context)):
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            return result
        result.update(text_files_result(path_option(args["dest"]), args["files"], str(args.get("mode") or "0644"),
                                        str(args.get("dir_mode") or "0755"), bool(self._task.check_mode)))
        return result
