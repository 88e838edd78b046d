#!/usr/bin/env python3
"""Check that a verl job trained for real, from its job directory on the docker host.

Usage:
    python tests/integration/check_training.py --host-shared /srv/mvp/private --job ID
        [--shared-root /private] [--metric NAME ...] [--max NAME=BOUND ...] [--nonzero NAME ...]
        [--ckpt-part actor --ckpt-part critic]
        [--baselines FILE] [--baseline-job ID] [--record-baseline]

Every expectation is computed from the job's own inputs, never copied from the
code under test:

* steps: rows of the training parquet (its MANIFEST.json, written by
  prepare_data) // ``data.train_batch_size`` x ``trainer.total_epochs`` (or
  ``trainer.total_training_steps`` when the job spec sets it), read from
  ``config/job_spec.json``;
* checkpoints: ``global_step_N`` for every N that is a multiple of
  ``trainer.save_freq`` and the last step (verl saves at the last step too),
  and ``latest_checkpointed_iteration.txt`` naming the last one;
* metrics (``logs/metrics.jsonl``, verl's file logger): one line per step
  1..steps carrying each of ``--metric`` (default ``train/loss``), finite;
* ``--max``/``--nonzero``: bounds on a metric at every step, a metric non-zero at some step;
* ``--ckpt-part``: sub-folders every checkpoint holds (``actor``, ``critic``);
* learning: the workload's key metric improves between the first and the last step by at least a
  margin computed from a baseline run of the same request, so a run that learns nothing fails. The
  baseline is the workload's entry of ``--baselines`` (default ``tests/data/training_baselines.json``:
  the key metric, its direction, the first and last values of a real run and where they come from),
  or, with ``--baseline-job``, another finished job of the same request in the same shared folder (the
  key metric and direction still from the file). The margin is ``fraction`` (the entry's, 0.5) x the
  baseline's own improvement: the runs here are deterministic (the same request gives the same losses,
  tests/reliability/resume.py relies on it), so half of the baseline's improvement leaves room for
  another machine's floating point and still fails a run whose metric stays where it started (improvement
  about 0). The baseline must itself have improved, must have run the same steps, and its recorded
  learning-relevant trainer overrides (all but the job's own names, its checkpointing and its loggers) must be the
  job's; otherwise the check fails saying which. ``--record-baseline`` writes this job (when every
  check passed and it improved) as its workload's entry, with its provenance;
* placement: ``debug/placement.json`` says the driver ran on a worker IP and
  not the head's;
* precheck: ``logs/driver.log`` has ``MVP_PRECHECK_VERL_FILE=<snapshot>/verl/__init__.py``
  and ``MVP_PRECHECK_MARKER=<code_id>`` of the job spec's snapshot.

Prints one line per check and a closing ``check_training: N passed, M failed``;
exits 1 when any check fails, 2 on unusable arguments.
"""
import argparse
import datetime
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BASELINES = os.path.join(ROOT, "tests", "data", "training_baselines.json")
# Trainer overrides that name the job itself, only its checkpointing or where its metrics are logged (the
# loggers: the MLflow tracking server adds mlflow): they do not shape the learning curve.
NOT_LEARNING = ("hydra.run.dir", "trainer.default_local_dir", "trainer.experiment_name", "trainer.save_freq",
                "trainer.max_ckpt_to_keep", "trainer.resume_mode", "trainer.resume_from_path", "trainer.logger")
# The margin: this fraction of the baseline's own improvement, unless its entry says another.
DEFAULT_FRACTION = 0.5
# The checks the baseline decides (a job recorded as the baseline need not pass them).
LEARNING_CHECKS = ("key metric improves", "baseline is this request", "key metric falls", "key metric rises")


def load_json(path):
    """Read a JSON file; return None when it is missing or not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def host_path(host_shared, shared_root, node_path):
    """Map a path inside the nodes (under shared_root) to the docker host's folder."""
    rel = os.path.relpath(node_path, shared_root)
    if rel.startswith(".."):
        raise ValueError("%s is not under %s" % (node_path, shared_root))
    return os.path.join(host_shared, rel)


def expected_steps(spec, train_rows):
    """Number of optimizer steps verl runs for this spec and this many training rows.

    :param spec: dict, the job's config/job_spec.json.
    :param train_rows: int, rows of the training parquet.
    :returns: int.
    """
    overrides = spec["trainer_overrides"]
    if overrides.get("trainer.total_training_steps"):
        return int(overrides["trainer.total_training_steps"])
    per_epoch = train_rows // int(overrides["data.train_batch_size"])
    return per_epoch * int(overrides.get("trainer.total_epochs", 1))


def expected_checkpoints(steps, save_freq):
    """Steps that get a ``global_step_N`` folder: multiples of save_freq, and the last step."""
    marks = {n for n in range(1, steps + 1) if save_freq > 0 and n % save_freq == 0}
    marks.add(steps)
    return sorted(marks)


def read_metrics(path):
    """Return {step: data} from verl's file logger output (``{"step": N, "data": {...}}`` per line).

    Several lines of one step (verl logs validation separately) are merged.
    """
    steps = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if line:
                record = json.loads(line)
                steps.setdefault(int(record["step"]), {}).update(record.get("data") or {})
    return steps


def learning_overrides(spec):
    """The job's trainer overrides that shape its learning curve: all but its own names and its checkpointing.

    :param spec: dict, the job's config/job_spec.json.
    :returns: dict, override key -> value (keys of NOT_LEARNING, ``*ckpt*`` keys and values naming the
        job's id or directory left out).
    """
    own = (spec.get("submission_id") or "\0", spec.get("job_dir") or "\0")
    return {k: v for k, v in (spec.get("trainer_overrides") or {}).items()
            if k not in NOT_LEARNING and "ckpt" not in k and not any(o in json.dumps(v) for o in own)}


def improvement(metrics, name, direction):
    """How far a metric moved the right way between the first and the last step that logged it.

    :param metrics: dict {step: data} (:func:`read_metrics`).
    :param name: str, the metric.
    :param direction: str, ``down`` (a loss) or ``up`` (a score).
    :returns: dict with ``first_step``, ``first``, ``last_step``, ``last`` and ``improvement`` (first - last
        for ``down``, last - first for ``up``), or None when fewer than two steps logged a finite value.
    """
    if direction not in ("down", "up"):
        raise ValueError("direction %r is neither down nor up" % (direction,))
    series = [(n, metrics[n][name]) for n in sorted(metrics)
              if isinstance(metrics[n].get(name), (int, float)) and math.isfinite(metrics[n][name])]
    if len(series) < 2:
        return None
    (first_step, first), (last_step, last) = series[0], series[-1]
    return {"first_step": first_step, "first": first, "last_step": last_step, "last": last,
            "improvement": first - last if direction == "down" else last - first}


def margin_problems(moved, base, fraction, relative=False):
    """Why a run's improvement does not clear the baseline's margin (empty when it does).

    :param moved: dict from :func:`improvement` for the job, or None.
    :param base: dict with ``first_step``, ``first``, ``last_step`` and ``improvement`` for the baseline, or None.
    :param fraction: float in (0, 1], the share of the baseline's improvement the job must reach.
    :param relative: bool, compare improvements as shares of each run's own first value (a workload whose
        rollouts are sampled starts from another value every run: PPO's value loss).
    :returns: list of str.
    """
    if relative and moved is not None and base is not None and moved.get("first") and base.get("first"):
        moved = dict(moved, improvement=moved["improvement"] / abs(moved["first"]))
        base = dict(base, improvement=base["improvement"] / abs(base["first"]))
    if base is None:
        return ["no baseline values (not recorded yet, or the baseline job logged the metric at fewer than two steps)"]
    if moved is None:
        return ["the job logged the metric at fewer than two steps"]
    problems = []
    if base["improvement"] <= 0:
        problems.append("the baseline did not improve (%+g): no margin can be computed from it" % base["improvement"])
    if (moved["first_step"], moved["last_step"]) != (base["first_step"], base["last_step"]):
        problems.append("the job ran steps %d..%d, the baseline %d..%d" % (
            moved["first_step"], moved["last_step"], base["first_step"], base["last_step"]))
    if not problems and moved["improvement"] < fraction * base["improvement"]:
        problems.append("improved by %g, less than %g x the baseline's %g = %g" % (
            moved["improvement"], fraction, base["improvement"], fraction * base["improvement"]))
    return problems


def recorded(entry):
    """A recorded baseline entry as :func:`improvement` returns it, or None when its values are not recorded yet."""
    try:
        first, last = float(entry["first"]), float(entry["last"])
        steps = int(entry["first_step"]), int(entry["last_step"])
    except (KeyError, TypeError, ValueError):
        return None
    return {"first_step": steps[0], "first": first, "last_step": steps[1], "last": last,
            "improvement": first - last if entry["direction"] == "down" else last - first}


def provenance(args, spec):
    """Where a recorded baseline comes from: the job, its code and model, this checkout's commit, the time."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip() or None
    return {"job": spec.get("submission_id"), "host_shared": args.host_shared, "code_id": spec.get("code_id"),
            "model_path": spec.get("model_path") or spec["trainer_overrides"].get("model.path"),
            "request": spec.get("request"), "site_overrides": spec.get("site_overrides"), "checkout": commit,
            "recorded_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "recorded_by": "tests/integration/check_training.py --record-baseline"}


def main():
    """Run every check on one job directory and print the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host-shared", required=True, help="the shared folder on the docker host")
    parser.add_argument("--shared-root", default="/private", help="the shared folder inside the nodes")
    parser.add_argument("--job", required=True, help="submission id")
    parser.add_argument("--metric", action="append", help="metric every step must carry (repeatable)")
    parser.add_argument("--max", action="append", default=[], metavar="METRIC=BOUND",
                        help="metric whose value must stay <= BOUND at every step (repeatable)")
    parser.add_argument("--nonzero", action="append", default=[], metavar="METRIC",
                        help="metric that must be non-zero at some step (a real gradient; repeatable)")
    parser.add_argument("--ckpt-part", action="append", default=[], metavar="NAME",
                        help="folder every global_step_N must hold (actor, critic; repeatable)")
    parser.add_argument("--baselines", default=BASELINES,
                        help="recorded baselines per workload (key metric, direction, values, provenance)")
    parser.add_argument("--baseline-job", metavar="ID",
                        help="another finished job of the same request in this shared folder, as the baseline")
    parser.add_argument("--record-baseline", action="store_true",
                        help="write this job as its workload's baseline in --baselines when every check passes")
    args = parser.parse_args()
    metrics_wanted = args.metric or ["train/loss"]
    job_dir = os.path.join(args.host_shared, "jobs", args.job)
    spec = load_json(os.path.join(job_dir, "config", "job_spec.json"))
    if spec is None:
        print("check_training: no job spec in %s" % job_dir)
        return 2
    results, failed_names = [], []

    def check(name, ok, detail):
        results.append(ok)
        if not ok:
            failed_names.append(name)
        print("%s %-34s %s" % ("PASS" if ok else "FAIL", name, detail))

    overrides = spec["trainer_overrides"]
    train_file = overrides["data.train_files"]
    manifest = load_json(os.path.join(host_path(args.host_shared, args.shared_root, os.path.dirname(train_file)),
                                      "MANIFEST.json")) or {}
    rows = (manifest.get("files") or {}).get(os.path.basename(train_file), {}).get("rows")
    check("training rows known", isinstance(rows, int) and rows > 0, "%s rows in %s" % (rows, train_file))
    steps = expected_steps(spec, rows or 0)
    save_freq = int(overrides.get("trainer.save_freq", -1))

    ckpt_dir = os.path.join(job_dir, "checkpoints")
    want = ["global_step_%d" % n for n in expected_checkpoints(steps, save_freq)]
    have = sorted((d for d in os.listdir(ckpt_dir) if d.startswith("global_step_")),
                  key=lambda d: int(d.rsplit("_", 1)[1])) if os.path.isdir(ckpt_dir) else []
    check("checkpoint folders", have == want and all(os.listdir(os.path.join(ckpt_dir, d)) for d in have),
          "expected %s (steps %d, save_freq %d), found %s" % (want, steps, save_freq, have))
    for part in args.ckpt_part:
        missing = [d for d in have if not os.path.isdir(os.path.join(ckpt_dir, d, part))
                   or not os.listdir(os.path.join(ckpt_dir, d, part))]
        check("checkpoint part %s" % part, bool(have) and not missing,
              "every global_step_N/%s/ holds files; missing or empty in %s" % (part, missing or "none"))
    latest = None
    try:
        with open(os.path.join(ckpt_dir, "latest_checkpointed_iteration.txt")) as handle:
            latest = handle.read().strip()
    except OSError:
        pass
    check("latest checkpoint", latest == str(steps), "latest_checkpointed_iteration.txt=%s, expected %d"
          % (latest, steps))

    metrics_path = os.path.join(job_dir, "logs", "metrics.jsonl")
    check("metrics file is the job's", spec.get("metrics_file") == os.path.join(
        spec["job_dir"], "logs", "metrics.jsonl"), "job spec metrics_file=%s" % spec.get("metrics_file"))
    try:
        metrics = read_metrics(metrics_path)
    except (OSError, ValueError) as exc:
        metrics = {}
        check("metrics readable", False, "%s: %s" % (metrics_path, exc))
    for name in metrics_wanted:
        have_steps = sorted(n for n, data in metrics.items()
                            if isinstance(data.get(name), (int, float)) and math.isfinite(data[name]))
        check("metric %s every step" % name, have_steps == list(range(1, steps + 1)),
              "steps with a finite value: %s (expected 1..%d)" % (
                  "%d..%d (%d)" % (have_steps[0], have_steps[-1], len(have_steps)) if have_steps else "none",
                  steps))
    for item in args.max:
        name, _, bound = item.partition("=")
        values = [metrics[n].get(name) for n in sorted(metrics)]
        check("metric %s <= %s" % (name, bound), bool(values) and all(
            isinstance(v, (int, float)) and v <= float(bound) for v in values),
              "values %s" % [round(v, 6) if isinstance(v, float) else v for v in values])
    for name in args.nonzero:
        values = [metrics[n].get(name) for n in sorted(metrics)]
        check("metric %s non-zero" % name, any(isinstance(v, (int, float)) and v != 0 for v in values),
              "values %s" % [round(v, 6) if isinstance(v, float) else v for v in values])
    # Learning: the key metric improves by the margin the baseline run gives.
    baselines = load_json(args.baselines) or {}
    workload = spec.get("workload")
    entry = baselines.get(workload) if isinstance(baselines.get(workload), dict) else None
    if entry is None:
        check("key metric improves", False, "no baseline for workload %r in %s: record one from a run you trust "
              "(--record-baseline)" % (workload, args.baselines))
    elif entry.get("judged") is False:
        # Recorded on purpose: at this size the key metric moves within its noise (the entry's measured
        # values and why); said as SKIP, never counted as passed.
        moved = improvement(metrics, entry["metric"], entry["direction"])
        print("SKIP %-32s %s; this run %s -> %s" % ("key metric (not judged)", entry.get("why", ""),
                                                    (moved or {}).get("first"), (moved or {}).get("last")))
    else:
        key, direction = entry["metric"], entry["direction"]
        fraction = float(entry.get("fraction", DEFAULT_FRACTION))
        moved = improvement(metrics, key, direction)
        source = "%s (%s)" % (args.baselines, (entry.get("provenance") or {}).get("job"))
        base, base_overrides = recorded(entry), entry.get("learning_overrides")
        if args.baseline_job:
            base_dir = os.path.join(args.host_shared, "jobs", args.baseline_job)
            base_spec = load_json(os.path.join(base_dir, "config", "job_spec.json")) or {}
            try:
                base = improvement(read_metrics(os.path.join(base_dir, "logs", "metrics.jsonl")), key, direction)
            except (OSError, ValueError):
                base = None
            source, base_overrides = "job %s" % args.baseline_job, learning_overrides(base_spec)
        if base_overrides is not None:
            mine = learning_overrides(spec)
            # A baseline recorded before a key joined NOT_LEARNING still lists it.
            base_overrides = {k: v for k, v in base_overrides.items() if k not in NOT_LEARNING}
            differ = sorted(k for k in set(mine) | set(base_overrides) if mine.get(k) != base_overrides.get(k))
            check("baseline is this request", not differ, "learning overrides of the baseline %s%s" % (
                source, " differ in %s" % differ if differ else " are the job's"))
        problems = margin_problems(moved, base, fraction, bool(entry.get("relative")))
        check("key metric %s" % ("falls" if direction == "down" else "rises"), not problems,
              "%s step %s: %s, step %s: %s; baseline %s: %s -> %s%s" % (
                  key, (moved or {}).get("first_step"), (moved or {}).get("first"), (moved or {}).get("last_step"),
                  (moved or {}).get("last"), source, (base or {}).get("first"), (base or {}).get("last"),
                  "; " + "; ".join(problems) if problems else "; moved %g >= %g x %g" % (
                      moved["improvement"], fraction, base["improvement"])))

    # The effective config saved at submission: every plain override the spec passed is in it, as given.
    resolved = None
    try:
        import yaml
        with open(os.path.join(job_dir, "config", "resolved_config.yaml"), encoding="utf-8") as handle:
            resolved = yaml.safe_load(handle)
    except (OSError, ValueError) as exc:
        check("effective config saved", False, "config/resolved_config.yaml: %s" % exc)
    if isinstance(resolved, dict):
        plain = {k: v for k, v in overrides.items() if not k.startswith(("+", "~", "hydra."))}
        wrong = {}
        for key, value in plain.items():
            node = resolved
            for part in key.split("."):
                node = node.get(part) if isinstance(node, dict) else None
            if node != value:
                wrong[key] = (value, node)
        check("effective config saved", not wrong, "%d overrides in config/resolved_config.yaml%s" % (
            len(plain), "; differing: %s" % wrong if wrong else ""))

    placement = load_json(os.path.join(job_dir, "debug", "placement.json")) or {}
    check("driver on a worker", placement.get("driver_node_ip") in (placement.get("worker_ips") or [])
          and placement.get("driver_node_ip") != placement.get("head_node_ip"),
          "driver %s, workers %s, head %s" % (placement.get("driver_node_ip"), placement.get("worker_ips"),
                                              placement.get("head_node_ip")))

    try:
        with open(os.path.join(job_dir, "logs", "driver.log"), encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        lines = []
    want_lines = ["MVP_PRECHECK_VERL_FILE=%s/verl/__init__.py" % spec["code_path"],
                  "MVP_PRECHECK_MARKER=%s" % spec["code_id"]]
    check("precheck names the snapshot", all(w in lines for w in want_lines), " and ".join(want_lines))

    failed = results.count(False)
    print("check_training: %d passed, %d failed" % (len(results) - failed, failed))
    if args.record_baseline:
        record_baseline(args, spec, metrics, baselines, [n for n in failed_names if n not in LEARNING_CHECKS])
    return 1 if failed else 0


def record_baseline(args, spec, metrics, baselines, failed):
    """Write the job as its workload's baseline in ``--baselines`` (the key metric and direction of the existing
    entry), when every check but the learning ones passed and the metric improved; say why not otherwise.

    :param failed: list of str, the names of the failed checks other than the learning ones.
    """
    workload = spec.get("workload")
    old = baselines.get(workload) if isinstance(baselines.get(workload), dict) else None
    if old is None:
        print("record-baseline: no entry for %r in %s to take the key metric and direction from: add "
              "{\"metric\": ..., \"direction\": \"down\"|\"up\"} first" % (workload, args.baselines))
        return
    moved = improvement(metrics, old["metric"], old["direction"])
    if failed or moved is None or moved["improvement"] <= 0:
        print("record-baseline: not recorded (%s)" % (
            "failed: %s" % ", ".join(failed) if failed else "the metric did not improve" if moved else "no metric"))
        return
    entry = dict(old, **{k: moved[k] for k in ("first_step", "first", "last_step", "last")})
    entry.update(learning_overrides=learning_overrides(spec), provenance=provenance(args, spec))
    baselines[workload] = entry
    with open(args.baselines, "w", encoding="utf-8") as handle:
        json.dump(baselines, handle, indent=2, sort_keys=True)
        handle.write("\n")
    print("record-baseline: %s %s %s -> %s recorded in %s" % (workload, old["metric"], moved["first"], moved["last"],
                                                           args.baselines))


if __name__ == "__main__":
    sys.exit(main())
