"""verl platform plugin for CPU-only Ray nodes.

verl picks its accelerator through platform classes registered with
``verl.plugin.platform.platform_manager.PlatformRegistry`` (built in: nvidia,
npu, rocm) and loads third-party plugins from the ``verl.plugins`` entry point
group when ``verl`` is imported. This package registers a ``cpu`` platform
there, so verl's own trainers run on nodes without GPUs (a smoke-test cluster).
It is installed only in the project's CPU node image (images/verl-cpu); GPU
images never carry it, and where a GPU platform is detected it wins (verl
probes the built-in platforms first).

What it provides, each item found by the failure it removes (docs/training-on-cpu.md,
"The local cluster trains for real"):

* the Ray resource verl's placement groups and workers ask for: ``GPU`` when
  the cluster advertises (logical) GPUs, else ``CPU``
  (``MVP_VERL_CPU_RAY_RESOURCE`` overrides), see :mod:`mvp_verl_cpu.platform`;
* a device module that answers the ``torch.cuda``-style calls verl makes
  (memory counters 0, seeding through torch's CPU generator);
* one ``gloo`` backend for ``torch.distributed.init_process_group`` where verl
  writes ``cpu:gloo,cpu:gloo`` (the device type twice is refused by torch).

Environment:
    MVP_VERL_CPU_RAY_RESOURCE: ``GPU`` or ``CPU`` to fix the Ray resource name.
    MVP_VERL_CPU_DISABLE: ``1`` to load nothing (verl then behaves as shipped).
"""

import os

__all__ = ["register", "PLATFORM", "VERL_RELEASES"]
__version__ = "0.1.0"

# The verl releases this platform layer runs (a version specifier, PEP 440 style). verl loads third-party
# platform plugins (the ``verl.plugins`` entry points in verl/__init__.py, the registry of
# verl/plugin/platform) since 0.9.0: verl 0.8.0 never loads this package and asks Ray for a resource named
# ``cpu`` no node offers. 0.10 is not tried here yet.
VERL_RELEASES = ">=0.9.0,<0.10"
# What the project's submission check reads (entry point group ``mvp.platform``, module_utils mvp_release).
PLATFORM = {
    "layer": "mvp-verl-cpu %s (verl's CPU platform plugin, images/verl-cpu)" % __version__,
    "verl": VERL_RELEASES,
    "why": "verl loads third-party platform plugins since 0.9.0; 0.10 is not tried",
}

_REGISTERED = False


def register():
    """Register the ``cpu`` platform with verl and apply the CPU patches (idempotent).

    Called when verl imports the entry point ``verl.plugins: cpu`` (``mvp_verl_cpu.autoload``).

    :returns: None.
    :raises ImportError: when verl or torch cannot be imported (verl's loader
        logs it at debug level and goes on without the plugin).
    """
    global _REGISTERED
    if _REGISTERED or os.environ.get("MVP_VERL_CPU_DISABLE") == "1":
        return
    from . import patches, platform  # noqa: F401  (registration happens at import)

    patches.apply()
    _REGISTERED = True
