"""The terminal view: live progress while hosts run, then a status table and the cross-host diff."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from fleet.analysis.across_hosts.diff import FleetDiff
from fleet.hostsets import compact_hosts, count_hosts
from fleet.models import NOT_REACHED, NOT_USABLE, PROBE_TROUBLE, HostOutcome, Run
from fleet.registry import parts
from fleet.registry.keyfacts import KeyFact
from fleet.render.grouping import ended_alike, short
from fleet.render.terminal.diff import fleet_diff_brief, fleet_diff_view
from fleet.render.terminal.tables import (
    COLUMN_OVERHEAD,
    Column,
    fitted_table,
    min_width,
    print_left_out,
)
from fleet.render.terminal.wrap import Hanging

STATUS_STYLE = {"ok": "green", "partial": "yellow", "interrupted": "magenta", "unavailable": "dim"}
MAX_HOST_COLUMNS = 6


def key_facts(among: Collection[str] = ()) -> list[KeyFact]:
    """The facts an operator looks at first: every unit's KEY_FACTS rows (fleet/registry/keyfacts.py),
    in the order of fleet.registry.UNITS. `among`: only the units of these probes (a unit's rows
    read its own probe's results, so the others' rows would be empty: their parts are not even
    imported); empty: every unit's."""
    return [row for _, unit in parts("facts", among) for row in getattr(unit, "KEY_FACTS", ())]


def status_style(status: str) -> str:
    if status in NOT_REACHED:
        return "bold red"
    if status in PROBE_TROUBLE:
        return "yellow"
    return STATUS_STYLE.get(status, "white")


def render_run(
    console: Console,
    run: Run,
    diff: FleetDiff,
    saved_to: str | None = None,
    between: bool = False,
) -> None:
    """Titles are lines of their own (a table's title is padded to its width)."""
    render_hosts(console, run)
    render_detail(console, run, diff, saved_to, between)


def render_hosts(console: Console, run: Run, errors: bool = True) -> None:
    """How each host ended, hosts that ended alike on one row. `errors`: with each row's error
    and hint; without, where the findings below say them (once is enough)."""
    console.print(Text("hosts", style="italic"))
    rows = status_rows(run.hosts.values())
    columns = STATUS_COLUMNS if errors else STATUS_COLUMNS[:-1]
    if not errors:
        rows = [row[:-1] for row in rows]  # type: ignore[misc]
    table, left_out = fitted_table(columns, rows, console.width)
    console.print(table)
    if ERROR_HEADER in left_out:  # too narrow for them in the table: each group's under it
        left_out.remove(ERROR_HEADER)
        console.print(failure_notes(run.hosts.values()), crop=False)
    print_left_out(console, left_out)


def render_detail(
    console: Console,
    run: Run,
    diff: FleetDiff,
    saved_to: str | None = None,
    between: bool = False,
    brief: bool = False,
    run_ref: str | None = None,
) -> None:
    """What the hosts reported: key facts, failed probes, the probes' own views, divergence
    (`brief`: in a few lines, where the findings above have said what is wrong)."""
    facts = key_facts_table(run.hosts.values(), console.width)
    if facts is not None:
        console.print(Text("key facts", style="italic"))
        console.print(facts)
    failed_probes = probe_failures(run.hosts.values())
    if failed_probes:
        console.print(Text("failed probes", style="italic"))
        console.print(failed_probes)
    # each probe's own section (fleet/units/PROBE/terminal.py): of the probes the run holds
    for _, unit in parts("terminal", among=run.probes):
        shown = unit.view(run, diff)
        if shown is not None:
            console.print(shown)
    view = (
        fleet_diff_brief(diff, run_ref or saved_to or "RUN")
        if brief
        else fleet_diff_view(diff, between)
    )
    console.print(view, crop=False)  # a fact path longer than a line stays whole
    console.print(summary_line(run))
    if saved_to:  # a path is one word: never broken, alone on its line when it is too wide
        console.print(
            Hanging(Text("saved", style="dim"), Text(saved_to, style="dim"), 2), crop=False
        )


# The status table's columns: names and statuses whole; at 80 columns timings give way first.
STATUS_COLUMNS = (
    Column("host", whole=True),
    Column("status", whole=True, keep=9),
    Column("elapsed", keep=1, justify="right"),
    Column("probes", keep=2, justify="right"),
    Column("error / hint", keep=8),
)
ERROR_HEADER = STATUS_COLUMNS[-1].header


def status_table(outcomes: Iterable[HostOutcome], width: int = 1000) -> Table:
    return fitted_table(STATUS_COLUMNS, status_rows(outcomes), width)[0]


def status_rows(outcomes: Iterable[HostOutcome]) -> list[tuple[str, Text, str, str, Text]]:
    """One row per way of ending (hosts that ended alike share it), trouble first."""
    return [_status_row(group) for group in ended_alike(list(outcomes))]


def _status_row(group: list[HostOutcome]) -> tuple[str, Text, str, str, Text]:
    first = group[0]
    alike = all(o.error == first.error and o.hint == first.hint for o in group)
    note = Text(first.error or "") if alike else Text(f"e.g. {first.error or ''}")
    if first.hint:
        note.append(f"\nhint: {first.hint}", style="dim")
    elapsed = sorted(o.elapsed_s for o in group)
    good = sorted(sum(1 for r in o.probes.values() if r.status in ("ok", "absent")) for o in group)
    totals = sorted(len(o.probes) for o in group)
    if len(group) == 1:
        return (first.name, Text(first.status, style=status_style(first.status)),
                f"{elapsed[0]:.1f}s", f"{good[0]}/{totals[0]}", note)  # fmt: skip
    return (
        f"{compact_hosts(o.name for o in group)} ({len(group)} hosts)",
        Text(first.status, style=status_style(first.status)),
        f"{elapsed[0]:.1f}–{elapsed[-1]:.1f}s",
        _span(good) + "/" + _span(totals),
        note,
    )


def failure_notes(outcomes: Iterable[HostOutcome]) -> Group:
    """Each way of failing once (hosts that ended alike together, as in the table): the hosts and
    status, the error, then the hint on its own line; wrapped between words with a hanging
    indent, a word wider than the line (a fingerprint, a path) alone on its line, never broken."""
    lines: list[Hanging] = []
    for group in ended_alike(list(outcomes)):
        first = group[0]
        if not (first.error or first.hint):
            continue
        alike = all(o.error == first.error and o.hint == first.hint for o in group)
        head = Text("  ")
        head.append(compact_hosts(o.name for o in group), style="bold")
        if len(group) > 1:
            head.append(f" ({len(group)} hosts)")
        head.append("  ")
        head.append(f"{first.status}:", style=status_style(first.status))
        error = " ".join((first.error or "").split())
        lines.append(Hanging(head, Text(error if alike else f"e.g. {error}"), 6))
        if first.hint:
            hint = Text(" ".join(first.hint.split()), style="dim")
            lines.append(Hanging(Text("    hint:", style="dim"), hint, 10))
    return Group(*lines)


def _span(numbers: list[int]) -> str:
    return str(numbers[0]) if numbers[0] == numbers[-1] else f"{numbers[0]}–{numbers[-1]}"


def key_facts_table(outcomes: Iterable[HostOutcome], width: int = 1000) -> Table | None:
    """The first facts an operator reads: one column per host, or value counts for big fleets
    and where a column per host would break a value (a version, a kernel) in the middle."""
    reporting = [o for o in outcomes if o.probes]
    if not reporting:
        return None
    ran = {probe for outcome in reporting for probe in outcome.probes}
    every = [(label, _fact_texts(reporting, paths)) for label, paths in key_facts(ran)]
    # a row with nothing but absences says what the absent probes' lines below say: left out
    rows = [
        (label, cells)
        for label, cells in every
        if any(c != "—" for c in cells) and not all(c.startswith("absent: ") for c in cells)
    ]
    if not rows:  # a run of probes with no key fact (-p health): never an empty table
        return None
    names = [o.name for o in reporting]
    per_host = len(reporting) <= MAX_HOST_COLUMNS and _fits(names, rows, width)
    values = [cells if per_host else [_value_counts(cells)] for _, cells in rows]
    headers = names if per_host else ["values (hosts)"]
    longest = [min_width(Column(h), [v[i] for v in values]) for i, h in enumerate(headers)]
    # values' words whole where they can be: the labels wrap between words instead
    label_room = width - sum(n + COLUMN_OVERHEAD for n in longest) - COLUMN_OVERHEAD - 1
    label_words = min_width(Column("fact"), [label for label, _ in rows])
    table = Table()
    table.add_column("fact", style="bold", max_width=max(label_room, label_words))
    for header, at_least in zip(headers, longest):
        table.add_column(header, overflow="fold", min_width=min(at_least, width // 2))
    for (label, _), cells in zip(rows, values):
        table.add_row(label, *cells)
    return table


def _fits(names: list[str], rows: list[tuple[str, list[str]]], width: int) -> bool:
    """Whether a column per host fits `width` with every word of every value whole."""
    columns = [Column("fact"), *(Column(name) for name in names)]
    cells = [[label for label, _ in rows], *([c[i] for _, c in rows] for i in range(len(names)))]
    needed = sum(min_width(c, v) + COLUMN_OVERHEAD for c, v in zip(columns, cells)) + 1
    return needed <= width


def _fact_texts(reporting: list[HostOutcome], paths: tuple[tuple[Any, ...], ...]) -> list[str]:
    described: dict[Any, tuple[str, list[Any]]] = {}  # a text per distinct answer
    # … and per distinct set of the payload objects the paths read (hosts share most of
    # theirs): looked up once, not once per host (16 facts × 20,000 hosts)
    by_payloads: dict[tuple[Any, ...], str] = {}
    probes = tuple(dict.fromkeys(path[0] for path in paths))
    texts = []
    for outcome in reporting:
        results = [outcome.probes.get(probe) for probe in probes]
        key = tuple(None if r is None else (r.status, r.error, id(r.data)) for r in results)
        text = by_payloads.get(key)
        if text is None:
            text = by_payloads[key] = _fact_text(outcome, paths, described)
        texts.append(text)
    return texts


def _fact_text(
    outcome: HostOutcome,
    paths: tuple[tuple[Any, ...], ...],
    described: dict[Any, tuple[str, list[Any]]],
) -> str:
    result = outcome.probes.get(paths[0][0])
    if result is None:
        return "—"
    if result.status != "ok":
        return f"{result.status}: {result.error or ''}".rstrip(": ")
    found = [_lookup(outcome.probes[p[0]].data, p[1:]) for p in paths if p[0] in outcome.probes]
    # texts and numbers stand for themselves (with their type: True is not 1), anything else
    # for the object (kept with the text, so that its id stays its own)
    key = tuple((type(v), v if type(v) in SCALARS else id(v)) for v in found)
    known = described.get(key)
    if known is None:
        values = [_describe(value) for value in found]
        known = described[key] = (" / ".join(dict.fromkeys(values)), found)
    return known[0]


SCALARS = (str, int, float, bool, type(None))


def _lookup(data: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return None
    return data


def _describe(value: Any) -> str:
    """Short text for a key fact; lists of results and libraries get their telling summary."""
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        if any("busbw_gbps" in v for v in value):
            return f"{max(float(v.get('busbw_gbps') or 0) for v in value):.1f}"
        return ", ".join(sorted({str(v.get("version")) for v in value}))
    if isinstance(value, list) and len(value) > 4:
        return f"{value[0]} … {value[-1]} ({len(value)})"
    return short(tuple(value) if isinstance(value, list) else value)


def _value_counts(cells: list[str]) -> str:
    counts = Counter(cells)
    return " · ".join(f"{value} ({n})" for value, n in counts.most_common())


def probe_failures(outcomes: Iterable[HostOutcome]) -> Table | None:
    """One row per probe that crashed or timed out: which host, and why."""
    rows = [
        (o.name, name, r)
        for o in outcomes
        for name, r in o.probes.items()
        if r.status in ("failed", "timeout")
    ]
    if not rows:
        return None
    table = Table()
    for column in ("host", "probe", "status", "why", "last output"):
        table.add_column(column, overflow="fold")
    for host, probe, result in rows:
        tail = result.output_tail.strip().splitlines()[-2:]
        table.add_row(
            host,
            probe,
            Text(result.status, style="yellow"),
            result.error or "",
            Text("\n".join(tail), style="dim"),
        )
    return table


def summary_line(run: Run) -> Text:
    counts = Counter(o.status for o in run.hosts.values() if o.status not in NOT_USABLE)
    text = Text(f"{count_hosts(sum(counts.values()))}: ")
    text.append(", ".join(f"{n} {s}" for s, n in counts.most_common()))
    unusable = [o.name for o in run.hosts.values() if o.status in NOT_USABLE]
    if unusable:  # not part of the usable fleet: counted apart, never launched on
        text.append(
            f"; {len(unusable)} unavailable ({compact_hosts(unusable)}: the scheduler says "
        )
        text.append("not usable; not launched on)")
    return text
