"""`OpenSsh`, the package's one entry point: the ssh_config files fleet honours (read as OpenSSH
reads them, _reader.py), applied to fleet's hosts (_apply.py), and ssh command lines read as ssh
reads them (_argv.py, for Ansible's ssh arguments)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fleet.errors import InventoryError
from fleet.inventory.openssh._apply import IGNORED, apply_ssh_config, expand_proxy
from fleet.inventory.openssh._argv import CommandLine, command_line_settings
from fleet.inventory.openssh._exec import MatchExec
from fleet.inventory.openssh._lexer import ConfigSyntaxError
from fleet.inventory.openssh._options import SshConfigValues
from fleet.inventory.openssh._reader import ConfigReader
from fleet.models import Host

DEFAULT_SSH_CONFIG = "~/.ssh/config"
Given = tuple[tuple[str, object], ...]  # User / Port the inventory set, as ssh's -l / -p
HINT = "fix that line (man ssh_config), or pass --ssh-config none"


@dataclass
class OpenSsh:
    """One or more ssh_config files (none: only ProxyCommand's tokens are filled in);
    `apply(host)` gives the host as `ssh NAME` would reach it, or refused naming the line.
    `run_exec`: run `Match exec` commands (each distinct one once), else refuse the hosts whose
    settings depend on one."""

    paths: tuple[Path, ...] = ()
    run_exec: bool = True
    warnings: list[str] = field(default_factory=list)  # one line per ignored keyword's place
    _cache: dict[tuple[str, Given], SshConfigValues] = field(default_factory=dict, repr=False)
    _reader: ConfigReader | None = field(default=None, repr=False)
    _exec: MatchExec = field(default_factory=MatchExec, repr=False)

    def __post_init__(self) -> None:
        self._exec.enabled = self.run_exec

    @classmethod
    def open(cls, choice: str | None, run_exec: bool = True) -> OpenSsh | None:
        """--ssh-config: a PATH, `none`, or unset (the user's ~/.ssh/config when it exists);
        `run_exec` False: --no-ssh-exec."""
        if choice is not None and choice.lower() == "none":
            return None
        path = Path(os.path.expanduser(choice or DEFAULT_SSH_CONFIG))
        if not path.is_file():
            if choice is None:
                return None
            raise InventoryError(
                f"ssh config {choice} does not exist",
                hint="pass an existing file with --ssh-config, or --ssh-config none",
            )
        return cls((path,), run_exec=run_exec)

    def apply(self, host: Host, name: str | None = None) -> Host:
        """`host` with the config's values for `name` (default: the name ssh is given for it)
        where it has defaults, then its ProxyCommand's %-tokens filled in."""
        if self.paths:
            host = apply_ssh_config(host, self._lookup, name)
        return expand_proxy(host)

    @staticmethod
    def command_line(
        segments: Sequence[tuple[Sequence[str], str]], destination: str
    ) -> CommandLine:
        """What ssh's command-line options (words, each with the place it was written) set for
        `destination`: fleet's settings with their places, or why fleet refuses the host."""
        return command_line_settings(segments, destination)

    def _lookup(self, name: str, given: Given = ()) -> SshConfigValues:
        key = (name, given)
        if key not in self._cache:
            self._reader = self._reader or ConfigReader(self.paths, run_exec=self._exec)
            try:
                self._cache[key] = self._reader.resolve(name, given)
            except ConfigSyntaxError as exc:
                raise InventoryError(f"ssh config {exc.place}: {exc.reason}", hint=HINT) from exc
            except OSError as exc:
                raise InventoryError(
                    f"cannot read ssh config {exc.filename}: {exc.strerror}",
                    hint="fix the file or its Include, or pass --ssh-config none",
                ) from exc
            self._note_ignored(self._cache[key])
            self.warnings += [w for w in self._exec.warnings if w not in self.warnings]
        return self._cache[key]

    def _note_ignored(self, parsed: SshConfigValues) -> None:
        for place, option, value in parsed.applied:
            line = f"{place}: {option} {value} is ignored: {IGNORED[option]}"
            if line not in self.warnings:
                self.warnings.append(line)
