"""The fabric section of the HTML report: the pair matrix, the suspects, the ring, the hosts left out.

Reads the run document's `fabric` section (written by `fleet fabric`: `pairs` of
`{hosts: [a, b], status, busbw_gbps, latency_us, correct, error}`, `ring`, `suspects` of
`{kind, hosts, reason, factor}`, `median_busbw_gbps`, `tolerance`, `skipped_hosts`) defensively:
any field may be missing or of another type (an older or newer fleet wrote it), and is then shown
as it is, never raised on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fleet.render.grouping import measured_groups, skipped_by_reason
from fleet.render.html.markup import clip, esc, hosts_label, row, table

if TYPE_CHECKING:
    from fleet.render.html.page import Report

ANCHOR = "fabric"
NAV = "fabric"
TITLE = "fabric"
INTRO = ""  # the section's summary says what the run was


def shown(report: Report) -> bool:
    return report.fabric is not None


def body(report: Report) -> str | None:
    return fabric_section(report.fabric) if report.fabric is not None else None


MAX_MATRIX_HOSTS = 48  # a host × host matrix up to here; beyond, the pairs that are not fine
SUMMARY_FIELDS = ("backend", "pair_mode", "median_busbw_gbps", "tolerance")
RING_FIELDS = ("status", "ranks", "busbw_gbps", "latency_us", "correct", "error")


def fabric_section(fabric: object) -> str:
    if not isinstance(fabric, Mapping):
        return f'<p class="note">a fabric section that is not a mapping: {esc(clip(repr(fabric), 400))}</p>'
    pairs = [p for p in _list(fabric.get("pairs")) if isinstance(p, Mapping)]
    slow_below = _slow_below(fabric)
    if not measured_groups(fabric):
        verdict = '<p class="bad">nothing measured: no group ran to the end</p>'
    else:
        verdict = _suspects(fabric.get("suspects"))
    isolate = fabric.get("isolate")
    return "".join(
        [
            _summary(fabric),
            verdict,
            _isolate(isolate) if isinstance(isolate, Mapping) else _pair_view(pairs, slow_below),
            _ring(fabric.get("ring")),
            _skipped(fabric.get("skipped_hosts")),
        ]
    )


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def plain_text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        return repr(value)


def _slow_below(fabric: Mapping[str, Any]) -> float | None:
    """A pair below this bus bandwidth is beyond tolerance (median / (1 + tolerance))."""
    median, tolerance = _number(fabric.get("median_busbw_gbps")), _number(fabric.get("tolerance"))
    if median is None:
        return None
    return median / (1 + (tolerance if tolerance is not None else 0.25))


def _summary(fabric: Mapping[str, Any]) -> str:
    found = [(k, fabric[k]) for k in SUMMARY_FIELDS if fabric.get(k) is not None]
    text = " · ".join(f"{k.replace('_', ' ')} {plain_text(v)}" for k, v in found)
    return f'<p class="dim">{esc(text)}</p>' if text else ""


def _suspects(suspects: object) -> str:
    if not _list(suspects):
        return '<p class="ok">no suspects: every measured pair within tolerance</p>'
    items = []
    for suspect in _list(suspects):
        if isinstance(suspect, Mapping) and isinstance(suspect.get("hosts"), list):
            factor = _number(suspect.get("factor"))
            slower = f" · {factor:g}× slower than the median" if factor is not None else ""
            items.append(
                f"<li><b>{esc(suspect.get('kind', 'suspect'))}</b> "
                f"{hosts_label(str(h) for h in suspect['hosts'])}: "
                f"{esc(clip(plain_text(suspect.get('reason', '')), 600))}{esc(slower)}</li>"
            )
        else:
            items.append(f"<li>{esc(clip(plain_text(suspect), 600))}</li>")
    return f'<h3>suspects</h3><ul class="suspects">{"".join(items)}</ul>'


def pair_ends(pair: Mapping[str, Any]) -> tuple[str, str]:
    """The two hosts of a pair: `hosts: [a, b]`, or `a` and `b`."""
    hosts = pair.get("hosts")
    if isinstance(hosts, list) and len(hosts) == 2:
        return str(hosts[0]), str(hosts[1])
    return str(pair.get("a")), str(pair.get("b"))


def pair_kind(pair: Mapping[str, Any], slow_below: float | None) -> str:
    """maj: fine; odd: failed, wrong or beyond tolerance; none: not measured (skipped)."""
    status = pair.get("status")
    if status in ("skipped", "interrupted"):
        return "none"
    if status != "ok" or pair.get("correct") is False:
        return "odd"
    busbw = _number(pair.get("busbw_gbps"))
    return "odd" if slow_below is not None and busbw is not None and busbw < slow_below else "maj"


def _pair_text(pair: Mapping[str, Any]) -> str:
    fields = ("status", "busbw_gbps", "latency_us", "correct", "error")
    return "\n".join(f"{f}: {plain_text(pair.get(f))}" for f in fields if f in pair)


def _pair_view(pairs: list[Mapping[str, Any]], slow_below: float | None) -> str:
    if not pairs:
        return '<p class="dim">no pair results</p>'
    hosts = sorted({end for p in pairs for end in pair_ends(p)})
    if len(hosts) > MAX_MATRIX_HOSTS:
        return _pair_list(pairs, slow_below, len(hosts))
    cells: dict[tuple[str, str], Mapping[str, Any]] = {}
    for pair in pairs:
        a, b = pair_ends(pair)
        cells[(a, b)] = cells[(b, a)] = pair
    head = "".join(f'<th class="group">{esc(h)}</th>' for h in hosts)
    body = "".join(
        f"<tr><th>{esc(a)}</th>{''.join(_pair_cell(cells.get((a, b)), slow_below) for b in hosts)}</tr>"
        for a in hosts
    )
    return (
        f'<h3>pairs</h3><div class="scroll"><table class="divmap pairs"><thead><tr><th></th>{head}'
        f"</tr></thead><tbody>{body}</tbody></table></div>"
        '<p class="dim">each cell: the pair\'s bus bandwidth (GB/s); <span class="cell odd key">≠</span> '
        'failed, wrong or beyond tolerance; <span class="cell none key">–</span> not measured; '
        "open a cell for the details</p>"
    )


def _pair_list(pairs: list[Mapping[str, Any]], slow_below: float | None, hosts: int) -> str:
    bad = [p for p in pairs if pair_kind(p, slow_below) == "odd"]
    rows = [
        row(
            [esc(" ↔ ".join(pair_ends(p))), f"<pre>{esc(_pair_text(p))}</pre>"],
            " ".join(pair_ends(p)),
        )
        for p in bad
    ]
    note = (
        f'<p class="note">{hosts} hosts: too many for a matrix; the {len(bad)} pair(s) failed, wrong or '
        f"beyond tolerance are listed (of {len(pairs)}).</p>"
    )
    return note + (table(["pair", "result"], rows) if rows else "")


def _pair_cell(pair: Mapping[str, Any] | None, slow_below: float | None) -> str:
    if pair is None:
        return '<td class="cell none"></td>'
    busbw = _number(pair.get("busbw_gbps"))
    text = f"{busbw:.3g}" if busbw is not None else esc(pair.get("status"))
    kind = pair_kind(pair, slow_below)
    mark = {"odd": "≠ ", "none": "– "}.get(kind, "")
    return (
        f'<td class="cell {kind}"><details><summary>{mark}{text}</summary>'
        f'<pre class="value">{esc(_pair_text(pair))}</pre></details></td>'
    )


def _ring(ring: object) -> str:
    if not isinstance(ring, Mapping) or not ring:
        return ""
    rows = [row([esc(k), esc(clip(plain_text(ring[k]), 400))]) for k in RING_FIELDS if k in ring]
    hosts = ring.get("hosts")
    if isinstance(hosts, list):
        rows.insert(0, row(["hosts", hosts_label(str(h) for h in hosts)]))
    return f"<h3>ring</h3>{table(['', ''], rows, css='plain')}"


def _skipped(skipped: object) -> str:
    if not isinstance(skipped, Mapping) or not skipped:
        return ""
    folded = skipped_by_reason(skipped)
    rows = [row([hosts_label(h), esc(clip(why, 400))], " ".join(h)) for h, why in folded]
    return f"<h3>hosts left out of the fabric test</h3>{table(['hosts', 'why'], rows)}"


def _isolate(isolate: Mapping[str, Any]) -> str:
    """--pairs isolate: its cost beside --pairs all's, and each suspect's evidence."""
    every = isolate.get("pairs_all") if isinstance(isolate.get("pairs_all"), Mapping) else {}
    assert isinstance(every, Mapping)
    cost = (
        f"isolate: {plain_text(isolate.get('rounds'))} rounds, "
        f"{plain_text(isolate.get('group_runs'))} group runs over "
        f"{plain_text(isolate.get('hosts'))} hosts; --pairs all: "
        f"{plain_text(every.get('rounds'))} rounds, {plain_text(every.get('group_runs'))} pairs"
    )
    parts = [f'<p class="dim">{esc(cost)}</p>']
    for suspect in _list(isolate.get("suspects")) + _list(isolate.get("cleared")):
        if isinstance(suspect, Mapping) and isinstance(suspect.get("hosts"), list):
            parts.append(_evidence(suspect))
    return "".join(parts)


def _evidence(suspect: Mapping[str, Any]) -> str:
    rows = []
    for run in _list(suspect.get("evidence")):
        if not isinstance(run, Mapping):
            continue
        hosts = [str(h) for h in _list(run.get("hosts"))]
        cells = [
            esc(plain_text(run.get("round"))),
            esc(plain_text(run.get("purpose"))),
            hosts_label(hosts),
            esc(plain_text(run.get("busbw_gbps"))),
            esc(plain_text(run.get("expected_gbps"))),
            esc(clip(plain_text(run.get("why") or "fine"), 300)),
        ]
        rows.append(row(cells, " ".join(hosts)))
    head = f"{plain_text(suspect.get('kind'))} {' ↔ '.join(map(str, suspect['hosts']))}"
    headers = ["round", "purpose", "group", "busbw GB/s", "expected ≥", "verdict"]
    return (
        f"<h3>{esc(head)}</h3><p>{esc(clip(plain_text(suspect.get('reason', '')), 600))}</p>"
        + table(headers, rows)
    )
