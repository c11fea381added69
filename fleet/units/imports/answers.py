"""The answer to `--import`: for each import spec a run asked, which name resolved and the
version of its package, per set of hosts that answered alike (`h[01-04,06-08]`), and, where
nothing resolved, what was tried and why each failed. One list that the terminal, Markdown and
HTML each say; the run document holds the same results per host (`imports.results`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from fleet.analysis.across_hosts.check_grade import resolved_name
from fleet.execution.bundle import declared_literal
from fleet.hostsets import compact_hosts
from fleet.models import Run
from fleet.shipped import probe_folder


@dataclass(frozen=True)
class ImportAnswer:
    """What one set of hosts answered for a spec: `resolved` as the spec names it (the class
    name of `mod:Name|Alt`, the module of `mod|alt`); None when nothing imported, `tried` then
    the chain (`target: error`); `error` when the spec itself was refused."""

    hosts: str
    count: int
    resolved: str | None
    version: str | None
    tried: tuple[str, ...] = ()
    error: str | None = None

    def text(self) -> str:
        """`_SymmetricMemory (2.6.0+cu124)`, `nothing resolved: tried a (…); b (…)`."""
        if self.error:
            return f"spec refused: {self.error}"
        if self.resolved is None:
            return "nothing resolved: tried " + ("; ".join(self.tried) or "nothing")
        return self.resolved + (f" ({self.version})" if self.version else "")


@dataclass(frozen=True)
class SpecAnswers:
    spec: str
    answers: tuple[ImportAnswer, ...]  # the most hosts first


def asked_imports(run: Run) -> list[SpecAnswers]:
    """The answers to the specs a run was asked (`--import`, or `probe_args:` in the
    inventory); none for a run that asked only the imports probe's defaults, whose answers the
    key facts (SymmetricMemory) and the divergence already say."""
    results = {
        name: outcome.probes["imports"].data.get("results") or {}
        for name, outcome in run.hosts.items()
        if "imports" in outcome.probes and outcome.probes["imports"].ok
    }
    specs = list(dict.fromkeys(spec for found in results.values() for spec in found))
    if not specs or set(specs) == set(default_specs()):
        return []
    return [SpecAnswers(spec, _answers(spec, results)) for spec in specs]


@lru_cache(maxsize=1)
def default_specs() -> tuple[str, ...]:
    """The specs the imports probe asks when given none (probes/imports.py's DEFAULT_SPECS, read
    with `ast`: the probe imports its shipped helpers by name, which only a host serves)."""
    source = probe_folder().joinpath("imports.py").read_text(encoding="utf-8")
    return tuple(str(spec) for spec in declared_literal(source, "DEFAULT_SPECS"))


def _answers(spec: str, results: Mapping[str, Mapping[str, Any]]) -> tuple[ImportAnswer, ...]:
    alike: dict[tuple[Any, ...], list[str]] = {}
    for host, found in results.items():
        result = found.get(spec)
        if isinstance(result, Mapping):
            alike.setdefault(_answer_key(spec, result), []).append(host)
    ranked = sorted(alike.items(), key=lambda item: (-len(item[1]), item[1][0]))
    return tuple(ImportAnswer(compact_hosts(hosts), len(hosts), *key) for key, hosts in ranked)


def _answer_key(spec: str, result: Mapping[str, Any]) -> tuple[Any, ...]:
    resolved = result.get("resolved")
    tried = () if resolved else _tried(result.get("tried") or ())
    version = result.get("version") if resolved else None
    return (resolved_name(spec, resolved), version, tried, result.get("error"))


def _tried(attempts: Sequence[Any]) -> tuple[str, ...]:
    return tuple(
        f"{attempt.get('target')} ({attempt.get('error')})"
        for attempt in attempts
        if isinstance(attempt, Mapping)
    )
