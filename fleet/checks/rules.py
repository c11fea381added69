"""Pre-flight rules: load and validate a rules file, evaluate it on a run. Pure: no network, no terminal.

A rules file (YAML) holds `rules:`, a list of rules; each rule has

    id:          letters, digits, '.', '_', '-'; unique across every file given
    description: one line saying what must hold
    severity:    error (fails the check: exit bit 32) | warn (reported, exit unchanged)
    check:       a JMESPath condition over ONE host's document: true pass, false fail, null unknown
    uniform:     or a JMESPath value that must be the same on every host of a cohort
    uniform_keys: or a JMESPath object (e.g. a host's NCCL_* settings) each of whose keys must
                 have the same value on every host of a cohort; a key a host lacks is unset
                 there, and unset is a value too: a key set on a minority of the cohort fails
                 those hosts, a key the majority sets fails the hosts that lack it or differ.
                 Each host's observed/expected are {key: value} of just the keys it differs on
                 (null: unset)
    cohort:      (uniform, uniform_keys) JMESPath naming a host's cohort; default: the whole fleet
    expected:    (uniform only) JMESPath giving the value a host must have; when it is null
                 there, the cohort's majority value is expected
    when:        optional JMESPath: the rule applies only where it is true (else "n/a")
    observed:    optional JMESPath: the value shown, quoted by `{observed}` in `fix`, and
                 readable as `_observed` in `check:`
    fix:         what to do; `{EXPR}` quotes a JMESPath value of the host, `{observed}` and
                 `{expected}` the rule's own, `{hosts}` every host of the cohort that fails
                 with the same observed value (named compactly, e.g. gpu-[03,06]); `{{` and
                 `}}` are literal braces

A host's document is `{probe: data}` for every probe it ran, plus helpers (names start with "_"):

    _status     {probe: "ok" | "absent" | "failed" | "timeout"}
    _host       {"name", "status"}
    _args       the host's probe_args from the inventory (e.g. _args.gpu.expected_count)
    _allreduce  from the allreduce probe: small_bytes, small_latency_us.{eager,graph},
                large_bytes, large_busbw_gbps (the best mode's busbw at the largest size)
    _allreduce_configured  the host's NCCL_ALGO / NCCL_PROTO judged on its allreduce matrix
                (fleet/analysis/allreduce_matrix.py): configured, variants, broken, worst_ratio,
                worst_at, ok, summary; absent without a matrix or without those variables

JMESPath functions added to the standard ones:

    every(array, value)    true if every item equals value; null if the array is empty or has null
    none(array, value)     true if no item equals value; null if the array is empty or has null
    unique(array)          the items without repeats, in order
    pairs_not(matrix, v)   ["GPU0→GPU1: NS", …] for the cells of {row: {col: status}} not equal to v
    with_prefix(obj, ps)   the object with only the keys that start with one of the strings ps
    without_prefix(obj, ps)  the object without the keys that start with one of the strings ps
                           (both null for null: a host that did not report the object)

Values in fix texts and reports: lists are joined with ", ", objects read `KEY=value, …` with
`KEY unset` for null, null alone is "(not reported)". Lists longer than 8 are summarised: the
pairs of pairs_not as each distinct value with its count and three example pairs ("56 pairs: NS ×
56 (e.g. GPU0→GPU1, GPU0→GPU2, GPU0→GPU3)"), other lists as distinct items with counts. The
JSON report keeps every item.

Verdicts per rule and host, never a silent pass:

    pass, fail
    unknown   the host did not report the facts the rule reads (null, or a shape it cannot read)
    skipped   a probe the rule reads did not succeed there, or the host was not reached
    n/a       `when:` is false there

Why JMESPath: a well-kept, specified query language with no access to Python (nothing is eval'd).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath import functions as jmespath_functions

from fleet.analysis.allreduce_matrix import configured_variant, matrix_of
from fleet.analysis.facts import allreduce_summary
from fleet.analysis.majority import rank
from fleet.errors import UsageError
from fleet.hostsets import compact_hosts
from fleet.models import NOT_REACHED, HostOutcome, Run
from fleet.yamlfile import Location

CHECK_SCHEMA = "fleet.check/2"
SEVERITIES = ("error", "warn")
# Worst first: a rule's overall verdict is the worst of its hosts'.
VERDICTS = ("fail", "unknown", "skipped", "pass", "n/a")
RULE_KEYS = (
    "id",
    "description",
    "severity",
    "check",
    "uniform",
    "uniform_keys",
    "cohort",
    "expected",
    "when",
    "observed",
    "fix",
)
EXPRESSION_KEYS = ("check", "uniform", "uniform_keys", "cohort", "expected", "when", "observed")
KINDS = ("check", "uniform", "uniform_keys")  # a rule has exactly one of these keys
FIX_OWN = ("observed", "expected", "hosts")  # placeholders the rule fills, not JMESPath
# Helpers in a host's document: the probe whose success each needs (None: always there).
HELPERS: Mapping[str, str | None] = {
    "_status": None,
    "_host": None,
    "_args": None,
    "_allreduce": "allreduce",
    "_allreduce_configured": "allreduce",
}
# Per-host results that are not probes but read like one: `fleet fabric` runs give `fabric`.
RESULTS_BESIDE_PROBES = frozenset({"fabric"})
RULE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
NOT_REPORTED = "(not reported)"
LONG_LIST = 8  # longer lists are summarised in fix texts and reports (the JSON keeps them whole)
EXAMPLES = 3  # example pairs shown per distinct value
PAIR = re.compile(r"^(?P<pair>[^:→]+→[^:]+): (?P<value>.*)$", re.DOTALL)


class RuleFileError(UsageError):
    """A rules file that cannot be used; the message starts with FILE:LINE (exit code 2)."""


# ------------------------------------------------------------------------ JMESPath functions


class _FleetFunctions(jmespath_functions.Functions):
    """The documented additions to JMESPath (see the module docstring)."""

    @jmespath_functions.signature({"types": ["array", "null"]}, {"types": []})
    def _func_every(self, items: list[Any] | None, value: Any) -> bool | None:
        if not items or any(item is None for item in items):
            return None
        return all(item == value for item in items)

    @jmespath_functions.signature({"types": ["array", "null"]}, {"types": []})
    def _func_none(self, items: list[Any] | None, value: Any) -> bool | None:
        if not items or any(item is None for item in items):
            return None
        return all(item != value for item in items)

    @jmespath_functions.signature({"types": ["array"]})
    def _func_unique(self, items: list[Any]) -> list[Any]:
        seen: list[Any] = []
        for item in items:
            if item not in seen:
                seen.append(item)
        return seen

    @jmespath_functions.signature({"types": ["object"]}, {"types": []})
    def _func_pairs_not(self, matrix: Mapping[str, Any], value: Any) -> list[str]:
        return [
            f"{row}→{column}: {cell}"
            for row, cells in matrix.items()
            if isinstance(cells, Mapping)
            for column, cell in cells.items()
            if cell != value
        ]

    @jmespath_functions.signature({"types": ["object", "null"]}, {"types": ["array"]})
    def _func_with_prefix(
        self, items: Mapping[str, Any] | None, prefixes: list[Any]
    ) -> dict[str, Any] | None:
        if items is None:
            return None
        return {k: v for k, v in items.items() if k.startswith(_prefixes(prefixes))}

    @jmespath_functions.signature({"types": ["object", "null"]}, {"types": ["array"]})
    def _func_without_prefix(
        self, items: Mapping[str, Any] | None, prefixes: list[Any]
    ) -> dict[str, Any] | None:
        if items is None:
            return None
        return {k: v for k, v in items.items() if not k.startswith(_prefixes(prefixes))}


def _prefixes(items: list[Any]) -> tuple[str, ...]:
    return tuple(str(item) for item in items)


# Nodes whose first child reads the current node and whose other children read its result (or
# each item of it): only the first child can name a root.
SCOPING_NODES = (
    "subexpression",
    "index_expression",
    "projection",
    "value_projection",
    "filter_projection",
    "pipe",
)
_OPTIONS = jmespath.Options(custom_functions=_FleetFunctions())


class EvaluationError(Exception):
    """An expression could not be evaluated on this host's data (a shape it cannot read)."""


@dataclass(frozen=True)
class Expression:
    text: str
    parsed: Any = field(repr=False, compare=False)

    def search(self, document: Mapping[str, Any]) -> Any:
        try:
            return self.parsed.search(document, options=_OPTIONS)
        except jmespath_errors.JMESPathError as exc:
            raise EvaluationError(f"{self.text}: {exc}") from exc

    def roots(self) -> set[str]:
        """The top-level names it reads from a host's document (probes and helpers)."""
        return set(_root_fields(self.parsed.parsed, at_root=True))


def _root_fields(node: Mapping[str, Any], at_root: bool) -> Iterator[str]:
    """Walk a JMESPath AST; a field is a root only where the current node is the document."""
    kind, children = node.get("type"), node.get("children") or []
    if kind == "field":
        if at_root:
            yield node["value"]
        return
    if kind in SCOPING_NODES:
        yield from _root_fields(children[0], at_root)
        for child in children[1:]:
            yield from _root_fields(child, False)
    elif kind == "expref":
        yield from _root_fields(children[0], False)  # applied to items, not the document
    else:
        for child in children:
            if isinstance(child, Mapping):
                yield from _root_fields(child, at_root)


# ------------------------------------------------------------------------------------ rules


@dataclass(frozen=True)
class Rule:
    id: str
    description: str
    severity: str
    fix: str
    source: str  # FILE:LINE of the rule, for messages and reports
    check: Expression | None = None
    uniform: Expression | None = None
    uniform_keys: Expression | None = None
    cohort: Expression | None = None
    expected: Expression | None = None
    when: Expression | None = None
    observed: Expression | None = None
    needs: tuple[str, ...] = ()  # probes that must have succeeded for the rule to judge a host
    fix_expressions: Mapping[str, Expression] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)

    def expressions(self) -> Iterator[Expression]:
        for key in EXPRESSION_KEYS:
            expression = getattr(self, key)
            if expression is not None:
                yield expression


def load_rules(path: str | Path, probes: Iterable[str]) -> list[Rule]:
    """Read and validate one rules file; `probes` are the names a rule may read."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise RuleFileError(
            f"rules file {path} does not exist", hint="pass an existing file with --rules"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleFileError(f"cannot read rules file {path}: {exc}") from exc
    return parse_rules(text, str(path), probes)


def parse_rules(text: str, path: str, probes: Iterable[str]) -> list[Rule]:
    where = Location(path, RuleFileError)
    document = where.parse(
        text, hint="check the indentation and quoting near that line (quote JMESPath expressions)"
    )
    if not isinstance(document, dict) or "rules" not in document:
        raise where.fail("a rules file is a mapping with a 'rules:' list", hint=_EXAMPLE_HINT)
    unknown = [k for k in document if k not in ("rules", "description")]
    if unknown:
        raise where.at(document, unknown[0]).fail(
            f"unknown key {unknown[0]!r} at the top level", hint="allowed: rules, description"
        )
    raw_rules = document["rules"]
    if not isinstance(raw_rules, list) or not raw_rules:
        raise where.at(document, "rules").fail("'rules:' must be a non-empty list of rules")
    names = frozenset(probes) | RESULTS_BESIDE_PROBES
    rules = [_parse_rule(raw, where.at(document, "rules"), names) for raw in raw_rules]
    check_unique_ids(rules)
    return rules


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
    if severity not in SEVERITIES:
        raise where.at(raw, "severity").fail(
            f"severity {severity!r} is not one of: {', '.join(SEVERITIES)}"
        )
    return str(severity)


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


def compile_expression(text: str, where: Location, key: str) -> Expression:
    try:
        return Expression(text, jmespath.compile(text))
    except jmespath_errors.JMESPathError as exc:
        problem = str(exc).splitlines()[0]
        raise where.fail(
            f"'{key}:' is not a valid JMESPath expression: {problem}",
            context=text,
            hint="see https://jmespath.org/specification.html; quote literals as `1` or 'text'",
        ) from exc


def _check_roots(expression: Expression, where: Location, key: str, probes: frozenset[str]) -> None:
    unknown = sorted(expression.roots() - probes - set(HELPERS) - {"_observed"})
    if unknown:
        raise where.fail(
            f"'{key}:' reads {unknown[0]!r}, which is neither a probe nor a helper",
            context=expression.text,
            hint=f"probes: {', '.join(sorted(probes))}; helpers: {', '.join(HELPERS)}",
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
    for expression in expressions:
        for root in expression.roots():
            probe = HELPERS[root] if root in HELPERS else (None if root.startswith("_") else root)
            if probe:
                needs.add(probe)
    return tuple(sorted(needs))


# ------------------------------------------------------------------------ host documents


def host_document(
    outcome: HostOutcome, probe_args: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What rules read about one host: `{probe: data}` plus the helpers."""
    document: dict[str, Any] = {name: _plain(r.data) for name, r in outcome.probes.items()}
    document["_status"] = {name: r.status for name, r in outcome.probes.items()}
    document["_host"] = {"name": outcome.name, "status": outcome.status}
    document["_args"] = _plain(probe_args or {})
    allreduce = outcome.probes.get("allreduce")
    if allreduce is not None and allreduce.status == "ok":
        document["_allreduce"] = allreduce_summary(allreduce.data)
    nccl = outcome.probes.get("nccl")
    configured = configured_variant(matrix_of(outcome), nccl.data.get("env") if nccl else None)
    if configured is not None:
        document["_allreduce_configured"] = configured
    return document


def _plain(value: Any) -> Any:
    """Plain dicts and lists (JMESPath's type checks want them), through a JSON round trip."""
    return json.loads(json.dumps(value, default=str))


# ------------------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Verdict:
    host: str
    status: str  # one of VERDICTS
    observed: Any = None
    expected: Any = None
    fix: str | None = None
    reason: str = ""
    cohort: Any = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.status,
            "observed": self.observed,
            "expected": self.expected,
            "cohort": self.cohort,
            "fix": self.fix,
            "reason": self.reason or None,
        }


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    verdicts: tuple[Verdict, ...]

    @property
    def status(self) -> str:
        present = {v.status for v in self.verdicts}
        return next((s for s in VERDICTS if s in present), "n/a")

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "id": rule.id,
            "description": rule.description,
            "severity": rule.severity,
            "kind": rule.kind,
            "source": rule.source,
            "verdict": self.status,
            "hosts": {v.host: v.to_dict() for v in self.verdicts},
        }


UNJUDGED = ("unknown", "skipped")


@dataclass(frozen=True)
class CheckReport:
    """Every rule's verdicts; `unreached` maps each host that was not reached (so no rule judged
    it) to why, its own name and address blanked out: said once, not under every rule."""

    results: tuple[RuleResult, ...]
    hosts: tuple[str, ...]
    unreached: Mapping[str, str] = field(default_factory=dict)

    def failures(self, severity: str) -> list[tuple[Rule, Verdict]]:
        return [
            (r.rule, v) for r in self.results if r.rule.severity == severity for v in r.failures
        ]

    def unjudged(self, severity: str | None = None) -> list[tuple[Rule, Verdict]]:
        """(rule, verdict) pairs that were `unknown` or `skipped`, of one severity or all."""
        return [
            (r.rule, v)
            for r in self.results
            if severity in (None, r.rule.severity)
            for v in r.verdicts
            if v.status in UNJUDGED
        ]

    @property
    def failed(self) -> bool:
        """An error-severity rule failed somewhere: the check fails (warnings do not count)."""
        return bool(self.failures("error"))

    @property
    def outcome(self) -> str:
        """ "failed" (an error rule failed), "incomplete" (none failed, but an error rule was not
        judged somewhere, or nothing passed at all) or "passed": never green when nothing was
        judged."""
        if self.failed:
            return "failed"
        if self.unjudged("error") or not self.counts()["pass"]:
            return "incomplete"
        return "passed"

    def fails(self, strict: bool = False) -> bool:
        """Whether the check sets exit bit 32: an error rule failed, or with `strict`, one was
        unknown or skipped somewhere."""
        return self.failed or (strict and bool(self.unjudged("error")))

    def counts(self) -> dict[str, int]:
        """Verdicts over every (rule, host) pair."""
        tally = Counter(v.status for r in self.results for v in r.verdicts)
        return {status: tally.get(status, 0) for status in VERDICTS}

    def not_judged(self) -> list[NotJudged]:
        """Unknown and skipped verdicts grouped by why (the host's own name blanked out), most
        common first: each cause once, with the rules and hosts it kept from being judged."""
        groups: dict[tuple[str, str], tuple[dict[str, None], dict[str, None]]] = {}
        for rule, verdict in self.unjudged():
            reason = self.unreached.get(verdict.host) or verdict.reason.replace(verdict.host, "…")
            cause = (verdict.status, reason)
            rules, hosts = groups.setdefault(cause, ({}, {}))  # dicts: ordered sets
            rules[rule.id] = hosts[verdict.host] = None
        found = [NotJudged(s, r, tuple(rs), tuple(hs)) for (s, r), (rs, hs) in groups.items()]
        return sorted(found, key=lambda n: -len(n.rules) * len(n.hosts))

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        return {
            "schema": CHECK_SCHEMA,
            "passed": self.outcome == "passed",
            "outcome": self.outcome,
            "hosts": list(self.hosts),
            "summary": {
                **counts,
                "failed_error": len(self.failures("error")),
                "failed_warn": len(self.failures("warn")),
                "unjudged_error": len(self.unjudged("error")),
            },
            "not_judged": [dataclasses.asdict(n) for n in self.not_judged()],
            "rules": [r.to_dict() for r in self.results],
        }


@dataclass(frozen=True)
class NotJudged:
    """One reason some (rule, host) pairs were not judged."""

    status: str  # "unknown" | "skipped"
    reason: str  # with the host's own name as "…"
    rules: tuple[str, ...]
    hosts: tuple[str, ...]


def evaluate(
    rules: Sequence[Rule],
    run: Run,
    probe_args: Mapping[str, Mapping[str, Any]] | None = None,
) -> CheckReport:
    """Judge every rule on every host of `run`; `probe_args` per host name, from the inventory."""
    args = probe_args or {}
    documents = {
        name: host_document(outcome, args.get(name)) for name, outcome in run.hosts.items()
    }
    results = tuple(RuleResult(rule, _judge(rule, run.hosts, documents)) for rule in rules)
    unreached = {
        name: _unreached_reason(outcome, blanked=True)
        for name, outcome in run.hosts.items()
        if _not_reached(outcome)
    }
    return CheckReport(results, tuple(run.hosts), unreached)


def _not_reached(outcome: HostOutcome) -> bool:
    return outcome.status in NOT_REACHED or outcome.status == "interrupted" or not outcome.probes


def _unreached_reason(outcome: HostOutcome, blanked: bool = False) -> str:
    """Why no rule judged the host; `blanked`: its own name and address as "…" (to fold)."""
    error = outcome.ending()[1].split("\n")[0] if blanked else outcome.error or ""
    return f"host {outcome.status}: {error}".rstrip(": ")


def _judge(
    rule: Rule, hosts: Mapping[str, HostOutcome], documents: Mapping[str, dict[str, Any]]
) -> tuple[Verdict, ...]:
    pending: dict[str, dict[str, Any]] = {}
    settled: dict[str, Verdict] = {}
    for name, outcome in hosts.items():
        verdict = _precondition(rule, outcome, documents[name])
        if verdict is None:
            pending[name] = documents[name]
        else:
            settled[name] = verdict
    judge = {"check": _judge_each, "uniform": _judge_uniform, "uniform_keys": _judge_keys}
    settled.update(judge[rule.kind](rule, pending))
    return tuple(_with_fixes(rule, [settled[name] for name in hosts], documents))


def _with_fixes(
    rule: Rule, verdicts: list[Verdict], documents: Mapping[str, dict[str, Any]]
) -> Iterator[Verdict]:
    """Each failure's fix text; `{hosts}` names every host of its cohort failing the same way."""
    alike: dict[tuple[str, str], list[str]] = {}
    for v in verdicts:
        if v.status == "fail":
            alike.setdefault((_key(v.cohort), _key(v.observed)), []).append(v.host)
    for v in verdicts:
        if v.status != "fail":
            yield v
            continue
        hosts = compact_hosts(alike[(_key(v.cohort), _key(v.observed))])
        fix = render_fix(rule, documents[v.host], v.observed, v.expected, hosts)
        yield replace(v, fix=fix)


def _precondition(rule: Rule, outcome: HostOutcome, document: dict[str, Any]) -> Verdict | None:
    """skipped (host not reached, probe not ok) or n/a (`when:` false); None: go on judging."""
    name = outcome.name
    if _not_reached(outcome):
        return Verdict(name, "skipped", reason=_unreached_reason(outcome))
    for probe in rule.needs:
        result = outcome.probes.get(probe)
        if result is None and probe in RESULTS_BESIDE_PROBES:  # another kind of run: no fault
            return Verdict(name, "n/a", reason=f"no {probe} results: run `fleet {probe}`")
        if result is None:
            return Verdict(name, "skipped", reason=f"probe {probe} was not run")
        if result.status != "ok":
            why = f": {result.error}" if result.error else ""
            return Verdict(name, "skipped", reason=f"probe {probe} {result.status}{why}")
    if rule.when is None:
        return None
    try:
        applies = rule.when.search(document)
    except EvaluationError as exc:
        return Verdict(name, "unknown", reason=f"when: {exc}")
    if applies is None:
        return Verdict(name, "unknown", reason=f"when: {rule.when.text} is not reported")
    return None if truthy(applies) else Verdict(name, "n/a", reason=f"not {rule.when.text}")


def truthy(value: Any) -> bool:
    """JMESPath's truth: false, null, '', [] and {} are false; 0 is true."""
    return not (value is None or value is False or value in ("", [], {}))


def _judge_each(rule: Rule, documents: Mapping[str, dict[str, Any]]) -> dict[str, Verdict]:
    assert rule.check is not None
    verdicts = {}
    for name, document in documents.items():
        observed = _search_or_none(rule.observed, document)
        try:
            value = rule.check.search({**document, "_observed": observed})
        except EvaluationError as exc:
            verdicts[name] = Verdict(name, "unknown", observed, reason=str(exc))
            continue
        verdicts[name] = _verdict(rule, name, document, value, observed)
    return verdicts


def _verdict(rule: Rule, name: str, document: dict[str, Any], value: Any, observed: Any) -> Verdict:
    if value is None:
        return Verdict(name, "unknown", observed, reason=_unreported(rule, observed))
    if truthy(value):
        return Verdict(name, "pass", observed)
    return Verdict(name, "fail", observed)


def _unreported(rule: Rule, observed: Any) -> str:
    if rule.observed is not None:
        return f"not reported here ({rule.observed.text} = {format_value(observed)})"
    return f"not reported here ({rule.check.text if rule.check else 'check'} gives null)"


def _search_or_none(expression: Expression | None, document: dict[str, Any]) -> Any:
    """An optional expression's value; None when it is absent or cannot be evaluated here."""
    if expression is None:
        return None
    try:
        return expression.search(document)
    except EvaluationError:
        return None


def _judge_uniform(rule: Rule, documents: Mapping[str, dict[str, Any]]) -> dict[str, Verdict]:
    assert rule.uniform is not None
    values, cohorts, verdicts = _read_across(rule, rule.uniform, documents)
    majorities = _majorities(values, cohorts)
    for name, value in values.items():
        expected = _search_or_none(rule.expected, documents[name])
        reference, why = (expected, "") if expected is not None else majorities[_key(cohorts[name])]
        verdicts[name] = _uniform_verdict(name, value, reference, why, cohorts[name])
    return verdicts


def _read_across(
    rule: Rule, expression: Expression, documents: Mapping[str, dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Verdict]]:
    """Each host's value of a cross-host rule and its cohort; `unknown` where either is missing."""
    verdicts: dict[str, Verdict] = {}
    values: dict[str, Any] = {}
    cohorts: dict[str, Any] = {}
    for name, document in documents.items():
        try:
            value = expression.search(document)
            cohort = rule.cohort.search(document) if rule.cohort else None
        except EvaluationError as exc:
            verdicts[name] = Verdict(name, "unknown", reason=str(exc))
            continue
        if value is None or (rule.cohort is not None and cohort is None):
            what = expression.text if value is None else f"cohort {rule.cohort.text}"  # type: ignore[union-attr]
            verdicts[name] = Verdict(name, "unknown", reason=f"{what} is not reported")
            continue
        values[name], cohorts[name] = value, cohort
    return values, cohorts, verdicts


def _judge_keys(rule: Rule, documents: Mapping[str, dict[str, Any]]) -> dict[str, Verdict]:
    """uniform_keys: every key of the object is its own uniform comparison (unset is a value)."""
    assert rule.uniform_keys is not None
    values, cohorts, verdicts = _read_across(rule, rule.uniform_keys, documents)
    for name in [n for n, v in values.items() if not isinstance(v, dict)]:
        shape = type(values.pop(name)).__name__
        verdicts[name] = Verdict(name, "unknown", reason=f"{rule.uniform_keys.text} is a {shape}")
    majorities = _key_majorities(values, cohorts)
    for name, settings in values.items():
        reference = majorities[_key(cohorts[name])]
        verdicts[name] = _keys_verdict(name, settings, reference, cohorts[name])
    return verdicts


def _key_majorities(
    values: Mapping[str, dict[str, Any]], cohorts: Mapping[str, Any]
) -> dict[str, dict[str, tuple[Any, str]]]:
    """Per cohort, per key any host of it has: the majority's value (None: unset) or why none."""
    members: dict[str, list[dict[str, Any]]] = {}
    for name, settings in values.items():
        members.setdefault(_key(cohorts[name]), []).append(settings)
    return {
        cohort: {
            k: _majority(_by_value([s.get(k) for s in found])) for k in sorted(set().union(*found))
        }
        for cohort, found in members.items()
    }


def _keys_verdict(
    name: str, settings: dict[str, Any], reference: dict[str, tuple[Any, str]], cohort: Any
) -> Verdict:
    differing = {
        key: (settings.get(key), majority, why)
        for key, (majority, why) in reference.items()
        if why or _key(settings.get(key)) != _key(majority)
    }
    if not differing:
        return Verdict(name, "pass", cohort=cohort)
    observed = {key: here for key, (here, _, _) in differing.items()}
    expected = {key: majority for key, (_, majority, why) in differing.items() if not why}
    reason = "; ".join(f"{key}: {why}" for key, (_, _, why) in differing.items() if why)
    return Verdict(name, "fail", observed, expected or None, reason=reason, cohort=cohort)


def _uniform_verdict(name: str, value: Any, reference: Any, why: str, cohort: Any) -> Verdict:
    if reference is not None and _key(value) == _key(reference):
        return Verdict(name, "pass", value, reference, cohort=cohort)
    return Verdict(name, "fail", value, reference, reason=why, cohort=cohort)


def _majorities(
    values: Mapping[str, Any], cohorts: Mapping[str, Any]
) -> dict[str, tuple[Any, str]]:
    """Per cohort: (the majority value, "") or (None, why) when the hosts are split; the one
    majority rule of fleet.analysis.majority, which the cross-host diff uses too."""
    by_cohort: dict[str, dict[str, list[str]]] = {}
    for name, value in values.items():
        by_cohort.setdefault(_key(cohorts[name]), {}).setdefault(_key(value), []).append(name)
    return {cohort: _majority(by_value) for cohort, by_value in by_cohort.items()}


def _majority(by_value: Mapping[str, list[str]]) -> tuple[Any, str]:
    ranking = rank(by_value)
    if ranking.majority is None:
        split = "; ".join(f"{_shown(json.loads(k))} on {len(hosts)}" for k, hosts in ranking.groups)
        return None, f"no majority value to compare with ({split})"
    return json.loads(ranking.majority[0]), ""


def _by_value(values: list[Any]) -> dict[str, list[str]]:
    """Values as the majority rule takes them: each distinct value with who has it (by index)."""
    grouped: dict[str, list[str]] = {}
    for index, value in enumerate(values):
        grouped.setdefault(_key(value), []).append(str(index))
    return grouped


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value)  # None: a key a host lacks (uniform_keys)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# ------------------------------------------------------------------------------ fix texts


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
    pairs = [PAIR.match(item) for item in items]
    if all(pairs):
        by_value: dict[str, list[str]] = {}
        for match in pairs:
            assert match is not None
            by_value.setdefault(match["value"], []).append(match["pair"])
        ranked = sorted(by_value.items(), key=lambda entry: -len(entry[1]))
        shown = [f"{v} × {len(p)} (e.g. {', '.join(p[:EXAMPLES])})" for v, p in ranked]
        return f"{len(items)} pairs: " + "; ".join(shown)
    counts = Counter(items).most_common()
    shown = [f"{item} × {n}" if n > 1 else item for item, n in counts[:LONG_LIST]]
    more = f", … ({len(counts) - LONG_LIST} more distinct)" if len(counts) > LONG_LIST else ""
    return f"{len(items)} items: " + ", ".join(shown) + more


def _setting(key: str, value: Any) -> str:
    if value is None:
        return f"{key} unset"
    shown = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
    return f"{key}={format_value(shown)}"
