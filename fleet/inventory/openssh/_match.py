"""Which lines apply to a host, decided as OpenSSH 9 decides (readconf.c, match.c): Host patterns
and Match criteria. Pure.

- Host patterns are matched one by one (a comma is part of a pattern, not a separator),
  case-sensitively, `*` and `?` the only wildcards, a `!` pattern excluding;
- Match takes `all`, `host`, `originalhost`, `user`, `localuser` (comma lists of patterns,
  host names lower-cased), `canonical` and `final`; `final` asks for OpenSSH's second, final pass,
  in which Host lines are matched against the real hostname (`ConfigPass`).

`Match exec`: its command line, %-tokens expanded here as ssh expands them, goes to the pass's
`run_exec` (_exec.py runs it in the user's shell), only when the criteria before it held, as
OpenSSH does. Not evaluated: criteria newer than OpenSSH 9.2, and `exec` when fleet is told to run
no command: a block such a line decides is undecided, and a host it would set something for is
refused, naming the line (_reader.py). A command that cannot run refuses every host reaching it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pwd
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass

from fleet.inventory.openssh._lexer import ConfigSyntaxError, strdelim_words
from fleet.inventory.openssh._options import SshConfigValues, percent_expand

NOT_RUN = "fleet runs no command to choose a host's settings (--no-ssh-exec, or ssh_exec: false)"
# Match criteria of newer OpenSSH releases: fleet cannot evaluate them (nor can OpenSSH 9.2).
NEWER_CRITERIA = ("localnetwork", "tagged", "version", "sessiontype", "command")


@dataclass
class ConfigPass:
    """One pass over the config files for one host name."""

    host: str  # what Host lines match: the name as given; in the final pass, the real hostname
    original: str  # the name as given (Match originalhost, %n)
    final: bool
    local_user: str
    want_final: bool = False
    # runs a Match exec command line (place for messages): whether it exited 0, None when fleet
    # runs no command, or why it could not run (ssh would stop there)
    run_exec: Callable[[str, str], bool | str | None] | None = None


def match_pattern(text: str, pattern: str) -> bool:
    """OpenSSH's match_pattern: `*` and `?` wildcards, case-sensitive, nothing else special."""
    return _pattern_regex(pattern).fullmatch(text) is not None


@functools.lru_cache(maxsize=4096)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.DOTALL)


def match_pattern_list(text: str, patterns: str, lower: bool = False) -> int:
    """OpenSSH's match_pattern_list: 1 if a pattern of the comma list matches, -1 if a negated one
    does, 0 if none."""
    positive = 0
    for raw in patterns.split(","):
        negated = raw.startswith("!")
        pattern = raw[1:] if negated else raw
        if match_pattern(text, pattern.lower() if lower else pattern):
            if negated:
                return -1
            positive = 1
    return positive


def host_matches(words: list[str], place: str, state: ConfigPass) -> bool:
    """Whether a Host line's patterns take the host."""
    matched = False
    for word in words:
        if not word:
            raise ConfigSyntaxError(place, "keyword host empty argument")
        negated = word.startswith("!")
        if match_pattern(state.host, word[1:] if negated else word):
            if negated:
                return False
            matched = True
    return matched


def match_line(rest: str, place: str, options: SshConfigValues, state: ConfigPass) -> bool | str:
    """OpenSSH's match_cfg_line: every criterion must hold. A criterion fleet cannot evaluate
    (exec, newer ones) makes the block undecided: its reason, a refusal if the block sets a
    keyword fleet reads."""
    try:
        words = list(strdelim_words(rest))
    except ValueError as exc:
        raise ConfigSyntaxError(place, f"Match: {exc}") from exc
    subjects = _subjects(options, state)
    result: bool | str = True
    attributes, index = 0, 0
    while index < len(words) and not _ends(words[index]):
        word = words[index]
        index += 1
        negate = word.startswith("!")
        criterion = (word[1:] if negate else word).lower()
        if criterion == "all":
            _check_all(word, words[index:], attributes, place)
            return (not negate) if result is True else result
        attributes += 1
        if criterion in ("canonical", "final"):
            state.want_final = state.want_final or criterion == "final"
            result = False if state.final == negate else result
            continue
        if index >= len(words) or _ends(words[index]):
            raise ConfigSyntaxError(place, f"Missing Match criteria for {criterion}")
        found = _criterion(criterion, words[index], place, subjects, Exec(options, state, result))
        index += 1
        if isinstance(found, str):
            result = found if result is True else result
        elif found is not None and found == negate:
            result = False
    if attributes == 0:
        raise ConfigSyntaxError(place, "One or more attributes required for Match")
    return result


def _check_all(word: str, after: list[str], attributes: int, place: str) -> None:
    if attributes > 1 or (after and not _ends(after[0])):
        raise ConfigSyntaxError(place, f"'{word}' cannot be combined with other Match attributes")


def _ends(word: str) -> bool:
    """An empty word or a comment ends a Match line."""
    return not word or word.startswith("#")


def _subjects(options: SshConfigValues, state: ConfigPass) -> dict[str, str]:
    """What each pattern criterion is matched against, at this point of the pass."""
    return {
        "host": _match_host(options, state),
        "originalhost": state.original,
        "user": str(options.get("User") or state.local_user),
        "localuser": state.local_user,
    }


@dataclass(frozen=True)
class Exec:
    """What a `Match exec` needs: the options so far, the pass, and the result so far."""

    options: SshConfigValues
    state: ConfigPass
    result: bool | str


def _criterion(
    criterion: str, argument: str, place: str, subjects: dict[str, str], context: Exec
) -> bool | str | None:
    """Whether one criterion's patterns match (before negation); for a criterion fleet does not
    evaluate, why the block is undecided; None for an exec not run (a criterion before failed)."""
    if criterion == "exec":
        return _exec(argument, place, subjects["host"], context)
    if criterion in NEWER_CRITERIA:
        return f"{place}: Match {criterion} {argument!r} is not evaluated by fleet" + (
            " (a criterion newer than OpenSSH 9.2)"
        )
    subject = subjects.get(criterion)
    if subject is None:
        raise ConfigSyntaxError(place, f"Unsupported Match attribute {criterion}")
    lower = criterion in ("host", "originalhost")
    return match_pattern_list(subject.lower() if lower else subject, argument, lower) == 1


def _exec(argument: str, place: str, host: str, context: Exec) -> bool | str | None:
    """`Match exec`: ssh expands the tokens first (an unknown one stops it), then runs the
    command only when every criterion before it held. A command that cannot run refuses the host
    whatever the block sets (ssh stops there)."""
    command = percent_expand(argument, exec_tokens(host, context.options, context.state))
    if command is None:
        context.options.refusals.append(
            f"{place}: Match exec {argument!r} uses a %-token ssh does not expand there: "
            "ssh stops at it"
        )
        return None
    if context.result is not True:
        return None
    run = context.state.run_exec
    found = run(command, place) if run else None
    if found is None:
        return f"{place}: Match exec {command!r} is not run: {NOT_RUN}"
    if isinstance(found, str):
        context.options.refusals.append(found)
        return None
    return found


def exec_tokens(host: str, options: SshConfigValues, state: ConfigPass) -> dict[str, str]:
    """Match exec's %-tokens (ssh_config(5), TOKENS), with the values ssh has at that line."""
    account = pwd.getpwuid(os.getuid())
    local = socket.gethostname()
    port = str(options.get("Port") or 22)
    remote_user = str(options.get("User") or account.pw_name)
    digest = hashlib.sha1(f"{local}{host}{port}{remote_user}".encode()).hexdigest()
    return {
        "C": digest,
        "L": local.split(".", 1)[0],
        "d": account.pw_dir,
        "h": host,
        "k": str(options.get("HostKeyAlias") or host),
        "l": local,
        "n": state.original,
        "p": port,
        "r": remote_user,
        "u": account.pw_name,
        "i": str(os.getuid()),
    }


def _match_host(options: SshConfigValues, state: ConfigPass) -> str:
    if state.final:
        return state.host
    hostname = options.get("Hostname")
    if hostname is None:
        return state.host
    expanded = percent_expand(str(hostname), {"h": state.host})
    return expanded if expanded is not None else str(hostname)
