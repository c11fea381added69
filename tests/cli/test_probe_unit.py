"""A probe of your own with a unit (issues 37, 47): the toy `uptime` probe (tests/toy/probes/
uptime.py, passed with --probe-dir) and its unit (tests/toy/uptime_unit/: a key fact, a rule
helper, a terminal and an HTML section, an option and a baseline family), registered with
fleet.registry.register: shown in the terminal and on the HTML page, judged by `fleet check` with
its rules file (tests/toy/uptime.yaml), its option offered by `fleet probe`, its family kept by
`fleet baseline` and judged by `fleet check --baseline-file`. Nothing outside tests/toy/ names it."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet import registry
from tests.cli.inprocess import invoke
from tests.conftest import ROOT

TOY = ROOT / "tests" / "toy"


@pytest.fixture
def uptime_unit() -> Iterator[None]:
    registry.register("uptime", "tests.toy.uptime_unit")
    yield
    registry.unregister("uptime")


@pytest.fixture
def probed(tmp_path: Path, uptime_unit: None) -> tuple[str, Path]:
    """`fleet probe` of this machine with the uptime probe: its terminal output, its run file."""
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  here: {{transport: local, python: {sys.executable}}}\n")
    run = tmp_path / "run.json"
    done = invoke(
        tmp_path, "probe", "-i", str(inventory), "--probe-dir", str(TOY / "probes"),
        "-p", "system,uptime", "--json", str(run),
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    return done.output, run


def test_the_unit_is_in_the_registry(uptime_unit: None) -> None:
    assert registry.part("uptime", "facts") is not None
    assert registry.part("uptime", "html") is not None
    assert "uptime" in [name for name, _ in registry.parts("terminal")]
    assert registry.part("health", "checks") is None  # a part a unit does not have


def test_the_key_fact_and_the_terminal_section_are_shown(probed: tuple[str, Path]) -> None:
    output, run = probed
    uptime = json.loads(run.read_text())["hosts"]["here"]["probes"]["uptime"]["data"]["uptime_s"]
    assert "uptime s" in output  # the unit's key fact row …
    assert str(uptime) in output  # … with the host's value
    assert "uptime: 1 host(s), longest up here" in output  # the unit's terminal section


def test_the_html_section_is_on_the_page(tmp_path: Path, probed: tuple[str, Path]) -> None:
    _, run = probed
    page = tmp_path / "page.html"
    done = invoke(tmp_path, "report", str(run), "-o", str(page))
    assert done.exit_code == 0, done.output
    html = page.read_text()
    assert '<a href="#uptime">uptime</a>' in html  # in the page's navigation
    assert '<section id="uptime"><h2>uptime</h2>' in html
    assert "how long each host has been up" in html


def test_check_judges_its_rules(tmp_path: Path, probed: tuple[str, Path]) -> None:
    _, run = probed
    done = invoke(
        tmp_path, "check", "--run", str(run), "--rules", str(TOY / "uptime.yaml"),
        "--json", "-",
    )  # fmt: skip
    assert done.exit_code == 32, done.output  # an error rule failed
    rules = {r["id"]: r["hosts"]["here"] for r in json.loads(done.stdout)["rules"]}
    assert rules["uptime-known"]["verdict"] == "pass"
    assert rules["uptime-a-century"]["verdict"] == "fail"
    assert rules["uptime-a-century"]["fix"] == "wait"


def test_without_its_unit_the_probe_still_runs_but_shows_nothing_of_its_own(
    tmp_path: Path,
) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  here: {{transport: local, python: {sys.executable}}}\n")
    done = invoke(
        tmp_path, "probe", "-i", str(inventory), "--probe-dir", str(TOY / "probes"),
        "-p", "system,uptime",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "uptime s" not in done.output
    assert "longest up" not in done.output


def test_its_option_is_offered_and_reaches_the_probe(tmp_path: Path, uptime_unit: None) -> None:
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(f"hosts:\n  here: {{transport: local, python: {sys.executable}}}\n")
    assert "--uptime-whole" in invoke(tmp_path, "probe", "--help").output
    run = tmp_path / "run.json"
    done = invoke(
        tmp_path, "probe", "-i", str(inventory), "--probe-dir", str(TOY / "probes"),
        "-p", "uptime", "--uptime-whole", "--json", str(run),
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    data = json.loads(run.read_text())["hosts"]["here"]["probes"]["uptime"]["data"]
    assert data["uptime_s"] == int(data["uptime_s"])  # whole seconds: the option arrived
    assert data["idle_s"] == int(data["idle_s"])


def test_without_its_unit_the_option_is_not_offered(tmp_path: Path) -> None:
    assert "--uptime-whole" not in invoke(tmp_path, "probe", "--help").output


def test_its_baseline_family_is_kept_and_judged(tmp_path: Path, probed: tuple[str, Path]) -> None:
    _, run = probed
    baseline = tmp_path / "baseline.yaml"
    made = invoke(tmp_path, "baseline", str(run), "-o", str(baseline))
    assert made.exit_code == 0, made.output
    assert "uptime proc idle_share" in baseline.read_text()  # the family's measurement
    done = invoke(
        tmp_path, "check", "--run", str(run), "--rules", str(TOY / "uptime.yaml"),
        "--baseline-file", str(baseline), "--json", "-",
    )  # fmt: skip
    rules = {r["id"]: r for r in json.loads(done.stdout)["rules"]}
    judged = rules["baseline-uptime"]
    assert judged["hosts"]["here"]["verdict"] == "pass", judged  # the run inside its own band
    assert "idle since boot" in judged["description"]
