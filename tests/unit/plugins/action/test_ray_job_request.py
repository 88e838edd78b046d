"""The ray_job_request action plugin, run by a real ansible-playbook on localhost: where a request comes from.

``-e`` values reach the action through Ansible's own parsed command line (``ansible.utils.vars.load_extra_vars``),
the JobSpec file through the strict reader; the request keys of both are module_utils mvp_request's table.
"""
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def run_play(tmp_path, play_vars, extra_vars, jobspec=None, repeat=1, run_index=1, inventory_vars=None,
             check=None, fails=False, config=False, request=None):
    """Run one play that gathers a request; return the registered result (parsed from a JSON file it writes).

    ``check``: the action's catalog and defaults; ``fails``: return the play's output, which must fail;
    ``config``: run with the project's ansible.cfg; ``request``: a request given whole (the job controller's).
    """
    inventory = {"all": {"hosts": {"localhost": dict({"ansible_connection": "local",
                                                      "ansible_python_interpreter": sys.executable},
                                                     **(inventory_vars or {}))}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    out = tmp_path / "result.json"
    if out.exists():
        out.unlink()
    play = [{"name": "Test | Gather", "hosts": "localhost", "gather_facts": False, "vars": play_vars, "tasks": [
        {"name": "Test | Gather the request", "mvp.ray.ray_job_request": {
            "jobspec": str(jobspec or ""), "repeat": repeat, "run_index": run_index, **(check or {}),
            **({"request": request} if request is not None else {})},
         "register": "gathered"},
        {"name": "Test | Save it", "ansible.builtin.copy": {"content": "{{ gathered | to_json }}", "dest": str(out),
                                                             "mode": "0644"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    argv = ["ansible-playbook", "-i", str(tmp_path / "inventory.yml"), str(tmp_path / "play.yml")]
    for value in extra_vars:
        argv += ["-e", value]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"), ANSIBLE_NOCOLOR="1")
    if config:
        env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=120)
    if fails:
        assert done.returncode != 0 and not out.exists(), done.stdout[-2000:]
        return done.stdout + done.stderr
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return yaml.safe_load(out.read_text())


def test_file_then_play_then_command_line_and_never_the_inventory(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text(yaml.safe_dump({"workload": "grpo", "model": "from-file", "trainer_overrides": {"a.b": 1}}))
    got = run_play(tmp_path, {"dataset": "from-play", "base": "abc", "submission_id": "{{ base }}-7"},
                   ["model=from-cli"], jobspec=spec,
                   inventory_vars={"env_vars": {"A": "1"}, "model": "from-inventory", "dataset": "inv"})
    assert got["request"] == {"workload": "grpo", "model": "from-cli", "dataset": "from-play",
                              "trainer_overrides": {"a.b": 1}, "submission_id": "abc-7"}
    assert got["sources"] == {"workload": "jobspec", "model": "extra vars", "dataset": "play",
                              "trainer_overrides": "jobspec", "submission_id": "play"}
    assert got["given_id"] == "abc-7"


def test_ids_generated_and_numbered_in_a_repeat(tmp_path):
    got = run_play(tmp_path, {}, ["workload=sft"])
    assert got["given_id"] == "" and got["sources"]["submission_id"] == "generated"
    assert got["request"]["submission_id"].startswith("sft-") and len(got["request"]["submission_id"]) == len("sft-") + 22
    numbered = run_play(tmp_path, {}, ["workload=sft", "submission_id=grp"], repeat=3, run_index=2)
    assert numbered["request"]["submission_id"] == "grp-2" and numbered["given_id"] == "grp"


BOMB = """workload: sft
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
trainer_overrides: {x.y: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]}
"""


def test_a_jobspec_with_anchors_and_aliases_is_refused_naming_the_line(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)  # 10 ** 7 strings under trainer_overrides once the aliases are resolved
    out = run_play(tmp_path, {}, [], jobspec=bomb, fails=True)
    line = BOMB.count("\n", 0, BOMB.index("&a")) + 1
    assert "jobspec %s" % bomb in out and "anchor &a on line %d" % line in out and "nothing was written" in out


def test_the_same_values_given_with_e_are_bounded_too_and_ansible_refuses_a_key_given_twice(tmp_path):
    (tmp_path / "bomb.yml").write_text(BOMB.replace("workload: sft\n", ""))
    out = run_play(tmp_path, {}, ["@%s" % (tmp_path / "bomb.yml")], fails=True)
    assert "-e trainer_overrides" in out and "65536" in out
    (tmp_path / "twice.yml").write_text("model: a\ndataset: d\nmodel: b\n")
    out = run_play(tmp_path, {}, ["@%s" % (tmp_path / "twice.yml")], fails=True, config=True)
    assert "model" in out and "twice.yml" in out


def test_with_the_catalog_a_bad_field_fails_here_before_any_trip_to_the_head(tmp_path, catalog, spec_defaults):
    check = {"catalog": {"sft": catalog["sft"]}, "defaults": spec_defaults}  # the others hold inventory templates
    good = run_play(tmp_path, {}, ["workload=sft", "submission_id=ok-1"], check=check)
    assert good["request"]["submission_id"] == "ok-1"
    out = run_play(tmp_path, {}, ["workload=sft", "submission_id=x", "dataset=../etc"], check=check, fails=True)
    assert "job spec field 'dataset'" in out
    spec = tmp_path / "nl.yaml"
    spec.write_text('workload: sft\nsubmission_id: "heldout-newline\\n"\n')
    out = run_play(tmp_path, {}, [], jobspec=spec, check=check, fails=True)
    assert "job spec field 'submission_id'" in out


def test_request_keys_given_only_with_e_are_read_as_the_same_keys_in_a_jobspec(tmp_path, catalog, spec_defaults):
    # The role used to pass its own list of keys to read from -e: a key missing there (these four were added to the
    # table after the list was written) was dropped from -e while the same key in a JobSpec passed. Now both places
    # take the table's keys, and the checked requests are the same.
    given = {"priority": "high", "preemptible": False, "max_restarts": 1, "accept_unsupported_release": True}
    check = {"catalog": {"sft": catalog["sft"]}, "defaults": spec_defaults}
    jobspec = tmp_path / "job.yaml"
    jobspec.write_text(yaml.safe_dump(dict(given, workload="sft", submission_id="same-1")))
    from_file = run_play(tmp_path, {}, [], jobspec=jobspec, check=check)
    as_text = {key: str(value).lower() if isinstance(value, bool) else str(value) for key, value in given.items()}
    from_cli = run_play(tmp_path, {}, ["workload=sft", "submission_id=same-1"]    # -e key=value gives text
                        + ["%s=%s" % item for item in sorted(as_text.items())], check=check)
    assert from_cli["request"] == from_file["request"]
    assert {key: from_cli["request"][key] for key in given} == given
    assert {from_cli["sources"][key] for key in given} == {"extra vars"}
    assert {from_file["sources"][key] for key in given} == {"jobspec"}


def test_a_bad_value_of_a_request_key_is_refused_alike_from_e_and_from_a_jobspec(tmp_path, catalog, spec_defaults):
    check = {"catalog": {"sft": catalog["sft"]}, "defaults": spec_defaults}
    jobspec = tmp_path / "job.yaml"
    jobspec.write_text("workload: sft\nsubmission_id: bad-1\npreemptible: sometimes\n")
    from_file = run_play(tmp_path, {}, [], jobspec=jobspec, check=check, fails=True)
    from_cli = run_play(tmp_path, {}, ["workload=sft", "submission_id=bad-1", "preemptible=sometimes"], check=check,
                        fails=True)
    message = "job spec field 'preemptible': 'sometimes' is not true or false"
    assert message in from_file and message in from_cli


def test_a_request_given_whole_is_checked_and_comes_back_as_the_builder_takes_it(tmp_path, catalog, spec_defaults):
    # The job controller's next attempt of a run: its request, checked again, is the same request.
    check = {"catalog": {"sft": catalog["sft"]}, "defaults": spec_defaults}
    first = run_play(tmp_path, {}, ["workload=sft", "submission_id=run-1", "priority=low"], check=check)["request"]
    again = run_play(tmp_path, {"model": "ignored"}, ["model=ignored"], check=check,
                     request=dict(first, submission_id="run-1-r1"))
    assert again["request"] == dict(first, submission_id="run-1-r1")
    assert set(again["sources"].values()) == {"request"}
    out = run_play(tmp_path, {}, [], check=check, request=dict(first, submission_id="run-1-r1", dataset="/etc"),
                   fails=True)
    assert "job spec field 'dataset'" in out
