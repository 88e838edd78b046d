# -*- coding: utf-8 -*-
"""Import a job's reward function on the head before submission, the way verl's reward workers will.

verl loads ``reward.custom_reward_function.path`` (a job's ``reward_fn_path``) only in its reward
workers, after the model weights are loaded: a file with a syntax error gave its verdict minutes
later, and a file without the function gave a misleading trainer error. :func:`check_reward` loads
the file in a subprocess of the nodes' Python (:data:`CHECK_SCRIPT`) with the code snapshot first on
``sys.path``, finds the function by its name (``reward.custom_reward_function.name``), and checks that
it accepts the keyword arguments verl passes (:data:`REWARD_KWARGS`, plus the
``reward.custom_reward_function.reward_kwargs``); it never calls the function.

What verl 0.9.x does (read at verl-project/verl v0.9.0, 483b8a009ba3a97563edee3a19887e4862b8094a, and
main 1dda039b9c6311889a9c9a26040677e1254814f9: the loader is the same):

* ``verl/trainer/ppo/reward.py`` ``get_custom_reward_fn`` calls ``verl/utils/import_utils.py``
  ``load_extern_object(path, name)`` -> ``load_module(path)``: a ``pkg://a.b`` path is imported with
  ``importlib.import_module``; otherwise a ``file://`` prefix is dropped, a missing file raises
  FileNotFoundError, and the file is loaded with ``importlib.util.spec_from_file_location`` under the
  name ``custom_module_<hash of the absolute path>``, ``module_from_spec``, ``exec_module``, *not*
  registered in ``sys.modules``; any exception is re-raised as RuntimeError from the original; then
  ``hasattr(module, name)`` or AttributeError;
* the function is wrapped so that ``reward_kwargs`` are merged into each call, taking precedence over
  verl's own keyword arguments (``functools.partial`` of a helper doing ``fn(**{**kwargs, **reward_kwargs})``,
  an ``async`` variant when ``inspect.iscoroutinefunction(fn)``: a coroutine function is accepted);
* the reward loop's managers (``verl/experimental/reward_loop/reward_manager/naive.py``, ``dapo.py``,
  ``gdpo.py``, ``limited.py``, ``remote.py``: ``run_single``) call it with keyword arguments only.

Standard library only (the check script runs in the nodes' Python, which the collection is not in).
"""

from __future__ import annotations

import json
import os
import subprocess

# The keyword arguments verl 0.9.x passes to the reward function on every call: the reward loop's
# managers' run_single (verl/experimental/reward_loop/reward_manager/naive.py NaiveRewardManager.run_single,
# and dapo.py, gdpo.py, limited.py alike) call compute_score(data_source=..., solution_str=...,
# ground_truth=..., extra_info=..., **extra_reward_kwargs).
REWARD_KWARGS = ("data_source", "solution_str", "ground_truth", "extra_info")
# The extra_reward_kwargs of those same calls: passed only when the job has a reward model
# (reward.reward_model.enable: the reward loop has a reward router address).
REWARD_MODEL_KWARGS = ("reward_router_address", "reward_model_tokenizer")
# The override keys of the function's name and of the keyword arguments bound to it.
NAME_KEY = "reward.custom_reward_function.name"
REWARD_KWARGS_KEY = "reward.custom_reward_function.reward_kwargs"
DEFAULT_NAME = "compute_score"

# Run as [python, "-I", "-c", CHECK_SCRIPT, snapshot, path, name, json_of_reward_kwargs(, json_of_verl_kwargs)].
# Prints one JSON line {ok, problem, line, error, file, is_async} and exits 0 whenever it judged the file;
# ``problem`` is "" or one of missing, load, syntax, import, no_function, not_callable, signature.
CHECK_SCRIPT = r'''
import importlib
import importlib.util
import inspect
import json
import os
import sys
import traceback

sys.dont_write_bytecode = True  # no __pycache__ beside the user's file or in the snapshot (shared storage)
OUT = sys.stdout
sys.stdout = sys.stderr  # whatever the file prints at import stays out of the one result line


def done(problem="", line=None, error="", file=None, is_async=False):
    OUT.write(json.dumps({"ok": not problem, "problem": problem, "line": line, "error": error[:1000],
                          "file": file, "is_async": is_async}) + "\n")
    OUT.flush()
    os._exit(0)  # threads the file started do not keep the check alive


def describe(exc):
    text = str(exc)
    return type(exc).__name__ + (": " + text if text else "")


def real(path):
    return os.path.realpath(path) if path and not path.startswith("<") else path


snapshot, path, name, reward_kwargs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
verl_kwargs = json.loads(sys.argv[5]) if len(sys.argv) > 5 else [
    "data_source", "solution_str", "ground_truth", "extra_info"]
sys.path.insert(0, snapshot)

origin = None
try:
    if path.startswith("pkg://"):
        dotted = path[len("pkg://"):].replace("/", ".")
        try:
            found = importlib.util.find_spec(dotted)
            origin = found.origin if found else None
        except Exception:
            origin = None
        module = importlib.import_module(dotted)
    else:
        origin = path[len("file://"):] if path.startswith("file://") else path
        if not os.path.exists(origin):
            done("missing", error="FileNotFoundError: %s" % origin, file=origin)
        spec = importlib.util.spec_from_file_location(
            "custom_module_%d" % hash(os.path.abspath(origin)), origin)
        if spec is None or spec.loader is None:
            done("load", error="ImportError: cannot load a module from %s (not a Python source file?)" % origin,
                 file=origin)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
except BaseException as exc:  # SystemExit and KeyboardInterrupt at import are the file's verdict too
    if isinstance(exc, SyntaxError) and exc.filename and not str(exc.filename).startswith("<"):
        done("syntax", line=exc.lineno, error="%s: %s" % (type(exc).__name__, exc.msg), file=exc.filename)
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if origin and real(f.filename) == real(origin)]
    frame = mine[-1] if mine else (frames[-1] if frames else None)
    done("import", line=frame.lineno if frame else None, error=describe(exc),
         file=frame.filename if frame else origin)

try:
    if not hasattr(module, name):
        done("no_function", file=origin)
    fn = getattr(module, name)
except Exception as exc:  # a module __getattr__ that raises
    done("no_function", error=describe(exc), file=origin)
code = getattr(inspect.unwrap(fn), "__code__", None) if callable(fn) else None
line = code.co_firstlineno if code is not None else None
if not callable(fn):
    done("not_callable", error="%s is a %s" % (name, type(fn).__name__), file=origin)
is_async = inspect.iscoroutinefunction(fn)
try:
    signature = inspect.signature(fn)
except (TypeError, ValueError):
    done(is_async=is_async)  # no signature to read (a builtin): nothing to judge
arguments = dict.fromkeys(verl_kwargs)
arguments.update(reward_kwargs)  # verl merges them over its own arguments
try:
    signature.bind(**arguments)
except TypeError as exc:
    done("signature", line=line, error=describe(exc) + " (signature %s%s)" % (name, signature),
         file=code.co_filename if code is not None else origin, is_async=is_async)
done(line=line, is_async=is_async)
'''

_FIX_IMPORT = ("Fix: correct the file (`python %s` with the code snapshot first on PYTHONPATH shows the whole "
               "traceback).")


def _env():
    """The child's environment: PATH, HOME and LANG of ours (the job's env_vars are not set here)."""
    env = {key: os.environ[key] for key in ("PATH", "HOME", "LANG") if key in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    return env


def _at(result, path):
    """`` at line N`` (and the file, when it is not ``path``) of a result, or ""."""
    if result.get("line") is None:
        return ""
    other = result.get("file")
    if other and os.path.realpath(other) != os.path.realpath(path):
        return " at %s line %s" % (other, result["line"])
    return " at line %s" % result["line"]


def judge(result, path, name=DEFAULT_NAME, reward_kwargs=None, verl_kwargs=REWARD_KWARGS):
    """Turn the check script's result into a problem string ("" when the file is fine).

    :param result: dict, the JSON line of :data:`CHECK_SCRIPT` (``ok``, ``problem``, ``line``, ``error``, ``file``).
    :param path: str, the reward file (``reward_fn_path``).
    :param name: str, the function's name (``reward.custom_reward_function.name``).
    :param reward_kwargs: dict or None, ``reward.custom_reward_function.reward_kwargs``.
    :param verl_kwargs: sequence of str, the keyword arguments verl passes (:data:`REWARD_KWARGS`).
    :returns: str, "" or one problem ending "Nothing was written."
    """
    if result.get("ok"):
        return ""
    kind, error = result.get("problem"), result.get("error") or ""
    head = "reward_fn_path %s" % path
    if kind == "missing":
        text = ("%s does not exist where the check looked (%s). Fix: copy the reward function to that path."
                % (head, error))
    elif kind == "load":
        text = "%s cannot be loaded as a Python module (%s). Fix: point reward_fn_path at a .py file." % (head, error)
    elif kind in ("syntax", "import"):
        what = "does not compile" if kind == "syntax" else "fails when imported"
        text = ("%s %s: %s%s (imported on the head as verl's reward workers would, before submission). %s"
                % (head, what, error, _at(result, path), _FIX_IMPORT % path))
    elif kind == "no_function":
        text = ("%s has no function %s (%s)%s. Fix: define %s in the file, or set %s in trainer_overrides to the "
                "function's name." % (head, name, NAME_KEY, ": " + error if error else "", name, NAME_KEY))
    elif kind == "not_callable":
        text = ("%s: %s (%s) is not callable (%s). Fix: make %s a function." % (head, name, NAME_KEY, error, name))
    elif kind == "signature":
        extra = sorted(reward_kwargs or {})
        text = ("%s: %s(...)%s does not accept verl's arguments %s%s: %s. Fix: define it as %s(%s, **kwargs) or "
                "correct %s." % (head, name, _at(result, path), ", ".join(verl_kwargs),
                                 " and %s %s" % (REWARD_KWARGS_KEY, ", ".join(extra)) if extra else "", error,
                                 name, ", ".join(list(verl_kwargs) + extra), REWARD_KWARGS_KEY))
    else:
        text = "%s was not judged: the check answered %s." % (head, json.dumps(result, sort_keys=True)[:500])
    return text + " Nothing was written."


def check_reward(python, snapshot, path, name=DEFAULT_NAME, reward_kwargs=None, timeout=60, reward_model=False):
    """Import the reward file in the nodes' Python as verl would and return what is wrong with it.

    The child is ``[python, "-I", "-c", CHECK_SCRIPT, snapshot, path, name, json(reward_kwargs),
    json(verl's argument names)]`` with ``cwd=snapshot`` and an environment of PATH, HOME and LANG only; it
    runs the file's module level (as verl does) but never the function.

    :param python: str, the nodes' Python (``mvp_ray_python``), an executable path.
    :param snapshot: str, the code snapshot's folder (holds ``verl/``), put first on ``sys.path``.
    :param path: str, the reward file (``reward_fn_path``; verl's ``file://`` and ``pkg://`` forms too).
    :param name: str, the function's name (``reward.custom_reward_function.name``, verl's default compute_score).
    :param reward_kwargs: dict or None, ``reward.custom_reward_function.reward_kwargs`` (JSON-serializable), bound
        over verl's own arguments as verl merges them.
    :param timeout: float, seconds before the child is killed and the timeout reported as the problem.
    :param reward_model: bool, the job has a reward model (verl then passes :data:`REWARD_MODEL_KWARGS` too).
    :returns: str, "" when the file imports and the function accepts verl's arguments; else one problem
        naming ``reward_fn_path`` and the fix, ending "Nothing was written."
    :raises TypeError: when ``reward_kwargs`` is not JSON-serializable.
    """
    verl_kwargs = tuple(REWARD_KWARGS) + (tuple(REWARD_MODEL_KWARGS) if reward_model else ())
    argv = [python, "-I", "-c", CHECK_SCRIPT, snapshot, path, name, json.dumps(dict(reward_kwargs or {})),
            json.dumps(list(verl_kwargs))]
    head = "reward_fn_path %s was not judged" % path
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, errors="replace", env=_env(), cwd=snapshot, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return ("%s: importing it (%s, snapshot %s first on sys.path) did not finish within the check's timeout of "
                "%s s. Fix: keep the file's module level quick (load models or data inside %s, on first use). "
                "Nothing was written." % (head, python, snapshot, timeout, name))
    except OSError as exc:
        return ("%s: the nodes' Python %s did not start (%s). Fix: install the nodes' Python on the head "
                "(site.yml). Nothing was written." % (head, python, exc))
    for line in reversed(proc.stdout.splitlines()):
        try:
            result = json.loads(line)
        except ValueError:
            continue
        if isinstance(result, dict) and "ok" in result:
            return judge(result, path, name, reward_kwargs, verl_kwargs)
    tail = " ".join(proc.stderr.strip().splitlines()[-3:])[-500:]
    return ("%s: the check (%s, snapshot %s) printed no result (exit %s): %s. Fix: run it by hand to see why. "
            "Nothing was written." % (head, python, snapshot, proc.returncode, tail or "no output"))
