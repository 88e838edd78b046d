"""Make the project's Ansible plugins importable in tests.

Modules import their helpers as ``ansible.module_utils.<name>``; Ansible finds
them through ``module_utils`` in ansible.cfg. Tests add the same folder to the
``ansible.module_utils`` package path, and the modules and filters folders to
``sys.path``.
"""
import os
import sys

import ansible.module_utils

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ansible.module_utils.__path__.append(os.path.join(ROOT, "plugins", "module_utils"))
for sub in ("plugins/modules", "plugins/filter", "roles/verl_snapshot/files/job_tools"):
    sys.path.insert(0, os.path.join(ROOT, sub))
