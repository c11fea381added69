"""The HTML report's structure: nothing points to the network, run text is escaped, the charts have
data, the odd hosts and facts are named, big fleets fold. Parsed with html.parser (no browser:
tests/render/test_html_browser.py opens the page in a real Chromium)."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fleet.analysis.across_hosts.diff import compare_hosts
from fleet.analysis.across_runs.drift import compare_runs
from fleet.analysis.facts import declared_facts
from fleet.checks import evaluate, load_rules, pack_path
from fleet.execution.bundle import available_probes
from fleet.models import HostOutcome, Run
from fleet.render.html.page import Report, exit_meaning, render_html
from fleet.render.html.svg import Series, byte_ticks, decade_ticks, log_chart
from tests.helpers import invoke_fleet as fleet
from tests.render.fleets import loopback8, loopback8_with_allreduce

HOSTILE = '<script>alert("x")</script><img src="https://evil.example/x.png">'
URL_ATTRIBUTES = {"src", "href", "action", "formaction", "srcset", "poster", "data", "xlink:href",
                  "background", "manifest", "ping", "cite", "longdesc", "codebase"}  # fmt: skip
LOADING_TAGS = {"link", "iframe", "object", "embed", "img", "audio", "video", "source", "base",
                "frame"}  # fmt: skip


class Page(HTMLParser):
    """Every start tag with its attributes, the text of <style> and <script>, and the visible text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.styles: list[str] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._inside: str | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._inside = tag if tag in ("style", "script") else None

    def handle_endtag(self, tag: str) -> None:
        self._inside = None

    def handle_data(self, data: str) -> None:
        if self._inside == "style":
            self.styles.append(data)
        elif self._inside == "script":
            self.scripts.append(data)
        else:
            self.text.append(data)

    def all(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.tags if name == tag]

    @property
    def visible(self) -> str:
        return " ".join(self.text)


def hostile_run() -> Run:
    """The report's test fleet plus an unreachable host whose name, address and error are hostile."""
    run = Run.from_dict(loopback8_with_allreduce())
    bad = HostOutcome(
        name="gpu-09",
        status="unreachable",
        address=f"10.0.0.9{HOSTILE}",
        error=f"cannot connect: {HOSTILE} url(https://evil.example/a.css) @import 'x.css'",
        hint=f'try <a href="https://evil.example">this</a> {HOSTILE}',
    )
    return dataclasses.replace(run, hosts={**run.hosts, "gpu-09": bad})


def full_report(run: Run) -> Report:
    """Every section: diff, drift against the unchanged recording, checks, a fabric section."""
    declarations = declared_facts()
    rules = load_rules(pack_path("inference"), available_probes())
    fabric = {  # the shape `fleet fabric` writes, plus entries of the wrong shape
        "schema": "fleet.fabric/1",
        "median_busbw_gbps": 380.0,
        "tolerance": 0.25,
        "pairs": [
            {"hosts": ["gpu-01", "gpu-02"], "status": "ok", "busbw_gbps": 380.5, "correct": True},
            {"hosts": ["gpu-03", "gpu-08"], "status": "ok", "busbw_gbps": 120.0, "correct": True},
            {"hosts": ["gpu-01", "gpu-08"], "status": "failed", "error": HOSTILE, "correct": None},
            {"hosts": ["gpu-04", "gpu-05"], "status": "skipped", "error": "gpu-05 not reached"},
            {"a": "gpu-02", "b": HOSTILE, "status": "ok", "busbw_gbps": "fast?"},
            "not a pair",
        ],
        "ring": {"hosts": ["gpu-01", "gpu-02"], "status": "ok", "busbw_gbps": 12.5, "sizes": []},
        "suspects": [
            {"kind": "host", "hosts": ["gpu-08"], "reason": HOSTILE, "factor": 3.17},
            "link gpu-01↔gpu-08",
            42,
        ],
        "skipped_hosts": {"gpu-09": "not reached"},
    }
    return Report(
        run,
        compare_hosts(run.hosts.values(), declarations),
        drift=compare_runs(Run.from_dict(loopback8()), run, declarations),
        checks=evaluate(rules, run),
        fabric=fabric,
        exit_code=4,
        source=f"runs/{HOSTILE}.json",
    )


@pytest.fixture(scope="module")
def page_text() -> str:
    return render_html(full_report(hostile_run()))


@pytest.fixture(scope="module")
def page(page_text: str) -> Page:
    return Page(page_text)


def test_nothing_in_the_page_points_to_the_network(page: Page) -> None:
    assert any("href" in attrs for _, attrs in page.tags)  # the checks below meet links too
    for tag, attrs in page.tags:
        assert tag not in LOADING_TAGS, f"<{tag}> loads something"
        for name, value in attrs.items():
            if name == "href":
                assert value.startswith("#"), f"<{tag} href={value!r}> leaves the page"
            else:
                assert name not in URL_ATTRIBUTES, f"<{tag} {name}={value!r}>"
            assert not name.startswith("on"), f"inline handler <{tag} {name}>: run text as code?"
            assert "url(" not in value.lower() or name != "style"
    css = " ".join([*page.styles, *(a.get("style", "") for _, a in page.tags)]).lower()
    assert "url(" not in css
    assert "@import" not in css
    assert all("fetch(" not in s and "XMLHttpRequest" not in s for s in page.scripts)


def test_run_text_is_escaped_everywhere(page: Page, page_text: str) -> None:
    assert len(page.all("script")) == 1
    assert not page.all("script")[0]
    assert not page.all("img")
    assert all(a["href"].startswith("#") for a in page.all("a"))  # only the page's own nav links
    assert HOSTILE in page.visible  # shown to the reader as text, not markup


def test_header_says_when_where_how_many_and_what_the_exit_code_means(page: Page) -> None:
    text = page.visible
    assert "2026-11-30T01:46:24.212Z" in text
    assert "9 · " in text
    assert "some host not reached" in text
    assert exit_meaning(12) == "some host not reached; some probe failed or timed out"
    assert exit_meaning(0) == "every host ok"
    assert exit_meaning(130) == "interrupted"


def test_divergence_map_names_the_odd_hosts_and_their_facts(page: Page) -> None:
    odd = " ".join(page.text[page.text.index("odd hosts: ") :][:3])
    assert "gpu-[07-08]" in odd
    facts = {"nccl.env.NCCL_P2P_DISABLE", "torch.symmetric_memory.class_name"}
    fact_cells = [t for t in page.text if t in facts]
    assert set(fact_cells) == facts
    columns = [a for tag, a in page.tags if tag == "th" and "group" in a.get("class", "")]
    assert [c["title"] for c in columns[:3]] == ["gpu-[01-06]", "gpu-07", "gpu-08"]


def test_each_chart_has_data_paths_and_the_slow_host_is_named(page: Page) -> None:
    lines = [a for tag, a in page.tags if tag == "path" and "line" in a.get("class", "").split()]
    assert len(page.all("svg")) == 4  # latency and busbw, eager and graph
    assert all(re.fullmatch(r"M[\d. ]+(L[\d. ]+){3,}", a["d"]) for a in lines)
    classes = [a["class"] for a in lines]
    assert classes.count("line median") == 4
    assert classes.count("line odd odd-0") == 4
    assert "gpu-08" in page.visible
    assert "3.09× worse" in page.visible


def test_checks_drift_fabric_and_not_compared_sections_are_there(page: Page) -> None:
    ids = [a.get("id") for tag, a in page.tags if tag == "section"]
    # the fabric section is its unit's (fleet/units/fabric/html.py): with the other units'
    assert ids == ["findings", "hosts", "divergence", "names", "allreduce", "fabric", "checks", "drift",
                   "not-compared", "host-details"]  # fmt: skip
    assert "allreduce" in page.visible
    assert "(the whole host)" in page.visible
    assert "link gpu-01↔gpu-08" in page.visible  # a suspect given as a plain string


def test_fabric_matrix_marks_failed_and_slow_pairs_and_names_suspects(
    page: Page, page_text: str
) -> None:
    fabric = page.text[page.text.index("fabric") :]
    matrix = page_text[page_text.index('<table class="divmap pairs">') :]
    matrix = matrix[: matrix.index("</table>")]
    assert matrix.count('class="cell odd"') == 4  # gpu-03↔08 (120 < 380/1.25), gpu-01↔08: both ways
    assert matrix.count('class="cell none"><details>') == 2  # gpu-04↔05 skipped
    assert matrix.count('class="cell maj"') == 4  # gpu-01↔02, and gpu-02↔HOSTILE (no number)
    assert "3.17× slower than the median" in " ".join(fabric)
    assert "hosts left out of the fabric test" in fabric


def test_a_big_fleet_folds_hosts_and_draws_a_band(tmp_path: Path) -> None:
    base = Run.from_dict(loopback8_with_allreduce())
    template = base.hosts["gpu-01"]
    hosts = {f"n{i:03d}": dataclasses.replace(template, name=f"n{i:03d}") for i in range(100)}
    hosts["n007"] = HostOutcome(
        "n007", "unreachable", "10.0.0.7", "cannot connect to n007: refused"
    )
    run = dataclasses.replace(base, hosts=hosts)
    page = Page(render_html(Report(run, compare_hosts(run.hosts.values(), declared_facts()))))
    rows = [a for tag, a in page.tags if tag == "tr" and "data-key" in a]
    status_rows = [r for r in rows if r["data-key"].startswith("n0")][:2]
    assert [len(r["data-key"].split()) for r in status_rows] == [1, 99]  # trouble first
    assert any("band" in a.get("class", "") for tag, a in page.tags if tag == "path")
    assert not [a for tag, a in page.tags if tag == "path" and a.get("class") == "line host"]
    assert "drawn as one shaded band" in page.visible


def test_fabric_that_is_not_a_mapping_is_shown_not_raised() -> None:
    run = Run.from_dict(loopback8())
    report = Report(run, compare_hosts(run.hosts.values(), declared_facts()), fabric=["odd"])
    assert "a fabric section that is not a mapping" in Page(render_html(report)).visible


def test_raw_data_of_identical_payloads_is_shown_once() -> None:
    document = loopback8()
    run = Run.from_dict(document)
    page = Page(render_html(Report(run, compare_hosts(run.hosts.values(), declared_facts()))))
    shown_once = "the same data as gpu-07's (shown there)"  # odd hosts come first
    assert shown_once in page.visible


# ------------------------------------------------------------------------------------- svg


def test_ticks_are_readable_units() -> None:
    assert [label for _, label in byte_ticks(8, 256 << 20)] == [
        "8 B", "128 B", "2 KiB", "32 KiB", "512 KiB", "8 MiB", "128 MiB",
    ]  # fmt: skip
    decades = ["0.001", "0.01", "0.1", "1", "10", "100"]
    assert [label for _, label in decade_ticks(0.0003, 380)] == decades
    assert [label for _, label in decade_ticks(9, 40)] == ["10", "20"]


def test_a_chart_skips_values_a_log_axis_cannot_draw() -> None:
    svg = log_chart("t", "x", "y", [Series("h", ((1, 0.0), (2, 5.0), (4, 6.0)), "host")])
    assert 'd="M' in svg
    assert "<title>h</title>" in svg
    assert "no data to draw" in log_chart("t", "x", "y", [Series("h", ((1, 0),), "host")])


# ------------------------------------------------------------------------------------- cli


def test_fleet_report_writes_the_page_of_a_recorded_run(tmp_path: Path) -> None:
    recorded = tmp_path / "run.json"
    recorded.write_text(json.dumps(loopback8_with_allreduce()))
    baseline = tmp_path / "old.json"
    baseline.write_text(json.dumps(loopback8()))
    out = tmp_path / "r.html"
    done = fleet(tmp_path, "report", str(recorded), "-o", str(out), "--baseline", str(baseline))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stderr
    assert out.stat().st_mode & 0o777 == 0o600  # every host's data: readable by its owner only
    ids = [a.get("id") for tag, a in Page(out.read_text()).tags if tag == "section"]
    assert "drift" in ids
    assert "allreduce" in ids


def test_fleet_report_without_runs_says_so(tmp_path: Path) -> None:
    done = fleet(tmp_path, "report", "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2
    assert "no latest run" in done.stderr


def test_fleet_report_into_a_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    recorded = tmp_path / "run.json"
    recorded.write_text(json.dumps(loopback8()))
    done = fleet(tmp_path, "report", str(recorded), "-o", str(tmp_path / "nowhere" / "r.html"))
    assert done.returncode == 2
    assert "cannot write the HTML report" in done.stderr
    assert "hint:" in done.stderr


def test_probe_html_writes_the_page_of_the_run_it_probed(tmp_path: Path) -> None:
    out = tmp_path / "probe.html"
    done = fleet(tmp_path, "probe", "-p", "system,packages", "--no-save", "--html", str(out))
    assert done.returncode == 0, done.stderr
    page = Page(out.read_text())
    assert "local" in page.visible
    assert "every host ok" in page.visible


def test_check_html_has_the_verdicts_and_a_failed_write_sets_bit_64(tmp_path: Path) -> None:
    recorded = tmp_path / "run.json"
    recorded.write_text(json.dumps(loopback8()))
    out = tmp_path / "check.html"
    done = fleet(tmp_path, "check", "--run", str(recorded), "--html", str(out))
    ids = [a.get("id") for tag, a in Page(out.read_text()).tags if tag == "section"]
    assert "checks" in ids
    missing = tmp_path / "nowhere" / "check.html"
    failed = fleet(tmp_path, "check", "--run", str(recorded), "--html", str(missing))
    assert failed.returncode == done.returncode | 64
    assert "cannot write the HTML report" in failed.stderr


def test_divergence_map_has_a_column_group_per_cohort_and_folds_the_hardware() -> None:
    """The mixed fleet (tests/mixed_fleets.py): the H200 pair and the Blackwell hosts head their
    own columns; the check-grade findings are listed first; the 212 hardware facts between the
    two cohorts are one folded table, not 212 rows."""
    from tests.mixed_fleets import mixed8

    run = Run.from_dict(mixed8())
    diff = compare_hosts(run.hosts.values(), declared_facts())
    html = render_html(Report(run, diff))
    page = Page(html)
    cohorts = [a for tag, a in page.tags if tag == "th" and "cohort-head" in a.get("class", "")]
    assert [c["title"] for c in cohorts] == [
        "8× NVIDIA RTX PRO 6000 Blackwell Server Edition · pcie",
        "2× NVIDIA H200 · nvlink",
    ]
    groups = [a["title"] for tag, a in page.tags if tag == "th" and "group" in a.get("class", "")]
    assert groups[0] == "h[03-04,06,08]"  # the Blackwell hosts that answer alike, then the odd
    assert set(groups[1:3]) == {"h05", "h07"}
    assert groups[3] == "h[01-02]"
    visible = " ".join(page.text)
    findings = html[html.index('<ol class="findings">') : html.index("</ol>")]
    assert findings.index("sm_120") < findings.index("NCCL_P2P_DISABLE=1") < findings.index("212")
    rows = re.findall(r'<tr data-key="([^" ]+)', html[html.index('class="divmap"') :])
    assert "gpu.driver_version" in rows  # software between cohorts: a row
    assert not any(r.startswith("gpu.gpus") for r in rows)  # hardware: folded below
    assert "212 hardware fact(s) differ, as expected" in visible
    # the H200 pair's own driver, as a whole cohort; the devices it lacks, as its hardware
    assert html.count('class="cell across"') == 1
    assert "◇ 580.159.04" in html
    assert "– no such device" in html
