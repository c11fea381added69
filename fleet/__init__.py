"""fleet: probe many GPU hosts over SSH at once and show where they differ.

The Python API (fleet.api) is re-exported here: probe, load_run, save_run, cross_host_diff,
drift, check, and the Run model (`fleet fabric` from Python is fleet.api.fabric: fleet.fabric is
the package that runs it). The `fleet` command (fleet.cli) is a thin layer
over it: it parses options, calls these functions and prints what they return.
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
from fleet.models import HostOutcome, HostStatus, Run
from fleet.version import __version__

__all__ = [
    "FleetError",
    "HostOutcome",
    "HostStatus",
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
