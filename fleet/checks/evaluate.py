"""Judging every rule on every host: the preconditions (host reached, probes ok, `when:`), the
per-host `check:` rules, and each failure's fix text. The cross-host rules: fleet.checks.uniform."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fleet.checks.documents import RESULTS_BESIDE_PROBES, host_documents
from fleet.checks.fixes import with_fixes
from fleet.checks.language import EvaluationError, search_or_none, truthy, unanswered
from fleet.checks.model import CheckReport, Rule, RuleResult, RuleVerdict
from fleet.checks.uniform import judge_keys, judge_uniform
from fleet.models import NOT_REACHED, OPT_IN_PROBES, HostOutcome, Run


def evaluate(
    rules: Sequence[Rule],
    run: Run,
    probe_args: Mapping[str, Mapping[str, Any]] | None = None,
    strict: bool = False,
) -> CheckReport:
    """Judge every rule on every host of `run`; `probe_args` per host name, from the inventory;
    `strict`: an error rule not judged on some host fails the check (--strict)."""
    args = probe_args or {}
    documents = host_documents(run.hosts, args)
    results = tuple(RuleResult(rule, _judge(rule, run.hosts, documents)) for rule in rules)
    unreached = {
        name: _unreached_reason(outcome, blanked=True)
        for name, outcome in run.hosts.items()
        if _not_reached(outcome)
    }
    return CheckReport(results, tuple(run.hosts), unreached, strict)


def _not_reached(outcome: HostOutcome) -> bool:
    return outcome.status in NOT_REACHED or outcome.status == "interrupted" or not outcome.probes


def _unreached_reason(outcome: HostOutcome, blanked: bool = False) -> str:
    """Why no rule judged the host; `blanked`: its own name and address as "…" (to fold)."""
    error = outcome.ending()[1].split("\n")[0] if blanked else outcome.error or ""
    return f"host {outcome.status}: {error}".rstrip(": ")


def _judge(
    rule: Rule, hosts: Mapping[str, HostOutcome], documents: Mapping[str, dict[str, Any]]
) -> tuple[RuleVerdict, ...]:
    pending: dict[str, dict[str, Any]] = {}
    settled: dict[str, RuleVerdict] = {}
    for name, outcome in hosts.items():
        verdict = _precondition(rule, outcome, documents[name])
        if verdict is None:
            pending[name] = documents[name]
        else:
            settled[name] = verdict
    judge = {"check": _judge_each, "uniform": judge_uniform, "uniform_keys": judge_keys}
    settled.update(judge[rule.kind](rule, pending))
    return tuple(with_fixes(rule, [settled[name] for name in hosts], documents))


def _precondition(rule: Rule, outcome: HostOutcome, document: dict[str, Any]) -> RuleVerdict | None:
    """skipped (host not reached, probe not ok) or n/a (`when:` false); None: go on judging."""
    name = outcome.name
    if _not_reached(outcome):
        return RuleVerdict(name, "skipped", reason=_unreached_reason(outcome))
    for probe in rule.needs:
        result = outcome.probes.get(probe)
        if result is None and probe in RESULTS_BESIDE_PROBES:  # another kind of run: no fault
            return RuleVerdict(name, "n/a", reason=f"no {probe} results: run `fleet {probe}`")
        if result is None and probe in OPT_IN_PROBES:  # not asked for: no fault either
            why = f"probe {probe} was not run (opt-in: fleet probe --{probe})"
            return RuleVerdict(name, "n/a", reason=why)
        if result is None:
            return RuleVerdict(name, "skipped", reason=f"probe {probe} was not run")
        if result.status != "ok":
            why = f": {result.error}" if result.error else ""
            return RuleVerdict(name, "skipped", reason=f"probe {probe} {result.status}{why}")
    if rule.when is None:
        return None
    try:
        applies = rule.when.search(document)
    except EvaluationError as exc:
        return RuleVerdict(name, "unknown", reason=f"when: {exc}")
    if applies is None:
        why = unanswered(rule.when, document)
        return RuleVerdict(name, "unknown", reason=f"whether it applies is not known: {why}")
    return None if truthy(applies) else RuleVerdict(name, "n/a", reason=f"not {rule.when.text}")


def _judge_each(rule: Rule, documents: Mapping[str, dict[str, Any]]) -> dict[str, RuleVerdict]:
    assert rule.check is not None
    verdicts = {}
    for name, document in documents.items():
        observed = search_or_none(rule.observed, document)
        read = {**document, "_observed": observed}
        try:
            value = rule.check.search(read)
        except EvaluationError as exc:
            verdicts[name] = RuleVerdict(name, "unknown", observed, reason=str(exc))
            continue
        verdicts[name] = _verdict(rule, name, read, value, observed)
    return verdicts


def _verdict(
    rule: Rule, name: str, document: dict[str, Any], value: Any, observed: Any
) -> RuleVerdict:
    if value is None:  # the facts the check reads, in words: never the rule's JMESPath
        assert rule.check is not None
        why = f"cannot be judged: {unanswered(rule.check, document)}"
        return RuleVerdict(name, "unknown", observed, reason=why)
    if truthy(value):
        return RuleVerdict(name, "pass", observed)
    return RuleVerdict(name, "fail", observed)
