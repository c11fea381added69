"""Hosts as the rules read them, built and judged once per group of hosts that answered alike.

A fleet of 20,000 hosts reports a handful of distinct answers: its hosts differ in their identity
(hostname, GPU UUIDs and serials) and timings, which fleet.analysis.facts leaves out of the
comparison (each probe's FACTS: identity, volatile, measure). Hosts are grouped here by what they
reported: the same status, address-free probe errors and probe arguments, and each probe's
payload of the same class (FactCache.payload_class: the same data but at the fields of its mask).
A rule is judged once per group when none of its expressions can see a masked field of the
payloads it reads (fleet.checks.reads); where one can (a rule that reads GPU UUIDs, or the
allreduce rows, or the host's own name), the host's own payload or name joins the key. The
answer for a key is the answer for every host with that key, so a rule costs a JMESPath search
per distinct answer, not per host, and a host document (`{probe: data}` plus the helpers) is
built only for the hosts actually searched, from plain copies made once per payload object.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fleet.analysis.classes import Dump, FactCache, Mask, shared_or_own
from fleet.analysis.facts import ProbeFacts
from fleet.checks.documents import (
    argument_helpers,
    helpers,
    host_document,
    payload_helpers,
    plain_copy,
    run_contexts,
)
from fleet.checks.language import EvaluationError, Expression
from fleet.checks.model import Rule, value_key
from fleet.checks.reads import ROOT, Reads, seen
from fleet.models import NOT_REACHED, HostOutcome

NAME = ("name",)


def alone(outcome: HostOutcome) -> bool:
    """Not reached (no rule judges it): its verdicts carry its own error, so it is its own group."""
    return outcome.status in NOT_REACHED or outcome.status == "interrupted" or not outcome.probes


@dataclass
class RulePlan:
    """What one rule reads: per probe (or result) it reads, the paths; whether it sees the host's
    name; the helpers it reads that follow from masked fields; the document's keys it reads
    (None: the whole document). `own[group]`: how the group's hosts are told apart for this
    rule: the probes whose masked fields it sees (keyed by what it sees of each host's payload,
    reads.seen) and those helpers (keyed by their values)."""

    probes: dict[str, Reads]
    named: bool
    helpers: tuple[str, ...]
    roots: frozenset[str] | None
    helper_reads: dict[str, Reads] = field(default_factory=dict)
    own: dict[int, tuple[tuple[str, bool], ...]] = field(default_factory=dict)
    views: dict[tuple[Any, ...], Hashable] = field(default_factory=dict)  # what it sees of one
    # per probe: how many payloads were seen, and the distinct views among them (ViewCount)
    counted: dict[str, ViewCount] = field(default_factory=dict)


class HostDocuments:
    """The run's hosts grouped by what they reported, their documents built on demand."""

    def __init__(
        self,
        hosts: Mapping[str, HostOutcome],
        probe_args: Mapping[str, Mapping[str, Any]],
        declarations: Mapping[str, ProbeFacts],
        classes: FactCache | None = None,
    ) -> None:
        """`classes`: the payloads already classed (the cross-host diff's), where its
        declarations are `declarations`."""
        self.hosts = hosts
        self.probe_args = probe_args
        self.classes = shared_or_own(classes, declarations, measure=False)
        self.contexts = run_contexts(hosts)  # what units hold every host against (gpubench)
        # Helpers a rule reads that follow from payloads whose measured fields are masked (the
        # allreduce rows): their own values key the answer (computed once per payload object).
        self.payload_helpers = payload_helpers()
        self.argument_helpers = argument_helpers()  # … and from the host's probe arguments
        self.helpers = helpers()
        self.group: dict[str, int] = {}
        self.members: list[list[str]] = []  # per group: its hosts, in the run's order
        self.unreached: dict[str, HostOutcome] = {}  # hosts no rule judges
        self._masks: list[dict[str, Mask | None]] = []  # per group: each probe's mask
        # per group: the probes whose payload is not one object for all its hosts (a saved run
        # keeps each distinct payload once: most groups share every payload but a few)
        self._varies: list[set[str]] = []
        firsts: list[HostOutcome] = []
        self._plain: dict[int, tuple[Any, Any]] = {}  # id(data) → (data, its plain copy)
        self._documents: dict[tuple[str, frozenset[str] | None], dict[str, Any]] = {}
        self._helpers: dict[Any, Any] = {}  # helper values by the payloads they follow from
        self._helper_values: dict[tuple[Any, ...], Any] = {}  # … by helper and payloads
        self._views: dict[tuple[Any, ...], Dump] = {}  # what some paths show of a payload
        self.built = 0  # host documents built: one per distinct answer searched
        self.searches = 0  # JMESPath searches made
        found: dict[Hashable, int] = {}
        for name, outcome in hosts.items():
            if alone(outcome):
                self.unreached[name] = outcome
                continue
            signature, masks = self._signature(name, outcome)
            number = found.get(signature)
            if number is None:
                number = found[signature] = len(self._masks)
                self._masks.append(masks)
                self._varies.append(set())
                firsts.append(outcome)
                self.members.append([])
            else:
                self._note_varying(self._varies[number], firsts[number], outcome)
            self.group[name] = number
            self.members[number].append(name)

    @staticmethod
    def _note_varying(varies: set[str], first: HostOutcome, outcome: HostOutcome) -> None:
        theirs = first.probes
        for probe, result in outcome.probes.items():
            if probe not in varies and result.data is not theirs[probe].data:
                varies.add(probe)

    def _signature(self, name: str, outcome: HostOutcome) -> tuple[Hashable, dict[str, Any]]:
        masks: dict[str, Mask | None] = {}
        parts = []
        for probe, result in outcome.probes.items():
            number, mask = self.classes.payload_class(probe, result)
            parts.append((probe, result.status, result.error, number))
            masks[probe] = mask
        args = self.probe_args.get(name)
        return (outcome.status, value_key(args) if args else "", tuple(parts)), masks

    def plan(self, rule: Rule) -> RulePlan:
        """What the rule reads, all its expressions (and its fix's) together."""
        return self.plan_of((*rule.expressions(), *rule.fix_expressions.values()))

    def plan_of(self, expressions: Sequence[Expression]) -> RulePlan:
        reads = Reads()
        for expression in expressions:
            reads.add(expression.reads())
        roots = reads.roots() - {"_observed"}  # the check's own `observed:`, read above
        everything = ROOT in roots or reads.whole
        named = everything or ("_host" in roots and reads.under("_host").sees([NAME]))
        helpers = tuple(sorted(r for r in roots if r in self.payload_helpers))
        probes = {r: reads.under(r) for r in roots if r not in self.helpers and r != ROOT}
        keys = None if everything else frozenset(roots | {"_host"})  # _host: {hosts} in a fix
        return RulePlan(probes, named, helpers, keys, {h: reads.under(h) for h in helpers})

    def key(self, plan: RulePlan, name: str) -> Hashable:
        """What the rule's answer on host `name` depends on: its group, and where the rule sees
        what the group's hosts differ in, what it sees of the host's own payloads (or name)."""
        group = self.group[name]
        own = plan.own.get(group)
        if own is None:
            own = plan.own[group] = self._own(plan, group)
        if not own and not plan.named:
            return group
        outcome = self.hosts[name]
        probes = outcome.probes
        parts = tuple(
            self._helper(plan, root, outcome)
            if helper
            else None
            if root not in probes
            else self._seen(plan, root, probes[root].data)
            for root, helper in own
        )
        return (group, parts, name if plan.named else None)

    def _own(self, plan: RulePlan, group: int) -> tuple[tuple[str, bool], ...]:
        masks, varies = self._masks[group], self._varies[group]
        own = {  # by the helper's value, where the payloads it follows from differ in the group
            helper: True
            for helper in plan.helpers
            if any(probe in varies for probe in self.payload_helpers[helper])
        }
        for probe, reads in plan.probes.items():
            mask = masks.get(probe)
            if mask is not None and probe in varies and reads.sees(mask):
                own[probe] = False  # by what the rule sees of the payload
        return tuple(sorted(own.items()))

    def _helper(self, plan: RulePlan, helper: str, outcome: HostOutcome) -> Hashable:
        """What the rule sees of a helper's value on this host (the value computed once per
        payload object): `_allreduce.large_bytes` is alike where the latencies beside it are not."""
        probes = outcome.probes
        slot = (
            helper,
            *(
                (probes[p].status, id(probes[p].data)) if p in probes else None
                for p in self.payload_helpers[helper]
            ),
            self._args_key(outcome.name) if helper in self.argument_helpers else None,
        )
        found = plan.views.get(slot)
        if found is None:
            value = self._helper_values.get(slot, _MISSING)
            if value is _MISSING:
                document = host_document(
                    outcome,
                    self.probe_args.get(outcome.name),
                    self.contexts,
                    roots=(helper,),
                    memo=self._helpers,
                )
                value = self._helper_values[slot] = document.get(helper, _MISSING)
            reads = plan.helper_reads[helper]
            found = "absent" if value is _MISSING else self._seen_as(slot, value, reads)
            plan.views[slot] = found
        return found

    def _args_key(self, name: str) -> str:
        args = self.probe_args.get(name)
        return value_key(args) if args else ""

    def _seen(self, plan: RulePlan, probe: str, data: Any) -> Hashable:
        """What the rule sees of a payload; where it has seen each payload so far differently
        (each host's own allreduce rows: its measurements), the payload object itself, as a
        search of that host costs what working out what the rule sees of it costs."""
        slot = (probe, id(data))  # the payloads outlive the plan
        found = plan.views.get(slot)
        if found is None:
            counted = plan.counted.setdefault(probe, ViewCount())
            if counted.each_its_own():
                found = plan.views[slot] = slot
            else:
                found = plan.views[slot] = self._seen_as(slot, data, plan.probes[probe])
                counted.add(found)
        return found

    def _seen_as(self, slot: tuple[Any, ...], data: Any, reads: Reads) -> Dump:
        """seen(data, reads), once per payload and set of paths: rules that read the same
        paths of the allreduce rows (there are several) share what each host's rows show."""
        key = (slot, reads.key())
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = seen(data, reads)
        return found

    def document(self, name: str, roots: frozenset[str] | None = None) -> dict[str, Any]:
        """What rules read about host `name` (fleet.checks.documents.host_document), only the
        keys `roots` (None: all), its payloads' plain copies shared with every host that
        reported the same payload object."""
        slot = (name, roots)
        document = self._documents.get(slot)
        if document is None:
            self.built += 1
            document = host_document(
                self.hosts[name],
                self.probe_args.get(name),
                self.contexts,
                plain=self._plain_copy,
                roots=roots,
                memo=self._helpers,
            )
            if roots is None:
                self._documents[slot] = document
        return document

    def _plain_copy(self, data: Any) -> Any:
        found = self._plain.get(id(data))
        if found is None:
            found = self._plain[id(data)] = (data, plain_copy(data))
        return found[1]


class ViewCount:
    """The views a rule took of a probe's payloads, counted until they prove all distinct."""

    TRIED = 16  # payloads seen, all differently, before the rest are keyed by their object

    def __init__(self) -> None:
        self.seen = 0
        self.distinct: set[Hashable] = set()

    def add(self, view: Hashable) -> None:
        self.seen += 1
        self.distinct.add(view)

    def each_its_own(self) -> bool:
        return self.seen >= self.TRIED and len(self.distinct) == self.seen


class RuleView:
    """One rule's searches, each made once per key (HostDocuments.key) and shared."""

    def __init__(self, documents: HostDocuments, rule: Rule) -> None:
        self.documents = documents
        self.plan = documents.plan(rule)
        self.rule = rule
        self._found: dict[tuple[int, Hashable], Any] = {}
        self._plans: dict[int, RulePlan] = {}  # each expression's own: fewer keys, smaller docs
        # a rule's searches go host by host: the last document made, by host and keys
        self._last: tuple[str, frozenset[str] | None, dict[str, Any]] | None = None

    def key(self, name: str) -> Hashable:
        """What tells host `name` apart for this rule: hosts with equal keys get one answer."""
        return self.documents.key(self.plan, name)

    def alike(self) -> dict[Hashable, list[str]]:
        """The reached hosts by key, each list in the run's order: a group whose hosts the rule
        cannot tell apart is one entry, however many hosts it has."""
        found: dict[Hashable, list[str]] = {}
        for members in self.documents.members:
            if self.key(members[0]) == self.documents.group[members[0]]:
                found[self.documents.group[members[0]]] = members
                continue
            for name in members:
                found.setdefault(self.key(name), []).append(name)
        return found

    def search(
        self, expression: Expression, name: str, extra: Mapping[str, Any] | None = None
    ) -> Any:
        """`expression` on host `name`'s document (with `extra` keys, which must follow from
        the rule's own reads); EvaluationError as the search raised it."""
        plan = self._plan(expression, extra is not None)
        slot = (id(expression), self.documents.key(plan, name))
        found = self._found.get(slot, _MISSING)
        if found is _MISSING:
            self.documents.searches += 1
            document = self._document(name, plan.roots)
            try:
                found = expression.search({**document, **extra} if extra else document)
            except EvaluationError as exc:
                found = _Raised(exc)
            self._found[slot] = found
        if isinstance(found, _Raised):
            raise found.error
        return found

    def _plan(self, expression: Expression, observed: bool) -> RulePlan:
        """What one expression reads (the check's `_observed` is the rule's `observed:`)."""
        plan = self._plans.get(id(expression))
        if plan is None:
            also = [self.rule.observed] if observed and self.rule.observed is not None else []
            plan = self._plans[id(expression)] = self.documents.plan_of([expression, *also])
        return plan

    def document(self, name: str) -> dict[str, Any]:
        """Host `name`'s document with every key the rule reads (its fix's too)."""
        return self._document(name, self.plan.roots)

    def _document(self, name: str, roots: frozenset[str] | None) -> dict[str, Any]:
        if self._last is None or self._last[:2] != (name, roots):
            self._last = (name, roots, self.documents.document(name, roots))
        return self._last[2]


class _Raised:
    def __init__(self, error: EvaluationError) -> None:
        self.error = error


_MISSING = object()
_MISSING_TEXT = "\x00fleet: not in the document"
