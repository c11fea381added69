"""fleet's own probes are not parsed whole when listed (start-up): each must pass the check a
probe of yours passes, and the one statement read for a declaration must be the one the whole
file's parse finds."""

from __future__ import annotations

import ast

import pytest

from fleet.execution import bundle
from fleet.execution.bundle import available_probes, check_declarations, declared_literal

OWN = {
    name: probe for name, probe in available_probes().items() if probe.path.startswith("probes/")
}
DECLARED = ("FACTS", "SHIPS", "PRELOAD", "TIMEOUT_S", "RUN_ALONE")


def test_fleet_has_its_own_probes() -> None:
    assert {"system", "gpu", "torch", "nccl"} <= set(OWN)


@pytest.mark.parametrize("name", sorted(OWN))
def test_each_own_probe_passes_the_check_a_probe_of_yours_passes(name: str) -> None:
    check_declarations(OWN[name].source, OWN[name].path)
    assert OWN[name].problem == ""


@pytest.mark.parametrize("name", sorted(OWN))
def test_a_declaration_read_alone_is_the_whole_parse(name: str) -> None:
    source = OWN[name].source
    whole = bundle._top_level_assignments(source)
    for declared in DECLARED:
        alone = bundle._assignment(source, declared)
        expected = whole.get(declared)
        assert (alone is None) == (expected is None), declared
        if alone is not None and expected is not None:
            assert ast.dump(alone, include_attributes=True) == ast.dump(
                expected, include_attributes=True
            ), declared


def test_a_statement_that_does_not_stand_alone_falls_back_to_the_whole_parse() -> None:
    source = 'X = 1\nFACTS = {\n    "identity": ["a"],\n}\nY = [\n1]\nFACTS = {"volatile": []}\n'
    assert declared_literal(source, "FACTS") == {"identity": ["a"]}
    assert bundle._assignment(source, "FACTS").lineno == 2  # type: ignore[union-attr]
    assert declared_literal("FACTS: dict = {'sets': ['x']}\n", "FACTS") == {"sets": ["x"]}
    assert declared_literal("def f():\n    FACTS = 1\n", "FACTS") is None


def test_a_broken_probe_of_yours_is_still_named_by_line(tmp_path: pytest.TempPathFactory) -> None:
    folder = tmp_path / "mine"  # type: ignore[operator]
    folder.mkdir()
    (folder / "bad.py").write_text('"""Bad."""\nFACTS = {"identity": [1]}\n')
    (folder / "syntax.py").write_text('"""Syntax."""\ndef run(:\n')
    probes = available_probes([folder])
    assert probes["bad"].problem.startswith(f"{folder}/bad.py:2: FACTS")
    assert probes["syntax"].problem.startswith(f"{folder}/syntax.py:2: SyntaxError")
