"""Terminal views of a cross-host diff and of drift between runs (rich). Summary first, then one
compact block per divergent fact, widest impact first; plain indented text so it reads at 80
columns as well as at 200."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from rich.console import Group
from rich.text import Text

from fleet.analysis.diff import (
    Divergence,
    DivergenceGroup,
    FleetDiff,
    Outlier,
    SetDivergence,
    Unreported,
    group_divergences,
    list_delta,
)
from fleet.analysis.drift import Change, Drift
from fleet.hostsets import compact_hosts
from fleet.render.grouping import short

MAX_ITEMS = 8
MAX_CONSEQUENCES = 2


def hosts_text(hosts: Iterable[str]) -> str:
    return compact_hosts(hosts)


# --------------------------------------------------------------------------------- fleet diff


def fleet_diff_view(diff: FleetDiff) -> Group:
    parts: list[Any] = [diff_summary(diff)]
    blocks = sorted(
        [*group_divergences(diff.values), *diff.sets],
        key=lambda d: (-len(d.differing_hosts), _name(d)),
    )
    parts += [_block(item) for item in blocks]
    if diff.outliers:
        parts.append(outliers_view(diff.outliers, diff.tolerance))
    if len(diff.cohorts) > 1 or diff.outliers:
        parts.append(cohorts_line(diff))
    if diff.unreported:
        parts.append(unreported_view(diff.unreported))
    return Group(*parts)


def _name(item: Divergence | DivergenceGroup | SetDivergence) -> str:
    return item.parent if isinstance(item, DivergenceGroup) else item.fact


def diff_summary(diff: FleetDiff) -> Text:
    facts = len(diff.values) + len(diff.sets)
    text = Text("divergence: ", style="bold")
    unreached = {u.host for u in diff.unreported if u.probe is None}
    if len(set(diff.hosts) - unreached) < 2:
        text.append("nothing to compare: fewer than two hosts reported", style="dim")
        return text
    if diff.clean:
        text.append(
            "none — every compared fact is the same on every host that reported it", style="green"
        )
        return text
    text.append(f"{len(diff.hosts)} hosts · ")
    if diff.odd_hosts:
        text.append(f"odd: {hosts_text(diff.odd_hosts)}", style="bold yellow")
    else:
        text.append("no odd host: the hosts are split", style="bold yellow")
    text.append(f" · {facts} fact(s) differ")
    if diff.outliers:
        text.append(f" · {len({o.host for o in diff.outliers})} slow host(s)")
    return text


def _block(item: Divergence | DivergenceGroup | SetDivergence) -> Group:
    """The fact's line, unwrapped (a path stays whole), then its values, wrapped between words."""
    if isinstance(item, DivergenceGroup):
        text = _group_block(item)
    elif isinstance(item, SetDivergence):
        text = _set_block(item)
    else:
        text = _value_block(item)
    header, _, body = text.plain.partition("\n")
    if not body:
        return Group(text)
    first, rest = text[: len(header)], text[len(header) + 1 :]
    first.no_wrap, first.overflow = True, "ignore"
    return Group(first, rest)


def fact_line(fact: str) -> Text:
    """A fact's name: _block keeps this first line unwrapped, as it is the JMESPath a rule
    copies, whole even when longer than the line (print the view with crop=False)."""
    text = Text("  ")
    text.append(fact, style="bold")
    return text


def _value_block(item: Divergence) -> Text:
    text = fact_line(item.fact)
    if item.split:
        return _split_block(text, item)
    text.append(f"\n      {short(item.majority)}", style="green")
    text.append(f"  majority, {len(item.majority_hosts)} host(s)", style="dim")
    for value, hosts in item.others:
        delta = list_delta(item.majority, value)
        text.append(f"\n      {delta or short(value)}", style="yellow")
        text.append(f"  {hosts_text(hosts)}")
    return _consequences(text, item)


def _split_block(text: Text, item: Divergence) -> Text:
    """No value leads (two hosts that disagree): every value with its hosts, none 'majority'."""
    text.append(f"  (split: no majority, {len(item.hosts)} hosts)", style="dim")
    for value, hosts in item.groups:
        text.append(f"\n      {short(value)}", style="yellow")
        text.append(f"  {hosts_text(hosts)}")
    return _consequences(text, item)


def _consequences(text: Text, item: Divergence) -> Text:
    """Facts that differ only because of this one (a probe that did not succeed), on one line."""
    if item.consequences:
        names = ", ".join(item.consequences[:MAX_CONSEQUENCES])
        more = len(item.consequences) - MAX_CONSEQUENCES
        text.append(f"\n      and so {len(item.consequences)} more fact(s) differ: ", style="dim")
        text.append(names + (f", … (+{more}; --format json lists all)" if more > 0 else ""))
    return text


def _group_block(item: DivergenceGroup) -> Text:
    if item.uniform:
        text = _value_block(dataclasses.replace(item.items[0], fact=item.parent))
        text.append(f"\n      ({len(item.items)} devices alike)", style="dim")
        return text
    text = fact_line(item.parent)
    text.append(f"  ({len(item.items)} facts, by device, values vary)", style="dim")
    text.append(f"\n      differ on  {hosts_text(item.differing_hosts)}", style="yellow")
    return text


def _set_block(item: SetDivergence) -> Text:
    text = fact_line(item.fact)
    text.append(f"  (names, {len(item.hosts)} hosts)", style="dim")
    for name, hosts in item.missing[:MAX_ITEMS]:
        text.append(f"\n      {name}", style="yellow")
        text.append(
            f"  present on {len(item.hosts) - len(hosts)} host(s), missing on {hosts_text(hosts)}"
        )
    for name, hosts in item.extra[:MAX_ITEMS]:
        text.append(f"\n      {name}", style="yellow")
        text.append(f"  present only on {hosts_text(hosts)}")
    for name, hosts in item.split[:MAX_ITEMS]:
        text.append(f"\n      {name}", style="yellow")
        lacking = sorted(set(item.hosts) - set(hosts))
        text.append(f"  split: present on {hosts_text(hosts)}, missing on {hosts_text(lacking)}")
    hidden = sum(max(0, len(part) - MAX_ITEMS) for part in (item.missing, item.extra, item.split))
    if hidden:
        text.append(f"\n      … and {hidden} more name(s)", style="dim")
    return text


def outliers_view(outliers: Iterable[Outlier], tolerance: float) -> Text:
    text = Text(
        f"slow outliers (more than {tolerance:.0%} worse than their cohort's median):", style="bold"
    )
    for o in outliers:
        text.append(f"\n  {o.measure}  ", style="bold")
        text.append(f"{o.host} {o.value:g}", style="yellow")
        text.append(f" = {o.factor:g}× the cohort median {o.median:g} ({o.cohort})")
    return text


def cohorts_line(diff: FleetDiff) -> Text:
    text = Text("cohorts: ", style="bold")
    text.append(" · ".join(f"{c.name}: {hosts_text(c.hosts)}" for c in diff.cohorts))
    return text


def unreported_view(items: Iterable[Unreported]) -> Text:
    """Hosts (or one probe on them) not compared, those failing the same way on one line."""
    alike: dict[tuple[str | None, str, str], list[str]] = {}
    for item in items:
        alike.setdefault((item.probe, item.status, item.reason), []).append(item.host)
    text = Text("not compared:", style="bold")
    for (probe, status, reason), hosts in alike.items():
        text.append(f"\n  {hosts_text(hosts)}" + (f" {probe}" if probe else ""), style="magenta")
        text.append(f"  {status}{': ' + reason if reason else ''}")
    return text


# -------------------------------------------------------------------------------------- drift


def drift_view(drift: Drift) -> Group:
    parts: list[Any] = [drift_summary(drift)]
    parts += [Text(f"  warning: {note}", style="bold magenta") for note in drift.unlike]
    new_label, gone_label = ("new hosts", "hosts gone")
    if not drift.same_inventory:  # other hosts by design, not hosts that came or went
        new_label, gone_label = ("only in the new run", "only in the old run")
    if drift.added_hosts:
        parts.append(Text(f"  {new_label}: {hosts_text(drift.added_hosts)}", style="cyan"))
    if drift.removed_hosts:
        parts.append(Text(f"  {gone_label}: {hosts_text(drift.removed_hosts)}", style="magenta"))
    parts += [change_line(c) for c in drift.changes]
    return Group(*parts)


def drift_summary(drift: Drift) -> Text:
    text = Text(f"drift from {drift.old_started} to {drift.new_started}: ", style="bold")
    if not drift.found:
        text.append("none", style="green")
        if drift.unlike:
            text.append(" (among what both runs can compare)", style="dim")
        return text
    parts = []
    if drift.changes:
        parts.append(f"{len(drift.changes)} change(s) on {len(drift.changed_hosts)} host(s)")
    if drift.same_inventory and drift.added_hosts:
        parts.append(f"{len(drift.added_hosts)} new host(s)")
    if drift.same_inventory and drift.removed_hosts:
        parts.append(f"{len(drift.removed_hosts)} host(s) gone")
    text.append(", ".join(parts), style="yellow")
    return text


def change_line(change: Change) -> Text:
    text = Text("  ")
    text.append(change.fact, style="bold")
    if change.kind == "added":
        text.append(f"  + {change.new}", style="green")
    elif change.kind == "removed":
        text.append(f"  − {change.old}", style="red")
    else:
        text.append(f"  {short(change.old)} → {short(change.new)}", style="yellow")
    text.append(f"  {hosts_text(change.hosts)}")
    return text
