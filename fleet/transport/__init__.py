"""How a script (the probe bundle, a fabric rank program) reaches a host: `ssh` (asyncssh, the one
transport that imports it), `local`, `slurm` (one srun step), `unsupported`; `launch` how it starts
there (start-up alarm, launcher, wrapper argv)."""

from fleet.transport.base import OutputSink, Transport
from fleet.transport.local import LocalTransport

__all__ = ["LocalTransport", "OutputSink", "Transport"]
