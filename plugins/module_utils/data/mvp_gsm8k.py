# -*- coding: utf-8 -*-
"""GSM8K conversion to the parquet formats verl reads, with manifests.

Formats (docs/how-it-works.md, "Data"; from verl's
``examples/data_preprocess/gsm8k.py`` and ``MultiTurnSFTDataset``):

* RL rows: ``data_source`` ("openai/gsm8k"), ``prompt`` (list of one
  {"role": "user", "content": question + " " + INSTRUCTION}), ``ability``
  ("math"), ``reward_model`` ({"style": "rule", "ground_truth": N}) and
  ``extra_info`` ({"split", "index", "answer", "question"}).
* SFT rows: ``messages``: [user: question + " " + INSTRUCTION, assistant: answer].

Source rows are GSM8K release lines: {"question": str, "answer": str} where the
answer ends with ``#### N``. Rows without ``#### N`` are rejected (reported,
never given an empty ground truth).

Pure functions except the ``write_*`` / ``read_*`` helpers, which use pyarrow
(imported lazily so the pure parts need no pyarrow).
"""

from __future__ import annotations

import json
import os
import random
import re
import tempfile
import time

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_files import sha256_file

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
MANIFEST = "MANIFEST.json"
_ANSWER_RE = re.compile(r"#### (\-?[0-9\.\,]+)")


def extract_ground_truth(answer):
    """Return the number after the first ``#### `` with commas removed, or None.

    :param answer: str, a GSM8K answer such as ``"... 3 + 4 = 7\\n#### 7"``.
    :returns: str such as ``"1234"`` for ``"#### 1,234"``; None when absent.
    """
    if not isinstance(answer, str):
        return None
    match = _ANSWER_RE.search(answer)
    if match is None:
        return None
    return match.group(1).replace(",", "")


def _prompt_text(question):
    return question + " " + INSTRUCTION


def convert_rows(rows, split):
    """Convert GSM8K source rows into RL and SFT records.

    :param rows: iterable of dicts with ``question`` and ``answer`` (str).
    :param split: str, split name stored in ``extra_info.split`` ("train", "test").
    :returns: tuple (rl_records, sft_records, rejected) where rejected is a list
        of {"index": int, "reason": str} for rows left out.
    """
    rl, sft, rejected = [], [], []
    for index, row in enumerate(rows):
        question = row.get("question") if isinstance(row, dict) else None
        answer = row.get("answer") if isinstance(row, dict) else None
        if not isinstance(question, str) or not question.strip():
            rejected.append({"index": index, "reason": "missing question"})
            continue
        truth = extract_ground_truth(answer)
        if truth is None:
            rejected.append({"index": index, "reason": "answer has no '#### N'"})
            continue
        content = _prompt_text(question)
        rl.append({
            "data_source": DATA_SOURCE,
            "prompt": [{"role": "user", "content": content}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"split": split, "index": index, "answer": answer, "question": question},
        })
        sft.append({"messages": [{"role": "user", "content": content},
                                 {"role": "assistant", "content": answer}]})
    return rl, sft, rejected


def read_jsonl(path):
    """Read a JSON-lines file; a line that is not a JSON object becomes {} (rejected later).

    :param path: str, file path.
    :returns: list of dicts.
    """
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                value = {}
            rows.append(value if isinstance(value, dict) else {})
    return rows


def read_parquet_rows(path):
    """Read GSM8K rows (``question``, ``answer`` columns) from a parquet file.

    :param path: str, parquet file (the Hugging Face ``openai/gsm8k`` files have this layout).
    :returns: list of dicts.
    """
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    missing = {"question", "answer"} - set(table.column_names)
    if missing:
        raise ValueError("%s lacks GSM8K columns %s" % (path, sorted(missing)))
    return table.select(["question", "answer"]).to_pylist()


def find_split(source_dir, split):
    """Find the file of ``split`` in a GSM8K source folder.

    Accepted layouts, first match wins: ``<split>.jsonl`` (original release),
    ``<split>.parquet``, and the Hugging Face hub layout
    ``main/<split>-*.parquet`` (or ``<split>-*.parquet``).

    :returns: str path, or None when nothing matches.
    """
    import glob

    candidates = [os.path.join(source_dir, split + ".jsonl"), os.path.join(source_dir, split + ".parquet")]
    for path in candidates:
        if os.path.isfile(path):
            return path
    for pattern in ("main/%s-*.parquet", "%s-*.parquet"):
        found = sorted(glob.glob(os.path.join(source_dir, pattern % split)))
        if found:
            return found[0]
    return None


def load_split(source_dir, split):
    """Read the rows of ``split`` from a GSM8K source folder (see find_split).

    :raises FileNotFoundError: naming the folder and the accepted layouts.
    """
    path = find_split(source_dir, split)
    if path is None:
        raise FileNotFoundError(
            "no %s split in %s: expected %s.jsonl, %s.parquet or main/%s-*.parquet"
            % (split, source_dir, split, split, split))
    return path, (read_jsonl(path) if path.endswith(".jsonl") else read_parquet_rows(path))


def sample_rows(count, seed):
    """Make ``count`` small GSM8K-format word problems (deterministic for a seed).

    The project's own offline sample: each answer has GSM8K's ``<<a+b=c>>``
    calculator notes and a final ``#### N`` line.

    :param count: int, number of rows.
    :param seed: int, random seed.
    :returns: list of {"question", "answer"} dicts.
    """
    rng = random.Random(seed)
    names = ["Ava", "Ben", "Chen", "Dana", "Eli", "Fatima", "Goro", "Hana"]
    things = ["apples", "marbles", "books", "stamps", "pencils", "shells"]
    rows = []
    for _index in range(count):
        name, thing = rng.choice(names), rng.choice(things)
        a, b, c = rng.randint(2, 40), rng.randint(2, 40), rng.randint(2, 9)
        total = (a + b) * c
        rows.append({
            "question": "%s has %d %s and gets %d more. Then %s's collection grows %d times. "
                        "How many %s does %s have now?" % (name, a, thing, b, name, c, thing, name),
            "answer": "%s first has %d + %d = <<%d+%d=%d>>%d %s.\nThen %d * %d = <<%d*%d=%d>>%d %s.\n#### %d"
                      % (name, a, b, a, b, a + b, a + b, thing, a + b, c, a + b, c, total, total,
                         thing, total),
        })
    return rows


def write_parquet_atomic(records, path):
    """Write records to parquet through a temporary file renamed into place.

    :param records: list of dicts with one schema.
    :param path: str, destination; its folder must exist.
    :returns: int, number of rows written.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(records)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=os.path.dirname(path))
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return table.num_rows


def write_manifest(directory, source, files):
    """Write MANIFEST.json (atomically) describing the dataset files of ``directory``.

    :param directory: str, dataset folder.
    :param source: str, where the rows came from.
    :param files: dict file name -> row count.
    :returns: dict, the manifest.
    """
    manifest = {
        "source": source,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": {name: {"rows": rows, "sha256": sha256_file(os.path.join(directory, name))}
                  for name, rows in sorted(files.items())},
    }
    fd, tmp = tempfile.mkstemp(prefix=".manifest.", dir=directory)
    with os.fdopen(fd, "w") as handle:
        json.dump(manifest, handle, indent=2, sort_keys=True)
    os.chmod(tmp, 0o644)
    os.rename(tmp, os.path.join(directory, MANIFEST))
    return manifest


def check_manifest(directory, expected_files):
    """Say whether ``directory`` holds a complete dataset.

    :param directory: str, dataset folder.
    :param expected_files: list of file names that must be listed and match.
    :returns: tuple (ok: bool, reason: str). ``reason`` says what is missing or
        which checksum differs.
    """
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        return False, "no %s in %s" % (MANIFEST, directory)
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
        files = manifest["files"]
    except (ValueError, KeyError, TypeError) as exc:
        return False, "unreadable %s (%s)" % (path, exc)
    for name in expected_files:
        if name not in files:
            return False, "%s is not listed in %s" % (name, path)
        target = os.path.join(directory, name)
        if not os.path.isfile(target):
            return False, "%s is missing" % target
        if sha256_file(target) != files[name].get("sha256"):
            return False, "%s does not match its manifest checksum" % target
    return True, "manifest complete"
