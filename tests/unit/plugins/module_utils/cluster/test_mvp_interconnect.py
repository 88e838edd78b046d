"""The interconnect rules (module_utils/cluster/mvp_interconnect.py): bus bandwidth as nccl-tests defines it
for all-reduce, the ring pairs and their rounds, the result record and the comparison with a baseline.
Every expected number is computed here from the inputs (bytes, seconds, ranks)."""
import itertools

import pytest

from ansible_collections.mvp.ray.plugins.module_utils.cluster import mvp_interconnect as ic

MIB = 1 << 20


def ranks(n):
    return [{"host": "w%d" % i, "ip": "10.0.0.%d" % (i + 1)} for i in range(n)]


@pytest.mark.parametrize("nbytes,seconds,world", [(MIB, 0.01, 2), (64 * MIB, 0.25, 4), (4, 1e-6, 16)])
def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n(nbytes, seconds, world):
    algbw, busbw = ic.bus_bandwidth(nbytes, seconds, world)
    assert algbw == pytest.approx(nbytes / seconds)
    assert busbw == pytest.approx(nbytes / seconds * 2 * (world - 1) / world)


def test_bus_bandwidth_of_a_pair_equals_its_algbw():
    algbw, busbw = ic.bus_bandwidth(16 * MIB, 0.5, 2)
    assert busbw == algbw == pytest.approx(16 * MIB / 0.5)


@pytest.mark.parametrize("args", [(0, 1.0, 2), (MIB, 0, 2), (MIB, -1.0, 2), (MIB, 1.0, 1), (None, 1.0, 2)])
def test_bus_bandwidth_refuses_what_is_not_a_measurement(args):
    with pytest.raises(ValueError):
        ic.bus_bandwidth(*args)


@pytest.mark.parametrize("n", range(0, 12))
def test_ring_pairs_are_the_neighbours_and_n_of_them(n):
    pairs = ic.ring_pairs(n)
    if n < 2:
        assert pairs == []
    elif n == 2:
        assert pairs == [(0, 1)]
    else:
        assert len(pairs) == n
        assert pairs == [(i, (i + 1) % n) for i in range(n)]
        assert set(itertools.chain.from_iterable(pairs)) == set(range(n))


@pytest.mark.parametrize("n", range(2, 40))
def test_pair_phases_cover_every_pair_once_and_no_rank_twice_per_round(n):
    pairs = ic.ring_pairs(n)
    phases = ic.pair_phases(n)
    assert sorted(i for phase in phases for i in phase) == list(range(len(pairs)))
    for phase in phases:
        members = [r for i in phase for r in pairs[i]]
        assert len(members) == len(set(members))
    assert len(phases) <= 3  # bounded: rounds do not grow with n


@pytest.mark.parametrize("nbytes,iterations", [(MIB, 5), (4 * MIB, 5), (16 * MIB, 5), (64 * MIB, 5), (3 * MIB, 7),
                                               (1024, 1), (MIB, 60)])
def test_iterations_for_scale_up_small_messages_with_a_cap(nbytes, iterations):
    import math
    expected = max(iterations, min(50, math.ceil(iterations * 16 * MIB / nbytes)))
    assert ic.iterations_for(nbytes, iterations) == expected


def test_iteration_seconds_take_the_slowest_rank_per_iteration():
    assert ic.iteration_seconds([[1.0, 2.0, 3.0], [1.5, 1.0, 3.5, 9.0]]) == [1.5, 2.0, 3.5]
    with pytest.raises(ValueError):
        ic.iteration_seconds([[], [1.0]])


def test_summarize_computes_busbw_from_the_median_of_the_slowest_rank():
    per_rank = {MIB: [[0.010, 0.030, 0.020], [0.012, 0.011, 0.025]],
                64 * MIB: [[0.5, 0.4, 0.6], [0.45, 0.5, 0.55]]}
    pair = {0: [[0.1, 0.3, 0.2], [0.1, 0.1, 0.1]], 1: [[0.2] * 3, [0.2] * 3], 2: [[0.4] * 3, [0.1] * 3]}
    result = ic.summarize(ranks(3), "gloo", 3, per_rank, 16 * MIB, pair)
    assert result["unit"] == "bytes/s" and result["world_size"] == 3 and result["backend"] == "gloo"
    for row in result["sizes"]:
        each = [max(a, b) for a, b in zip(*per_rank[row["bytes"]])]
        median = sorted(each)[1]
        assert row["seconds"] == median and row["iteration_seconds"] == each and row["iterations"] == 3
        assert row["algbw"] == pytest.approx(row["bytes"] / median)
        assert row["busbw"] == pytest.approx(row["bytes"] / median * 2 * 2 / 3)
        assert row["mib"] == row["bytes"] / MIB
    assert [r["bytes"] for r in result["sizes"]] == [MIB, 64 * MIB]
    assert [p["ranks"] for p in result["pairs"]] == [[0, 1], [1, 2], [2, 0]]
    for p in result["pairs"]:
        each = [max(a, b) for a, b in zip(*pair[p["index"]])]
        assert p["busbw"] == pytest.approx(16 * MIB / sorted(each)[1])
        assert p["hosts"] == ["w%d" % r for r in p["ranks"]]
    assert result["pairs"][2]["name"] == "w2 (10.0.0.3) <-> w0 (10.0.0.1)"
    assert ic.is_good(result)


def measured(sizes_busbw, pairs_busbw, sid="base"):
    """A result record with the given busbw per size (MiB -> bytes/s) and pair (hosts -> bytes/s)."""
    return {"submission_id": sid, "finished": "2026-11-23T22:00:00Z", "world_size": 3,
            "sizes": [{"bytes": m * MIB, "busbw": v} for m, v in sizes_busbw.items()],
            "pairs": [{"hosts": list(h), "name": "%s <-> %s" % h, "bytes": 16 * MIB, "busbw": v}
                      for h, v in pairs_busbw.items()]}


def test_compare_warns_below_the_fraction_naming_the_slowest_pair():
    baseline = measured({1: 100e6, 64: 1000e6}, {("w0", "w1"): 800e6, ("w1", "w2"): 800e6})
    latest = measured({1: 95e6, 64: 600e6}, {("w0", "w1"): 790e6, ("w1", "w2"): 300e6}, sid="new")
    out = ic.compare(latest, baseline, 0.7)
    assert out["state"] == "below"
    below = {b["what"]: b for b in out["below"]}
    # 600 < 0.7 x 1000 and 300 < 0.7 x 800; 95 >= 70 and 790 >= 560 are not
    assert set(below) == {"all-reduce 64 MiB across 3 workers", "pair w1 <-> w2 at 16 MiB"}
    assert below["all-reduce 64 MiB across 3 workers"]["ratio"] == pytest.approx(600 / 1000)
    assert below["pair w1 <-> w2 at 16 MiB"]["pair"] == "w1 <-> w2"
    size_warning = [w for w in out["warnings"] if w.startswith("all-reduce 64 MiB")][0]
    assert "slowest pair w1 <-> w2: %s" % ic.rate(300e6) in size_warning
    assert ic.rate(0.7 * 1000e6) in size_warning and ic.rate(600e6) in size_warning
    assert len(out["lines"]) == 4 and len(out["warnings"]) == 2


def test_compare_at_the_boundary_and_with_a_large_fraction():
    baseline = measured({16: 500e6}, {("w0", "w1"): 400e6})
    same = measured({16: 0.7 * 500e6}, {("w0", "w1"): 0.7 * 400e6})
    assert ic.compare(same, baseline, 0.7)["state"] == "ok"  # equal to fraction x baseline is not below
    assert ic.compare(baseline, baseline, 100)["state"] == "below"
    assert len(ic.compare(baseline, baseline, 100)["warnings"]) == 2


def test_compare_matches_pairs_by_hosts_and_uses_the_median_for_a_new_pair():
    baseline = measured({16: 500e6}, {("w0", "w1"): 400e6, ("w1", "w2"): 600e6, ("w2", "w0"): 500e6})
    latest = measured({16: 500e6}, {("w1", "w0"): 390e6, ("w1", "w9"): 340e6})
    out = ic.compare(latest, baseline, 0.7)
    assert out["state"] == "below"  # 340 < 0.7 x median(400, 500, 600) = 350
    assert [b["pair"] for b in out["below"]] == ["w1 <-> w9"]
    assert out["below"][0]["baseline"] == 500e6
    assert any("pair not in the baseline" in line for line in out["lines"])


def test_compare_skips_sizes_the_baseline_lacks():
    out = ic.compare(measured({1: 1.0, 2: 1.0}, {}), measured({2: 100.0}, {}), 0.5)
    assert [b["what"] for b in out["below"]] == ["all-reduce 2 MiB across 3 workers"]


@pytest.mark.parametrize("latest,state", [
    (None, "no_measurement"),
    ({"skipped": "no torch in the Python of w0", "submission_id": "s1"}, "no_measurement"),
    ({"state": "FAIL", "detail": "RuntimeError: timeout", "submission_id": "s1"}, "no_measurement"),
])
def test_compare_without_a_measurement_says_why(latest, state):
    out = ic.compare(latest, measured({1: 1.0}, {}), 0.7)
    assert out["state"] == state and out["warnings"] == []
    if latest:
        assert latest["submission_id"] in out["lines"][0]
        assert (latest.get("skipped") or latest["detail"]) in out["lines"][0]


@pytest.mark.parametrize("baseline", [None, {}, {"sizes": []}, {"sizes": [{"bytes": MIB, "busbw": 0}]},
                                      {"skipped": "x", "sizes": [{"bytes": MIB, "busbw": 1.0}]}])
def test_compare_without_a_good_baseline(baseline):
    out = ic.compare(measured({1: 1.0}, {}), baseline, 0.7)
    assert out["state"] == "no_baseline" and out["warnings"] == []


@pytest.mark.parametrize("fraction", [0, -0.5, "x", None, float("nan")])
def test_compare_refuses_a_fraction_that_is_not_positive(fraction):
    with pytest.raises(ValueError):
        ic.compare(measured({1: 1.0}, {}), measured({1: 1.0}, {}), fraction)


def test_files_are_under_the_shared_root():
    assert ic.files("/private") == {"baseline": "/private/ray/interconnect_baseline.json",
                                    "latest": "/private/ray/interconnect_latest.json"}


@pytest.mark.parametrize("value,text", [(1.5e9, "1.500 GB/s"), (85.26e6, "85.3 MB/s"), (999e6, "999.0 MB/s")])
def test_rate_in_decimal_units(value, text):
    assert ic.rate(value) == text
