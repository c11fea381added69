"""Issue 38's fleet (tests/scenarios/sick_fleet.py: a GPU with a pending row remap and an
uncorrected ECC error, a torch without sm_120, NCCL_P2P_DISABLE=1 with NCCL_ALGO=Tree on one host):
every command says what is wrong, where and what to do first, and every surface says the same."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.cli.inprocess import invoke
from tests.render.chromium import CHROMIUM, chromium
from tests.scenarios.sick_fleet import NO_SM120, P2P_OFF, SICK, write_sick_fleet

THREE = (SICK, NO_SM120, P2P_OFF)


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    return write_sick_fleet(tmp_path / "sick.json")


def finding_lines(output: str) -> list[str]:
    """The lines that open a finding (a severity mark first)."""
    return [line for line in output.splitlines() if line[:2] in ("✗ ", "! ", "· ")]


def test_the_run_names_each_sick_host_with_its_reason_first(tmp_path: Path, run_file: Path) -> None:
    """`fleet show` renders a run as `fleet probe` does (probe adds one `saved` line)."""
    done = invoke(tmp_path, "show", str(run_file), columns=80)
    lines = done.output.splitlines()
    first = "\n".join(lines[:25])
    opening = finding_lines(first)
    for host in THREE:
        assert any(line.startswith(f"✗ {host}") for line in opening), first
    sick = next(i for i, line in enumerate(lines) if line.startswith(f"✗ {SICK}"))
    assert "GPU1 (00000000:00:07.0)" in lines[sick]
    assert "→ reset-gpu" in "\n".join(lines[sick : sick + 4])  # the ECC host: reset the GPU
    assert "arch list lacks sm_120" in first
    assert "NCCL_P2P_DISABLE=1" in first
    assert len(lines) <= 59, done.output  # fleet probe: these and its `saved` line, ≤ 60


def test_check_gives_its_verdict_naming_the_three_hosts_first(
    tmp_path: Path, run_file: Path
) -> None:
    done = invoke(tmp_path, "check", "--run", str(run_file), columns=80)
    lines = done.output.splitlines()
    assert done.exit_code == 32
    verdict = " ".join(" ".join(lines[:2]).split())
    assert verdict.startswith("✗ check failed: h[02,05,07] fail"), done.output
    assert len(lines) <= 40, done.output
    first = "\n".join(lines[:12])
    assert all(any(line.startswith(f"✗ {h}") for line in finding_lines(first)) for h in THREE)


def surfaces(tmp_path: Path, run_file: Path) -> dict[str, list[tuple[str, str, str]]]:
    """(hosts, what, action) of each finding, as each surface gives them, in order."""
    junit, page = tmp_path / "check.xml", tmp_path / "page.html"
    as_json = json.loads(invoke(tmp_path, "check", "--run", str(run_file), "--json", "-").stdout)
    invoke(tmp_path, "check", "--run", str(run_file), "--junit", str(junit))
    markdown = invoke(tmp_path, "diff", str(run_file), "--format", "markdown").output
    invoke(tmp_path, "report", str(run_file), "-o", str(page))
    return {
        "json": [(",".join(f["hosts"]), f["what"], f["action"]) for f in as_json["findings"]],
        "junit": junit_findings(junit),
        "markdown": markdown_findings(markdown),
        "html": html_findings(page.read_text()),
    }


def junit_findings(path: Path) -> list[tuple[str, str, str]]:
    suite = ET.parse(path).getroot().find("testsuite[@name='findings']")
    assert suite is not None
    found = []
    for case in suite.findall("testcase"):
        failure = case.find("failure")
        text = failure.get("message") if failure is not None else case.findtext("system-out")
        action = (
            failure.text.split("\n")[0].removeprefix("action: ") if failure is not None else "none"
        )
        found.append((case.get("name") or "", (text or "").split(": ", 1)[1], action))
    return [(hosts_of(h), w, a) for h, w, a in found]


def markdown_findings(text: str) -> list[tuple[str, str, str]]:
    section = text.split("## fleet: cross-host divergence")[0]
    found = []
    for line in section.splitlines():
        match = re.match(
            r"^- \*\*\w+\*\* (\S+?)(?: `[^`]*`)?: (.*?)(?: — action `([\w-]+)`: .*)?$", line
        )
        if match:
            what = match.group(2).replace("\\", "")
            found.append(
                (hosts_of(match.group(1).replace("\\", "")), what, match.group(3) or "none")
            )
    return found


def html_findings(page: str) -> list[tuple[str, str, str]]:
    table = page.split('<section id="findings">')[1].split("</section>")[0]
    found = []
    for row in re.findall(r"<tr data-key=\"([^\"]*)\">(.*?)</tr>", table):
        cells = re.findall(r"<td>(.*?)</td>", row[1])
        what = re.sub(r" <span class=dim>.*?</span>", "", cells[3])
        action = re.sub(r"</?code>", "", cells[4])
        found.append((",".join(row[0].split()), _unescape(what), action))
    return found


def hosts_of(folded: str) -> str:
    from fleet.inventory.nodeset import expand_hostlist

    return ",".join(expand_hostlist(folded))


def _unescape(text: str) -> str:
    return (
        text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#x27;", "'")
        .replace("&quot;", '"')
        .replace("&amp;", "&")
    )


def test_json_markdown_junit_and_html_carry_the_same_findings(
    tmp_path: Path, run_file: Path
) -> None:
    found = surfaces(tmp_path, run_file)
    assert len(found["json"]) >= 3
    for surface in ("junit", "markdown", "html"):
        assert found[surface] == found["json"], surface


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_the_page_shows_the_findings_first_in_a_real_browser(
    tmp_path: Path, run_file: Path
) -> None:
    page_file = tmp_path / "page.html"
    invoke(tmp_path, "report", str(run_file), "-o", str(page_file))
    with chromium() as browser:
        page = browser.open_page(page_file)
        assert page.errors == []
        shown = browser.evaluate(
            page.session,
            "(() => { const s = document.querySelector('main section');"
            " return {id: s.id, text: s.innerText}; })()",
        )
    assert shown["id"] == "findings"
    for host in THREE:
        assert host in shown["text"]
    assert "reset-gpu" in shown["text"]


def test_fail_on_lets_ci_choose_and_findings_alone_never_change_the_exit_code(
    tmp_path: Path, run_file: Path
) -> None:
    assert invoke(tmp_path, "show", str(run_file)).exit_code == 0
    assert invoke(tmp_path, "show", str(run_file), "--fail-on", "error").exit_code == 32
    assert invoke(tmp_path, "diff", str(run_file), "--fail-on", "warning").exit_code == 32
    healthy = tmp_path / "healthy.json"
    document = json.loads(run_file.read_text())
    for name in (SICK, NO_SM120, P2P_OFF):
        del document["hosts"][name]
    healthy.write_text(json.dumps(document))
    # what is left differs only between the cohorts (information): not a failure at error
    assert invoke(tmp_path, "show", str(healthy), "--fail-on", "error").exit_code == 0
    assert invoke(tmp_path, "show", str(healthy), "--fail-on", "info").exit_code == 32


def test_hosts_not_reached_are_one_finding_their_error_said_once(tmp_path: Path) -> None:
    """Six hosts refused the connection: one finding over all six (their addresses blanked),
    its error said there only (not in the hosts table, not again as 'not compared')."""
    from tests.cli.inprocess import LOOPBACK8, run_document, write_run

    document = run_document(LOOPBACK8)
    for index, name in enumerate(list(document["hosts"])[:6]):
        document["hosts"][name].update(
            status="unreachable",
            address=f"10.0.0.{index}",
            error=f"cannot connect to {name} (10.0.0.{index}:22): connection refused",
            hint=f"is sshd listening there? try: ssh -p 22 root@10.0.0.{index} true",
            probes={},
        )
    run = write_run(tmp_path / "six.json", document)
    output = invoke(tmp_path, "show", str(run), columns=80).output
    flat = " ".join(output.split())
    assert flat.count("connection refused") == 1, output
    assert "✗ gpu-[01-06]: not reached (unreachable)" in output
    assert "try: ssh -p 22 root@HOST true" in flat
    assert "not compared" not in output
