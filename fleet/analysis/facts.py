"""Facts: a host's probe data flattened into addressable, comparable values. Pure.

A fact's name is the JMESPath expression that reads it from a host's document, the same one a
rule (docs/rules.md) writes: `torch.version`, `gpu.gpus[0].compute_capability`,
`imports.results."torch.distributed._symmetric_memory:SymmetricMemory|_SymmetricMemory".resolved`
(keys that are not identifiers are quoted), `length(gpu.gpus)` (a list of objects' length), and
`_status.torch` (the probe's own status: ok, absent, failed, timeout). One name everywhere: the
diff, drift, JSON documents and rules.

Each probe declares in its file (a `FACTS = {...}` literal, read with `ast`, never run) which of its
fields are
  - "identity": unique per host by nature (hostname, UUIDs, bus ids): never divergence;
  - "volatile": changes run to run (elapsed times, raw timing rows, derived hashes): never compared;
  - "measure":  numbers compared within cohorts with a tolerance, not for equality;
  - "sets":     name lists (dir() dumps, arch lists) compared item by item, not as one value.
Patterns are globs over the path inside the probe's data, with `[*]` for list items.
Everything else is a plain fact: any difference between hosts is divergence.

A probe may also declare "hardware": facts that follow from what the machine is (GPU names,
capabilities, memory, topology cells, per-device lists, CPU count). Between cohorts of unlike
machines such differences are expected and summarised (fleet/analysis/across_hosts/findings.py); inside a
cohort they are divergence like any other fact.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet.execution.bundle import available_probes, declared_literal, refuse_broken
from fleet.models import HostOutcome, Run
from fleet.registry import part, parts
from fleet.registry import version as units_version

KINDS = ("identity", "volatile", "measure", "sets")
IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
Value = Any  # hashable: str, int, float, bool, None, or a tuple of those
SCALARS = (str, int, float)  # bool is an int


@dataclass(frozen=True)
class ProbeFacts:
    """What one probe declares about its data fields."""

    identity: tuple[str, ...] = ()
    volatile: tuple[str, ...] = ()
    measure: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()  # not a kind: which facts (of any kind) follow from the machine

    def kind_of(self, match_path: str) -> str:
        """Cached per declaration: a 1,000-host diff asks about the same paths over and over."""
        kinds = self._kinds
        kind = kinds.get(match_path)
        if kind is None:
            if len(kinds) >= MAX_CACHED_PATHS:
                kinds.clear()
            kind = kinds[match_path] = _classify(self, match_path)
        return kind

    @functools.cached_property
    def _kinds(self) -> dict[str, str]:
        return {}

    def is_hardware(self, match_path: str) -> bool:
        if not self.hardware:
            return False
        cache = self._hardware
        found = cache.get(match_path)
        if found is None:
            if len(cache) >= MAX_CACHED_PATHS:
                cache.clear()
            found = cache[match_path] = _any_of(self.hardware)(match_path)
        return found

    @functools.cached_property
    def _hardware(self) -> dict[str, bool]:
        return {}


MAX_CACHED_PATHS = 1 << 16
GLOB_MAGIC = re.compile(r"[*?\[]")  # what fnmatch reads as more than itself


@functools.lru_cache(maxsize=1024)
def _any_of(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a path matches any of `patterns` as fnmatch does (globs whose `[*]` stands for a
    list index, `.#`): most are plain paths, a set lookup; the rest one regular expression, so
    a path is matched once per kind, not once per pattern (a probe's first payload has hundreds
    of paths to class). Kept here, not on the declaration: a ProbeFacts stays picklable."""
    globs = [p.replace("[*]", ".#") for p in patterns]
    exact = frozenset(g for g in globs if not GLOB_MAGIC.search(g))
    wild = [fnmatch.translate(g) for g in globs if GLOB_MAGIC.search(g)]
    if not wild:
        return exact.__contains__
    search = re.compile("|".join(f"(?:{w})" for w in wild)).match
    return lambda path: path in exact or search(path) is not None


def _classify(declared: ProbeFacts, match_path: str) -> str:
    for kind in KINDS:
        if _any_of(getattr(declared, kind))(match_path):
            return kind
    return "fact"


# Fields that are never comparable whatever the probe says (the runner's own bookkeeping).
UNIVERSAL = ProbeFacts(volatile=("elapsed_s", "*.elapsed_s"))


def builtin_facts(among: Collection[str] = ()) -> dict[str, ProbeFacts]:
    """Results that are not a probe file but sit in a host's probes like one (`fleet fabric`
    gives each host a `fabric` result): their units' RESULT_FACTS say what their fields are.
    `among`: only these results' units are asked (a run's: the others' parts are not imported,
    about 10 ms of a one-host `fleet probe`); empty: every unit's."""
    return dict(_builtin_facts(units_version(), frozenset(among)))


@functools.cache
def _builtin_facts(version: int, among: frozenset[str]) -> dict[str, ProbeFacts]:
    """Per version of the unit table (fleet.registry.register changes it) and set of results."""
    return {
        name: declaration_of(unit.RESULT_FACTS)
        for name, unit in parts("facts", among)
        if hasattr(unit, "RESULT_FACTS")
    }


def declared_facts(
    extra_dirs: Sequence[str | Path] = (), needed: Iterable[str] = ()
) -> dict[str, ProbeFacts]:
    """Every probe's FACTS declaration (your own too: --probe-dir, $FLEET_PROBE_DIR), read from
    its source without running it. A probe whose file cannot be used declares nothing; when it
    is `needed`, that is a UsageError naming FILE:LINE."""
    found = builtin_facts()
    available = available_probes(extra_dirs)
    wanted = (available[n] for n in needed if n in available)
    refuse_broken(wanted, available, "its FACTS say which of its fields to compare")
    for name, probe in available.items():
        if not probe.problem:
            found[name] = parse_declaration(probe.source)
    return found


def run_declarations(
    runs: Sequence[Run], extra_dirs: Sequence[str | Path] = ()
) -> dict[str, ProbeFacts]:
    """The FACTS declarations to compare `runs` by: each probe's as the first of the runs that
    recorded it (Run.facts, as shipped), else as its file says now (fleet's own probes, then
    `extra_dirs` and $FLEET_PROBE_DIR). The folders are read only for probes that no run
    recorded (runs written before runs recorded them): a saved run never needs them."""
    recorded: dict[str, ProbeFacts] = {}
    reported: set[str] = set()
    for run in runs:
        for name, raw in (run.facts or {}).items():
            recorded.setdefault(name, declaration_of(raw))
        reported.update(run.probes)
        reported.update(p for outcome in run.hosts.values() for p in outcome.probes)
    builtin = builtin_facts(reported)
    missing = reported - recorded.keys() - builtin.keys()
    found = declared_facts(extra_dirs, needed=missing) if missing else builtin
    found.update(recorded)
    return found


def parse_declaration(source: str) -> ProbeFacts:
    return declaration_of(declared_literal(source, "FACTS") or {})


def declaration_of(raw: Mapping[str, Any]) -> ProbeFacts:
    """A FACTS literal (or a run's record of one) as ProbeFacts."""
    return ProbeFacts(**{k: tuple(raw.get(k, ())) for k in (*KINDS, "hardware")})


# ------------------------------------------------------------------------------------ flatten


@dataclass
class HostFacts:
    """One host's comparable facts: plain values, name sets, and measurements; `hardware` names
    the values and sets that follow from the machine (its probes' "hardware" declarations)."""

    values: dict[str, Value] = field(default_factory=dict)
    sets: dict[str, frozenset[str]] = field(default_factory=dict)
    measures: dict[str, float] = field(default_factory=dict)
    hardware: set[str] = field(default_factory=set)
    # the data's keys down to each field left out (identity, volatile, measure), when asked
    skipped: list[tuple[Any, ...]] | None = None


def status_path(probe: str) -> str:
    """The fact naming a probe's own status, as rules read it."""
    return f"_status.{probe}"


def length_path(where: str) -> str:
    return f"length({where})"


def child_path(where: str, key: str) -> str:
    """`where.key`, the key quoted (a JSON string, as JMESPath wants) unless an identifier."""
    return f"{where}.{key}" if IDENTIFIER.match(key) else f"{where}.{json.dumps(key)}"


PROBE_OF = re.compile(r"^(?:length\()?(?:_status\.)?([A-Za-z0-9_]+)")


def probe_of(path: str) -> str:
    """The probe a fact comes from: `torch` for `torch.version`, `_status.torch` and
    `length(torch.devices)`."""
    found = PROBE_OF.match(path)
    return found.group(1) if found else path


def host_facts(outcome: HostOutcome, declarations: Mapping[str, ProbeFacts]) -> HostFacts:
    """Every comparable fact a host reported: each probe's status, then its classified data."""
    facts = HostFacts()
    for probe, result in outcome.probes.items():
        facts.values[status_path(probe)] = result.status
        declared = declarations.get(probe, ProbeFacts())
        walk_payload(result.data, probe, declared, facts)
        for name, value in measurements(probe, result.data).items():
            facts.measures[name] = value
    return facts


def _walk(
    value: Any,
    match: str,
    where: str,
    declared: ProbeFacts,
    facts: HostFacts,
    keys: tuple[Any, ...] = (),
) -> None:
    """Classify and record `value`, building its two paths one segment at a time on the way down:
    `match`, what FACTS patterns match against (keys joined by '.', list indices as '.#'; a
    pattern's `[*]` becomes '.#' too, as fnmatch would read `[*]` as a character class), and
    `where`, the path people read and rules write, probe first: `gpu.gpus[0].name`,
    `imports.results."a.b:C"`. `keys`: the data's own keys down to `value` (FactCache)."""
    kind = _kind(match, declared)
    if kind in ("identity", "volatile", "measure"):
        if facts.skipped is not None:
            facts.skipped.append(keys)
        return
    if kind == "sets" and isinstance(value, (list, tuple)):
        facts.sets[where] = frozenset(str(v) for v in value)
        _mark_hardware(match, where, declared, facts)
    elif value is None or isinstance(value, SCALARS):  # most leaves: spare them the abc checks
        facts.values[where] = value
        _mark_hardware(match, where, declared, facts)
    elif isinstance(value, (dict, Mapping)):  # dict first: the abc check is slow
        for raw, item in value.items():
            key = str(raw)
            child = child_path(where, key)
            _walk(item, f"{match}.{key}" if match else key, child, declared, facts, (*keys, raw))
    elif isinstance(value, (list, tuple)):
        _walk_list(value, match, where, declared, facts, keys)
    else:
        facts.values[where] = hashable(value)
        _mark_hardware(match, where, declared, facts)


def walk_payload(data: Any, probe: str, declared: ProbeFacts, facts: HostFacts) -> None:
    """Every field of probe `probe`'s payload `data` into `facts` (fleet.analysis.classes: the
    fields it leaves out into facts.skipped, where that is a list)."""
    _walk(data, "", probe, declared, facts)


def _kind(match: str, declared: ProbeFacts) -> str:
    """What the probe declares the field at `match` to be; the runner's bookkeeping fields are
    volatile whatever it says (UNIVERSAL)."""
    if not match:
        return "fact"
    kind = declared.kind_of(match)
    return UNIVERSAL.kind_of(match) if kind == "fact" else kind


def _walk_list(
    value: Sequence[Any],
    match: str,
    where: str,
    declared: ProbeFacts,
    facts: HostFacts,
    keys: tuple[Any, ...],
) -> None:
    """A list of objects is its length and each item; an empty list its length 0 (the path an
    empty list of objects would get); any other list is one value."""
    if not value:
        facts.values[length_path(where)] = 0
        _mark_hardware(match, length_path(where), declared, facts)
    elif all(isinstance(v, (dict, Mapping)) for v in value):
        facts.values[length_path(where)] = len(value)
        _mark_hardware(match, length_path(where), declared, facts)
        for index, item in enumerate(value):
            _walk(item, f"{match}.#", f"{where}[{index}]", declared, facts, (*keys, index))
    else:
        facts.values[where] = hashable(value)
        _mark_hardware(match, where, declared, facts)


def _mark_hardware(match: str, where: str, declared: ProbeFacts, facts: HostFacts) -> None:
    if match and declared.is_hardware(match):
        facts.hardware.add(where)


def hashable(value: Any) -> Value:
    if value is None or isinstance(value, SCALARS):
        return value
    if isinstance(value, (dict, Mapping)):
        return tuple(sorted((str(k), hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(hashable(v) for v in value)
    return value


def flatten(value: Any, prefix: str) -> dict[str, Value]:
    """Nested JSON → {path: hashable value}, every field kept (for display, not comparison)."""
    facts = HostFacts()
    _walk(value, "", prefix, ProbeFacts(), facts)
    return facts.values


# ------------------------------------------------------------------------------- measurements


def measurements(probe: str, data: Mapping[str, Any]) -> dict[str, float]:
    """The measurements worth comparing across hosts that `probe` reported (name → value): its
    unit's `measurements` (fleet/units/PROBE/facts.py); none when it has none."""
    unit = part(probe, "facts")
    extract = getattr(unit, "measurements", None)
    return extract(data) if extract is not None else {}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def human_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def higher_is_better(measure: str) -> bool:
    """Lower is better (latencies, times) unless the name ends in one of HIGHER_IS_BETTER."""
    return measure.endswith(higher_is_better_endings())


@functools.cache
def _endings(version: int) -> tuple[str, ...]:
    """Per version of the unit table (fleet.registry.register changes it): asked per measurement."""
    found = (getattr(unit, "BETTER_HIGHER", ()) for _, unit in parts("facts"))
    return tuple(dict.fromkeys(ending for endings in found for ending in endings))


def higher_is_better_endings() -> tuple[str, ...]:
    """HIGHER_IS_BETTER: the measurement name endings that are better higher (bandwidths,
    throughputs), every unit's BETTER_HIGHER together: the one list the diff, drift and the
    baselines' bands judge by."""
    return _endings(units_version())


def slowness(measure: str, value: float, median: float) -> float:
    """How many times worse than the median (1.0 = as good; > 1 = worse)."""
    if value <= 0 or median <= 0:
        return 1.0
    return median / value if higher_is_better(measure) else value / median


def median(values: list[float]) -> float:
    return float(statistics.median(values))
