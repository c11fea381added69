"""The divergence map of the HTML report: the findings, most serious first, then what they rest on
as a heatmap of facts × hosts, the hosts in cohort columns.

Each cohort (fleet/analysis/across_hosts/cohorts.py) heads its own columns; inside it, hosts are grouped by how
they answer every fact shown (one column per distinct answer, the biggest group first), so 1,000
hosts with two odd ones make a few columns, not 1,000. A cell is the cohort's value (`=`), a value
unlike the rest of its cohort (`≠`), a whole cohort's value unlike the rest of the fleet (`◇`,
software between cohorts) or nothing reported (`–`); each opens its value. The hardware facts that
differ between cohorts, as unlike machines do, are not rows: one line per pair of cohorts says how
many, and a folded table per pair lists them. Name-list differences follow item by item.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from fleet.analysis.across_hosts.diff import (
    Cohort,
    CrossCohort,
    Divergence,
    DivergenceGroup,
    FleetDiff,
    SetDivergence,
    group_divergences,
    list_delta,
)
from fleet.analysis.across_hosts.findings import CHECK, COHORT, HARDWARE, SOFTWARE
from fleet.analysis.across_hosts.majority import rank
from fleet.hostsets import compact_hosts
from fleet.render.grouping import pair_rows, short
from fleet.render.html.markup import clip, esc, folded, hosts_label, row, table

MAX_COLUMNS = 24  # host groups shown; a cohort's smallest ones fold into its last column
MAX_ITEMS = 200  # name-list items listed per fact
FEW_VALUES = 8  # a cohort's values of a fact picked in C, a pass over its hosts each
MARK = {"maj": "=", "odd": "≠", "across": "◇", "none": "–", "mixed": "?"}
GRADE = {CHECK: "check", COHORT: "in cohort", SOFTWARE: "software", HARDWARE: "hardware"}


@dataclass(frozen=True)
class Cell:
    kind: str  # maj | odd | across | none | mixed
    text: str  # short, in the cell
    full: str  # opened from the cell


NOT_REPORTED = Cell("none", "not reported", "this host did not report the fact")


# A row's hosts with one cell: the cell (one object per distinct cell of the row, none equal to
# NOT_REPORTED) and its hosts, as the chunks they were gathered in (shared between the rows that
# split the hosts alike, so a split is indexed once: block_indexes).
Block = tuple[Cell, tuple[Sequence[str], ...]]


@dataclass(frozen=True)
class MapRow:
    fact: str
    note: str
    blocks: tuple[Block, ...]  # hosts missing here did not report the fact

    @property
    def cells(self) -> dict[str, Cell]:
        """host → cell, host by host (the map itself reads the blocks)."""
        return {h: cell for cell, chunks in self.blocks for hosts in chunks for h in hosts}


def blocks_of(pairs: Iterable[tuple[Cell, Sequence[str]]]) -> tuple[Block, ...]:
    """The (cell, hosts) pairs with equal cells merged into one block (the first cell object
    kept), those equal to NOT_REPORTED left out (as hosts that did not report it)."""
    merged: dict[Cell, list[Sequence[str]]] = {}
    for cell, hosts in pairs:
        if hosts and cell != NOT_REPORTED:
            merged.setdefault(cell, []).append(hosts)
    return tuple((cell, tuple(chunks)) for cell, chunks in merged.items())


def value_text(value: object) -> str:
    return "(unset)" if value is None else str(value)


HARDWARE_NOTE = "this cohort's own: it differs from the other cohorts' as unlike machines do"


# a split of the hosts (the ids of a divergence's host tuples) → per cohort: the cohort, its hosts
# there (in the cohort's order) and those hosts by group index (first met first, cohort order)
Splits = dict[tuple[int, ...], list[tuple[Cohort, list[str], list[int], dict[int, list[str]]]]]


def divergence_row(
    item: Divergence,
    cohorts: Sequence[Cohort],
    fact: str | None = None,
    note: str = "",
    across: CrossCohort | None = None,
    splits: Splits | None = None,
) -> MapRow:
    """Each host against its cohort's majority; a cohort's own value unlike the fleet's `across`,
    or, when it differs only as its hardware does (a device it does not have), said so.
    `splits`: the cohorts' hosts by group of the divergences seen so far, by their host tuples
    (facts that split the hosts alike share them: 270 facts of a 20,000-host run, a few splits)."""
    values = [value for value, _ in item.groups]
    fleet = None if item.split else item.majority
    pairs: list[tuple[Cell, Sequence[str]]] = []
    for cohort, here, groups, by_group in _cohort_split(item, cohorts, splits):
        by_value = _by_value(here, groups, values, by_group)
        (only, *others) = by_value
        if not others and only != fleet and across and _hardware_only(across, cohort.name):
            shown = "no such device" if only is None else short(only)  # or its GPU's own value
            pairs.append((Cell("none", shown, f"{value_text(only)}\n\n{HARDWARE_NOTE}"), here))
            continue
        ranking = rank(by_value, ordered=True)  # ordered: no sort of each value's hosts
        split = ranking.split
        typical = ranking.majority[0] if ranking.majority else None
        for value, hosts in by_value.items():  # one cell per value, shared by its hosts
            if split or value != typical:
                peers = "no majority" if split else value_text(typical)
                full = f"{value_text(value)}\n\nthe rest of {cohort.short}: {peers}"
                cell = Cell("odd", list_delta(typical, value) or short(value), full)
            elif not item.split and value != fleet:
                full = f"{value_text(value)} on every host of {cohort.short}\n\nmost hosts: {value_text(fleet)}"
                cell = Cell("across", short(value), full)
            else:
                cell = Cell("maj", short(value), value_text(value))
            pairs.append((cell, hosts))
    return MapRow(fact or item.fact, note, blocks_of(pairs))


def _cohort_split(
    item: Divergence, cohorts: Sequence[Cohort], splits: Splits | None
) -> list[tuple[Cohort, list[str], list[int], dict[int, list[str]]]]:
    """Per cohort with hosts in `item`: those hosts, each one's group index, and the hosts by
    group index (made in C, a group at a time; once per split where `splits` keeps them)."""
    key = tuple(id(hosts) for _, hosts in item.groups)  # the tuples outlive `splits`
    found = None if splits is None else splits.get(key)
    if found is not None:
        return found
    group_of: dict[str, int] = {}  # host → its group's index
    for index, (_, members) in enumerate(item.groups):
        group_of.update(dict.fromkeys(members, index))
    found = []
    for cohort in cohorts:
        here = list(filter(group_of.__contains__, cohort.hosts))
        if here:
            groups = list(map(group_of.__getitem__, here))
            found.append((cohort, here, groups, _by_group(here, groups)))
    if splits is not None:
        splits[key] = found
    return found


def _by_group(hosts: list[str], groups: list[int]) -> dict[int, list[str]]:
    """The hosts by group index (`groups[i]` is host `hosts[i]`'s), each list in the hosts'
    order, the groups in the order first met: picked in C, a pass per group."""
    met = dict.fromkeys(groups)
    if len(met) <= FEW_VALUES:
        return {index: list(itertools.compress(hosts, map(index.__eq__, groups))) for index in met}
    by_group: dict[int, list[str]] = defaultdict(list)
    for host, index in zip(hosts, groups):
        by_group[index].append(host)
    return by_group


def _by_value(
    hosts: list[str],
    groups: list[int],
    values: Sequence[object],
    by_group: dict[int, list[str]],
) -> dict[object, list[str]]:
    """The hosts by their value (`values[groups[i]]` is host `hosts[i]`'s), each list in the
    hosts' order, the values in the order first met. The lists are `by_group`'s (not to be
    changed) unless groups hold equal values (1 and 1.0): those are gathered host by host."""
    by_value = {values[index]: members for index, members in by_group.items()}
    if len(by_value) == len(by_group):
        return by_value
    gathered: dict[object, list[str]] = defaultdict(list)
    for host, index in zip(hosts, groups):
        gathered[values[index]].append(host)
    return gathered


def _hardware_only(across: CrossCohort, cohort: str) -> bool:
    """The cohort differs from the others on this fact only as its hardware does."""
    mine = [pair for pair in across.pairs if cohort in pair]
    return bool(mine) and all(pair in across.hardware for pair in mine)


def group_row(
    item: DivergenceGroup,
    cohorts: Sequence[Cohort],
    across: dict[str, CrossCohort],
    splits: Splits | None = None,
) -> MapRow:
    if item.uniform:
        first = item.items[0]
        note = f"{len(item.items)} devices alike"
        return divergence_row(first, cohorts, item.parent, note, across.get(first.fact), splits)
    # every host of the items (their host tuples, each once: the items often split alike)
    tuples = {id(hosts): hosts for divergence in item.items for _, hosts in divergence.groups}
    everyone = dict.fromkeys(itertools.chain.from_iterable(tuples.values()))
    differing = item.differing_hosts
    for host in differing:
        del everyone[host]
    majority = Cell("maj", "majority", "as the majority on every device")
    odd = Cell("odd", "differs", f"differs on some of {len(item.items)} devices: see the raw data")
    blocks = blocks_of([(majority, list(everyone)), (odd, differing)])
    return MapRow(item.parent, f"{len(item.items)} facts by device, values vary", blocks)


def set_row(
    item: SetDivergence, within: dict[str, SetDivergence], diff: FleetDiff | None = None
) -> MapRow:
    """Each host's names against its cohort's: `within` (cohort → the names split there); with
    `diff`, whole cohorts whose names differ from the first cohort's (across_set_cells)."""
    cells = set_cells(item, within)
    if diff is not None:
        across_set_cells(item, diff, cells)
    return MapRow(item.fact, f"names, {len(item.hosts)} hosts", _blocks_by_host(cells))


def set_cells(item: SetDivergence, within: dict[str, SetDivergence]) -> dict[str, Cell]:
    """host → its cell in a name list's row: one cell object per distinct cell."""
    cells = dict.fromkeys(item.hosts, Cell("maj", "cohort's set", "has every name its cohort has"))
    odd: dict[tuple[str, ...], Cell] = {}
    for names in within.values():
        missing, extra = _names_by_host(names.missing, "−"), _names_by_host(names.extra, "+")
        for host in names.differing_hosts:
            change = (*missing.get(host, ()), *extra.get(host, ()))
            cell = odd.get(change)
            if cell is None:
                cell = odd[change] = Cell("odd", short(" ".join(change)), "\n".join(change))
            cells[host] = cell
    return cells


def _names_by_host(
    items: Sequence[tuple[str, tuple[str, ...]]], mark: str
) -> dict[str, tuple[str, ...]]:
    """host → the items it is listed under (each after `mark`), in the items' order. Items
    listed under the same host tuple (one object: set_divergence_of shares them) are gathered a
    tuple at a time, and each set of tuples a host is in gets its items once."""
    tuples: dict[int, tuple[str, ...]] = {}
    for _, hosts in items:
        tuples.setdefault(id(hosts), hosts)
    within: dict[str, list[int]] = defaultdict(list)  # host → the tuples it is in
    for number, hosts in tuples.items():
        for host in hosts:
            within[host].append(number)
    found: dict[tuple[int, ...], tuple[str, ...]] = {}
    by_host = {}
    for host, numbers in within.items():
        key = tuple(numbers)
        listed = found.get(key)
        if listed is None:
            held = set(numbers)
            listed = found[key] = tuple(f"{mark}{n}" for n, hosts in items if id(hosts) in held)
        by_host[host] = listed
    return by_host


def _blocks_by_host(cells: dict[str, Cell]) -> tuple[Block, ...]:
    """host → cell (a few cell objects) as blocks."""
    hosts_of: dict[int, list[str]] = {}
    objects: dict[int, Cell] = {}
    for host, cell in cells.items():
        found = hosts_of.get(id(cell))
        if found is None:
            found = hosts_of[id(cell)] = []
            objects[id(cell)] = cell
        found.append(host)
    return blocks_of((objects[key], hosts) for key, hosts in hosts_of.items())


def across_set_cells(item: SetDivergence, diff: FleetDiff, row_cells: dict[str, Cell]) -> None:
    """Cohorts whose names differ from the first cohort's, as a whole: `across` cells."""
    for finding in diff.ranked(CHECK, SOFTWARE):
        for cross in finding.across:
            if cross.fact != item.fact or not cross.names:
                continue
            first = cross.groups[0][0]
            for value, cohort_names in cross.groups[1:]:
                delta = list_delta(first, value) or "other names"
                cell = Cell("across", short(delta), delta)  # shared by the cohorts' hosts
                for cohort in diff.cohorts:
                    if cohort.name in cohort_names:
                        for host in cohort.hosts:
                            if row_cells.get(host, NOT_REPORTED).kind == "maj":
                                row_cells[host] = cell


def map_rows(diff: FleetDiff) -> list[MapRow]:
    """A row per fact of the findings that name facts (check-grade, in cohort, software between
    cohorts), most serious first; the facts of a device list said once."""
    shown = [f for f in diff.findings if f.rank != HARDWARE]
    order = list(dict.fromkeys(fact for f in shown for fact in f.facts))
    values = {d.fact: d for d in diff.values}
    sets = {s.fact: s for s in diff.sets}
    within: dict[str, dict[str, SetDivergence]] = defaultdict(dict)
    for finding in shown:
        for names in finding.sets:
            if finding.cohort is not None:
                within[names.fact][finding.cohort] = names
    across = {x.fact: x for f in diff.findings for x in f.across}
    rows: list[MapRow] = []
    chosen = [values[f] for f in order if f in values]
    splits: Splits = {}
    for item in _grouped_in_order(chosen):
        if isinstance(item, DivergenceGroup):
            rows.append(group_row(item, diff.cohorts, across, splits))
        else:
            rows.append(
                divergence_row(item, diff.cohorts, across=across.get(item.fact), splits=splits)
            )
    rows += [set_row(sets[fact], within[fact], diff) for fact in order if fact in sets]
    return rows


def block_indexes(rows: Sequence[MapRow]) -> list[dict[str, int]]:
    """Per row, host → the number of its block (absent: not reported); rows whose blocks are
    the same host lists (a split shared by many facts) share one index, made once."""
    made: dict[tuple[tuple[int, ...], ...], dict[str, int]] = {}
    indexes = []
    for map_row in rows:
        key = tuple(tuple(map(id, chunks)) for _, chunks in map_row.blocks)
        index = made.get(key)
        if index is None:
            index = made[key] = {}
            for number, (_, chunks) in enumerate(map_row.blocks):
                for hosts in chunks:
                    index.update(zip(hosts, repeat(number)))
        indexes.append(index)
    return indexes


def _grouped_in_order(items: Sequence[Divergence]) -> list[Divergence | DivergenceGroup]:
    """group_divergences, in the order the facts came (the findings' order)."""
    grouped = group_divergences(items)
    position = {item.fact: i for i, item in enumerate(items)}

    def first(entry: Divergence | DivergenceGroup) -> int:
        members = entry.items if isinstance(entry, DivergenceGroup) else (entry,)
        return min(position[m.fact] for m in members)

    return sorted(grouped, key=first)


class MapColumn(NamedTuple):
    """A column of the map: some hosts of a cohort; `alike`: they have the same cell in every
    row (a group of host_columns), else its smallest groups folded together."""

    cohort: Cohort
    hosts: tuple[str, ...]
    alike: bool


def host_columns(
    rows: Sequence[MapRow],
    cohorts: Sequence[Cohort],
    compared: Iterable[str],
    indexes: Sequence[dict[str, int]] | None = None,
) -> list[MapColumn]:
    """Per cohort, its hosts grouped by their cells across every row; the biggest group first,
    at most a fair share of MAX_COLUMNS per cohort (its smallest groups share its last column).
    `indexes`: block_indexes(rows)."""
    reporting = set(compared)
    share = max(1, MAX_COLUMNS // max(1, len(cohorts)))
    # a row's cells are told apart by their blocks (one per distinct cell); rows that split the
    # hosts alike tell them apart alike, so each distinct index is read once
    distinct = list({id(i): i for i in (indexes or block_indexes(rows))}.values())
    columns = []
    for cohort in cohorts:
        hosts = [host for host in cohort.hosts if host in reporting]
        by_answer: dict[tuple[int, ...], list[str]] = defaultdict(list)
        # each host's block numbers across the indexes, made in C an index at a time and
        # zipped into a tuple per host
        cells = [map(index.get, hosts, repeat(-1)) for index in distinct]
        answers = zip(*cells) if cells else repeat(())
        for host, answer in zip(hosts, answers):
            by_answer[answer].append(host)
        groups = sorted((tuple(g) for g in by_answer.values()), key=lambda g: (-len(g), g[0]))
        folded = len(groups) > share
        if folded:
            groups = [*groups[: share - 1], tuple(h for g in groups[share - 1 :] for h in g)]
        last = len(groups) - 1
        columns += [MapColumn(cohort, g, not (folded and i == last)) for i, g in enumerate(groups)]
    return columns


# ------------------------------------------------------------------------------------ markup


def divergence_map(diff: FleetDiff, compared: Sequence[str]) -> str:
    rows = map_rows(diff)
    hardware = hardware_pairs(diff)
    if not rows and not hardware:
        return '<p class="ok">no divergence: every compared fact is the same on every host that reported it</p>'
    parts = [findings_markup(diff)]
    if rows:
        indexes = block_indexes(rows)
        columns = host_columns(rows, diff.cohorts, compared, indexes)
        parts.append(_map_table(rows, columns, indexes))
    parts.append(hardware)
    return "".join(parts)


def findings_markup(diff: FleetDiff) -> str:
    items = []
    for finding in diff.findings:
        hosts = finding.hosts if finding.rank in (CHECK, COHORT) else ()
        named = f" <b>{esc(compact_hosts(hosts))}</b>" if hosts else ""
        items.append(
            f'<li data-key="{esc(" ".join([*finding.facts[:50], *hosts]))}">'
            f'<span class="grade g{finding.rank}">{GRADE[finding.rank]}</span>{named} '
            f"{esc(finding.title)}</li>"
        )
    return f'<ol class="findings">{"".join(items)}</ol>'


def _map_table(
    rows: Sequence[MapRow], columns: Sequence[MapColumn], indexes: Sequence[dict[str, int]]
) -> str:
    spans: list[tuple[Cohort, int]] = []
    for cohort, _, _ in columns:
        if spans and spans[-1][0] == cohort:
            spans[-1] = (cohort, spans[-1][1] + 1)
        else:
            spans.append((cohort, 1))
    cohort_head = "".join(
        f'<th class="cohort-head" colspan="{n}" title="{esc(c.name)}">{esc(c.short)} '
        f'<span class="dim">({len(c.hosts)})</span></th>'
        for c, n in spans
    )
    group_head = "".join(
        f'<th class="group" title="{esc(compact_hosts(g))}">{hosts_label(g)}</th>'
        for _, g, _ in columns
    )
    body = "".join(_map_row(r, columns, i) for r, i in zip(rows, indexes))
    legend = (
        '<p class="dim"><span class="cell maj key">=</span> the cohort\'s value '
        '<span class="cell odd key">≠</span> unlike the rest of its cohort '
        '<span class="cell across key">◇</span> the whole cohort unlike the rest of the fleet '
        '<span class="cell none key">–</span> not reported, or the cohort\'s own hardware · '
        "open a cell for its value</p>"
    )
    return (
        f'<div class="scroll"><table class="divmap"><thead><tr><th rowspan="2">fact</th>'
        f"{cohort_head}</tr><tr>{group_head}</tr></thead><tbody>{body}</tbody></table></div>"
        f"{legend}"
    )


def _map_row(map_row: MapRow, columns: Sequence[MapColumn], index: dict[str, int]) -> str:
    """`index`: host → its block in the row (block_indexes)."""
    blocks = map_row.blocks
    odd = sorted(h for c, chunks in blocks if c.kind == "odd" for hosts in chunks for h in hosts)
    cells = []
    for _, group, alike in columns:
        shown = group[:1] if alike else group  # a group's hosts: one cell in every row
        found = set(map(index.get, shown, repeat(-1)))
        if len(found) == 1:
            number = found.pop()
            cell = NOT_REPORTED if number < 0 else blocks[number][0]
        else:
            cell = Cell("mixed", "varies", "the hosts of this column differ here")
        cells.append(
            f'<td class="cell {cell.kind}"><details><summary>{MARK[cell.kind]} {esc(cell.text)}'
            f'</summary><pre class="value">{esc(clip(cell.full))}</pre></details></td>'
        )
    note = f'<div class="dim">{esc(map_row.note)}</div>' if map_row.note else ""
    named = f'<div class="odd-hosts">odd: {esc(compact_hosts(odd))}</div>' if odd else ""
    fact = f'<th class="fact"><code>{esc(map_row.fact)}</code>{note}{named}</th>'
    return f'<tr data-key="{esc(" ".join([map_row.fact, *odd]))}">{fact}{"".join(cells)}</tr>'


def hardware_pairs(diff: FleetDiff) -> str:
    """Per pair of cohorts: how many hardware facts differ, folded over their table."""
    labels = {c.name: c.short for c in diff.cohorts}
    blocks = []
    for finding in diff.ranked(HARDWARE):
        if finding.pair is None:
            continue
        first, second = finding.pair
        rows = []
        for fact, one, other, count in pair_rows(finding.across, finding.pair):
            many = f' <span class="dim">({count} facts)</span>' if count > 1 else ""
            rows.append(row([f"<code>{esc(fact)}</code>{many}", esc(one), esc(other)]))
        body = table(["fact", labels[first], labels[second]], rows)
        blocks.append(folded(esc(finding.title), body))
    if not blocks:
        return ""
    return "<h3>hardware between cohorts, as expected</h3>" + "".join(blocks)


def name_lists(diff: FleetDiff) -> str:
    """Each divergent name list, item by item: which hosts miss a majority name, which have extras."""
    blocks = []
    said: dict[int, tuple[tuple[str, ...], str, str]] = {}  # a host tuple → its label and key
    for item in diff.sets:
        entries = [("missing on", n, hs) for n, hs in item.missing] + [
            ("only on", n, hs) for n, hs in item.extra
        ]
        rows = [
            row([f"<code>{esc(name)}</code>", esc(kind), label], key)
            for kind, name, hosts in entries[:MAX_ITEMS]
            for label, key in [_hosts_said(hosts, said)]
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


def _hosts_said(
    hosts: tuple[str, ...], said: dict[int, tuple[tuple[str, ...], str, str]]
) -> tuple[str, str]:
    """hosts_label and the filter key of a host tuple, made once per tuple object (a name
    list's items share the few host tuples they split the hosts by)."""
    found = said.get(id(hosts))
    if found is None:
        found = said[id(hosts)] = (hosts, hosts_label(hosts), " ".join(hosts))  # kept: its id
    return found[1], found[2]
