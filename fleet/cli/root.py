"""The `fleet` group: the one error boundary, --debug on every command, and which module holds
each command (check, report, fabric and baseline load on first use).

The commands print and exit; what they print comes from fleet.api, the exit codes from
fleet.exits. A FleetError that stops a command becomes its message, context and hint on
stderr and its exit code here, and nowhere else.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any, ClassVar

import click

from fleet import api
from fleet.collector import end_start_up
from fleet.errors import FleetError

log = logging.getLogger("fleet")


class FleetGroup(click.Group):
    """The one error boundary: a FleetError from any command becomes its message, context and hint
    on stderr and its exit code (2: nothing was contacted). With --debug, its whole cause chain too.

    Loads each command's module on first use: the rules engine, the HTML report, the analysis
    and fleet.fabric would cost every other command start-up time (`fleet probe` needs none of
    them to start). Those modules never import this one."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "hosts": ("fleet.cli.hosts", "hosts"),
        "probes": ("fleet.cli.hosts", "list_probes"),
        "probe": ("fleet.cli.probe", "probe"),
        "diff": ("fleet.cli.runs", "diff"),
        "runs": ("fleet.cli.runs", "runs"),
        "show": ("fleet.cli.runs", "show"),
        "jobs": ("fleet.cli.jobs", "jobs"),
        "check": ("fleet.cli.check", "check"),
        "report": ("fleet.cli.report", "report"),
        "fabric": ("fleet.cli.fabric", "fabric"),
        "baseline": ("fleet.cli.baseline", "baseline"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command: click.Command | None
        if cmd_name in self.LAZY:
            module, attribute = self.LAZY[cmd_name]
            command = getattr(importlib.import_module(module), attribute)
        else:
            command = super().get_command(ctx, cmd_name)
        end_start_up()  # the command's modules are loaded: the collector back on (fleet.collector)
        if command is not None and not any(p.name == "debug" for p in command.params):
            command.params.append(debug_flag())  # every command takes --debug, before or after
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except FleetError as exc:
            log.debug("%s", type(exc).__name__, exc_info=exc)  # --debug: the cause chain
            from fleet.render.terminal.console import error_text  # only when there is one

            click.echo(error_text(exc), err=True)
            ctx.exit(exc.exit_code)


class StderrNow(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to sys.stderr as it is when a line is logged, not as it was when --debug was first
    given: fleet called twice in one process (the Python API, the tests) logs where it runs."""

    def emit(self, record: logging.LogRecord) -> None:
        # not setStream: it flushes the stream it replaces, which an earlier call may have
        # closed (click's test runner, a Python program's own redirect)
        self.stream = sys.stderr
        super().emit(record)


def enable_debug(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    """--debug: log fleet's steps and print each failed host's exception chain on stderr. Set on
    every call, on or off: a process that runs fleet again (the Python API, the tests) logs only
    where the call at hand asked for it."""
    if not value:
        if ctx.parent is None:  # the group's flag, read first: a command's may still turn it on
            log.setLevel(logging.WARNING)
        return
    if not log.handlers:
        handler = StderrNow(sys.stderr)
        handler.setFormatter(logging.Formatter("debug: %(name)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.DEBUG)


def debug_flag() -> click.Option:
    return click.Option(
        ["--debug"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        callback=enable_debug,
        help="Log what fleet does and print each failure's cause chain (asyncssh, OS errno).",
    )


@click.group(cls=FleetGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(api.__version__, prog_name="fleet")
def main() -> None:
    """Probe many GPU hosts over SSH at once and show where they differ."""


main.params.append(debug_flag())


def entry() -> None:
    """The `fleet` executable (and `python -m fleet`): main(), then the process ends without
    tearing down what it holds. Freeing a 20,000-host run object by object at exit costs more
    than a second of CPU for nothing; output is flushed first, and fleet registers no exit
    handlers. In-process callers (tests, CliRunner) use `main` and keep their interpreter."""
    try:
        main()
    except SystemExit as done:
        code = done.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)  # as the interpreter does with sys.exit("text")
            code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader that went away (`| head`), a closed stream
                code = code or 1
        os._exit(code or 0)
