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
    jobs.py         jobs (every NCCL job across a run's hosts, `fleet jobs`), JobsView

Every name here loads its module on first use (PEP 562): `import fleet` and the CLI's start-up
pay only for what the command at hand needs (`fleet probe` needs no rules engine, analysis or
fabric to start). The types of the rules engine, fleet.fabric and Slurm (CheckReport, Rule,
FabricSettings, FabricEvents, GroupResult, SlurmNode) are here too.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fleet.version import __version__

if TYPE_CHECKING:
    from fleet.api.assessing import Judging, Prepared, assess, prepare, write_page
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
    from fleet.api.jobs import JobsView, jobs
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
    from fleet.checks import CheckReport, Rule
    from fleet.fabric.blame import DEFAULT_TOLERANCE as DEFAULT_FABRIC_TOLERANCE
    from fleet.fabric.results import GroupResult
    from fleet.fabric.run import FabricEvents, FabricSettings
    from fleet.findings.assessment import Assessment
    from fleet.inventory.slurm import SlurmNode
else:
    # name → (module, attribute): loaded on first use (PEP 562), so `import fleet` stays quick
    _ON_FIRST_USE = {
        "Assessment": ("fleet.findings.assessment", "Assessment"),
        "Judging": ("fleet.api.assessing", "Judging"),
        "Prepared": ("fleet.api.assessing", "Prepared"),
        "assess": ("fleet.api.assessing", "assess"),
        "prepare": ("fleet.api.assessing", "prepare"),
        "write_page": ("fleet.api.assessing", "write_page"),
        "INVENTORY_FORMATS": ("fleet.api.hosts", "INVENTORY_FORMATS"),
        "AdhocSettings": ("fleet.api.hosts", "AdhocSettings"),
        "Inventory": ("fleet.api.hosts", "Inventory"),
        "Selection": ("fleet.api.hosts", "Selection"),
        "hosts_document": ("fleet.api.hosts", "hosts_document"),
        "inventory_probe_args": ("fleet.api.hosts", "inventory_probe_args"),
        "open_inventory": ("fleet.api.hosts", "open_inventory"),
        "select_hosts": ("fleet.api.hosts", "select_hosts"),
        "slurm_argv": ("fleet.api.hosts", "slurm_argv"),
        "JobsView": ("fleet.api.jobs", "JobsView"),
        "jobs": ("fleet.api.jobs", "jobs"),
        "DEFAULT_CONCURRENCY": ("fleet.api.probing", "DEFAULT_CONCURRENCY"),
        "DEFAULT_TIMEOUT_S": ("fleet.api.probing", "DEFAULT_TIMEOUT_S"),
        "MATRIX_TIMEOUT_S": ("fleet.api.probing", "MATRIX_TIMEOUT_S"),
        "Bundle": ("fleet.api.probing", "Bundle"),
        "Events": ("fleet.api.probing", "Events"),
        "ProbeOptions": ("fleet.api.probing", "ProbeOptions"),
        "available_probes": ("fleet.api.probing", "available_probes"),
        "build_probe_bundle": ("fleet.api.probing", "build_probe_bundle"),
        "make_transports": ("fleet.api.probing", "make_transports"),
        "probe": ("fleet.api.probing", "probe"),
        "probe_and_keep": ("fleet.api.probing", "probe_and_keep"),
        "probe_and_keep_async": ("fleet.api.probing", "probe_and_keep_async"),
        "probe_args_from": ("fleet.api.probing", "probe_args_from"),
        "probe_async": ("fleet.api.probing", "probe_async"),
        "transports_for": ("fleet.api.probing", "transports_for"),
        "BUILT_IN_LOCAL": ("fleet.api.runs", "BUILT_IN_LOCAL"),
        "KeptRun": ("fleet.api.runs", "KeptRun"),
        "collection_paused": ("fleet.api.runs", "collection_paused"),
        "default_runs_dir": ("fleet.api.runs", "default_runs_dir"),
        "keep_run": ("fleet.api.runs", "keep_run"),
        "list_runs": ("fleet.api.runs", "list_runs"),
        "load_run": ("fleet.api.runs", "load_run"),
        "prune_runs": ("fleet.api.runs", "prune_runs"),
        "resolve_run": ("fleet.api.runs", "resolve_run"),
        "save_run": ("fleet.api.runs", "save_run"),
        "write_report": ("fleet.api.runs", "write_report"),
        "DEFAULT_FLOOR": ("fleet.api.baselines", "DEFAULT_FLOOR"),
        "DEFAULT_K": ("fleet.api.baselines", "DEFAULT_K"),
        "Baseline": ("fleet.api.baselines", "Baseline"),
        "BaselineFileError": ("fleet.api.baselines", "BaselineFileError"),
        "BaselineJudgement": ("fleet.api.baselines", "BaselineJudgement"),
        "CohortLineRate": ("fleet.api.baselines", "CohortLineRate"),
        "baseline_drift": ("fleet.api.baselines", "baseline_drift"),
        "baseline_report": ("fleet.api.baselines", "baseline_report"),
        "baseline_results": ("fleet.api.baselines", "baseline_results"),
        "baseline_text": ("fleet.api.baselines", "baseline_text"),
        "judge_baseline": ("fleet.api.baselines", "judge_baseline"),
        "line_rates": ("fleet.api.baselines", "line_rates"),
        "load_baseline": ("fleet.api.baselines", "load_baseline"),
        "make_baseline": ("fleet.api.baselines", "make_baseline"),
        "with_baseline": ("fleet.api.baselines", "with_baseline"),
        "write_baseline": ("fleet.api.baselines", "write_baseline"),
        "DEFAULT_PACK": ("fleet.api.checking", "DEFAULT_PACK"),
        "available_packs": ("fleet.api.checking", "available_packs"),
        "check": ("fleet.api.checking", "check"),
        "evaluate": ("fleet.api.checking", "evaluate"),
        "load_checks": ("fleet.api.checking", "load_checks"),
        "packs_folder": ("fleet.api.checking", "packs_folder"),
        "DEFAULT_TOLERANCE": ("fleet.analysis.across_runs.tolerance", "DEFAULT_TOLERANCE"),
        "Drift": ("fleet.api.comparing", "Drift"),
        "FleetDiff": ("fleet.api.comparing", "FleetDiff"),
        "cross_host_diff": ("fleet.api.comparing", "cross_host_diff"),
        "drift": ("fleet.api.comparing", "drift"),
        "fabric": ("fleet.api.fabric_runs", "fabric"),
        "fabric_async": ("fleet.api.fabric_runs", "fabric_async"),
        "parse_pairs": ("fleet.api.fabric_runs", "parse_pairs"),
        "parse_sizes": ("fleet.api.fabric_runs", "parse_sizes"),
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
    "Assessment",
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
    "JobsView",
    "Judging",
    "KeptRun",
    "Prepared",
    "ProbeOptions",
    "Rule",
    "Selection",
    "SlurmNode",
    "__version__",
    "assess",
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
    "jobs",
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
    "prepare",
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
    "write_page",
    "write_report",
]
