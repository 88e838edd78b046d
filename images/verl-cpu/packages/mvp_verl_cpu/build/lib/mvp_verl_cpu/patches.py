"""Patches verl needs on CPU that a platform class cannot express.

Each is applied once, in the process that imports verl, and only where the
plugin is installed (the CPU node image).
"""

import functools

_APPLIED = set()


def dedupe_backend(backend):
    """Remove repeated ``device:backend`` entries from a torch backend string.

    verl builds ``f"cpu:gloo,{device}:{backend}"`` (verl/utils/distributed.py),
    which on the CPU platform is ``cpu:gloo,cpu:gloo``; torch refuses a device
    type named twice ("Duplicate device type cpu").

    :param backend: str or None, e.g. ``"cpu:gloo,cpu:gloo"``.
    :returns: the same value with duplicates removed (first kept), e.g. ``"cpu:gloo"``;
        a value without ``,`` or not a str is returned unchanged.
    """
    if not isinstance(backend, str) or "," not in backend:
        return backend
    seen = []
    for part in (p.strip() for p in backend.split(",")):
        if part and part not in seen:
            seen.append(part)
    return ",".join(seen)


def _patch_init_process_group():
    import torch.distributed

    original = torch.distributed.init_process_group
    if getattr(original, "_mvp_verl_cpu", False):
        return

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if "backend" in kwargs:
            kwargs["backend"] = dedupe_backend(kwargs["backend"])
        elif args:
            args = (dedupe_backend(args[0]),) + tuple(args[1:])
        return original(*args, **kwargs)

    init_process_group._mvp_verl_cpu = True
    torch.distributed.init_process_group = init_process_group


def apply():
    """Apply every patch once (idempotent).

    :returns: list of str, names of the patches applied by this call.
    """
    done = []
    for name, patch in (("init_process_group", _patch_init_process_group),):
        if name not in _APPLIED:
            patch()
            _APPLIED.add(name)
            done.append(name)
    return done
