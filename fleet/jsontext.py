"""JSON text for people and pipes: `json.dumps(value, indent=2, default=str)`, character for
character, at the speed of the C encoder.

`indent=` makes the standard library fall back to its pure-Python encoder (a generator per
container, a call per value): 5 s and 1.5 GB of chunks for the 200 MB diff document of 20,000
hosts, whose bulk is lists of host names. Here every container whose items are all scalars (a
list of host names, a dict of settings) is written by the C encoder in one call, with the
separator carrying the line break and indent, and only the containers above them are walked in
Python.
"""

from __future__ import annotations

import json
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
