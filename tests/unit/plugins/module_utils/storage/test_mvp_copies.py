"""The collection's files copied onto the nodes (module_utils/storage/mvp_copies.py): each list is complete, every file
exists, and every copied module_utils file imports in a bare interpreter with only its copy's folder on the path
(as on a node, where the job tools and the node entrypoint import them by their bare names)."""
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.storage import mvp_copies

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
MODULE_UTILS = os.path.join(ROOT, "plugins", "module_utils")


@pytest.mark.parametrize("name", sorted(mvp_copies.COPIES))
def test_every_copied_module_utils_file_imports_alone_beside_the_others(name, tmp_path):
    folder = tmp_path / name
    folder.mkdir()
    for path in mvp_copies.copied_files(name):
        assert os.path.isfile(os.path.join(ROOT, path)), path
        shutil.copy(os.path.join(ROOT, path), folder)
    modules = [os.path.basename(item)[:-3] for item in mvp_copies.COPIES[name]["module_utils"]]
    # -I: no user site, no PYTHONPATH; -S: no site-packages, so nothing but the standard library and the folder.
    code = "import sys; sys.path[:0] = [%r]\n" % str(folder) + "".join("import %s\n" % m for m in modules)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_roles_copy_what_the_list_says_and_the_list_names_every_imported_file():
    # Each copy's own files import module_utils files by bare name: each such import is in the list.
    for name, copy in mvp_copies.COPIES.items():
        listed = {os.path.basename(item)[:-3] for item in copy["module_utils"]}
        for item in copy["files"]:
            with open(os.path.join(ROOT, "roles", copy["role"], "files", item), encoding="utf-8") as handle:
                text = handle.read()
            for module in sorted(m for _, _, files in os.walk(MODULE_UTILS) for m in files if m.startswith("mvp_")):
                bare = module[:-3]
                if module.endswith(".py") and ("\nimport %s" % bare in text or "\nfrom %s import" % bare in text):
                    assert bare in listed, "%s imports %s, not in COPIES[%r]" % (item, bare, name)
    assert mvp_copies.installed_names("job_tools")[:3] == list(mvp_copies.COPIES["job_tools"]["files"])
    with pytest.raises(KeyError, match="job_tools, node_entrypoint"):
        mvp_copies.copied_files("nodes")
