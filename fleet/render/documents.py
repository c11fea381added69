"""Machine-readable (JSON, schema fleet.diff/2) and paste-able (Markdown) forms of diffs and drift."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from fleet.analysis.diff import (
    Divergence,
    DivergenceGroup,
    FleetDiff,
    SetDivergence,
    group_divergences,
)
from fleet.analysis.drift import Drift
from fleet.hostsets import compact_hosts
from fleet.render.grouping import short

DIFF_SCHEMA = "fleet.diff/2"


def _plain(value: Any) -> Any:
    """Dataclasses, tuples and frozensets → JSON types."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple, frozenset, set)):
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


# Markdown: every text that goes into a table cell or a list item is escaped here, so a value that
# holds `|` (the import spec `mod:SymmetricMemory|_SymmetricMemory`), `*`, `_` or `<` cannot split
# a row or start emphasis or HTML. GitHub (GFM) and CommonMark read `\|` as `|`, in code too.
MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def md_text(value: object) -> str:
    """Plain text for a table cell: Markdown's special characters backslash-escaped, one line."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(value).split()))


def md_code(value: object) -> str:
    """A code span for a table cell: fenced with more backticks than it holds, `|` escaped."""
    text = " ".join(str(value).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    escaped = padded.replace("|", "\\|")
    return f"{fence}{escaped}{fence}"


def fleet_diff_markdown(diff: FleetDiff) -> str:
    lines = ["## fleet: cross-host divergence", ""]
    if diff.clean:
        lines.append("No divergence: every compared fact is the same on every host.")
    else:
        odd = md_text(compact_hosts(diff.odd_hosts)) if diff.odd_hosts else "none (split)"
        lines.append(f"{len(diff.hosts)} hosts; odd: **{odd}**")
        lines += ["", "| fact | majority | differs on |", "| --- | --- | --- |"]
        lines += [_markdown_row(item) for item in group_divergences(diff.values)]
        lines += [_markdown_set_row(names) for names in diff.sets]
    if diff.outliers or diff.unreported:
        lines.append("")  # the table ends here
    for o in diff.outliers:
        lines.append(
            f"- slow: {md_code(o.measure)} on {md_text(o.host)}: {o.value:g}, "
            f"{o.factor:g}× the median of {md_text(o.cohort)}"
        )
    for u in diff.unreported:
        what = f"{u.host} {u.probe}" if u.probe else u.host
        lines.append(f"- not compared: {md_text(what)} ({md_text(u.status)})")
    return "\n".join(lines) + "\n"


def _markdown_row(item: Divergence | DivergenceGroup) -> str:
    if isinstance(item, DivergenceGroup):
        hosts = md_text(compact_hosts(item.differing_hosts))
        return f"| {md_code(item.parent)} | (by device) | {hosts} |"
    shown = item.groups if item.split else item.others
    others = "; ".join(f"{md_text(short(v))}: {md_text(compact_hosts(h))}" for v, h in shown)
    if item.consequences:
        names = ", ".join(md_code(name) for name in item.consequences)
        others += f"; and so {len(item.consequences)} more fact(s) differ: {names}"
    majority = "(split: no majority)" if item.split else md_text(short(item.majority))
    return f"| {md_code(item.fact)} | {majority} | {others} |"


def _markdown_set_row(item: SetDivergence) -> str:
    missing = [f"−{md_code(n)}: {md_text(compact_hosts(h))}" for n, h in item.missing[:8]]
    extra = [f"+{md_code(n)}: {md_text(compact_hosts(h))}" for n, h in item.extra[:8]]
    split = [f"split {md_code(n)}: {md_text(compact_hosts(h))}" for n, h in item.split[:8]]
    return f"| {md_code(item.fact)} | (names) | {'; '.join(missing + extra + split)} |"


def drift_markdown(drift: Drift) -> str:
    lines = [f"## fleet: drift from {drift.old_started} to {drift.new_started}", ""]
    lines += [f"> **warning:** {md_text(note)}" for note in drift.unlike]
    if not drift.found:
        return "\n".join([*lines, "", "No drift.", ""])
    new_label, gone_label = ("new hosts", "hosts gone")
    if not drift.same_inventory:
        new_label, gone_label = ("only in the new run", "only in the old run")
    if drift.added_hosts:
        lines.append(f"- {new_label}: {md_text(compact_hosts(drift.added_hosts))}")
    if drift.removed_hosts:
        lines.append(f"- {gone_label}: {md_text(compact_hosts(drift.removed_hosts))}")
    lines += ["", "| fact | change | hosts |", "| --- | --- | --- |"]
    for c in drift.changes:
        change = {"added": f"+ {md_code(c.new)}", "removed": f"− {md_code(c.old)}"}.get(
            c.kind, f"{md_text(short(c.old))} → {md_text(short(c.new))}"
        )
        lines.append(f"| {md_code(c.fact)} | {change} | {md_text(compact_hosts(c.hosts))} |")
    return "\n".join(lines) + "\n"
