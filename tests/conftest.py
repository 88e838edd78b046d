"""Make the project's Ansible plugins importable in tests.

The checkout is the collection ``mvp.ray``: ``collections/ansible_collections/mvp/ray``
links back to it, and modules import their helpers as
``ansible_collections.mvp.ray.plugins.module_utils.<package>.<name>``. Tests put ``collections/``
on ``sys.path`` (``ansible_collections`` is a namespace package, so the collections
Ansible bundles stay importable), and the modules and filters folders and each module_utils
package's folder too so a test imports a module by its file name (as the job tools and the node
entrypoint import the module_utils copied beside them). ``tests/unit/plugins`` holds the fake of
Ray's dashboard (``ray_dashboard_fake``) the module and module_utils tests share; ``tests`` the webhook receiver
(``http_receiver``) the unit tests, the cluster suites and the benchmarks share.
"""
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_UTILS_PACKAGES = sorted(os.path.relpath(os.path.dirname(path), ROOT) for path in
                               glob.glob(os.path.join(ROOT, "plugins", "module_utils", "*", "__init__.py")))
for sub in ["collections", "plugins/modules", "plugins/filter", *MODULE_UTILS_PACKAGES,
            "roles/job_tools/files", "tests/unit/plugins", "tests"]:
    sys.path.insert(0, os.path.join(ROOT, sub))
