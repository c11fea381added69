"""How a bundle reaches a host: `ssh` (asyncssh, the only module that imports it) or `local`."""

from fleet.transport.base import OutputSink, Transport
from fleet.transport.local import LocalTransport

__all__ = ["LocalTransport", "OutputSink", "Transport"]
