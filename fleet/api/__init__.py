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

Here are the commands and their types (at most 40 names, tests/unit/test_public_api.py); the
rest is importable from its own module:

    hosts.py        which hosts: select_hosts, open_inventory, inventory_probe_args, slurm_argv
    probing.py      ProbeOptions, probe, probe_async, probe_and_keep(_async), build_probe_bundle
    commands.py     one call per command: ProbePlan (probe, check), assess_run (a saved run
                    judged), saved_runs (fleet runs)
    assessing.py    Judging, prepare, assess: everything fleet says about one run
    runs.py         keep_run (save, --json), save/load/resolve/list/prune runs, write_report (HTML)
    comparing.py    cross_host_diff, drift
    checking.py     load_checks, evaluate, check, available_packs, rule_packs
    baselines.py    make_baseline, write/load_baseline, judge_baseline, with_baseline, line_rates,
                    baseline_drift (drift judged against a baseline's bands)
    fabric_runs.py  fabric, fabric_async, fabric_and_keep, fabric_settings, parse_pairs, parse_sizes
    jobs.py         jobs (every NCCL job across a run's hosts, `fleet jobs`), JobsView

Every name here loads its module on first use (PEP 562): `import fleet` and the CLI's start-up
pay only for what the command at hand needs (`fleet probe` needs no rules engine, analysis or
fabric to start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from fleet.version import __version__

if TYPE_CHECKING:
    from fleet.api.assessing import (
        assess,
        write_page,
    )
    from fleet.api.baselines import (
        load_baseline,
        make_baseline,
        write_baseline,
    )
    from fleet.api.checking import (
        available_packs,
        check,
    )
    from fleet.api.commands import (
        Probed,
        ProbePlan,
        assess_run,
        saved_runs,
    )
    from fleet.api.comparing import (
        Drift,
        FleetDiff,
        cross_host_diff,
        drift,
    )
    from fleet.api.fabric_runs import (
        fabric,
        fabric_async,
    )
    from fleet.api.hosts import (
        Selection,
        hosts_document,
        select_hosts,
    )
    from fleet.api.jobs import JobsView, jobs
    from fleet.api.judging import Judging, Prepared, prepare
    from fleet.api.probing import (
        ProbeOptions,
        available_probes,
        probe,
        probe_async,
    )
    from fleet.api.runs import (
        KeptRun,
        list_runs,
        load_run,
        prune_runs,
        resolve_run,
        save_run,
        write_report,
    )
    from fleet.checks import (
        CheckReport,
    )
    from fleet.fabric.run import (
        FabricSettings,
    )
    from fleet.findings.assessment import (
        Assessment,
    )
else:
    # name → (module, attribute): loaded on first use (PEP 562), so `import fleet` stays quick
    _ON_FIRST_USE = {
        "probe": ("fleet.api.probing", "probe"),
        "probe_async": ("fleet.api.probing", "probe_async"),
        "ProbeOptions": ("fleet.api.probing", "ProbeOptions"),
        "available_probes": ("fleet.api.probing", "available_probes"),
        "ProbePlan": ("fleet.api.commands", "ProbePlan"),
        "Probed": ("fleet.api.commands", "Probed"),
        "assess_run": ("fleet.api.commands", "assess_run"),
        "saved_runs": ("fleet.api.commands", "saved_runs"),
        "check": ("fleet.api.checking", "check"),
        "available_packs": ("fleet.api.checking", "available_packs"),
        "assess": ("fleet.api.assessing", "assess"),
        "prepare": ("fleet.api.judging", "prepare"),
        "Judging": ("fleet.api.judging", "Judging"),
        "Prepared": ("fleet.api.judging", "Prepared"),
        "write_page": ("fleet.api.assessing", "write_page"),
        "Assessment": ("fleet.findings.assessment", "Assessment"),
        "load_run": ("fleet.api.runs", "load_run"),
        "save_run": ("fleet.api.runs", "save_run"),
        "resolve_run": ("fleet.api.runs", "resolve_run"),
        "list_runs": ("fleet.api.runs", "list_runs"),
        "prune_runs": ("fleet.api.runs", "prune_runs"),
        "KeptRun": ("fleet.api.runs", "KeptRun"),
        "write_report": ("fleet.api.runs", "write_report"),
        "fabric": ("fleet.api.fabric_runs", "fabric"),
        "fabric_async": ("fleet.api.fabric_runs", "fabric_async"),
        "jobs": ("fleet.api.jobs", "jobs"),
        "JobsView": ("fleet.api.jobs", "JobsView"),
        "FabricSettings": ("fleet.fabric.run", "FabricSettings"),
        "make_baseline": ("fleet.api.baselines", "make_baseline"),
        "load_baseline": ("fleet.api.baselines", "load_baseline"),
        "write_baseline": ("fleet.api.baselines", "write_baseline"),
        "cross_host_diff": ("fleet.api.comparing", "cross_host_diff"),
        "drift": ("fleet.api.comparing", "drift"),
        "FleetDiff": ("fleet.api.comparing", "FleetDiff"),
        "Drift": ("fleet.api.comparing", "Drift"),
        "Selection": ("fleet.api.hosts", "Selection"),
        "select_hosts": ("fleet.api.hosts", "select_hosts"),
        "hosts_document": ("fleet.api.hosts", "hosts_document"),
        "CheckReport": ("fleet.checks", "CheckReport"),
    }

    def __getattr__(name: str) -> Any:
        if name not in _ON_FIRST_USE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module, attribute = _ON_FIRST_USE[name]
        loaded = importlib.import_module(module)
        value = getattr(loaded, attribute)
        globals()[name] = value
        # Importing fleet.api.jobs binds `jobs` here to the module; the name is the command's.
        short = module.rpartition(".")[2]
        if globals().get(short) is loaded and _ON_FIRST_USE.get(short, ("",))[0] == module:
            globals()[short] = getattr(loaded, _ON_FIRST_USE[short][1])
        return value


__all__ = [
    "Assessment",
    "CheckReport",
    "Drift",
    "FabricSettings",
    "FleetDiff",
    "JobsView",
    "Judging",
    "KeptRun",
    "Prepared",
    "ProbeOptions",
    "ProbePlan",
    "Probed",
    "Selection",
    "__version__",
    "assess",
    "assess_run",
    "available_packs",
    "available_probes",
    "check",
    "cross_host_diff",
    "drift",
    "fabric",
    "fabric_async",
    "hosts_document",
    "jobs",
    "list_runs",
    "load_baseline",
    "load_run",
    "make_baseline",
    "prepare",
    "probe",
    "probe_async",
    "prune_runs",
    "resolve_run",
    "save_run",
    "saved_runs",
    "select_hosts",
    "write_baseline",
    "write_page",
    "write_report",
]
