# -*- coding: utf-8 -*-
"""When an action plugin may do a module's work in the controller's own process.

A module call costs the controller a process, the module's packing and its result's round trip: 0.5-0.8 s per task
on this project's 2-core machine whatever the module does (docs/benchmarks.md, issue 52). For a task that runs on the
controller itself as the same user - the local connection (``delegate_to: localhost``, or the docker host that is
this machine), no become - a module that only reads and writes files does the same in the controller's process.
"""

from __future__ import annotations

import os

from ansible.plugins.action import ActionBase


def on_controller(connection, play_context):
    """Whether a task with this ``connection`` (a connection plugin) and ``play_context`` runs here as this user (bool).

    :param connection: the action plugin's ``self._connection``; its ``transport`` is ``local`` for the local one.
    :param play_context: the action plugin's ``self._play_context``; ``become`` true means another user.
    """
    return getattr(connection, "transport", "") == "local" and not bool(getattr(play_context, "become", False))


def path_option(value):
    """An option of type ``path`` as a module would get it: ``~`` and environment variables expanded (str)."""
    return os.path.expanduser(os.path.expandvars(str(value)))


class InProcessAction(ActionBase):
    """An action plugin that does its module's work here when the task runs on the controller, else runs the module.

    A subclass names ``MODULE`` (the module's FQCN) and ``OPTIONS`` (the options it handles here) and implements
    ``handles(args)`` (bool: these arguments ask only for work it does) and ``work(args, check_mode)`` (dict: the
    module's result for them, ``failed``/``msg`` on a problem; it must not raise).
    """

    TRANSFERS_FILES = False
    _supports_check_mode = True
    MODULE = ""
    OPTIONS = ()

    def handles(self, args):
        """Whether ``args`` (dict, the task's arguments) ask only for what ``work`` does (bool)."""
        raise NotImplementedError

    def work(self, args, check_mode):
        """The module's result for ``args`` (dict), done in this process; ``check_mode`` (bool) changes nothing."""
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        """Return the module's result for this task (see the module's RETURN)."""
        result = super(InProcessAction, self).run(tmp, task_vars)
        args = self._task.args
        if set(args) <= set(self.OPTIONS) and self.handles(args) and on_controller(self._connection, self._play_context):
            result.update(self.work(args, bool(self._task.check_mode)))
        else:
            result.update(self._execute_module(module_name=self.MODULE, module_args=args, task_vars=task_vars))
        return result
