"""Judging every rule on every host: the preconditions (host reached, probes ok, `when:`), the
per-host `check:` rules, and each failure's fix text. The cross-host rules: fleet.checks.uniform.

Each rule is judged once per group of hosts it cannot tell apart (fleet.checks.sharing): the
verdict found for one host of a group is every host's of that group, under its own name."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleet.analysis.classes import FactCache
from fleet.analysis.facts import declared_facts
from fleet.checks.documents import results_beside_probes
from fleet.checks.fixes import with_fixes
from fleet.checks.language import EvaluationError, truthy, unanswered
from fleet.checks.model import CheckReport, Rule, RuleResult, RuleVerdict, Verdicts
from fleet.checks.sharing import HostDocuments, RuleView
from fleet.checks.uniform import judge_keys, judge_uniform
from fleet.collector import paused
from fleet.models import HostOutcome, Run
from fleet.registry import declared


def evaluate(
    rules: Sequence[Rule],
    run: Run,
    probe_args: Mapping[str, Mapping[str, Any]] | None = None,
    strict: bool = False,
    documents: HostDocuments | None = None,
    classes: FactCache | None = None,
) -> CheckReport:
    """Judge every rule on every host of `run`; `probe_args` per host name, from the inventory;
    `strict`: an error rule not judged on some host fails the check (--strict); `documents`:
    the run's hosts as rules read them (made here when not given); `classes`: the run's
    payloads as the cross-host diff classed them (used where its declarations are fleet's)."""
    args = probe_args or {}
    with paused():  # a verdict per rule and host, and no garbage: fleet.collector
        if documents is None:
            documents = HostDocuments(run.hosts, args, declared_facts(), classes)
        names = tuple(run.hosts)
        places = {name: place for place, name in enumerate(names)}
        results = tuple(
            RuleResult(rule, Verdicts(_judge(rule, run.hosts, documents, places), names))
            for rule in rules
        )
    unreached = {
        name: _unreached_reason(outcome, blanked=True)
        for name, outcome in documents.unreached.items()
    }
    return CheckReport(results, tuple(run.hosts), unreached, strict)


def _unreached_reason(outcome: HostOutcome, blanked: bool = False) -> str:
    """Why no rule judged the host; `blanked`: its own name and address as "…" (to fold)."""
    error = outcome.ending()[1].split("\n")[0] if blanked else outcome.error or ""
    return f"host {outcome.status}: {error}".rstrip(": ")


def _judge(
    rule: Rule,
    hosts: Mapping[str, HostOutcome],
    documents: HostDocuments,
    places: Mapping[str, int],
) -> list[RuleVerdict]:
    """The rule's verdict on every host, in the run's order (`places`: each host's position):
    each verdict is put in its place, not gathered by name and sorted after (20,000 hosts). The
    hosts that answered alike share one verdict object (model.Verdicts makes each host's own)."""
    view = RuleView(documents, rule)
    placed: list[RuleVerdict | None] = [None] * len(places)
    for name, outcome in documents.unreached.items():
        placed[places[name]] = RuleVerdict(name, "skipped", reason=_unreached_reason(outcome))
    pending: dict[Any, Sequence[str]] = {}
    for key, names in view.alike().items():  # the hosts the rule cannot tell apart
        verdict = _precondition(rule, hosts[names[0]], view)
        if verdict is None and rule.kind != "check":
            pending[key] = names
            continue
        if verdict is None:
            verdict = _judge_one(rule, names[0], view)
        _place(placed, map(places.__getitem__, names), verdict)
    if pending:
        judge = judge_uniform if rule.kind == "uniform" else judge_keys
        judged = judge(rule, pending, view)
        _place(placed, map(places.__getitem__, judged), judged.values())
    # every host has its verdict (by types: a C-level pass, not a comparison per verdict)
    assert type(None) not in set(map(type, placed)), f"{rule.id}: a host without a verdict"
    verdicts: list[RuleVerdict] = placed  # type: ignore[assignment]
    with_fixes(rule, verdicts, list(places), view)
    return verdicts


def _place(
    placed: list[RuleVerdict | None],
    where: Iterable[int],
    verdicts: RuleVerdict | Iterable[RuleVerdict],
) -> None:
    """Each verdict (or the one `verdicts`, for every place) put at its place, in C."""
    each = itertools.repeat(verdicts) if isinstance(verdicts, RuleVerdict) else verdicts
    collections.deque(map(placed.__setitem__, where, each), maxlen=0)


def _precondition(rule: Rule, outcome: HostOutcome, view: RuleView) -> RuleVerdict | None:
    """skipped (probe not ok) or n/a (`when:` false, or a probe that cannot apply to the host);
    None: go on judging."""
    name = outcome.name
    for probe in rule.needs:
        result = outcome.probes.get(probe)
        if result is None and probe in results_beside_probes():  # another kind of run: no fault
            return RuleVerdict(name, "n/a", reason=f"no {probe} results: run `fleet {probe}`")
        # an opt-in probe (its unit's OPT_IN) not asked for: no fault either
        if result is None and probe in declared.opt_in():
            why = f"probe {probe} was not run (opt-in: fleet probe --{probe})"
            return RuleVerdict(name, "n/a", reason=why)
        if result is None:
            return RuleVerdict(name, "skipped", reason=f"probe {probe} was not run")
        if result.not_applicable:  # by the host's nature (one GPU): judged, and not a fault
            return RuleVerdict(name, "n/a", reason=f"probe {probe} does not apply: {result.error}")
        if result.status != "ok":
            why = f": {result.error}" if result.error else ""
            return RuleVerdict(name, "skipped", reason=f"probe {probe} {result.status}{why}")
    if rule.when is None:
        return None
    try:
        applies = view.search(rule.when, name)
    except EvaluationError as exc:
        return RuleVerdict(name, "unknown", reason=f"when: {exc}")
    if applies is None:
        why = unanswered(rule.when, view.document(name))
        return RuleVerdict(name, "unknown", reason=f"whether it applies is not known: {why}")
    return None if truthy(applies) else RuleVerdict(name, "n/a", reason=f"not {rule.when.text}")


def _judge_one(rule: Rule, name: str, view: RuleView) -> RuleVerdict:
    assert rule.check is not None
    observed = None
    if rule.observed is not None:
        try:
            observed = view.search(rule.observed, name)
        except EvaluationError:
            observed = None
    try:
        value = view.search(rule.check, name, {"_observed": observed})
    except EvaluationError as exc:
        return RuleVerdict(name, "unknown", observed, reason=str(exc))
    if value is None:  # the facts the check reads, in words: never the rule's JMESPath
        why = unanswered(rule.check, {**view.document(name), "_observed": observed})
        return RuleVerdict(name, "unknown", observed, reason=f"cannot be judged: {why}")
    if truthy(value):
        return RuleVerdict(name, "pass", observed)
    return RuleVerdict(name, "fail", observed)
