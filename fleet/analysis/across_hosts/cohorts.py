"""Cohorts: hosts grouped by what they are, so that a diff compares like with like. Pure.

By default a host's cohort is its GPU model × GPU count × interconnect (`2× NVIDIA H200 · nvlink`);
hosts without GPUs are a cohort too (`no GPU`). `cohort_by`, a JMESPath over the host document
(`{probe: data, "_status": {probe: status}, "_host": {"name", "status"}}`, as check rules read it),
overrides that: `gpu.gpus[0].name`, `[gpu.gpus[0].name, system.os]`, `_host.name` …

Each cohort also has a short label, unique in its run, for lines that must fit 80 columns:
`2× H200` for `2× NVIDIA H200 · nvlink` (the vendor and a trailing "Server Edition" dropped, the
interconnect only when two cohorts would read alike without it).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import HostFacts, length_path
from fleet.errors import UsageError
from fleet.models import HostOutcome
from fleet.registry import declared

DEFAULT_COHORT_BY = "GPU model × GPU count × interconnect"
NO_VALUE = "(no value)"
VENDOR = re.compile(r"^(?:NVIDIA |AMD )?(?:GeForce |Radeon )?")
EDITION = re.compile(r" (?:Server Edition|Workstation Edition)$")


@dataclass(frozen=True)
class Cohort:
    name: str  # "2× NVIDIA H200 · nvlink", or the --cohort-by value as text
    hosts: tuple[str, ...]
    label: str = ""  # short and unique among the run's cohorts: "2× H200"

    @property
    def short(self) -> str:
        return self.label or self.name


# ----------------------------------------------------------------------------------- default


@dataclass(frozen=True)
class DefaultKey:
    """The default cohort key's parts, from which the name and the labels are made."""

    count: Any
    model: str | None
    link: Any
    status: Any  # the gpu probe's status, for hosts without GPU data

    @property
    def name(self) -> str:
        if self.model is None:
            return "no GPU" if self.status in ("ok", "absent") else "no GPU data"
        return f"{self.count}× {self.model} · {self.link}"

    def labels(self) -> tuple[str, ...]:
        """From the shortest to the full name."""
        if self.model is None:
            return (self.name,)
        model = EDITION.sub("", VENDOR.sub("", self.model)) or self.model
        return (
            f"{self.count}× {model}",
            f"{self.count}× {model} · {self.link}",
            f"{self.count}× {self.model}",
            self.name,
        )


def default_key(facts: HostFacts) -> DefaultKey:
    values = facts.values
    for probe in declared.gpu_sources():  # `-p health` alone still groups by GPU model
        model = values.get(f"{probe}.gpus[0].name")
        if model is not None:
            count = values.get(f"{probe}.gpu_count", values.get(length_path(f"{probe}.gpus"), "?"))
            link = values.get(f"{probe}.interconnect") or "?"
            return DefaultKey(count, str(model), link, values.get(f"_status.{probe}"))
    status = next(
        (values[s] for s in (f"_status.{p}" for p in declared.gpu_sources()) if s in values), None
    )
    return DefaultKey("?", None, "?", status)


def cohort_name(facts: HostFacts) -> str:
    """The default cohort of a host: `2× NVIDIA H200 · nvlink`, `no GPU`."""
    return default_key(facts).name


def short_labels(keys: Mapping[str, DefaultKey]) -> dict[str, str]:
    """Cohort name → the shortest label that tells every cohort of the run apart."""
    levels = {name: key.labels() for name, key in keys.items()}
    deepest = max((len(labels) for labels in levels.values()), default=1)
    for level in range(deepest):
        chosen = {name: labels[min(level, len(labels) - 1)] for name, labels in levels.items()}
        if len(set(chosen.values())) == len(chosen):
            return chosen
    return {name: name for name in keys}


# ---------------------------------------------------------------------------------- cohort_by


def compile_cohort_by(expression: str) -> Any:
    """The compiled JMESPath; a UsageError naming it when it does not parse. jmespath is loaded
    only here: a command that never reads a cohort_by does not pay for it at start-up."""
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        raise UsageError(
            f"--cohort-by {expression!r} is not a JMESPath expression: {exc}",
            hint="e.g. --cohort-by gpu.gpus[0].name, or '[gpu.gpus[0].name, gpu.interconnect]'",
        ) from exc


def cohort_document(outcome: HostOutcome) -> dict[str, Any]:
    """What `cohort_by` reads about one host: `{probe: data}`, `_status` and `_host`."""
    document: dict[str, Any] = {name: r.data for name, r in outcome.probes.items()}
    document["_status"] = {name: r.status for name, r in outcome.probes.items()}
    document["_host"] = {"name": outcome.name, "status": outcome.status}
    return document


def value_name(value: Any) -> str:
    """A cohort_by value as a cohort's name: text as is, a list's items joined by ` · `."""
    if value is None:
        return NO_VALUE
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " · ".join(value_name(v) for v in value)
    return json.dumps(value, sort_keys=True, default=str)


def expression_cohorts(expression: str) -> Callable[[HostOutcome], str]:
    from jmespath.exceptions import JMESPathError

    compiled = compile_cohort_by(expression)

    def name_of(outcome: HostOutcome) -> str:
        try:
            return value_name(compiled.search(cohort_document(outcome)))
        except JMESPathError:  # a function given the wrong type on this host's data
            return NO_VALUE

    return name_of


# ------------------------------------------------------------------------------------ finding


def find_cohorts(
    outcomes: Sequence[HostOutcome],
    members: Mapping[Any, tuple[str, ...]],
    facts_of: Mapping[Any, HostFacts],
    cohort_by: str | None = None,
) -> list[Cohort]:
    """The cohorts of the reporting hosts, the biggest first. `members`/`facts_of`: the hosts
    grouped by identical facts (fleet.analysis.across_hosts.diff.FactGroups), so the default key is read once
    per group; a `cohort_by` expression reads each host's own document."""
    by_name: dict[str, list[str]] = defaultdict(list)
    labels: dict[str, str] = {}
    if cohort_by:
        name_of = expression_cohorts(cohort_by)
        for outcome in outcomes:
            by_name[name_of(outcome)].append(outcome.name)
        labels = {name: name for name in by_name}
    else:
        keys: dict[str, DefaultKey] = {}
        for group, hosts in members.items():
            key = default_key(facts_of[group])
            keys.setdefault(key.name, key)
            by_name[key.name].extend(hosts)
        labels = short_labels(keys)
    return sorted(
        (Cohort(name, tuple(sorted(hosts)), labels[name]) for name, hosts in by_name.items()),
        key=lambda c: (-len(c.hosts), c.name),
    )


def cohort_of_hosts(cohorts: Iterable[Cohort]) -> dict[str, str]:
    return {host: cohort.name for cohort in cohorts for host in cohort.hosts}
