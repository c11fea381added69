"""YAML files whose errors can name a line: inventories and rule files. Safe loading only.

Every mapping comes back as a LocatedDict that remembers its own line and each key's line, and a
duplicate key is an error (PyYAML would silently keep the last one).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from fleet.errors import FleetError

if TYPE_CHECKING:
    import yaml


class LocatedDict(dict[Any, Any]):
    """A YAML mapping that remembers the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[Any, int]


@dataclass(frozen=True)
class Location:
    """Where in a YAML file something is, to start an error with `path:line:`.

    `error_type` is the FleetError subclass raised for this kind of file; `subject` names what is being
    read there (e.g. "rule 'torch-arch': ") and follows the line in every message."""

    path: str
    error_type: type[FleetError]
    line: int = 1
    subject: str = ""

    def at(self, mapping: Any, key: Any = None) -> Location:
        """The line of `mapping` (or of its `key`); unchanged for values that are not mappings."""
        if not isinstance(mapping, LocatedDict):
            return self
        line = mapping.key_lines.get(key, mapping.line) if key is not None else mapping.line
        # made directly (dataclasses.replace costs 4x as much; asked per key of every host)
        return Location(self.path, self.error_type, line, self.subject)

    def about(self, subject: str) -> Location:
        return replace(self, subject=subject)

    def fail(self, message: str, context: str = "", hint: str = "") -> FleetError:
        """The error to raise: `path:line: subject message`."""
        return self.error_type(
            f"{self.path}:{self.line}: {self.subject}{message}", context=context, hint=hint
        )

    def parse(self, text: str, hint: str) -> Any:
        """`text` parsed as this file's YAML (see load_located)."""
        return load_located(text, self.path, self.error_type, hint)


def load_located(text: str, path: str, error: type[FleetError], hint: str) -> Any:
    """Parse `text`; bad YAML or a duplicate key raises `error` starting with `path:line:`.
    PyYAML is imported here, on the first file read: `fleet probe` of this machine reads none."""
    import yaml

    try:
        # no anchor (`&name`), no alias: nothing can expand, the check is skipped
        return yaml.load(text, Loader=_located_loader(path, error, anchored="&" in text))
    except FleetError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"{path}:{line}: not valid YAML: {problem}", hint=hint) from exc


# Aliases let a few lines stand for billions of values ("billion laughs"): whatever walks the
# result later (a bundle's JSON, a rule engine) would expand them all. A real file never needs this.
MAX_EXPANDED_VALUES = 1_000_000


def _check_expansion(root: yaml.Node, path: str, error: type[FleetError]) -> None:
    """Count the values `root` stands for with every alias expanded; refuse past the limit."""
    sizes: dict[int, int] = {}
    entered: set[int] = set()
    stack = [root]
    while stack:
        node = stack[-1]
        if id(node) not in entered:  # first visit: size the children first (a cycle counts once)
            entered.add(id(node))
            stack.extend(c for c in _children(node) if id(c) not in entered)
            continue
        stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = size = 1 + sum(sizes.get(id(c), 1) for c in _children(node))
        if size > MAX_EXPANDED_VALUES:
            raise error(
                f"{path}:{node.start_mark.line + 1}: aliases here expand to more than "
                f"{MAX_EXPANDED_VALUES:,} values (an alias bomb?)",
                hint="write the values out, or use fewer nested aliases (*name)",
            )


def _children(node: yaml.Node) -> list[yaml.Node]:
    import yaml  # already loaded by the file's parse: a lookup

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


@functools.cache
def _base_loader() -> type[Any]:
    """libyaml's parser when PyYAML has it (5× faster on a 1,000-host inventory); the
    construction below, which records lines and refuses duplicate keys, is Python either way."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_plain(text: str) -> Any:
    """`text` as plain values, no lines kept (a format's sniff): by libyaml where PyYAML has it.
    Bad YAML raises yaml.YAMLError."""
    import yaml

    return yaml.load(text, Loader=_base_loader())


def _located_loader(path: str, error: type[FleetError], anchored: bool = True) -> type[Any]:
    """`anchored`: whether the text may hold an anchor (`&`), so aliases to check."""
    import yaml

    class Loader(_base_loader()):  # type: ignore[misc]
        def construct_document(self, node: yaml.Node) -> Any:
            if anchored:
                _check_expansion(node, path, error)
            return super().construct_document(node)

    def construct_mapping(loader: Any, node: yaml.MappingNode) -> LocatedDict:
        loader.flatten_mapping(node)
        mapping = LocatedDict()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in mapping:
                raise error(
                    f"{path}:{line}: duplicate key {key!r}",
                    hint=f"it is already set on line {mapping.key_lines[key]}",
                )
            mapping[key] = loader.construct_object(value_node, deep=True)
            mapping.key_lines[key] = line
        return mapping

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader
