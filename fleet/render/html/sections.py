"""Sections of the HTML report after the divergence: check verdicts, drift, hosts not compared,
and the per-host drill-down with raw probe data (within a size budget)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from fleet.analysis.across_hosts.diff import Unreported
from fleet.analysis.across_runs.drift import Drift
from fleet.checks import CheckReport, Rule, RuleResult, RuleVerdict, format_value, observed_text
from fleet.hostsets import compact_hosts
from fleet.models import HostOutcome
from fleet.render.grouping import grouped_verdicts, short, tally
from fleet.render.html.markup import chip, clip, esc, esc_text, folded, hosts_label, row, table

RAW_BUDGET = (
    1_500_000  # characters of raw probe JSON in the drill-down; odd and troubled hosts first
)
MAX_TAIL_CHARS = 2000

# ------------------------------------------------------------------------------------ checks


def checks_section(report: CheckReport) -> str:
    order = {"fail": 0, "unknown": 1, "skipped": 2, "pass": 3, "n/a": 4}
    results = sorted(report.results, key=lambda r: order.get(r.status, 5))
    return "".join(_rule(r) for r in results)


def _rule(result: RuleResult) -> str:
    rule = result.rule
    status = result.status
    shown = "warn" if status == "fail" and rule.severity == "warning" else status
    summary = (
        f"{chip(status if shown != 'warn' else 'unknown', shown)} <b>{esc(rule.id)}</b> "
        f'<span class="dim">{esc(rule.severity)} · {esc(tally(result.answers))}</span>'
    )
    body = [f'<p class="dim">{esc(rule.description)} <code>{esc(rule.source)}</code></p>']
    failing = result.having(("fail", "unknown", "skipped"))
    rows = [_verdict_row(rule, group) for group in grouped_verdicts(failing)]
    if rows:
        body.append(table(["hosts", "verdict", "observed", "expected", "fix / why"], rows))
    keys = " ".join([rule.id, *(v.host for v in failing)])
    return folded(summary, "".join(body), keys, is_open=status == "fail")


def _verdict_row(rule: Rule, verdicts: list[RuleVerdict]) -> str:
    first = verdicts[0]
    hosts = [v.host for v in verdicts]
    why = esc(first.fix or "")
    if first.reason:
        why += f'<div class="dim">{esc(first.reason)}</div>'
    expected = "" if first.expected is None else esc(format_value(first.expected))
    cells = [
        hosts_label(hosts),
        chip(first.status),
        _observed(first.observed, rule.kind)
        if rule.kind == "baseline"
        else esc(observed_text(rule, first) or ""),
        expected,
        why,
    ]
    return row(cells, " ".join(hosts))


def _observed(observed: Any, kind: str) -> str:
    """What the rule saw; a baseline's measurements outside their bands one per line."""
    if kind == "baseline" and isinstance(observed, list):
        return "<br>".join(esc(str(line)) for line in observed)
    return esc(format_value(observed))


# ------------------------------------------------------------------------------------- drift


def drift_section(drift: Drift) -> str:
    lines = [
        f"<p>baseline started {esc(drift.old_started)} · this run {esc(drift.new_started)} · "
        f"{len(drift.changes)} change(s) on {len(drift.changed_hosts)} host(s)</p>"
    ]
    if drift.baseline_chosen:
        lines.append(f'<p class="dim">{esc(drift.baseline_chosen)}</p>')
    lines += [f'<p class="note">warning: {esc(note)}</p>' for note in drift.unlike]
    if drift.left_out:
        lines.append(f'<p class="note">{esc(drift.left_out_note)}</p>')
    if drift.added_hosts:
        lines.append(f"<p>hosts new since the baseline: {hosts_label(drift.added_hosts)}</p>")
    if drift.removed_hosts:
        lines.append(f"<p>hosts gone since the baseline: {hosts_label(drift.removed_hosts)}</p>")
    if not drift.found and drift.comparable:
        lines.append('<p class="ok">no drift: nothing changed beyond tolerance</p>')
    elif not drift.found:
        lines.append('<p class="note">no drift among what both runs compare (above)</p>')
    rows = [
        row(
            [
                f"<code>{esc(c.fact)}</code>",
                esc(c.kind),
                esc(short(c.old)),
                esc(short(c.new)),
                hosts_label(c.hosts),
            ],
            " ".join([c.fact, *c.hosts]),
        )
        for c in drift.changes
    ]
    if rows:
        lines.append(table(["fact", "kind", "baseline", "now", "hosts"], rows))
    return "".join(lines)


# ------------------------------------------------------------------------------ not compared


def unreported_section(items: Sequence[Unreported]) -> str:
    """Grouped by probe, status and reason (the host's own name blanked), hosts named compactly."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for item in items:
        reason = item.reason.replace(item.host, "…") if item.host else item.reason
        groups.setdefault((item.probe or "", item.status, reason), []).append(item.host)
    rows = [
        row(
            [
                hosts_label(hosts),
                esc(probe or "(the whole host)"),
                chip(status),
                esc(clip(reason, 400)),
            ],
            " ".join(hosts),
        )
        for (probe, status, reason), hosts in sorted(
            groups.items(), key=lambda g: (g[0][0] != "", -len(g[1]))
        )
    ]
    return table(["hosts", "probe", "status", "why"], rows)


# ------------------------------------------------------------------------------- drill-down


class RawBudget:
    """Raw probe JSON shown once per distinct payload, until the budget is spent."""

    def __init__(self, limit: int = RAW_BUDGET) -> None:
        self.left = limit
        self.shown_by_id: dict[int, str] = {}
        self.shown_by_text: dict[str, str] = {}
        self.left_out = 0

    def payload(self, host: str, data: Mapping[str, Any]) -> str:
        earlier = self.shown_by_id.get(id(data))
        if earlier is None and self.left > 0:
            compact = json.dumps(data, sort_keys=True, default=str)  # the C encoder: fast
            earlier = self.shown_by_text.get(compact)
            if earlier is None and len(compact) <= self.left:
                self.left -= len(compact)
                self.shown_by_id[id(data)] = self.shown_by_text[compact] = host
                return f"<pre>{esc_text(pretty(data))}</pre>"
            if earlier is None:
                self.left = (
                    0  # spent: encoding the other hosts' payloads only to drop them costs seconds
                )
        if earlier is not None:
            return f'<p class="dim">the same data as {esc(earlier)}\'s (shown there)</p>'
        self.left_out += 1
        return '<p class="dim">left out to keep the page small: see the run file</p>'


def pretty(value: Any, depth: int = 0) -> str:
    """JSON with one member or item per line for two levels (an allreduce row per line), deeper
    values compact: readable, and written by the C encoder (indent= would use the slow one)."""
    if depth >= 2 or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    pad, end = " " * (depth + 1), " " * depth
    if isinstance(value, dict):
        items = [
            f"{pad}{json.dumps(str(k))}: {pretty(v, depth + 1)}"
            for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
        ]
        return "{\n" + ",\n".join(items) + f"\n{end}}}"
    return "[\n" + ",\n".join(f"{pad}{pretty(v, depth + 1)}" for v in value) + f"\n{end}]"


def drilldown_section(outcomes: Sequence[HostOutcome], first: Sequence[str]) -> str:
    """One folded block per host, `first` (odd, troubled) first; raw data within RAW_BUDGET."""
    budget = RawBudget()
    ahead = set(first)
    ordered = [o for o in outcomes if o.name in ahead] + [
        o for o in outcomes if o.name not in ahead
    ]
    heads: dict[tuple[str, str], str] = {}
    blocks = "".join(_host_block(o, budget, heads) for o in ordered)
    note = ""
    if budget.left_out:
        note = (
            f'<p class="note">{budget.left_out} probe payload(s) left out of the raw data to keep the page '
            "small (odd and troubled hosts come first); the run file has them all.</p>"
        )
    return note + blocks


def _host_block(
    outcome: HostOutcome, budget: RawBudget, heads: dict[tuple[str, str], str] | None = None
) -> str:
    """`heads`: each (probe, status)'s markup so far, kept between hosts (20,000 hosts, a few
    probes and statuses: made once, not escaped again per host)."""
    heads = {} if heads is None else heads
    good = sum(1 for r in outcome.probes.values() if r.status in ("ok", "absent"))
    summary = (
        f"<b>{esc(outcome.name)}</b> {_head(heads, '', outcome.status)}"
        f'<span class="dim">{esc(outcome.address)} · {outcome.elapsed_s:.1f}s · {good}/{len(outcome.probes)} probes</span>'
    )
    parts = []
    if outcome.error:
        parts.append(f'<p class="error">{esc(outcome.error)}</p>')
    if outcome.hint:
        parts.append(f'<p class="hint">hint: {esc(outcome.hint)}</p>')
    for name, result in sorted(outcome.probes.items()):
        head = f"{_head(heads, name, result.status)}<span class=dim>{result.elapsed_s:.2f}s</span>"
        body = f'<p class="error">{esc(result.error)}</p>' if result.error else ""
        if result.output_tail.strip():
            body += f'<pre class="tail">{esc(result.output_tail[-MAX_TAIL_CHARS:])}</pre>'
        body += budget.payload(outcome.name, result.data) if result.data else ""
        parts.append(folded(head, body))
    return folded(summary, "".join(parts), outcome.name)


def _head(heads: dict[tuple[str, str], str], probe: str, status: str) -> str:
    """A probe's name and status chip, then a space (a host's: its status chip alone)."""
    found = heads.get((probe, status))
    if found is None:
        named = f"{esc(probe)} " if probe else ""
        found = heads[(probe, status)] = f"{named}{chip(status)} "
    return found


def compact(hosts: Sequence[str]) -> str:
    return compact_hosts(hosts)
