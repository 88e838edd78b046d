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

from ansible_collections.mvp.ray.plugins.module_utils.cluster.mvp_secret_file import generate_result
from ansible_collections.mvp.ray.plugins.plugin_utils.mvp_in_process import InProcessAction, path_option


class ActionModule(InProcessAction):
    """Generate or keep the controller's token file in process; else run the module."""

    MODULE = "mvp.ray.ray_auth_token_file"
    OPTIONS = ("path", "generate", "dir_mode")

    def handles(self, args):
        """Only the controller's file to keep or generate (a node's token or a head's question: the module)."""
        return bool(args.get("path")) and boolean(args.get("generate", False), strict=False)

    def work(self, args, check_mode):
        """``generate_result`` for the task's file, as the module returns it."""
        return dict(generate_result(path_option(args["path"]), str(args.get("dir_mode") or "0777"), check_mode),
                    authentication_mode="")
