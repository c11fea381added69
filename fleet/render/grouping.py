"""What the terminal and the HTML report both group and shorten the same way, so the two surfaces
say the same thing: hosts that ended alike, verdicts that read alike, the verdict tally, a value
shortened for a table cell. No rich here: the HTML side must not need it.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet.analysis.across_hosts.diff import COLLAPSE_AT, CrossCohort, Pair, Unreported, shape
from fleet.hostsets import compact_hosts
from fleet.models import FINGERPRINT, HostOutcome

if TYPE_CHECKING:  # the rules engine (jmespath) loads with the first verdict, not with fleet.cli
    from fleet.checks import CheckReport, RuleVerdict

MAX_VALUE_CHARS = 60
_STATUS = operator.attrgetter("status")


def short(value: Any) -> str:
    if isinstance(value, tuple) and len(value) > 4:
        return f"[{len(value)} items]"
    text = "(unset)" if value is None else str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def ended_alike(outcomes: list[HostOutcome]) -> list[list[HostOutcome]]:
    """Hosts grouped by how they ended (status, error and hint, their own names blanked out),
    at any fleet size: one cause is one row, whether 2 hosts share it or 1,000. Trouble first,
    then the biggest groups."""
    groups: dict[tuple[str, str], list[HostOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.ending(), []).append(outcome)
    return sorted(groups.values(), key=lambda g: (g[0].status == "ok", -len(g)))


# A host's own target in a message, `(ops@10.0.0.7:22)`: blanked to fold hosts that ended alike.
TARGET = re.compile(r"\((?:[^()\s@]+@)?[^()\s]+:\d+\)")


def unreported_groups(items: Iterable[Unreported]) -> list[tuple[str | None, str, str, list[str]]]:
    """Hosts not compared (or one probe on them) grouped by probe, status and reason, the
    reason's own host name, target and key fingerprint blanked out: (probe or None for the whole
    host, status, the reason, the hosts). A reason that differed between the hosts is the first
    one's, as "e.g. …"."""
    groups: dict[tuple[str | None, str, str], list[Unreported]] = {}
    for item in items:
        blanked = TARGET.sub(
            "(…)", FINGERPRINT.sub("SHA256:…", item.reason.replace(item.host, "…"))
        )
        groups.setdefault((item.probe, item.status, blanked), []).append(item)
    found = []
    for (probe, status, _), alike in groups.items():
        reason = alike[0].reason
        if any(u.reason != reason for u in alike):
            reason = f"e.g. {reason}"
        found.append((probe, status, reason, [u.host for u in alike]))
    return found


def grouped_verdicts(verdicts: Iterable[RuleVerdict]) -> list[list[RuleVerdict]]:
    """Verdicts that read the same (status, observed, expected, fix, reason), in first-seen order."""
    from fleet.checks import format_value

    groups: dict[tuple[Any, ...], list[RuleVerdict]] = {}
    # Alike hosts' verdicts share their value objects (RuleVerdict.like): each (status, observed,
    # expected, fix, reason) by object is described once, then looked up by those objects; a run
    # of verdicts with the very same objects joins the group of the first.
    keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    last: tuple[Any, ...] = ()
    members: list[RuleVerdict] = []
    for verdict in verdicts:
        status, observed, expected = verdict.status, verdict.observed, verdict.expected
        fix, reason = verdict.fix, verdict.reason
        if (
            last
            and status == last[0]
            and observed is last[1]
            and expected is last[2]
            and fix is last[3]
            and reason is last[4]
        ):
            members.append(verdict)
            continue
        slot = (status, id(observed), id(expected), fix, reason)
        key = keys.get(slot)
        if key is None:  # the verdicts, kept in `groups`, keep these ids their objects'
            key = keys[slot] = (status, format_value(observed), format_value(expected), fix, reason)
        last = (status, observed, expected, fix, reason)
        members = groups.setdefault(key, [])
        members.append(verdict)
    return list(groups.values())


def tally(verdicts: Iterable[RuleVerdict]) -> str:
    counts = Counter(map(_STATUS, verdicts))  # in C: a rule has a verdict per host
    order = ("fail", "unknown", "skipped", "pass", "n/a")
    return " · ".join(f"{status} {counts[status]}" for status in order if status in counts)


def check_headline(report: CheckReport) -> tuple[str, str]:
    """The check's verdict in one line naming the hosts it is about: the first thing `fleet
    check` says, and the start of check_verdict's detail (the page and JUnit say the same)."""
    outcome, headline, detail = check_verdict(report)
    return outcome, f"{headline}: {detail.split(';')[0]}"


def _verdict_summary(report: CheckReport) -> str:
    """Who fails (or goes unjudged), in a few words: the clause every surface starts with."""
    errors = report.failures("error")
    if errors:
        rules = len({rule.id for rule, _ in errors})
        return f"{compact_hosts(v.host for _, v in errors)} fail {rules} error rule(s)"
    unjudged = report.unjudged("error")
    if unjudged:
        hosts = compact_hosts(v.host for _, v in unjudged)
        return f"no error failures, but {len(unjudged)} error-rule verdict(s) not judged on {hosts}"
    if report.outcome == "incomplete":
        return "no error failures, but nothing passed"
    return "every error rule judged, none failed"


def check_verdict(report: CheckReport) -> tuple[str, str, str]:
    """The check's verdict as (outcome, headline, detail), worded once for every surface: the
    terminal, the HTML page and the JUnit summary must never disagree (an incomplete check is
    never shown green anywhere). The detail starts with who fails, then the failures by rule,
    then the tally."""
    warnings = len(report.failures("warning"))
    counts = report.counts()
    rest = (
        f"{warnings} warning(s); {counts['pass']} pass, {counts['unknown']} unknown, "
        f"{counts['skipped']} skipped (rule × host)"
    )
    summary = _verdict_summary(report)
    errors = report.failures("error")
    if errors:
        hosts_by_rule: dict[str, list[str]] = {}
        for rule, verdict in errors:
            hosts_by_rule.setdefault(rule.id, []).append(verdict.host)
        where = "; ".join(f"{r} on {compact_hosts(h)}" for r, h in hosts_by_rule.items())
        detail = f"{summary}; {len(errors)} error failure(s) — {where}; {rest}"
        return "failed", "check failed", detail
    if report.failed_strictly:
        return (
            "failed",
            "check failed (--strict)",
            f"{summary}, which --strict counts as failures; {rest}",
        )
    if report.outcome == "incomplete":
        return "incomplete", "check incomplete", f"{summary}; {rest}"
    return "passed", "check passed", f"{summary}; {rest}"


def group_across(items: Iterable[CrossCohort]) -> list[tuple[str, CrossCohort, int]]:
    """Cross-cohort facts of one shape with the same values per cohort (each device of a list):
    (the shape or the fact, the first of them, how many), said once."""
    alike: dict[tuple[str, Any], list[CrossCohort]] = {}
    for item in items:
        alike.setdefault((shape(item.fact), item.groups), []).append(item)
    return [
        (parent if len(found) > 1 else found[0].fact, found[0], len(found))
        for (parent, _), found in alike.items()
    ]


def pair_rows(items: Sequence[CrossCohort], pair: Pair) -> list[tuple[str, str, str, int]]:
    """The facts that differ between the two cohorts of `pair`: (fact or shape, the first's
    value, the second's, how many facts). Devices alike are said once; a device list whose values
    vary by device (each GPU its own index) once too, as `values vary by device`."""
    rows: list[tuple[str, str, str, int]] = []
    varying: dict[tuple[str, bool, bool], list[tuple[str, Any, Any]]] = {}
    for fact, item, count in group_across(items):
        value_of = {c: v for v, cs in item.groups for c in cs}
        first, second = value_of.get(pair[0]), value_of.get(pair[1])
        if count == 1 and shape(fact) != fact:
            key = (shape(fact), first is None, second is None)
            varying.setdefault(key, []).append((fact, first, second))
            continue
        rows.append((fact, pair_value(first), pair_value(second), count))
    for (parent, no_first, no_second), found in varying.items():
        if len(found) < COLLAPSE_AT:
            rows += [(fact, pair_value(a), pair_value(b), 1) for fact, a, b in found]
            continue
        first_text = "—" if no_first else "values vary by device"
        second_text = "—" if no_second else "values vary by device"
        rows.append((parent, first_text, second_text, len(found)))
    return sorted(rows, key=lambda r: r[0])


def pair_value(value: Any) -> str:
    """A cohort's value in a pair listing; `—` where it has no such fact (a device it lacks)."""
    return "—" if value is None else short(value)


def skipped_by_reason(skipped: object) -> list[tuple[list[str], str]]:
    """Hosts left out of a fabric test (the section's `skipped_hosts`), folded: each reason once
    with its hosts, the host's own name taken out of it (`torch is not importable by python3`),
    most hosts first."""
    if not isinstance(skipped, Mapping):
        return []
    by_reason: dict[str, list[str]] = {}
    for host, why in skipped.items():
        text = str(why or "no reason given").replace(f" on {host}", "").replace(f"{host}: ", "")
        by_reason.setdefault(text, []).append(str(host))
    return sorted(((hosts, why) for why, hosts in by_reason.items()), key=lambda x: -len(x[0]))


def measured_groups(fabric: object) -> int:
    """How many groups of a fabric section ran to the end (0: nothing was measured)."""
    if not isinstance(fabric, Mapping):
        return 0
    groups = [*(fabric.get("pairs") or []), *([fabric["ring"]] if fabric.get("ring") else [])]
    return sum(1 for g in groups if isinstance(g, Mapping) and g.get("status") == "ok")


# NVIDIA's clock-event reasons as an operator reads them (health's nvidia-smi names and
# gpubench's sampler names): the power cap under load is a GPU at its power limit doing its job;
# slowdowns, thermal and power-brake events are the faults (the rules fail them).
CLOCK_EVENT_WORDS = {
    "gpu_idle": "idle",
    "idle": "idle",
    "applications_clocks_setting": "application clocks",
    "sw_power_cap": "SW power cap (normal under load)",
    "sw_thermal_slowdown": "SW thermal slowdown",
    "hw_slowdown": "HW slowdown",
    "hw_thermal_slowdown": "HW thermal slowdown",
    "hw_power_brake_slowdown": "HW power brake",
}
