#!/usr/bin/env python3
"""Check that a verl job trained for real, from its job directory on the docker host.

Usage:
    python tests/integration/check_training.py --host-shared /srv/mvp/private --job ID
        [--shared-root /private] [--metric NAME ...] [--max NAME=BOUND ...] [--nonzero NAME ...]
        [--ckpt-part actor --ckpt-part critic]

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
* placement: ``debug/placement.json`` says the driver ran on a worker IP and
  not the head's;
* precheck: ``logs/driver.log`` has ``MVP_PRECHECK_VERL_FILE=<snapshot>/verl/__init__.py``
  and ``MVP_PRECHECK_MARKER=<code_id>`` of the job spec's snapshot.

Prints one line per check and a closing ``check_training: N passed, M failed``;
exits 1 when any check fails, 2 on unusable arguments.
"""
import argparse
import json
import math
import os
import sys


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
    args = parser.parse_args()
    metrics_wanted = args.metric or ["train/loss"]
    job_dir = os.path.join(args.host_shared, "jobs", args.job)
    spec = load_json(os.path.join(job_dir, "config", "job_spec.json"))
    if spec is None:
        print("check_training: no job spec in %s" % job_dir)
        return 2
    results = []

    def check(name, ok, detail):
        results.append(ok)
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
    if metrics_wanted and metrics.get(1, {}).get(metrics_wanted[0]) is not None:
        first, last = metrics[1][metrics_wanted[0]], metrics.get(steps, {}).get(metrics_wanted[0])
        print("INFO %-34s step 1: %s, step %d: %s" % (metrics_wanted[0], first, steps, last))

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
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
