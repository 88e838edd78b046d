# -*- coding: utf-8 -*-
"""Continue a verl trainer from a checkpoint so that it ends where the uninterrupted run ends.

verl's trainers have known resume bugs (the table :data:`KNOWN_BUGS`, kept in docs/jobs.md, "verl's known
resume bugs"). This module holds what the project does about the one it works around, verl#7401:

verl 0.9.1's SFT trainers restore the data loader's saved state (``data_<dp_rank>.pt`` in the checkpoint
folder, ``verl/utils/checkpoint/checkpoint_handler.py`` ``CheckpointHandler._load_dataloader_state``) even
when the checkpoint was saved at an epoch's last step. That state is an exhausted iterator; restored at the
start of the next epoch, the epoch yields nothing and the trainer exits 0 one epoch short. Without the file
the handler warns and starts the data loader from scratch, which at an epoch boundary is the right place:
the trainer starts at epoch ``step // steps_per_epoch`` and calls the sampler's ``set_epoch`` first, so the
batches are those of the uninterrupted run. verl's PPO trainer got the same guard in verl#5725
(``ray_trainer.py``, ``at_epoch_boundary``); the open fixes for SFT (verl#7402, verl#7974) do the same.

The workaround: the next attempt resumes from a *view* of the checkpoint, ``<job_dir>/config/resume/
global_step_<N>/`` in its own job directory, holding a relative symbolic link to every entry of the
checkpoint folder except the data-loader state. The earlier attempt's checkpoint is not changed. It is used
only when all of these hold (:func:`plan`):

* the workload's catalog entry declares its trainer's data-loader state (``resume.data_state``);
* the checkpoint holds such a file;
* the checkpoint's step is a whole number of epochs (:func:`epoch_info` on the head, from the run's files);
* the snapshot the next attempt runs restores that state without checking for an epoch boundary
  (:func:`restore_guarded` on the file the catalog names: decided from the code, not from the version).

Where the number of steps per epoch cannot be read, nothing is adjusted and the spec's notes say so (the
progress check's ``short_training`` verdict still catches a short attempt).
"""

from __future__ import annotations

import ast
import fnmatch
import posixpath
import re

from ansible_collections.mvp.ray.plugins.module_utils.storage.mvp_job import job_file
from ansible_collections.mvp.ray.plugins.module_utils.lifecycle.mvp_progress import planned_from_log
from ansible_collections.mvp.ray.plugins.module_utils.tracking.mvp_runs import read_resolved_config

# verl's known resume bugs for the supported releases, and what the project does about each: the table of
# docs/jobs.md ("verl's known resume bugs") says what goes wrong, where, and which test shows it; a unit test keeps
# the two alike. ``action``: worked around, refused before submission, not affected or not reachable.
KNOWN_BUGS = (
    {"issue": "verl#7401", "url": "https://github.com/verl-project/verl/issues/7401", "action": "worked around"},
    {"issue": "verl#5725", "url": "https://github.com/verl-project/verl/pull/5725", "action": "not affected"},
    {"issue": "verl#7952", "url": "https://github.com/verl-project/verl/issues/7952",
     "action": "refused before submission"},
    {"issue": "verl#7933", "url": "https://github.com/verl-project/verl/issues/7933", "action": "not reachable"},
    {"issue": "verl#7759", "url": "https://github.com/verl-project/verl/issues/7759", "action": "not reachable"},
    {"issue": "verl#7395", "url": "https://github.com/verl-project/verl/issues/7395", "action": "not affected"},
)
WORKED_AROUND = KNOWN_BUGS[0]
"""The one this module works around (verl#7401): the data-loader state at an epoch's end."""

# A comparison of the resumed step with the epoch length: ``% steps_per_epoch``, ``% len(self.train_dataloader)``
# (verl#5725 and the proposed fixes of verl#7401), or a name saying so (``at_epoch_boundary``).
_GUARD_RE = re.compile(r"%\s*\(?\s*[\w.]*(steps_per_epoch|len\(\s*[\w.]*dataloader[\w.]*\s*\))|epoch_boundary")


def data_state_files(names, pattern):
    """The data-loader state files among a checkpoint folder's entries.

    :param names: iterable of str, the entries of a ``global_step_<N>`` folder.
    :param pattern: str, a shell pattern (``fnmatch``) naming them, from the catalog (``data_*.pt``).
    :returns: sorted list of str.
    """
    return sorted(name for name in names if fnmatch.fnmatchcase(name, pattern))


def restore_guarded(source):
    """Whether a trainer's code skips the data loader's saved state at an epoch boundary.

    Finds each function that calls ``<...dataloader...>.load_state_dict(...)`` and each function of the
    same file that calls one of those; the restore is guarded when any of them compares the step with the
    epoch length (``% steps_per_epoch``, ``% len(...dataloader)``) or names an ``epoch_boundary``, as verl#5725
    does in ``ray_trainer.py`` and verl#7402 / verl#7974 propose for ``checkpoint_handler.py``.

    :param source: str or None, the Python file the catalog's ``resume.data_state.restore_file`` names.
    :returns: True (guarded), False (restores it unguarded: verl 0.9.1's checkpoint handler) or None (no
        source, not Python, or no such restore found: cannot tell).
    """
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def calls(node, predicate):
        return any(isinstance(sub, ast.Call) and predicate(sub.func) for sub in ast.walk(node))

    def restores(func):
        return (isinstance(func, ast.Attribute) and func.attr == "load_state_dict"
                and "dataloader" in ast.unparse(func.value).lower())

    restoring = [f for f in functions if calls(f, restores)]
    if not restoring:
        return None
    names = {f.name for f in restoring}
    callers = [f for f in functions if f.name not in names and calls(
        f, lambda func: (isinstance(func, ast.Attribute) and func.attr in names)
        or (isinstance(func, ast.Name) and func.id in names))]
    return any(_GUARD_RE.search(ast.unparse(f)) for f in restoring + callers)


def steps_per_epoch(config, planned, rows):
    """Steps of one epoch of a verl trainer, as verl counts them, and how it was found.

    verl's trainers plan ``trainer.total_training_steps`` when it is set, else ``len(train_dataloader) x
    trainer.total_epochs`` (``sft_trainer_ray.py``, ``ppo/v1/trainer_base.py``), and print the figure
    ("Total training steps: N"). Without ``total_training_steps`` the epoch is that figure over the epochs;
    with it, the SFT data loader's length: the training rows (capped at ``data.train_max_samples`` when >0)
    over ``data.train_batch_size``, the last partial batch dropped (``drop_last=True``, one data-parallel
    rank in the Ray trainer).

    :param config: dict, the attempt's effective configuration (``config/resolved_config.yaml``).
    :param planned: int or None, the steps verl printed it planned (driver log).
    :param rows: int or None, the rows of ``data.train_files`` (parquet metadata).
    :returns: tuple (int or None, str): the steps, and where they come from (or why unknown).
    """
    trainer = (config or {}).get("trainer") or {}
    data = (config or {}).get("data") or {}
    epochs, total = trainer.get("total_epochs"), trainer.get("total_training_steps")
    if total is None and _whole(planned) and _whole(epochs) and planned % epochs == 0:
        return planned // epochs, "verl planned %d steps for %d epochs (driver log)" % (planned, epochs)
    batch, cap = data.get("train_batch_size"), data.get("train_max_samples", -1)
    if _whole(rows) and _whole(batch):
        used = min(rows, cap) if _whole(cap) else rows
        if used // batch:
            return used // batch, "%d training rows in batches of %d (data.train_batch_size)" % (used, batch)
    return None, ("cannot tell: no planned step count with trainer.total_epochs in the driver log, and no row "
                  "count with data.train_batch_size")


def _whole(value):
    """True for an int >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def parquet_rows(files):
    """Rows of parquet files from their metadata (pyarrow), or None when one cannot be read.

    :param files: str or list of str, absolute paths.
    :returns: int or None.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    total = 0
    for path in [files] if isinstance(files, str) else list(files or []):
        try:
            total += pq.ParquetFile(path).metadata.num_rows
        except (OSError, ValueError, TypeError):
            return None
    return total or None


def epoch_info(job_dir):
    """How many steps an epoch of the job's trainer has, read from the job directory (on the head).

    :param job_dir: str, ``<shared_root>/jobs/<submission_id>``.
    :returns: dict ``{"steps_per_epoch": int or None, "how": str}``.
    """
    config, _error = read_resolved_config(job_dir)
    planned = planned_from_log(job_file(job_dir, "driver_log"))
    data = (config or {}).get("data") or {}
    rows = None
    trainer = (config or {}).get("trainer") or {}
    if trainer.get("total_training_steps") is not None or planned is None:
        rows = parquet_rows(data.get("train_files"))
    steps, how = steps_per_epoch(config, planned, rows)
    return {"steps_per_epoch": steps, "how": how}


def plan(data_state, checkpoint, epoch, guarded, view_dir):
    """Decide how the next attempt resumes from ``checkpoint``: as it is, or from a view without the data state.

    :param data_state: dict or None, the catalog's ``resume.data_state`` (``files``: shell pattern of the state
        files; ``restore_file``: the snapshot file that restores them).
    :param checkpoint: dict, the checkpoint (``mvp_runs.latest_checkpoint``: ``step``, ``path``, ``entries``).
    :param epoch: dict or None, :func:`epoch_info` of the run that saved it.
    :param guarded: bool or None, :func:`restore_guarded` of the next attempt's snapshot file.
    :param view_dir: str, the next attempt's view folder (``<job_dir>/config/resume``).
    :returns: tuple (adjustment dict or None, list of notes). The adjustment: ``{"issue", "url", "what",
        "why", "left_out": [names], "loaded_from": <view>/global_step_<N>, "links": {link: relative target}}``.
    """
    if not data_state or not checkpoint or checkpoint.get("step") is None:
        return None, []
    step, path = int(checkpoint["step"]), checkpoint["path"]
    state = data_state_files(checkpoint.get("entries") or [], data_state.get("files") or "")
    if not state:
        return None, []
    spe = (epoch or {}).get("steps_per_epoch")
    restore_file = data_state.get("restore_file")
    if guarded:
        return None, ["the snapshot's %s skips the data loader's state at an epoch boundary (the fix of %s): "
                      "resumed from the checkpoint as saved" % (restore_file, WORKED_AROUND["issue"])]
    if not spe:
        return None, ["cannot tell whether step %d ends an epoch (%s): resumed from the checkpoint as saved; "
                      "if it does, verl may skip the next epoch (%s), which the progress check reports as "
                      "short_training" % (step, (epoch or {}).get("how") or "no epoch length", WORKED_AROUND["issue"])]
    if step % spe:
        return None, []
    bug = WORKED_AROUND
    view = posixpath.join(view_dir, "global_step_%d" % step)
    links = {posixpath.join(view, name): posixpath.relpath(posixpath.join(path, name), view)
             for name in sorted(checkpoint.get("entries") or []) if name not in state}
    why = ("step %d ends epoch %d (%d steps an epoch: %s) and the snapshot's %s restores the saved data-loader "
           "state without checking for an epoch boundary%s: that state is an exhausted iterator, and restored at "
           "the next epoch's start it would yield nothing, so verl would skip an epoch and exit 0 (%s, %s); "
           "without it verl starts the data loader afresh at epoch %d, where the uninterrupted run is"
           % (step, step // spe, spe, epoch.get("how"), restore_file,
              "" if guarded is False else " (or could not be read)", bug["issue"], bug["url"], step // spe + 1))
    what = ("resumed from %s, a view of %s without %s (the checkpoint itself is unchanged)"
            % (view, path, ", ".join(state)))
    return ({"issue": bug["issue"], "url": bug["url"], "what": what, "why": why, "left_out": state,
             "loaded_from": view, "links": links},
            ["%s: %s" % (bug["issue"], what)])
