"""Run hand-made probes through the real runner, bundle and local transport."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Mapping

from fleet.execution.bundle import Bundle, ProbeSource, build_bundle
from fleet.execution.fanout import FanOut, RunSettings
from fleet.models import Host, HostOutcome
from fleet.transport import LocalTransport, Transport
from tests.conftest import REMOTE_PYTHON


def make_bundle(probes: Mapping[str, str]) -> Bundle:
    runner = build_bundle(["system"]).runner
    sources = {n: ProbeSource(n, textwrap.dedent(src), "") for n, src in probes.items()}
    return Bundle(runner=runner, probes=sources)


def local_host(name: str = "local") -> Host:
    return Host(name=name, address="localhost", transport="local", python=REMOTE_PYTHON)


def run_probes(
    probes: Mapping[str, str],
    hosts: list[Host] | None = None,
    transports: Mapping[str, Transport] | None = None,
    interrupt_after_s: float | None = None,
    **settings: object,
) -> dict[str, HostOutcome]:
    return run_bundle(make_bundle(probes), hosts, transports, interrupt_after_s, **settings)


def run_bundle(
    bundle: Bundle,
    hosts: list[Host] | None = None,
    transports: Mapping[str, Transport] | None = None,
    interrupt_after_s: float | None = None,
    **settings: object,
) -> dict[str, HostOutcome]:
    """Run a bundle of your making through the real runner and local transport."""

    async def main() -> dict[str, HostOutcome]:
        interrupt = asyncio.Event()
        if interrupt_after_s is not None:
            asyncio.get_running_loop().call_later(interrupt_after_s, interrupt.set)
        fan_out = FanOut(
            bundle,
            transports or {"local": LocalTransport()},
            RunSettings(**settings),
            interrupt=interrupt,
        )  # type: ignore[arg-type]
        return await fan_out.run(hosts or [local_host()])

    return asyncio.run(main())
