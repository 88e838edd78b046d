# -*- coding: utf-8 -*-
"""Action plugin ray_moved_settings: accept the old ``mvp_*`` name of a setting that moved to its role's name.

Documented in plugins/modules/ray_moved_settings.py (Ansible reads an action plugin's documentation there).
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.mvp.ray.plugins.module_utils.mvp_settings import moved_to, resolve

display = Display()


class ActionModule(ActionBase):
    """Set each moved knob of a role from its old name (see plugins/modules/ray_moved_settings.py)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("role",))

    def run(self, tmp=None, task_vars=None):
        """Read the old names the play defines, set the new ones not set on their own, warn for each."""
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        owner = self._task._role  # the role this task belongs to (None in a play's own tasks)
        role = self._task.args.get("role") or (owner.get_name(include_role_fqcn=False) if owner else "")
        if not moved_to(role):
            raise AnsibleActionFail("ray_moved_settings: role %r has no moved settings (module_utils mvp_settings.MOVED); "
                                    "give role=<a role of mvp.ray that renamed one>." % role)
        # A knob still at its role default was not set by the user: its old name may set it.
        defaults = owner.get_default_vars() if owner else {}
        given = {old: self._templar.template(task_vars[old]) for old in moved_to(role) if old in task_vars}

        def user_set(new):
            return new in task_vars and (new not in defaults or task_vars[new] != defaults[new])

        values, messages = resolve(role, given, user_set)
        for message in messages:
            # 0.3.0: the release after the one that moved the settings stops reading their old names.
            display.deprecated(message, version="0.3.0", collection_name="mvp.ray")
        result.update(changed=False, ansible_facts=values, moved=sorted(values))
        if values:  # the values may be secrets (ray_worker_secret): the warning names, never shows them
            result["_ansible_no_log"] = True
        return result
