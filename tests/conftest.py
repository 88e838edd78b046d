"""Make the project's Ansible plugins importable in tests.

The checkout is the collection ``mvp.ray``: ``collections/ansible_collections/mvp/ray``
links back to it, and modules import their helpers as
``ansible_collections.mvp.ray.plugins.module_utils.<name>``. Tests put ``collections/``
on ``sys.path`` (``ansible_collections`` is a namespace package, so the collections
Ansible bundles stay importable), and the modules and filters folders too so a test
imports a module by its file name. ``tests/unit/plugins`` holds the fake of Ray's dashboard
(``ray_dashboard_fake``) the module and module_utils tests share.
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for sub in ("collections", "plugins/modules", "plugins/filter", "plugins/module_utils",
            "roles/job_tools/files", "tests/unit/plugins"):
    sys.path.insert(0, os.path.join(ROOT, sub))
