"""One self-contained HTML page per run: `fleet report`, `--html FILE` on probe and check.

Inline CSS, inline SVG charts (fleet/render/html/svg.py) and a few lines of plain JavaScript (sorting,
filtering, folding); nothing is loaded from anywhere, so the page works on an air-gapped cluster and
from a ticket attachment. Light and dark (prefers-color-scheme), and it prints. Every text that came
from the run is escaped. Big fleets stay small: hosts that ended alike share a row (the terminal's
grouping), the divergence map has one column per distinct answer, curves turn into a band above 64
hosts, and the raw data of the drill-down has a size budget.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.analysis.across_runs.drift import Drift
from fleet.analysis.baselines.judge import BaselineJudgement
from fleet.checks import CheckReport
from fleet.errors import ReportError
from fleet.findings.model import Finding
from fleet.hostsets import compact_hosts, count_hosts
from fleet.models import HostOutcome, Run
from fleet.registry import parts
from fleet.render.grouping import check_verdict, ended_alike
from fleet.render.html.divmap import divergence_map, name_lists
from fleet.render.html.findings import findings_section
from fleet.render.html.markup import chip, esc, hosts_label, row, section, table
from fleet.render.html.sections import (
    checks_section,
    drift_section,
    drilldown_section,
    unreported_section,
)

# What each bit of fleet's exit code means (README, "Exit codes").
EXIT_BITS = (
    (2, "usage or inventory error"),
    (4, "some host not reached"),
    (8, "some probe failed or timed out"),
    (16, "drift against the baseline"),
    (32, "a check rule of severity error failed"),
    (64, "the run could not be kept"),
)


@dataclass(frozen=True)
class Report:
    """Everything one page shows; only the run and its diff are required."""

    run: Run
    diff: FleetDiff
    drift: Drift | None = None
    checks: CheckReport | None = None
    fabric: object = None  # the run document's `fabric` section, read defensively
    exit_code: int | None = None
    source: str | None = None  # where the run came from (a file, a saved run)
    baseline: BaselineJudgement | None = None  # its bands drawn behind the curves
    findings: Sequence[Finding] = ()  # what is wrong, where, what to do: the page's first section


def exit_meaning(code: int) -> str:
    if code == 0:
        return "every host ok"
    if code == 130:
        return "interrupted"
    meanings = [text for bit, text in EXIT_BITS if code & bit]
    return "; ".join(meanings) or "unknown"


def render_html(report: Report) -> str:
    body = [_header(report), _nav(report), "<main>", *_sections(report), "</main>", _footer(report)]
    title = f"fleet report · {count_hosts(len(report.run.hosts))} · {report.run.started}"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="color-scheme" content="light dark"><title>{esc(title)}</title>'
        f"<style>{CSS}</style></head><body>{''.join(body)}<script>{JS}</script></body></html>"
    )


def write_html(report: Report, path: Path) -> Path:
    """Write the page atomically enough for a report: a temp file renamed over the target. Mode
    0600 whatever the umask, like saved runs and --json: the page holds every host's data."""
    text = render_html(report)
    partial = path.with_name(f".{path.name}.partial")
    try:
        descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(partial, 0o600)  # an older file of that name keeps its mode through O_TRUNC
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ReportError(
            f"cannot write the HTML report to {path}: {exc.strerror}",
            hint="is the folder there and writable?",
        ) from exc
    return path


# ------------------------------------------------------------------------------------ header


def _header(report: Report) -> str:
    run, diff = report.run, report.diff
    statuses = Counter(o.status for o in run.hosts.values())
    chips = " ".join(chip(s, f"{n} {s}") for s, n in statuses.most_common())
    facts = [
        (
            "when",
            f"{esc(run.started)} → {esc(run.finished)}{' (interrupted)' if run.interrupted else ''}",
        ),
        ("source", esc(report.source or run.inventory or "—")),
        ("hosts", f"{len(run.hosts)} · {chips}"),
        ("probes", esc(", ".join(run.probes) or "—")),
    ]
    if report.exit_code is not None:
        facts.append(
            ("exit code", f"<b>{report.exit_code}</b> · {esc(exit_meaning(report.exit_code))}")
        )
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    return (
        f'<header><h1>fleet report</h1><dl class="facts">{items}</dl>{_verdict(report, diff)}'
        '<div class="toolbar"><input id="filter" type="search" placeholder="filter hosts or facts…" '
        'aria-label="filter hosts or facts"><button id="open-all" type="button">unfold all</button>'
        '<button id="close-all" type="button">fold all</button></div></header>'
    )


def _verdict(report: Report, diff: FleetDiff) -> str:
    lines = []
    facts = len(diff.values) + len(diff.sets)
    if diff.odd_hosts:
        lines.append(
            f'<p class="verdict odd">odd hosts: <b>{esc(compact_hosts(diff.odd_hosts))}</b> · '
            f"{facts} fact(s) differ · {len({o.host for o in diff.outliers})} slow host(s)</p>"
        )
    elif len(diff.hosts) > 1 and diff.clean:
        lines.append('<p class="verdict ok">no divergence between the hosts that reported</p>')
    elif len(diff.hosts) > 1:
        what = "the hosts are split" if diff.in_cohorts else "each cohort alike within"
        lines.append(f'<p class="verdict odd">no odd host: {what} · {facts} fact(s) differ</p>')
    trouble = [o.name for o in report.run.hosts.values() if o.status != "ok"]
    if trouble:
        lines.append(f'<p class="verdict bad">not ok: <b>{esc(compact_hosts(trouble))}</b></p>')
    if report.checks is not None:
        outcome, headline, detail = check_verdict(report.checks)
        css = {"failed": "bad", "incomplete": "odd", "passed": "ok"}[outcome]
        lines.append(f'<p class="verdict {css}"><b>{esc(headline)}</b>: {esc(detail)}</p>')
    if report.drift is not None and report.drift.found:
        lines.append(
            f'<p class="verdict odd">drift on {esc(compact_hosts(report.drift.changed_hosts))}</p>'
        )
    return "".join(lines)


def _present(report: Report) -> list[tuple[str, str]]:
    """(anchor, title) of the sections this page has, in order."""
    found = [("findings", "findings"), ("hosts", "hosts"), ("divergence", "divergence")]
    if report.diff.sets:
        found.append(("names", "name lists"))
    found += [(unit.ANCHOR, unit.NAV) for _, unit in parts("html") if unit.shown(report)]
    if report.checks is not None:
        found.append(("checks", "checks"))
    if report.drift is not None:
        found.append(("drift", "drift"))
    if report.diff.unreported:
        found.append(("not-compared", "not compared"))
    found.append(("host-details", "per host"))
    return found


def _nav(report: Report) -> str:
    links = "".join(f'<a href="#{a}">{esc(t)}</a>' for a, t in _present(report))
    return f"<nav>{links}</nav>"


def _footer(report: Report) -> str:
    run = report.run
    made = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
    return (
        f"<footer>fleet {esc(run.fleet_version)} · bundle {esc(run.bundle_sha256[:12])} · "
        f"page written {made}</footer>"
    )


# ---------------------------------------------------------------------------------- sections


def _sections(report: Report) -> list[str]:
    run, diff = report.run, report.diff
    unreached = {u.host for u in diff.unreported if u.probe is None}
    compared = [h for h in diff.hosts if h not in unreached]
    sections = [
        section("findings", "findings", findings_section(report.findings, report.exit_code),
                "what is wrong, where, and what to do, most severe first"),
        section("hosts", "hosts by outcome", _hosts(list(run.hosts.values())),
                "hosts that ended alike share a row; trouble first"),
        section("divergence", "divergence map", divergence_map(diff, compared),
                "each divergent fact against the host groups that answer it alike"),
    ]  # fmt: skip
    if diff.sets:
        sections.append(section("names", "name lists, item by item", name_lists(diff)))
    for _, unit in parts("html"):  # each probe's own section (fleet/units/PROBE/html.py)
        body = unit.body(report)
        if body is not None:
            sections.append(section(unit.ANCHOR, unit.TITLE, body, unit.INTRO))
    if report.checks is not None:
        sections.append(section("checks", "check verdicts", checks_section(report.checks)))
    if report.drift is not None:
        sections.append(section("drift", "drift against the baseline", drift_section(report.drift)))
    if diff.unreported:
        sections.append(section("not-compared", "not compared", unreported_section(diff.unreported),
                                "hosts not reached, and probes that did not report, with why"))  # fmt: skip
    first = [*diff.odd_hosts, *(o.name for o in run.hosts.values() if o.status != "ok")]
    sections.append(section("host-details", "per host", drilldown_section(list(run.hosts.values()), first),
                            "each host's probes, errors and raw data (folded)"))  # fmt: skip
    return sections


def _hosts(outcomes: list[HostOutcome]) -> str:
    rows = [_hosts_row(group) for group in ended_alike(outcomes)] if outcomes else []
    return table(["hosts", "status", "elapsed", "probes ok", "error / hint"], rows)


def _hosts_row(group: Sequence[HostOutcome]) -> str:
    first = group[0]
    alike = all(o.error == first.error and o.hint == first.hint for o in group)
    note = esc(first.error or "") if alike else f"e.g. {esc(first.error or '')}"
    if first.hint:
        note += f'<div class="hint">hint: {esc(first.hint)}</div>'
    elapsed = sorted(o.elapsed_s for o in group)
    good = sorted(sum(1 for r in o.probes.values() if r.status in ("ok", "absent")) for o in group)
    totals = sorted(len(o.probes) for o in group)
    names = [o.name for o in group]
    cells = [
        hosts_label(names),
        chip(first.status),
        esc(_span([round(e, 1) for e in elapsed], "s")),
        esc(f"{_span(good)}/{_span(totals)}"),
        note,
    ]
    return row(cells, " ".join(names))


def _span(numbers: Sequence[float], unit: str = "") -> str:
    low, high = numbers[0], numbers[-1]
    return f"{low:g}{unit}" if low == high else f"{low:g}–{high:g}{unit}"


def fabric_of(run: Run, document: Mapping[str, object] | None = None) -> object:
    """The run's fabric section, wherever this version of fleet keeps it (the Run, or the raw
    document it was loaded from); None when the run has none."""
    found = getattr(run, "fabric", None)
    if found is None and document is not None:
        found = document.get("fabric")
    return found


CSS = """
:root{--bg:#fff;--fg:#1b1d21;--dim:#5d6470;--line:#d8dbe0;--panel:#f5f6f8;--host:#8a8f98;
--median:#0072B2;--maj:rgba(0,114,178,.13);--oddbg:rgba(230,159,0,.42);--bad:#b3261e;--warn:#8a5a00;
--ok:#1b7f3b;--band:rgba(0,114,178,.16);--basefill:rgba(27,127,59,.12);--acrossbg:rgba(204,121,167,.28)}
@media (prefers-color-scheme:dark){:root{--bg:#15171b;--fg:#e4e6ea;--dim:#9aa1ad;--line:#363a42;
--panel:#1e2127;--host:#7d838d;--median:#56B4E9;--maj:rgba(86,180,233,.16);--oddbg:rgba(230,159,0,.45);
--bad:#ff8a80;--warn:#f0c05a;--ok:#7fd49b;--band:rgba(86,180,233,.2);--basefill:rgba(127,212,155,.14);--acrossbg:rgba(204,121,167,.4)}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
header,main,footer,nav{max-width:1400px;margin:0 auto;padding:0 20px}
header{padding-top:14px}h1{margin:0 0 6px;font-size:22px}h2{font-size:18px;margin:28px 0 6px;
border-bottom:1px solid var(--line);padding-bottom:4px}h3{font-size:15px;margin:16px 0 6px}
code,pre{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
pre{white-space:pre-wrap;word-break:break-word;background:var(--panel);padding:6px 8px;margin:4px 0;
max-height:420px;overflow:auto;border-radius:4px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:6px 0}
dt{color:var(--dim)}dd{margin:0}
.dim{color:var(--dim)}.note{color:var(--warn)}.ok{color:var(--ok)}.error{color:var(--bad);margin:4px 0}
.hint{color:var(--dim)}.intro{color:var(--dim);margin-top:0}
.findings .sev-error{color:var(--bad);font-weight:600}.findings .sev-warning{color:var(--warn)}
.verdict{margin:4px 0;font-size:15px}.verdict.odd b{color:var(--warn)}.verdict.bad b{color:var(--bad)}
.chip{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;border:1px solid currentColor}
.chip.ok{color:var(--ok)}.chip.bad{color:var(--bad);font-weight:600}.chip.warn{color:var(--warn)}
.chip.other{color:var(--dim)}
nav{position:sticky;top:0;background:var(--bg);border-bottom:1px solid var(--line);padding-top:6px;
padding-bottom:6px;z-index:2}nav a{margin-right:14px;color:var(--median);text-decoration:none}
.toolbar{margin:10px 0}.toolbar input{width:280px;padding:4px 8px;background:var(--panel);color:var(--fg);
border:1px solid var(--line);border-radius:4px}.toolbar button{margin-left:8px;padding:4px 10px;
background:var(--panel);color:var(--fg);border:1px solid var(--line);border-radius:4px;cursor:pointer}
table{border-collapse:collapse;margin:6px 0}th,td{border:1px solid var(--line);padding:3px 8px;
text-align:left;vertical-align:top}thead th{background:var(--panel)}
table.sortable thead th{cursor:pointer}table.sortable thead th:after{content:" ↕";color:var(--dim)}
.scroll{overflow-x:auto}
.divmap th.group{max-width:180px;font-weight:500;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.divmap th.fact{max-width:440px;font-weight:400;word-break:break-all}.odd-hosts{color:var(--warn)}
.cell{min-width:90px;max-width:240px}.cell summary{cursor:pointer;list-style:none;overflow:hidden;
text-overflow:ellipsis;white-space:nowrap}.cell summary::-webkit-details-marker{display:none}
.cell.maj{background:var(--maj)}.cell.odd{background:var(--oddbg);font-weight:600}
.cell.across{background:var(--acrossbg)}.divmap th.cohort-head{text-align:center;border-bottom:2px solid var(--median)}
ol.findings{margin:6px 0 12px;padding-left:26px}ol.findings li{margin:2px 0}
.grade{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;border:1px solid currentColor;margin-right:4px}
.grade.g1{color:var(--bad);font-weight:600}.grade.g2{color:var(--warn)}.grade.g3{color:var(--median)}.grade.g4{color:var(--dim)}
.cell.none,.cell.mixed{background:repeating-linear-gradient(45deg,transparent 0 5px,var(--line) 5px 7px)}
.cell .value{max-width:480px}.cell.key{display:inline-block;min-width:0;padding:0 6px;border:1px solid var(--line)}
details{margin:3px 0}summary{cursor:pointer}details>details,details>p,details>pre,details>table{margin-left:18px}
.cohort{margin:10px 0 24px}.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(430px,1fr));gap:10px}
figure{margin:0}figcaption{font-weight:600;margin-bottom:4px}
svg.chart{width:100%;height:auto;display:block;max-width:640px}
svg .axis{stroke:var(--fg);fill:none}svg .grid{stroke:var(--line);stroke-dasharray:2 3}
svg text{fill:var(--fg);font-size:11px}svg .tick{text-anchor:middle;fill:var(--dim)}
svg .tick.y{text-anchor:end}svg .axis-title{text-anchor:middle;font-size:12px}
svg .chart-title{font-weight:600;font-size:12.5px}
.line{fill:none;stroke-width:1.3;stroke-linejoin:round}.line.host{stroke:var(--host);stroke-opacity:.6}
.line.median{stroke:var(--median);stroke-width:3.2}.line.odd{stroke:var(--c);stroke-width:2.2}
.band{fill:var(--band);stroke:none}.band.baseline{fill:var(--basefill);stroke:var(--ok);stroke-dasharray:5 3}
.odd-0{--c:#D55E00}.odd-1{--c:#E69F00;stroke-dasharray:7 3}.odd-2{--c:#CC79A7;stroke-dasharray:2 2}
.odd-3{--c:#009E73;stroke-dasharray:9 3 2 3}.odd-4{--c:#56B4E9;stroke-dasharray:4 4}
.odd-5{--c:#000;stroke-dasharray:1 3}.odd-6{--c:#9b6a00;stroke-dasharray:3 2}
@media (prefers-color-scheme:dark){.odd-5{--c:#F0E442}}
.legend{list-style:none;padding:0;margin:6px 0;display:flex;flex-wrap:wrap;gap:4px 18px}
.swatch{display:inline-block;width:26px;height:0;margin-right:6px;vertical-align:middle;border-top:3px solid var(--c)}
.swatch.host{--c:var(--host);border-top-width:1.5px}.swatch.band{height:10px;border:0;background:var(--band)}.swatch.median{--c:var(--median);border-top-width:4px}
.swatch.band.baseline{background:var(--basefill);border:1px dashed var(--ok)}
.swatch.odd-1,.swatch.odd-2,.swatch.odd-4,.swatch.odd-5{border-top-style:dashed}
footer{color:var(--dim);margin:30px auto 20px;font-size:12px}
[hidden]{display:none!important}
@media print{nav,.toolbar{display:none}body{background:#fff;color:#000;font-size:11px}
:root{--bg:#fff;--fg:#000;--dim:#444;--panel:#f3f3f3;--line:#bbb}
.cohort,figure,tr{break-inside:avoid}h2{break-after:avoid}pre{max-height:none}}
"""

JS = """
(function(){
  function key(row, i){var t=row.cells[i]?row.cells[i].textContent.trim():'';var n=parseFloat(t);return isNaN(n)?t.toLowerCase():n;}
  document.querySelectorAll('table.sortable thead th').forEach(function(th, i){
    th.addEventListener('click', function(){
      var body=th.closest('table').tBodies[0], dir=th.dataset.dir==='asc'?-1:1;
      th.dataset.dir=dir>0?'asc':'desc';
      Array.from(body.rows).sort(function(a, b){
        var x=key(a, i), y=key(b, i);
        if(typeof x!==typeof y){return (typeof x==='number'?-1:1)*dir;}
        return (x<y?-1:x>y?1:0)*dir;
      }).forEach(function(r){body.appendChild(r);});
    });
  });
  var filter=document.getElementById('filter');
  filter.addEventListener('input', function(){
    var q=filter.value.trim().toLowerCase();
    document.querySelectorAll('main [data-key]').forEach(function(e){
      e.hidden=q!=='' && e.dataset.key.toLowerCase().indexOf(q)<0;
    });
  });
  function fold(open){document.querySelectorAll('main details').forEach(function(d){d.open=open;});}
  document.getElementById('open-all').addEventListener('click', function(){fold(true);});
  document.getElementById('close-all').addEventListener('click', function(){fold(false);});
  var opened=[];
  window.addEventListener('beforeprint', function(){
    document.querySelectorAll('main details:not([open])').forEach(function(d){
      if(!d.closest('#host-details')){d.open=true;opened.push(d);}
    });
  });
  window.addEventListener('afterprint', function(){opened.forEach(function(d){d.open=false;});opened=[];});
})();
"""
