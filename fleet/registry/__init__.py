"""The unit registry: which probes have a unit (fleet/units/PROBE/), and each unit's parts given
out by role. It is the seam between the generic layers and the units (docs/layers.md): both
import it, neither imports the other. The generic layers (analysis, checks, findings, render)
name no unit; each asks here for the parts of its own stage and calls what they declare. The
units import only its declarations (options.py, keyfacts.py) and the generic helpers of their
own stage, so the units stand above the layers they serve.

A unit's parts, one module per role, each of the stage that asks for it:

    probe.py     below every stage: what is known before any host answers: its options
                 (fleet/registry/options.py), opt-in, its findings' topic (read by
                 fleet/registry/declared.py)
    facts.py     analysis: key facts (label + paths), measurements, higher-is-better names,
                 baseline families, the probe's pure analysis (other modules sit beside it)
    checks.py    checks: the helpers it adds to a host's rule document (`_gpubench`, …)
    findings.py  findings: what is wrong that no rule says (`live`: the NCCL jobs)
    terminal.py  render: its section of the terminal report
    html.py      render: its section of the HTML page
    markdown.py  render: its section of the Markdown (`fleet diff RUN --format markdown`)
    openmetrics.py  render: its figures as Prometheus metrics (`--openmetrics FILE`)

Load order: the table names each unit by its package; a part is imported the first time a stage
asks for it (`part`, `parts`), never before, so importing a lower stage imports no higher one
and `fleet probe` starts with only the units' probe.py. This is the one place a unit is loaded:
fleet's own units and those given with `register` are loaded alike. Adding a probe: its unit's
files and one name in UNITS.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from types import ModuleType
from typing import Any

ROLES = ("probe", "facts", "checks", "findings", "terminal", "html", "markdown", "openmetrics")

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
    `fleet.registry.register("uptime", "site_units.uptime")`. Its parts come after fleet's own.
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


def declaring(role: str, name: str, among: Collection[str] = ()) -> list[tuple[str, Any]]:
    """What each unit's `role` part declares as `name` (a hook a generic layer calls), as
    (probe, value) in the table's order; units whose part does not declare it are left out."""
    return [
        (probe, getattr(found, name)) for probe, found in parts(role, among) if hasattr(found, name)
    ]
