"""Every surface of a saved run that has hosts that did not finish (issue 46, item 2): each such
host is a finding, folded across hosts, with its action, in the terminal, the JSON findings, the
Markdown, the HTML page and JUnit; none says "no findings" or shows a green tick."""

from __future__ import annotations

import json
from pathlib import Path

from fleet.hostsets import compact_hosts
from tests.integration.conftest import run_fleet

# a module on a host's PYTHONPATH that never finishes loading, like a driver call that hangs
HANGING_MODULE = """
import subprocess
subprocess.Popen(["sleep", "{marker}"]).wait()
"""


def assert_findings_everywhere(
    tmp_path: Path, run: Path, kind: str, hosts: list[str], action: str = "retry"
) -> None:
    """`run`'s hosts `hosts` are one finding of `kind` and `action` on every surface."""
    named = compact_hosts(hosts)
    shown = run_fleet(tmp_path, "show", str(run), env={"COLUMNS": "80"})
    _assert_terminal(shown.stdout, named, action)
    checked = run_fleet(tmp_path, "check", "--run", str(run), env={"COLUMNS": "80"})
    _assert_terminal(checked.stdout, named, action)
    for line in checked.stdout.splitlines():  # it points to a finding that is there
        if "its finding says why" in line:
            assert any(h in line for h in hosts), line
    document = json.loads(run_fleet(tmp_path, "check", "--run", str(run), "--json", "-").stdout)
    found = [f for f in document["findings"] if f["kind"] == kind]
    assert len(found) == 1, document["findings"]  # folded: one finding over the hosts
    assert (sorted(found[0]["hosts"]), found[0]["action"]) == (sorted(hosts), action)
    markdown = run_fleet(tmp_path, "show", str(run), "--format", "markdown").stdout
    assert f"{named.replace('[', chr(92) + '[').replace(']', chr(92) + ']')}: " in markdown
    assert f"action `{action}`" in markdown
    assert "No findings" not in markdown
    page = tmp_path / "page.html"
    run_fleet(tmp_path, "report", str(run), "-o", str(page))
    html = page.read_text()
    assert "no findings" not in html
    assert f"<code>{action}</code>" in html
    junit = tmp_path / "check.xml"
    run_fleet(tmp_path, "check", "--run", str(run), "--junit", str(junit))
    assert f'classname="fleet.findings.{kind}" name="{named}"' in junit.read_text()


def _assert_terminal(stdout: str, named: str, action: str) -> None:
    assert "no findings" not in stdout, stdout
    assert "✓" not in stdout, stdout
    lines = stdout.splitlines()
    start = next(
        i for i, line in enumerate(lines) if line.startswith(("✗ ", "! ")) and named in line
    )
    block = " ".join(" ".join(lines[start : start + 4]).split())
    assert f"→ {action}: " in block, stdout
    assert f"--limit {named}`" in block, stdout  # the command that runs them again
