"""Fix texts and values as a person reads them.

A rule's `fix:` is filled per failing host: `{EXPR}` with a JMESPath value of the host's document,
`{observed}` and `{expected}` with the rule's own, `{hosts}` with every host of the cohort that
failed the same way, folded (`gpu-[03,06]`). Values read `a, b` (lists), `KEY=value, …` (objects,
`KEY unset` for null), `(not reported)` (null); long lists are summarised (docs/rules.md).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleet.checks.language import EvaluationError
from fleet.checks.model import Rule, RuleVerdict, value_key
from fleet.hostsets import compact_hosts

if TYPE_CHECKING:
    from fleet.checks.sharing import RuleView

PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
FIX_OWN = ("observed", "expected", "hosts")  # placeholders the rule fills, not JMESPath
NOT_REPORTED = "(not reported)"
LONG_LIST = 8  # longer lists are summarised in fix texts and reports (the JSON keeps them whole)
EXAMPLES = 3  # example pairs shown per distinct value
_STATUS = operator.attrgetter("status")
PAIR = re.compile(r"^(?P<pair>[^:→]+→[^:]+): (?P<value>.*)$", re.DOTALL)


def with_fixes(
    rule: Rule, verdicts: list[RuleVerdict], hosts: Sequence[str], view: RuleView
) -> None:
    """Each failure given its fix text, in place (`verdicts[i]` is host `hosts[i]`'s, its
    object shared with the hosts that answered alike: model.Verdicts); `{hosts}` names every
    host of its cohort failing the same way (same cohort, same observed value), folded once per
    such group, not once per host: the fold reads every name of the group, so folding per host
    made a check quadratic in hosts. A fix is filled once per distinct answer (the view's key)
    and the verdict with it shared by the hosts it is the same for."""
    statuses = map(_STATUS, verdicts)  # the failures' places, picked in C (20,000 verdicts)
    failed = list(itertools.compress(range(len(verdicts)), map("fail".__eq__, statuses)))
    if not failed:
        return
    alike: dict[tuple[str, str], list[str]] = {}
    group_of: dict[str, tuple[str, str]] = {}
    keyed: dict[int, tuple[Any, str]] = {}  # value_key once per value object (kept alive)
    for place in failed:
        v, host = verdicts[place], hosts[place]
        group_of[host] = key = (_keyed(v.cohort, keyed), _keyed(v.observed, keyed))
        alike.setdefault(key, []).append(host)
    names = (
        {key: compact_hosts(hosts) for key, hosts in alike.items()} if _quotes_hosts(rule) else {}
    )
    fixes: dict[tuple[Any, ...], str] = {}
    fixed: dict[tuple[int, str], RuleVerdict] = {}  # (the shared verdict, its fix) → with it
    for place in failed:
        v, host = verdicts[place], hosts[place]
        named = names.get(group_of[host], "")
        slot = (view.key(host), group_of[host], _keyed(v.expected, keyed), named)
        fix = fixes.get(slot)
        if fix is None:
            fix = fixes[slot] = render_fix(rule, view.document(host), v.observed, v.expected, named)
        with_fix = fixed.get((id(v), fix))
        if with_fix is None:
            with_fix = fixed[(id(v), fix)] = v.like(v.host, fix=fix)
        verdicts[place] = with_fix


def _keyed(value: Any, keyed: dict[int, tuple[Any, str]]) -> str:
    found = keyed.get(id(value))
    if found is None:
        found = keyed[id(value)] = (value, value_key(value))
    return found[1]


def _quotes_hosts(rule: Rule) -> bool:
    return any((m.group(1) or "").strip() == "hosts" for m in PLACEHOLDER.finditer(rule.fix))


def render_fix(
    rule: Rule, document: Mapping[str, Any], observed: Any, expected: Any, hosts: str = ""
) -> str:
    """The rule's fix with `{…}` placeholders replaced by what this host reported."""
    own = {"observed": observed, "expected": expected}

    def fill(match: re.Match[str]) -> str:
        if match.group(0) in ("{{", "}}"):
            return match.group(0)[0]
        text = match.group(1)
        if text.strip() == "hosts":
            return hosts or str(document.get("_host", {}).get("name", "?"))
        if text.strip() in own:
            return format_value(own[text.strip()])
        try:
            return format_value(rule.fix_expressions[text].search(document))
        except EvaluationError:
            return NOT_REPORTED

    return PLACEHOLDER.sub(fill, rule.fix)


def observed_text(rule: Rule, verdict: RuleVerdict) -> str | None:
    """What a verdict shows as observed, or None where there is nothing to show: a host where the
    rule was skipped or does not apply, a `check:` rule without `observed:`, and a `check:` rule
    that failed with no observed value (the facts it judged were reported: saying "not reported"
    there would be false)."""
    if verdict.status in ("skipped", "n/a"):
        return None
    if rule.kind == "check" and (
        rule.observed is None or (verdict.status == "fail" and verdict.observed is None)
    ):
        return None
    return format_value(verdict.observed)


def format_value(value: Any) -> str:
    """A fact as a person reads it: lists joined, null as '(not reported)', floats short."""
    if value is None:
        return NOT_REPORTED
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        if len(value) > LONG_LIST:
            return _summarised([format_value(v) for v in value])
        return ", ".join(format_value(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(_setting(k, v) for k, v in sorted(value.items())) if value else "(none)"
    return str(value)


def _summarised(items: list[str]) -> str:
    """A long list read at a glance: an 8-GPU matrix has 56 pairs. Pairs (`GPU0→GPU1: NS`, from
    pairs_not) by value, with counts and a few examples; other lists by distinct item."""
    pairs = pairs_summary(items)
    if pairs is not None:
        return pairs
    counts = Counter(items).most_common()
    shown = [f"{item} × {n}" if n > 1 else item for item, n in counts[:LONG_LIST]]
    more = f", … ({len(counts) - LONG_LIST} more distinct)" if len(counts) > LONG_LIST else ""
    return f"{len(items)} items: " + ", ".join(shown) + more


def pairs_summary(items: list[str], examples: int = EXAMPLES) -> str | None:
    """Pairs of a matrix (`GPU0→GPU1: GNS`, from pairs_not and pairs_in) as one line: the
    count, each value with its count and `examples` pairs, most common first (`56 pairs: GNS ×
    56 (e.g. GPU0→GPU1, GPU0→GPU2)`); None for a list that is not all pairs."""
    by_value: dict[str, list[str]] = {}
    for item in items:
        match = PAIR.match(item)
        if match is None:
            return None
        by_value.setdefault(match["value"], []).append(match["pair"])
    ranked = sorted(by_value.items(), key=lambda entry: -len(entry[1]))
    shown = [f"{v} × {len(p)} (e.g. {', '.join(p[:examples])})" for v, p in ranked]
    return f"{len(items)} pairs: " + "; ".join(shown)


def _setting(key: str, value: Any) -> str:
    if value is None:
        return f"{key} unset"
    shown = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
    return f"{key}={format_value(shown)}"
