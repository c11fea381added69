"""The JSON Schemas (draft 2020-12) of the documents fleet writes, shipped as package data.

    from fleet.schemas import schema_for
    schema_for("run")      # the dict of run.schema.json: fleet.run/2 (fleet.run/1 validates too)

Kinds: run, fabric (the `fabric` section of a `fleet fabric` run), diff and drift (both
fleet.diff/3, told apart by `kind`), check, baseline (`fleet baseline`'s YAML, as data), findings
(the `findings` list the run, check and drift documents carry), jobs (`fleet jobs --json`), hosts
(`fleet hosts --json FILE`), runs (`fleet runs --json`). Each file's `$id` is `urn:fleet:schemas:KIND`; the run
schema refers to the fabric one by that id, so a validator needs both (`all_schemas()` gives every
one by its `$id`). docs/documents.md says what each document is and how its versions changed; the
same files are published under docs/schemas/. fleet itself never validates (jsonschema is not a
dependency): the schemas are for the people who build on the JSON, and for fleet's tests.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

KINDS = ("run", "fabric", "diff", "drift", "check", "baseline", "findings", "jobs", "hosts", "runs")


def schema_for(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind of document, as a dict (a fresh copy each call)."""
    if kind not in KINDS:
        raise ValueError(f"no schema for {kind!r}: one of {', '.join(KINDS)}")
    text = resources.files(__name__).joinpath(f"{kind}.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def all_schemas() -> dict[str, dict[str, Any]]:
    """Every schema by its `$id`: what a validator's registry needs to follow their `$ref`s."""
    return {schema["$id"]: schema for schema in map(schema_for, KINDS)}
