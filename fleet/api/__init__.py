"""fleet from Python: probe hosts, keep and find runs, compare hosts and runs, check rules, fabric.

    import fleet
    run = fleet.probe(inventory="inventory/local.yaml", probes=["system"])
    run.hosts["local"].status                      # "ok"
    path = fleet.save_run(run)                     # ~/.local/state/fleet/runs/<id>.json, 0600
    same = fleet.load_run(path)                    # or a name, "latest", "previous"
    fleet.cross_host_diff(same).divergences        # which facts differ between hosts

Everything here raises fleet.errors.FleetError subclasses (bad inventory, bad probe names, a run
that cannot be read); a host that fails never raises: it ends with its own status in the Run.
Nothing here prints or exits; the `fleet` command (fleet.cli) is these functions plus printing.

    hosts.py        which hosts: select_hosts, open_inventory, inventory_probe_args, slurm_argv
    probing.py      ProbeOptions, probe, probe_async, probe_and_keep(_async), build_probe_bundle
    runs.py         keep_run (save, --json), save/load/resolve/list/prune runs, write_report (HTML)
    comparing.py    cross_host_diff, drift
    checking.py     load_checks, evaluate, check, available_packs, packs_folder
    baselines.py    make_baseline, write/load_baseline, judge_baseline, with_baseline, line_rates,
                    baseline_drift (drift judged against a baseline's bands)
    fabric_runs.py  fabric, fabric_async, parse_pairs, parse_sizes

The rules engine, fleet.fabric and Slurm load on first use; their types (CheckReport, Rule,
FabricSettings, FabricEvents, GroupResult, SlurmNode) are here too, loaded when first named.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fleet.api.baselines import (
    DEFAULT_FLOOR,
    DEFAULT_K,
    Baseline,
    BaselineFileError,
    BaselineJudgement,
    CohortLineRate,
    baseline_drift,
    baseline_report,
    baseline_results,
    baseline_text,
    judge_baseline,
    line_rates,
    load_baseline,
    make_baseline,
    with_baseline,
    write_baseline,
)
from fleet.api.checking import (
    DEFAULT_PACK,
    available_packs,
    check,
    evaluate,
    load_checks,
    packs_folder,
)
from fleet.api.comparing import DEFAULT_TOLERANCE, Drift, FleetDiff, cross_host_diff, drift
from fleet.api.fabric_runs import fabric, fabric_async, parse_pairs, parse_sizes
from fleet.api.hosts import (
    INVENTORY_FORMATS,
    AdhocSettings,
    Inventory,
    Selection,
    hosts_document,
    inventory_probe_args,
    open_inventory,
    select_hosts,
    slurm_argv,
)
from fleet.api.probing import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT_S,
    MATRIX_TIMEOUT_S,
    Bundle,
    Events,
    ProbeOptions,
    available_probes,
    build_probe_bundle,
    make_transports,
    probe,
    probe_and_keep,
    probe_and_keep_async,
    probe_args_from,
    probe_async,
    transports_for,
)
from fleet.api.runs import (
    BUILT_IN_LOCAL,
    KeptRun,
    collection_paused,
    default_runs_dir,
    keep_run,
    list_runs,
    load_run,
    prune_runs,
    resolve_run,
    save_run,
    write_report,
)
from fleet.version import __version__

if TYPE_CHECKING:
    from fleet.checks import CheckReport, Rule
    from fleet.fabric.blame import DEFAULT_TOLERANCE as DEFAULT_FABRIC_TOLERANCE
    from fleet.fabric.results import GroupResult
    from fleet.fabric.run import FabricEvents, FabricSettings
    from fleet.inventory.slurm import SlurmNode
else:
    # name → (module, attribute): loaded on first use (PEP 562), so `import fleet` stays quick
    _ON_FIRST_USE = {
        "CheckReport": ("fleet.checks", "CheckReport"),
        "Rule": ("fleet.checks", "Rule"),
        "DEFAULT_FABRIC_TOLERANCE": ("fleet.fabric.blame", "DEFAULT_TOLERANCE"),
        "GroupResult": ("fleet.fabric.results", "GroupResult"),
        "FabricEvents": ("fleet.fabric.run", "FabricEvents"),
        "FabricSettings": ("fleet.fabric.run", "FabricSettings"),
        "SlurmNode": ("fleet.inventory.slurm", "SlurmNode"),
    }

    def __getattr__(name: str) -> Any:
        if name not in _ON_FIRST_USE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module, attribute = _ON_FIRST_USE[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value


__all__ = [
    "BUILT_IN_LOCAL",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_FABRIC_TOLERANCE",
    "DEFAULT_FLOOR",
    "DEFAULT_K",
    "DEFAULT_PACK",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_TOLERANCE",
    "INVENTORY_FORMATS",
    "MATRIX_TIMEOUT_S",
    "AdhocSettings",
    "Baseline",
    "BaselineFileError",
    "BaselineJudgement",
    "Bundle",
    "CheckReport",
    "CohortLineRate",
    "Drift",
    "Events",
    "FabricEvents",
    "FabricSettings",
    "FleetDiff",
    "GroupResult",
    "Inventory",
    "KeptRun",
    "ProbeOptions",
    "Rule",
    "Selection",
    "SlurmNode",
    "__version__",
    "available_packs",
    "available_probes",
    "baseline_drift",
    "baseline_report",
    "baseline_results",
    "baseline_text",
    "build_probe_bundle",
    "check",
    "collection_paused",
    "cross_host_diff",
    "default_runs_dir",
    "drift",
    "evaluate",
    "fabric",
    "fabric_async",
    "hosts_document",
    "inventory_probe_args",
    "judge_baseline",
    "keep_run",
    "line_rates",
    "list_runs",
    "load_baseline",
    "load_checks",
    "load_run",
    "make_baseline",
    "make_transports",
    "open_inventory",
    "packs_folder",
    "parse_pairs",
    "parse_sizes",
    "probe",
    "probe_and_keep",
    "probe_and_keep_async",
    "probe_args_from",
    "probe_async",
    "prune_runs",
    "resolve_run",
    "save_run",
    "select_hosts",
    "slurm_argv",
    "transports_for",
    "with_baseline",
    "write_baseline",
    "write_report",
]
