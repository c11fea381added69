"""What a check is made of: rules, their verdicts per host, a rule's result and the report.

Plain frozen data: the parser builds `Rule`s, the evaluator `RuleVerdict`s (one per rule and host:
pass, fail, unknown, skipped or n/a, see docs/rules.md), the renderers read the `CheckReport`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import operator
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.checks.language import Expression

CHECK_SCHEMA = "fleet.check/3"
# A rule's severity, in the findings' words (error, warning). Rules files may still say `warn`
# (its spelling until issue 47), and the check document and JUnit keep writing `warn` for a
# warning rule: fleet.check/3's published word (PUBLISHED_SEVERITY).
SEVERITIES = ("error", "warning")
OLD_SEVERITIES = {"warn": "warning"}
PUBLISHED_SEVERITY = {"warning": "warn"}
# Worst first: a rule's overall verdict is the worst of its hosts'.
VERDICTS = ("fail", "unknown", "skipped", "pass", "n/a")
UNJUDGED = ("unknown", "skipped")
_STATUS = operator.attrgetter("status")
_WHY = operator.attrgetter("status", "reason")
_HOST = operator.attrgetter("host")
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
    "action",
)
EXPRESSION_KEYS = ("check", "uniform", "uniform_keys", "cohort", "expected", "when", "observed")
# A rules file's rule has exactly one of the first three keys; `baseline` rules are made by fleet
# from a baseline file (fleet/api/baselines.py), one per family of measurements it holds.
KINDS = ("check", "uniform", "uniform_keys", "baseline")


@dataclass(frozen=True)
class Probing:
    """How a rules file wants its hosts probed when `fleet check` probes them and the command line
    does not say (a rules file's `probing:`): the probes to run (-p) and how long the health probe
    samples its counters (--sample). A pack about health probes health, and reads the counters
    twice; a pack about inference probes everything, once."""

    probes: tuple[str, ...] | None = None
    sample_s: float | None = None
    source: str = ""  # the rules files that asked, as `pack NAME` or a path

    def merged(self, other: Probing) -> Probing:
        """Two rules files' wishes together: a file that names no probes wants every probe (so
        then do both), else every probe either names; the longer sample."""
        probes = None
        if self.probes is not None and other.probes is not None:
            probes = tuple(dict.fromkeys([*self.probes, *other.probes]))
        samples = [s for s in (self.sample_s, other.sample_s) if s is not None]
        source = ", ".join(s for s in (self.source, other.source) if s)
        return Probing(probes, max(samples) if samples else None, source)


@dataclass(frozen=True)
class RulesFile:
    """One rules file read: its rules (those taken from a pack by `rules_from` first) and its
    `probing`."""

    rules: list[Rule]
    probing: Probing = field(default_factory=Probing)


@dataclass(frozen=True)
class Rule:
    """One rule of a rules file, its expressions compiled."""

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
    # What to do when it fails: one word of ACTIONS (docs/rules.md, "Actions")
    action: str = "fix-config"

    @property
    def kind(self) -> str:
        """The key a rules file gave it; `baseline` for the rules fleet makes from a baseline
        file, which have none of those keys."""
        return next((k for k in KINDS if getattr(self, k, None) is not None), "baseline")

    def expressions(self) -> Iterator[Expression]:
        for key in EXPRESSION_KEYS:
            expression = getattr(self, key)
            if expression is not None:
                yield expression


@dataclass(frozen=True)
class RuleVerdict:
    """One rule's verdict on one host, with what it saw there and the fix text for a failure.
    (Not fleet.execution.protocol.Verdict, which is how a host's run ended.)"""

    host: str
    status: str  # one of VERDICTS
    observed: Any = None
    expected: Any = None
    fix: str | None = None
    reason: str = ""
    cohort: Any = None

    def like(self, host: str, **changes: Any) -> RuleVerdict:
        """This verdict as host `host`'s (and with `changes`): a verdict found once for hosts
        that answered alike is copied to each, so the copy is made without __init__'s
        per-field frozen setattr (a check of 20,000 hosts makes 800,000 of them)."""
        if host == self.host and not changes:
            return self
        copy: RuleVerdict = object.__new__(RuleVerdict)
        fields = copy.__dict__
        fields.update(self.__dict__)
        fields["host"] = host
        fields.update(changes)
        return copy

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.status,
            "observed": self.observed,
            "expected": self.expected,
            "cohort": self.cohort,
            "fix": self.fix,
            "reason": self.reason or None,
        }


class Verdicts(Sequence[RuleVerdict]):
    """A rule's verdict on every host, in the run's host order, held as one verdict object per
    distinct answer: `shared[i]` is host `hosts[i]`'s verdict but for its `host`, which may be
    another host's that answered alike. A host's own verdict is made when it is read, so a rule
    judged on 20,000 hosts that answered a few ways makes a few objects, not 20,000; what only
    counts or picks verdicts by status reads `shared` (RuleResult.answers)."""

    __slots__ = ("hosts", "shared")

    def __init__(self, shared: Sequence[RuleVerdict], hosts: Sequence[str]) -> None:
        assert len(shared) == len(hosts), "a verdict per host"
        self.shared = shared
        self.hosts = hosts

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        verdict, host = self.shared[index], self.hosts[index]
        return verdict if verdict.host == host else verdict.like(host)

    def __iter__(self) -> Iterator[RuleVerdict]:
        for verdict, host in zip(self.shared, self.hosts):
            yield verdict if verdict.host == host else verdict.like(host)

    def picked(self, places: Iterable[int]) -> list[RuleVerdict]:
        """The verdicts at `places`, each its own host's."""
        return [self[place] for place in places]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


@dataclass(frozen=True)
class RuleResult:
    """A rule with its verdict on every host, in the run's host order (a tuple, or Verdicts)."""

    rule: Rule
    verdicts: Sequence[RuleVerdict]

    @property
    def answers(self) -> Sequence[RuleVerdict]:
        """A verdict per host, in order, each with its host's status, reason, observed value
        and fix, but its `host` maybe another's of the same answer (Verdicts.shared): to count
        or pick by status without making each host's own."""
        verdicts = self.verdicts
        return verdicts.shared if isinstance(verdicts, Verdicts) else verdicts

    def having(self, statuses: Collection[str]) -> list[RuleVerdict]:
        """The verdicts of those statuses, in order, each its own host's; picked in C."""
        answers, hosts = self.placed(statuses)
        return [v if v.host == host else v.like(host) for v, host in zip(answers, hosts)]

    def placed(self, statuses: Collection[str]) -> tuple[list[RuleVerdict], list[str]]:
        """The verdicts of those statuses as (answers, their hosts), in order: a verdict shared
        by the hosts that answered alike (its `host` one of theirs) beside each host's name."""
        wanted = frozenset(statuses).__contains__
        answers = self.answers
        picks = list(map(wanted, map(_STATUS, answers)))
        verdicts = self.verdicts
        hosts = verdicts.hosts if isinstance(verdicts, Verdicts) else list(map(_HOST, answers))
        return list(itertools.compress(answers, picks)), list(itertools.compress(hosts, picks))

    @property
    def status(self) -> str:
        present = self.status_counts
        return next((s for s in VERDICTS if s in present), "n/a")

    @functools.cached_property
    def failures(self) -> list[RuleVerdict]:
        """The failed verdicts, each its own host's: made once (a report reads them often)."""
        if not self.status_counts.get("fail"):
            return []
        return self.having(("fail",))

    def _by_host(self) -> dict[str, dict[str, Any]]:
        """Each host's verdict as a document (to_dict), one per distinct answer, shared."""
        verdicts = self.verdicts
        if not isinstance(verdicts, Verdicts):
            return {v.host: v.to_dict() for v in verdicts}
        made: dict[int, dict[str, Any]] = {}
        by_host = {}
        for verdict, host in zip(verdicts.shared, verdicts.hosts):
            found = made.get(id(verdict))
            if found is None:
                found = made[id(verdict)] = verdict.to_dict()
            by_host[host] = found
        return by_host

    @functools.cached_property
    def status_counts(self) -> Counter[str]:
        """How many hosts got each verdict: counted once, in C (20,000 hosts a rule)."""
        return Counter(map(_STATUS, self.answers))

    def to_dict(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "id": rule.id,
            "description": rule.description,
            "severity": PUBLISHED_SEVERITY.get(rule.severity, rule.severity),
            "kind": rule.kind,
            "source": rule.source,
            "verdict": self.status,
            "hosts": self._by_host(),
        }


@dataclass(frozen=True)
class CheckReport:
    """Every rule's verdicts; `unreached` maps each host that was not reached (so no rule judged
    it) to why, its own name and address blanked out: said once, not under every rule."""

    results: tuple[RuleResult, ...]
    hosts: tuple[str, ...]
    unreached: Mapping[str, str] = field(default_factory=dict)
    strict: bool = False  # --strict: an error rule not judged somewhere fails the check

    def failures(self, severity: str) -> list[tuple[Rule, RuleVerdict]]:
        return [
            (r.rule, v) for r in self.results if r.rule.severity == severity for v in r.failures
        ]

    def unjudged(self, severity: str | None = None) -> list[tuple[Rule, RuleVerdict]]:
        """(rule, verdict) pairs that were `unknown` or `skipped`, of one severity or all."""
        every = self._unjudged
        return every if severity is None else [(r, v) for r, v in every if r.severity == severity]

    def unjudged_count(self, severity: str | None = None) -> int:
        """How many (rule, host) pairs were `unknown` or `skipped` (len(unjudged(severity))),
        counted, not listed."""
        return sum(
            result.status_counts.get(status, 0)
            for result in self.results
            if severity is None or result.rule.severity == severity
            for status in UNJUDGED
        )

    @functools.cached_property
    def _unjudged(self) -> list[tuple[Rule, RuleVerdict]]:
        # a report is read many times over (verdict, summary, JSON): its verdicts are walked once
        return [
            (r.rule, v)
            for r in self.results
            if any(r.status_counts.get(status) for status in UNJUDGED)
            for v in r.having(UNJUDGED)
        ]

    @property
    def failed(self) -> bool:
        """An error-severity rule failed somewhere: the check fails (warnings do not count)."""
        return bool(self.failures("error"))

    @property
    def outcome(self) -> str:
        """ "failed" (an error rule failed, or with `strict` was not judged somewhere),
        "incomplete" (none failed, but an error rule was not judged somewhere, or nothing passed
        at all) or "passed": never green when nothing was judged."""
        if self.fails():
            return "failed"
        if self.unjudged_count("error") or not self.counts()["pass"]:
            return "incomplete"
        return "passed"

    @property
    def failed_strictly(self) -> bool:
        """No error rule failed, but --strict fails the check: one was not judged somewhere."""
        return self.strict and not self.failed and bool(self.unjudged_count("error"))

    def fails(self, strict: bool | None = None) -> bool:
        """Whether the check sets exit bit 32: an error rule failed, or with `strict` (default:
        the report's own), one was unknown or skipped somewhere."""
        strict = self.strict if strict is None else strict
        return self.failed or (strict and bool(self.unjudged_count("error")))

    def counts(self) -> dict[str, int]:
        """Verdicts over every (rule, host) pair."""
        return dict(self._counts)

    @functools.cached_property
    def _counts(self) -> dict[str, int]:
        tally: Counter[str] = Counter()
        for result in self.results:
            tally.update(result.status_counts)
        return {status: tally.get(status, 0) for status in VERDICTS}

    def not_judged(self) -> list[NotJudged]:
        """Unknown and skipped verdicts grouped by why (the host's own name blanked out), most
        common first: each cause once, with the rules and hosts it kept from being judged."""
        groups: dict[tuple[str, str], tuple[dict[str, None], dict[str, None]]] = {}
        said = _Said()
        for result in self.results:
            if not any(result.status_counts.get(status) for status in UNJUDGED):
                continue
            unjudged, hosts = result.placed(UNJUDGED)
            alike = _by_why(unjudged, hosts)
            fresh = {key: hosts for key, hosts in alike.items() if not said.before(key, hosts)}
            if self._said_as_is(fresh):  # the common case: each reason's hosts in one go
                for key, hosts in alike.items():
                    rules, named = groups.setdefault(key, ({}, {}))  # ordered sets
                    rules[result.rule.id] = None
                    if key in fresh:
                        named.update(dict.fromkeys(hosts))
                        said.add(key, hosts)
                continue
            for verdict, host in zip(unjudged, hosts):
                reason = verdict.reason
                why = self.unreached.get(host) if self.unreached else None
                if why:
                    reason = why
                elif host in reason:
                    reason = reason.replace(host, "…")
                rules, named = groups.setdefault((verdict.status, reason), ({}, {}))
                rules[result.rule.id] = named[host] = None
        found = [NotJudged(s, r, tuple(rs), tuple(hs)) for (s, r), (rs, hs) in groups.items()]
        return sorted(found, key=lambda n: -len(n.rules) * len(n.hosts))

    def _said_as_is(self, alike: Mapping[tuple[str, str], list[str]]) -> bool:
        """No host here was unreached (its own cause replaces the reason) and no reason names
        its host (the name is blanked): each reason then stands for all its hosts as it is."""
        unreached = self.unreached
        return all(
            (not unreached or unreached.keys().isdisjoint(hosts)) and not _names_any(reason, hosts)
            for (_, reason), hosts in alike.items()
        )

    def to_dict(self) -> dict[str, Any]:
        counts = self.counts()
        return {
            "schema": CHECK_SCHEMA,
            "passed": self.outcome == "passed",
            "outcome": self.outcome,
            "strict": self.strict,
            "hosts": list(self.hosts),
            "summary": {
                **counts,
                "failed_error": len(self.failures("error")),
                "failed_warn": len(self.failures("warning")),
                "unjudged_error": self.unjudged_count("error"),
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


def value_key(value: Any) -> str:
    """A value as canonical JSON text: equal values, equal keys (to group hosts by value)."""
    return json.dumps(value, sort_keys=True, default=str)


class _Said:
    """The (reason, hosts) already said as they are, by reason, count and end hosts: many rules
    leave the same hosts unjudged for the same reason (16,000 hosts without allreduce data ×
    40 rules), checked and listed once, the next ones compared (C speed, by identity: the
    names are the same objects) instead."""

    def __init__(self) -> None:
        self._lists: dict[tuple[Any, ...], list[list[str]]] = {}

    def before(self, key: tuple[str, str], hosts: list[str]) -> bool:
        return bool(hosts) and hosts in self._lists.get((key, len(hosts), hosts[0], hosts[-1]), ())

    def add(self, key: tuple[str, str], hosts: list[str]) -> None:
        if hosts:
            self._lists.setdefault((key, len(hosts), hosts[0], hosts[-1]), []).append(hosts)


def _names_any(text: str, hosts: Sequence[str]) -> bool:
    """Whether `text` holds any of `hosts` (`any(host in text …)`): each piece of the text as
    long as a host name is looked up among the hosts, in C, instead of searching the text for
    each of 20,000 names."""
    lengths = set(map(len, hosts)) - {0}
    if "" in hosts:
        return True
    pieces = {text[i : i + k] for k in lengths for i in range(len(text) - k + 1)}
    return not pieces.isdisjoint(hosts)


FEW_WHYS = 8  # reasons a rule's unjudged verdicts are grouped by in C, a pass each


def _by_why(
    verdicts: Sequence[RuleVerdict], hosts: Sequence[str]
) -> dict[tuple[str, str], list[str]]:
    """The hosts by their verdicts' (status, reason), in order (`verdicts[i]` is host
    `hosts[i]`'s); most rules leave their hosts unjudged for one reason, whose hosts are then
    listed in one go."""
    whys = list(map(_WHY, verdicts))
    distinct = list(dict.fromkeys(whys))  # in the order first met
    if len(distinct) == 1:
        return {distinct[0]: list(hosts)}
    if len(distinct) <= FEW_WHYS:  # a pass in C per reason
        return {why: list(itertools.compress(hosts, map(why.__eq__, whys))) for why in distinct}
    alike: dict[tuple[str, str], list[str]] = {}
    for why, host in zip(whys, hosts):
        alike.setdefault(why, []).append(host)
    return alike
