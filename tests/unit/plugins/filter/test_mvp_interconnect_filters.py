"""The interconnect filters: files under the shared root, and the comparison read from slurp results
(as the preflight passes them: base64 content, or a failed read of a file that is not there)."""
import base64
import json

import pytest
from ansible.errors import AnsibleFilterError

import mvp_interconnect_filters as filters

MIB = 1 << 20


def slurp(record):
    return {"content": base64.b64encode(json.dumps(record).encode()).decode(), "encoding": "base64",
            "source": "/private/ray/x.json", "item": "/private/ray/x.json", "changed": False}


MISSING = {"failed": False, "msg": "file not found: /private/ray/interconnect_latest.json", "changed": False,
           "item": "/private/ray/interconnect_latest.json"}


def record(busbw, sid):
    return {"submission_id": sid, "finished": "t", "world_size": 2,
            "sizes": [{"bytes": 64 * MIB, "busbw": busbw}],
            "pairs": [{"hosts": ["a", "b"], "name": "a (1) <-> b (2)", "bytes": 16 * MIB, "busbw": busbw}]}


def test_files():
    assert filters.mvp_interconnect_files("/private")["latest"] == "/private/ray/interconnect_latest.json"
    with pytest.raises(AnsibleFilterError):
        filters.mvp_interconnect_files("private")


def test_check_reads_slurp_results_and_names_the_pair():
    out = filters.mvp_interconnect_check(slurp(record(300e6, "new")), slurp(record(1000e6, "base")), 0.7)
    assert out["state"] == "below"
    assert any("a (1) <-> b (2)" in w and "30 % of it" in w for w in out["warnings"])


def test_check_accepts_parsed_records_and_a_string_fraction():
    assert filters.mvp_interconnect_check(record(900e6, "n"), record(1000e6, "b"), "0.7")["state"] == "ok"


def test_check_with_files_not_there():
    assert filters.mvp_interconnect_check(MISSING, MISSING, 0.7)["state"] == "no_measurement"
    assert filters.mvp_interconnect_check(slurp(record(1.0, "n")), MISSING, 0.7)["state"] == "no_baseline"


def test_check_says_an_unreadable_file():
    bad = {"content": base64.b64encode(b"{not json").decode(), "encoding": "base64", "source": "/p/b.json"}
    out = filters.mvp_interconnect_check(slurp(record(1.0, "n")), bad, 0.7)
    assert out["state"] == "no_baseline"
    assert any("/p/b.json is not JSON" in line for line in out["lines"])


@pytest.mark.parametrize("fraction", [0, "abc"])
def test_check_refuses_a_bad_fraction_naming_the_setting(fraction):
    with pytest.raises(AnsibleFilterError, match="mvp_interconnect_warn_fraction"):
        filters.mvp_interconnect_check(record(1.0, "n"), record(1.0, "b"), fraction)
