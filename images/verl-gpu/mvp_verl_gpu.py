"""The GPU node image's platform layer: which verl releases it runs (entry point group ``mvp.platform``).

The project's submission check (plugins/module_utils/request/mvp_release.py in the collection) reads ``PLATFORM`` from
the nodes' Python and refuses a code snapshot of a release outside ``PLATFORM["verl"]`` unless the request
accepts the risk. The image's Dockerfile writes the range and the base image into :data:`DECLARATION` at build
time (build arguments MVP_VERL_RELEASES and MVP_BASE_IMAGE, from the inventory's docker_host_node_image_verl_releases
and docker_host_node_image_base): the base is verl's GPU dependency image of a release line, and its torch, vLLM and
CUDA pins are what decide which verl releases run on it.
"""
import json

__version__ = "0.1.0"
__all__ = ["PLATFORM", "DECLARATION"]

# Written by images/verl-gpu/Dockerfile: {"verl": "<version specifier>", "base": "<base image>"}.
DECLARATION = "/opt/mvp/verl-gpu-platform.json"


def _declared(path=DECLARATION):
    """The build's declaration (dict; empty when the file is missing or unreadable)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


_BUILD = _declared()
PLATFORM = {
    "layer": "mvp-verl-gpu %s (GPU node image over %s, images/verl-gpu)" % (__version__, _BUILD.get("base") or "?"),
    "verl": _BUILD.get("verl") or "",
    "why": "the base image's torch, vLLM and CUDA pins are those of this verl release line "
           "(docker_host_node_image_verl_releases goes with docker_host_node_image_base)",
}
