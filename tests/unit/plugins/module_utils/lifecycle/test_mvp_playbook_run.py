"""Playbooks run from a program (plugins/module_utils/lifecycle/mvp_playbook_run.py): ansible-runner for real, on
this machine."""
import os
import sys

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_playbook_run

PLAYBOOK = """---
- name: Probe
  hosts: all
  gather_facts: false
  tasks:
    - name: Probe | Change something
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "x"
        mode: "0644"
    - name: Probe | Fail when asked
      ansible.builtin.fail:
        msg: "asked to fail: {{ reason }}"
      when: reason | length > 0
"""


@pytest.fixture(name="project")
def fixture_project(tmp_path):
    """A project folder with the playbook and a local inventory of two hosts."""
    (tmp_path / "probe.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts.ini").write_text("a ansible_connection=local ansible_python_interpreter=%s\n"
                                        "b ansible_connection=local ansible_python_interpreter=%s\n"
                                        % (sys.executable, sys.executable))
    return tmp_path


def test_stats_come_from_the_runs_events_per_host(project, tmp_path):
    out = tmp_path / "out.txt"
    result = mvp_playbook_run.run("probe.yml", [str(project / "hosts.ini")], str(tmp_path / "pdd"), "ok-run",
                                  {"out": str(out), "reason": ""}, mvp_playbook_run.runner_env(None), str(project))
    assert result["rc"] == 0 and result["status"] == "successful"
    assert set(result["hosts"]) == {"a", "b"}
    # Both hosts write the same file: the first changes it, the second finds it as it should be.
    assert sum(h["changed"] for h in result["hosts"].values()) == 1 and result["changed"] is True
    # One task ran on each host, the other (fail when asked) was skipped.
    assert all((h["failed"], h["ok"], h["skipped"]) == (0, 1, 1) for h in result["hosts"].values())
    assert os.path.isdir(os.path.join(result["artifacts"], "job_events"))


def test_a_failure_names_the_task_host_and_message(project, tmp_path):
    result = mvp_playbook_run.run("probe.yml", [str(project / "hosts.ini")], str(tmp_path / "pdd"), "bad-run",
                                  {"out": str(tmp_path / "o.txt"), "reason": "disk"},
                                  mvp_playbook_run.runner_env(None), str(project))
    assert result["rc"] != 0 and result["status"] == "failed"
    assert sorted(t["host"] for t in result["failed_tasks"]) == ["a", "b"]
    assert all(t["task"] == "Probe | Fail when asked" and "asked to fail: disk" in t["msg"]
               for t in result["failed_tasks"])
    assert mvp_playbook_run.recap_lines(result["hosts"])[0] == "a : ok=1 changed=%d unreachable=0 failed=1" % (
        result["hosts"]["a"]["changed"])


def test_retries_until_success_within_the_time_given():
    answers = iter([{"rc": 2}, {"rc": 2}, {"rc": 0}])
    clock = iter(range(0, 100, 10))
    slept = []
    done = mvp_playbook_run.run_until_success(60, 5, lambda: next(answers), sleep=slept.append,
                                              clock=lambda: next(clock))
    assert done == {"rc": 0, "attempts": 3} and slept == [5, 5]
    gave_up = mvp_playbook_run.run_until_success(15, 5, lambda: {"rc": 1}, sleep=lambda s: None,
                                                 clock=iter(range(0, 100, 10)).__next__)
    assert gave_up["rc"] == 1 and gave_up["attempts"] == 2


def test_the_command_file_with_the_environment_is_removed(project, tmp_path):
    env = dict(mvp_playbook_run.runner_env(None), MVP_SECRET_PROBE="canary-4b1e")
    result = mvp_playbook_run.run("probe.yml", [str(project / "hosts.ini")], str(tmp_path / "pdd"), "secret-run",
                                  {"out": str(tmp_path / "s.txt"), "reason": ""}, env, str(project))
    assert result["rc"] == 0
    left = [os.path.join(root, name) for root, _, names in os.walk(str(tmp_path / "pdd")) for name in names]
    assert left and not any("canary-4b1e" in open(path, encoding="utf-8", errors="replace").read() for path in left)


def test_a_run_inside_another_runs_environment_works_once_cleaned(project, tmp_path, monkeypatch):
    """docs/how-it-works.md#playbooks-run-from-a-program: an outer ansible-runner's callback variables break the
    inner run; the job controller removes them (mvp_controller.clean_environ) before it runs a playbook."""
    import ansible_runner.display_callback  # pylint: disable=import-outside-toplevel
    from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import (  # pylint: disable=import-outside-toplevel
        mvp_controller)
    callbacks = os.path.join(os.path.dirname(ansible_runner.display_callback.__file__), "callback")
    monkeypatch.setenv("ANSIBLE_STDOUT_CALLBACK", "awx_display")
    monkeypatch.setenv("ANSIBLE_CALLBACK_PLUGINS", callbacks)
    args = ("probe.yml", [str(project / "hosts.ini")], str(tmp_path / "pdd"))
    inherited = mvp_playbook_run.run(*args, "nested", {"out": str(tmp_path / "n.txt"), "reason": ""},
                                     mvp_playbook_run.runner_env(None), str(project))
    assert inherited["rc"] != 0
    environ = dict(os.environ)
    mvp_controller.clean_environ(environ)
    assert not [k for k in environ if k.startswith("ANSIBLE_")]
    for key in ("ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_CALLBACK_PLUGINS"):
        monkeypatch.delenv(key)
    cleaned = mvp_playbook_run.run(*args, "cleaned", {"out": str(tmp_path / "c.txt"), "reason": ""},
                                   mvp_playbook_run.runner_env(None), str(project))
    assert cleaned["rc"] == 0 and (tmp_path / "c.txt").read_text() == "x"
