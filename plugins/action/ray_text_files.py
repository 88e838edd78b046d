# -*- coding: utf-8 -*-
"""Action plugin ray_text_files: write the files in the controller's own process when the task runs here.

Documented in plugins/modules/ray_text_files.py (Ansible reads an action plugin's documentation there).
On the local connection as the same user (the docker host that is this machine: the node entrypoint's files; issue
52) the work is ``mvp_text_files.text_files_result``, done here - a module process for it
cost 0.7 s of every cold bring-up. Any other task (a remote docker host, become) runs the module.
"""

from __future__ import annotations

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_text_files import text_files_result
from ansible_collections.mvp.ray.plugins.plugin_utils.mvp_in_process import InProcessAction, path_option


class ActionModule(InProcessAction):
    """Write the text files in process on the controller; else run the module."""

    MODULE = "mvp.ray.ray_text_files"
    OPTIONS = ("dest", "files", "mode", "dir_mode")

    def handles(self, args):
        """A folder and a mapping of files (anything else: the module says what is wrong)."""
        return bool(args.get("dest")) and isinstance(args.get("files"), dict)

    def work(self, args, check_mode):
        """``text_files_result`` for the task's files, as the module returns it."""
        return text_files_result(path_option(args["dest"]), args["files"], str(args.get("mode") or "0644"),
                                 str(args.get("dir_mode") or "0755"), check_mode)
