"""What a rule's JMESPath can see of a host's document, read off its syntax tree. Pure.

`fleet check` judges every rule on every host; most hosts of a big fleet answered alike but for
their identity (hostname, GPU UUIDs and serials) and timings, which no rule of the default pack
reads. fleet.checks.sharing groups hosts whose payloads are equal but for such fields (the
cross-host diff's masks, fleet.analysis.facts) and judges a rule once per group, when the rule
cannot see the fields the group's hosts differ in. This module says what it can see:

- `consumed`: paths whose whole value may reach the result (a field compared, a value returned):
  a mask field at, under or above such a path is seen;
- `shaped`: paths of which only the shape is read (a list's length, an object's keys, whether a
  value is empty, null or of some type): a mask field at or above such a path is seen, one below
  it is not, since masking keeps every key and every list's length.

A path is a tuple of document keys from the document's root (`("gpu", "gpus", "*", "name")`):
object keys (str), list indices (int) and `*` (any key or index). Whatever is not understood
here is taken as read whole (the root `()`), so the answer errs only towards judging more often.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from fleet.analysis.classes import Dump, dump_of

Path = tuple[Any, ...]
ANY = "*"
ROOT: Path = ()
# Functions that read only the shape of their argument (and return nothing from inside it).
SHAPE_FUNCTIONS = frozenset({"length", "keys", "type"})


@dataclass
class Reads:
    """The paths one or more expressions read: whole (`consumed`) or their shape (`shaped`)."""

    consumed: set[Path] = field(default_factory=set)
    shaped: set[Path] = field(default_factory=set)
    whole: bool = False  # the document itself is read (`@`, keys(@)): not only some of its keys
    _key: tuple[frozenset[Path], frozenset[Path], bool] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _ordered: tuple[list[Path], list[Path]] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def add(self, other: Reads) -> None:
        self._key = None
        self._ordered = None
        self.consumed |= other.consumed
        self.shaped |= other.shaped
        self.whole = self.whole or other.whole

    def key(self) -> tuple[frozenset[Path], frozenset[Path], bool]:
        """Equal for equal reads (computed once: the reads of a plan do not change)."""
        found = self._key
        if found is None:
            found = self._key = (frozenset(self.consumed), frozenset(self.shaped), self.whole)
        return found

    def ordered(self) -> tuple[list[Path], list[Path]]:
        """The consumed and the shaped paths, each in one stable order (computed once)."""
        found = self._ordered
        if found is None:
            found = self._ordered = (sorted(self.consumed, key=repr), sorted(self.shaped, key=repr))
        return found

    def roots(self) -> set[Any]:
        """The document's top-level keys read; ROOT itself when the whole document is (its
        shape alone is no read: a host's document is always an object)."""
        return {p[0] if p else ROOT for p in self.consumed} | {p[0] for p in self.shaped if p}

    def under(self, root: str) -> Reads:
        """The paths under one top-level key, relative to it (the whole document counts)."""
        found = Reads()
        for paths, into in ((self.consumed, found.consumed), (self.shaped, found.shaped)):
            for path in paths:
                if not path:
                    into.add(ROOT)
                elif _same(path[0], root):
                    into.add(path[1:])
        return found

    def sees(self, fields: Iterable[Path]) -> bool:
        """Whether any of `fields` (concrete paths, relative like these) may change the result."""
        for masked in fields:
            for path in self.consumed:
                if _prefix(masked, path) or _prefix(path, masked):
                    return True
            for path in self.shaped:
                if _prefix(masked, path):
                    return True
        return False


def expression_reads(parsed: Mapping[str, Any]) -> Reads:
    """What one compiled expression (its `parsed` AST) reads of the document it is given."""
    reads = Reads()
    results = _visit(parsed, {ROOT}, reads)
    reads.consumed |= results
    return reads


def _same(one: Any, other: Any) -> bool:
    return one == ANY or other == ANY or (one == other and type(one) is type(other))


def _prefix(short: Path, long: Path) -> bool:
    return len(short) <= len(long) and all(_same(a, b) for a, b in zip(short, long))


def _visit(node: Mapping[str, Any], context: set[Path], reads: Reads) -> set[Path]:
    """The paths the value of `node` comes from, evaluated at each path of `context`; what it
    reads on the way goes into `reads`."""
    kind = node.get("type")
    children: Sequence[Any] = node.get("children") or []
    if kind == "field":
        reads.shaped |= context  # a field of something that is not an object is null
        return {(*path, node["value"]) for path in context}
    if kind == "function_expression":
        return _function(node["value"], children, context, reads)
    visit = _VISITS.get(kind) if isinstance(kind, str) else None
    if visit is None:
        reads.consumed.add(ROOT)  # a node this does not know: the whole document
        reads.whole = True
        return set()
    return visit(node, children, context, reads)


Visit = Callable[[Mapping[str, Any], Sequence[Any], set[Path], Reads], set[Path]]


def _current(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    if ROOT in context:
        reads.whole = True
    return set(context)


def _literal(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    return set()


def _chain(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    for child in children:
        context = _visit(child, context, reads)
    return context


# Nodes whose value is a list made of items picked from elsewhere (a projection's, a filter's, a
# flattened or sliced list): its positions are not the positions of the list it came from.
PICKED_LISTS = frozenset(
    {"projection", "value_projection", "filter_projection", "flatten", "index_expression"}
)


def _pipe(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    """`left | right`: right reads the value left made. When that is a list of picked items
    (`rows[?bytes == `8`] | [0].latency_us`), an index on the right picks any of them, not the
    row at that index of the original list: what came through is read whole."""
    left = _visit(children[0], context, reads)
    if children[0].get("type") in PICKED_LISTS:
        reads.consumed |= left
    return _visit(children[1], left, reads)


def _index(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    base = _visit(children[0], context, reads)
    reads.shaped |= base
    index = children[1]
    if index.get("type") == "index" and isinstance(index.get("value"), int):
        step = index["value"] if index["value"] >= 0 else ANY
        return {(*path, step) for path in base}
    return base  # a slice: part of the list


def _projection(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    items = _items(children[0], context, reads)
    return _visit(children[1], items, reads)


def _filter(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    items = _items(children[0], context, reads)
    reads.shaped |= _visit(children[2], items, reads)  # the condition's truth
    return _visit(children[1], items, reads)


def _flatten(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    base = _visit(children[0], context, reads)
    reads.shaped |= base | {(*path, ANY) for path in base}
    return base


def _comparator(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    for child in children:
        reads.consumed |= _visit(child, context, reads)
    return set()


def _and_or(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    left = _visit(children[0], context, reads)
    reads.shaped |= left  # its truth picks the side
    return left | _visit(children[1], context, reads)


def _not(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    reads.shaped |= _visit(children[0], context, reads)
    return set()


def _select(
    node: Mapping[str, Any], children: Sequence[Any], context: set[Path], reads: Reads
) -> set[Path]:
    found: set[Path] = set()
    for child in children:
        found |= _visit(child, context, reads)
    return found


# What each kind of JMESPath node reads (its parsed form's "type"), fields and functions aside.
_VISITS: dict[str, Visit] = {
    "current": _current,
    "identity": _current,
    "literal": _literal,
    "subexpression": _chain,
    "pipe": _pipe,
    "index_expression": _index,
    "projection": _projection,
    "value_projection": _projection,
    "filter_projection": _filter,
    "flatten": _flatten,
    "comparator": _comparator,
    "and_expression": _and_or,
    "or_expression": _and_or,
    "not_expression": _not,
    "multi_select_list": _select,
    "multi_select_dict": _select,
    "key_val_pair": _select,
}


def _items(node: Mapping[str, Any], context: set[Path], reads: Reads) -> set[Path]:
    """The paths of the items a projection walks over."""
    if node.get("type") == "flatten":
        base = _visit(node["children"][0], context, reads)
        reads.shaped |= base | {(*path, ANY) for path in base}
        return {(*path, ANY) for path in base} | {(*path, ANY, ANY) for path in base}
    base = _visit(node, context, reads)
    reads.shaped |= base
    return {(*path, ANY) for path in base}


def _function(
    name: str, arguments: Sequence[Mapping[str, Any]], context: set[Path], reads: Reads
) -> set[Path]:
    if name == "map" and len(arguments) == 2 and arguments[0].get("type") == "expref":
        items = _items(arguments[1], context, reads)
        return _visit(arguments[0]["children"][0], items, reads)
    if name in SHAPE_FUNCTIONS and len(arguments) == 1:
        reads.shaped |= _visit(arguments[0], context, reads)
        return set()
    if name == "values" and len(arguments) == 1:
        base = _visit(arguments[0], context, reads)
        reads.shaped |= base
        return {(*path, ANY) for path in base}
    for argument in arguments:  # any other function: every argument read whole
        if argument.get("type") != "expref":  # applied to items of the other arguments: in them
            reads.consumed |= _visit(argument, context, reads)
    return set()


def seen(data: Any, reads: Reads) -> Dump:
    """What `reads` (relative to `data`, see Reads.under) see of `data`, as a key: the value at
    each consumed path and the shape at each shaped path, with the concrete keys each pattern
    matched, dumped as a masked payload is (classes.dump_of: marshal, a quarter of repr's time at
    24,000 views a 20,000-host check). Two payloads seen alike give the same answer to the
    expressions read so."""
    consumed, shaped = reads.ordered()
    found: list[Any] = []
    for path in consumed:
        rows = _rows_field(data, path)
        if rows is not None:
            found.append(rows)
            continue
        matched: list[tuple[Path, Any]] = []
        _matches(data, path, 0, (), matched)
        found.append(matched)
    for path in shaped:
        rows = _rows_shape(data, path)
        if rows is not None:
            found.append(rows)
            continue
        matched = []
        _matches(data, path, 0, (), matched)
        found.append([(at, _shape(value)) for at, value in matched])
    return dump_of(found)


def _rows_field(data: Any, path: Path) -> tuple[Any, ...] | None:
    """`keys…[*].field` where every row is an object with that field (allreduce's rows, read at
    each host): the field's values in the rows' order, in one piece (what _matches finds, as
    a tuple, not a list: told apart from its form); None where the path is another."""
    if len(path) < 2 or path[-2] != ANY or type(path[-1]) is not str or path[-1] == ANY:
        return None
    node = _plain_at(data, path[:-2])
    if type(node) is not list:
        return None
    try:
        values = list(map(dict.get, node, repeat(path[-1]), repeat(_ABSENT)))
    except TypeError:  # a row that is not an object
        return None
    if _ABSENT in values:  # (compared by identity first: no value equals it)
        return None
    return ("rows", values)


def _rows_shape(data: Any, path: Path) -> tuple[Any, ...] | None:
    """The shape of each row at `keys…[*]` where every row is an object (their keys, said once
    where the rows all have the same); None where the path is another."""
    if not path or path[-1] != ANY:
        return None
    node = _plain_at(data, path[:-1])
    if type(node) is not list or not all(type(row) is dict for row in node):
        return None
    keys = list(map(tuple, node))
    if len(set(keys)) == 1:
        return ("row keys", keys[0], len(keys))
    return ("row keys", keys)


def _plain_at(data: Any, keys: Path) -> Any:
    """The value down the object keys `keys` (plain dicts only), or _ABSENT."""
    node = data
    for key in keys:
        if type(node) is not dict or type(key) is not str or key == ANY or key not in node:
            return _ABSENT
        node = node[key]
    return node


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def _matches(node: Any, path: Path, depth: int, at: Path, out: list[tuple[Path, Any]]) -> None:
    if depth == len(path):
        out.append((at, node))
        return
    kind = type(node)
    if kind is dict or (kind is not list and isinstance(node, Mapping)):
        _matches_mapping(node, path, depth, at, out)
    elif kind is list or isinstance(node, (list, tuple)):
        _matches_list(node, path, depth, at, out)


def _matches_mapping(
    node: Mapping[Any, Any], path: Path, depth: int, at: Path, out: list[tuple[Path, Any]]
) -> None:
    step = path[depth]
    if step == ANY:
        for key, value in node.items():
            _matches(value, path, depth + 1, (*at, key), out)
    elif type(step) is str:
        if step in node:
            _matches(node[step], path, depth + 1, (*at, step), out)
        elif not all(type(k) is str for k in node):  # JMESPath reads a copy keyed by text
            for key, value in node.items():
                if str(key) == step:
                    _matches(value, path, depth + 1, (*at, key), out)


def _matches_list(
    node: Sequence[Any], path: Path, depth: int, at: Path, out: list[tuple[Path, Any]]
) -> None:
    step = path[depth]
    if step == ANY and depth + 1 == len(path):  # the items themselves (a shape read)
        out.extend(((*at, index), value) for index, value in enumerate(node))
    elif step == ANY and depth + 2 == len(path) and type(path[-1]) is str and path[-1] != ANY:
        _items_key(node, path, depth, at, out)  # rows' one field: the usual read, made fast
    elif step == ANY:
        for index, value in enumerate(node):
            _matches(value, path, depth + 1, (*at, index), out)
    elif type(step) is int and step < len(node):
        _matches(node[step], path, depth + 1, (*at, step), out)


def _items_key(
    node: Sequence[Any], path: Path, depth: int, at: Path, out: list[tuple[Path, Any]]
) -> None:
    """_matches of `[*].key` over a list: what it would find, without a call per plain row."""
    key = path[-1]
    for index, item in enumerate(node):
        if type(item) is dict and key in item:
            out.append(((*at, index, key), item[key]))
        elif type(item) is not dict or not all(type(k) is str for k in item):
            _matches(item, path, depth + 1, (*at, index), out)


def _shape(value: Any) -> Any:
    kind = type(value)
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        return ("object", tuple(map(str, value)))
    if kind is list or isinstance(value, tuple):
        return ("array", len(value))
    return ("value", value)
