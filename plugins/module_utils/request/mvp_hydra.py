# -*- coding: utf-8 -*-
"""Validate Hydra trainer overrides against a verl snapshot's own config tree.

verl's trainers are Hydra apps (``verl/trainer/config/<name>.yaml``:
``ppo_trainer`` for ``main_ppo``, ``sft_trainer_engine`` for ``sft_trainer`` and
``sft_trainer_ray``). Composing the overrides with ``hydra.compose`` needs only
``hydra-core`` and ``omegaconf`` (no torch), so a misspelled key fails here
rather than after the GPUs are allocated.

Hydra does not check value types for plain YAML configs, and verl builds most
config sections by ``hydra.utils.instantiate`` of the section's ``_target_``
dataclass, which does not check them either: a wrong type surfaces later, inside
a worker. So after composing, each overridden value is checked against what the
snapshot declares for it, refusing only what verl could not use:

1. Dataclass annotations. A config node with ``_target_: verl.workers.config.X``
   is built from dataclass ``X``; the field annotations (``float``,
   ``Optional[int]``, ``str | list[str]``, ``dict[str, Any]``, nested config
   classes, ``Literal[...]``) are read with :mod:`ast` from the snapshot's own
   source files (``<root>/verl/...``, where ``<root>`` is three levels above
   ``config_dir``), following ``from .mod import *`` re-exports and base
   classes. Nothing is imported, so torch and verl need not be installed. A
   node without ``_target_`` inherits the class from the annotation of the
   field it sits in (``optim: OptimizerConfig``).
2. The YAML default, when no annotation is known (``data``, ``trainer``,
   keys added with ``+``). The rule is lenient, in line with how verl reads
   these sections: ints and floats are interchangeable (``top_p: 1`` takes
   ``0.7``); an int may stand for a bool; one scalar may replace a list
   (``trainer.logger=console``: verl wraps a single logger); a list may replace
   a string for ``*_files`` keys (verl's datasets take one file or a list); a
   string default also takes numbers and booleans; a null default, a new key or
   the value ``null`` takes anything. Mappings and scalars never replace each
   other.

Compatibility with an annotation follows what OmegaConf's own structured
configs allow and what verl's code then copes with: ``float`` takes an int,
``bool`` takes a bool or an int (truthiness), ``str`` takes any scalar (it is
formatted), ``int`` takes only integers, lists and dicts only their own kind, a
config class only a mapping, ``Any``/unknown names anything, ``Optional`` also
null (as does any field whose YAML default is null). A string is never taken
for a number or a bool: ``instantiate`` passes it on unconverted, and the
optimizer or the ``if`` that reads it gets ``'1e-6'`` or ``'false'``.
Interpolations (``${...}``) are checked after resolution; one that cannot be
resolved on the head (``${oc.env:...}`` of an unset variable) is not checked.
Group selections (``model_engine=megatron``), deletions (``~key``) and
``hydra.*`` overrides are Hydra's business and not type-checked. The defaults
come from a compose with only the job's group selections, so a key of the
selected engine (``actor_rollout_ref.actor.megatron.*``) has its own default.

The rule was fitted to verl's own launch scripts:
``tests/unit/plugins/module_utils/request/test_mvp_hydra_verl_examples.py`` checks every ``-m verl.trainer.*``
call of verl's ``examples/`` (``tests/data/verl_examples_0.9.1.json``) against the verl 0.9.1 wheel.
Needs Python 3.9+ (``ast.unparse``).
"""

from __future__ import annotations

import ast
import functools
import os
import re

from ansible_collections.mvp.ray.plugins.module_utils.request.mvp_request import AFTER_EACH_EPOCH

# annotation names -> kinds (the last dotted component is looked at: typing.Optional, omegaconf.DictConfig)
_SCALARS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "bytes": "str"}
_LISTS = {"list", "List", "tuple", "Tuple", "Sequence", "MutableSequence", "set", "Set", "frozenset",
          "FrozenSet", "Iterable", "Collection", "ListConfig"}
_DICTS = {"dict", "Dict", "Mapping", "MutableMapping", "DictConfig", "OrderedDict", "defaultdict"}
_ANY = {"Any", "object", "type", "Type", "Callable"}
_ANY_SPEC = ("any",)


def _kind(value):
    """Kind of a composed OmegaConf value: None, 'bool', 'int', 'float', 'str', 'list' or 'dict'."""
    from omegaconf import DictConfig, ListConfig

    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (ListConfig, list, tuple)):
        return "list"
    if isinstance(value, (DictConfig, dict)):
        return "dict"
    return type(value).__name__


def _accepts(spec, kind):
    """Whether a value of ``kind`` fits the type ``spec`` built by :meth:`_Sources.spec`."""
    tag = spec[0]
    if tag == "any":
        return True
    if tag == "union":
        return any(_accepts(member, kind) for member in spec[1])
    if tag == "none":
        return kind is None
    if tag == "float":
        return kind in ("int", "float")
    if tag == "bool":
        return kind in ("bool", "int")
    if tag == "str":
        return kind in ("str", "int", "float", "bool")
    if tag == "config":
        return kind == "dict"
    return kind == tag


class _Sources(object):
    """Dataclass field annotations read with :mod:`ast` from a source tree (nothing is imported).

    :param root: str, folder holding the top-level package (``<root>/verl/__init__.py``).
    """

    def __init__(self, root):
        self.root = root
        self._modules = {}
        self._fields = {}

    def module(self, dotted):
        """Parsed module ``dotted`` as ``(ast.Module, is_package)``, or None when it is not in the tree."""
        if dotted not in self._modules:
            base = os.path.join(self.root, *dotted.split("."))
            found = None
            for path, package in ((base + ".py", False), (os.path.join(base, "__init__.py"), True)):
                if os.path.isfile(path):
                    try:
                        with open(path, encoding="utf-8") as handle:
                            found = (ast.parse(handle.read(), filename=path), package)
                    except (SyntaxError, ValueError, OSError, UnicodeDecodeError):
                        found = None
                    break
            self._modules[dotted] = found
        return self._modules[dotted]

    @staticmethod
    def _absolute(dotted, package, node):
        """Module named by ``from <node.module> import`` inside module ``dotted``."""
        if not node.level:
            return node.module
        parts = dotted.split(".")
        parts = parts[:len(parts) - node.level + (1 if package else 0)]
        return ".".join(parts + ([node.module] if node.module else []))

    def find_class(self, dotted, name, seen=None):
        """``(module, ast.ClassDef)`` of class ``name`` as seen from module ``dotted``, following imports."""
        seen = set() if seen is None else seen
        if (dotted, name) in seen:
            return None
        seen.add((dotted, name))
        parsed = self.module(dotted)
        if parsed is None:
            return None
        tree, package = parsed
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return dotted, node
        for node in tree.body:
            if not isinstance(node, ast.ImportFrom):
                continue
            source = self._absolute(dotted, package, node)
            for alias in node.names:
                if alias.name == "*" or (alias.asname or alias.name) == name:
                    found = self.find_class(source, name if alias.name == "*" else alias.name, seen)
                    if found:
                        return found
        return None

    def resolve(self, target):
        """``(module, ast.ClassDef)`` for a dotted ``_target_`` such as ``verl.workers.config.FSDPActorConfig``."""
        if not isinstance(target, str) or "." not in target:
            return None
        dotted, name = target.rsplit(".", 1)
        return self.find_class(dotted, name)

    def fields(self, found):
        """Field name -> ``(annotation ast, module)`` of a class and its resolvable bases."""
        dotted, node = found
        key = (dotted, node.name)
        if key not in self._fields:
            self._fields[key] = {}
            merged = {}
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                parent = self.find_class(dotted, name) if name else None
                if parent:
                    merged.update(self.fields(parent))
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    if "ClassVar" not in ast.dump(stmt.annotation):
                        merged[stmt.target.id] = (stmt.annotation, dotted)
            self._fields[key] = merged
        return self._fields[key]

    def spec(self, annotation, dotted):
        """Turn an annotation into a type spec: ``('int',)``, ``('union', (...))``, ``('config', found)``..."""
        if annotation is None:
            return _ANY_SPEC
        if isinstance(annotation, ast.Constant):
            if annotation.value is None:
                return ("none",)
            if isinstance(annotation.value, str):  # forward reference
                try:
                    return self.spec(ast.parse(annotation.value, mode="eval").body, dotted)
                except SyntaxError:
                    return _ANY_SPEC
            return _ANY_SPEC
        if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
            return ("union", (self.spec(annotation.left, dotted), self.spec(annotation.right, dotted)))
        if isinstance(annotation, ast.Subscript):
            head = self._name(annotation.value)
            args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            if head == "Optional":
                return ("union", (self.spec(args[0], dotted), ("none",)))
            if head == "Union":
                return ("union", tuple(self.spec(arg, dotted) for arg in args))
            if head == "Literal":
                kinds = {_kind(arg.value) for arg in args if isinstance(arg, ast.Constant)}
                return ("union", tuple(("none",) if k is None else (k,) for k in sorted(kinds, key=str)))
            if head == "Annotated":
                return self.spec(args[0], dotted)
            annotation = annotation.value
        name = self._name(annotation)
        if name in _SCALARS:
            return (_SCALARS[name],)
        if name in _LISTS:
            return ("list",)
        if name in _DICTS:
            return ("dict",)
        if name == "None":
            return ("none",)
        if name and name not in _ANY:
            found = self.find_class(dotted, name)
            if found and any(isinstance(s, ast.AnnAssign) for s in found[1].body):
                return ("config", found)
        return _ANY_SPEC

    @staticmethod
    def _name(node):
        if isinstance(node, ast.Attribute):
            return node.attr
        return getattr(node, "id", None)


@functools.lru_cache(maxsize=8)
def _sources(root):
    """One :class:`_Sources` per snapshot root, so its files are parsed once per process."""
    return _Sources(root)


def _field_type(sources, composed, key):
    """``(spec, description)`` that the snapshot's dataclasses declare for ``key``, or None.

    Walks ``key`` down the composed config. The class of a node is its ``_target_`` when it has
    one, else the config class annotated on the field that holds it.
    """
    from omegaconf import DictConfig

    from omegaconf.errors import OmegaConfBaseException

    parts = key.split(".")
    node, found = composed, None
    for part in parts[:-1]:
        try:
            child = node.get(part) if isinstance(node, DictConfig) else None
            target = child.get("_target_") if isinstance(child, DictConfig) else None
        except OmegaConfBaseException:
            return None
        if not isinstance(child, DictConfig):
            return None
        child_found = sources.resolve(target) if target else None
        if child_found is None and found is not None:
            annotation = sources.fields(found).get(part)
            if annotation:
                spec = sources.spec(*annotation)
                members = spec[1] if spec[0] == "union" else (spec,)
                classes = [m[1] for m in members if m[0] == "config"]
                child_found = classes[0] if len(classes) == 1 else None
        node, found = child, child_found
    if found is None:
        return None
    annotation = sources.fields(found).get(parts[-1])
    if annotation is None:
        return None
    return sources.spec(*annotation), "%s (%s.%s)" % (ast.unparse(annotation[0]), found[1].name, parts[-1])


def _default_rule(key, default):
    """``(accepted kinds or None for anything, description)`` from a YAML default, for keys without annotation."""
    kind = _kind(default)
    if kind is None:
        return None, "anything"
    if kind in ("int", "float"):
        return {"int", "float", None}, "int or float (default %r)" % (default,)
    if kind == "str":
        accepted = {"str", "int", "float", "bool", None}
        if key.rsplit(".", 1)[-1].endswith("_files"):
            accepted.add("list")
            return accepted, "a path or a list of paths (default %r)" % (default,)
        return accepted, "a string (default %r)" % (default,)
    if kind == "list":
        return {"list", "str", "int", "float", "bool", None}, "a list or one item (default %s)" % (list(default),)
    if kind == "dict":
        return {"dict", None}, "a mapping"
    if kind == "bool":
        return {"bool", "int", None}, "bool (default %r)" % (default,)
    return {kind, None}, "%s (default %r)" % (kind, default)


def _is_group(config_dir, override):
    """Whether a parsed override selects a config group option (``model_engine=megatron``, ``x@pkg=y``)."""
    return bool(override.package) or os.path.isdir(os.path.join(config_dir, override.key_or_group))


def _compose(config_dir, config_name, overrides):
    """Compose ``config_name`` with ``overrides`` (Hydra's global state is left cleared)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


@functools.lru_cache(maxsize=16)
def _base(config_dir, config_name, groups, stamp):
    """The config with only the group selections applied: the defaults the overrides replace.

    Cached per process; ``stamp`` (the main YAML's mtime) keeps a changed tree from being served stale.
    """
    return _compose(config_dir, config_name, groups)


def _select(config, key):
    """``(found, value)`` of ``key`` with interpolations resolved; ``found`` is False when unresolvable."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return True, OmegaConf.select(config, key, throw_on_missing=False)
    except (OmegaConfBaseException, ValueError, KeyError):
        return False, None


def _snapshot_root(config_dir):
    """The folder holding the ``verl`` package of a ``<root>/verl/trainer/config`` dir, or None."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(config_dir))))
    return root if os.path.isdir(os.path.join(root, "verl")) else None


# Keys whose values a saved config never shows: the last name of the key is, or ends in _, one of
# these words (case-insensitive): hf_token, wandb_api_key, password - not tokenizer or max_tokens.
# Only a text value is hidden: a number or a boolean under such a name is a setting, not a secret
# (verl's data.balance_dp_token: false, issue 42).
SECRET_KEY_RE = re.compile(r"(^|_)(token|secret|password|passwd|api_?key|credentials?)$", re.IGNORECASE)
REDACTED = "<redacted>"


def is_secret(key, value):
    """Whether a config value is hidden: non-empty text under a secret-like key name (:data:`SECRET_KEY_RE`).

    :param key: str, the last name of the key (``hf_token``). :param value: its value.
    """
    return bool(key) and bool(SECRET_KEY_RE.search(key)) and isinstance(value, str) and value != ""


def redact(value, key=""):
    """A copy of a plain config (dicts, lists, scalars) with the secret values replaced by REDACTED (:func:`is_secret`).

    :param value: the config as plain Python (``OmegaConf.to_container(cfg, resolve=False)``).
    :param key: str, the key of ``value`` in its parent (for the recursion).
    """
    if is_secret(key, value):
        return REDACTED
    if isinstance(value, dict):
        return {k: redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def config_yaml(config):
    """The composed config as YAML text: interpolations kept as ``${...}``, secret-like values redacted (str)."""
    import yaml
    from omegaconf import OmegaConf

    plain = redact(OmegaConf.to_container(config, resolve=False))
    return yaml.safe_dump(plain, default_flow_style=False, sort_keys=False)


CODE_WORDS = {"trainer.save_freq": (AFTER_EACH_EPOCH,), "trainer.test_freq": (AFTER_EACH_EPOCH,)}
"""Words verl's trainers read in a key whose YAML default is a number (``sft_trainer_ray.py``: ``after_each_epoch``
is one epoch's steps); accepted by the YAML-default rule. main_ppo reads numbers only: the request's own rule
(mvp_request, the catalog's ``save_freq_words``) refuses the word for its workloads."""


def validate_overrides(config_dir, config_name, overrides, composed_out=None):
    """Compose ``overrides`` against ``config_dir/config_name.yaml`` and check the value types.

    :param config_dir: str, absolute path of the snapshot's ``verl/trainer/config``. The
        dataclass sources are read from the same snapshot (``config_dir/../../..``); without
        them only the YAML-default rule applies.
    :param config_name: str, config name without ``.yaml`` (``ppo_trainer``, ``sft_trainer_engine``).
    :param overrides: list of str, Hydra ``key=value`` overrides as the entrypoint passes them.
    :param composed_out: dict or None; when given and the overrides compose, its ``yaml`` is set to
        the composed config as YAML (:func:`config_yaml`: what the job will run with, before verl's
        own defaults in code).
    :returns: list of str errors, empty when the overrides compose and every value fits.
        A compose failure (unknown key, missing group option, syntax) is returned as the one
        error, Hydra's first message line, which names the key. A type error reads
        ``'<key>' expects <type> (<where the type comes from>) but the override gives <kind> <value>``.
    :raises ImportError: when hydra-core or omegaconf is missing.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = list(overrides)
    try:
        composed = _compose(config_dir, config_name, overrides)
        parsed = OverridesParser.create().parse_overrides(overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        return [str(exc).splitlines()[0]]
    if composed_out is not None:
        composed_out["yaml"] = config_yaml(composed)
    groups = tuple(o.input_line for o in parsed
                   if not o.is_delete() and (_is_group(config_dir, o) or o.key_or_group.startswith("hydra.")))
    try:
        stamp = os.stat(os.path.join(config_dir, config_name + ".yaml")).st_mtime
        base = _base(config_dir, config_name, groups, stamp)
    except (HydraException, OmegaConfBaseException, OSError):
        base = None
    root = _snapshot_root(config_dir)
    sources = _sources(root) if root else None
    errors = []
    last = {}  # a key given twice is checked once, with the value Hydra kept (the last one)
    for override in parsed:
        last[override.key_or_group] = override
    for key, override in last.items():
        if override.is_delete() or key.startswith("hydra.") or key == "hydra" or _is_group(config_dir, override):
            continue
        resolved, value = _select(composed, key)
        if not resolved:
            continue
        kind = _kind(value)
        declared = _field_type(sources, composed, key) if sources else None
        default = _select(base, key)[1] if base is not None else None
        if declared is not None:
            spec, description = declared
            if _accepts(spec, kind) or (kind is None and default is None):
                continue
            errors.append("'%s' expects %s but the override gives %s %r" % (key, description, kind, value))
            continue
        accepted, description = _default_rule(key, default)
        if value in CODE_WORDS.get(key, ()):
            continue
        if accepted is not None and kind not in accepted:
            errors.append("'%s' expects %s but the override gives %s %r" % (key, description, kind, value))
    return errors
