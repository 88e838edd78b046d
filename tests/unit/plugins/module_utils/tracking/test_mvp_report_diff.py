"""Unit tests of what the report says differs between runs: configurations, code, and the plot choice.

Expected values are computed from the inputs (``json.dumps`` of a value, ``difflib`` of two texts),
never copied from an output.
"""
import difflib
import json

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_hydra import REDACTED
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_report import (
    UNSET, code_diff, config_diff, default_files, file_diff, flatten_config, is_binary, plot_kind, source_of)


def _entry(rid, config, sources=None, code_id="verl-a"):
    """One run as config_diff takes it."""
    return {"submission_id": rid, "config": config, "override_sources": sources or {}, "code_id": code_id}


def _rows(result):
    return {row["key"]: row for row in result["rows"]}


# ---- flatten_config / source_of ----

def test_flatten_nests_mappings_and_keeps_lists_and_empty_mappings_whole():
    config = {"a": {"b": {"c": 1}, "l": [1, {"x": 2}], "e": {}}, "top": None}
    assert flatten_config(config) == {("a", "b", "c"): 1, ("a", "l"): [1, {"x": 2}], ("a", "e"): {},
                                      ("top",): None}
    assert flatten_config({}) == {}
    assert flatten_config(None) == {}


def test_source_of_takes_the_longest_override_key_that_covers_the_key():
    sources = {"actor.optim": "inventory", "actor.optim.lr": "request", "trainer": "project"}
    assert source_of(("actor", "optim", "lr"), sources) == ("request", "actor.optim.lr")
    assert source_of(("actor", "optim", "betas"), sources) == ("inventory", "actor.optim")
    assert source_of(("trainer", "logger"), sources) == ("project", "trainer")
    assert source_of(("actor", "ppo_epochs"), sources) == ("default", None)
    assert source_of(("actor",), None) == ("default", None)


# ---- config_diff ----

def test_nested_keys_lists_and_a_key_only_in_one_run():
    a = {"actor": {"optim": {"lr": 1e-6, "betas": [0.9, 0.999]}, "ppo_epochs": 1}}
    b = {"actor": {"optim": {"lr": 3e-6, "betas": [0.9, 0.95]}, "ppo_epochs": 1, "use_kl": True}}
    result = config_diff([_entry("r1", a), _entry("r2", b)])
    rows = _rows(result)
    assert sorted(rows) == ["actor.optim.betas", "actor.optim.lr", "actor.use_kl"]
    assert rows["actor.optim.lr"]["values"] == {"r1": json.dumps(a["actor"]["optim"]["lr"]),
                                                "r2": json.dumps(b["actor"]["optim"]["lr"])}
    assert rows["actor.optim.betas"]["values"] == {"r1": json.dumps(a["actor"]["optim"]["betas"]),
                                                   "r2": json.dumps(b["actor"]["optim"]["betas"])}
    assert rows["actor.use_kl"]["values"] == {"r1": UNSET, "r2": json.dumps(True)}
    assert result["compared"] == ["r1", "r2"] and result["missing"] == [] and result["more"] == 0
    assert [row["key"] for row in result["rows"]] == sorted(rows)


def test_equal_configs_have_no_rows():
    config = {"a": {"b": [1, 2]}, "c": "${oc.env:HOME}"}
    assert config_diff([_entry("r1", config), _entry("r2", json.loads(json.dumps(config)))])["rows"] == []


def test_each_run_own_id_in_a_value_is_not_a_difference():
    result = config_diff([_entry("run-1", {"trainer": {"dir": "/private/jobs/run-1/checkpoints"}}),
                          _entry("run-2", {"trainer": {"dir": "/private/jobs/run-2/checkpoints"}})])
    assert result["rows"] == []


def test_a_key_holding_a_dot_is_bracketed():
    result = config_diff([_entry("r1", {"env": {"A.B": 1}}), _entry("r2", {"env": {"A.B": 2}})])
    assert [row["key"] for row in result["rows"]] == ["env[A.B]"]


@pytest.mark.parametrize("source", ["request", "inventory", "catalog", "project"])
def test_a_value_an_override_set_is_labelled_with_its_source(source):
    key = "actor.optim.lr"
    result = config_diff([_entry("r1", {"actor": {"optim": {"lr": 1.0}}}, {key: source}),
                          _entry("r2", {"actor": {"optim": {"lr": 2.0}}}, {key: source})])
    (row,) = result["rows"]
    assert row["sources"] == [source]
    for rid in ("r1", "r2"):
        origin = row["origins"][rid]
        assert (origin["source"], origin["override"], origin["label"]) == (source, key, source)


def test_sources_differ_between_runs_and_the_default_names_the_snapshot_and_file():
    calls = []
    files = ["verl/trainer/config/actor/actor.yaml"]

    def locate(rid, path, value):
        calls.append((rid, path, value))
        return files

    result = config_diff([_entry("r1", {"actor": {"optim": {"lr": 1e-6}}}, {}, code_id="verl-a"),
                          _entry("r2", {"actor": {"optim": {"lr": 5e-6}}}, {"actor.optim.lr": "request"})],
                         locate=locate)
    (row,) = result["rows"]
    assert row["sources"] == ["request", "default"]
    default = row["origins"]["r1"]
    assert default["source"] == "default" and default["files"] == files and default["code_id"] == "verl-a"
    assert default["label"] == "default of verl-a: %s" % files[0]
    assert row["origins"]["r2"]["label"] == "request"
    # Only the run whose value is the snapshot's default is looked up, with its own (raw) value.
    assert calls == [("r1", ("actor", "optim", "lr"), 1e-6)]


def test_a_mapping_override_covers_its_keys():
    result = config_diff([_entry("r1", {"optim": {"lr": 1}}, {"optim": "inventory"}),
                          _entry("r2", {"optim": {"lr": 2}}, {"optim": "inventory"})])
    origin = result["rows"][0]["origins"]["r1"]
    assert (origin["source"], origin["override"], origin["label"]) == ("inventory", "optim", "inventory (optim)")


def test_a_default_without_a_file_and_a_key_the_snapshot_lacks():
    result = config_diff([_entry("r1", {"a": 1}, code_id="verl-a"), _entry("r2", {"b": 1}, code_id="verl-b")],
                         locate=lambda rid, path, value: [])
    rows = _rows(result)
    assert rows["a"]["origins"]["r1"]["label"] == "default of verl-a"
    assert rows["a"]["origins"]["r2"]["label"] == "not in verl-b's config"
    assert rows["b"]["origins"]["r1"]["label"] == "not in verl-a's config"


def test_redacted_values_are_named_and_equal_ones_are_not_a_difference():
    a = {"wandb": {"api_key": REDACTED, "token": REDACTED}, "x": 1}
    b = {"wandb": {"api_key": REDACTED}, "x": 1}
    result = config_diff([_entry("r1", a), _entry("r2", b)])
    assert result["redacted"] == ["wandb.api_key", "wandb.token"]
    # Both redacted: not known to differ. Redacted in one run only: that is a difference.
    assert [row["key"] for row in result["rows"]] == ["wandb.token"]
    assert result["rows"][0]["values"] == {"r1": json.dumps(REDACTED), "r2": UNSET}


def test_runs_without_a_resolved_config_are_named_and_not_compared():
    result = config_diff([_entry("r1", {"a": 1}), _entry("s1", None), _entry("r2", {"a": 2})])
    assert result["compared"] == ["r1", "r2"] and result["missing"] == ["s1"]
    assert set(result["rows"][0]["values"]) == {"r1", "r2"}
    alone = config_diff([_entry("r1", {"a": 1}), _entry("s1", None)])
    assert alone["rows"] == [] and alone["compared"] == ["r1"] and alone["missing"] == ["s1"]


def test_rows_beyond_the_limit_are_counted():
    a = {"k%d" % i: i for i in range(5)}
    b = {"k%d" % i: i + 1 for i in range(5)}
    result = config_diff([_entry("r1", a), _entry("r2", b)], max_rows=2)
    assert [row["key"] for row in result["rows"]] == sorted(a)[:2]
    assert result["more"] == len(a) - 2


# ---- default_files ----

def test_default_files_match_a_key_suffix_with_the_same_value():
    files = {
        "verl/trainer/config/actor/actor.yaml": flatten_config({"optim": {"lr": 1e-6}}),
        "verl/trainer/config/optim/fsdp.yaml": flatten_config({"lr": 1e-3}),
        "verl/trainer/config/_generated_ppo_trainer.yaml": flatten_config(
            {"actor_rollout_ref": {"actor": {"optim": {"lr": 1e-6}}}}),
        "verl/trainer/config/critic/critic.yaml": flatten_config({"optim": {"lr": 1e-6}, "other": {"lr": 1e-6}}),
    }
    path = ("actor_rollout_ref", "actor", "optim", "lr")
    # Same value: actor.yaml and critic.yaml match on optim.lr, the generated file on the whole key
    # (listed last: Hydra does not compose it); fsdp.yaml has another value.
    assert default_files(path, 1e-6, files) == ["verl/trainer/config/actor/actor.yaml",
                                                "verl/trainer/config/critic/critic.yaml",
                                                "verl/trainer/config/_generated_ppo_trainer.yaml"]
    # A file that differs from the baseline's snapshot comes first.
    assert default_files(path, 1e-6, files, changed={"verl/trainer/config/critic/critic.yaml"})[0] == \
        "verl/trainer/config/critic/critic.yaml"
    assert default_files(path, 1e-3, files) == ["verl/trainer/config/optim/fsdp.yaml"]
    assert default_files(path, 1e-6, files, limit=1) == ["verl/trainer/config/actor/actor.yaml"]


def test_default_files_compare_numbers_by_value_and_bools_apart():
    files = {"f1.yaml": flatten_config({"n": 1}), "f2.yaml": flatten_config({"n": True})}
    assert default_files(("a", "n"), 1.0, files) == ["f1.yaml"]
    assert default_files(("a", "n"), True, files) == ["f2.yaml"]
    assert default_files(("a", "n"), "1", files) == []


# ---- code diff ----

def _reader(files):
    def read(path):
        if path not in files:
            raise OSError("no such file: %s" % path)
        return files[path]
    return read


def _manifest(files):
    """A content record: the bytes stand for their digest."""
    return {path: data.hex() for path, data in files.items()}


def _pair(old_files, new_files, **extra):
    pair = {"from": "verl-a", "to": "verl-b", "runs": ["r2"], "old": _manifest(old_files),
            "new": _manifest(new_files), "read_old": _reader(old_files), "read_new": _reader(new_files),
            "error": None}
    pair.update(extra)
    return pair


def _udiff(old, new, path, old_root="verl-a", new_root="verl-b"):
    """The expected unified diff of two texts, as difflib makes it."""
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        "%s/%s" % (old_root, path), "%s/%s" % (new_root, path)))


def test_a_changed_text_file_is_listed_and_diffed():
    old = "optim:\n  lr: 1e-6\n  betas: [0.9, 0.999]\n"
    new = "optim:\n  lr: 3e-6\n  betas: [0.9, 0.999]\n"
    path = "verl/trainer/config/actor/actor.yaml"
    summary, full = code_diff([_pair({path: old.encode()}, {path: new.encode()})])
    (pair,) = summary["pairs"]
    expected = _udiff(old, new, path)
    assert pair["diff"] == expected
    (record,) = pair["changed"]
    assert (record["path"], record["binary"], record["shown"]) == (path, False, "full")
    assert (record["added_lines"], record["removed_lines"]) == (1, 1)
    assert pair["added"] == [] and pair["removed"] == [] and not pair["truncated"]
    assert full == "# verl-a -> verl-b (runs r2): 1 changed, 0 added, 0 removed\n" + expected
    assert summary["full_lines"] == full.count("\n") and summary["full_bytes"] == len(full.encode())
    assert summary["shown_lines"] == expected.count("\n") and summary["shown_bytes"] == len(expected.encode())


def test_a_binary_file_is_named_not_diffed():
    path = "verl/model.bin"
    old, new = b"\x00\x01\x02", b"\x00\x01\x03"
    summary, full = code_diff([_pair({path: old}, {path: new})])
    (record,) = summary["pairs"][0]["changed"]
    assert record["binary"] and record["shown"] == "no" and record["added_lines"] is None
    assert summary["pairs"][0]["diff"] == ""
    assert "Binary files verl-a/%s and verl-b/%s differ\n" % (path, path) in full


@pytest.mark.parametrize("data, binary", [(b"plain text\n", False), ("caf\u00e9\n".encode(), False),
                                          (b"nul\x00inside", True), (b"\xff\xfe latin", True)])
def test_is_binary(data, binary):
    assert is_binary(data) is binary


def test_added_and_removed_files_are_listed_and_only_in_the_full_diff():
    kept = "x = 1\n"
    old = {"verl/kept.py": kept.encode(), "verl/gone.py": b"def f():\n    pass\n"}
    new = {"verl/kept.py": kept.encode(), "verl/new.py": b"y = 2\n", "verl/new.png": b"\x89PNG\x00"}
    summary, full = code_diff([_pair(old, new)])
    pair = summary["pairs"][0]
    assert [r["path"] for r in pair["added"]] == ["verl/new.py", "verl/new.png"]  # Python before other files
    assert [r["path"] for r in pair["removed"]] == ["verl/gone.py"]
    assert pair["changed"] == [] and pair["diff"] == ""
    assert "".join(difflib.unified_diff([], ["y = 2\n"], "/dev/null", "verl-b/verl/new.py")) in full
    assert "".join(difflib.unified_diff(["def f():\n", "    pass\n"], [], "verl-a/verl/gone.py", "/dev/null")) in full
    assert "Binary files /dev/null and verl-b/verl/new.png differ\n" in full
    assert [r["added_lines"] for r in pair["added"]] == [1, None]
    assert pair["removed"][0]["removed_lines"] == 2


def test_configuration_files_come_before_python_and_other_files():
    names = ["verl/z.py", "verl/a.txt", "verl/trainer/config/b.yaml", "verl/a.py", "verl/c.json"]
    summary, _full = code_diff([_pair({n: b"1\n" for n in names}, {n: b"2\n" for n in names})])
    assert [r["path"] for r in summary["pairs"][0]["changed"]] == [
        "verl/c.json", "verl/trainer/config/b.yaml", "verl/a.py", "verl/z.py", "verl/a.txt"]


def test_the_line_cap_cuts_the_inline_diff_at_a_whole_line():
    old = "".join("line %d\n" % i for i in range(50))
    new = "".join("LINE %d\n" % i for i in range(50))
    files_old = {"verl/a.py": old.encode(), "verl/b.py": old.encode()}
    files_new = {"verl/a.py": new.encode(), "verl/b.py": new.encode()}
    summary, full = code_diff([_pair(files_old, files_new)], max_lines=7, max_bytes=10 ** 6)
    pair = summary["pairs"][0]
    first = _udiff(old, new, "verl/a.py")
    assert pair["diff"] == "".join(first.splitlines(True)[:7])
    assert pair["truncated"] and summary["truncated"]
    assert [r["shown"] for r in pair["changed"]] == ["part", "no"]
    assert summary["shown_lines"] == 7 and summary["max_lines"] == 7
    # The full diff keeps everything.
    assert first in full and _udiff(old, new, "verl/b.py") in full


def test_the_byte_cap_keeps_whole_files_that_fit():
    old, new = "a\n", "b\n"
    first = _udiff(old, new, "verl/a.py")
    files_old = {"verl/a.py": old.encode(), "verl/b.py": old.encode()}
    files_new = {"verl/a.py": new.encode(), "verl/b.py": new.encode()}
    summary, _full = code_diff([_pair(files_old, files_new)], max_lines=1000, max_bytes=len(first.encode()))
    pair = summary["pairs"][0]
    assert pair["diff"] == first
    assert [r["shown"] for r in pair["changed"]] == ["full", "no"]
    assert pair["truncated"] and summary["shown_bytes"] == len(first.encode())


def test_the_caps_are_shared_by_every_snapshot_pair():
    old, new = "a\nb\n", "a\nc\n"
    text = _udiff(old, new, "verl/a.py")
    pairs = [_pair({"verl/a.py": old.encode()}, {"verl/a.py": new.encode()}),
             _pair({"verl/a.py": old.encode()}, {"verl/a.py": new.encode()}, to="verl-c", runs=["r3"])]
    summary, full = code_diff(pairs, max_lines=text.count("\n"), max_bytes=10 ** 6)
    assert summary["pairs"][0]["diff"] == text and not summary["pairs"][0]["truncated"]
    assert summary["pairs"][1]["diff"] == "" and summary["pairs"][1]["truncated"]
    assert "# verl-a -> verl-c (runs r3): 1 changed, 0 added, 0 removed\n" in full


def test_zero_caps_give_no_inline_diff():
    summary, full = code_diff([_pair({"verl/a.py": b"1\n"}, {"verl/a.py": b"2\n"})], max_lines=0, max_bytes=0)
    assert summary["pairs"][0]["diff"] == "" and summary["truncated"] and full


def test_a_missing_newline_at_the_end_is_marked():
    record, lines = file_diff("verl/a.py", b"x = 1", b"x = 2", "verl-a", "verl-b")
    assert lines[-1] == "\\ No newline at end of file\n"
    assert all(line.endswith("\n") for line in lines)
    assert (record["added_lines"], record["removed_lines"]) == (1, 1)


def test_same_content_under_two_code_ids_lists_nothing():
    files = {"verl/a.py": b"x\n"}
    summary, full = code_diff([_pair(files, dict(files))])
    pair = summary["pairs"][0]
    assert (pair["changed"], pair["added"], pair["removed"], pair["error"]) == ([], [], [], None)
    assert full == "" and summary["full_lines"] == 0


def test_a_pair_without_a_content_record_says_why():
    summary, full = code_diff([_pair({}, {}, old=None, error="/x has no verl/ package")])
    assert summary["pairs"][0]["error"] == "/x has no verl/ package" and full == ""
    summary, _full = code_diff([_pair({}, {}, new=None)])
    assert summary["pairs"][0]["error"] == "no content record"


def test_an_unreadable_file_is_named_with_the_error():
    pair = _pair({"verl/a.py": b"1\n"}, {"verl/a.py": b"2\n"})
    pair["read_new"] = _reader({})
    summary, full = code_diff([pair])
    (record,) = summary["pairs"][0]["changed"]
    assert record["error"].startswith("unreadable") and record["shown"] == "no"
    assert "verl-b/verl/a.py differ (unreadable" in full


def test_no_pairs_no_diff():
    summary, full = code_diff([])
    assert summary["pairs"] == [] and full == "" and not summary["truncated"]


# ---- plot_kind ----

def _line(series):
    return {"label": "x", "series": series}


@pytest.mark.parametrize("counts, kind", [([1, 1], "points"), ([2, 1], "points"), ([2, 0], "points"),
                                          ([3, 1], "lines"), ([8, 8], "lines"), ([0, 0], "none")])
def test_plot_kind_points_when_every_run_logged_the_metric_at_most_twice(counts, kind):
    lines = [_line({"val/loss": [[8 + i, 1.0] for i in range(n)]}) for n in counts]
    assert plot_kind(lines, "val/loss") == kind
