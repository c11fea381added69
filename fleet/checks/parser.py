"""Rules files read and validated: every mistake is a RuleFileError that starts with FILE:LINE
and says what to write instead (the language: docs/rules.md)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from fleet.checks.actions import ACTIONS
from fleet.checks.documents import helpers, results_beside_probes
from fleet.checks.fixes import FIX_OWN, PLACEHOLDER
from fleet.checks.language import Expression, compile_expression
from fleet.checks.model import (
    EXPRESSION_KEYS,
    KINDS,
    OLD_SEVERITIES,
    RULE_KEYS,
    SEVERITIES,
    Probing,
    Rule,
    RulesFile,
)
from fleet.checks.packs import pack_path
from fleet.errors import UsageError
from fleet.yamlfile import Location

RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class RuleFileError(UsageError):
    """A rules file that cannot be used; the message starts with FILE:LINE (exit code 2)."""


TOP_KEYS = ("rules", "description", "rules_from", "probing")
PROBING_KEYS = ("probes", "sample")
SAMPLE_RANGE_S = (0.5, 60.0)  # as fleet probe --sample


def load_rules(path: str | Path, probes: Iterable[str]) -> list[Rule]:
    """Read and validate one rules file; `probes` are the names a rule may read."""
    return load_rules_file(path, probes).rules


def load_rules_file(
    path: str | Path, probes: Iterable[str], label: str = "", keep: Collection[str] | None = None
) -> RulesFile:
    """One rules file read and validated: its rules and its `probing` (`label` names the file
    there, e.g. `pack health`; else its path). `keep`: only the rules of these ids are parsed
    (a built-in pack's, where the others will not be judged)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise RuleFileError(
            f"rules file {path} does not exist", hint="pass an existing file with --rules"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(f"cannot read rules file {path}: {exc}") from exc
    return parse_rules_file(text, str(path), probes, label, keep)


def parse_rules(text: str, path: str, probes: Iterable[str]) -> list[Rule]:
    return parse_rules_file(text, path, probes).rules


def parse_rules_file(
    text: str,
    path: str,
    probes: Iterable[str],
    label: str = "",
    keep: Collection[str] | None = None,
) -> RulesFile:
    """One rules file's text read and validated (see load_rules_file)."""
    where = Location(path, RuleFileError)
    document = where.parse(
        text, hint="check the indentation and quoting near that line (quote JMESPath expressions)"
    )
    if not isinstance(document, dict) or not ("rules" in document or "rules_from" in document):
        raise where.fail("a rules file is a mapping with a 'rules:' list", hint=_EXAMPLE_HINT)
    unknown = [k for k in document if k not in TOP_KEYS]
    if unknown:
        raise where.at(document, unknown[0]).fail(
            f"unknown key {unknown[0]!r} at the top level", hint=f"allowed: {', '.join(TOP_KEYS)}"
        )
    names = frozenset(probes) | results_beside_probes()
    rules = _taken_rules(document, where, probes)
    if "rules" in document:
        raw_rules = document["rules"]
        if not isinstance(raw_rules, list) or not raw_rules:
            raise where.at(document, "rules").fail("'rules:' must be a non-empty list of rules")
        if keep is not None:
            raw_rules = [r for r in raw_rules if not isinstance(r, dict) or r.get("id") in keep]
        rules += [_parse_rule(raw, where.at(document, "rules"), names) for raw in raw_rules]
    check_unique_ids(rules)
    return RulesFile(rules, _probing(document, where, frozenset(probes), label or path))


def _taken_rules(document: dict[Any, Any], where: Location, probes: Iterable[str]) -> list[Rule]:
    """The rules `rules_from: {pack: NAME, ids: [ID or glob, …]}` takes from a built-in pack, in
    the pack's order; each pattern must match one of its rules. Only fleet's own packs can be
    named, and none of them takes from one that takes from it (tests/cli/test_pack_probing.py)."""
    if "rules_from" not in document:
        return []
    here = where.at(document, "rules_from")
    raw = document["rules_from"]
    shape = "'rules_from:' is {pack: NAME, ids: [ID or glob, …]}"
    example = "e.g. rules_from: {pack: inference, ids: ['health-*', gpu-count]}"
    if not isinstance(raw, dict) or set(raw) != {"pack", "ids"}:
        raise here.fail(shape, hint=example)
    patterns = raw["ids"]
    if (
        not isinstance(patterns, list)
        or not patterns
        or not all(isinstance(p, str) and p.strip() for p in patterns)
    ):
        raise here.at(raw, "ids").fail("'ids:' is a list of rule ids or globs", hint=example)
    try:
        pack = pack_path(str(raw["pack"]))
    except UsageError as exc:
        raise here.at(raw, "pack").fail(exc.message, hint=exc.hint) from exc
    offered = load_rules_file(pack, probes)
    for pattern in patterns:
        if not any(fnmatchcase(rule.id, pattern) for rule in offered.rules):
            raise here.at(raw, "ids").fail(
                f"{pattern!r} matches no rule of pack {raw['pack']}",
                hint=f"its rules: {', '.join(r.id for r in offered.rules[:12])}, …",
            )
    return [r for r in offered.rules if any(fnmatchcase(r.id, p) for p in patterns)]


def _probing(
    document: dict[Any, Any], where: Location, probes: frozenset[str], label: str
) -> Probing:
    """`probing: {probes: [NAME, …], sample: SECONDS}`, both optional."""
    raw = document.get("probing")
    if raw is None:
        return Probing()
    here = where.at(document, "probing")
    if not isinstance(raw, dict) or not raw or any(k not in PROBING_KEYS for k in raw):
        raise here.fail(
            "'probing:' is {probes: [NAME, …], sample: SECONDS}, either or both",
            hint="e.g. probing: {probes: [gpu, health], sample: 5}",
        )
    chosen = raw.get("probes")
    if chosen is not None and (
        not isinstance(chosen, list) or not chosen or not all(isinstance(p, str) for p in chosen)
    ):
        raise here.at(raw, "probes").fail("'probes:' is a non-empty list of probe names")
    unknown = [p for p in chosen or () if p not in probes]
    if unknown:
        raise here.at(raw, "probes").fail(
            f"there is no probe {unknown[0]!r}", hint=f"probes: {', '.join(sorted(probes))}"
        )
    sample = raw.get("sample")
    low, high = SAMPLE_RANGE_S
    if sample is not None and (
        isinstance(sample, bool)
        or not isinstance(sample, (int, float))
        or not low <= sample <= high
    ):
        raise here.at(raw, "sample").fail(
            f"'sample:' is the seconds between the health probe's two reads, {low:g} to {high:g}"
        )
    return Probing(
        None if chosen is None else tuple(chosen),
        None if sample is None else float(sample),
        label,
    )


_EXAMPLE_HINT = (
    "e.g. rules: [{id: torch-arch, severity: error, "
    "check: 'every(map(&arch_supported, torch.devices), `true`)', fix: 'install …'}]"
)


def check_unique_ids(rules: Sequence[Rule]) -> None:
    """Rule ids name JUnit test cases and report entries: two rules may not share one."""
    first: dict[str, Rule] = {}
    for rule in rules:
        if rule.id in first:
            raise RuleFileError(
                f"{rule.source}: rule id {rule.id!r} is used twice",
                context=f"first defined at {first[rule.id].source}",
                hint="rename one of them (copy a pack and edit it rather than adding to it)",
            )
        first[rule.id] = rule


def _parse_rule(raw: Any, where: Location, probes: frozenset[str]) -> Rule:
    if not isinstance(raw, dict):
        raise where.fail(f"each rule is a mapping (id: …, check: …), not {type(raw).__name__}")
    where = where.at(raw)
    rule_id = _rule_id(raw, where)
    where = where.about(f"rule {rule_id!r}: ")
    unknown = [k for k in raw if k not in RULE_KEYS]
    if unknown:
        raise where.at(raw, unknown[0]).fail(
            f"unknown key {unknown[0]!r}", hint=f"a rule's keys: {', '.join(RULE_KEYS)}"
        )
    _check_shape(raw, where)
    expressions = {k: _expression(raw, k, where, probes) for k in EXPRESSION_KEYS if k in raw}
    fix = _text(raw, "fix", where)
    fix_expressions = _fix_expressions(fix, where.at(raw, "fix"), probes)
    needs = _needed_probes(expressions.values())
    return Rule(
        id=rule_id,
        description=_text(raw, "description", where, required=False),
        severity=_severity(raw, where),
        fix=fix,
        source=f"{where.path}:{where.line}",
        needs=needs,
        fix_expressions=fix_expressions,
        action=_action(raw, where),
        **expressions,
    )


def _rule_id(raw: dict[Any, Any], where: Location) -> str:
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not RULE_ID.match(rule_id):
        raise where.at(raw, "id").fail(
            f"rule id {rule_id!r} is missing or not valid",
            hint="letters, digits, '.', '_', '-'; e.g. id: torch-arch-supported",
        )
    return rule_id


def _check_shape(raw: dict[Any, Any], where: Location) -> None:
    if sum(kind in raw for kind in KINDS) != 1:
        raise where.fail(
            "a rule has exactly one of 'check:' (per host), 'uniform:' or 'uniform_keys:' "
            "(across hosts)"
        )
    if "cohort" in raw and "check" in raw:
        raise where.at(raw, "cohort").fail("'cohort:' only goes with 'uniform:' or 'uniform_keys:'")
    if "expected" in raw and "uniform" not in raw:
        raise where.at(raw, "expected").fail("'expected:' only goes with 'uniform:'")


def _severity(raw: dict[Any, Any], where: Location) -> str:
    severity = raw.get("severity", "error")
    severity = OLD_SEVERITIES.get(severity, severity)  # `warn`: the old spelling of warning
    if severity not in SEVERITIES:
        raise where.at(raw, "severity").fail(
            f"severity {severity!r} is not one of: {', '.join(SEVERITIES)}"
        )
    return str(severity)


# Rules files written before `action:` existed judge software and settings: fixing them is the
# default step, whatever the severity.
DEFAULT_ACTION = "fix-config"


def _action(raw: dict[Any, Any], where: Location) -> str:
    action = raw.get("action", DEFAULT_ACTION)
    if action not in ACTIONS:
        raise where.at(raw, "action").fail(
            f"action {action!r} is not one of: {', '.join(ACTIONS)}",
            hint="the step a failure calls for, e.g. action: reset-gpu (docs/rules.md)",
        )
    return str(action)


def _text(raw: dict[Any, Any], key: str, where: Location, required: bool = True) -> str:
    value = raw.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise where.at(raw, key).fail(f"'{key}:' must be a non-empty text")
    return value.strip()


def _expression(
    raw: dict[Any, Any], key: str, where: Location, probes: frozenset[str]
) -> Expression:
    here = where.at(raw, key)
    text = raw[key]
    if not isinstance(text, str) or not text.strip():
        raise here.fail(f"'{key}:' must be a JMESPath expression in a string, not {text!r}")
    expression = compile_expression(text.strip(), here, key)
    _check_roots(expression, here, key, probes)
    return expression


def _check_roots(expression: Expression, where: Location, key: str, probes: frozenset[str]) -> None:
    known = helpers()
    unknown = sorted(expression.roots() - probes - set(known) - {"_observed"})
    if unknown:
        raise where.fail(
            f"'{key}:' reads {unknown[0]!r}, which is neither a probe nor a helper",
            context=expression.text,
            hint=f"a probe of your own: pass its folder with --probe-dir DIR (or "
            f"$FLEET_PROBE_DIR); probes: {', '.join(sorted(probes))}; "
            f"helpers: {', '.join(known)}",
        )


def _fix_expressions(fix: str, where: Location, probes: frozenset[str]) -> dict[str, Expression]:
    """`{EXPR}` placeholders of a fix text, compiled and checked like the rule's expressions."""
    found: dict[str, Expression] = {}
    for match in PLACEHOLDER.finditer(fix):
        text = match.group(1)
        if text is None or text.strip() in FIX_OWN:
            continue
        expression = compile_expression(text.strip(), where, "fix")
        _check_roots(expression, where, "fix", probes)
        found[text] = expression
    return found


def _needed_probes(expressions: Iterable[Expression]) -> tuple[str, ...]:
    needs: set[str] = set()
    known = helpers()
    for expression in expressions:
        for root in expression.roots():
            probe = known[root] if root in known else (None if root.startswith("_") else root)
            if probe:
                needs.add(probe)
    return tuple(sorted(needs))
