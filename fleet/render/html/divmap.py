"""The divergence map of the HTML report: divergent facts × host groups as a heatmap.

Hosts are grouped by how they answer every divergent fact (one column per distinct answer, the
biggest group first), so 1,000 hosts with two odd ones make three columns, not 1,000. A cell is
the majority value (`=`), another value (`≠`) or nothing reported (`–`); each opens its value.
Name-list differences (dir() dumps, arch lists) follow item by item.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fleet.analysis.diff import (
    Divergence,
    DivergenceGroup,
    FleetDiff,
    SetDivergence,
    group_divergences,
    list_delta,
)
from fleet.hostsets import compact_hosts
from fleet.render.grouping import short
from fleet.render.html.markup import clip, esc, folded, hosts_label, row, table

MAX_COLUMNS = 24  # host groups shown; smaller ones fold into one last column
MAX_ITEMS = 200  # name-list items listed per fact
MARK = {"maj": "=", "odd": "≠", "none": "–", "mixed": "?"}


@dataclass(frozen=True)
class Cell:
    kind: str  # maj | odd | none | mixed
    text: str  # short, in the cell
    full: str  # opened from the cell


NOT_REPORTED = Cell("none", "not reported", "this host did not report the fact")


@dataclass(frozen=True)
class MapRow:
    fact: str
    note: str
    cells: dict[str, Cell]  # host → cell; hosts missing here did not report the fact


def value_text(value: object) -> str:
    return "(unset)" if value is None else str(value)


def divergence_row(item: Divergence, fact: str | None = None, note: str = "") -> MapRow:
    cells = {
        h: Cell("maj", short(item.majority), value_text(item.majority)) for h in item.majority_hosts
    }
    for value, hosts in item.others:
        delta = list_delta(item.majority, value)
        full = f"{value_text(value)}\n\nmajority: {value_text(item.majority)}"
        cell = Cell("odd", delta or short(value), full)
        cells.update(dict.fromkeys(hosts, cell))
    return MapRow(fact or item.fact, note, cells)


def group_row(item: DivergenceGroup) -> MapRow:
    if item.uniform:
        return divergence_row(item.items[0], item.parent, f"{len(item.items)} devices alike")
    differing = set(item.differing_hosts)
    cells: dict[str, Cell] = {}
    for divergence in item.items:
        for host in (*divergence.majority_hosts, *(h for _, hs in divergence.others for h in hs)):
            cells.setdefault(host, Cell("maj", "majority", "as the majority on every device"))
    odd = Cell("odd", "differs", f"differs on some of {len(item.items)} devices: see the raw data")
    cells.update(dict.fromkeys(differing, odd))
    return MapRow(item.parent, f"{len(item.items)} facts by device, values vary", cells)


def set_row(item: SetDivergence) -> MapRow:
    missing: dict[str, list[str]] = defaultdict(list)
    extra: dict[str, list[str]] = defaultdict(list)
    for name, hosts in item.missing:
        for host in hosts:
            missing[host].append(name)
    for name, hosts in item.extra:
        for host in hosts:
            extra[host].append(name)
    cells = {h: Cell("maj", "majority set", "has every name the majority has") for h in item.hosts}
    for host in item.differing_hosts:
        change = [f"−{n}" for n in missing[host]] + [f"+{n}" for n in extra[host]]
        cells[host] = Cell("odd", short(" ".join(change)), "\n".join(change))
    return MapRow(item.fact, f"names, {len(item.hosts)} hosts", cells)


def map_rows(diff: FleetDiff) -> list[MapRow]:
    rows: list[MapRow] = []
    for item in group_divergences(diff.values):
        rows.append(group_row(item) if isinstance(item, DivergenceGroup) else divergence_row(item))
    rows += [set_row(item) for item in diff.sets]
    return rows


def host_columns(rows: Sequence[MapRow], hosts: Iterable[str]) -> list[tuple[str, ...]]:
    """Hosts grouped by their cells across every row; the biggest group first."""
    by_answer: dict[tuple[Cell, ...], list[str]] = defaultdict(list)
    for host in hosts:
        by_answer[tuple(r.cells.get(host, NOT_REPORTED) for r in rows)].append(host)
    return sorted((tuple(g) for g in by_answer.values()), key=lambda g: (-len(g), g[0]))


# ------------------------------------------------------------------------------------ markup


def divergence_map(diff: FleetDiff, compared: Sequence[str]) -> str:
    rows = map_rows(diff)
    if not rows:
        return '<p class="ok">no divergence: every compared fact is the same on every host that reported it</p>'
    columns = host_columns(rows, compared)
    note = ""
    if len(columns) > MAX_COLUMNS:
        rest = [h for group in columns[MAX_COLUMNS - 1 :] for h in group]
        note = (
            f'<p class="note">{len(columns)} distinct host groups: the {len(columns) - MAX_COLUMNS + 1} '
            f"smallest ({len(rest)} hosts) share the last column.</p>"
        )
        columns = [*columns[: MAX_COLUMNS - 1], tuple(rest)]
    head = "".join(
        f'<th class="group" title="{esc(compact_hosts(g))}">{hosts_label(g)}</th>' for g in columns
    )
    body = "".join(_map_row(r, columns) for r in rows)
    legend = (
        '<p class="dim"><span class="cell maj key">=</span> majority value '
        '<span class="cell odd key">≠</span> another value '
        '<span class="cell none key">–</span> not reported · open a cell for its value</p>'
    )
    return (
        f'{note}<div class="scroll"><table class="divmap"><thead><tr><th>fact</th>{head}</tr>'
        f"</thead><tbody>{body}</tbody></table></div>{legend}"
    )


def _map_row(map_row: MapRow, columns: Sequence[tuple[str, ...]]) -> str:
    odd = sorted(h for h, c in map_row.cells.items() if c.kind == "odd")
    cells = []
    for group in columns:
        found = {map_row.cells.get(h, NOT_REPORTED) for h in group}
        cell = (
            found.pop()
            if len(found) == 1
            else Cell("mixed", "varies", "the hosts of this column differ here")
        )
        cells.append(
            f'<td class="cell {cell.kind}"><details><summary>{MARK[cell.kind]} {esc(cell.text)}'
            f'</summary><pre class="value">{esc(clip(cell.full))}</pre></details></td>'
        )
    note = f'<div class="dim">{esc(map_row.note)}</div>' if map_row.note else ""
    fact = (
        f'<th class="fact"><code>{esc(map_row.fact)}</code>{note}'
        f'<div class="odd-hosts">odd: {esc(compact_hosts(odd))}</div></th>'
    )
    return f'<tr data-key="{esc(" ".join([map_row.fact, *odd]))}">{fact}{"".join(cells)}</tr>'


def name_lists(diff: FleetDiff) -> str:
    """Each divergent name list, item by item: which hosts miss a majority name, which have extras."""
    blocks = []
    for item in diff.sets:
        entries = [("missing on", n, hs) for n, hs in item.missing] + [
            ("only on", n, hs) for n, hs in item.extra
        ]
        rows = [
            row([f"<code>{esc(name)}</code>", esc(kind), hosts_label(hosts)], " ".join(hosts))
            for kind, name, hosts in entries[:MAX_ITEMS]
        ]
        more = (
            f'<p class="note">{len(entries) - MAX_ITEMS} more items not listed</p>'
            if len(entries) > MAX_ITEMS
            else ""
        )
        summary = (
            f"<code>{esc(item.fact)}</code> · {len(item.missing)} missing, {len(item.extra)} extra "
            f"· odd: {esc(compact_hosts(item.differing_hosts))}"
        )
        blocks.append(
            folded(
                summary, table(["name", "", "hosts"], rows) + more, " ".join(item.differing_hosts)
            )
        )
    return "".join(blocks)
