"""YAML files whose errors can name a line: inventories and rule files. Safe loading only.

Every mapping comes back as a LocatedDict that remembers its own line and each key's line, and a
duplicate key is an error (PyYAML would silently keep the last one).
"""

from __future__ import annotations

from typing import Any

import yaml

from fleet.errors import FleetError


class LocatedDict(dict[Any, Any]):
    """A YAML mapping that remembers the line of each key (1-based)."""

    line: int = 0
    key_lines: dict[Any, int]


def load_located(text: str, path: str, error: type[FleetError], hint: str) -> Any:
    """Parse `text`; bad YAML or a duplicate key raises `error` starting with `path:line:`."""
    try:
        return yaml.load(text, Loader=_located_loader(path, error))
    except FleetError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(f"{path}:{line}: not valid YAML: {problem}", hint=hint) from None


def _located_loader(path: str, error: type[FleetError]) -> type[yaml.SafeLoader]:
    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> LocatedDict:
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
