"""The ray_moved_settings action plugin, run by a real ansible-playbook on localhost: an inventory written for the old
mvp_* names keeps working for one release, with a deprecation warning naming each new name."""
import json
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.mvp.ray.plugins.module_utils.mvp_settings import MOVED, moved_to, resolve  # noqa: E402


def run_play(tmp_path, inventory_vars, role="ray_worker", names=()):
    """Run the action for ``role`` with ``inventory_vars`` on localhost; return (the names' values, the output)."""
    inventory = {"all": {"hosts": {"localhost": dict({"ansible_connection": "local",
                                                      "ansible_python_interpreter": sys.executable},
                                                     **inventory_vars)}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    out = tmp_path / "values.json"
    play = [{"name": "Test | Moved settings", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Test | Accept the old names", "mvp.ray.ray_moved_settings": {"role": role}},
        {"name": "Test | Save the new names", "ansible.builtin.copy": {
            "content": "{{ {%s} | to_json }}" % ", ".join("'%s': %s | default(none)" % (n, n) for n in names),
            "dest": str(out), "mode": "0600"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="1")
    done = subprocess.run(["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(out.read_text()), done.stdout + done.stderr


def test_an_old_name_sets_the_new_one_with_a_warning_naming_it(tmp_path):
    values, output = run_play(tmp_path, {"mvp_ray_start_parallel": 2, "mvp_ray_ready_timeout": 77},
                              names=("ray_worker_start_parallel", "ray_worker_ready_timeout", "ray_worker_cpus"))
    assert values == {"ray_worker_start_parallel": 2, "ray_worker_ready_timeout": 77, "ray_worker_cpus": None}
    flat = " ".join(output.split())
    assert "The setting mvp_ray_start_parallel is now ray_worker_start_parallel" in flat
    assert "The setting mvp_ray_ready_timeout is now ray_worker_ready_timeout" in flat


def test_the_new_name_wins_when_both_are_set(tmp_path):
    values, output = run_play(tmp_path, {"mvp_ray_start_attempts": 4, "ray_worker_start_attempts": 9},
                              names=("ray_worker_start_attempts",))
    assert values == {"ray_worker_start_attempts": 9}
    assert "ray_worker_start_attempts wins; remove mvp_ray_start_attempts" in " ".join(output.split())


def test_a_moved_secret_reaches_its_new_name_and_never_the_output(tmp_path):
    canary = "canary-5e1d-moved-secret"
    values, output = run_play(tmp_path, {"mvp_internal_token": canary}, names=("ray_worker_secret",))
    assert values == {"ray_worker_secret": canary}
    assert canary not in output


def test_every_new_name_is_a_knob_its_role_declares_and_no_old_name_is_still_read():
    """Each new name is declared by the role it names; the shipped inventories use none of the old names."""
    for old, news in MOVED.items():
        for new in news:
            role = next(r for r in sorted(os.listdir(os.path.join(ROOT, "roles")), key=len, reverse=True)
                        if new.startswith(r + "_"))
            with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
                assert new in yaml.safe_load(handle), (old, new)
            assert new in moved_to(role)[old]
    for folder in ("inventories", "molecule"):
        for base, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith((".yml", ".yaml")):
                    with open(os.path.join(base, name), encoding="utf-8") as handle:
                        text = handle.read()
                    assert not [old for old in MOVED if old + ":" in text], os.path.join(base, name)


def test_resolve_keeps_a_new_name_set_on_its_own_and_names_the_old_one():
    values, messages = resolve("ray_head", {"mvp_ray_start_attempts": 5, "mvp_ray_ready_timeout": 30},
                               lambda name: name == "ray_head_ready_timeout")
    assert values == {"ray_head_start_attempts": 5}
    assert messages == [
        "ray_head_ready_timeout is set and so is its old name mvp_ray_ready_timeout: ray_head_ready_timeout wins; "
        "remove mvp_ray_ready_timeout from the inventory.",
        "The setting mvp_ray_start_attempts is now ray_head_start_attempts (the role ray_head's own name): rename it "
        "in the inventory (docs/inventories.md)."]
    assert resolve("ray_head", {}, lambda name: False) == ({}, [])
