"""Live progress while hosts run: where the time goes (connecting, running, done).

On a terminal: one bar for the fleet with the split and the failures so far; for a small fleet also
one row per host with the probes it is on. Off a terminal (a pipe, a file, CI): a line per host
that ends (for a big fleet, per host that ends badly) and a status line every few seconds, so a log
is never silent until the end.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from fleet.execution.fanout import Events
from fleet.execution.limits import FanLimits
from fleet.hostsets import compact_hosts, count_hosts
from fleet.models import Host, HostOutcome
from fleet.render.terminal.wrap import Hanging

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

PROGRESS_REFRESH_PER_S = 4  # the bar redraws at this bounded rate (its own thread), never per host
SMALL_FLEET = 8  # up to this many hosts, each gets its own row (terminal) or names (log lines)
LINE_PER_HOST_UP_TO = 40  # off a terminal, every host that ends gets a line up to this fleet size
LINE_EVERY_S = 5.0  # off a terminal, a status line this often


class ProgressEvents(Events):
    """Feeds the live display from the fan-out's events (all on the event loop's thread)."""

    def __init__(
        self,
        console: Console,
        total: int,
        probes: Sequence[str] = (),
        line_every_s: float = LINE_EVERY_S,
        first_running: Callable[[], object] | None = None,
    ) -> None:
        self.console, self.total, self.probe_count = console, total, len(probes)
        self.line_every_s = line_every_s
        # called once, when the first host's script has started (its first output): work that
        # must not delay the hosts' start (fleet.cli.probing.warm_up) starts there
        self.first_running = first_running
        self.phase: dict[str, str] = {}  # connecting or running; a host without one is queued
        self.counts: Counter[str] = Counter()  # connecting, running
        self.done = 0
        self.failures: Counter[str] = Counter()
        self.on: dict[str, Sequence[str]] = {}  # small fleets: the probes each host is on
        self.started = time.monotonic()
        self.progress = _progress(console) if console.is_terminal else None
        self.task = (
            self.progress.add_task("[bold]probing", total=total, detail="")
            if self.progress
            else None
        )
        self.rows: dict[str, TaskID] = {}  # small fleets on a terminal: one row per host
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # ------------------------------------------------------------------------- lifecycle

    def __enter__(self) -> ProgressEvents:
        if self.progress is not None:
            self.progress.start()
        else:
            self._ticker = threading.Thread(target=self._tick, name="fleet-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        if self.progress is not None:
            self.progress.stop()

    def _tick(self) -> None:
        while not self._stop.wait(self.line_every_s):
            self._say(self.status_line())

    # ---------------------------------------------------------------------------- events

    def run_planned(self, limits: FanLimits) -> None:
        if limits.capped_by_open_files or (self.progress is None and self.total > SMALL_FLEET):
            self._say(f"probing {count_hosts(limits.hosts)}: {limits.describe()}")

    def host_connecting(self, host: Host) -> None:
        self._enter_phase(host.name, "connecting")

    def host_running(self, host: Host) -> None:
        if self.first_running is not None:
            started, self.first_running = self.first_running, None
            started()
        self._enter_phase(host.name, "running")

    def probes_running(self, host: Host, probes: Sequence[str]) -> None:
        if self.total > SMALL_FLEET:
            return  # the common case at scale: nothing to show per host, nothing to do
        self.on[host.name] = probes
        self._update_row(host.name, detail="on " + ", ".join(probes) if probes else "running")

    def probe_finished(self, host: Host, probe: str, status: str) -> None:
        if self.progress is not None and host.name in self.rows:
            self.progress.advance(self.rows[host.name])

    def host_finished(self, outcome: HostOutcome) -> None:
        self._leave_phase(outcome.name)
        self.on.pop(outcome.name, None)
        self.done += 1
        if outcome.status != "ok":
            self.failures[outcome.status] += 1
        if outcome.name in self.rows and self.progress is not None:
            self.progress.stop_task(self.rows[outcome.name])
            self._update_row(outcome.name, detail=outcome.status)
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, advance=1, detail=self._detail())
        elif self.total <= LINE_PER_HOST_UP_TO or outcome.status != "ok":
            self._say(_ended_line(outcome))

    # --------------------------------------------------------------------------- helpers

    def status_line(self) -> str:
        """The fleet at a glance: `12s: 120/300 done · 32 connecting · 148 running · 2 timeout`,
        and for a small fleet the probes each running host is on."""
        line = f"{time.monotonic() - self.started:.0f}s: {self.done}/{self.total} done"
        detail = self._detail(names=True)
        return f"{line} · {detail}" if detail else line

    def _detail(self, names: bool = False) -> str:
        parts = [f"{self.counts[p]} {p}" for p in ("connecting", "running") if self.counts[p]]
        if names and self.on:  # hosts on the same probes folded: `h[01-08] on health`
            alike: dict[str, list[str]] = {}
            for host, probes in self.on.items():
                if probes:
                    alike.setdefault(", ".join(probes), []).append(host)
            parts.append("; ".join(f"{compact_hosts(h)} on {p}" for p, h in alike.items()))
        parts += [f"{n} {status}" for status, n in self.failures.most_common()]
        return " · ".join(p for p in parts if p)

    def _enter_phase(self, name: str, phase: str) -> None:
        self._leave_phase(name)
        self.phase[name] = phase
        self.counts[phase] += 1
        if self.progress is None or self.task is None:
            return
        if self.total <= SMALL_FLEET and name not in self.rows:
            total = self.probe_count or None
            self.rows[name] = self.progress.add_task(f"  {escape(name)}", total=total, detail="")
        self._update_row(name, detail=phase)
        self.progress.update(self.task, detail=self._detail())

    def _leave_phase(self, name: str) -> None:
        """A host leaves connecting or running; one interrupted in the queue had neither."""
        phase = self.phase.pop(name, None)
        if phase is not None:
            self.counts[phase] -= 1

    def _update_row(self, name: str, detail: str) -> None:
        if self.progress is not None and name in self.rows:
            self.progress.update(self.rows[name], detail=detail)

    def _say(self, line: str) -> None:
        """A log line, wrapped between words at the console's width, continuation lines
        indented under its text (a host's error, a long status line)."""
        lead = len(line) - len(line.lstrip(" "))
        self.console.print(Hanging(Text(line[:lead]), Text(line[lead:]), lead + 4), crop=False)


def _progress(console: Console) -> Progress:
    """The live bar: only on a terminal, so only then imported (a log's lines need none of it)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}", markup=False),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        refresh_per_second=PROGRESS_REFRESH_PER_S,
    )


def _ended_line(outcome: HostOutcome) -> str:
    line = f"  {outcome.name}: {outcome.status} after {outcome.elapsed_s:.1f}s"
    return f"{line}: {outcome.error}" if outcome.error else line
