"""The HTML report in a real headless Chromium: written by `fleet report` as a user would, opened
from disk, with no console error, no request but the file itself, the odd hosts and facts in the
rendered DOM, data in the charts, and the page's scripts working (filter, sort, fold, print)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import invoke_fleet as fleet
from tests.render.chromium import CHROMIUM, Browser, chromium
from tests.render.fleets import loopback8, loopback8_with_allreduce

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (apt-get install chromium; .ci/run does)"
)

DOM_FACTS = """(() => ({
  text: document.body.innerText,
  lines: Array.from(document.querySelectorAll('svg path.line')).map(p => ({
    cls: p.getAttribute('class'), d: p.getAttribute('d'), host: p.textContent,
    length: p.getTotalLength()})),
  charts: document.querySelectorAll('svg.chart').length,
  openDetails: document.querySelectorAll('main details[open]').length,
  background: getComputedStyle(document.body).backgroundColor,
}))()"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as started:
        yield started


def written_report(tmp_path: Path, document: dict[str, Any]) -> Path:
    run = tmp_path / "run.json"
    run.write_text(json.dumps(document))
    page = tmp_path / "r.html"
    done = fleet(tmp_path, "report", str(run), "-o", str(page))
    assert done.returncode == 0, done.stderr
    return page


def test_the_report_of_8_loopback_hosts_opens_clean_and_names_the_odd_ones(
    tmp_path: Path, browser: Browser
) -> None:
    path = written_report(tmp_path, loopback8_with_allreduce())
    page = browser.open_page(path)
    assert page.errors == []
    assert page.requests == [path.resolve().as_uri()]  # the file itself, nothing else
    dom = browser.evaluate(page.session, DOM_FACTS)
    assert "odd hosts: gpu-[07-08]" in dom["text"]
    for fact in ("nccl.env.NCCL_P2P_DISABLE", "torch.symmetric_memory.class_name"):
        assert fact in dom["text"]
    assert "gpu-08 3.09× worse" in dom["text"]  # the slow host, named in the legend
    assert dom["charts"] == 4
    assert dom["openDetails"] == 0
    drawn = [line for line in dom["lines"] if line["length"] > 50]
    per_chart = 7 + 1 + 1  # the hosts within tolerance, the median, gpu-08
    assert len(drawn) == len(dom["lines"]) == 4 * per_chart
    assert {line["host"] for line in drawn if "odd" in line["cls"]} == {"gpu-08"}


def test_the_page_scripts_filter_sort_fold_and_print(tmp_path: Path, browser: Browser) -> None:
    path = written_report(tmp_path, loopback8())
    page = browser.open_page(path)
    script = """(() => {
      const filter = document.getElementById('filter');
      filter.value = 'gpu-07'; filter.dispatchEvent(new Event('input'));
      const shown = Array.from(document.querySelectorAll('#host-details > details'))
        .filter(d => !d.hidden).map(d => d.dataset.key);
      filter.value = ''; filter.dispatchEvent(new Event('input'));
      document.getElementById('open-all').click();
      const opened = document.querySelectorAll('main details:not([open])').length;
      document.getElementById('close-all').click();
      const th = document.querySelector('table.sortable th'); th.click(); th.click();
      return {shown, opened};
    })()"""
    result = browser.evaluate(page.session, script)
    assert result == {"shown": ["gpu-07"], "opened": 0}
    pdf = browser.send("Page.printToPDF", {}, session=page.session)
    assert base64.b64decode(pdf["data"]).startswith(b"%PDF")
    assert browser.page(page.session).errors == []


def test_dark_mode_changes_the_colours(tmp_path: Path, browser: Browser) -> None:
    path = written_report(tmp_path, loopback8())
    page = browser.open_page(path)
    light = browser.evaluate(page.session, DOM_FACTS)["background"]
    media = {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    browser.send("Emulation.setEmulatedMedia", media, session=page.session)
    dark = browser.evaluate(page.session, DOM_FACTS)["background"]
    assert light == "rgb(255, 255, 255)"
    assert dark != light
