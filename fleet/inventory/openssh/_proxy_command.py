"""ProxyCommand, from ssh_config or an Ansible inventory, as the argv fleet runs (asyncssh starts it
with the SSH connection on its stdin and stdout, as ssh does).

OpenSSH hands the command to the user's shell (`$SHELL -c "exec COMMAND"`). fleet runs no shell:
it splits the command into words as a POSIX shell would (quotes, backslashes, a `#` comment,
`~/` at the start of a word) and runs those words as an argv. So a command that needs a shell to
mean what it says (a pipe, `;`, `&&`, a redirection, `$VAR`, `$(…)`, backquotes, a leading
`VAR=value`) is refused, naming what fleet would not do; write it as a script, or as
`sh -c '…'`, which is then your shell, run on purpose. Wildcards (`*`, `?`, `[…]`) stay as
written: a shell replaces them only when they name existing files. A leading `exec` is dropped
(OpenSSH adds its own).

The %-tokens are expanded per word, after splitting, with fleet's final values for the host: %h
the address (lower-case unless an IP address, as ssh), %p the port, %r the remote user, %n the
name as given, %k the same (fleet has no HostKeyAlias), %% a `%`. OpenSSH takes no other token in
ProxyCommand and neither does fleet. A value that is not plain (letters, digits, `._-@:%[]+`) is
refused rather than substituted: it could mean something to the command.
"""

from __future__ import annotations

import os
import re

OPERATORS = "|&;<>()"
ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
TOKENS = "hknpr%"
PLAIN_RE = re.compile(r"^[A-Za-z0-9_.@:%\[\]+][A-Za-z0-9_.@:%\[\]+-]*$")


class ProxyCommandError(ValueError):
    """A ProxyCommand fleet will not run; the message says why."""


def command_words(text: str) -> tuple[str, ...]:
    """The argv a POSIX shell would give `text` as one simple command, tokens left in."""
    words = _split(text)
    while words and words[0] == "exec":
        words = words[1:]
        if words and words[0].startswith("-"):
            raise ProxyCommandError(f"'exec {words[0]}' asks the shell for an option of exec")
    if words and ASSIGNMENT_RE.match(words[0]):
        raise ProxyCommandError(f"{words[0]!r} sets an environment variable, which needs a shell")
    if not words:
        raise ProxyCommandError("it is empty")
    for word in words:
        _check_tokens(word)
    return tuple(words)


def expand_words(words: tuple[str, ...], tokens: dict[str, str]) -> tuple[str, ...]:
    """`words` with %h %k %n %p %r %% replaced; each value must be plain."""
    for key, value in tokens.items():
        if not PLAIN_RE.match(value):
            raise ProxyCommandError(f"%{key} would be {value!r}, which fleet does not substitute")
    return tuple(re.sub(r"%(.)", lambda m: tokens.get(m[1], "%"), word) for word in words)


def _check_tokens(word: str) -> None:
    for match in re.finditer(r"%(.?)", word):
        if match[1] not in TOKENS or not match[1]:
            raise ProxyCommandError(
                f"%{match[1]} is not a ProxyCommand token (ssh takes %h %p %r %n %k %%)"
            )


def _split(text: str) -> list[str]:
    words: list[str] = []
    word: list[str] = []
    in_word = tilde = False  # tilde: the word began with an unquoted ~
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char in " \t\n":
            if in_word:
                words.append(_tilde("".join(word)) if tilde else "".join(word))
                word, in_word, tilde = [], False, False
            index += 1
            continue
        if char == "#" and not in_word:
            break
        if not in_word:
            in_word, tilde = True, char == "~"
        index = _piece(text, index, word)
    if in_word:
        words.append(_tilde("".join(word)) if tilde else "".join(word))
    return words


def _piece(text: str, index: int, word: list[str]) -> int:
    """Adds what the shell makes of the character at `index` (and of the quoted text or escape
    it starts) to `word`; the index after it."""
    char = text[index]
    if char == "\\":
        if index + 1 >= len(text):
            raise ProxyCommandError("it ends in a backslash")
        word.append(text[index + 1])
        return index + 2
    if char == "'":
        closing = text.find("'", index + 1)
        if closing < 0:
            raise ProxyCommandError("a single quote is not closed")
        word.append(text[index + 1 : closing])
        return closing + 1
    if char == '"':
        return _double_quoted(text, index + 1, word)
    if char in OPERATORS:
        raise ProxyCommandError(f"{char!r} is shell syntax (a pipe, list or redirection)")
    if char in "$`":
        raise ProxyCommandError(f"{char!r} asks the shell to expand something")
    word.append(char)
    return index + 1


def _double_quoted(text: str, index: int, word: list[str]) -> int:
    while index < len(text):
        char = text[index]
        if char == '"':
            return index + 1
        if char in "$`":
            raise ProxyCommandError(f"{char!r} inside double quotes asks the shell to expand it")
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\\n':
            word.append(text[index + 1])
            index += 2
            continue
        word.append(char)
        index += 1
    raise ProxyCommandError("a double quote is not closed")


def _tilde(word: str) -> str:
    head, slash, tail = word.partition("/")
    expanded = os.path.expanduser(head)
    return f"{expanded}{slash}{tail}" if expanded != head else word
