"""vLLM general plugin (entry point group ``vllm.general_plugins``) for verl's CPU rollouts.

vLLM's CPU build repacks every unquantized linear weight for its GEMM kernels
after loading and leaves the parameter empty (``dispatch_cpu_unquantized_gemm(layer,
remove_weight=True)`` in vllm/model_executor/layers/linear.py). verl pushes the
trained weights into the rollout engine every step through the parameters'
``weight_loader``, which then fails ("Attempted to load weight ([128,128]) into
parameter ([0])", docs/training-on-cpu.md), and a packed copy would go stale
anyway. This plugin keeps the parameters and computes linear layers with
``torch.nn.functional.linear`` on them, so every weight update is what the next
rollout uses (verl's ``training/rollout_probs_diff_*`` metrics show it).

vLLM calls :func:`register` in every process it starts (several times is fine).
"""

_DONE = []


def keep_weights_linear(layer):
    """Give *layer* a ``cpu_linear`` that reads its live ``weight`` (no repacking, weight kept).

    :param layer: a vLLM linear layer (``torch.nn.Module`` with ``weight`` and optional ``bias``).
    """
    import torch

    layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, weight, bias)


def register():
    """Patch vLLM's unquantized linear method on CPU platforms (idempotent).

    :returns: None. Does nothing when vLLM is not importable or the platform is not the CPU.
    """
    if _DONE:
        return
    try:
        from vllm.model_executor.layers import linear
        from vllm.platforms import current_platform
    except ImportError:  # pragma: no cover - no vLLM in this Python
        return
    if not current_platform.is_cpu():
        return
    method = linear.UnquantizedLinearMethod
    original = method.process_weights_after_loading

    def process_weights_after_loading(self, layer):
        if getattr(layer, "weight", None) is None or layer.weight.ndim != 2 or layer.weight.is_meta:
            return original(self, layer)
        keep_weights_linear(layer)
        return None

    method.process_weights_after_loading = process_weights_after_loading
    _DONE.append(True)
