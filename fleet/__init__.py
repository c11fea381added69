"""fleet: probe many GPU hosts over SSH at once and show where they differ.

The Python API (fleet.api) is re-exported here: probe, load_run, save_run, cross_host_diff,
drift, check, and the Run model (`fleet fabric` from Python is fleet.api.fabric: fleet.fabric is
the package that runs it). The `fleet` command (fleet.cli) is a thin layer
over it: it parses options, calls these functions and prints what they return.
"""

from typing import TYPE_CHECKING, Any

from fleet.errors import FleetError
from fleet.version import __version__

if TYPE_CHECKING:
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
    from fleet.models import HostOutcome, HostStatus, Run
else:
    # fleet.api and fleet.models on first use (PEP 562): `fleet --version` and the fan-out need
    # little of them, and the executable loads them with the collector paused (fleet/__main__.py)
    def __getattr__(name: str) -> Any:
        if name not in __all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        if name in _FROM_MODELS:
            import fleet.models as source
        else:
            import fleet.api as source

        value = getattr(source, name)
        globals()[name] = value
        return value


_FROM_MODELS = ("HostOutcome", "HostStatus", "Run")

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
