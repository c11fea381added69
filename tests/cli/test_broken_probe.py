"""A probe file that cannot be read (a syntax error, a bad FACTS literal) in --probe-dir or
$FLEET_PROBE_DIR: exit 2 naming FILE:LINE when the probe is selected or needed, a warning when it
is not, and `fleet probes` lists the others and marks it (issue 24, item 6)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fleet.errors import UsageError
from fleet.execution.bundle import available_probes, select_probes
from tests.helpers import invoke_fleet

GOOD = '''"""A site's own probe that works."""

FACTS = {"volatile": ["read_at"]}


def collect(options):
    return {"ok": True, "data": {"answer": 42, "read_at": 1.5}, "error": None}
'''
BROKEN = '''"""A probe with a syntax error on line 3."""

def collect(options)
    return {"ok": True, "data": {}, "error": None}
'''
BAD_FACTS = '''"""FACTS that is no literal."""

FACTS = {"volatile": [name for name in "ab"]}


def collect(options):
    return {"ok": True, "data": {}, "error": None}
'''


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tmp_path as the working folder, holding myprobes/ (good.py, broken.py) and inv.yaml."""
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "myprobes"
    folder.mkdir()
    (folder / "good.py").write_text(GOOD)
    (folder / "broken.py").write_text(BROKEN)
    (tmp_path / "inv.yaml").write_text(
        f"hosts:\n  here: {{transport: local, python: {sys.executable}}}\n"
    )
    return tmp_path


def test_probes_lists_the_others_and_marks_the_broken_one(site: Path) -> None:
    done = invoke_fleet(site, "probes", "--probe-dir", "myprobes")
    assert done.returncode == 0, done.stderr
    assert "good         A site's own probe that works." in done.stdout
    assert "system " in done.stdout
    broken = [line for line in done.stdout.splitlines() if line.startswith("broken ")]
    assert len(broken) == 1
    assert "myprobes/broken.py:3: SyntaxError: " in broken[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_a_selected_broken_probe_is_a_usage_error_naming_file_and_line(site: Path) -> None:
    done = invoke_fleet(
        site, "probe", "-i", "inv.yaml", "--probe-dir", "myprobes", "-p", "good,broken"
    )
    assert done.returncode == 2
    assert "error: myprobes/broken.py:3: SyntaxError: " in done.stderr
    assert "hint: " in done.stderr
    assert "Traceback" not in done.stderr
    assert "<unknown>" not in done.stderr


def test_every_probe_by_default_includes_the_broken_one(site: Path) -> None:
    done = invoke_fleet(site, "probe", "-i", "inv.yaml", "--no-save", "--probe-dir", "myprobes")
    assert done.returncode == 2
    assert "myprobes/broken.py:3: SyntaxError: " in done.stderr
    assert "-p" in done.stderr  # the hint says how to leave it out


def test_an_unselected_broken_probe_is_a_warning(site: Path) -> None:
    done = invoke_fleet(
        site, "probe", "-i", "inv.yaml", "--no-save", "-p", "good",
        env={"FLEET_PROBE_DIR": "myprobes"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "warning: " in done.stderr
    assert "myprobes/broken.py:3: SyntaxError: " in done.stderr


def test_a_rule_that_reads_the_broken_probe_is_a_usage_error(site: Path) -> None:
    rules = site / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - id: broken-ok\n"
        "    severity: error\n"
        "    check: 'broken.answer == `42`'\n"
        "    fix: mend it\n"
    )
    done = invoke_fleet(
        site, "check", "-i", "inv.yaml", "--no-save", "-p", "good", "--rules", "rules.yaml",
        "--probe-dir", "myprobes",
    )  # fmt: skip
    assert done.returncode == 2
    assert "myprobes/broken.py:3: SyntaxError: " in done.stderr


def test_diff_and_show_of_a_run_ignore_an_unrelated_broken_probe(site: Path) -> None:
    env = {"FLEET_PROBE_DIR": "myprobes"}
    done = invoke_fleet(site, "probe", "-i", "inv.yaml", "-p", "good", env=env)
    assert done.returncode == 0, done.stderr
    for args in (("show",), ("diff", "latest")):
        shown = invoke_fleet(site, *args, env=env)
        assert shown.returncode == 0, shown.stderr
        assert "Traceback" not in shown.stderr


def test_a_facts_literal_that_is_no_literal_names_its_line(site: Path) -> None:
    (site / "myprobes" / "broken.py").write_text(BAD_FACTS)
    probes = available_probes(["myprobes"])
    assert probes["broken"].problem.startswith("myprobes/broken.py:3: FACTS ")
    with pytest.raises(UsageError, match=r"myprobes/broken\.py:3: FACTS "):
        select_probes(["broken"], ["myprobes"])
    assert set(select_probes(["good"], ["myprobes"])) == {"good"}
