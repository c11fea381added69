"""asyncssh's ssh_config parser, extended to record where each value came from and which keywords
fleet ignores applied (fleet/inventory/ssh_config.py applies the result). Imported only when a
config file is read: asyncssh costs ~100 ms of start-up."""

from __future__ import annotations

import getpass
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

from asyncssh.config import ConfigParseError, SSHClientConfig

from fleet.errors import InventoryError

# Keywords fleet does not apply, and why: each one that applies to a host is a warning naming its
# line (fleet/inventory/ssh_config.py shows them; `fleet hosts`).
IGNORED = {
    "StrictHostKeyChecking": "fleet checks host keys strictly whatever this says "
    "(--accept-new records unknown keys, never changed ones)",
    "ControlMaster": "fleet opens its own connections (one per host, one per jump host)",
    "ControlPersist": "fleet opens its own connections (one per host, one per jump host)",
    "ProxyCommand": "fleet does not run proxy commands: write ProxyJump [user@]host[:port] instead",
}
LINE_RE = re.compile(r"^(?P<path>.*) line (?P<line>\d+): (?P<reason>.*)$")


def parse_for(paths: Sequence[Path], name: str) -> TracedConfig:
    """What the config files say for `ssh name`; a bad line is an error naming it."""
    try:
        parsed = TracedConfig.load(
            None, list(paths), False, False, False, getpass.getuser(), (), name, ()
        )
    except ConfigParseError as exc:
        raise config_error(str(exc)) from exc
    except OSError as exc:
        raise InventoryError(
            f"cannot read ssh config {exc.filename}: {exc.strerror}",
            hint="fix the file or its Include, or pass --ssh-config none",
        ) from exc
    return cast(TracedConfig, parsed)


def config_error(text: str) -> InventoryError:
    """asyncssh's 'PATH line N: reason' as fleet's 'PATH:N: reason'."""
    match = LINE_RE.match(text)
    where = f"{match['path']}:{match['line']}: {match['reason']}" if match else text
    return InventoryError(
        f"ssh config {where}", hint="fix that line (man ssh_config), or pass --ssh-config none"
    )


def _traced(handler: Callable[..., None]) -> Callable[..., None]:
    """asyncssh's handler for one keyword, remembering the file:line that set the value."""

    def call(config: TracedConfig, option: str, args: list[str]) -> None:
        was_set = option in config._options
        handler(config, option, args)
        if not was_set and option in config._options:
            config.places[option] = config.place()

    return call


def _ignored(config: TracedConfig, option: str, args: list[str]) -> None:
    config.ignored.append((config.place(), option, " ".join(args), IGNORED[option]))
    args.clear()


class TracedConfig(SSHClientConfig):
    """asyncssh's client config parser, which also records where each value came from and which
    ignored keywords applied to the host."""

    _handlers = {  # noqa: RUF012 (asyncssh's own table, extended; never mutated)
        **{
            key: (option, handler if option in ("Host", "Match", "Include") else _traced(handler))
            for key, (option, handler) in SSHClientConfig._handlers.items()
        },
        **{option.lower(): (option, _ignored) for option in IGNORED},
    }

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.places: dict[str, str] = {}
        self.ignored: list[tuple[str, str, str, str]] = []  # place, keyword, value, why

    def place(self) -> str:
        return f"{self._path}:{self._line_no}"
