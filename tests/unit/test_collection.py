"""The checkout builds as the collection mvp.ray, and its playbooks run from an installed copy.

Real tools, no mocks: ``ansible-galaxy collection build`` makes the artifact,
``ansible-galaxy collection install`` puts it into a temporary collections path, and
``ansible-playbook --syntax-check mvp.ray.<playbook>`` runs from a folder without this
checkout's ansible.cfg, so every role, module and filter must resolve from the installed copy.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def _galaxy():
    with open(os.path.join(ROOT, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)


def _run(argv, cwd, env=None):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, "%s failed:\n%s\n%s" % (" ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build the artifact, install it (no dependencies: Galaxy is not reachable) and return paths."""
    if not shutil.which("ansible-galaxy", path=BIN):
        pytest.skip("ansible-galaxy is not installed beside this Python")
    work = tmp_path_factory.mktemp("collection")
    galaxy = _galaxy()
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(work), ROOT], cwd=str(work))
    artifact = work / ("%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"]))
    assert artifact.is_file()
    path = work / "installed"
    _run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--no-deps", "-p", str(path), str(artifact)],
         cwd=str(work))
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_")}
    # The installed copy plus the collections bundled with ansible (community.docker, ...) on sys.path.
    env.update(ANSIBLE_COLLECTIONS_PATH=str(path), ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + env.get("PATH", ""))
    home = path / "ansible_collections" / galaxy["namespace"] / galaxy["name"]
    return {"artifact": artifact, "home": home, "env": env, "cwd": str(work), "galaxy": galaxy}


def test_the_artifact_holds_the_collection_and_leaves_the_workbench_out(installed):
    with tarfile.open(installed["artifact"]) as tar:
        names = tar.getnames()
        manifest = json.load(tar.extractfile("MANIFEST.json"))
    tops = {name.split("/")[0] for name in names}
    modules = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "plugins", "modules")) if f.endswith(".py"))
    assert manifest["collection_info"]["name"] == installed["galaxy"]["name"]
    assert {"plugins", "roles", "playbooks", "meta", "images"} <= tops
    assert all("plugins/modules/%s.py" % m in names for m in modules)
    assert not tops & set(installed["galaxy"]["build_ignore"])


def test_every_module_is_in_one_naming_family_and_documented_from_the_installed_copy(installed):
    modules = sorted(f[:-3] for f in os.listdir(installed["home"] / "plugins" / "modules") if f.endswith(".py"))
    assert modules and all(m.startswith("ray_") for m in modules)
    fqcns = ["%s.%s.%s" % (installed["galaxy"]["namespace"], installed["galaxy"]["name"], m) for m in modules]
    proc = _run([os.path.join(BIN, "ansible-doc"), "--json"] + fqcns, cwd=installed["cwd"], env=installed["env"])
    docs = json.loads(proc.stdout)
    assert sorted(docs) == sorted(fqcns)
    # The shared connection options come from the doc fragment wherever it is named.
    for fqcn in fqcns:
        doc = docs[fqcn]["doc"]
        if "mvp.ray.connection" in (doc.get("extends_documentation_fragment") or []):
            assert {"address", "auth_token"} <= set(doc["options"]), fqcn


def test_every_playbook_passes_a_syntax_check_from_the_installed_copy(installed):
    playbooks = sorted(f[:-4] for f in os.listdir(installed["home"] / "playbooks") if f.endswith(".yml"))
    assert "site" in playbooks and "submit" in playbooks
    fqcns = ["%s.%s.%s" % (installed["galaxy"]["namespace"], installed["galaxy"]["name"], playbook)
             for playbook in playbooks]
    for inventory in ("local", "dev", "prod"):  # every playbook in one run per inventory
        _run([os.path.join(BIN, "ansible-playbook"), "--syntax-check",
              "-i", str(installed["home"] / "inventories" / inventory)] + fqcns,
             cwd=installed["cwd"], env=installed["env"])


def test_every_fqcn_the_roles_and_playbooks_name_resolves_in_the_installed_copy(installed):
    """Syntax checks skip dynamic includes and filters: resolve every mvp.ray.<name> the YAML names."""
    import re

    prefix = "%s.%s." % (installed["galaxy"]["namespace"], installed["galaxy"]["name"])
    named = set()
    for base in ("roles", "playbooks"):
        for folder, _, files in os.walk(installed["home"] / base):
            for name in files:
                if name.endswith((".yml", ".j2")):
                    with open(os.path.join(folder, name)) as handle:
                        named |= set(re.findall(re.escape(prefix) + r"([a-z_][a-z0-9_]*)", handle.read()))
    listed = {}
    for kind in ("module", "filter"):
        proc = _run([os.path.join(BIN, "ansible-doc"), "-t", kind, "-l", "--json", prefix.rstrip(".")],
                    cwd=installed["cwd"], env=installed["env"])
        listed[kind] = {fqcn[len(prefix):] for fqcn in json.loads(proc.stdout)}
    roles = set(os.listdir(installed["home"] / "roles"))
    playbooks = {f[:-4] for f in os.listdir(installed["home"] / "playbooks") if f.endswith(".yml")}
    assert named, "no %s<name> found in the installed roles and playbooks" % prefix
    unresolved = sorted(named - listed["module"] - listed["filter"] - roles - playbooks - {"connection"})
    assert unresolved == []
    assert {"ray_job", "ray_job_info"} <= named & listed["module"]


def test_the_action_group_sets_the_connection_of_the_ray_api_modules(installed, tmp_path):
    """module_defaults for group/mvp.ray.ray reach ray_cluster_info (installed copy, a port nobody serves)."""
    address = "http://127.0.0.1:9"
    play = [{"name": "Probe", "hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/mvp.ray.ray": {"address": address}},
             "tasks": [{"name": "Read nodes", "mvp.ray.ray_cluster_info": {"timeout": 5}}]}]
    path = tmp_path / "probe.yml"
    path.write_text(yaml.safe_dump(play))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)],
                          cwd=installed["cwd"], env=installed["env"], capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "Cannot list Ray nodes at %s" % address in proc.stdout + proc.stderr
