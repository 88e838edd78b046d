# -*- coding: utf-8 -*-
"""Interconnect acceptance: bus bandwidth of an all-reduce across the workers, and its baseline.

The ``selftest`` job (``roles/job_tools/files/selftest.py``) times ``torch.distributed`` all-reduces
across every worker (gloo on CPU nodes, NCCL on GPU nodes) at a few message sizes, and one size
between each pair of ring neighbours (worker i and i+1 mod n); ``summarize`` turns the timings into
bandwidths, ``compare`` sets a run against the cluster's baseline. The same ``compare`` runs in the
preflight (filter ``mvp.ray.mvp_interconnect_check``) on the latest recorded run.

Bandwidths are **bus bandwidth** as nccl-tests defines it for all-reduce, in bytes per second:
``algbw = message bytes / seconds per all-reduce`` and ``busbw = algbw x 2(n-1)/n`` for n ranks
(for a pair, n = 2: busbw = algbw). busbw does not depend on n for an ideal ring, so runs with
another number of workers stay comparable.

Files on the shared storage (one cluster = one shared storage = one inventory), relative to the
shared root (``files``):

* ``BASELINE_FILE``: the first good run's result, written by the selftest when there is none (so a
  baseline is per cluster and the same for every controller driving it). Delete it to reset: the
  next good selftest sets a new one.
* ``LATEST_FILE``: the newest selftest's result, what the preflight reads.

Each job's own copy is its ``logs/interconnect.json`` (``mvp_job.FILES["interconnect"]``).

Standard library only: ``job_tools`` installs a copy beside the job tools, like ``mvp_job``.
"""

from __future__ import annotations

import math
import posixpath

# Relative to the shared root: the cluster's baseline and the newest selftest's result.
BASELINE_FILE = "ray/interconnect_baseline.json"
LATEST_FILE = "ray/interconnect_latest.json"
# The unit of every bandwidth in those files (and in logs/interconnect.json).
UNIT = "bytes/s"
DEFINITION = ("nccl-tests all_reduce: algbw = bytes / seconds per all-reduce, busbw = algbw x 2(n-1)/n "
              "for n ranks; seconds = the median over the timed iterations (after one warm-up) of the "
              "slowest rank's time")
# Message sizes (MiB) of the all-reduce across all workers, and the pairs' size.
DEFAULT_SIZES_MIB = (1, 16, 64)
DEFAULT_PAIR_MIB = 16
DEFAULT_ITERATIONS = 5
DEFAULT_WARN_FRACTION = 0.7
MIB = 1 << 20


def files(shared_root):
    """Where the cluster's interconnect baseline and latest result live.

    :param shared_root: str, absolute path of the shared storage as the nodes see it.
    :returns: dict ``{"baseline": path, "latest": path}`` (str).
    """
    return {"baseline": posixpath.join(shared_root, BASELINE_FILE),
            "latest": posixpath.join(shared_root, LATEST_FILE)}


def bus_bandwidth(nbytes, seconds, world_size):
    """Algorithm and bus bandwidth of one all-reduce (nccl-tests' definition).

    :param nbytes: int > 0, the message size in bytes.
    :param seconds: float > 0, the time of one all-reduce.
    :param world_size: int >= 2, the ranks taking part.
    :returns: tuple (algbw, busbw), floats in bytes/s.
    :raises ValueError: for a size or time that is not positive, or fewer than 2 ranks.
    """
    if not nbytes or nbytes <= 0:
        raise ValueError("message size must be positive bytes, got %r" % (nbytes,))
    if not seconds or seconds <= 0:
        raise ValueError("time per all-reduce must be positive seconds, got %r" % (seconds,))
    if int(world_size) < 2:
        raise ValueError("an all-reduce between ranks needs at least 2, got %r" % (world_size,))
    algbw = float(nbytes) / float(seconds)
    return algbw, algbw * 2.0 * (world_size - 1) / world_size


def iterations_for(nbytes, iterations, reference=DEFAULT_PAIR_MIB * MIB, most=50):
    """Timed iterations for one message size: more for small messages, whose time is mostly latency
    and varies most, so each size takes about as long as ``iterations`` of the reference size.

    :param nbytes: int > 0, the message size in bytes.
    :param iterations: int >= 1, the iterations of the reference size and larger ones.
    :param reference: int, bytes (16 MiB).
    :param most: int, the cap.
    :returns: int, ``max(iterations, min(most, ceil(iterations x reference / nbytes)))``.
    """
    scaled = -(-int(iterations) * int(reference) // int(nbytes))
    return max(int(iterations), min(int(most), scaled))


def ring_pairs(world_size):
    """The pairs of ring neighbours (rank i and i+1 mod n): n pairs, one for 2 ranks, none below.

    :param world_size: int.
    :returns: list of (int, int) rank pairs.
    """
    if world_size < 2:
        return []
    if world_size == 2:
        return [(0, 1)]
    return [(i, (i + 1) % world_size) for i in range(world_size)]


def pair_phases(world_size):
    """Group the ring pairs into rounds where no rank is in two pairs (measured at once, 2 or 3 rounds).

    Even pairs (0-1, 2-3, ...) first, then odd ones (1-2, 3-4, ...), and for an odd ring the pair
    closing it (n-1, 0) alone: the time grows with rounds, not with n.

    :param world_size: int.
    :returns: list of lists of indexes into ``ring_pairs(world_size)``.
    """
    pairs = ring_pairs(world_size)
    if len(pairs) <= 1:
        return [list(range(len(pairs)))] if pairs else []
    even = [i for i in range(len(pairs)) if i % 2 == 0]
    odd = [i for i in range(len(pairs)) if i % 2 == 1]
    phases = [even, odd]
    if world_size % 2 == 1:  # the closing pair (n-1, 0) meets pair 0 and pair n-2
        even.remove(world_size - 1)
        phases.append([world_size - 1])
    return [p for p in phases if p]


def pair_name(ranks):
    """A pair as ``<host a> (<ip a>) <-> <host b> (<ip b>)``.

    :param ranks: list of two dicts with ``host`` and ``ip``.
    :returns: str.
    """
    return " <-> ".join("%s (%s)" % (r.get("host"), r.get("ip")) for r in ranks)


def summarize(ranks, backend, iterations, allreduce_seconds, pair_bytes, pair_seconds):
    """The result record of one measurement: every size's and every pair's bandwidth.

    :param ranks: list of dicts ``{"host", "ip"}``, by rank.
    :param backend: str, ``gloo`` or ``nccl``.
    :param iterations: int, timed all-reduces of the largest sizes after one warm-up (smaller sizes:
        ``iterations_for``; each row says its own count).
    :param allreduce_seconds: dict int bytes -> list (one per rank) of lists of float seconds, one
        per timed all-reduce (see ``iteration_seconds``).
    :param pair_bytes: int, the message size of the pair measurements.
    :param pair_seconds: dict int pair index (``ring_pairs``) -> list (one per rank of the pair) of
        lists of float seconds.
    :returns: dict with ``unit``, ``definition``, ``backend``, ``world_size``, ``iterations``,
        ``ranks``, ``sizes`` (list of ``{bytes, mib, seconds, iterations, iteration_seconds, algbw,
        busbw}``, by size) and ``pairs`` (list of ``{index, ranks, hosts, name, bytes, seconds,
        iterations, iteration_seconds, algbw, busbw}``).
    :raises ValueError: for a time that is not positive, fewer than 2 ranks, or no iteration.
    """
    world = len(ranks)
    sizes = []
    for nbytes in sorted(allreduce_seconds):
        each = iteration_seconds(allreduce_seconds[nbytes])
        seconds = _median(each)
        algbw, busbw = bus_bandwidth(nbytes, seconds, world)
        sizes.append({"bytes": int(nbytes), "mib": nbytes / float(MIB), "seconds": seconds,
                      "iterations": len(each), "iteration_seconds": each, "algbw": algbw, "busbw": busbw})
    pairs = []
    all_pairs = ring_pairs(world)
    for index in sorted(pair_seconds):
        a, b = all_pairs[index]
        each = iteration_seconds(pair_seconds[index])
        seconds = _median(each)
        algbw, busbw = bus_bandwidth(pair_bytes, seconds, 2)
        members = [ranks[a], ranks[b]]
        pairs.append({"index": index, "ranks": [a, b], "hosts": [r.get("host") for r in members],
                      "name": pair_name(members), "bytes": int(pair_bytes), "seconds": seconds,
                      "iterations": len(each), "iteration_seconds": each, "algbw": algbw, "busbw": busbw})
    return {"unit": UNIT, "definition": DEFINITION, "backend": backend, "world_size": world,
            "iterations": int(iterations), "ranks": list(ranks), "sizes": sizes, "pairs": pairs}


def iteration_seconds(per_rank):
    """Each timed iteration's time: the slowest rank's (an all-reduce ends when the last rank has it).

    :param per_rank: list (one per rank) of lists of float seconds, one per iteration.
    :returns: list of float, one per iteration (as many as the shortest rank's list).
    :raises ValueError: when there is no iteration.
    """
    count = min(len(times) for times in per_rank) if per_rank else 0
    if not count:
        raise ValueError("no timed iteration to summarize")
    return [max(times[i] for times in per_rank) for i in range(count)]


def is_good(result):
    """Whether a result may become the baseline: measured (not skipped), a positive busbw for every size and pair.

    :param result: dict from ``summarize`` (or None).
    :returns: bool.
    """
    if not isinstance(result, dict) or result.get("skipped") or not result.get("sizes"):
        return False
    rows = list(result.get("sizes") or []) + list(result.get("pairs") or [])
    return all(isinstance(r.get("busbw"), (int, float)) and r["busbw"] > 0 for r in rows)


def rate(value):
    """A bandwidth in bytes/s as text in decimal units (nccl-tests' GB/s = 1e9 bytes/s).

    :param value: float, bytes/s.
    :returns: str such as ``1.234 GB/s`` or ``85.3 MB/s``.
    """
    if value >= 1e9:
        return "%.3f GB/s" % (value / 1e9)
    return "%.1f MB/s" % (value / 1e6)


def _pair_key(row):
    """A pair's identity across runs: its two host names, in sorted order."""
    return tuple(sorted(str(h) for h in row.get("hosts") or []))


def _median(values):
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0


def compare(latest, baseline, fraction):
    """Set the latest measurement against the baseline: every size and pair below fraction x baseline.

    Sizes are matched by bytes (a size absent from the baseline is not compared). Pairs are matched
    by their two host names; a pair absent from the baseline (a replaced node) is compared with the
    median of the baseline's pairs. A size below the baseline names the run's slowest pair.

    :param latest: dict from ``summarize`` (with ``submission_id``), or None / a skipped record.
    :param baseline: dict, the same shape, or None.
    :param fraction: float > 0, e.g. 0.7: warn below 70 % of the baseline.
    :returns: dict ``{"state", "warnings", "lines", "below"}``: ``state`` is ``no_measurement``
        (no latest result, or it was skipped), ``no_baseline``, ``ok`` or ``below``; ``warnings``
        one text per value below; ``lines`` the comparison of every value (text); ``below`` the
        rows below, ``{"what", "latest", "baseline", "ratio", "pair"}`` (bytes/s, ratio latest/baseline).
    :raises ValueError: for a fraction that is not a positive number.
    """
    try:
        fraction = float(fraction)
    except (TypeError, ValueError):
        raise ValueError("the warning fraction must be a number, got %r" % (fraction,))
    if math.isnan(fraction) or fraction <= 0:
        raise ValueError("the warning fraction must be positive, got %r" % (fraction,))
    out = {"state": "no_measurement", "warnings": [], "lines": [], "below": [], "fraction": fraction}
    if not isinstance(latest, dict) or latest.get("skipped") or not latest.get("sizes"):
        latest = latest if isinstance(latest, dict) else {}
        why = ("skipped: %s" % latest["skipped"] if latest.get("skipped") else
               "%s: %s" % (latest.get("state"), latest.get("detail")) if latest.get("detail") else "")
        out["lines"].append("no interconnect measurement%s%s" % (
            " in %s" % latest["submission_id"] if latest.get("submission_id") else "", " (%s)" % why if why else ""))
        return out
    if not is_good(baseline):
        out["state"] = "no_baseline"
        out["lines"].append("no interconnect baseline yet: the next good selftest sets it")
        return out
    source = "baseline %s (%s)" % (baseline.get("submission_id"), baseline.get("finished"))
    pairs = latest.get("pairs") or []
    slowest = min(pairs, key=lambda r: r["busbw"]) if pairs else None
    base_sizes = {int(r["bytes"]): r for r in baseline.get("sizes") or []}
    for row in latest.get("sizes") or []:
        ref = base_sizes.get(int(row["bytes"]))
        if ref is None:
            continue
        what = "all-reduce %g MiB across %d workers" % (row["bytes"] / float(MIB), latest.get("world_size", 0))
        _judge(out, what, row["busbw"], ref["busbw"], fraction, source,
               slowest["name"] if slowest else None,
               " (slowest pair %s: %s)" % (slowest["name"], rate(slowest["busbw"])) if slowest else "")
    base_pairs = {_pair_key(r): r for r in baseline.get("pairs") or []}
    median = _median([r["busbw"] for r in base_pairs.values()])
    for row in pairs:
        ref = base_pairs.get(_pair_key(row))
        ref_value, note = (ref["busbw"], "") if ref else (median, " (pair not in the baseline: its pairs' median)")
        if ref_value is None:
            continue
        _judge(out, "pair %s at %g MiB" % (row["name"], row["bytes"] / float(MIB)), row["busbw"], ref_value,
               fraction, source + note, row["name"], "")
    out["state"] = "below" if out["below"] else "ok"
    return out


def _judge(out, what, value, ref, fraction, source, pair, extra):
    """Add one comparison line to ``out``, and a warning when value < fraction x ref."""
    ratio = value / ref if ref else 0.0
    out["lines"].append("%s: busbw %s, %.0f %% of %s %s" % (what, rate(value), 100.0 * ratio, source, rate(ref)))
    if value < fraction * ref:
        out["below"].append({"what": what, "latest": value, "baseline": ref, "ratio": ratio, "pair": pair})
        out["warnings"].append("%s: busbw %s is below %g x the baseline's %s = %s (%.0f %% of it; %s)%s" % (
            what, rate(value), fraction, rate(ref), rate(fraction * ref), 100.0 * ratio, source, extra))
