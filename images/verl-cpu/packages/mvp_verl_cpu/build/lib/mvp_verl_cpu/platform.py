"""The ``cpu`` platform: verl's ``PlatformBase`` for nodes without accelerators.

Registered under the name ``cpu`` when imported. verl's detection
(``platform_manager._detect_platform_name``) probes the registered platforms in
order; the built-in GPU/NPU platforms come first, so this one is chosen only
where none of them finds a device (or when ``VERL_PLATFORM=cpu``).
"""

import contextlib
import os
import types

import torch
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

RESOURCE_ENV = "MVP_VERL_CPU_RAY_RESOURCE"


class _CPUDeviceModule(types.ModuleType):
    """A ``torch.cuda``-shaped namespace backed by the CPU.

    verl calls the accelerator module returned by ``get_torch_device()`` for
    memory statistics, seeding, streams and device selection. ``torch.cpu``
    answers only part of that; the rest is answered here: memory counters are
    0 (bytes), ``mem_get_info`` reports the host's free and total memory in
    bytes, seeding goes to torch's CPU generator, device selection is a no-op
    on the single device 0. Anything else is looked up in ``torch.cpu``.
    """

    def __init__(self):
        super().__init__("mvp_verl_cpu.device")

    def __getattr__(self, name):
        return getattr(torch.cpu, name)

    @staticmethod
    def is_available():
        """Always True: the CPU is there."""
        return True

    @staticmethod
    def device_count():
        """One device (``cpu``)."""
        return 1

    @staticmethod
    def current_device():
        """Index 0, so ``f"cpu:{current_device()}"`` is a valid torch device."""
        return 0

    @staticmethod
    def set_device(device=None):
        """No-op: a single CPU device."""

    @staticmethod
    def get_device_name(device=None):
        """``"CPU"`` (verl looks it up in its FLOPS table; unknown names count as inf)."""
        return "CPU"

    @staticmethod
    def get_device_capability(device=None):
        """No compute capability on a CPU: ``(None, None)``."""
        return (None, None)

    @staticmethod
    def synchronize(device=None):
        """No-op: CPU operations are synchronous."""

    @staticmethod
    def empty_cache():
        """No-op: no caching allocator."""

    @staticmethod
    def ipc_collect():
        """No-op."""

    @staticmethod
    def memory_allocated(device=None):
        """0 bytes (no device memory)."""
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(device=None):
        """No-op."""

    @staticmethod
    def set_per_process_memory_fraction(fraction, device=None):
        """No-op."""

    @staticmethod
    def mem_get_info(device=None):
        """``(free, total)`` host memory in bytes, from ``/proc/meminfo``."""
        info = {}
        with open("/proc/meminfo") as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
        return info.get("MemAvailable", 0), info.get("MemTotal", 0)

    @staticmethod
    def manual_seed(seed):
        """Seed torch's CPU generator."""
        torch.manual_seed(seed)

    manual_seed_all = manual_seed

    @staticmethod
    def get_rng_state(device=None):
        """torch's CPU generator state (a ByteTensor)."""
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state, device=None):
        """Restore torch's CPU generator state."""
        torch.set_rng_state(state)


DEVICE_MODULE = _CPUDeviceModule()


def ray_resource_name():
    """Name of the Ray resource verl should reserve per worker process.

    :returns: str, ``MVP_VERL_CPU_RAY_RESOURCE`` when set (``GPU`` or ``CPU``);
        otherwise ``GPU`` when the connected Ray cluster advertises GPUs
        (logical ones on CPU hosts: verl's PPO trainer counts only GPUs), else
        ``CPU``. Without a Ray connection, ``CPU``.
    :raises ValueError: when the variable holds another value.
    """
    forced = os.environ.get(RESOURCE_ENV, "").strip().upper()
    if forced:
        if forced not in ("GPU", "CPU"):
            raise ValueError("%s=%r: use GPU or CPU" % (RESOURCE_ENV, forced))
        return forced
    try:
        import ray

        if ray.is_initialized() and ray.cluster_resources().get("GPU", 0) > 0:
            return "GPU"
    except Exception:  # pragma: no cover - no Ray, or a Ray without a cluster
        pass
    return "CPU"


@PlatformRegistry.register(platform="cpu")
class PlatformCPU(PlatformBase):
    """verl platform for CPU-only nodes (device ``cpu``, backend ``gloo``)."""

    @property
    def device_name(self):
        return "cpu"

    @property
    def vendor_name(self):
        return "cpu"

    @property
    def device_module(self):
        return DEVICE_MODULE

    def is_available(self):
        return True

    def is_platform_available(self, use_smi_check=False):
        return True

    def current_device(self):
        return 0

    def device_count(self):
        return 1

    def set_device(self, device_index):
        return None

    def synchronize(self, device_index=None):
        return None

    def manual_seed(self, seed):
        torch.manual_seed(seed)

    def manual_seed_all(self, seed):
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings):
        return None

    def empty_cache(self):
        return None

    def get_device_capability(self, device_index=0):
        return None, None

    def communication_backend_name(self):
        return "gloo"

    def visible_devices_envvar(self):
        return "CUDA_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg):
        yield

    def profiler_start(self):
        return None

    def profiler_stop(self):
        return None

    def ray_resource_name(self):
        return ray_resource_name()

    def ray_resource_options(self, num_gpus):
        """Ray actor options reserving *num_gpus* units of :func:`ray_resource_name`."""
        if self.ray_resource_name() == "GPU":
            return {"num_gpus": num_gpus}
        return {"num_cpus": num_gpus}

    def ray_noset_envvars(self):
        return []

    def is_ipc_supported(self):
        return False

    def cudart(self):
        return None
