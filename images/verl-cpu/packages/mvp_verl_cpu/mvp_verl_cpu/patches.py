"""Patches verl needs on CPU that a platform class cannot express.

* ``torch.distributed.init_process_group``: one ``gloo`` per device type;
* ``EngineRegistry.get_engine_cls``: the FSDP engines (registered for cuda and
  npu only) serve the ``cpu`` device too;
* ``verl.utils.model.load_valuehead_model``: the critic loads with sdpa attention;
* ``torch.distributed.fsdp.CPUOffloadPolicy``: no pinned memory where no
  accelerator can pin it (the reference policy's FSDP2 module).

Each is applied once, in the process that imports verl, and only where the
plugin is installed (the CPU node image).
"""

import functools
import importlib.abc
import importlib.util
import sys

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


def engine_fallback(registry, device):
    """Pick the engine class a CPU process uses from one backend's registry.

    verl registers its FSDP engines for ``device=["cuda", "npu"]`` only
    (verl/workers/engine/fsdp/transformer_impl.py); their code is device-agnostic
    (it asks the platform for the device), so on ``cpu`` the CUDA registration
    is the one to use.

    :param registry: dict, ``EngineRegistry._engines[model_type][backend]``
        (keys: device or (device, vendor)).
    :param device: str, the platform's device name.
    :returns: the engine class, or None when *device* is not ``cpu`` or no CUDA
        registration exists.
    """
    if device != "cpu":
        return None
    for key in (("cuda", "nvidia"), "cuda"):
        if key in registry:
            return registry[key]
    return None


def _patch_engine_registry(base):
    registry_cls = base.EngineRegistry
    original = registry_cls.get_engine_cls.__func__
    if getattr(original, "_mvp_verl_cpu", False):
        return

    def get_engine_cls(cls, model_type, backend):
        try:
            return original(cls, model_type, backend)
        except ValueError:
            engine = engine_fallback(cls._engines.get(model_type, {}).get(backend, {}), base.get_device_name())
            if engine is None:
                raise
            return engine

    get_engine_cls._mvp_verl_cpu = True
    registry_cls.get_engine_cls = classmethod(get_engine_cls)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Run a patch right after a module is first imported (no import of it here).

    Importing verl's engine package when verl itself is imported would load the
    FSDP engines (and transformers) in every process that imports verl; this
    hook waits until verl imports the module itself.
    """

    def __init__(self, name, patch):
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader, patch = spec.loader, self.patch
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            patch(module)

        loader.exec_module = exec_module
        sys.meta_path.remove(self)
        return spec


def after_import(name, patch):
    """Call ``patch(module)`` once *name* is imported (at once when it already is)."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, patch))


def _patch_valuehead_loader(model_utils):
    """Load value models (PPO's critic) with sdpa attention instead of flash-attention 2.

    verl's ``load_valuehead_model`` (verl/utils/model.py) hard-codes
    ``attn_implementation="flash_attention_2"`` and, when that fails, asks for trl
    (docs/training-on-cpu.md, the plugin). On CPU the same token-classification model
    loads with ``sdpa``.
    """
    original = model_utils.load_valuehead_model
    if getattr(original, "_mvp_verl_cpu", False):
        return

    @functools.wraps(original)
    def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):
        from transformers import AutoModelForTokenClassification

        try:
            return AutoModelForTokenClassification.from_pretrained(
                pretrained_model_name_or_path=local_path, torch_dtype=torch_dtype, config=model_config,
                attn_implementation="sdpa", trust_remote_code=trust_remote_code)
        except Exception:  # not a token-classification architecture: verl's own path
            return original(local_path, torch_dtype, model_config, trust_remote_code)

    load_valuehead_model._mvp_verl_cpu = True
    model_utils.load_valuehead_model = load_valuehead_model


def offload_pin_memory(requested, accelerator_available):
    """Whether an FSDP2 ``CPUOffloadPolicy`` may pin its host memory.

    verl's FSDP engine gives every forward-only engine (the reference policy:
    ``actor_rollout_ref.ref.fsdp_config.forward_only: true`` in ppo_trainer.yaml) and
    every engine with ``fsdp_config.offload_policy: true`` a
    ``CPUOffloadPolicy(pin_memory=True)`` (``FSDPEngine._build_fsdp_module`` in
    verl/workers/engine/fsdp/transformer_impl.py). torch's FSDP2 then pins each
    parameter shard (``FSDPParam._init_sharded_param``: ``Tensor.pin_memory()``),
    which needs an accelerator driver: on a CPU node it fails with "Found no
    NVIDIA driver on your system". Pinned memory only speeds host-to-device
    copies; with no accelerator there is no such copy, so the shards stay pageable.

    :param requested: bool, the policy's ``pin_memory`` as built.
    :param accelerator_available: bool, whether torch sees an accelerator.
    :returns: bool, the ``pin_memory`` to keep: *requested* with an accelerator, else False.
    """
    return bool(requested) and bool(accelerator_available)


def accelerator_available():
    """Whether torch sees an accelerator (what ``Tensor.pin_memory()`` needs).

    :returns: bool; False on a CPU node, also with PyPI's CUDA build of torch and no driver.
    """
    import torch

    accelerator = getattr(torch, "accelerator", None)
    try:
        if accelerator is not None:
            return bool(accelerator.is_available())
        return bool(torch.cuda.is_available())
    except Exception:  # pragma: no cover - a broken driver counts as none
        return False


def _patch_cpu_offload_policy(fsdp):
    """Keep FSDP2's CPU offload policy unpinned where no accelerator can pin (see :func:`offload_pin_memory`).

    The class itself is patched (not one module's name for it), so every engine
    that builds one (verl's FSDP and FSDP-turbo engines, also when they imported
    the class before this patch) gets unpinned shards on a CPU node.
    """
    policy_cls = fsdp.CPUOffloadPolicy
    original = policy_cls.__init__
    if getattr(original, "_mvp_verl_cpu", False):
        return

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if self.pin_memory:
            self.pin_memory = offload_pin_memory(self.pin_memory, accelerator_available())

    __init__._mvp_verl_cpu = True
    policy_cls.__init__ = __init__


def apply():
    """Apply every patch once (idempotent).

    :returns: list of str, names of the patches applied by this call.
    """
    done = []
    for name, patch in (("init_process_group", _patch_init_process_group),
                        ("engine_registry", lambda: after_import("verl.workers.engine.base",
                                                                 _patch_engine_registry)),
                        ("valuehead_loader", lambda: after_import("verl.utils.model", _patch_valuehead_loader)),
                        ("cpu_offload_policy", lambda: after_import("torch.distributed.fsdp",
                                                                    _patch_cpu_offload_policy))):
        if name not in _APPLIED:
            patch()
            _APPLIED.add(name)
            done.append(name)
    return done
