"""Unit tests of the GSM8K conversion against verl's schema (module_utils mvp_gsm8k, docs/how-it-works.md "Data")."""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_gsm8k import (
    check_manifest, convert_rows, extract_ground_truth, read_jsonl, sample_rows,
    write_manifest, write_parquet_atomic)

SUFFIX = ' Let\'s think step by step and output the final answer after "####".'
GOOD = {"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
        "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\n48+24 = <<48+24=72>>72\n#### 72"}


def test_ground_truth_extraction():
    assert extract_ground_truth("x\n#### 72") == "72"
    assert extract_ground_truth("x\n#### 1,234") == "1234"
    assert extract_ground_truth("x\n#### -5") == "-5"
    assert extract_ground_truth("x\n#### 2.5") == "2.5"
    assert extract_ground_truth("no final answer") is None
    assert extract_ground_truth("####72") is None
    assert extract_ground_truth(None) is None


def test_rl_row_has_verls_gsm8k_schema():
    rl, sft, rejected = convert_rows([GOOD], "train")
    assert rejected == []
    assert rl == [{
        "data_source": "openai/gsm8k",
        "prompt": [{"role": "user", "content": GOOD["question"] + SUFFIX}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "72"},
        "extra_info": {"split": "train", "index": 0, "answer": GOOD["answer"], "question": GOOD["question"]},
    }]
    assert sft == [{"messages": [{"role": "user", "content": GOOD["question"] + SUFFIX},
                                 {"role": "assistant", "content": GOOD["answer"]}]}]


def test_malformed_rows_are_reported_and_left_out():
    rows = [GOOD, {"question": "q", "answer": "no marker"}, {"answer": "#### 3"}, {}, GOOD]
    rl, sft, rejected = convert_rows(rows, "test")
    assert [r["extra_info"]["index"] for r in rl] == [0, 4]
    assert len(sft) == 2
    assert rejected == [{"index": 1, "reason": "answer has no '#### N'"},
                        {"index": 2, "reason": "missing question"},
                        {"index": 3, "reason": "missing question"}]
    assert all(r["reward_model"]["ground_truth"] for r in rl)


def test_jsonl_reader_turns_bad_lines_into_rejectable_rows(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps(GOOD) + "\nnot json\n\n[1, 2]\n")
    rows = read_jsonl(str(path))
    assert rows == [GOOD, {}, {}]
    assert len(convert_rows(rows, "train")[2]) == 2


def test_sample_rows_are_gsm8k_format_and_deterministic():
    rows = sample_rows(10, seed=3)
    assert rows == sample_rows(10, seed=3)
    for row in rows:
        total = int(extract_ground_truth(row["answer"]))
        assert row["answer"].endswith("#### %d" % total)
    assert convert_rows(rows, "train")[2] == []


def test_parquet_round_trip_keeps_nested_types(tmp_path):
    rl, sft, _ = convert_rows(sample_rows(4, seed=1), "train")
    rl_path, sft_path = str(tmp_path / "train.parquet"), str(tmp_path / "sft.parquet")
    assert write_parquet_atomic(rl, rl_path) == 4
    write_parquet_atomic(sft, sft_path)
    schema = pq.read_schema(rl_path)
    assert set(schema.names) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert pa.types.is_list(schema.field("prompt").type)
    assert pa.types.is_struct(schema.field("prompt").type.value_type)
    assert {f.name for f in schema.field("prompt").type.value_type} == {"role", "content"}
    assert pa.types.is_struct(schema.field("reward_model").type)
    assert {f.name for f in schema.field("reward_model").type} == {"style", "ground_truth"}
    assert pa.types.is_string(schema.field("reward_model").type.field("ground_truth").type)
    assert pq.read_table(rl_path).to_pylist() == rl
    sft_schema = pq.read_schema(sft_path)
    assert sft_schema.names == ["messages"]
    assert pa.types.is_list(sft_schema.field("messages").type)
    assert [f.name for f in os.scandir(tmp_path) if f.name.startswith(".")] == []


def test_manifest_detects_missing_and_corrupted_files(tmp_path):
    directory = str(tmp_path)
    assert check_manifest(directory, ["a.parquet"])[0] is False
    rows = convert_rows(sample_rows(2, seed=1), "train")[0]
    write_parquet_atomic(rows, os.path.join(directory, "a.parquet"))
    manifest = write_manifest(directory, "test", {"a.parquet": 2})
    assert manifest["files"]["a.parquet"]["rows"] == 2
    assert check_manifest(directory, ["a.parquet"]) == (True, "manifest complete")
    assert check_manifest(directory, ["a.parquet", "b.parquet"])[0] is False
    with open(os.path.join(directory, "a.parquet"), "ab") as handle:
        handle.write(b"corrupt")
    ok, reason = check_manifest(directory, ["a.parquet"])
    assert not ok and "checksum" in reason


def test_jsonl_parquet_and_hub_layouts_give_the_same_rows(tmp_path):
    from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_gsm8k import load_split

    rows = sample_rows(5, seed=7)
    jsonl_dir, parquet_dir, hub_dir = tmp_path / "j", tmp_path / "p", tmp_path / "h" / "main"
    for folder in (jsonl_dir, parquet_dir, hub_dir):
        folder.mkdir(parents=True)
    (jsonl_dir / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pq.write_table(pa.Table.from_pylist(rows), str(parquet_dir / "train.parquet"))
    pq.write_table(pa.Table.from_pylist(rows), str(hub_dir / "train-00000-of-00001.parquet"))
    loaded = [load_split(str(d), "train") for d in (jsonl_dir, parquet_dir, tmp_path / "h")]
    assert [path.rsplit("/", 1)[1] for path, _ in loaded] == [
        "train.jsonl", "train.parquet", "train-00000-of-00001.parquet"]
    assert all(convert_rows(r, "train") == convert_rows(rows, "train") for _, r in loaded)


def test_missing_split_names_the_accepted_layouts(tmp_path):
    from ansible_collections.mvp.ray.plugins.module_utils.data.mvp_gsm8k import load_split

    try:
        load_split(str(tmp_path), "test")
    except FileNotFoundError as exc:
        assert "test.jsonl" in str(exc) and "main/test-*.parquet" in str(exc)
    else:
        raise AssertionError("a missing split must raise")
