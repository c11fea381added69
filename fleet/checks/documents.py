"""What rules read about one host: `{probe: data}` for every probe it ran, plus the helpers
(names that start with "_"; docs/rules.md lists them). `_status`, `_host` and `_args` are every
host's; the others come from the probes' units (fleet/units/PROBE/checks.py), in the order of
fleet.registry.UNITS."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from fleet.analysis.facts import builtin_facts
from fleet.models import HostOutcome
from fleet.registry import parts

# The helpers every host's document has, whatever ran (None: no probe needed).
GENERIC_HELPERS: Mapping[str, str | None] = {"_status": None, "_host": None, "_args": None}


def helpers() -> dict[str, str | None]:
    """Helpers in a host's document: the probe whose success each needs (None: always there)."""
    found = dict(GENERIC_HELPERS)
    for _, unit in parts("checks"):
        found.update(unit.HELPERS)
    return found


def payload_helpers() -> dict[str, tuple[str, ...]]:
    """Helpers that follow from payloads whose measured fields are masked (the allreduce rows),
    with the probes they read: their own values key a rule's answer (fleet.checks.sharing)."""
    found: dict[str, tuple[str, ...]] = {}
    for _, unit in parts("checks"):
        found.update(getattr(unit, "PAYLOAD_HELPERS", {}))
    return found


def argument_helpers() -> frozenset[str]:
    """Helpers that follow from the host's probe arguments too (gpubench's tolerances)."""
    return frozenset(
        h for _, unit in parts("checks") for h in getattr(unit, "ARGUMENT_HELPERS", ())
    )


def results_beside_probes() -> frozenset[str]:
    """Per-host results that are not probes but read like one: `fleet fabric` runs give `fabric`."""
    return frozenset(builtin_facts())


@dataclass
class HostHelpers:
    """What a unit's checks part is given to add its helpers to one host's document: the host,
    its probe arguments, what the unit's `run_context` made of the whole run (None without one),
    and `kept`, which computes a helper once per payload (fleet.checks.sharing's memo)."""

    outcome: HostOutcome
    probe_args: Mapping[str, Any] | None
    context: Any
    memo: dict[Any, Any] | None

    def ok_data(self, probe: str) -> Any:
        """The probe's data where it succeeded; None where it did not run or failed."""
        result = self.outcome.probes.get(probe)
        return result.data if result is not None and result.status == "ok" else None

    def kept(self, slot: Any, make: Callable[[], Any]) -> Any:
        if self.memo is None:
            return make()
        if slot not in self.memo:
            self.memo[slot] = make()
        return self.memo[slot]


def run_contexts(outcomes: Mapping[str, HostOutcome]) -> dict[str, Any]:
    """What each unit holds every host against (gpubench: every GPU of each model in the run),
    made once per run: the same for every host judged together."""
    return {
        probe: unit.run_context(outcomes)
        for probe, unit in parts("checks")
        if hasattr(unit, "run_context")
    }


def host_documents(
    outcomes: Mapping[str, HostOutcome], probe_args: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every host's document; the run's contexts (run_contexts) are made together with them."""
    contexts = run_contexts(outcomes)
    return {
        name: host_document(outcome, probe_args.get(name), contexts)
        for name, outcome in outcomes.items()
    }


def host_document(
    outcome: HostOutcome,
    probe_args: Mapping[str, Any] | None = None,
    contexts: Mapping[str, Any] | None = None,
    plain: Callable[[Any], Any] | None = None,
    roots: Collection[str] | None = None,
    memo: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """What rules read about one host: `{probe: data}` plus the helpers. fleet.checks.sharing
    passes the run's contexts (run_contexts), how a payload is copied (`plain`: once per payload
    object for all its hosts), the only keys a rule reads (`roots`: None, all) and where helpers
    computed from a payload are kept (`memo`, by the payload objects' ids)."""
    copy = plain or plain_copy
    wanted: Callable[[str], bool] = (lambda _: True) if roots is None else roots.__contains__
    probes = outcome.probes
    document: dict[str, Any] = {name: copy(r.data) for name, r in probes.items() if wanted(name)}
    if wanted("_status"):
        document["_status"] = {name: r.status for name, r in probes.items()}
    if wanted("_host"):
        document["_host"] = {"name": outcome.name, "status": outcome.status}
    if wanted("_args"):
        document["_args"] = plain_copy(probe_args or {})
    for probe, unit in parts("checks"):
        if any(wanted(helper) for helper in unit.HELPERS):
            context = (contexts or {}).get(probe)
            unit.add_helpers(document, HostHelpers(outcome, probe_args, context, memo), wanted)
    return document


def plain_copy(value: Any) -> Any:
    """Plain dicts and lists (JMESPath's type checks want them), through a JSON round trip."""
    return json.loads(json.dumps(value, default=str))
