"""docs/rules.md's examples run: each ```yaml block is a rules file that the real parser must
accept, and where a ```text block follows it, that is what `fleet check` prints on the example
fleet, the golden loopback run (tests/probes/golden/real_run/loopback8_two_odd.json) with the
probe_args of the doc's example inventory. Markers, an HTML comment on the line before a block:

    <!-- inventory -->   the ```yaml block is the example fleet's inventory (for its probe_args)
    <!-- invalid -->     the ```yaml block must be refused; the ```text block after it is how
                         the error starts (as the CLI prints it)
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from rich.console import Console

from fleet.checks import RuleFileError, evaluate, parse_rules
from fleet.execution.bundle import available_probes
from fleet.inventory import parse_inventory
from fleet.models import Run
from fleet.render.terminal.checks import render_report
from tests.conftest import ROOT

DOC = ROOT / "docs" / "rules.md"
LOOPBACK8 = ROOT / "tests" / "probes" / "golden" / "real_run" / "loopback8_two_odd.json"
FENCE = re.compile(r"^```(?P<info>[^`]*)$")
MARKER = re.compile(r"^<!--\s*(?P<marker>[\w-]+)\s*-->$")
WIDTH = 240  # the terminal the outputs were printed on: wide enough not to wrap them
RULES_FILE = "rules.yaml"  # the name errors give the example files


@dataclass
class Block:
    info: str
    text: str
    line: int  # of the opening fence, 1-based
    marker: str = ""  # from an HTML comment on the line before the fence
    output: str | None = None  # the ```text block that follows a ```yaml one


def blocks(markdown: str) -> list[Block]:
    """Fenced blocks in order; a ```text block right after a ```yaml one becomes its output."""
    found: list[Block] = []
    lines = markdown.splitlines()
    index, last_end = 0, -1
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening or not opening["info"]:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i] == "```")
        before = MARKER.match(lines[index - 1]) if index else None
        block = Block(opening["info"].strip(), "\n".join(lines[index + 1 : end]) + "\n", index + 1)
        block.marker = before["marker"] if before else ""
        between = lines[last_end + 1 : index]
        previous = found[-1] if found else None
        if (
            block.info == "text"
            and previous is not None
            and previous.info == "yaml"
            and not any(line.strip() for line in between)
        ):
            previous.output = block.text
        else:
            found.append(block)
        index, last_end = end + 1, end
    return found


DOC_BLOCKS = blocks(DOC.read_text(encoding="utf-8"))
YAML = [b for b in DOC_BLOCKS if b.info == "yaml"]
RULES = [b for b in YAML if b.marker != "inventory"]


def example_run() -> Run:
    return Run.from_dict(json.loads(LOOPBACK8.read_text()))


def example_probe_args() -> dict[str, Any]:
    (inventory,) = [b for b in YAML if b.marker == "inventory"]
    hosts = parse_inventory(inventory.text, "inventory.yaml").hosts
    assert set(hosts) == set(example_run().hosts), "the example inventory names the run's hosts"
    return {name: host.probe_args for name, host in hosts.items()}


def printed(text: str) -> str:
    """What `fleet check --rules` prints for these rules on the example fleet (no title)."""
    report = evaluate(parse_rules(text, RULES_FILE, available_probes()), example_run(), ARGS)
    console = Console(file=io.StringIO(), width=WIDTH, color_system=None, force_terminal=False)
    render_report(console, report)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def plain(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


ARGS = example_probe_args()


def test_the_doc_has_examples_with_outcomes() -> None:
    """Guards the extraction itself: a doc that lost its fences would pass every other test."""
    assert len(RULES) >= 6
    assert len([b for b in RULES if b.output is not None and b.marker != "invalid"]) >= 5
    assert [b for b in RULES if b.marker == "invalid"]
    assert all(b.marker in ("", "invalid") for b in RULES), [b.marker for b in RULES]


@pytest.mark.parametrize("block", RULES, ids=lambda b: f"docs/rules.md:{b.line}")
def test_example(block: Block) -> None:
    if block.marker == "invalid":
        with pytest.raises(RuleFileError) as refused:
            parse_rules(block.text, RULES_FILE, available_probes())
        assert block.output, "an invalid example shows the start of its error"
        assert refused.value.render().startswith(plain(block.output)), refused.value.render()
        return
    rules = parse_rules(block.text, RULES_FILE, available_probes())
    assert rules
    if block.output is not None:
        assert plain(printed(block.text)) == plain(block.output)


def test_a_wrong_outcome_fails() -> None:
    """The comparison bites: one verdict changed in an example's output no longer matches."""
    block = next(b for b in RULES if b.output and "✗" in b.output and b.marker != "invalid")
    assert block.output is not None
    assert plain(printed(block.text)) != plain(block.output.replace("✗", "✓", 1))
