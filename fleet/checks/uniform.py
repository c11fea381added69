"""The cross-host rules: `uniform:` (one value the same on every host of a cohort, or the
`expected:` one) and `uniform_keys:` (each key of an object the same; unset is a value too).
Where nothing is expected, the cohort's majority is: the one rule of fleet.analysis.across_hosts.majority.

Values are read through a RuleView (fleet.checks.sharing): hosts that answered alike share one
search and one value object, so the values are keyed (value_key) once per object, not per host,
and a verdict found for one host is every such host's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet.analysis.across_hosts.majority import rank
from fleet.checks.language import EvaluationError, Expression, unanswered
from fleet.checks.model import Rule, RuleVerdict, value_key

if TYPE_CHECKING:
    from fleet.checks.sharing import RuleView


class _Keys:
    """value_key of each value object once (the values of alike hosts are one object)."""

    def __init__(self) -> None:
        self._found: dict[int, tuple[Any, str]] = {}

    def __call__(self, value: Any) -> str:
        found = self._found.get(id(value))
        if found is None:
            found = self._found[id(value)] = (value, value_key(value))  # kept: its id stays its
        return found[1]


Alike = Mapping[Any, Sequence[str]]  # key (RuleView.key) → the hosts that answered alike


def judge_uniform(rule: Rule, alike: Alike, view: RuleView) -> dict[str, RuleVerdict]:
    assert rule.uniform is not None
    keys = _Keys()
    values, cohorts, verdicts = _read_across(rule, rule.uniform, alike, view)
    majorities = _majorities(values, cohorts, alike, keys)
    for key, value in values.items():
        names = alike[key]
        expected = _search_or_none(rule.expected, names[0], view)
        reference, why = (expected, "") if expected is not None else majorities[keys(cohorts[key])]
        verdict = _uniform_verdict(names[0], value, reference, why, cohorts[key])
        verdicts.update(dict.fromkeys(names, verdict))  # shared: evaluate.Verdicts
    return verdicts


def _search_or_none(expression: Expression | None, name: str, view: RuleView) -> Any:
    if expression is None:
        return None
    try:
        return view.search(expression, name)
    except EvaluationError:
        return None


def _read_across(
    rule: Rule, expression: Expression, alike: Alike, view: RuleView
) -> tuple[dict[Any, Any], dict[Any, Any], dict[str, RuleVerdict]]:
    """Each key's value of a cross-host rule and its cohort; `unknown` where either is missing."""
    verdicts: dict[str, RuleVerdict] = {}
    values: dict[Any, Any] = {}
    cohorts: dict[Any, Any] = {}
    for key, names in alike.items():
        try:
            value = view.search(expression, names[0])
            cohort = view.search(rule.cohort, names[0]) if rule.cohort else None
        except EvaluationError as exc:
            verdicts.update((n, RuleVerdict(n, "unknown", reason=str(exc))) for n in names)
            continue
        if value is None or (rule.cohort is not None and cohort is None):
            missing = expression if value is None else rule.cohort
            assert missing is not None
            what = "its value" if value is None else "its cohort"
            reason = f"{what} is not known: {unanswered(missing, view.document(names[0]))}"
            verdicts.update((n, RuleVerdict(n, "unknown", reason=reason)) for n in names)
            continue
        values[key], cohorts[key] = value, cohort
    return values, cohorts, verdicts


def judge_keys(rule: Rule, alike: Alike, view: RuleView) -> dict[str, RuleVerdict]:
    """uniform_keys: every key of the object is its own uniform comparison (unset is a value)."""
    assert rule.uniform_keys is not None
    keys = _Keys()
    values, cohorts, verdicts = _read_across(rule, rule.uniform_keys, alike, view)
    for key in [k for k, v in values.items() if not isinstance(v, dict)]:
        shape = type(values.pop(key)).__name__
        reason = f"{rule.uniform_keys.text} is a {shape}"
        verdicts.update((n, RuleVerdict(n, "unknown", reason=reason)) for n in alike[key])
    majorities = _key_majorities(values, cohorts, alike, keys)
    for key, settings in values.items():
        names = alike[key]
        notable = majorities[keys(cohorts[key])]
        verdict = _keys_verdict(names[0], settings, notable, cohorts[key])
        verdicts.update(dict.fromkeys(names, verdict))  # shared: evaluate.Verdicts
    return verdicts


def _key_majorities(
    values: Mapping[Any, dict[str, Any]], cohorts: Mapping[Any, Any], alike: Alike, keys: _Keys
) -> dict[str, dict[str, tuple[Any, str]]]:
    """Per cohort, the keys its hosts are held to: (the majority's value, "") where the majority
    sets the key, (None, why) where the cohort is split on it. Every other key's majority is
    unset: only the hosts that set it differ, and they are found from their own settings, so the
    work follows the settings reported, not keys × hosts (hosts with keys of their own)."""
    members: dict[str, list[tuple[dict[str, Any], int]]] = {}
    for key, settings in values.items():
        members.setdefault(keys(cohorts[key]), []).append((settings, len(alike[key])))
    return {cohort: _notable(found) for cohort, found in members.items()}


def _notable(found: list[tuple[dict[str, Any], int]]) -> dict[str, tuple[Any, str]]:
    """`found`: each distinct settings object with how many hosts reported it."""
    present: Counter[str] = Counter()
    for settings, hosts in found:
        for key in settings:
            present[key] += hosts
    everyone = sum(hosts for _, hosts in found)
    # set on fewer than half the hosts: more hosts leave it unset than set it to any one value
    common = sorted(key for key, count in present.items() if 2 * count >= everyone)
    judged = {key: _majority(_by_value([(s.get(key), n) for s, n in found])) for key in common}
    return {key: (value, why) for key, (value, why) in judged.items() if why or value is not None}


def _keys_verdict(
    name: str, settings: dict[str, Any], notable: dict[str, tuple[Any, str]], cohort: Any
) -> RuleVerdict:
    differing = {}
    for key in sorted(set(settings) | set(notable)):
        majority, why = notable.get(key, (None, ""))
        if why or value_key(settings.get(key)) != value_key(majority):
            differing[key] = (settings.get(key), majority, why)
    if not differing:
        return RuleVerdict(name, "pass", cohort=cohort)
    observed = {key: here for key, (here, _, _) in differing.items()}
    expected = {key: majority for key, (_, majority, why) in differing.items() if not why}
    reason = "; ".join(f"{key}: {why}" for key, (_, _, why) in differing.items() if why)
    return RuleVerdict(name, "fail", observed, expected or None, reason=reason, cohort=cohort)


def _uniform_verdict(name: str, value: Any, reference: Any, why: str, cohort: Any) -> RuleVerdict:
    if reference is not None and value_key(value) == value_key(reference):
        return RuleVerdict(name, "pass", value, reference, cohort=cohort)
    return RuleVerdict(name, "fail", value, reference, reason=why, cohort=cohort)


def _majorities(
    values: Mapping[Any, Any], cohorts: Mapping[Any, Any], alike: Alike, keys: _Keys
) -> dict[str, tuple[Any, str]]:
    """Per cohort: (the majority value, "") or (None, why) when the hosts are split; the one
    majority rule of fleet.analysis.across_hosts.majority, which the cross-host diff uses too."""
    by_cohort: dict[str, dict[str, int]] = {}
    for key, value in values.items():
        counts = by_cohort.setdefault(keys(cohorts[key]), {})
        counts[keys(value)] = counts.get(keys(value), 0) + len(alike[key])
    return {cohort: _majority(counts) for cohort, counts in by_cohort.items()}


def _majority(counts: Mapping[str, int]) -> tuple[Any, str]:
    """`counts`: how many hosts report each value (as value_key)."""
    ranking = rank({value: [""] * hosts for value, hosts in counts.items()})
    if ranking.majority is None:
        split = "; ".join(f"{_shown(json.loads(k))} on {len(hosts)}" for k, hosts in ranking.groups)
        return None, f"no majority value to compare with ({split})"
    return json.loads(ranking.majority[0]), ""


def _by_value(values: list[tuple[Any, int]]) -> dict[str, int]:
    """Values as the majority rule takes them: each distinct value with how many hosts have it."""
    grouped: dict[str, int] = {}
    for value, hosts in values:
        found = value_key(value)
        grouped[found] = grouped.get(found, 0) + hosts
    return grouped


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value)  # None: a key a host lacks (uniform_keys)
