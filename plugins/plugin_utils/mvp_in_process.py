# -*- coding: utf-8 -*-
"""When an action plugin may do a module's work in the controller's own process.

A module call costs the controller a process, the module's packing and its result's round trip: 0.5-0.8 s per task
on this project's 2-core machine whatever the module does (docs/benchmarks.md, issue 52). For a task that runs on the
controller itself as the same user - the local connection (``delegate_to: localhost``, or the docker host that is
this machine), no become - a module that only reads and writes files does the same in the controller's process.
"""

from __future__ import annotations

import os


def on_controller(connection, play_context):
    """Whether a task with this ``connection`` (a connection plugin) and ``play_context`` runs here as this user (bool).

    :param connection: the action plugin's ``self._connection``; its ``transport`` is ``local`` for the local one.
    :param play_context: the action plugin's ``self._play_context``; ``become`` true means another user.
    """
    return getattr(connection, "transport", "") == "local" and not bool(getattr(play_context, "become", False))


def path_option(value):
    """An option of type ``path`` as a module would get it: ``~`` and environment variables expanded (str)."""
    return os.path.expanduser(os.path.expandvars(str(value)))
