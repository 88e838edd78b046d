# -*- coding: utf-8 -*-
"""Validate Hydra trainer overrides against a verl snapshot's own config tree.

verl's trainers are Hydra apps (``verl/trainer/config/<name>.yaml``:
``ppo_trainer`` for ``main_ppo``, ``sft_trainer_engine`` for ``sft_trainer_ray``).
Composing the overrides with ``hydra.compose`` needs only ``hydra-core`` and
``omegaconf`` (no torch), so a misspelled key fails here rather than after the
GPUs are allocated. Hydra itself does not check types for plain YAML configs,
so the composed value's type is compared with the default's.
"""

from __future__ import annotations


def _kind(value):
    """Return a coarse type name used for comparisons: bool, number, str, list, dict or None."""
    from omegaconf import DictConfig, ListConfig

    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number" if isinstance(value, float) else "int"
    if isinstance(value, str):
        return "str"
    if isinstance(value, ListConfig):
        return "list"
    if isinstance(value, DictConfig):
        return "dict"
    return type(value).__name__


def _compatible(default_kind, new_kind):
    if default_kind is None or new_kind is None or default_kind == new_kind:
        return True
    return default_kind == "number" and new_kind == "int"


def validate_overrides(config_dir, config_name, overrides):
    """Compose ``overrides`` against ``config_dir/config_name.yaml``.

    :param config_dir: str, absolute path of the snapshot's ``verl/trainer/config``.
    :param config_name: str, config name without ``.yaml`` (``ppo_trainer``).
    :param overrides: list of str, Hydra ``key=value`` overrides as the entrypoint passes them.
    :returns: list of str errors (empty when the overrides compose with matching types).
        Each error names the key and the problem.
    :raises ImportError: when hydra-core or omegaconf is missing.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    GlobalHydra.instance().clear()
    errors = []
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        base = compose(config_name=config_name)
        try:
            composed = compose(config_name=config_name, overrides=list(overrides))
        except (HydraException, OmegaConfBaseException) as exc:
            return [str(exc).splitlines()[0]]
        for override in overrides:
            key = override.split("=", 1)[0].lstrip("+~")
            default = OmegaConf.select(base, key, throw_on_missing=False)
            new = OmegaConf.select(composed, key, throw_on_missing=False)
            if not _compatible(_kind(default), _kind(new)):
                errors.append("'%s' expects %s (default %r) but the override gives %s %r"
                              % (key, _kind(default), default, _kind(new), new))
    GlobalHydra.instance().clear()
    return errors
