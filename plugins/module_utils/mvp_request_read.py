# -*- coding: utf-8 -*-
"""The one strict reader of a user's job request: a JobSpec YAML file, and values Ansible already parsed.

A JobSpec is a few KB of YAML, yet YAML lets 437 bytes of anchors and aliases stand for 10**7 strings:
``yaml.safe_load`` shares the aliased objects, but everything after it that copies, templates or serialises
the request walks the expanded tree (minutes, gigabytes), and ``<<`` merge keys make ``safe_load`` itself copy
the merged keys every time (400 bytes: seconds). A key given twice in one mapping is silently
last-wins, and text that is not UTF-8 reaches the YAML parser as something else. So:

* :func:`load_text` reads a JobSpec file's content: it refuses, before any Python object is built, a text
  larger than ``LIMITS["max_bytes"]`` (checked before decoding), bytes that are not UTF-8 (naming the byte
  offset), a YAML syntax error (PyYAML's message on one line), a key given twice in one mapping (naming the
  key, the mapping's field path and both lines; a key merged in with ``<<`` may be overridden, as YAML
  defines), a mapping key that is not a scalar, a recursive alias, and a document whose *expanded* size
  (every alias counted each time it is used) passes the depth, key, scalar, string or text limits. Then it
  builds the value with PyYAML's safe constructor (safe types only) and returns the top-level mapping.
* :func:`check_value` applies the same limits to a value Ansible already parsed (an ``-e`` value, an
  inventory variable), stopping as soon as one is passed: shared references count once per use, so a small
  structure of repeated references cannot make the walk unbounded.

The document is composed by PyYAML's ``SafeLoader``, or with libyaml's event parser (``CSafeLoader``) when
PyYAML has it, as Ansible's own loader does (about five times faster; its error messages are libyaml's), with
the composer replaced by one that counts while it composes: alias nodes are the very node objects of their
anchors, so an alias adds the size memoized for its node (by ``id()``), O(nodes) in all; a recursive alias is
refused, and so is nesting past ``max_depth`` as soon as it is reached, which also keeps the composer's
recursion short. Every refusal raises :class:`RequestReadError` naming the source, the field path, the limit
and the fix, and ends with "nothing was written.".

PyYAML is imported inside the functions (ansible-test imports module_utils without it); standard library
otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

# Every limit a request must stay within (docs/jobs.md gives the first four). A JobSpec is a few KB (jobspecs/*.yaml:
# 107-516 bytes, at most 13 keys, 3 levels); even verl 0.9.1's whole generated trainer configs
# (verl/trainer/config/_generated_*.yaml: 33-38 KB, 964-1063 keys, 1827-2023 scalars with the keys, 7 levels)
# pass every limit with room. Each limit bounds the work and memory of reading and of everything downstream
# that walks the expanded value (bench/request_read.py measures both).
LIMITS = {
    # Bytes of a JobSpec file (UTF-8), checked before decoding: 256 KiB, ~500x the largest JobSpec. The worst
    # text of this size (a flow list of 131,000 scalars) is refused at max_scalars in 0.2-0.25 s and 18 MiB
    # with libyaml (1.1-1.3 s and 36 MiB with pure-Python PyYAML); ordinary text reads in well under 1 ms.
    "max_bytes": 262144,
    # Nesting of lists and mappings (the top-level mapping is level 1). A JobSpec nests 2-3 levels
    # (trainer_overrides -> a Hydra key -> a list or mapping value; trainer_overrides takes dotted keys);
    # verl's configs nest 7. Refused as soon as reached, so the composer recurses at most this deep.
    "max_depth": 32,
    # Mapping keys in total, once aliases are resolved: ~4x verl's whole trainer config; a request sets a
    # few dozen.
    "max_keys": 4096,
    # Scalars in total, mapping keys included, once aliases are resolved (an empty list or mapping counts as
    # one too, being a leaf): room for long lists of files, far below the 10**7 strings of an alias bomb.
    "max_scalars": 65536,
    # Characters of one string (a key or a value): paths, names and Hydra values are short; long text
    # belongs in a file the job reads.
    "max_string": 65536,
    # Characters of all strings together, once aliases are resolved: 1 MiB, four times max_bytes (aliases
    # repeating one long string stay bounded though each string is under max_string).
    "max_chars": 1048576,
}

_TOP = "(top level)"
_MERGE = object()   # the identity of a ``<<`` merge key in one mapping (two of them are a duplicate key)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"
_LOADERS = {}       # libyaml used (bool) -> the loader class, built on first use (PyYAML imported lazily)


class RequestReadError(ValueError):
    """A request the reader refuses.

    The message names the source (``jobspec <path>``, ``-e trainer_overrides``), the field path when there
    is one (``trainer_overrides.data.train_files``), the problem with the limit passed, and the fix, and
    ends with "nothing was written.". The parts are kept as attributes ``source``, ``field``, ``problem``,
    ``fix`` (all str; ``field`` is "" for the text as a whole).
    """

    def __init__(self, source, field, problem, fix):
        self.source, self.field, self.problem, self.fix = source, field, problem, fix
        where = "%s, field %s" % (source, field) if field else source
        super().__init__("%s: %s. Fix: %s; nothing was written." % (where, problem, fix))


def _limits(limits):
    """LIMITS with the given overrides (dict name -> int, or None); ValueError for an unknown name."""
    merged = dict(LIMITS)
    for name, value in (limits or {}).items():
        if name not in LIMITS:
            raise ValueError("unknown request limit %r (known: %s)" % (name, ", ".join(sorted(LIMITS))))
        merged[name] = int(value)
    return merged


def _field(labels):
    """The field path of a list of labels (str keys joined with '.', int list indexes as ``[i]``; "" at the top)."""
    text = ""
    for label in labels:
        if isinstance(label, int):
            text += "[%d]" % label
        else:
            text += "." + label if text else label
    return text


def _size_problem(what, limit, name, count_aliases):
    """The problem text of a total passing its limit."""
    return "the request holds more than %d %s%s (limit %s=%d)" % (
        limit, what, " once its aliases are resolved (an alias counts its anchor's whole content every time "
        "it is used)" if count_aliases else "", name, limit)


_SIZE_FIX = ("a request sets a few dozen values: write them out instead of repeating anchors and aliases, and "
             "give bulk data (file lists, prompts) in a file the job reads")
_DEPTH_FIX = ("flatten it: trainer_overrides takes dotted Hydra keys (data.train_files: ...) instead of nested "
              "mappings")
_STRING_FIX = "put long text in a file and give its path"
_TOTALS = (("scalars", "max_scalars"), ("mapping keys", "max_keys"), ("characters of text", "max_chars"))


def _yaml_message(exc, text):
    """PyYAML's message of ``exc`` (a YAMLError from reading ``text``) on one line, lines and columns from 1."""
    position = getattr(exc, "position", None)
    if isinstance(position, int) and getattr(exc, "reason", None):   # a ReaderError: a character YAML refuses
        return "unacceptable character #x%04x at character offset %d (line %d): %s" % (
            exc.character if isinstance(exc.character, int) else ord(exc.character or "\0"), position,
            text.count("\n", 0, position) + 1, exc.reason)
    parts = []
    for words, mark in ((getattr(exc, "context", None), getattr(exc, "context_mark", None)),
                        (getattr(exc, "problem", None), getattr(exc, "problem_mark", None))):
        if words or mark is not None:
            place = " at line %d, column %d" % (mark.line + 1, mark.column + 1) if mark is not None else ""
            parts.append("%s%s" % (words or "here", place))
    if not parts:
        return " ".join(str(exc).split())
    note = getattr(exc, "note", None)
    return "; ".join(parts) + ("; %s" % " ".join(note.split()) if note else "")


def _loader_class(libyaml):
    """The strict loader class: a SafeLoader (``CSafeLoader`` with libyaml) whose composer counts as it goes.

    :param libyaml: bool, use libyaml's event parser when PyYAML has it.
    :returns: type, called as ``cls(text, source, limits)``.
    """
    import yaml
    from yaml.composer import ComposerError
    from yaml.events import (AliasEvent, MappingEndEvent, ScalarEvent, SequenceEndEvent, SequenceStartEvent,
                             StreamEndEvent)
    from yaml.nodes import MappingNode, ScalarNode, SequenceNode

    use_c = bool(libyaml and getattr(yaml, "__with_libyaml__", False) and hasattr(yaml, "CSafeLoader"))
    if use_c in _LOADERS:
        return _LOADERS[use_c]
    base = yaml.CSafeLoader if use_c else yaml.SafeLoader

    class StrictLoader(base):  # pylint: disable=too-many-ancestors
        """PyYAML's safe loader with PyYAML's composer, counting the expanded document as it composes it."""

        def __init__(self, text, source, limits):
            base.__init__(self, text)
            self.mvp_source, self.mvp_limits = source, limits
            self.mvp_anchors = {}         # anchor name -> node (the composer's own table)
            self.mvp_sizes = {}           # id(anchored node) -> (scalars, keys, chars, height) once composed
            self.mvp_total = [0, 0, 0]    # scalars, keys, chars of the expanded document so far
            self.mvp_deepest = 0          # deepest nesting level reached (within the anchored node being sized)
            self.mvp_open = []            # the collections being composed, outermost first
            self.mvp_path = []            # field path labels of the node being composed (str keys, int indexes)
            self.mvp_aliases = 0          # aliases used so far
            self.mvp_bounds = tuple(limits[name] for _what, name in _TOTALS)

        def mvp_refuse(self, problem, fix):
            """Raise RequestReadError at the node being composed."""
            raise RequestReadError(self.mvp_source, _field(self.mvp_path) or _TOP, problem, fix)

        def mvp_add(self, scalars, keys, chars):
            """Add to the expanded totals (scalars, keys, characters); refuse the first one past its limit."""
            total, bounds = self.mvp_total, self.mvp_bounds
            total[0] += scalars
            total[1] += keys
            total[2] += chars
            if total[0] > bounds[0] or total[1] > bounds[1] or total[2] > bounds[2]:
                self.mvp_over()

        def mvp_over(self):
            """Refuse the first expanded total past its limit."""
            for index, (what, name) in enumerate(_TOTALS):
                if self.mvp_total[index] > self.mvp_limits[name]:
                    self.mvp_refuse(_size_problem(what, self.mvp_limits[name], name, self.mvp_aliases), _SIZE_FIX)

        def mvp_reach(self, level):
            """Note that the document nests ``level`` collections deep here; refuse past max_depth."""
            limit = self.mvp_limits["max_depth"]
            if level > limit:
                self.mvp_refuse("nested more than %d lists or mappings deep%s (limit max_depth=%d)"
                                % (limit, " once its aliases are resolved" if self.mvp_aliases else "", limit),
                                _DEPTH_FIX)
            self.mvp_deepest = max(self.mvp_deepest, level)

        def get_single_node(self):
            """PyYAML's ``Composer.get_single_node``: the one document's root node, or None for no document."""
            self.get_event()
            document = None
            if not self.check_event(StreamEndEvent):
                document = self.compose_document()
            if not self.check_event(StreamEndEvent):
                event = self.get_event()
                raise ComposerError("expected a single document in the stream", document.start_mark,
                                    "but found another document", event.start_mark)
            self.get_event()
            return document

        def compose_document(self):
            """PyYAML's ``Composer.compose_document``."""
            self.get_event()
            node = self.compose_node(None, None)
            self.get_event()
            self.mvp_anchors = {}
            return node

        def compose_node(self, parent, index):
            """PyYAML's ``Composer.compose_node``, adding an alias's memoized size where it is used."""
            event = self.peek_event()
            if isinstance(event, AliasEvent):
                self.get_event()
                if event.anchor not in self.mvp_anchors:
                    raise ComposerError(None, None, "found undefined alias %r" % event.anchor, event.start_mark)
                node = self.mvp_anchors[event.anchor]
                if any(node is open_node for open_node in self.mvp_open):
                    self.mvp_refuse("alias *%s on line %d refers to the collection that contains it (&%s, line %d), "
                                    "so it expands forever (aliases must not be recursive)"
                                    % (event.anchor, event.start_mark.line + 1, event.anchor,
                                       node.start_mark.line + 1),
                                    "remove the alias, or point it at an anchor outside this collection")
                self.mvp_aliases += 1
                scalars, keys, chars, height = self.mvp_sizes[id(node)]
                self.mvp_reach(len(self.mvp_open) + height)
                self.mvp_add(scalars, keys, chars)
                return node
            anchor = event.anchor
            if anchor is not None:
                if anchor in self.mvp_anchors:
                    raise ComposerError("found duplicate anchor %r; first occurrence" % anchor,
                                        self.mvp_anchors[anchor].start_mark, "second occurrence", event.start_mark)
                before, deepest = list(self.mvp_total), self.mvp_deepest
                self.mvp_deepest = len(self.mvp_open)
            self.descend_resolver(parent, index)
            if isinstance(event, ScalarEvent):
                node = self.compose_scalar_node(anchor)
            elif isinstance(event, SequenceStartEvent):
                node = self.compose_sequence_node(anchor)
            else:
                node = self.compose_mapping_node(anchor)
            self.ascend_resolver()
            if anchor is not None:
                self.mvp_sizes[id(node)] = tuple(now - then for now, then in zip(self.mvp_total, before)) + (
                    self.mvp_deepest - len(self.mvp_open),)
                self.mvp_deepest = max(deepest, self.mvp_deepest)
            return node

        def compose_scalar_node(self, anchor):
            """PyYAML's ``Composer.compose_scalar_node``, counting the scalar and its characters."""
            event = self.get_event()
            tag = event.tag
            if tag is None or tag == "!":
                tag = self.resolve(ScalarNode, event.value, event.implicit)
            node = ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
            if anchor is not None:
                self.mvp_anchors[anchor] = node
            length = len(event.value)
            if length > self.mvp_limits["max_string"]:
                self.mvp_refuse("the string on line %d has %d characters (limit max_string=%d)"
                                % (event.start_mark.line + 1, length, self.mvp_limits["max_string"]), _STRING_FIX)
            total, bounds = self.mvp_total, self.mvp_bounds   # mvp_add(1, 0, length), inline: once per scalar
            total[0] += 1
            total[2] += length
            if total[0] > bounds[0] or total[2] > bounds[2]:
                self.mvp_over()
            return node

        def mvp_enter(self, node, anchor):
            """Open a collection node: register its anchor, refuse it past max_depth."""
            if anchor is not None:
                self.mvp_anchors[anchor] = node
            self.mvp_reach(len(self.mvp_open) + 1)
            self.mvp_open.append(node)

        def mvp_leave(self, node):
            """Close the collection node (an empty one counts as a scalar, a leaf)."""
            if not node.value:
                self.mvp_add(1, 0, 0)
            self.mvp_open.pop()
            node.end_mark = self.get_event().end_mark

        def compose_sequence_node(self, anchor):
            """PyYAML's ``Composer.compose_sequence_node``, within max_depth."""
            start_event = self.get_event()
            tag = start_event.tag
            if tag is None or tag == "!":
                tag = self.resolve(SequenceNode, None, start_event.implicit)
            node = SequenceNode(tag, [], start_event.start_mark, None, flow_style=start_event.flow_style)
            self.mvp_enter(node, anchor)
            path, items, index = self.mvp_path, node.value, 0
            path.append(index)
            while not self.check_event(SequenceEndEvent):
                path[-1] = index
                items.append(self.compose_node(node, index))
                index += 1
            path.pop()
            self.mvp_leave(node)
            return node

        def mvp_key(self, key_node, line):
            """The label and identity of a mapping key (a ``<<`` merge key is ``_MERGE``); refuse a non-scalar."""
            if not isinstance(key_node, ScalarNode):
                kind = "list" if isinstance(key_node, SequenceNode) else "mapping"
                self.mvp_refuse("the key on line %d is a %s, not a scalar (mapping keys must be strings, numbers or "
                                "booleans)" % (line, kind), "use a string key")
            if key_node.tag == _MERGE_TAG:
                return "<<", _MERGE
            if key_node.tag == _VALUE_TAG:
                return key_node.value, key_node.value
            value = self.construct_object(key_node)
            try:
                hash(value)
            except TypeError:
                self.mvp_refuse("the key on line %d (%s) is not a scalar" % (line, key_node.tag), "use a string key")
            return key_node.value, value

        def compose_mapping_node(self, anchor):
            """PyYAML's ``Composer.compose_mapping_node``, within max_depth, refusing a key given twice."""
            start_event = self.get_event()
            tag = start_event.tag
            if tag is None or tag == "!":
                tag = self.resolve(MappingNode, None, start_event.implicit)
            node = MappingNode(tag, [], start_event.start_mark, None, flow_style=start_event.flow_style)
            self.mvp_enter(node, anchor)
            seen = {}   # key identity (its constructed value, or _MERGE) -> (line, column, label)
            while not self.check_event(MappingEndEvent):
                mark = self.peek_event().start_mark
                line, column = mark.line + 1, mark.column + 1
                self.mvp_path.append("(key on line %d)" % line)
                item_key = self.compose_node(node, None)
                self.mvp_path.pop()
                self.mvp_add(0, 1, 0)
                label, identity = self.mvp_key(item_key, line)
                if identity in seen:
                    first_line, first_column, first_label = seen[identity]
                    places = ("line %d and line %d" % (first_line, line) if first_line != line else
                              "line %d, columns %d and %d" % (line, first_column, column))
                    if identity is _MERGE:
                        self.mvp_refuse("the merge key '<<' is given twice in one mapping (%s)" % places,
                                        "merge several mappings with one key: <<: [*a, *b]")
                    same = ("key '%s' is given twice" % label if first_label == label else
                            "keys '%s' and '%s' are the same key (%r)" % (first_label, label, identity))
                    self.mvp_refuse("%s in one mapping (%s); YAML would silently keep only the last (each key at "
                                    "most once per mapping)" % (same, places), "keep one of them")
                seen[identity] = (line, column, label)
                self.mvp_path.append(label)
                item_value = self.compose_node(node, item_key)
                self.mvp_path.pop()
                node.value.append((item_key, item_value))
            self.mvp_leave(node)
            return node

    _LOADERS[use_c] = StrictLoader
    return StrictLoader


def _read_yaml(text, source, limits, libyaml=True):
    """Compose ``text`` within ``limits``, then construct it (safe types only).

    :param text: str, the document (already within max_bytes, valid UTF-8).
    :param source: str, for messages.
    :param limits: dict, the full limits.
    :param libyaml: bool, use libyaml's event parser when PyYAML has it (False: pure-Python PyYAML).
    :returns: the constructed top-level value, or None for an empty document.
    :raises RequestReadError: for a YAML error or a limit passed.
    """
    import yaml

    loader = None
    try:
        loader = _loader_class(libyaml)(text, source, limits)   # pure-Python PyYAML checks the characters here
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise RequestReadError(source, "", "is not valid YAML (%s)" % _yaml_message(exc, text),
                               "correct the file at that place") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_text(data, source, limits=None):
    """Read a JobSpec file's content strictly and within ``limits``: the request as a dict.

    :param data: bytes (must be UTF-8) or str, the file's content; at most ``max_bytes`` bytes as UTF-8
        (a caller reading a file needs only ``max_bytes + 1`` bytes of it to be refused).
    :param source: str, where the text comes from, for messages (e.g. ``jobspec jobspecs/sft.yaml``).
    :param limits: dict or None, overrides of ``LIMITS`` (name -> int; units: max_bytes bytes, max_depth
        levels, max_keys keys, max_scalars scalars, max_string and max_chars characters).
    :returns: dict, the top-level mapping ({} for an empty document or one holding only null).
    :raises RequestReadError: naming the source, the field path, the limit and the fix: larger than
        max_bytes, not UTF-8 (with the byte offset), not valid YAML, a key given twice in one mapping (the key,
        the mapping's path, both lines), a non-scalar key, a recursive alias, past max_depth, max_keys,
        max_scalars, max_string or max_chars once aliases are resolved, or a top level that is not a mapping.
    :raises TypeError: when ``data`` is neither bytes nor str.
    :raises ValueError: for an unknown limit name.
    """
    limits = _limits(limits)
    limit = limits["max_bytes"]
    size_fix = ("a JobSpec holds a job's settings (a few KB): give datasets, prompts and code as paths instead "
                "of inline")
    if isinstance(data, (bytes, bytearray)):
        if len(data) > limit:
            raise RequestReadError(source, "", "is larger than %d bytes (limit max_bytes=%d)" % (limit, limit),
                                   size_fix)
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestReadError(
                source, "", "is not UTF-8 text: byte offset %d (line %d) is 0x%02x: %s (the text must be UTF-8)"
                % (exc.start, data.count(b"\n", 0, exc.start) + 1, data[exc.start], exc.reason),
                "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
    elif isinstance(data, str):
        if len(data) > limit:   # a character is at least one byte: over the limit without encoding it
            raise RequestReadError(source, "", "is larger than %d bytes (limit max_bytes=%d)" % (limit, limit),
                                   size_fix)
        try:
            size = len(data.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise RequestReadError(
                source, "", "is not UTF-8 text: character offset %d (line %d) is U+%04X, which UTF-8 cannot encode "
                "(the text must be UTF-8)" % (exc.start, data.count("\n", 0, exc.start) + 1, ord(data[exc.start])),
                "save the file as UTF-8") from None
        if size > limit:
            raise RequestReadError(source, "", "is %d bytes as UTF-8 (limit max_bytes=%d)" % (size, limit), size_fix)
        text = data
    else:
        raise TypeError("load_text takes bytes or str, not %s" % type(data).__name__)
    value = _read_yaml(text, source, limits)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RequestReadError(source, "", "holds a %s at the top level, not a mapping of job spec keys"
                               % type(value).__name__, "write the request as 'key: value' lines "
                               "(workload: sft, trainer_overrides: {...})")
    return value


def check_value(value, source, limits=None):
    """Refuse a value Ansible already parsed (an ``-e`` value, an inventory variable) that passes ``limits``.

    Walks the value as it would be expanded (a list or mapping referenced twice is walked twice, as anything
    copying or serialising it would) and stops at the first limit passed, so shared references cannot make
    the walk unbounded: it visits at most about ``max_scalars`` scalars (each at most ``max_depth`` deep).
    Scalars of any type are allowed; mapping keys must be str, int, float or bool.

    :param value: any value (dicts and other Mappings; lists, tuples, sets; anything else is a scalar).
    :param source: str, where the value was given, for messages (e.g. ``-e trainer_overrides``); field paths
        in messages are relative to ``value``.
    :param limits: dict or None, overrides of ``LIMITS`` (max_depth levels, max_keys keys, max_scalars
        scalars, max_string and max_chars characters; max_bytes does not apply).
    :returns: None.
    :raises RequestReadError: naming the source, the field path, the limit and the fix: nested past
        max_depth or inside itself, past max_keys, max_scalars or max_chars in total, a string (or bytes)
        longer than max_string, or a mapping key that is not str, int, float or bool.
    :raises ValueError: for an unknown limit name.
    """
    limits = _limits(limits)
    total = [0, 0, 0]   # scalars, keys, chars
    bounds = tuple(limits[name] for _what, name in _TOTALS)
    path, open_ = [], []

    def refuse(problem, fix):
        raise RequestReadError(source, _field(path) or _TOP, problem, fix)

    def add(scalars, keys, chars):
        total[0] += scalars
        total[1] += keys
        total[2] += chars
        if total[0] > bounds[0] or total[1] > bounds[1] or total[2] > bounds[2]:
            for index, (what, name) in enumerate(_TOTALS):
                if total[index] > limits[name]:
                    refuse(_size_problem(what, limits[name], name, False).replace(
                        "the request holds", "the value holds"), _SIZE_FIX)

    def text(item):
        length = len(item) if isinstance(item, (str, bytes, bytearray)) else 0
        if length > limits["max_string"]:
            refuse("a string of %d characters (limit max_string=%d)" % (length, limits["max_string"]), _STRING_FIX)
        return length

    def visit(item):
        if isinstance(item, (str, bytes, bytearray)) or not isinstance(item, (Mapping, Sequence, Set)):
            add(1, 0, text(item))
            return
        if any(item is container for container in open_):
            refuse("the value contains itself, so it expands forever (a value must not be recursive)",
                   "give a value without circular references")
        if len(open_) + 1 > limits["max_depth"]:
            refuse("nested more than %d lists or mappings deep (limit max_depth=%d)"
                   % (limits["max_depth"], limits["max_depth"]), _DEPTH_FIX)
        open_.append(item)
        if isinstance(item, Mapping):
            for key, child in item.items():
                if not isinstance(key, (str, int, float)):   # bool is an int
                    refuse("a mapping key is a %s (%s), not a str, int, float or bool"
                           % (type(key).__name__, repr(key)[:80]), "use a string key")
                add(1, 1, text(key))
                path.append(str(key))
                visit(child)
                path.pop()
        else:
            for index, child in enumerate(item):
                path.append(index)
                visit(child)
                path.pop()
        if not item:
            add(1, 0, 0)
        open_.pop()

    visit(value)
