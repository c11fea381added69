"""How a script (the probe bundle, a fabric rank program) reaches a host: `ssh` (asyncssh, the one
transport that imports it), `local`, `slurm` (one srun step), `unsupported`; `launch` how it starts
there (start-up alarm, launcher, wrapper argv).

`LocalTransport` loads its module on first use (PEP 562): a run over SSH alone does not import
the local transport's interpreter choice."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fleet.transport.base import OutputSink, Transport

if TYPE_CHECKING:
    from fleet.transport.local import LocalTransport

__all__ = ["LocalTransport", "OutputSink", "Transport"]


def __getattr__(name: str) -> Any:
    if name == "LocalTransport":
        from fleet.transport.local import LocalTransport

        return LocalTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
