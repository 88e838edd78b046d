"""The strict request reader (plugins/module_utils/request/mvp_request_read.py): JobSpec text and values Ansible parsed.

Real PyYAML, no mocks. Every expected number (offsets, lines, sizes, expansions) is computed here from the
test's own input, never taken from the code under test.
"""
import glob
import os
import time
import tracemalloc

import pytest
import yaml

from ansible_collections.mvp.ray.plugins.module_utils.request import mvp_request_read
from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request_read import (
    LIMITS, RequestReadError, check_value, load_text)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
JOBSPECS = sorted(glob.glob(os.path.join(ROOT, "jobspecs", "*.yaml")))
# The peak Python allocation allowed while refusing a bomb: the expanded documents are gigabytes.
PEAK_BYTES = 20 * 1024 * 1024
# The longest a refusal of anchors, aliases or merge keys may take: it comes at the first one, before anything is built.
QUICK_S = 0.5


def refused(data, source="jobspec t.yaml", **limits):
    """The RequestReadError load_text raises for ``data`` (fails the test when it accepts it)."""
    with pytest.raises(RequestReadError) as info:
        load_text(data, source, limits or None)
    message = str(info.value)
    assert message.startswith(source) and message.endswith("nothing was written."), message
    assert "\n" not in message
    return info.value


def line_of(text, needle, start=0):
    """1-based line of the first ``needle`` in ``text`` at or after ``start``."""
    return text.count("\n", 0, text.index(needle, start)) + 1


def peak_during(call):
    """Peak bytes Python allocated while ``call()`` ran (tracemalloc), and what it raised."""
    tracemalloc.start()
    try:
        try:
            call()
            raised = None
        except RequestReadError as exc:
            raised = exc
        return tracemalloc.get_traced_memory()[1], raised
    finally:
        tracemalloc.stop()


def quickly_refused(text, needle, start=0):
    """Refuse ``text`` (bytes and str, libyaml and pure-Python PyYAML) within QUICK_S and PEAK_BYTES, naming the line
    of the first ``needle`` (at or after ``start``); return the libyaml refusal."""
    line = line_of(text, needle, start)
    load_text("a: 1\n", "warm-up")
    refusals = []
    for data in (text.encode("utf-8"), text):
        began = time.perf_counter()
        peak, exc = peak_during(lambda: load_text(data, "jobspec t.yaml"))
        assert time.perf_counter() - began < QUICK_S and peak < PEAK_BYTES, (time.perf_counter() - began, peak)
        refusals.append(exc)
    with pytest.raises(RequestReadError) as pure:
        mvp_request_read._read_yaml(text, "jobspec t.yaml", dict(LIMITS), libyaml=False)  # pylint: disable=protected-access
    for exc in refusals + [pure.value]:
        assert isinstance(exc, RequestReadError), exc
        message = str(exc)
        assert "on line %d" % line in message, message
        assert "no anchors (&name), aliases (*name) or merge keys (<<)" in exc.fix, message
        assert message.endswith("nothing was written.") and "\n" not in message
    return refusals[0]


def laughs(levels=7, width=10):
    """The billion laughs as a JobSpec: level 0 is ``width`` strings, each next level ``width`` aliases of the last.

    :returns: (str, int) the document and the strings its last level expands to (width ** levels).
    """
    lines = ["workload: sft", "trainer_overrides:",
             "  l0: &l0 [%s]" % ",".join(["lol"] * width)]
    for level in range(1, levels):
        lines.append("  l%d: &l%d [%s]" % (level, level, ",".join(["*l%d" % (level - 1)] * width)))
    return "\n".join(lines) + "\n", width ** levels


# -- no false refusal ---------------------------------------------------------------------------------------------

def test_the_corpus_is_there():
    assert len(JOBSPECS) >= 5


@pytest.mark.parametrize("path", JOBSPECS, ids=os.path.basename)
def test_every_jobspec_loads_as_safe_load_does(path):
    with open(path, "rb") as handle:
        data = handle.read()
    expected = yaml.safe_load(data)
    assert isinstance(expected, dict) and expected
    assert load_text(data, "jobspec " + path) == expected
    assert load_text(data.decode("utf-8"), "jobspec " + path) == expected


@pytest.mark.parametrize("libyaml", [True, False], ids=["libyaml", "pure-python"])
@pytest.mark.parametrize("path", JOBSPECS, ids=os.path.basename)
def test_both_parsers_read_the_corpus_alike(path, libyaml):
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    limits = dict(LIMITS)
    assert mvp_request_read._read_yaml(  # pylint: disable=protected-access
        text, path, limits, libyaml=libyaml) == yaml.safe_load(text)


def test_every_yaml_of_the_pinned_verl_release_is_read_as_safe_load_does(verl_tree):
    # A larger corpus: verl's Hydra configs, whole generated trainer configs (~1000 keys) included.
    files = sorted(glob.glob(os.path.join(verl_tree, "verl", "**", "*.yaml"), recursive=True))
    assert any(os.path.basename(path).startswith("_generated_") for path in files)
    for path in files:
        with open(path, "rb") as handle:
            data = handle.read()
        assert load_text(data, "jobspec " + path) == (yaml.safe_load(data) or {}), path


def test_ordinary_yaml_features_are_read_as_safe_load_does():
    text = ("workload: grpo\n"
            "trainer_overrides:\n"
            "  trainer.nnodes: 1\n"
            "  '<<': a quoted key is text, not a merge key\n"
            "  data.train_files: [a.parquet, b.parquet]\n"
            "  empty_list: []\n"
            "  empty_map: {}\n"
            "  when: 2026-11-21\n"
            "  ratio: 0.5\n"
            "  flag: yes\n"
            "  nothing: ~\n"
            "env_vars:\n"
            "  NOTE: \"caf\u00e9 \u2713\"\n"
            "  MULTI: |\n"
            "    line one\n"
            "    line two\n")
    expected = yaml.safe_load(text)
    assert expected["trainer_overrides"]["<<"].startswith("a quoted key")
    assert load_text(text.encode("utf-8"), "jobspec t.yaml") == expected
    assert load_text("\ufeff" + text, "jobspec t.yaml") == yaml.safe_load("\ufeff" + text)


@pytest.mark.parametrize("text", ["", "---\n", "~\n", "# only a comment\n"])
def test_an_empty_document_is_an_empty_request(text):
    assert load_text(text, "jobspec t.yaml") == {}
    assert load_text(text.encode(), "jobspec t.yaml") == {}


# -- anchors, aliases and merge keys: refused outright, naming the line ------------------------------------------

def test_a_jobspec_with_an_anchor_and_an_alias_is_refused_quickly_naming_the_line():
    text = ("workload: sft\n"
            "model: Qwen2.5-0.5B-Instruct\n"
            "trainer_overrides:\n"
            "  data.train_files: &files [a.parquet, b.parquet]\n"
            "  data.val_files: *files\n")
    exc = quickly_refused(text, "&files")
    assert "anchor &files" in str(exc) and exc.field == "trainer_overrides.data.train_files"


def test_an_alias_alone_is_refused_naming_its_line():
    text = "workload: sft\nmodel: *nowhere\n"
    exc = quickly_refused(text, "*nowhere")
    assert "alias *nowhere" in str(exc) and exc.field == "model"


@pytest.mark.parametrize("text", [
    "workload: sft\ntrainer_overrides:\n  <<: {trainer.nnodes: 2}\n  trainer.n_gpus_per_node: 1\n",
    "workload: sft\ntrainer_overrides: {<<: [{trainer.nnodes: 2}], trainer.n_gpus_per_node: 1}\n",
    "workload: sft\ntrainer_overrides:\n  !!merge '<<': {trainer.nnodes: 2}\n",
], ids=["block", "flow", "tagged"])
def test_a_jobspec_with_a_merge_key_is_refused_quickly_naming_the_line(text):
    exc = quickly_refused(text, "<<")
    assert "merge key '<<'" in str(exc) and exc.field == "trainer_overrides"   # the mapping that holds it


def test_the_billion_laughs_is_refused_at_its_first_anchor():
    text, strings = laughs()
    assert len(text.encode()) < 512 and strings >= 10 ** 7
    exc = quickly_refused(text, "&l0")
    assert exc.field == "trainer_overrides.l0"


def test_a_bomb_of_merge_keys_is_refused_before_safe_load_would_copy_them():
    # Each level merges the last one 10 times: PyYAML's constructor copies 10**level pairs for the last.
    lines = ["m0: {%s}" % ", ".join("%s: %d" % (name, i) for i, name in enumerate("abcdefghij"))]
    for level in range(1, 8):
        lines.append("m%d: &m%d {<<: [%s]}" % (level, level, ", ".join(["*m%d" % (level - 1)] * 10)))
    quickly_refused("\n".join(lines) + "\n", "&m1")


def test_a_recursive_alias_is_refused_at_its_anchor():
    text = "workload: sft\ntrainer_overrides:\n  loop: &loop [1, *loop]\n"
    exc = quickly_refused(text, "&loop")
    assert exc.field == "trainer_overrides.loop"


def test_an_anchor_on_a_key_is_refused():
    text = "workload: sft\n&k model: m\n"
    exc = quickly_refused(text, "&k")
    assert exc.field == "(key on line 2)"


# -- totals without references -----------------------------------------------------------------------------------

def test_more_mapping_keys_than_max_keys_are_refused():
    inner = LIMITS["max_keys"] - 1   # with the top-level key env_vars: exactly max_keys
    text = "env_vars: {%s}\n" % ", ".join("K%d: 1" % i for i in range(inner))
    assert len(load_text(text, "x")["env_vars"]) == inner
    exc = refused("env_vars: {%s}\n" % ", ".join("K%d: 1" % i for i in range(inner + 1)))
    assert "max_keys=%d" % LIMITS["max_keys"] in str(exc) and exc.field.startswith("env_vars.")


def test_the_worst_text_at_max_bytes_is_refused_at_max_scalars_in_bounded_memory():
    count = (LIMITS["max_bytes"] - 5) // 2          # a flow list of one-letter scalars fills max_bytes
    text = "a: [" + ",".join(["x"] * count) + "]\n"
    assert len(text.encode()) <= LIMITS["max_bytes"] and count > LIMITS["max_scalars"]
    peak, exc = peak_during(lambda: load_text(text.encode(), "jobspec t.yaml"))
    assert isinstance(exc, RequestReadError) and "max_scalars=%d" % LIMITS["max_scalars"] in str(exc), exc
    # the top-level key is the first scalar: the list's item past the limit is the one refused
    assert exc.field == "a[%d]" % (LIMITS["max_scalars"] - 1)
    assert peak < 2 * PEAK_BYTES, peak


def test_max_chars_bounds_the_text_of_all_strings():
    text = "a: %s\nb: %s\n" % ("x" * 40, "y" * 40)
    assert load_text(text, "x", {"max_chars": 82}) == yaml.safe_load(text)   # keys a and b count too
    exc = refused(text, max_chars=81)
    assert "max_chars=81" in str(exc) and exc.field == "b"


# -- keys given twice ------------------------------------------------------------------------------------------------

def test_a_key_given_twice_at_the_top_level_is_refused_naming_it_and_both_lines():
    text = "workload: sft\nmodel: Qwen2.5-0.5B-Instruct\ndataset: gsm8k\nmodel: other\n"
    exc = refused(text)
    first = line_of(text, "model:")
    second = line_of(text, "model:", text.index("model:") + 1)
    assert "key 'model' is given twice" in str(exc)
    assert "line %d and line %d" % (first, second) in str(exc)
    assert exc.field == "(top level)"


def test_a_key_given_twice_in_a_nested_mapping_is_refused_naming_its_field_path():
    text = ("workload: sft\n"
            "trainer_overrides:\n"
            "  data:\n"
            "    train_files: a.parquet\n"
            "    val_files: b.parquet\n"
            "    train_files: c.parquet\n")
    exc = refused(text)
    first = line_of(text, "train_files")
    second = line_of(text, "train_files", text.index("train_files") + 1)
    assert exc.field == "trainer_overrides.data"
    assert "key 'train_files' is given twice" in str(exc)
    assert "line %d and line %d" % (first, second) in str(exc)


def test_keys_that_are_the_same_value_are_the_same_key():
    text = "flags:\n  yes: 1\n  true: 2\n"
    exc = refused(text)
    assert "'yes'" in str(exc) and "'true'" in str(exc)
    assert "line %d and line %d" % (line_of(text, "yes"), line_of(text, "true")) in str(exc)


def test_a_key_given_twice_in_a_flow_mapping_names_the_columns():
    text = "env_vars: {A: '1', B: '2', A: '3'}\n"
    exc = refused(text)
    assert "columns %d and %d" % (text.index("A") + 1, text.rindex("A") + 1) in str(exc)


def test_a_key_that_is_not_a_scalar_is_refused():
    text = "workload: sft\n? [a, b]\n: 1\n"
    exc = refused(text)
    assert "not a scalar" in str(exc) and "line %d" % line_of(text, "? [") in str(exc)


# -- bytes, size, syntax, shape ----------------------------------------------------------------------------------

def test_bytes_that_are_not_utf8_are_refused_naming_the_byte_offset():
    data = b"workload: sft\nmodel: caf\xe9-model\n"
    exc = refused(data)
    offset = data.index(b"\xe9")
    assert "byte offset %d" % offset in str(exc)
    assert "line %d" % (data.count(b"\n", 0, offset) + 1) in str(exc)
    assert "UTF-8" in exc.fix


def test_utf16_is_not_utf8():
    data = "workload: sft\n".encode("utf-16")
    exc = refused(data)
    assert "byte offset 0" in str(exc)


def test_a_str_that_utf8_cannot_encode_is_refused():
    text = "workload: sft\nmodel: \udce9\n"
    exc = refused(text)
    assert "character offset %d" % text.index("\udce9") in str(exc)


def test_the_size_limit_accepts_exactly_max_bytes_and_refuses_one_more():
    limit = LIMITS["max_bytes"]
    head = b"workload: sft\n# "
    at_limit = head + b"x" * (limit - len(head) - 1) + b"\n"
    assert len(at_limit) == limit
    assert load_text(at_limit, "jobspec t.yaml") == {"workload": "sft"}
    assert load_text(at_limit.decode(), "jobspec t.yaml") == {"workload": "sft"}
    over = head + b"x" * (limit - len(head)) + b"\n"
    assert len(over) == limit + 1
    for data in (over, over.decode()):
        exc = refused(data)
        assert "max_bytes=%d" % limit in str(exc)


def test_the_size_limit_counts_utf8_bytes_of_a_str():
    limit = LIMITS["max_bytes"]
    text = "a: 1\n# " + "\u00e9" * (limit // 2)   # under the limit in characters, over it in bytes
    assert len(text) <= limit < len(text.encode("utf-8"))
    exc = refused(text)
    assert "max_bytes=%d" % limit in str(exc) and "%d bytes" % len(text.encode("utf-8")) in str(exc)


def test_a_smaller_size_limit_can_be_given():
    data = b"workload: sft\n"
    assert load_text(data, "x", {"max_bytes": len(data)}) == {"workload": "sft"}
    exc = refused(data, max_bytes=len(data) - 1)
    assert "max_bytes=%d" % (len(data) - 1) in str(exc)


def test_an_unknown_limit_is_a_programming_error():
    with pytest.raises(ValueError, match="max_nothing"):
        load_text("a: 1\n", "x", {"max_nothing": 1})


def test_other_types_are_not_text():
    with pytest.raises(TypeError):
        load_text(["a: 1"], "x")


@pytest.mark.parametrize("text,where", [
    ("workload: sft\nmodel: a: b\n", "line 2"),
    ("workload: sft\ntrainer_overrides: [1, 2\n", "line"),
    ("workload: sft\n---\nworkload: ppo\n", "line"),
    ("workload: sft\nmodel: \x01\n", "line 2"),
])
def test_a_yaml_error_is_refused_on_one_line(text, where):
    exc = refused(text)
    assert "not valid YAML" in str(exc) and where in str(exc)
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)


@pytest.mark.parametrize("text,kind", [("- a\n- b\n", "list"), ("just text\n", "str"), ("42\n", "int")])
def test_a_top_level_that_is_not_a_mapping_is_refused_naming_its_type(text, kind):
    exc = refused(text)
    assert "holds a %s at the top level" % kind in str(exc)


def test_the_depth_limit():
    depth = LIMITS["max_depth"]

    def nested(levels):
        """A mapping nested ``levels`` deep, the top-level mapping being the first."""
        inner = levels - 1
        return "a: " + "{b: " * inner + "1" + "}" * inner + "\n"

    assert load_text(nested(depth), "jobspec t.yaml") == yaml.safe_load(nested(depth))
    exc = refused(nested(depth + 1))
    assert "max_depth=%d" % depth in str(exc)
    assert exc.field == "a" + ".b" * (depth - 1)
    deep_text = "a: " + "[" * 100000 + "]" * 100000 + "\n"   # far past it: refused, not a RecursionError
    assert "max_depth=" in str(refused(deep_text))


def test_a_string_longer_than_max_string_is_refused():
    limit = LIMITS["max_string"]
    assert load_text("a: %s\n" % ("x" * limit), "x") == {"a": "x" * limit}
    text = "workload: sft\nmodel: %s\n" % ("x" * (limit + 1))
    exc = refused(text)
    assert "max_string=%d" % limit in str(exc) and exc.field == "model"
    assert "line %d" % line_of(text, "model") in str(exc)


# -- values Ansible parsed ---------------------------------------------------------------------------------------

def test_check_value_accepts_ordinary_values():
    for value in ({"data": {"train_files": ["a.parquet", "b.parquet"], "max_len": 512}, "lr": 1e-6},
                  {"trainer.nnodes": 2, 7: "int key", 1.5: None, True: False, "empty": {}, "list": []},
                  ["a", ("b", 2)], "text", 7, None, b"bytes", {"set": {1, 2, 3}}):
        assert check_value(value, "-e trainer_overrides") is None


def test_check_value_refuses_shared_references_that_would_be_huge_expanded():
    leaf = ["x"] * 1000
    middle = [leaf] * 1000
    top = [middle] * 1000   # 10**9 strings expanded, 3 lists in memory
    peak, exc = peak_during(lambda: check_value(top, "-e trainer_overrides"))
    assert isinstance(exc, RequestReadError)
    message = str(exc)
    assert message.startswith("-e trainer_overrides") and message.endswith("nothing was written.")
    assert "max_scalars=%d" % LIMITS["max_scalars"] in message
    # The walk stopped at the first scalar past the limit: the field names where that is.
    index = LIMITS["max_scalars"]
    assert exc.field == "[0][%d][%d]" % (index // 1000, index % 1000)
    assert peak < PEAK_BYTES, peak


def test_check_value_refuses_keys_past_max_keys():
    shared = {"k%d" % i: 1 for i in range(100)}
    value = {"g%d" % i: shared for i in range(100)}   # 100 + 100 * 100 keys expanded
    assert 100 + 100 * 100 > LIMITS["max_keys"]
    with pytest.raises(RequestReadError, match="max_keys=%d" % LIMITS["max_keys"]):
        check_value(value, "submit_job_site_overrides")


def test_check_value_refuses_a_value_that_contains_itself():
    value = {"data": {}}
    value["data"]["again"] = value
    with pytest.raises(RequestReadError, match="contains itself") as info:
        check_value(value, "-e trainer_overrides")
    assert info.value.field == "data.again"


def test_check_value_refuses_nesting_past_max_depth():
    depth = LIMITS["max_depth"]
    value = leaf = {}
    for _level in range(depth - 1):
        leaf["n"] = {}
        leaf = leaf["n"]
    check_value(value, "-e x")   # depth levels exactly
    leaf["n"] = {}
    with pytest.raises(RequestReadError, match="max_depth=%d" % depth):
        check_value(value, "-e x")


@pytest.mark.parametrize("key", [None, (1, 2), frozenset([1])])
def test_check_value_refuses_keys_that_are_not_str_int_float_or_bool(key):
    with pytest.raises(RequestReadError, match="mapping key is a %s" % type(key).__name__) as info:
        check_value({"env_vars": {key: "x"}}, "-e env_vars")
    assert info.value.field == "env_vars"


def test_check_value_refuses_a_long_string_and_too_much_text():
    limit = LIMITS["max_string"]
    check_value({"a": "x" * limit}, "-e a")
    with pytest.raises(RequestReadError, match="max_string=%d" % limit) as info:
        check_value({"a": ["ok", "x" * (limit + 1)]}, "-e a")
    assert info.value.field == "a[1]"
    text = "x" * limit
    many = [text] * (LIMITS["max_chars"] // limit + 1)
    with pytest.raises(RequestReadError, match="max_chars=%d" % LIMITS["max_chars"]):
        check_value(many, "-e a")


def test_check_value_takes_smaller_limits():
    with pytest.raises(RequestReadError, match="max_scalars=3"):
        check_value([1, 2, 3, 4], "-e x", {"max_scalars": 3})
    check_value([1, 2, 3], "-e x", {"max_scalars": 3})
