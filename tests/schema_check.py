"""Validating documents against fleet's published JSON Schemas (fleet/schemas), for any test."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from fleet.schemas import all_schemas, schema_for


def registry() -> Registry[Any]:
    return Registry().with_resources(
        (uri, Resource.from_contents(schema)) for uri, schema in all_schemas().items()
    )


def errors(kind: str, document: Any) -> list[str]:
    """Every way `document` breaks the `kind` schema, one line each (empty: it validates)."""
    validator = Draft202012Validator(schema_for(kind), registry=registry())
    found = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in found]
