#!/usr/bin/env python3
"""mvp_entry.py: the first program of every job's entrypoint (runs on the driver node).

Usage: python -u mvp_entry.py --log <job_dir>/logs/driver.log -- <program> [args...]

1. Prints ``MVP_PRECHECK_VERL_FILE=<path>`` (``importlib.util.find_spec("verl").origin``,
   which locates verl without importing it, so no torch is needed) and
   ``MVP_PRECHECK_MARKER=<code_id>`` (``mvp_marker.MARKER`` from the snapshot on
   PYTHONPATH), plus the driver's hostname.
2. Runs <program>, copying its output line by line to stdout (so Ray's job log
   has it) and to --log (so the output survives the cluster).
3. Exits with <program>'s exit code; 2 when the precheck cannot find verl or the
   marker (the snapshot is not first on PYTHONPATH).
"""
import argparse
import importlib.util
import os
import socket
import subprocess
import sys


def precheck():
    """Return the two precheck lines, or raise SystemExit(2) with the reason."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.origin:
        raise SystemExit("MVP_PRECHECK_ERROR=verl is not importable; PYTHONPATH=%s"
                         % os.environ.get("PYTHONPATH", ""))
    try:
        import mvp_marker  # noqa: E402 - provided by the code snapshot
    except ImportError:
        raise SystemExit("MVP_PRECHECK_ERROR=mvp_marker is not importable; the code snapshot "
                         "is not on PYTHONPATH (%s)" % os.environ.get("PYTHONPATH", ""))
    return ["MVP_PRECHECK_VERL_FILE=%s" % spec.origin,
            "MVP_PRECHECK_MARKER=%s" % mvp_marker.MARKER,
            "MVP_PRECHECK_DRIVER_HOST=%s" % socket.gethostname()]


def main():
    """Parse arguments, print the precheck lines, run the program with its output teed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="file that receives a copy of the output")
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program given after --")
    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    with open(args.log, "a", encoding="utf-8") as log:
        def emit(line):
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(line)
            log.flush()
        try:
            lines = precheck()
        except SystemExit as exc:
            emit("%s\n" % exc.code)
            return 2
        for line in lines:
            emit(line + "\n")
        proc = subprocess.Popen(program, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        for line in proc.stdout:
            emit(line)
        code = proc.wait()
        emit("MVP_EXIT_CODE=%d\n" % code)
        return code


if __name__ == "__main__":
    sys.exit(main())
