# -*- coding: utf-8 -*-
"""The one strict reader of a user's job request: a JobSpec YAML file, and values Ansible already parsed.

A JobSpec is a few hundred bytes of YAML with no use for anchors, aliases or merge keys, yet YAML lets 437 bytes
of them stand for 10**7 strings (everything that copies, templates or serialises the request walks the expanded
tree: minutes, gigabytes), a key given twice in one mapping is silently last-wins, and text that is not UTF-8
reaches the YAML parser as something else. So:

* :func:`load_text` reads a JobSpec file's content: it refuses a text larger than ``LIMITS["max_bytes"]`` (checked
  before decoding) and bytes that are not UTF-8 (naming the byte offset); then, walking PyYAML's parser events
  once before any Python object is built (:func:`_scan`), a YAML syntax error (PyYAML's message on one line), an
  anchor, an alias or a merge key ``<<`` (naming the line: a request writes its values out), a key given twice
  in one mapping (naming the key, the mapping's field path and both lines), a mapping key that is not a scalar,
  nesting past ``max_depth``, and more keys, scalars, or characters than the limits. Then PyYAML's safe loader
  builds the value (safe types only) and it returns the top-level mapping.
* :func:`check_value` applies the same limits to a value Ansible already parsed (an ``-e`` value, an
  inventory variable), stopping as soon as one is passed: shared references count once per use, so a small
  structure of repeated references cannot make the walk unbounded.

The events come from libyaml's parser (``CSafeLoader``) when PyYAML has it, as Ansible's own loader uses it
(its error messages are libyaml's), else from pure-Python PyYAML. Without aliases the document is no larger than
its text, so the walk and the load are linear in ``max_bytes``, and the composer's recursion stays within
``max_depth``. Every refusal raises :class:`RequestReadError` naming the source, the field path, the limit and the
fix, and ends with "nothing was written.".

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
    # text of this size (a flow list of 131,000 scalars) is refused at max_scalars after reading half of it
    # (bench/request_read.py gives the time and memory); ordinary text reads in well under 1 ms.
    "max_bytes": 262144,
    # Nesting of lists and mappings (the top-level mapping is level 1). A JobSpec nests 2-3 levels
    # (trainer_overrides -> a Hydra key -> a list or mapping value; trainer_overrides takes dotted keys);
    # verl's configs nest 7. Refused as soon as reached, so PyYAML's composer recurses at most this deep.
    "max_depth": 32,
    # Mapping keys in total (an -e value's once its shared references are expanded): ~4x verl's whole
    # trainer config; a request sets a few dozen.
    "max_keys": 4096,
    # Scalars in total, mapping keys included (an empty list or mapping counts as one too, being a leaf): room
    # for long lists of files, and half of what max_bytes of text could hold.
    "max_scalars": 65536,
    # Characters of one string (a key or a value): paths, names and Hydra values are short; long text
    # belongs in a file the job reads.
    "max_string": 65536,
    # Characters of all strings together: 1 MiB, four times max_bytes (it bounds an -e value whose shared
    # references repeat one long string, each under max_string).
    "max_chars": 1048576,
}

_TOP = "(top level)"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


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


def _size_problem(what, limit, name, holder="the request"):
    """The problem text of a total passing its limit."""
    return "%s holds more than %d %s (limit %s=%d)" % (holder, limit, what, name, limit)


_SIZE_FIX = ("a request sets a few dozen values: give bulk data (file lists, prompts) in a file the job reads")
_DEPTH_FIX = ("flatten it: trainer_overrides takes dotted Hydra keys (data.train_files: ...) instead of nested "
              "mappings")
_STRING_FIX = "put long text in a file and give its path"
_REFERENCE_FIX = ("write the values out where they are used: a JobSpec takes no anchors (&name), aliases (*name) "
                  "or merge keys (<<)")
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
    """PyYAML's safe loader: ``CSafeLoader`` (libyaml's parser) when ``libyaml`` and PyYAML has it, else ``SafeLoader``."""
    import yaml

    if libyaml and getattr(yaml, "__with_libyaml__", False) and hasattr(yaml, "CSafeLoader"):
        return yaml.CSafeLoader
    return yaml.SafeLoader


class _Walk:
    """What :func:`_scan` knows while it walks the events: the open collections and the totals so far.

    ``open`` holds one frame per open list or mapping, outermost first: ``[is_mapping, label, seen, expect_key]``
    where ``label`` is the field label of the child being read (a mapping's key as written, a list's index),
    ``seen`` the keys of a mapping so far (identity -> (line, column, label)) and ``expect_key`` whether a
    mapping's next node is a key.
    """

    def __init__(self, source, limits):
        self.source, self.limits = source, limits
        self.open = []
        self.total = [0, 0, 0]   # scalars, keys, chars
        self.bounds = tuple(limits[name] for _what, name in _TOTALS)

    def refuse(self, problem, fix, depth=None, extra=None):
        """Raise RequestReadError at the field of the first ``depth`` open collections' labels (all: None)."""
        labels = [frame[1] for frame in self.open[:depth]] + ([extra] if extra else [])
        raise RequestReadError(self.source, _field(labels) or _TOP, problem, fix)

    def add(self, scalars, keys, chars):
        """Add to the totals; refuse the first one past its limit."""
        total = self.total
        total[0] += scalars
        total[1] += keys
        total[2] += chars
        if total[0] > self.bounds[0] or total[1] > self.bounds[1] or total[2] > self.bounds[2]:
            for index, (what, name) in enumerate(_TOTALS):
                if total[index] > self.limits[name]:
                    self.refuse(_size_problem(what, self.limits[name], name), _SIZE_FIX)

    def done(self):
        """One child of the innermost open collection is read: a mapping expects its next key, a list its next item."""
        if self.open:
            frame = self.open[-1]
            if frame[0]:
                frame[3] = True
            else:
                frame[1] += 1


def _scan(loader, source, limits):
    """Walk the parser events of ``loader``'s text once, before anything is built, and refuse what a request must not hold.

    :param loader: a PyYAML loader over the text (its parser, resolver and constructor are used).
    :param source: str, for messages.
    :param limits: dict, the full limits.
    :raises RequestReadError: an anchor, alias or merge key (naming the line), a key given twice in one mapping
        (both lines, or both columns on one line), a mapping key that is not a scalar (or not hashable), a string
        past max_string, nesting past max_depth, or more scalars, keys or characters than the limits.
    :raises yaml.YAMLError: for a syntax error (from the parser) or a key tag with no safe constructor.
    """
    from yaml.events import (AliasEvent, CollectionEndEvent, CollectionStartEvent, MappingStartEvent, NodeEvent,
                             ScalarEvent)
    from yaml.nodes import ScalarNode

    walk, max_depth, max_string = _Walk(source, limits), limits["max_depth"], limits["max_string"]
    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, CollectionEndEvent):
            frame = walk.open.pop()
            if not (frame[2] if frame[0] else frame[1]):
                walk.add(1, 0, 0)   # an empty list or mapping is a leaf
            walk.done()
            continue
        if not isinstance(event, NodeEvent):
            continue   # stream and document start and end
        line = event.start_mark.line + 1
        top = walk.open[-1] if walk.open else None
        is_key = top is not None and top[0] and top[3]
        if isinstance(event, AliasEvent):
            walk.refuse("alias *%s on line %d" % (event.anchor, line), _REFERENCE_FIX,
                        depth=-1 if is_key else None, extra="(key on line %d)" % line if is_key else None)
        if event.anchor is not None:
            walk.refuse("anchor &%s on line %d" % (event.anchor, line), _REFERENCE_FIX,
                        depth=-1 if is_key else None, extra="(key on line %d)" % line if is_key else None)
        if isinstance(event, CollectionStartEvent):
            if is_key:
                walk.refuse("the key on line %d is a %s, not a scalar (mapping keys must be strings, numbers or "
                            "booleans)" % (line, "mapping" if isinstance(event, MappingStartEvent) else "list"),
                            "use a string key", depth=-1)
            if len(walk.open) + 1 > max_depth:
                walk.refuse("nested more than %d lists or mappings deep (limit max_depth=%d)" % (max_depth, max_depth),
                            _DEPTH_FIX)
            mapping = isinstance(event, MappingStartEvent)
            walk.open.append([mapping, None if mapping else 0, {} if mapping else None, mapping])
            continue
        length = len(event.value)
        if length > max_string:
            walk.refuse("the string on line %d has %d characters (limit max_string=%d)" % (line, length, max_string),
                        _STRING_FIX, depth=-1 if is_key else None, extra="(key on line %d)" % line if is_key else None)
        if not is_key:
            walk.add(1, 0, length)
            walk.done()
            continue
        walk.add(1, 1, length)
        tag = event.tag
        if tag is None or tag == "!":
            tag = loader.resolve(ScalarNode, event.value, event.implicit)
        if tag == _MERGE_TAG:
            walk.refuse("merge key '<<' on line %d" % line, _REFERENCE_FIX, depth=-1)
        identity = event.value if tag == _VALUE_TAG else loader.construct_object(
            ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style))
        try:
            hash(identity)
        except TypeError:
            walk.refuse("the key on line %d (%s) is not a scalar" % (line, tag), "use a string key", depth=-1)
        column, seen = event.start_mark.column + 1, top[2]
        if identity in seen:
            first_line, first_column, first_label = seen[identity]
            places = ("line %d and line %d" % (first_line, line) if first_line != line else
                      "line %d, columns %d and %d" % (line, first_column, column))
            same = ("key '%s' is given twice" % event.value if first_label == event.value else
                    "keys '%s' and '%s' are the same key (%r)" % (first_label, event.value, identity))
            walk.refuse("%s in one mapping (%s); YAML would silently keep only the last (each key at most once per "
                        "mapping)" % (same, places), "keep one of them", depth=-1)
        seen[identity] = (line, column, event.value)
        top[1], top[3] = event.value, False


def _read_yaml(text, source, limits, libyaml=True):
    """Check ``text`` within ``limits`` (:func:`_scan`), then load it with PyYAML's safe loader (safe types only).

    :param text: str, the document (already within max_bytes, valid UTF-8).
    :param source: str, for messages.
    :param limits: dict, the full limits.
    :param libyaml: bool, use libyaml's parser when PyYAML has it (False: pure-Python PyYAML).
    :returns: the constructed top-level value, or None for an empty document.
    :raises RequestReadError: for a YAML error or anything :func:`_scan` refuses.
    """
    import yaml

    loader_class = _loader_class(libyaml)
    try:
        loader = loader_class(text)   # pure-Python PyYAML checks the characters here
        try:
            _scan(loader, source, limits)
        finally:
            loader.dispose()
        return yaml.load(text, Loader=loader_class)   # a safe loader, over a text _scan found free of references
    except yaml.YAMLError as exc:
        raise RequestReadError(source, "", "is not valid YAML (%s)" % _yaml_message(exc, text),
                               "correct the file at that place") from None


def load_text(data, source, limits=None):
    """Read a JobSpec file's content strictly and within ``limits``: the request as a dict.

    :param data: bytes (must be UTF-8) or str, the file's content; at most ``max_bytes`` bytes as UTF-8
        (a caller reading a file needs only ``max_bytes + 1`` bytes of it to be refused).
    :param source: str, where the text comes from, for messages (e.g. ``jobspec jobspecs/sft.yaml``).
    :param limits: dict or None, overrides of ``LIMITS`` (name -> int; units: max_bytes bytes, max_depth
        levels, max_keys keys, max_scalars scalars, max_string and max_chars characters).
    :returns: dict, the top-level mapping ({} for an empty document or one holding only null).
    :raises RequestReadError: naming the source, the field path, the limit and the fix: larger than
        max_bytes, not UTF-8 (with the byte offset), not valid YAML, an anchor, alias or merge key (with its line),
        a key given twice in one mapping (the key, the mapping's path, both lines), a non-scalar key, past
        max_depth, max_keys, max_scalars, max_string or max_chars, or a top level that is not a mapping.
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
                    refuse(_size_problem(what, limits[name], name, "the value"), _SIZE_FIX)

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
