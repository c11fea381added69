"""Machine-readable (JSON) and paste-able (Markdown) forms of diffs and drift.

The cross-host diff's JSON is a `fleet.diff/2` document: `values` and `sets` list every fact that
differs, each tagged with `within` (the cohorts whose hosts disagree on it), `between` (the pairs
of cohorts whose values differ) and `hardware`; `cohorts` (name, label, hosts) and `cohort_by`;
`findings`, most serious first, each with its `kind`, `rank`, `title`, `hosts`, `cohort` and the
`facts` it accounts for. Drift is a `fleet.diff/2` document too, told apart by `"kind": "drift"`."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from fleet.analysis.across_hosts.diff import (
    CrossCohort,
    Divergence,
    DivergenceFinding,
    DivergenceGroup,
    FleetDiff,
    SetDivergence,
    group_divergences,
    list_delta,
)
from fleet.analysis.across_hosts.findings import CHECK, COHORT, HARDWARE, SOFTWARE
from fleet.analysis.across_runs.drift import Drift
from fleet.findings.model import Finding
from fleet.hostsets import compact_hosts, count_hosts
from fleet.models import Run
from fleet.registry import parts
from fleet.render.grouping import group_across, pair_rows, short, unreported_groups
from fleet.render.sentences import fix_line

DIFF_SCHEMA = "fleet.diff/3"
DRIFT_SCHEMA = DIFF_SCHEMA  # told apart by "kind": "drift"
BETWEEN_HINT = "`fleet diff RUN --between` lists them"


SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, ...]] = {}  # a dataclass → its fields' names


def _plain(value: Any, scalars: dict[int, Any] | None = None) -> Any:
    """Dataclasses, tuples and frozensets → JSON types. A diff of 20,000 hosts holds millions of
    host names in tuples: a collection of scalars is copied in one call, not item by item.
    `scalars`: the tuples and frozensets found to hold only scalars so far, by id (kept: their
    ids stay theirs), each read once (the diff names the same few host tuples over and over)."""
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind in (tuple, list, frozenset, set):
        if scalars is not None and id(value) in scalars:
            return list(value)
        if set(map(type, value)) <= SCALARS:
            if scalars is not None and kind in (tuple, frozenset):
                scalars[id(value)] = value
            return list(value)
        return [_plain(v, scalars) for v in value]
    names = _FIELDS.get(kind)
    if names is None:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
        elif isinstance(value, (list, tuple, frozenset, set)):
            return [_plain(v, scalars) for v in value]
        else:
            return value
    return {name: _plain(getattr(value, name), scalars) for name in names}


def fleet_diff_document(diff: FleetDiff) -> dict[str, Any]:
    document = {"schema": DIFF_SCHEMA, "kind": "hosts", "odd_hosts": list(diff.odd_hosts)}
    document.update(_plain(diff, {}))
    return document


def drift_document(drift: Drift, findings: Sequence[Finding] = ()) -> dict[str, Any]:
    """The drift, and the new run's findings (fleet.diff/3)."""
    document = {
        "schema": DRIFT_SCHEMA,
        "kind": "drift",
        "drift_found": drift.found,
        "comparable": drift.comparable,
        "changed_hosts": list(drift.changed_hosts),
    }
    document.update(_plain(drift, {}))
    document["findings"] = findings_list(findings)
    return document


def findings_list(findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """The `findings` of the run, check and drift documents (findings.schema.json)."""
    return [finding.to_dict() for finding in findings]


MARKDOWN_FIX_CHARS = 200  # of a finding's fix, in its list item


def findings_markdown(findings: Sequence[Finding]) -> list[str]:
    """The findings as a Markdown list, most severe first: who, what, and what to do."""
    lines = ["## fleet: findings, most severe first", ""]
    if not findings:
        return [*lines, "No findings: nothing wrong that fleet can see.", ""]
    for finding in findings:
        where = f" {md_code(finding.where)}" if finding.where else ""
        hosts = md_text(compact_hosts(finding.hosts)) if finding.hosts else "fleet"
        line = f"- **{finding.severity}** {hosts}{where}: {md_text(finding.what)}"
        if finding.action != "none":
            line += f" — action `{finding.action}`: {md_text(fix_line(finding.fix, MARKDOWN_FIX_CHARS))}"
        lines.append(line)
    return [*lines, ""]


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


def fleet_diff_markdown(
    diff: FleetDiff,
    between: bool = False,
    findings: Sequence[Finding] | None = None,
    run: Run | None = None,
) -> str:
    """The findings most serious first, then a table per cohort of what differs inside it, a
    table of the software that differs between cohorts, and the hardware per pair of cohorts
    (`between`: a table of its facts per pair). `findings`: the run's, said first; `run`: the
    probes' own sections after them (fleet/units/PROBE/markdown.py: `--import`'s answers)."""
    lines = findings_markdown(findings) if findings is not None else []
    if run is not None:
        lines += [line for _, unit in parts("markdown") for line in unit.lines(run)]
    lines += ["## fleet: cross-host divergence", ""]
    if diff.clean:
        lines.append("No divergence: every compared fact is the same on every host.")
    else:
        odd = md_text(compact_hosts(diff.odd_hosts)) if diff.odd_hosts else "none"
        cohorts = f" in {len(diff.cohorts)} cohorts" if len(diff.cohorts) > 1 else ""
        facts = len(diff.values) + len(diff.sets)
        hosts = count_hosts(len(diff.hosts))
        lines.append(f"{hosts}{cohorts}; odd: **{odd}**; {facts} fact(s) differ")
        lines += _markdown_cohorts(diff)
        lines += ["", "### Divergence, most serious first", ""]
        lines += [_markdown_finding(n, f) for n, f in enumerate(diff.findings, 1)]
        lines += _markdown_in_cohorts(diff)
        lines += _markdown_across(diff, between)
    if diff.outliers or diff.unreported:
        lines.append("")  # the table ends here
    for o in diff.outliers:
        lines.append(
            f"- slow: {md_code(o.measure)} on {md_text(o.host)}: {o.value:g}, "
            f"{o.factor:g}× the median of {md_text(o.cohort)}"
        )
    for probe, status, reason, names in unreported_groups(diff.unreported):
        what = f"{md_code(probe)} on " if probe else ""
        why = f"{status}: {reason}" if reason else status
        lines.append(f"- not compared: {what}{md_text(compact_hosts(names))} ({md_text(why)})")
    return "\n".join(lines) + "\n"


def _markdown_cohorts(diff: FleetDiff) -> list[str]:
    if len(diff.cohorts) < 2:
        return []
    lines = ["", "| cohort | hosts | key |", "| --- | --- | --- |"]
    for cohort in diff.cohorts:
        key = md_text(cohort.name) if diff.cohort_by is None else md_code(diff.cohort_by)
        hosts = md_text(compact_hosts(cohort.hosts))
        lines.append(f"| {md_text(cohort.short)} | {hosts} | {key} |")
    return lines


GRADE = {CHECK: "check", COHORT: "in cohort", SOFTWARE: "software", HARDWARE: "hardware"}


def _markdown_finding(number: int, finding: DivergenceFinding) -> str:
    named = finding.hosts if finding.rank in (CHECK, COHORT) else ()  # the others name cohorts
    hosts = f" · {md_text(compact_hosts(named))}" if named else ""
    title = md_text(finding.title)
    if finding.rank == HARDWARE:
        title += f": {BETWEEN_HINT}"
    return f"{number}. **{GRADE[finding.rank]}**{hosts} · {title}"


def _markdown_in_cohorts(diff: FleetDiff) -> list[str]:
    """A table per cohort: each fact that differs inside it, said once for all its devices."""
    lines: list[str] = []
    for cohort in diff.cohorts:
        found = [f for f in diff.in_cohorts if f.cohort == cohort.name and (f.values or f.sets)]
        if not found:
            continue
        hosts = md_text(compact_hosts(cohort.hosts))
        lines += ["", f"### In cohort {md_text(cohort.short)} ({hosts})", ""]
        lines += ["| fact | majority | differs on |", "| --- | --- | --- |"]
        for finding in found:  # most serious first
            lines += [_markdown_row(item) for item in group_divergences(finding.values)]
            lines += [_markdown_set_row(names) for names in finding.sets]
    return lines


def _markdown_across(diff: FleetDiff, between: bool) -> list[str]:
    lines: list[str] = []
    labels = {c.name: c.short for c in diff.cohorts}
    software = [x for f in diff.ranked(SOFTWARE) for x in f.across]
    if software:
        lines += ["", "### Between cohorts: software (the same code runs on each)", ""]
        lines += _across_table(software, list(labels), list(labels.values()))
    hardware = diff.ranked(HARDWARE)
    if hardware:
        lines += ["", "### Between cohorts: hardware, as expected", ""]
    for finding in hardware:
        if not between or finding.pair is None:
            lines.append(f"- {md_text(finding.title)}: {BETWEEN_HINT}")
            continue
        first, second = (md_text(labels[n]) for n in finding.pair)
        lines += [f"#### {md_text(finding.title)}", ""]
        lines += [f"| fact | {first} | {second} |", "| --- | --- | --- |"]
        for fact, one, other, count in pair_rows(finding.across, finding.pair):
            many = f" ({count} facts)" if count > 1 else ""
            lines.append(f"| {md_code(fact)}{many} | {md_text(one)} | {md_text(other)} |")
        lines.append("")
    return lines


def _across_table(items: Sequence[CrossCohort], cohorts: list[str], labels: list[str]) -> list[str]:
    """A fact per row, a cohort per column; a per-device fact once for its devices alike."""
    head = " | ".join(md_text(label) for label in labels)
    lines = [f"| fact | {head} |", "| --- |" + " --- |" * len(labels)]
    for fact, item, count in group_across(items):
        value_of = {c: v for v, cs in item.groups for c in cs}
        first = item.groups[0][0]
        cells = []
        for cohort in cohorts:
            if cohort not in value_of:
                cells.append("—")
            elif item.names and value_of[cohort] != first:
                cells.append(md_text(list_delta(first, value_of[cohort]) or "same names"))
            elif item.names:
                cells.append(f"{len(first)} names")
            else:
                cells.append(md_text(short(value_of[cohort])))
        devices = f" ({count} devices alike)" if count > 1 else ""
        lines.append(f"| {md_code(fact)}{devices} | {' | '.join(cells)} |")
    return lines


def _markdown_row(item: Divergence | DivergenceGroup) -> str:
    if isinstance(item, DivergenceGroup):
        hosts = md_text(compact_hosts(item.differing_hosts))
        if not item.uniform:
            return f"| {md_code(item.parent)} | values vary by device | {hosts} |"
        first = dataclasses.replace(item.items[0], fact=item.parent)
        return _markdown_row(first)[: -len(" |")] + f" ({len(item.items)} devices alike) |"
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


def drift_markdown(drift: Drift, findings: Sequence[Finding] | None = None) -> str:
    lines = findings_markdown(findings) if findings is not None else []
    lines += [f"## fleet: drift from {drift.old_started} to {drift.new_started}", ""]
    if drift.baseline_chosen:
        lines += [md_text(drift.baseline_chosen), ""]
    lines += [f"> **warning:** {md_text(note)}" for note in drift.unlike]
    if drift.left_out:
        lines += ["", md_text(drift.left_out_note)]
    if not drift.found:
        verdict = "No drift." if drift.comparable else "No drift among what both runs compare."
        return "\n".join([*lines, "", verdict, ""])
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
