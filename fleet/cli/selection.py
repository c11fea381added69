"""The options that say which hosts a command reaches, shared by every command that takes -i:
-H NODESET (with --user, --port, --python, --jump, --identity, --known-hosts), --ssh-config,
--no-ssh-exec, --inventory-format; and
HostChoice, which hands them to api.select_hosts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from fleet import api
from fleet.api.hosts import INVENTORY_FORMATS, AdhocSettings, slurm_argv
from fleet.models import Host
from fleet.render.terminal.console import stderr_text

SELECTION_OPTIONS = (
    click.option(
        "-H",
        "--hosts",
        "nodeset",
        metavar="NODESET",
        help="Hosts by name instead of -i, e.g. 'gpu-[01-08],login1' (as pdsh -w / clush -w).",
    ),
    click.option("--user", help="With -H: the SSH user (default: ~/.ssh/config, then yours)."),
    click.option("--port", type=click.IntRange(1, 65535), help="With -H: the SSH port."),
    click.option(
        "--python", help="With -H or --slurm: the interpreter on the hosts (default python3)."
    ),
    click.option("--jump", metavar="[USER@]HOST[:PORT]", help="With -H: a jump host."),
    click.option(
        "--identity",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="With -H: the private key to offer (as ssh -i; the agent's keys are offered too).",
    ),
    click.option(
        "--known-hosts",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="With -H: the known_hosts file to trust (default ~/.ssh/known_hosts).",
    ),
    click.option(
        "--ssh-config",
        metavar="PATH|none",
        type=click.Path(dir_okay=False),  # completes file names
        help="ssh_config to honour (default: ~/.ssh/config if present); inventory values win.",
    ),
    click.option(
        "--no-ssh-exec",
        is_flag=True,
        help="Run no ssh_config `Match exec` command: refuse the hosts whose settings depend on one.",
    ),
    click.option(
        "--inventory-format",
        type=click.Choice(INVENTORY_FORMATS),
        default="auto",
        show_default=True,
        help="What -i is: fleet YAML or an Ansible inventory (auto: by its content).",
    ),
)
NAMES = (
    "nodeset",
    "user",
    "port",
    "python",
    "jump",
    "identity",
    "known_hosts",
    "ssh_config",
    "no_ssh_exec",
    "inventory_format",
)


@dataclass(frozen=True)
class HostChoice:
    nodeset: str | None = None
    user: str | None = None
    port: int | None = None
    python: str | None = None
    jump: str | None = None
    identity: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    no_ssh_exec: bool = False
    inventory_format: str = "auto"

    @classmethod
    def pop_from(cls, kwargs: dict[str, Any]) -> HostChoice:
        return cls(**{name: kwargs.pop(name) for name in NAMES if name in kwargs})

    def select(
        self,
        inventory_path: str | None,
        limit: str | None,
        require_files: bool = True,
        slurm: str | None = None,
    ) -> api.Selection:
        """api.select_hosts with these options; its warnings go to stderr, one line each."""
        selection = api.select_hosts(
            inventory_path,
            limit,
            hosts=self.nodeset,
            slurm=slurm,
            ssh_config=self.ssh_config,
            inventory_format=self.inventory_format,
            adhoc=AdhocSettings(
                self.user, self.port, self.python, self.jump, self.identity, self.known_hosts
            ),
            require_files=require_files,
            ssh_exec=not self.no_ssh_exec,
        )
        for warning in selection.warnings:
            click.echo(stderr_text(f"warning: {warning}"), err=True)
        return selection


def srun_options(text: str | None) -> tuple[str, ...]:
    """--slurm-args' text as srun options (shell quoting); UsageError when it cannot be split."""
    return tuple(slurm_argv(text))


def selection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(SELECTION_OPTIONS):
        command = option(command)
    return command


SHOWN = (
    "address",
    "port",
    "user",
    "identity_file",
    "known_hosts",
    "jump",
    "python",
    "connect_timeout",
    "transport",
)


def origin_summary(host: Host) -> str:
    """Where the host's settings came from, grouped: `address,port: ssh_config cfg:3; user: cli`
    (settings not listed are fleet's defaults)."""
    by_origin: dict[str, list[str]] = {}
    for setting in SHOWN:
        by_origin.setdefault(host.origin(setting), []).append(setting)
    by_origin.pop("default", None)  # not listed: fleet's default
    parts = [f"{','.join(settings)}: {origin}" for origin, settings in by_origin.items()]
    return "; ".join(parts) or "defaults"
