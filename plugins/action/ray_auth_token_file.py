# -*- coding: utf-8 -*-
"""Action plugin ray_auth_token_file: the controller's token file kept or generated in the controller's own process.

Documented in plugins/modules/ray_auth_token_file.py (Ansible reads an action plugin's documentation there).
With I(generate=true) on a task that runs on the controller itself (``delegate_to: localhost`` over the local
connection, no become, nothing asked of a running head) the work is ``mvp_secret_file.generate_result``, done
here: starting a module process for it cost 0.6-0.8 s of every cold bring-up, twice (the Ray auth token and the
tracking server's password; docs/benchmarks.md, issue 52). Every other task - a node's token file, a head
asked for its authentication mode, become - runs the module as before.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.mvp.ray.plugins.module_utils.mvp_secret_file import generate_result
from ansible_collections.mvp.ray.plugins.plugin_utils.mvp_in_process import on_controller, path_option

MODULE = "mvp.ray.ray_auth_token_file"
OPTIONS = ("path", "token", "dir_mode", "generate", "authentication_mode_url")


def in_process(args):
    """Whether this task's arguments ask only for the controller's file to be kept or generated (bool).

    :param args: dict, the task's arguments (a task that writes a node's token, asks a head or passes an option
        this plugin does not know runs the module, which checks it).
    """
    return (bool(args.get("path")) and boolean(args.get("generate", False), strict=False)
            and not args.get("authentication_mode_url") and not args.get("token") and set(args) <= set(OPTIONS))


class ActionModule(ActionBase):
    """Generate or keep the controller's token file in process; else run the module."""

    TRANSFERS_FILES = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        """Return the module's result for this task (see the module's RETURN)."""
        result = super(ActionModule, self).run(tmp, task_vars)
        args = self._task.args
        if not (in_process(args) and on_controller(self._connection, self._play_context)):
            result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
            return result
        result.update(generate_result(path_option(args["path"]), str(args.get("dir_mode") or "0777"),
                                      bool(self._task.check_mode)))
        result["authentication_mode"] = ""
        return result
