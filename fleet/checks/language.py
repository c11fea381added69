"""The rule language: JMESPath with fleet's functions, compiled once, read per host.

An `Expression` is one compiled JMESPath text of a rule; `roots()` names the probes and helpers
it reads, so the parser can refuse a typo and the evaluator can skip hosts where a probe it needs
did not succeed. The functions added to the standard ones are documented in docs/rules.md.
Why JMESPath: a well-kept, specified query language with no access to Python (nothing is eval'd).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath import functions as jmespath_functions

from fleet.checks.reads import Reads, expression_reads
from fleet.yamlfile import Location


class _FleetFunctions(jmespath_functions.Functions):
    """The documented additions to JMESPath (docs/rules.md: "Functions")."""

    @jmespath_functions.signature({"types": ["array", "null"]}, {"types": []})
    def _func_every(self, items: list[Any] | None, value: Any) -> bool | None:
        if not items or any(item is None for item in items):
            return None
        return all(item == value for item in items)

    @jmespath_functions.signature({"types": ["array", "null"]}, {"types": []})
    def _func_none(self, items: list[Any] | None, value: Any) -> bool | None:
        if not items or any(item is None for item in items):
            return None
        return all(item != value for item in items)

    @jmespath_functions.signature({"types": ["array"]})
    def _func_unique(self, items: list[Any]) -> list[Any]:
        seen: list[Any] = []
        for item in items:
            if item not in seen:
                seen.append(item)
        return seen

    @jmespath_functions.signature({"types": ["object"]}, {"types": []})
    def _func_pairs_not(self, matrix: Mapping[str, Any], value: Any) -> list[str]:
        return _pairs(matrix, lambda cell: cell not in _values(value))

    @jmespath_functions.signature({"types": ["object"]}, {"types": []})
    def _func_pairs_in(self, matrix: Mapping[str, Any], value: Any) -> list[str]:
        return _pairs(matrix, lambda cell: cell in _values(value))

    @jmespath_functions.signature({"types": ["object", "null"]}, {"types": ["array"]})
    def _func_with_prefix(
        self, items: Mapping[str, Any] | None, prefixes: list[Any]
    ) -> dict[str, Any] | None:
        if items is None:
            return None
        return {k: v for k, v in items.items() if k.startswith(_prefixes(prefixes))}

    @jmespath_functions.signature({"types": ["object", "null"]}, {"types": ["array"]})
    def _func_without_prefix(
        self, items: Mapping[str, Any] | None, prefixes: list[Any]
    ) -> dict[str, Any] | None:
        if items is None:
            return None
        return {k: v for k, v in items.items() if not k.startswith(_prefixes(prefixes))}


def _values(value: Any) -> list[Any]:
    """A value, or a list of values (`pairs_not(m, ['OK', 'GNS'])`), as a list."""
    return value if isinstance(value, list) else [value]


def _pairs(matrix: Mapping[str, Any], keep: Callable[[Any], bool]) -> list[str]:
    """`["GPU0→GPU1: NS", …]`: the cells of `{row: {column: status}}` that `keep` keeps."""
    return [
        f"{row}→{column}: {cell}"
        for row, cells in matrix.items()
        if isinstance(cells, Mapping)
        for column, cell in cells.items()
        if keep(cell)
    ]


def _prefixes(items: list[Any]) -> tuple[str, ...]:
    return tuple(str(item) for item in items)


# Nodes whose first child reads the current node and whose other children read its result (or
# each item of it): only the first child can name a root.
SCOPING_NODES = (
    "subexpression",
    "index_expression",
    "projection",
    "value_projection",
    "filter_projection",
    "pipe",
)
_OPTIONS = jmespath.Options(custom_functions=_FleetFunctions())


class EvaluationError(Exception):
    """An expression could not be evaluated on this host's data (a shape it cannot read)."""


@dataclass(frozen=True)
class Expression:
    text: str
    parsed: Any = field(repr=False, compare=False)

    def search(self, document: Mapping[str, Any]) -> Any:
        try:
            return self.parsed.search(document, options=_OPTIONS)
        except jmespath_errors.JMESPathError as exc:
            raise EvaluationError(f"{self.text}: {exc}") from exc

    @functools.cached_property
    def _reads(self) -> Reads:
        return expression_reads(self.parsed.parsed)

    def reads(self) -> Reads:
        """The paths of a host's document it reads (fleet.checks.reads)."""
        return self._reads

    def roots(self) -> set[str]:
        """The top-level names it reads from a host's document (probes and helpers)."""
        return set(_root_fields(self.parsed.parsed, at_root=True))


def _root_fields(node: Mapping[str, Any], at_root: bool) -> Iterator[str]:
    """Walk a JMESPath AST; a field is a root only where the current node is the document."""
    kind, children = node.get("type"), node.get("children") or []
    if kind == "field":
        if at_root:
            yield node["value"]
        return
    if kind in SCOPING_NODES:
        yield from _root_fields(children[0], at_root)
        for child in children[1:]:
            yield from _root_fields(child, False)
    elif kind == "expref":
        yield from _root_fields(children[0], False)  # applied to items, not the document
    else:
        for child in children:
            if isinstance(child, Mapping):
                yield from _root_fields(child, at_root)


def unanswered(expression: Expression, document: Mapping[str, Any]) -> str:
    """Why `expression` gives null on `document`, in facts rather than JMESPath: the facts it
    reads (`torch.devices`, `gpu.gpus[].mig_mode` for `map(&mig_mode, gpu.gpus)`) that are not
    reported or are empty here, e.g. "torch.devices is empty"."""
    said: dict[str, None] = {}
    for path in _fact_paths(expression.parsed.parsed):
        if EACH in path:  # an empty or missing list is said as such, not as its items' field
            items = path[: path.index(EACH)]
            path = items if _state(_read(document, items)) else path
        state = _state(_read(document, path))
        if state:
            said[f"{_path_text(path)} {state}"] = None
    return "; ".join(said) or "the facts it reads give no answer here"


# A fact path: keys, list indexes, and EACH (every item of a list) as `gpu.gpus[].mig_mode`.
EACH = object()
FactPath = tuple[Any, ...]


def _fact_paths(node: Mapping[str, Any]) -> Iterator[FactPath]:
    """The plain fact paths an expression reads from the document. Alternatives (`a || b`) are
    left out: one of them missing is no reason."""
    kind, children = node.get("type"), node.get("children") or []
    chain = _chain(node)
    if chain is not None:
        yield chain
        return
    if kind == "or_expression" or kind == "expref":
        return
    if kind == "function_expression" and node.get("value") == "map" and len(children) == 2:
        items, each = _chain(children[1]), _chain(children[0].get("children", [{}])[0])
        if items is not None and each is not None:
            yield (*items, EACH, *each)
            return
    if kind in SCOPING_NODES:
        children = children[:1]  # the rest read the first one's result, not the document
    for child in children:
        if isinstance(child, Mapping):
            yield from _fact_paths(child)


def _chain(node: Mapping[str, Any]) -> FactPath | None:
    """`a.b[0].c` as ("a", "b", 0, "c"); None for anything else."""
    kind, children = node.get("type"), node.get("children") or []
    if kind == "field":
        return (node["value"],)
    if kind == "index_expression" and len(children) == 2 and children[1].get("type") == "index":
        head = _chain(children[0])
        return None if head is None else (*head, children[1]["value"])
    if kind == "subexpression":
        parts = [_chain(child) for child in children]
        if all(part is not None for part in parts):
            return tuple(key for part in parts for key in part or ())
    return None


def _read(document: Any, path: FactPath) -> Any:
    for index, key in enumerate(path):
        if key is EACH:
            if not isinstance(document, list):
                return None
            return [_read(item, path[index + 1 :]) for item in document]
        if (
            isinstance(key, int)
            and isinstance(document, list)
            and -len(document) <= key < len(document)
        ):
            document = document[key]
        elif isinstance(key, str) and isinstance(document, Mapping):
            document = document.get(key)
        else:
            return None
    return document


def _state(value: Any) -> str:
    if value is None or (isinstance(value, list) and value and all(v is None for v in value)):
        return "is not reported"
    if value in ([], {}, ""):
        return "is empty"
    if isinstance(value, list) and any(v is None for v in value):
        return "is not reported for some items"
    return ""


def _path_text(path: FactPath) -> str:
    if path[:1] == ("_observed",):
        return "the observed value"
    text = ""
    for key in path:
        if key is EACH:
            text += "[]"
        elif isinstance(key, int):
            text += f"[{key}]"
        else:
            shown = key if key.replace("_", "a").isalnum() else json.dumps(key)
            text += f".{shown}" if text else shown
    return text


def compile_expression(text: str, where: Location, key: str) -> Expression:
    """`text` compiled; a syntax error is raised at `where` (FILE:LINE), naming the rule's `key`."""
    try:
        return Expression(text, jmespath.compile(text))
    except jmespath_errors.JMESPathError as exc:
        problem = str(exc).splitlines()[0]
        raise where.fail(
            f"'{key}:' is not a valid JMESPath expression: {problem}",
            context=text,
            hint="see https://jmespath.org/specification.html; quote literals as `1` or 'text'",
        ) from exc


def truthy(value: Any) -> bool:
    """JMESPath's truth: false, null, '', [] and {} are false; 0 is true."""
    return not (value is None or value is False or value in ("", [], {}))


def search_or_none(expression: Expression | None, document: Mapping[str, Any]) -> Any:
    """An optional expression's value; None when it is absent or cannot be evaluated here."""
    if expression is None:
        return None
    try:
        return expression.search(document)
    except EvaluationError:
        return None
