"""The ray_auth_token_file action plugin, run by a real ansible-playbook on localhost: generating the controller's
token file in the controller's process gives what the module gives (the module runs when the task asks a head too),
and the token never reaches the output."""
import json
import os
import stat
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

# Nothing listens on port 1: the module asks it and gets no answer (authentication_mode '').
NO_HEAD = "http://127.0.0.1:1/api/authentication_mode"


def run_tasks(tmp_path, tasks, check=False):
    """Run ``tasks`` (each registers ``r<i>``) on localhost; return (results list, rc, output)."""
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    out = tmp_path / "results.json"
    plays = [dict(task, name="Test | task %d" % i, register="r%d" % i, ignore_errors=True) for i, task in enumerate(tasks)]
    plays.append({"name": "Test | Save the results", "delegate_to": "localhost", "check_mode": False,
                  "ansible.builtin.copy": {"content": "{{ [%s] | to_json }}" % ", ".join("r%d" % i for i in range(len(tasks))),
                                           "dest": str(out), "mode": "0600"}})
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{"name": "Test | Token file", "hosts": "localhost",
                                                         "gather_facts": False, "tasks": plays}], sort_keys=False))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_NOCOLOR="1")
    argv = ["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")] + (["-C"] if check else [])
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    return json.loads(out.read_text()), done.returncode, done.stdout + done.stderr


def generate(path, **more):
    return {"mvp.ray.ray_auth_token_file": dict({"path": str(path), "generate": True, "dir_mode": "0700"}, **more)}


def test_generated_in_process_once_then_kept(tmp_path):
    path = tmp_path / "secrets" / "token"
    by_module = tmp_path / "by-module" / "token"
    results, rc, output = run_tasks(tmp_path, [generate(path), generate(path),
                                               generate(by_module, authentication_mode_url=NO_HEAD)])
    token = path.read_text()
    first, again, module = results
    assert rc == 0
    assert first["changed"] and first["written"] and first["path"] == str(path)
    assert not again["changed"] and not again["written"]
    # No module process: a module's result carries the attributes AnsibleModule adds for its path, not this one.
    assert "uid" not in first and "uid" not in again and module["uid"] == os.getuid()
    assert module["changed"] and len(by_module.read_text()) == 43 and module["authentication_mode"] == ""
    assert len(token) == 43 and set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert token not in output and token not in json.dumps(results)


def test_in_process_and_module_refuse_a_loose_file_alike(tmp_path):
    path = tmp_path / "token"
    path.write_text("kept-but-loose")
    os.chmod(path, 0o644)
    results, _, output = run_tasks(tmp_path, [generate(path), generate(path, authentication_mode_url=NO_HEAD)])
    for result in results:
        assert result["failed"]
        assert result["msg"] == ("The Ray auth token file %s has mode 0644; only its owner may read it: run "
                                 "`chmod 0600 %s` (if others could read it, delete it instead: site.yml generates "
                                 "a new token and restarts the cluster with it)." % (path, path))
    assert path.read_text() == "kept-but-loose" and "kept-but-loose" not in output


def test_check_mode_writes_nothing_in_process_or_module(tmp_path):
    first, second = tmp_path / "a" / "token", tmp_path / "b" / "token"
    results, rc, _ = run_tasks(tmp_path, [generate(first), generate(second, authentication_mode_url=NO_HEAD)],
                               check=True)
    assert rc == 0
    assert [r["changed"] for r in results] == [True, True]
    assert [r["authentication_mode"] for r in results] == ["", ""]
    assert not first.exists() and not second.exists()
