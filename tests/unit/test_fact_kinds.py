"""Each probe's FACTS globs, matched as one regular expression per kind (fleet.analysis.facts
ProbeFacts._matchers), class every path as matching the globs one by one with fnmatch does."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any

from fleet.analysis.facts import KINDS, ProbeFacts, declared_facts
from tests.unit.helpers import templates


def paths(value: Any, prefix: str = "") -> Iterator[str]:
    """The match paths of a payload as the fact cache names them: keys joined by dots, a list
    item as `#`."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for item in value:
            yield from paths(item, f"{prefix}.#")
    yield prefix


def one_glob_at_a_time(declared: ProbeFacts, path: str) -> str:
    for kind in KINDS:
        patterns = (p.replace("[*]", ".#") for p in getattr(declared, kind))
        if any(fnmatch.fnmatchcase(path, p) for p in patterns):
            return kind
    return "fact"


def test_every_captured_path_is_classed_as_by_fnmatch() -> None:
    declared = declared_facts()
    checked = 0
    for host in templates():
        for probe, result in host["probes"].items():
            facts = declared.get(probe)
            if facts is None:
                continue
            for path in set(paths(result.get("data") or {})):
                assert facts.kind_of(path) == one_glob_at_a_time(facts, path), (probe, path)
                hardware = any(
                    fnmatch.fnmatchcase(path, p.replace("[*]", ".#")) for p in facts.hardware
                )
                assert facts.is_hardware(path) == hardware, (probe, path)
                checked += 1
    assert checked > 500  # the captured hosts' payloads were walked


def test_globs_that_look_alike_stay_apart() -> None:
    facts = ProbeFacts(identity=("gpus[*].uuid",), volatile=("*.elapsed_s", "x?"))
    assert facts.kind_of("gpus.#.uuid") == "identity"
    assert facts.kind_of("gpus.#.uuidx") == "fact"  # a whole-path match, as fnmatch's
    assert facts.kind_of("a.b.elapsed_s") == "volatile"
    assert facts.kind_of("xy") == "volatile"
    assert facts.kind_of("xyz") == "fact"
    assert not facts.is_hardware("gpus.#.uuid")  # none declared
