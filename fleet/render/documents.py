"""Machine-readable (JSON, schema fleet.analysis.diff/1) and paste-able (Markdown) forms of diffs and drift."""

from __future__ import annotations

import dataclasses
from typing import Any

from fleet.analysis.diff import (
    Divergence,
    DivergenceGroup,
    FleetDiff,
    SetDivergence,
    group_divergences,
)
from fleet.analysis.drift import Drift
from fleet.inventory import compact_hosts
from fleet.render.diffview import short

DIFF_SCHEMA = "fleet.analysis.diff/1"


def _plain(value: Any) -> Any:
    """Dataclasses, tuples and frozensets → JSON types."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple | frozenset | set):
        return [_plain(v) for v in value]
    return value


def fleet_diff_document(diff: FleetDiff) -> dict[str, Any]:
    document = {"schema": DIFF_SCHEMA, "kind": "hosts", "odd_hosts": list(diff.odd_hosts)}
    document.update(_plain(diff))
    return document


def drift_document(drift: Drift) -> dict[str, Any]:
    document = {
        "schema": DIFF_SCHEMA,
        "kind": "drift",
        "drift_found": drift.found,
        "changed_hosts": list(drift.changed_hosts),
    }
    document.update(_plain(drift))
    return document


def fleet_diff_markdown(diff: FleetDiff) -> str:
    lines = ["## fleet: cross-host divergence", ""]
    if diff.clean:
        lines.append("No divergence: every compared fact is the same on every host.")
    else:
        lines.append(f"{len(diff.hosts)} hosts; odd: **{compact_hosts(diff.odd_hosts)}**")
        lines += ["", "| fact | majority | differs on |", "| --- | --- | --- |"]
        lines += [_markdown_row(item) for item in group_divergences(diff.values)]
        lines += [_markdown_set_row(names) for names in diff.sets]
    for o in diff.outliers:
        lines.append(
            f"- slow: `{o.measure}` on {o.host}: {o.value:g}, {o.factor:g}× the median "
            f"of {o.cohort}"
        )
    for u in diff.unreported:
        lines.append(f"- not compared: {u.host}{' ' + u.probe if u.probe else ''} ({u.status})")
    return "\n".join(lines) + "\n"


def _markdown_row(item: Divergence | DivergenceGroup) -> str:
    if isinstance(item, DivergenceGroup):
        return f"| `{item.parent}` | (by device) | {compact_hosts(item.differing_hosts)} |"
    others = "; ".join(f"{short(v)}: {compact_hosts(h)}" for v, h in item.others)
    return f"| `{item.fact}` | {short(item.majority)} | {others} |"


def _markdown_set_row(item: SetDivergence) -> str:
    missing = [f"−`{n}`: {compact_hosts(h)}" for n, h in item.missing[:8]]
    extra = [f"+`{n}`: {compact_hosts(h)}" for n, h in item.extra[:8]]
    return f"| `{item.fact}` | (names) | {'; '.join(missing + extra)} |"


def drift_markdown(drift: Drift) -> str:
    lines = [f"## fleet: drift from {drift.old_started} to {drift.new_started}", ""]
    if not drift.found:
        return "\n".join([*lines, "No drift.", ""])
    if drift.added_hosts:
        lines.append(f"- new hosts: {compact_hosts(drift.added_hosts)}")
    if drift.removed_hosts:
        lines.append(f"- hosts gone: {compact_hosts(drift.removed_hosts)}")
    lines += ["", "| fact | change | hosts |", "| --- | --- | --- |"]
    for c in drift.changes:
        change = {"added": f"+ `{c.new}`", "removed": f"− `{c.old}`"}.get(
            c.kind, f"{short(c.old)} → {short(c.new)}"
        )
        lines.append(f"| `{c.fact}` | {change} | {compact_hosts(c.hosts)} |")
    return "\n".join(lines) + "\n"
