"""Hosts described with a connection fleet does not speak (Ansible's docker, winrm, …): each ends
`unreachable` with a message naming the connection, so no host is skipped in silence."""

from __future__ import annotations

from fleet.errors import UnreachableError
from fleet.models import Host
from fleet.transport.base import HandshakeSlot, Session

PREFIX = "unsupported:"


class UnsupportedTransport:
    async def open_session(self, host: Host, handshake: HandshakeSlot) -> Session:
        connection = host.transport[len(PREFIX) :]
        where = host.origin("transport").split(" ", 1)[-1]
        raise UnreachableError(
            f"{host.name}: connection {connection!r} is not one fleet speaks (ssh, local)",
            context=f"set by {where}",
            hint=f"set ansible_connection=ssh for it, or leave it out: --limit '!{host.name}'",
        )

    async def close(self) -> None:
        return None
