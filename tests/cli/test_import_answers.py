"""The answer to `--import` is a section of its own on every surface (issue 46, item 5): which
name of each spec resolved and its package's version per set of hosts, the tried chain when
nothing resolved; on one host (a real probe here) and on many (the recorded mixed fleet)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.helpers import invoke_fleet
from tests.mixed_fleets import mixed8

SYMM = "torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory"
MISSING = {
    "error": None,
    "resolved": None,
    "tried": [
        {"target": "nosuch", "error": "ModuleNotFoundError: No module named 'nosuch'"},
        {"target": "nosuch_two", "error": "ModuleNotFoundError: No module named 'nosuch_two'"},
    ],
    "version": None,
}


def asked_run(tmp_path: Path) -> Path:
    """mixed8 as if probed with --import SYMM --import 'nosuch|nosuch_two'."""
    document: dict[str, Any] = mixed8()
    for outcome in document["hosts"].values():
        data = outcome["probes"]["imports"]["data"]
        data["results"] = {SYMM: data["results"][SYMM], "nosuch|nosuch_two": MISSING}
    path = tmp_path / "asked.json"
    path.write_text(json.dumps(document))
    return path


def test_one_host_probed_prints_what_resolved_and_what_was_tried(tmp_path: Path) -> None:
    done = invoke_fleet(
        tmp_path,
        *("probe", "-p", "imports", "--no-save", "--import", "json:nope|loads"),
        *("--import", "nosuch_fleet_test:X|Y"),
        columns=80,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    section = lines[lines.index("imports") :]
    assert "  json:nope|loads" in section
    assert any(line.startswith("    local: loads (") for line in section)
    unresolved = " ".join(section)
    assert "local: nothing resolved: tried nosuch_fleet_test (ModuleNotFoundError" in unresolved
    assert all(len(line) <= 80 for line in lines)


def test_many_hosts_fold_into_host_sets_on_the_terminal(tmp_path: Path) -> None:
    done = invoke_fleet(tmp_path, "show", str(asked_run(tmp_path)), columns=80)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index("imports")
    assert lines[start : start + 7] == [
        "imports",
        f"  {SYMM}",
        "    h[01-04,06-08]: SymmetricMemory (2.11.0+cu130)",
        "    h05: _SymmetricMemory (2.6.0+cu124)",
        "  nosuch|nosuch_two",
        "    h[01-08]: nothing resolved: tried nosuch (ModuleNotFoundError: No module",
        "      named 'nosuch'); nosuch_two (ModuleNotFoundError: No module named",
    ]


def test_markdown_and_html_say_the_same_answers(tmp_path: Path) -> None:
    path = asked_run(tmp_path)
    markdown = invoke_fleet(tmp_path, "diff", str(path), "--format", "markdown").stdout
    assert "## fleet: imports asked (--import)" in markdown
    assert "  - h\\[01-04,06-08\\]: SymmetricMemory (2.11.0+cu130)" in markdown
    assert "  - h05: \\_SymmetricMemory (2.6.0+cu124)" in markdown
    assert "  - h\\[01-08\\]: nothing resolved: tried nosuch (ModuleNotFoundError" in markdown
    page = tmp_path / "page.html"
    assert invoke_fleet(tmp_path, "report", str(path), "-o", str(page)).returncode == 0
    html = page.read_text()
    assert "<td>h05</td><td>_SymmetricMemory (2.6.0+cu124)</td>" in html
    assert "<td>h[01-08]</td><td>nothing resolved: tried nosuch (" in html


def test_a_run_of_the_default_specs_has_no_section(tmp_path: Path) -> None:
    path = tmp_path / "mixed8.json"
    path.write_text(json.dumps(mixed8()))
    assert "imports" not in invoke_fleet(tmp_path, "show", str(path)).stdout.splitlines()
    markdown = invoke_fleet(tmp_path, "diff", str(path), "--format", "markdown").stdout
    assert "imports asked" not in markdown
