"""JSON text for people and pipes: `json.dumps(value, indent=2, default=str)`, character for
character, at the speed of the C encoder.

`indent=` makes the standard library fall back to its pure-Python encoder (a generator per
container, a call per value): 5 s and 1.5 GB of chunks for the 200 MB diff document of 20,000
hosts, whose bulk is lists of host names. Here every container whose items are all scalars (a
list of host names, a dict of settings) is written by the C encoder in one call, with the
separator carrying the line break and indent, and only the containers above them are walked in
Python.

Read back, a JSON text that differs from one read before of the same length only inside a few of
its scalars (a GPU payload whose UUIDs and serials are its host's own, a system payload whose
hostname is) is decoded as that earlier value with those scalars put in (EditedDecoder): its
unchanged parts are the earlier value's objects, so 20,000 such payloads hold one copy of what
they share, not 20,000 (about half a run's payload memory), at the C decoder's speed.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from json.encoder import encode_basestring_ascii
from typing import Any

INDENT = "  "
SCALARS = frozenset({str, int, float, bool, type(None)})


def dumps_indented(value: Any, default: Callable[[Any], Any] = str) -> str:
    """What `json.dumps(value, indent=2, default=default)` returns."""
    out = _Out()
    _write(value, 0, out, default)
    return "".join(out)


def write_indented(
    value: Any, write: Callable[[str], Any], default: Callable[[Any], Any] = str
) -> None:
    """dumps_indented(value) and a newline, handed to `write` a piece at a time (about a
    megabyte): the 200 MB text of a 20,000-host diff is never held whole."""
    out = _Pieces(write)
    _write(value, 0, out, default)
    out.append("\n")
    out.flush()


class Members:
    """An object written a member at a time: `members()` makes its (key, value) pairs only when
    it is written, after what comes before it (a run's hosts, one host document at a time)."""

    def __init__(self, members: Callable[[], Iterator[tuple[str, Any]]]) -> None:
        self.members = members


class _Out(list):  # type: ignore[type-arg]
    """The text written so far, in pieces, and the long lists of strings written in it."""

    def __init__(self) -> None:
        super().__init__()
        # a long list of strings → its text, by its items and level: a diff names the same few
        # host sets over and over (each fact's majority, each finding's hosts), each encoded once
        self.lists: dict[tuple[int, tuple[str, ...]], str] = {}
        # … and by its level, length and end items: the lists written, to compare a list with
        # (C speed, by identity, the names being the same objects) before its items' types are
        # read and it is copied and hashed as a key (1,323 lists of 20,000 hosts in a diff)
        self.seen: dict[tuple[int, int, str, str], list[tuple[Any, str]]] = {}


class _Pieces(_Out):
    """Text that is handed to `write` whenever it holds about PIECE characters."""

    def __init__(self, write: Callable[[str], Any]) -> None:
        super().__init__()
        self.write = write
        self.size = 0

    def append(self, text: str) -> None:
        super().append(text)
        self.size += len(text)
        if self.size >= PIECE:
            self.flush()

    def flush(self) -> None:
        if self:
            self.write("".join(self))
            self.clear()
            self.size = 0


PIECE = 1 << 20


def _write(value: Any, level: int, out: _Out, default: Callable[[Any], Any]) -> None:
    if isinstance(value, Members):
        _write_members(value.members(), level, out, default)
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
        elif set(map(type, value.values())) <= SCALARS:
            out.append(_flat(value, level, "{", "}", default))
        else:
            _write_members(iter(value.items()), level, out, default)
    elif isinstance(value, (list, tuple)):
        _write_list(value, level, out, default)
    elif isinstance(value, (str, int, float)) or value is None:
        out.append(json.dumps(value))
    else:
        _write(default(value), level, out, default)


def _write_list(
    value: list[Any] | tuple[Any, ...], level: int, out: _Out, default: Callable[[Any], Any]
) -> None:
    if not value:
        out.append("[]")
    elif (text := _written(value, level, out)) is not None:
        out.append(text)
    elif (kinds := set(map(type, value))) <= SCALARS:
        out.append(_flat_list(value, kinds, level, out, default))
    else:
        inner = "\n" + INDENT * (level + 1)
        separator = "[" + inner
        for item in value:
            out.append(separator)
            separator = "," + inner
            _write(item, level + 1, out, default)
        out.append("\n" + INDENT * level + "]")


def _write_members(
    members: Iterator[tuple[Any, Any]], level: int, out: _Out, default: Callable[[Any], Any]
) -> None:
    """A Members object, written as json.dumps(indent=2) writes a dict of its members."""
    inner = "\n" + INDENT * (level + 1)
    separator = "{" + inner
    for key, item in members:
        out.append(f"{separator}{_key(key)}: ")
        separator = "," + inner
        _write(item, level + 1, out, default)
    out.append("{}" if separator[0] == "{" else "\n" + INDENT * level + "}")


SHARED_LIST = 32  # items in a list of strings worth looking up as written before


def _flat_list(
    value: Any, kinds: set[type], level: int, out: _Out, default: Callable[[Any], Any]
) -> str:
    """A list of scalars' text; a long list of strings written before at this level, the same
    text again without encoding it again (strings only: 1, 1.0 and True are equal keys)."""
    if len(value) < SHARED_LIST or kinds != {str}:
        return _flat(value, level, "[", "]", default)
    key = (level, tuple(value))
    text = out.lists.get(key)
    if text is None:
        text = out.lists[key] = _flat(value, level, "[", "]", default)
    out.seen.setdefault((level, len(value), value[0], value[-1]), []).append((value, text))
    return text


def _written(value: list[Any] | tuple[Any, ...], level: int, out: _Out) -> str | None:
    """The text of a long list of strings equal to one written before at this level (a str
    equals only strings), or None."""
    if len(value) < SHARED_LIST or type(value[0]) is not str or type(value[-1]) is not str:
        return None
    for earlier, text in out.seen.get((level, len(value), value[0], value[-1]), ()):
        if earlier is value or _same_items(earlier, value):
            return text
    return None


def _same_items(one: list[Any] | tuple[Any, ...], other: list[Any] | tuple[Any, ...]) -> bool:
    return one == other if type(one) is type(other) else tuple(one) == tuple(other)


def _flat(value: Any, level: int, opening: str, closing: str, default: Callable[[Any], Any]) -> str:
    inner = "\n" + INDENT * (level + 1)
    text = json.dumps(value, separators=("," + inner, ": "), default=default)
    return f"{opening}{inner}{text[1:-1]}\n{INDENT * level}{closing}"


def _key(key: Any) -> str:
    if isinstance(key, str):
        return encode_basestring_ascii(key)
    if isinstance(key, (int, float)) or key is None:  # as json does: 1 → "1", True → "true"
        return encode_basestring_ascii(json.dumps(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


# ---------------------------------------------------------------------------- reading: edits

# JSON read as the C decoder reads it (fleet/rundoc.py reads runs with these too)
DECODER = json.JSONDecoder()
SCAN: Callable[[str, int], tuple[Any, int]] = DECODER.scan_once  # type: ignore[attr-defined]
SPACE = re.compile(r"[ \t\n\r]*")
KEY = re.compile(r'"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*')  # a key without escapes, its ':'
MAX_EDITS = 64  # scalars put in: past that, a plain decode is as quick
MAX_MISSES = 2  # a text that never matched its length's reference this often: decoded plainly
Path = tuple[Any, ...]  # keys and list indices down to a scalar
Span = tuple[int, int, Path]  # where a scalar's text starts and ends, and its path
# A value decoded as an edit: itself, the value it is an edit of, and the paths of the scalars
# put in. Kept by the decoder (EditedDecoder.edits), by the value's id: the value is held too, so
# the id stays its own.
Edit = tuple[Any, Any, tuple[Path, ...]]


class _Reference:
    """The first text of a kind and length, its value, and (once a second text asks) where each
    of its scalars is written."""

    __slots__ = ("bits", "hits", "misses", "spans", "starts", "text", "value")

    def __init__(self, text: str, value: Any) -> None:
        self.text, self.value = text, value
        self.bits = 0
        self.starts: list[int] | None = None  # None: not indexed yet; []: cannot be used
        self.spans: list[Span] = []
        self.hits = self.misses = 0

    def index(self) -> None:
        self.starts = []
        try:
            _scalar_spans(self.text, 0, (), self.spans)
        except (ValueError, IndexError, RecursionError, StopIteration):
            self.spans = []  # a key with escapes, a repeated key: decoded plainly
            return
        self.starts = [start for start, _, _ in self.spans]
        self.bits = int.from_bytes(self.text.encode(), "big")


class EditedDecoder:
    """JSON values decoded from their text, each text of a kind (a probe's payloads) decoded as
    an edit of the first of its kind and length when it differs from it only inside scalars
    (module doc). What it returns shares objects between values: for readers that change none."""

    def __init__(self) -> None:
        self.references: dict[tuple[str, int], _Reference] = {}
        self.room = MAX_REFERENCE_TEXT  # characters of reference text still to keep
        # each value decoded as an edit, by its id: what it is an edit of and where (the fact
        # cache classes it as that value where those paths are fields it leaves out anyway)
        self.edits: dict[int, Edit] = {}
        self._paths: dict[tuple[Path, ...], tuple[Path, ...]] = {}  # each set of paths, once

    def decode(self, text: str, kind: str) -> Any:
        """json.loads(text), a ValueError as it raises one: equal in value, type and key order."""
        if text[:1] not in "{[" or not text.isascii():  # ASCII: a character is a byte
            return json.loads(text)
        key = (kind, len(text))
        reference = self.references.get(key)
        if reference is None:
            value = json.loads(text)
            if len(text) <= self.room:
                self.room -= len(text)
                self.references[key] = _Reference(text, value)
            return value
        if reference.starts is None:
            reference.index()
        found = _edited(reference, text) if reference.starts else None
        if found is not None:
            reference.hits += 1
            value, paths = found
            if paths:  # none: the reference's own value
                paths = self._paths.setdefault(paths, paths)
                self.edits[id(value)] = (value, reference.value, paths)
            return value
        reference.misses += 1
        if reference.misses >= MAX_MISSES and not reference.hits:  # texts of this length vary
            reference.starts, reference.spans, reference.bits, reference.text = [], [], 0, ""
        return json.loads(text)


# The references' texts kept at most (their integers as many bytes again): a run's payloads of
# distinct lengths each leave one (about 80 kinds and lengths, half a megabyte, in the bench's
# 20,000 hosts)
MAX_REFERENCE_TEXT = 16 << 20


def _edited(reference: _Reference, text: str) -> tuple[Any, tuple[Path, ...]] | None:
    """`text`'s value as the reference's with the scalars that differ put in, and their paths;
    None when a difference is not inside one of its scalars (the text is then decoded plainly).
    The texts are of one length and ASCII: XOR-ed as integers, each byte that differs is
    non-zero, marked 1 by a translation, so that each next difference is one bytes.find (C
    speed)."""
    size = len(text)
    differ = int.from_bytes(text.encode(), "big") ^ reference.bits
    marks = differ.to_bytes(size, "big").translate(NONZERO_AS_ONE)
    assert reference.starts is not None
    starts, spans = reference.starts, reference.spans
    edits: list[tuple[Path, Any]] = []
    at = marks.find(1)
    while at >= 0:
        found = bisect.bisect_right(starts, at) - 1
        if found < 0 or len(edits) >= MAX_EDITS:
            return None
        start, end, path = spans[found]
        if at >= end:
            return None  # a key, a bracket or a comma differs: another layout
        try:
            scalar, scalar_end = SCAN(text, start)
        except (StopIteration, ValueError):
            return None
        if scalar_end != end:
            return None  # another token there, not a scalar written in the same characters
        edits.append((path, scalar))
        at = marks.find(1, end)
    if not edits:
        return reference.value, ()
    return _put_in(reference.value, edits), tuple(path for path, _ in edits)


NONZERO_AS_ONE = bytes([0] + [1] * 255)


def _put_in(value: Any, edits: list[tuple[Path, Any]]) -> Any:
    """`value` with each edit's scalar at its path: the containers on the way copied once, the
    rest shared."""
    root = value.copy()
    copies: dict[Path, Any] = {(): root}
    for path, scalar in edits:
        node = root
        for depth in range(1, len(path)):
            below = copies.get(path[:depth])
            if below is None:
                below = copies[path[:depth]] = node[path[depth - 1]].copy()
                node[path[depth - 1]] = below
            node = below
        node[path[-1]] = scalar
    return root


def _scalar_spans(text: str, at: int, path: Path, spans: list[Span]) -> int:
    """Where each scalar of the JSON value at text[at] is written, with its path, into `spans`;
    where the value ends. A key with escapes, or one an object repeats (json keeps the last: an
    edit of the first would be wrong), is a ValueError."""
    at = SPACE.match(text, at).end()  # type: ignore[union-attr]
    opening = text[at]
    if opening == "{":
        return _object_spans(text, at, path, spans)
    if opening == "[":
        at = SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
        index = 0
        while text[at] != "]":
            at = SPACE.match(text, _scalar_spans(text, at, (*path, index), spans)).end()  # type: ignore[union-attr]
            index += 1
            if text[at] == ",":
                at += 1
        return at + 1
    _, end = SCAN(text, at)
    spans.append((at, end, path))
    return int(end)


def _object_spans(text: str, at: int, path: Path, spans: list[Span]) -> int:
    keys: set[str] = set()
    at = SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
    while text[at] != "}":
        key = KEY.match(text, at)
        if key is None or key.group(1) in keys:
            raise ValueError("a key with escapes, or repeated")
        keys.add(key.group(1))
        at = _scalar_spans(text, key.end(), (*path, key.group(1)), spans)
        at = SPACE.match(text, at).end()  # type: ignore[union-attr]
        if text[at] == ",":
            at = SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
    return at + 1
