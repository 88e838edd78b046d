"""The mvp_old_names filter in the play every entry playbook runs first (playbooks/old_names.yml), run by a real
ansible-playbook that contacts no host: a value given by its 0.1.0 name fails the run instead of being dropped."""
import os
import subprocess
import sys

import yaml
from ansible_collections.mvp.ray.plugins.filter.mvp_settings_filters import FilterModule, mvp_old_names

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def run_check(tmp_path, inventory_vars, *extra):
    """Run playbooks/old_names.yml over two hosts that set ``inventory_vars``; return (rc, output)."""
    inventory = {"all": {"vars": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                                      **inventory_vars),
                         "children": {"ray_head": {"hosts": {"h1": {}}}, "ray_workers": {"hosts": {"h2": {}}}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_NOCOLOR="1")
    done = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"),
                           os.path.join(ROOT, "playbooks", "old_names.yml")] + list(extra),
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    return done.returncode, " ".join((done.stdout + done.stderr).split())


def test_an_old_name_on_the_command_line_fails_the_run_naming_the_new_one_and_never_its_value(tmp_path):
    """The issue's case: -e mvp_verl_snapshots with verl_snapshot_sources in the inventory made no snapshot."""
    canary = "canary-62-old-secret"
    rc, output = run_check(tmp_path, {"verl_snapshot_sources": []},
                           "-e", '{"mvp_verl_snapshots": [{"ref": "v0.9.1"}]}', "-e", "mvp_internal_token=" + canary,
                           "--tags", "ray_worker")
    assert rc != 0
    assert "mvp_verl_snapshots (given for every host) is now verl_snapshot_sources" in output
    assert "mvp_internal_token (given for every host) is now ray_worker_secret" in output
    assert canary not in output


def test_the_new_names_pass(tmp_path):
    rc, output = run_check(tmp_path, {"verl_snapshot_sources": [], "ray_worker_secret": "x"}, "-e", "ray_worker_cpus=2")
    assert rc == 0, output
    assert "is now" not in output


def test_the_filter_reads_every_host_of_hostvars():
    hostvars = {"h1": {"ray_worker_cpus": 1}, "h2": {"mvp_shared_dirs": ["a"]}}
    sentence, = FilterModule().filters()["mvp_old_names"](hostvars)
    assert sentence.startswith("mvp_shared_dirs (given for h2) is now shared_storage_dirs")
    assert mvp_old_names({"h1": {}}) == []
