"""fleet: probe many GPU hosts over SSH at once and show where they differ.

The Python API (fleet.api) is re-exported here: probe, load_run, save_run, cross_host_diff, drift,
check, and the Run model. The `fleet` command (fleet.cli) is a thin layer over it.
"""

from fleet.api import (
    ProbeOptions,
    check,
    cross_host_diff,
    drift,
    load_run,
    probe,
    save_run,
    select_hosts,
)
from fleet.errors import FleetError
from fleet.models import HostOutcome, Run
from fleet.version import __version__

__all__ = [
    "FleetError",
    "HostOutcome",
    "ProbeOptions",
    "Run",
    "__version__",
    "check",
    "cross_host_diff",
    "drift",
    "load_run",
    "probe",
    "save_run",
    "select_hosts",
]
