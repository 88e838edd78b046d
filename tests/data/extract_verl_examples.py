#!/usr/bin/env python3
"""Extract the trainer launch calls of verl's example scripts into a JSON test corpus.

The corpus (``verl_examples_0.9.1.json`` next to this file) lists, for every
``python3 -m verl.trainer.<module>`` call found in a verl commit's ``examples/``
tree (and ``recipe/`` when that is a directory rather than a submodule), the
Hydra overrides the call passes.
``tests/unit/plugins/module_utils/request/test_mvp_hydra_verl_examples.py`` composes each entry
against the released config tree to check that the project's override validator accepts
what verl's own examples pass.

How the overrides are resolved
------------------------------
The scripts build their argument lists with shell variables, ``${VAR:-default}``
defaults, arrays, conditionals and arithmetic, so instead of re-implementing a
shell parser the extractor *runs* each script with ``bash`` in a sandbox where
no real program is reachable:

* ``PATH`` holds only a few harmless text utilities (sed, awk, grep, ...) plus
  fixed-output stand-ins for ``date``, ``hostname``, ``nproc`` and ``whoami``.
  Every other command (``python3``, ``torchrun``, ``ray``, ``srun``, ``pip``,
  ``rm``, ...) is "not found" and bash's ``command_not_found_handle`` records
  its argv and returns success without running anything. A recorded argv that
  contains ``-m verl.trainer.<module>`` is a trainer call; the arguments after
  the module are its Hydra arguments.
* When the extractor runs as root the shell runs as ``nobody`` in a network
  namespace of its own (``unshare -n`` + ``setpriv``), with ``HOME`` and the
  working directory in a temporary folder; each script gets 60 s.
* ``set -u``/``nounset`` is removed from the scripts so that an optional
  variable nobody set expands to the empty string, as it does for a user who
  did not export it. A variable that a script reads but never assigns, gives no
  default for and does not test with ``-z``/``-n`` is required from the user's
  environment: it is set to the placeholder ``UNRESOLVED_<NAME>`` and listed in
  the entry's ``unresolved`` field when the placeholder reaches an override.
* SLURM batch files get ``SLURM_NNODES``/``SLURM_JOB_NUM_NODES``,
  ``SLURM_GPUS_PER_NODE`` and ``SLURM_CPUS_PER_TASK`` from their ``#SBATCH``
  lines; SkyPilot task YAMLs run their ``run:`` block with the task's ``envs``,
  ``SKYPILOT_NODE_RANK=0`` (the head, which launches training) and the node and
  GPU counts of ``num_nodes``/``resources.accelerators``. Documentation
  (Markdown snippets with ``...`` elisions), Python and notebooks are skipped.
* The temporary paths are written back as ``/home/user`` (``$HOME``) and
  ``/workspace/verl`` (the checkout), so the output is the same on every run.

The trainer module's Hydra config comes from its ``@hydra.main(config_name=...)``
decorator in the same commit, overridden by ``--config-name``/``-cn`` on the
command line (``--config-path``/``-cp`` is kept in ``config_path``). A module
missing from the commit gets ``config_name: null`` and a ``note``.

Only what a script does with its defaults is seen: a branch selected by an
environment variable the script does not set (``USE_PEFT=1 bash run.sh``) is
not taken, and a script argument comes from the script's own example call in
its header comment, else ``UNRESOLVED_<name>`` from its ``Usage:`` line.

Which commit: verl 0.9.1 is on PyPI, but the mirror (``fetch
github:verl-project/verl``, newest commit 1dda039b of main, 2026-08-22) has no
``v0.9.1`` tag and no commit whose ``verl/version/version`` says 0.9.1 (tags
stop at v0.9.0; release/v0.9.0 says 0.9.0, main says 0.10.0.dev). Comparing the
wheel's files with the mirror, main's head is the closest commit (325 of 419
package files identical, against 289 for release/v0.9.0; the wheel has newer
changes on top), so ``DEFAULT_COMMIT`` is main's head.

Output: a JSON list, sorted by script and call order, of objects
``{"script": path in the repo, "commit": sha, "call": n-th call in the script,
"module": "verl.trainer.main_ppo", "config_name": "ppo_trainer",
"config_path": null or str, "overrides": [str, ...], "unresolved": [str, ...],
"note": str (only when something needs saying)}``.

Usage (the git directory is a bare clone, e.g. the one the ``fetch`` tool
returns for github:verl-project/verl)::

    python3 tests/data/extract_verl_examples.py \\
        --git-dir /work/.mirror/verl-project+verl/repo \\
        --commit 1dda039b9c6311889a9c9a26040677e1254814f9 \\
        --out tests/data/verl_examples_0.9.1.json

Needs git, bash and PyYAML; Linux ``unshare``/``setpriv`` are used when present.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile

import yaml

DEFAULT_COMMIT = "1dda039b9c6311889a9c9a26040677e1254814f9"
HOME_PLACEHOLDER = "/home/user"
ROOT_PLACEHOLDER = "/workspace/verl"
UNRESOLVED = "UNRESOLVED_"
SCRIPT_TIMEOUT = 60
MODULE_RE = re.compile(r"verl\.trainer\.[A-Za-z_][\w.]*")
CALL_RE = re.compile(r"-m\s+verl\.trainer\.\w")
# real programs the scripts may use to compute values; everything else is recorded, never run
TEXT_TOOLS = ("awk", "basename", "bc", "cat", "cut", "dirname", "expr", "grep", "head", "ls",
              "readlink", "realpath", "sed", "seq", "sort", "tail", "tee", "touch", "tr", "uniq", "wc")
FIXED_TOOLS = {
    "date": 'exec /bin/date -u -d @0 "$@"',
    "mkdir": '/bin/mkdir "$@" 2>/dev/null; exit 0',
    "hostname": "echo localhost",
    "nproc": "echo 8",
    "whoami": "echo user",
}
PREAMBLE = r"""
command_not_found_handle() {
    { printf '%s\0' "$@"; printf '\036\0'; } >> "$__VERL_EXTRACT_RECORD"
    return 0
}
exec() {
    if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then "$@"; exit $?; fi
}
ulimit() { builtin ulimit "$@" 2>/dev/null || true; }
cd() { builtin cd "$@" 2>/dev/null || true; }
"""
SKIP_ENV = {"HOME", "PATH", "PWD", "OLDPWD", "USER", "LOGNAME", "SHELL", "BASH_SOURCE", "BASH_ENV",
            "LINENO", "RANDOM", "SECONDS", "IFS", "HOSTNAME", "UID", "EUID", "PPID", "BASHPID",
            "FUNCNAME", "PIPESTATUS", "OPTARG", "OPTIND", "REPLY", "BASH_REMATCH", "EPOCHSECONDS"}


def git(git_dir, *args, binary=False):
    """Run ``git --git-dir=git_dir args`` and return its stdout (bytes when ``binary``)."""
    out = subprocess.run(["git", "--git-dir", git_dir] + list(args), check=True, capture_output=True).stdout
    return out if binary else out.decode()


def checkout(git_dir, commit, where):
    """Unpack ``examples/``, ``recipe/`` (if a directory) and ``verl/trainer/`` of ``commit`` into ``where``."""
    entries = git(git_dir, "ls-tree", commit, "examples", "recipe", "verl/trainer").split("\n")
    paths = [line.split("\t")[1] for line in entries if line and line.split()[1] == "tree"]
    data = git(git_dir, "archive", "--format=tar", commit, *paths, binary=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(where, filter="data")
        else:
            archive.extractall(where)
    return paths


def hydra_apps(root):
    """Map ``verl.trainer.<module>`` to ``(config_name, config_path)`` from its ``@hydra.main`` decorator."""
    apps = {}
    base = os.path.join(root, "verl", "trainer")
    for folder, _, files in os.walk(base):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as handle:
                try:
                    tree = ast.parse(handle.read())
                except SyntaxError:
                    continue
            for node in ast.walk(tree):
                for deco in getattr(node, "decorator_list", []):
                    if isinstance(deco, ast.Call) and getattr(deco.func, "attr", None) == "main":
                        kwargs = {k.arg: k.value.value for k in deco.keywords if isinstance(k.value, ast.Constant)}
                        if "config_name" in kwargs:
                            module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                            apps[module] = (kwargs["config_name"], kwargs.get("config_path"))
    return apps


def sbatch_env(text):
    """SLURM variables a batch file gets from its own ``#SBATCH`` lines."""
    env = {}
    for key, value in re.findall(r"^#SBATCH\s+--([\w-]+)=(\S+)", text, re.M):
        if key == "nodes":
            env["SLURM_NNODES"] = env["SLURM_JOB_NUM_NODES"] = value
        elif key == "gpus-per-node":
            env["SLURM_GPUS_PER_NODE"] = value.split(":")[-1]
        elif key == "cpus-per-task":
            env["SLURM_CPUS_PER_TASK"] = value
    return env


def skypilot_task(text):
    """``(run block, env)`` of a SkyPilot task YAML, or None when it has no ``run`` block."""
    task = yaml.safe_load(text)
    if not isinstance(task, dict) or not isinstance(task.get("run"), str):
        return None
    env = {k: "" if v is None else str(v) for k, v in (task.get("envs") or {}).items()}
    accelerators = str((task.get("resources") or {}).get("accelerators") or "")
    env.update(SKYPILOT_NODE_RANK="0", SKYPILOT_NUM_NODES=str(task.get("num_nodes", 1)),
               SKYPILOT_NUM_GPUS_PER_NODE=accelerators.split(":")[-1].strip() if ":" in accelerators else "1")
    return task["run"], env


def required_variables(text):
    """Names a script reads but never assigns, defaults or tests for emptiness: the user must supply them."""
    used = set(re.findall(r"\$\{?#?([A-Za-z_]\w*)", text))
    assigned = set(re.findall(r"(?:^|[\s;&|(!{])(?:(?:export|local|readonly|declare|typeset)\s+(?:-\w+\s+)*)?"
                              r"([A-Za-z_]\w*)(?:\[[^\]]*\])?\+?=", text, re.M))
    assigned |= set(re.findall(r"\bfor\s+([A-Za-z_]\w*)\s+in\b", text))
    for names in re.findall(r"\bread\s+(?:-\w+\s+)*([A-Za-z_][\w ]*)", text):
        assigned |= set(names.split())
    defaulted = set(re.findall(r"\$\{([A-Za-z_]\w*):?[-=+]", text))
    demanded = set(re.findall(r"\$\{([A-Za-z_]\w*):?\?", text))
    tested = set(re.findall(r"-[zn]\s+\"?\$\{?([A-Za-z_]\w*)", text))
    tested |= set(re.findall(r"-v\s+\"?([A-Za-z_]\w*)", text))
    return sorted(((used - assigned - defaulted - tested) | demanded) - SKIP_ENV)


def positional_args(text, name):
    """Arguments for a script that demands some: its own plain example call, else one placeholder per ``<arg>``."""
    if not re.search(r"\$\{?[1-9]", text):
        return []
    example = re.search(r"^#[ \t]*(?:bash[ \t]+)?(?:\S*/)?%s((?:[ \t]+[^\s$=]+)+)[ \t]*$" % re.escape(name), text, re.M)
    if example:
        return example.group(1).split()
    usage = re.search(r"Usage:?\s+\S*%s((?:\s+<\w+>)+)" % re.escape(name), text)
    return [UNRESOLVED + arg for arg in re.findall(r"<(\w+)>", usage.group(1))] if usage else []


def without_nounset(text):
    """Drop ``-u``/``nounset`` from ``set`` lines so unset optional variables expand to ''."""
    def strip(match):
        flags = match.group(2).replace("u", "")
        return match.group(1) + ("-" + flags if flags else "-o errexit")
    text = re.sub(r"^(\s*set\s+(?:-o\s+\w+\s+)*)-([a-zA-Z]*u[a-zA-Z]*)", strip, text, flags=re.M)
    return re.sub(r"(\bset\s+)-o\s+nounset\b", r"\1-o errexit", text)


class Sandbox:
    """A temporary folder with the shim ``PATH``, a ``HOME`` and the record file, usable by ``nobody``."""

    def __init__(self, root):
        self.root = root
        self.bin = os.path.join(root, ".bin")
        self.home = os.path.join(root, ".home")
        os.makedirs(self.bin)
        os.makedirs(self.home)
        for tool in TEXT_TOOLS:
            real = shutil.which(tool)
            if real:
                os.symlink(real, os.path.join(self.bin, tool))
        for tool, body in FIXED_TOOLS.items():
            path = os.path.join(self.bin, tool)
            with open(path, "w") as handle:
                handle.write("#!/bin/sh\n%s\n" % body)
            os.chmod(path, 0o755)
        self.preamble = os.path.join(root, ".preamble.sh")
        with open(self.preamble, "w") as handle:
            handle.write(PREAMBLE)
        self.isolate = []
        if os.geteuid() == 0:
            for folder, dirs, files in os.walk(root):
                for name in dirs + files:
                    path = os.path.join(folder, name)
                    if not os.path.islink(path):
                        os.chmod(path, os.stat(path).st_mode | stat.S_IRWXO)
            os.chmod(root, 0o777)
            unshare, setpriv = shutil.which("unshare"), shutil.which("setpriv")
            if unshare and setpriv:
                self.isolate = [unshare, "-n", setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

    def run(self, script_path, text, extra_env, args=()):
        """Run ``text`` as if it were ``script_path`` with ``args``; return (recorded argvs, returncode, stderr tail)."""
        os.makedirs(os.path.dirname(script_path), exist_ok=True)
        with open(script_path, "w") as handle:
            handle.write(without_nounset(text))
        record = os.path.join(self.root, ".record")
        open(record, "w").close()
        os.chmod(record, 0o666)
        os.chmod(script_path, 0o777)
        env = {"PATH": self.bin, "HOME": self.home, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash",
               "LANG": "C.UTF-8", "TERM": "dumb", "BASH_ENV": self.preamble, "__VERL_EXTRACT_RECORD": record}
        env.update({name: UNRESOLVED + name for name in required_variables(text) if name not in extra_env})
        env.update(extra_env)
        try:
            done = subprocess.run(self.isolate + ["/bin/bash", script_path] + list(args), cwd=self.root, env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=SCRIPT_TIMEOUT,
                                  start_new_session=True)
            code, err = done.returncode, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, err = "timeout", exc.stderr or b""
        with open(record, "rb") as handle:
            fields = handle.read().split(b"\0")
        calls, current = [], []
        for field in fields:
            if field == b"\x1e":
                calls.append(current)
                current = []
            else:
                current.append(field.decode("utf-8", "replace"))
        return calls, code, err.decode("utf-8", "replace")[-500:]


def trainer_calls(argv):
    """Yield ``(module, hydra args)`` for each ``-m verl.trainer.X`` in a recorded argv."""
    for index, arg in enumerate(argv):
        if arg == "-m" and index + 1 < len(argv) and MODULE_RE.fullmatch(argv[index + 1]):
            yield argv[index + 1], argv[index + 2:]
            return
        if CALL_RE.search(arg) and " " in arg:  # e.g. bash -c "python3 -m verl.trainer.main_ppo ..."
            try:
                yield from trainer_calls(shlex.split(arg))
            except ValueError:
                pass
            return


def split_hydra_args(args):
    """Separate Hydra's command-line flags from the overrides: ``(config_name, config_path, overrides, flags)``."""
    name = path = None
    overrides, flags = [], []
    items = iter(args)
    for arg in items:
        for long, short in (("--config-name", "-cn"), ("--config-path", "-cp")):
            if arg in (long, short):
                value = next(items, None)
            elif arg.startswith(long + "="):
                value = arg.split("=", 1)[1]
            else:
                continue
            if long == "--config-name":
                name = value[:-5] if value and value.endswith(".yaml") else value
            else:
                path = value
            break
        else:
            if arg.startswith("-"):
                flags.append(arg)
            elif arg:
                overrides.append(arg)
    return name, path, overrides, flags


def sources(root, paths):
    """Yield ``(repo path, [(script text, extra env)])`` for every example file that launches a trainer."""
    for top in paths:
        if top.startswith("verl/"):
            continue
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                try:
                    with open(path, encoding="utf-8") as handle:
                        text = handle.read()
                except (UnicodeDecodeError, OSError):
                    continue
                if not CALL_RE.search(text):
                    continue
                if name.endswith((".yaml", ".yml")):
                    task = skypilot_task(text)
                    yield rel, [task] if task else []
                elif name.endswith((".md", ".rst", ".py", ".ipynb")):
                    yield rel, []
                else:
                    yield rel, [(text, sbatch_env(text))]


def extract(git_dir, commit):
    """Return the corpus entries for ``commit`` and print a summary of skipped files to stderr."""
    commit = git(git_dir, "rev-parse", commit + "^{commit}").strip()
    with tempfile.TemporaryDirectory(prefix="verl-examples-") as tmp:
        os.chmod(tmp, 0o755)
        root = os.path.join(tmp, "verl")
        os.makedirs(root)
        paths = checkout(git_dir, commit, root)
        apps = hydra_apps(root)
        box = Sandbox(root)
        entries = []
        for rel, runs in sources(root, paths):
            if not runs:
                print("skipped %s: documentation, Python or notebook, not a launch script" % rel, file=sys.stderr)
                continue
            count = 0
            for number, (text, extra_env) in enumerate(runs):
                target = os.path.join(root, rel) if not rel.endswith((".yaml", ".yml")) \
                    else os.path.join(root, ".blocks", "%s.%d.sh" % (rel.replace("/", "__"), number))
                script_args = positional_args(text, os.path.basename(rel)) if target.endswith(rel) else []
                calls, code, err = box.run(target, text, extra_env, script_args)
                found = 0
                for argv in calls:
                    for module, hydra_args in trainer_calls(argv):
                        name, path, overrides, flags = split_hydra_args(hydra_args)
                        app = apps.get(module)
                        entry = {"script": rel, "commit": commit, "call": count, "module": module,
                                 "config_name": name or (app[0] if app else None), "config_path": path}
                        text_args = [o.replace(box.home, HOME_PLACEHOLDER).replace(root, ROOT_PLACEHOLDER)
                                     for o in overrides]
                        entry["overrides"] = text_args
                        entry["unresolved"] = sorted({m for o in text_args for m in re.findall(UNRESOLVED + r"(\w+)", o)})
                        notes = []
                        if app is None:
                            notes.append("%s has no @hydra.main in this commit" % module)
                        if flags:
                            notes.append("Hydra flags ignored: %s" % " ".join(flags))
                        if notes:
                            entry["note"] = "; ".join(notes)
                        entries.append(entry)
                        count += 1
                        found += 1
                if not found:
                    print("no trainer call recorded from %s (exit %s): %s"
                          % (rel, code, err.strip().splitlines()[-1:] or ""), file=sys.stderr)
        return entries


def main(argv=None):
    """Command line: ``--git-dir``, ``--commit`` (default ``DEFAULT_COMMIT``), ``--out`` (default stdout)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--git-dir", required=True, help="bare git directory of verl-project/verl")
    parser.add_argument("--commit", default=DEFAULT_COMMIT, help="commit, tag or branch to read")
    parser.add_argument("--out", help="JSON file to write (default: stdout)")
    args = parser.parse_args(argv)
    entries = extract(args.git_dir, args.commit)
    text = json.dumps(entries, indent=1, sort_keys=False) + "\n"
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    scripts = len({e["script"] for e in entries})
    print("%d trainer calls from %d files" % (len(entries), scripts), file=sys.stderr)


if __name__ == "__main__":
    main()
