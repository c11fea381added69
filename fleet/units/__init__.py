"""The probes' units: each probe's controller-side knowledge in one package, fleet/units/PROBE/,
split by the stage its code belongs to (docs/layers.md):

    facts.py     analysis: key facts (label + paths), measurements, higher-is-better names,
                 the probe's pure analysis (other analysis modules of a unit sit beside it)
    checks.py    checks: the helpers it adds to a host's rule document (`_gpubench`, …)
    terminal.py  render: its section of the terminal report
    html.py      render: its section of the HTML page
    markdown.py  render: its section of the Markdown (`fleet diff RUN --format markdown`)
    openmetrics.py  render: its figures as Prometheus metrics (`--openmetrics FILE`)
    probe.py     below every stage: what is known before any host answers: its options
                 (fleet/units/options.py), opt-in, its findings' topic (read by fleet/units/declared.py)

A unit has only the parts its probe needs. The generic layers (fleet.analysis.facts,
fleet.checks.documents, both renderers) loop over this table instead of naming probes; each asks
only for the part of its own stage, imported when first asked for (`part`), so that importing a
lower stage never imports a higher one. Adding a probe: its unit's files and one name in UNITS.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from types import ModuleType

ROLES = ("probe", "facts", "checks", "terminal", "html", "markdown", "openmetrics")

# The probes (and results beside them: `fabric`) with a unit, in the reports' order: key facts
# rows, terminal and HTML sections and rule helpers come in this order.
UNITS: dict[str, str] = {
    name: f"fleet.units.{name}"
    for name in (
        "system",
        "packages",
        "gpu",
        "torch",
        "imports",
        "nccl",
        "allreduce",
        "health",
        "net",
        "gpubench",
        "live",
        "fabric",
        "dir",
    )
}

_loaded: dict[tuple[str, str], ModuleType | None] = {}
_changes = [0]  # how often the table changed: what is made from every unit is kept per change


def register(probe: str, package: str) -> None:
    """Give a probe of your own (--probe-dir) a unit: `package` is an importable package holding
    any of probe.py, facts.py, checks.py, terminal.py, html.py, markdown.py, e.g.
    `fleet.units.register("uptime", "site_units.uptime")`. Its parts come after fleet's own.
    Call it before fleet loads a run (a Python program using fleet.api, or a test)."""
    if probe in UNITS and UNITS[probe] != package:
        raise ValueError(f"probe {probe!r} already has a unit: {UNITS[probe]}")
    UNITS[probe] = package
    _changed()


def unregister(probe: str) -> None:
    """Take a unit given with `register` away again (a test's clean-up)."""
    if UNITS.pop(probe, None) is not None:
        _changed()


def version() -> int:
    """Changes with every register/unregister: a key for what is made from every unit."""
    return _changes[0]


def _changed() -> None:
    _loaded.clear()
    _changes[0] += 1


def part(probe: str, role: str) -> ModuleType | None:
    """The `role` part of `probe`'s unit (fleet.units.PROBE.ROLE), imported on first use; None
    when the probe has no unit or its unit no such part."""
    if role not in ROLES:
        raise ValueError(f"unknown unit part {role!r}: one of {', '.join(ROLES)}")
    key = (probe, role)
    if key in _loaded:
        return _loaded[key]
    package = UNITS.get(probe)
    found = None if package is None else _import(f"{package}.{role}")
    _loaded[key] = found
    return found


def parts(role: str, among: Collection[str] = ()) -> list[tuple[str, ModuleType]]:
    """Every unit's `role` part, in the table's order: (probe, module); with `among`, only the
    units of those probes (a run's: the others' parts are not even imported)."""
    chosen = [probe for probe in UNITS if not among or probe in among]
    return [(probe, found) for probe in chosen if (found := part(probe, role)) is not None]


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):  # the part (or unit) is not there
            return None
        raise  # the part is there but imports something missing: that is a bug to see
