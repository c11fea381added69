"""Helpers shared by test_fabric_rounds.py and the tests beside it: one test module never imports another
(tests/unit/test_test_layout.py)."""

from __future__ import annotations

import ast
import asyncio
import json
from collections.abc import Mapping
from typing import Any

from fleet.models import Host
from fleet.transport.base import ExecResult, ExecuteSession, HandshakeSlot, OutputSink, Session


def line(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def rank_config(script: bytes) -> dict[str, Any]:
    """The FABRIC literal of a rank script (fleet/fabric/launch.py)."""
    for text in script.decode().splitlines():
        if text.startswith("FABRIC = json.loads("):
            config: dict[str, Any] = json.loads(
                ast.literal_eval(text[len("FABRIC = json.loads(") : -1])
            )
            return config
    raise AssertionError("not a rank script")


class RankTransport:
    """Every host answers the discovery (torch, no GPU: gloo ranks), unless `silent`; then its
    ranks behave as `ranks` says: "ok" (every size measured), "hang", or "crash" (an exception no
    transport maps)."""

    def __init__(self, ranks: Mapping[str, str], silent: frozenset[str] = frozenset()) -> None:
        self.ranks, self.silent = ranks, silent
        self.cancelled: list[str] = []

    async def open_session(self, host: Host, handshake: HandshakeSlot) -> Session:
        return await ExecuteSession.open(self, host, handshake)

    async def execute(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        try:
            if b'"discovered"' in script:
                return await self._discover(host, sink)
            return await self._ranks(host, script, sink)
        except asyncio.CancelledError:
            self.cancelled.append(host.name)
            raise

    async def _discover(self, host: Host, sink: OutputSink) -> ExecResult:
        if host.name in self.silent:
            await asyncio.sleep(3600)
        sink(line({"type": "discovered", "python": "3.12.3", "torch": True, "gpus": 0}))
        return ExecResult(0)

    async def _ranks(self, host: Host, script: bytes, sink: OutputSink) -> ExecResult:
        how = self.ranks[host.name]
        if how == "crash":
            raise RuntimeError("socket fell over")
        if how == "hang":
            await asyncio.sleep(3600)
        for rank in rank_config(script)["ranks"]:
            sink(
                line(
                    {
                        "type": "size",
                        "rank": rank["rank"],
                        "bytes": 8,
                        "seconds": 1e-5,
                        "correct": True,
                    }
                )
            )
            sink(line({"type": "rank_done", "rank": rank["rank"], "env": {}}))
        sink(line({"type": "done"}))
        return ExecResult(0)

    async def close(self) -> None:
        return None


def hosts(*names: str) -> list[Host]:
    return [Host(name=n, address=n, transport="memory", connect_timeout=0.1) for n in names]
