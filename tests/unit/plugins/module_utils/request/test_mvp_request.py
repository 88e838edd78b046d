"""The request's one table of keys (plugins/module_utils/request/mvp_request.py): what the docs and the action's
documentation say of each key, the checked request the builder takes as given, and the refusal of a value of another
type."""
import ast
import glob
import os
import re

import pytest
import yaml

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import (
    REQUEST_KEYS, REQUEST_TABLE, JobSpecError, check_request, default_words)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
TYPES = {"str": str, "dict": dict, "int": int, "bool": bool, "list": list}


def plain(text):
    """Text as the docs render it, compared as words: no backticks, one space between words."""
    return " ".join(text.replace("`", "").split())


def docs_rows():
    """The rows of the request keys' table in docs/jobs.md: key -> (type, default, rule)."""
    with open(os.path.join(ROOT, "docs", "jobs.md"), encoding="utf-8") as handle:
        text = handle.read()
    start = text.index("| key | type | default | rule |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = tuple(plain(cell) for cell in cells[1:])
    return rows


def action_documentation():
    """DOCUMENTATION and RETURN of plugins/modules/ray_job_request.py, parsed."""
    with open(os.path.join(ROOT, "plugins", "modules", "ray_job_request.py"), encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    return {node.targets[0].id: yaml.safe_load(node.value.value) for node in tree.body
            if isinstance(node, ast.Assign) and node.targets[0].id in ("DOCUMENTATION", "RETURN")}


def test_the_docs_list_every_request_key_with_the_tables_type_default_and_rule():
    rows = docs_rows()
    assert list(rows) == [key.name for key in REQUEST_TABLE]
    for key in REQUEST_TABLE:
        assert rows[key.name] == (key.type, plain(default_words(key)), plain(key.rule)), key.name


def test_the_actions_documentation_returns_every_request_key_with_the_tables_type_default_and_rule():
    contains = action_documentation()["RETURN"]["request"]["contains"]
    assert list(contains) == [key.name for key in REQUEST_TABLE]
    for key in REQUEST_TABLE:
        entry = contains[key.name]
        assert entry["type"] == key.type, key.name
        description = plain(entry["description"]).lower()
        assert plain(key.rule).lower() in description and "default: %s." % plain(default_words(key)).lower() in \
            description, (key.name, description)
    # the action reads the table's keys itself: nobody passes it a list of keys
    assert "keys" not in action_documentation()["DOCUMENTATION"]["options"]


def test_no_role_lists_the_request_keys_again():
    listed = []
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "main.yml")) + glob.glob(
            os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        names = set(re.findall(r"^\s*-\s*([a-z_]+)\s*$", text, re.M))
        if len(names & REQUEST_KEYS) > len(REQUEST_KEYS) // 2:
            listed.append(path)
    assert listed == []


def test_no_plugin_imports_a_private_name_of_the_request_modules():
    private = []
    for path in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").rsplit(".", 1)[-1] in (
                    "mvp_request", "mvp_request_read", "mvp_spec"):
                private += ["%s: %s" % (os.path.relpath(path, ROOT), alias.name) for alias in node.names
                            if alias.name.startswith("_")]
    assert private == []


def requests():
    """Requests to check: the shipped JobSpecs (with an id) and a few given with -e (values as text)."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "jobspecs", "*.yaml"))):
        with open(path, encoding="utf-8") as handle:
            given = yaml.safe_load(handle)
        if set(given) <= REQUEST_KEYS:   # ray-base.yaml is the inventory's submit_job_ray_base, not a request
            out.append(dict(given, submission_id="j-1"))
    out.append({"workload": "sft", "submission_id": "j-2", "max_restarts": "3", "preemptible": "no",
                "priority": "low", "env_vars": {"A": True, "B": 2}, "code_path": "/private/common/code/verl/mine"})
    out.append({"workload": "selftest", "submission_id": "j-3", "shared_root": "/private/./", "model": ""})
    return out


@pytest.mark.parametrize("request_", requests(), ids=lambda r: "%s-%s" % (r["workload"], r["submission_id"]))
def test_the_checked_request_has_every_key_typed_and_checking_it_again_changes_nothing(request_, catalog,
                                                                                        spec_defaults):
    checked = check_request(request_, catalog, dict(spec_defaults, max_restarts=2))
    assert list(checked) == [key.name for key in REQUEST_TABLE]
    for key in REQUEST_TABLE:
        value = checked[key.name]
        assert value is None or type(value) is TYPES[key.type], (key.name, value)   # pylint: disable=C0123
    assert check_request(checked, catalog, dict(spec_defaults, max_restarts=2)) == checked
    for name, value in request_.items():   # what was given, typed (-e gives text)
        if name in ("max_restarts",):
            assert checked[name] == int(value)
        elif name == "preemptible":
            assert checked[name] is (value not in ("no", False))
        elif name == "env_vars":
            assert checked[name] == {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        elif name == "shared_root":
            assert checked[name] == os.path.normpath(value)
        elif value not in ("", None):
            assert checked[name] == value, name


def test_absent_keys_take_the_documented_default_or_the_inventorys(catalog, spec_defaults):
    defaults = dict(spec_defaults, max_restarts=4)
    checked = check_request({"workload": "sft", "submission_id": "j"}, catalog, defaults)
    assert {key: checked[key] for key in ("dataset", "reward_fn_path", "ray", "trainer_overrides", "env_vars",
                                          "resume_from", "priority", "preemptible", "accept_unsupported_release")} == {
        "dataset": None, "reward_fn_path": None, "ray": {}, "trainer_overrides": {}, "env_vars": {},
        "resume_from": None, "priority": "normal", "preemptible": True, "accept_unsupported_release": False}
    assert checked["shared_root"] == defaults["shared_root"] and checked["code_id"] == defaults["code_id"]
    assert checked["code_path"] == "%s/common/code/verl/%s" % (defaults["shared_root"], defaults["code_id"])
    assert checked["model"] == defaults["model"] and checked["max_restarts"] == 4
    site = {"sft": {"reward_fn_path": "/private/user/code/r.py"}}
    assert check_request({"workload": "sft", "submission_id": "j"}, catalog, dict(defaults, site_overrides=site))[
        "reward_fn_path"] == site["sft"]["reward_fn_path"]


OTHER_TYPE = {"str": ["a", "list"], "dict": "text", "int": "several", "bool": "maybe", "list": 5}


@pytest.mark.parametrize("key", [key for key in REQUEST_TABLE], ids=lambda key: key.name)
def test_a_value_of_another_type_is_refused_naming_the_key(key, catalog, spec_defaults):
    request = {"workload": "sft", "submission_id": "j", key.name: OTHER_TYPE[key.type]}
    with pytest.raises(JobSpecError) as raised:
        check_request(request, catalog, spec_defaults)
    assert str(raised.value).startswith("job spec field '%s': " % key.name) and "Fix: " in str(raised.value)


def test_the_priority_classes_come_from_the_inventory_only(catalog, spec_defaults):
    defaults = dict(spec_defaults)
    del defaults["priority_classes"]
    with pytest.raises(JobSpecError, match="job spec field 'submit_job_priority_classes'"):
        check_request({"workload": "sft", "submission_id": "j"}, catalog, defaults)
    checked = check_request({"workload": "sft", "submission_id": "j", "priority": "urgent"}, catalog,
                            dict(spec_defaults, priority_classes={"normal": 0, "urgent": 7}))
    assert checked["priority"] == "urgent"


def test_owner_defaults_to_the_submitting_user_and_labels_are_kept(catalog, spec_defaults):
    import getpass
    checked = check_request({"workload": "sft", "submission_id": "j"}, catalog, spec_defaults)
    assert checked["owner"] == getpass.getuser() and checked["team"] is None and checked["project"] is None
    given = dict(spec_defaults, owner="bob")  # the ray_job_request action's default: the Ansible controller's user
    assert check_request({"workload": "sft", "submission_id": "j"}, catalog, given)["owner"] == "bob"
    labelled = check_request({"workload": "sft", "submission_id": "j", "owner": "alice", "team": "nlp.core",
                              "project": "math_v-2"}, catalog, given)
    assert (labelled["owner"], labelled["team"], labelled["project"]) == ("alice", "nlp.core", "math_v-2")
    # a restart's next attempt is checked again from the first attempt's request: the labels stay
    assert check_request(labelled, catalog, dict(spec_defaults, owner="root")) == labelled


@pytest.mark.parametrize("key", ["owner", "team", "project"])
@pytest.mark.parametrize("bad", ["two words", "a/b", "x" * 65, "ümlaut"])
def test_a_bad_label_is_refused_naming_its_field(key, bad, catalog, spec_defaults):
    with pytest.raises(JobSpecError) as raised:
        check_request({"workload": "sft", "submission_id": "j", key: bad}, catalog, spec_defaults)
    assert str(raised.value).startswith("job spec field '%s': " % key) and "64 letters" in str(raised.value)
    assert check_request({"workload": "sft", "submission_id": "j", key: "x" * 64}, catalog, spec_defaults)[key] == "x" * 64


def test_the_labels_land_in_the_job_spec_and_in_a_restarts_next_request(catalog, spec_defaults):
    from request_then_spec import mvp_job_spec
    from ansible_collections.mvp.ray.plugins.module_utils.lifecycle import mvp_restart
    spec = mvp_job_spec({"workload": "sft", "submission_id": "j", "owner": "alice", "team": "nlp",
                         "max_restarts": 1}, catalog, spec_defaults)
    assert (spec["owner"], spec["team"], spec["project"]) == ("alice", "nlp", None)
    decision = mvp_restart.decide(spec, {"verdict": "failed", "cause": "node_lost", "steps": {"last": 3}})
    nxt = decision["next"]["request"]
    assert decision["restart"] and (nxt["owner"], nxt["team"], nxt["project"]) == ("alice", "nlp", None)


@pytest.mark.parametrize("given, field", [("ftp://x", "notify[0].url"),
                                          ([{"url": "http://h/", "secret": "k"}], "notify[0].secret"),
                                          ([{"url": "http://h/", "events": ["born"]}], "notify[0].events")])
def test_a_requests_notify_is_checked_naming_the_field(given, field, catalog, spec_defaults):
    with pytest.raises(JobSpecError) as raised:
        check_request({"workload": "sft", "submission_id": "j", "notify": given}, catalog, spec_defaults)
    assert str(raised.value).startswith("job spec field '%s': " % field) and "Fix: " in str(raised.value)
    if field.endswith("secret"):
        assert "job_controller_webhooks (Vault)" in str(raised.value) and "'k'" not in str(raised.value)


def test_a_notify_url_is_one_json_endpoint_on_the_controllers_host_allowed(catalog, spec_defaults):
    url = "http://127.0.0.1:8099/hook"
    checked = check_request({"workload": "sft", "submission_id": "j", "notify": url}, catalog, spec_defaults)
    [endpoint] = checked["notify"]
    assert endpoint["url"] == url and endpoint["format"] == "json" and "secret" not in endpoint
    assert "run_ended" in endpoint["events"] and "checkpoint" not in endpoint["events"]
    assert check_request(checked, catalog, spec_defaults) == checked
