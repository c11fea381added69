"""`fleet fabric` on the terminal: the pair matrix (up to 16 hosts), else the distribution; the
full-group result; the suspects; the pairs that failed or were skipped, with why."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from fleet.hostsets import compact_hosts
from fleet.render.grouping import measured_groups, skipped_by_reason

MATRIX_MAX_HOSTS = 16
STATUS_STYLE = {"ok": "green", "failed": "red", "timeout": "red", "skipped": "yellow"}


def fabric_view(section: Mapping[str, Any], host_names: Sequence[str]) -> RenderableType:
    if section.get("pair_mode") == "isolate":
        return isolate_view(section)
    pairs = list(section.get("pairs") or [])
    parts: list[RenderableType] = [headline(section)]
    if not measured_groups(section):
        return Group(*parts, *hosts_left_out(section), nothing_measured(section))
    if len(host_names) <= MATRIX_MAX_HOSTS:
        limit = (section.get("median_busbw_gbps") or 0) / (
            1 + float(section.get("tolerance") or 0.25)
        )
        parts += [Text("busbw GB/s per pair", "bold"), pair_matrix(pairs, host_names, limit)]
    else:
        parts.append(distribution(pairs))
    parts.append(ring_line(section.get("ring")))
    parts += trouble_lines(pairs, section.get("skipped_hosts") or {})
    parts += hosts_left_out(section)
    parts += suspect_lines(section.get("suspects") or [])
    return Group(*parts)


def hosts_left_out(section: Mapping[str, Any]) -> list[Text]:
    """The hosts that took no part, each reason once with its hosts folded."""
    return [
        Text(f"could not run on {compact_hosts(hosts)} ({len(hosts)}): {why}", "yellow")
        for hosts, why in skipped_by_reason(section.get("skipped_hosts"))
    ]


def nothing_measured(section: Mapping[str, Any]) -> Text:
    """Never read as healthy: no group ran to the end, so nothing is known of the fabric."""
    suspects = section.get("suspects") or []
    named = f"; {len(suspects)} host(s) not reached" if suspects else ""
    return Text(f"nothing measured: no group ran to the end{named}", "bold red")


def headline(section: Mapping[str, Any]) -> Text:
    pairs = section.get("pairs") or []
    counts: dict[str, int] = {}
    for pair in pairs:
        counts[pair["status"]] = counts.get(pair["status"], 0) + 1
    median = section.get("median_busbw_gbps")
    text = Text(f"fabric  {section.get('backend')}  pairs {section.get('pair_mode')}: ", "bold")
    text.append(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none")
    if median is not None:
        text.append(f"  median busbw {median:.3g} GB/s at {human(section['sizes'][-1])}")
    return text


def pair_matrix(pairs: Sequence[Mapping[str, Any]], names: Sequence[str], floor: float) -> Table:
    """busbw (GB/s) of each measured pair; red when more than the tolerance below the median."""
    cells = {frozenset(p["hosts"]): p for p in pairs}
    table = Table(box=None, pad_edge=False)
    table.add_column("")
    for name in names:
        table.add_column(name, justify="right")
    for row in names:
        table.add_row(row, *(cell(cells.get(frozenset((row, col))), floor) for col in names))
    return table


def cell(pair: Mapping[str, Any] | None, floor: float) -> Text:
    if pair is None:
        return Text("·", "dim")
    if pair["status"] != "ok":
        return Text(pair["status"], STATUS_STYLE.get(pair["status"], "red"))
    busbw = pair.get("busbw_gbps")
    slow = busbw is not None and busbw < floor
    style = "red" if slow or pair.get("correct") is False else "green"
    return Text("wrong" if pair.get("correct") is False else f"{busbw:.3g}", style)


def distribution(pairs: Sequence[Mapping[str, Any]]) -> Text:
    values = sorted(p["busbw_gbps"] for p in pairs if p["status"] == "ok" and p["busbw_gbps"])
    if not values:
        return Text("no pair measured", "red")
    quartiles = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
    return Text(
        f"busbw over {len(values)} pairs (GB/s): min {values[0]:.3g}  p10 {quartiles[0]:.3g}  "
        f"median {statistics.median(values):.3g}  p90 {quartiles[-1]:.3g}  max {values[-1]:.3g}"
    )


def ring_line(ring: Mapping[str, Any] | None) -> Text:
    if not ring:
        return Text("full group: not run", "dim")
    text = Text(f"full group ({len(ring['hosts'])} hosts, {ring.get('ranks')} ranks): ")
    if ring["status"] == "ok":
        correct = "correct" if ring.get("correct") else "WRONG SUMS"
        text.append(
            f"busbw {ring['busbw_gbps']:.3g} GB/s, latency {ring['latency_us']:.1f} µs, {correct}",
            "green" if ring.get("correct") else "red",
        )
    else:
        text.append(
            f"{ring['status']}: {ring.get('error')}", STATUS_STYLE.get(ring["status"], "red")
        )
    return text


def trouble_lines(
    pairs: Sequence[Mapping[str, Any]], left: Mapping[str, Any] | None = None
) -> list[Text]:
    """Groups that failed, or were skipped for a reason not already said by `left_out`."""
    said = set(left or {})
    return [
        Text(
            f"  {' ↔ '.join(p['hosts'])}  {p['status']}: {p.get('error')}",
            STATUS_STYLE.get(p["status"], "red"),
        )
        for p in pairs
        if p["status"] != "ok" and not (p["status"] == "skipped" and set(p["hosts"]) & said)
    ]


def suspect_lines(suspects: Sequence[Mapping[str, Any]]) -> list[Text]:
    if not suspects:
        return [Text("no suspect: every pair within tolerance of the median", "green")]
    lines = [Text("suspects", "bold red")]
    for suspect in suspects:
        lines.append(
            Text(f"  {suspect['kind']:5} {' ↔ '.join(suspect['hosts'])}  {suspect['reason']}")
        )
    return lines


def human(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def render_fabric(console: Console, section: Mapping[str, Any], names: Sequence[str]) -> None:
    console.print(fabric_view(section, names))


# ------------------------------------------------------------------------------ --pairs isolate


def isolate_view(section: Mapping[str, Any]) -> RenderableType:
    """The adaptive search: what it cost against `--pairs all`, each suspect with its evidence,
    what it cleared as noise, the hosts left out."""
    isolate = section.get("isolate") or {}
    parts: list[RenderableType] = [headline(section), cost_line(isolate)]
    parts += hosts_left_out(section)
    if not measured_groups(section):
        return Group(*parts, nothing_measured(section))
    parts += trouble_lines([p for p in section.get("pairs") or [] if p["status"] != "ok"], {})
    suspects = isolate.get("suspects") or []
    unreached = [s for s in section.get("suspects") or [] if s["reason"].startswith("not reached")]
    if not suspects and not unreached:
        parts.append(Text("no suspect: every group within tolerance of the expected", "green"))
    parts += suspect_lines(unreached) if unreached else []
    for suspect in suspects:
        parts += evidence_lines(suspect)
    for cleared in isolate.get("cleared") or []:
        parts.append(Text(f"cleared {' ↔ '.join(cleared['hosts'])}: {cleared['reason']}", "dim"))
    return Group(*parts)


def cost_line(isolate: Mapping[str, Any]) -> Text:
    every = isolate.get("pairs_all") or {}
    return Text(
        f"isolate: {isolate.get('rounds', 0)} rounds, {isolate.get('group_runs', 0)} group runs "
        f"over {isolate.get('hosts', 0)} hosts (--pairs all: {every.get('rounds', 0):,} rounds, "
        f"{every.get('group_runs', 0):,} pairs); {isolate.get('links_tested', 0):,} links tested"
    )


def evidence_lines(suspect: Mapping[str, Any]) -> list[Text]:
    lines = [
        Text(
            f"suspect {suspect['kind']} {' ↔ '.join(suspect['hosts'])}: {suspect['reason']}",
            "bold red",
        )
    ]
    for run in suspect.get("evidence") or []:
        busbw, expected = run.get("busbw_gbps"), run.get("expected_gbps")
        measured = "no result" if busbw is None else f"{busbw:.3g} GB/s"
        versus = "" if expected is None else f" vs ≥ {expected:.3g} expected"
        hosts = run["hosts"]
        names = " ↔ ".join(hosts) if len(hosts) <= 4 else f"{compact_hosts(hosts)} ({len(hosts)})"
        lines.append(
            Text(
                f"    round {run['round']} {run['purpose']:7} {names}: {measured}{versus}"
                + (f" — {run['why']}" if run.get("why") and busbw is None else ""),
                "red" if run.get("bad") else "green",
            )
        )
    return lines
