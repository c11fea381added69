"""Terminal views of a cross-host diff and of drift between runs (rich). Summary and cohorts
first, then the findings most serious first (fleet/analysis/across_hosts/findings.py): check-grade, inside each
cohort, software between cohorts, hardware between cohorts as one line per pair. Plain indented
text wrapped between words, so it reads at 80 columns as well as at 200."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.text import Text

from fleet.analysis.across_hosts.cohorts import DEFAULT_COHORT_BY
from fleet.analysis.across_hosts.diff import (
    CrossCohort,
    Divergence,
    DivergenceFinding,
    DivergenceGroup,
    FleetDiff,
    Outlier,
    SetDivergence,
    Unreported,
    group_divergences,
    list_delta,
)
from fleet.analysis.across_hosts.findings import CHECK, COHORT, HARDWARE, SOFTWARE
from fleet.hostsets import compact_hosts, count_hosts
from fleet.render.grouping import group_across, pair_rows, short, unreported_groups
from fleet.render.terminal.wrap import KEEP, Hanging, keep, keep_all

if TYPE_CHECKING:  # types only: a run with no earlier run to drift from loads no drift module
    from fleet.analysis.across_runs.drift import Change, Drift

MAX_ITEMS = 8
MAX_CONSEQUENCES = 2
MAX_ACROSS = 12  # software facts listed per pair of cohorts (--json - lists every one)
MAX_INDENT = 24  # a check-grade line's hosts wider than this: its text goes under them


def hosts_text(hosts: Iterable[str]) -> str:
    return compact_hosts(hosts)


# --------------------------------------------------------------------------------- fleet diff


def fleet_diff_view(diff: FleetDiff, between: bool = False) -> Group:
    """Summary, cohorts, then the findings most serious first: check-grade, inside each cohort,
    software between cohorts, and one line per pair of cohorts for their hardware (`between`:
    every hardware fact of each pair, listed)."""
    parts: list[Any] = [Hanging(Text(), diff_summary(diff), 2)]
    if len(diff.cohorts) > 1 or diff.outliers:
        parts.append(cohorts_view(diff))
    parts += findings_view(diff, between)
    if diff.outliers:
        parts.append(outliers_view(diff.outliers, diff.tolerance))
    if diff.unreported:
        parts.append(unreported_view(diff.unreported))
    return Group(*parts)


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
    text.append(f"{count_hosts(len(diff.hosts))} · ")
    if len(diff.cohorts) > 1:
        text.append(f"{len(diff.cohorts)} cohorts · ")
    if diff.odd_hosts:
        text.append(f"odd: {hosts_text(diff.odd_hosts)}", style="bold yellow")
    elif diff.in_cohorts:
        text.append("no odd host: the hosts are split", style="bold yellow")
    else:
        text.append("no odd host: each cohort alike within", style="bold yellow")
    text.append(f" · {facts} fact(s) differ")
    if diff.outliers:
        text.append(f" · {len({o.host for o in diff.outliers})} slow host(s)")
    return text


def cohorts_view(diff: FleetDiff) -> Group:
    how = f"--cohort-by {diff.cohort_by}" if diff.cohort_by else DEFAULT_COHORT_BY
    lines: list[Any] = [Text(f"cohorts ({how}):", style="bold")]
    for cohort in diff.cohorts:
        head = Text(f"  {cohort.short}  ")
        body = Text(hosts_text(cohort.hosts))
        if cohort.label and cohort.label != cohort.name:
            body.append(f"  {keep(f'({cohort.name})')}", style="dim")
        lines.append(Hanging(head, body, 4))
    return Group(*lines)


def findings_view(diff: FleetDiff, between: bool = False) -> list[Any]:
    labels = {c.name: keep(c.short) for c in diff.cohorts}
    hosts_of = {c.name: c.hosts for c in diff.cohorts}
    parts: list[Any] = []
    checks = diff.ranked(CHECK)
    if checks:
        parts.append(Text("check-grade:", style="bold"))
        parts += [_check_line(f, labels) for f in checks]
    for cohort in diff.cohorts:
        inside = [f for f in diff.ranked(COHORT) if f.cohort == cohort.name]
        if not inside:
            continue
        where = hosts_text(cohort.hosts) if len(diff.cohorts) > 1 else "every host"
        parts.append(Text(f"in cohort {cohort.short} ({where}):", style="bold"))
        for finding in inside:
            parts += _cohort_finding(finding, hosts_of[cohort.name])
    software = diff.ranked(SOFTWARE)
    if software:
        parts.append(Text("between cohorts, software (the same code runs on each):", style="bold"))
        for finding in software:
            parts += _software_finding(finding, labels)
    hardware = diff.ranked(HARDWARE)
    if hardware:
        parts.append(Text("between cohorts, hardware:", style="bold"))
        for finding in hardware:
            parts += _hardware_finding(finding, labels, between)
    return parts


def _check_line(finding: DivergenceFinding, labels: dict[str, str]) -> Hanging:
    hosts = hosts_text(finding.hosts)
    head = Text("  ")
    head.append("✗ ", style="bold red")
    head.append(hosts, style="bold yellow")
    head.append("  ")
    indent = len(head.plain) if len(head.plain) <= MAX_INDENT else 6
    return Hanging(head, Text(_kept(finding.title, labels)), indent)


def _kept(title: str, labels: dict[str, str]) -> str:
    """A finding's title with the cohorts it names kept whole."""
    return keep_all(title, [label.replace(KEEP, " ") for label in labels.values()])


def _cohort_finding(finding: DivergenceFinding, cohort_hosts: tuple[str, ...]) -> list[Any]:
    odd = finding.odd_hosts
    head = Text("  ")
    head.append(hosts_text(finding.hosts), style="bold yellow")
    head.append(":")
    if odd:
        rest = sorted(set(cohort_hosts) - set(odd))
        body = Text(f"{len(finding.facts)} fact(s) unlike the rest ({hosts_text(rest)})")
    else:
        body = Text(f"split on {len(finding.facts)} fact(s), no majority")
    lines: list[Any] = [Hanging(head, body, 4)]
    for item in group_divergences(finding.values):
        lines += _value_line(item)
    for names in finding.sets:
        lines += _names_lines(names)
    return lines


def _value_line(item: Divergence | DivergenceGroup) -> list[Any]:
    """One line, whole in itself (grep finds the hosts with the fact): the fact, the odd value(s)
    with their hosts, and the rest's value."""
    if isinstance(item, DivergenceGroup):
        if not item.uniform:
            head = _fact_head(item.parent)
            body = Text(f"values vary by device ({len(item.items)} facts): ", style="dim")
            body.append(f"differ on {hosts_text(item.differing_hosts)}", style="yellow")
            return [Hanging(head, body, 6)]
        first = item.items[0]
        alike = _value_line(dataclasses.replace(first, fact=item.parent))
        alike[0].body.append(f" ({len(item.items)} devices alike)", style="dim")
        return alike
    head = _fact_head(item.fact)
    body = Text()
    if item.split:
        body.append("; ".join(f"{short(v)} {_on(h)}" for v, h in item.groups), "yellow")
    else:
        body.append(
            "; ".join(
                f"{list_delta(item.majority, v) or short(v)} {_on(h)}" for v, h in item.others
            ),
            style="yellow",
        )
        body.append(f" (rest:{KEEP}{short(item.majority)})", style="dim")
    lines: list[Any] = [Hanging(head, body, 6)]
    if item.consequences:
        lines.append(Hanging(Text("      "), _consequences_text(item), 8))
    return lines


def _on(hosts: Iterable[str]) -> str:
    """`on HOSTS`, never broken between the two."""
    return f"on{KEEP}{hosts_text(hosts)}"


def _fact_head(fact: str) -> Text:
    head = Text("    ")
    head.append(fact, style="bold")
    head.append("  ")
    return head


def _consequences_text(item: Divergence) -> Text:
    """Facts that differ only because of this one (a probe that did not succeed), on one line."""
    names = ", ".join(item.consequences[:MAX_CONSEQUENCES])
    more = len(item.consequences) - MAX_CONSEQUENCES
    text = Text(f"and so {len(item.consequences)} more fact(s) differ: ", style="dim")
    text.append(names + (f", … (+{more}; fleet diff --json - lists all)" if more > 0 else ""))
    return text


def _names_lines(item: SetDivergence) -> list[Any]:
    """A name set: one line when every odd host differs alike, else item by item."""
    deltas = set(host_deltas(item).values())
    if len(deltas) == 1 and not item.split:
        (delta,) = deltas
        body = Text(f"{' '.join(delta)} {_on(item.differing_hosts)}", style="yellow")
        return [Hanging(_fact_head(item.fact), body, 6)]
    return [_set_lines(item)]


def host_delta(item: SetDivergence, host: str) -> tuple[str, ...]:
    missing = [f"−{n}" for n, hosts in item.missing if host in hosts]
    extra = [f"+{n}" for n, hosts in item.extra if host in hosts]
    return tuple(missing + extra)


def host_deltas(item: SetDivergence) -> dict[str, tuple[str, ...]]:
    """host_delta of every differing host, in one pass over the items (not items × hosts)."""
    missing: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    for found, items in ((missing, item.missing), (extra, item.extra)):
        sign = "−" if found is missing else "+"
        for name, hosts in items:
            for host in hosts:
                found.setdefault(host, []).append(f"{sign}{name}")
    return {h: (*missing.get(h, ()), *extra.get(h, ())) for h in item.differing_hosts}


def _software_finding(finding: DivergenceFinding, labels: dict[str, str]) -> list[Any]:
    lines: list[Any] = [Hanging(Text("  "), Text(_kept(finding.title, labels)), 4)]
    shown = group_across(finding.across)
    for entry in shown[:MAX_ACROSS]:
        lines.append(_across_line(entry, labels))
    if len(shown) > MAX_ACROSS:
        more = len(shown) - MAX_ACROSS
        lines.append(Text(f"    … and {more} more (fleet diff --json - lists them)", style="dim"))
    return lines


def _hardware_finding(
    finding: DivergenceFinding, labels: dict[str, str], between: bool
) -> list[Any]:
    title = _kept(finding.title, labels)
    if not between or finding.pair is None:
        body = Text(title + ": ")
        body.append(keep("fleet diff RUN --between"), style="bold")
        body.append(" lists them")
        return [Hanging(Text("  "), body, 4)]
    first, second = (labels[c] for c in finding.pair)
    lines: list[Any] = [Hanging(Text("  "), Text(f"{title} ({first} | {second}):"), 4)]
    for fact, one, other, count in pair_rows(finding.across, finding.pair):
        body = Text(f"{one} | {other}", style="yellow")
        if count > 1:
            body.append(f" ({count} facts)", style="dim")
        lines.append(Hanging(_fact_head(fact), body, 6))
    return lines


def _across_line(entry: tuple[str, CrossCohort, int], labels: dict[str, str]) -> Hanging:
    """A fact's value per cohort: `580.65.06 on 8× RTX …; 580.159.04 on 2× H200`; name sets as
    the names each cohort has more or less than the first."""
    fact, cross, count = entry
    (first, first_cohorts), *rest = cross.groups
    sides = []
    if cross.names:
        for value, cohorts in rest:
            delta = list_delta(first, value) or "same names"
            sides.append(f"{_cohorts(cohorts, labels)}: {delta}")
        body = Text("; ".join(sides) + f" (vs {_cohorts(first_cohorts, labels)})", style="yellow")
    else:
        body = Text(
            "; ".join(f"{short(v)} on {_cohorts(cs, labels)}" for v, cs in cross.groups),
            style="yellow",
        )
    if count > 1:
        body.append(f" ({count} devices alike)", style="dim")
    return Hanging(_fact_head(fact), body, 6)


def _cohorts(names: Iterable[str], labels: dict[str, str]) -> str:
    return ", ".join(labels.get(n, n) for n in names)


def _set_lines(item: SetDivergence) -> Group:
    """A name set item by item: its fact's line, unwrapped (a path stays whole), then each name
    with the hosts that lack or have it, wrapped between words."""
    text = _set_block(item)
    header, _, _ = text.plain.partition("\n")
    first, rest = text[: len(header)], text[len(header) + 1 :]
    first.no_wrap, first.overflow = True, "ignore"
    return Group(first, rest)


def fact_line(fact: str) -> Text:
    """A fact's name: kept whole on its line, as it is the JMESPath a rule copies, even when
    longer than the line (print the view with crop=False)."""
    text = Text("    ")
    text.append(fact, style="bold")
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


def unreported_view(
    items: Iterable[Unreported], heading: str = "not compared:", brief: bool = False
) -> Group:
    """Hosts (or one probe on them) not compared, those failing the same way together; wrapped
    between words with a hanging indent (a fingerprint or a path is never broken); `brief`: one
    line each, cut at the terminal's edge (`fleet diff RUN` says the whole reason)."""
    lines: list[Any] = [Text(heading, style="bold")]
    for probe, status, reason, hosts in unreported_groups(items):
        head = Text(f"  {hosts_text(hosts)}" + (f" {probe}" if probe else ""), style="magenta")
        body = Text(f"{status}{': ' + ' '.join(reason.split()) if reason else ''}")
        if brief:
            lines.append(Text.assemble(head, "  ", body, no_wrap=True, overflow="ellipsis"))
        else:
            lines.append(Hanging(head.append("  "), body, 6))
    return Group(*lines)


# -------------------------------------------------------------------------------------- drift


def drift_view(drift: Drift) -> Group:
    parts: list[Any] = [drift_summary(drift)]
    if drift.baseline_chosen:
        parts.append(Hanging(Text("  "), Text(drift.baseline_chosen, style="dim"), 4))
    parts += [
        Hanging(Text("  warning:", style="bold magenta"), Text(note, style="magenta"), 4)
        for note in drift.unlike
    ]
    if drift.left_out:
        parts.append(Hanging(Text("  "), Text(drift.left_out_note, style="dim"), 4))
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
        if drift.comparable:
            return text.append("none", style="green")
        return text.append("none among what both runs compare (see below)", style="yellow")
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


def fleet_diff_brief(diff: FleetDiff, run_ref: str = "RUN") -> Group:
    """The divergence in a few lines, for `fleet probe` and `fleet show`, where the findings
    above have said what is wrong: the summary, the cohorts on one line each, per finding of the
    diff one line (who, how many facts), and where every fact is listed (`fleet diff`)."""
    parts: list[Any] = [Hanging(Text(), diff_summary(diff), 2)]
    if diff.clean or len(diff.hosts) < 2:
        absent = [u for u in diff.unreported if u.probe is not None]  # not reached: findings
        if absent:  # a probe that found nothing to measure says why, one host or many
            alone = len(diff.hosts) < 2  # one host: nothing was to be compared anyway
            parts.append(unreported_view(absent, "not measured:" if alone else "not compared:"))
        return Group(*parts)
    if len(diff.cohorts) > 1:
        parts.append(cohorts_view(diff))
    for finding in diff.findings:
        if finding.rank != CHECK:  # check-grade: the findings above say it, with the fix
            parts.append(Hanging(Text("  "), Text(_brief_line(finding)), 4))
    if diff.outliers:
        parts.append(outliers_view(diff.outliers, diff.tolerance))
    absent = [u for u in diff.unreported if u.probe is not None]  # hosts not reached: findings
    if absent:
        parts.append(unreported_view(absent, brief=True))
    ref = run_ref if len(run_ref) <= 24 else "RUN"  # a long path would take a line of its own
    hint = f"every fact: fleet diff {ref} (--between: the hardware ones too)"
    parts.append(Hanging(Text("  "), Text(hint, style="dim"), 4))
    return Group(*parts)


def _brief_line(finding: DivergenceFinding) -> str:
    hosts = finding.odd_hosts or (finding.hosts if finding.rank == COHORT else ())
    return f"{hosts_text(hosts)}: {finding.title}" if hosts else finding.title
