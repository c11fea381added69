"""Sentences of a finding's fix, and the fix shortened to a line's room, for the terminal and
Markdown alike (the JSON and the page keep the whole fix; issue 46).

Where a sentence ends is a rule, not a regular expression's accident: at `.`, `!` or `?` followed
by a space and a word that does not start in lower case, unless the dot is inside backticks (a
command, `…/cu128`), ends an abbreviation (`e.g.`, `i.e.`, `vs.`, `cf.`; `etc.` only before a
capital) or sits inside a word (a version `2.28.3`, a path `/etc/nccl.conf`: no space follows).

A fix that does not fit is shortened so that what to do stays: its first sentence when it holds
no command, else the command's sentence (after the first one where both fit), the command's URLs
cut to their last part (`…/cu128`) and the words before the command cut where room runs out.
"""

from __future__ import annotations

import re
from functools import lru_cache

# lower case: a dot after one of these ends no sentence (`etc.` does before a capital)
ABBREVIATIONS = frozenset({"e.g.", "i.e.", "vs.", "cf.", "etc.", "approx.", "incl.", "resp."})
ENDS = ".!?"
URL = re.compile(r"\b[a-z][a-z+.-]*://\S*/(?=[^/\s`]+)")
SKIPPED = " … "


def sentences(text: str) -> list[str]:
    """`text` (its white space folded) cut into sentences, each with its end mark."""
    return list(_sentences(text))


@lru_cache(maxsize=64)
def _sentences(text: str) -> tuple[str, ...]:
    """sentences(), kept for the texts seen last: a fix too long for its line is cut again and
    again at shorter lengths (the terminal's findings), and a fix naming 1,000 hosts is long."""
    text = " ".join(text.split())
    found: list[str] = []
    start = 0
    for index in _ends(text):
        found.append(text[start : index + 1])
        start = index + 2
    if start < len(text):
        found.append(text[start:])
    return tuple(found)


def _ends(text: str) -> list[int]:
    ends = []
    quoted = False
    for index, char in enumerate(text):
        if char == "`":
            quoted = not quoted
        elif char in ENDS and not quoted and _ends_here(text, index):
            ends.append(index)
    return ends


def _ends_here(text: str, index: int) -> bool:
    """Whether the mark at `index` (outside backticks) ends a sentence."""
    if index + 2 > len(text) or text[index + 1] != " ":
        return False  # inside a word (2.28.3, nccl.conf), or the text's own end
    following = text[index + 2]
    if following.islower():
        return False
    word = text[: index + 1].rsplit(" ", 1)[-1].lstrip("(\"'[").lower()
    if word == "etc.":
        return following.isupper()
    return word not in ABBREVIATIONS


def first_sentence(text: str, most: int) -> str:
    """The first sentence of `text`, cut at a word to `most` characters (`…` says so)."""
    return cut_words(sentences(text)[0] if text.strip() else "", most)


def fix_line(text: str, most: int) -> str:
    """A fix in at most `most` characters: whole when it fits; else its first sentence, or
    where it names a command (in backticks) the sentence with the command, after the first
    sentence where both fit: the command is what a reader acts on."""
    said = _sentences(text)
    whole = " ".join(said)
    if len(whole) <= most or not said:
        return whole
    command = next((s for s in said if "`" in s), None)
    if command is None:
        return cut_words(said[0], most)
    if command is not said[0] and len(said[0]) + len(SKIPPED) + len(command) <= most:
        return said[0] + SKIPPED + command
    return _keeping_command(command, most)


def _keeping_command(sentence: str, most: int) -> str:
    """`sentence` in `most` characters, its first command kept whole: its URLs shortened to
    their last part, then the words before the command cut."""
    if len(sentence) <= most:
        return sentence
    sentence = URL.sub("…/", sentence)
    if len(sentence) <= most:
        return sentence
    before, tick, rest = sentence.partition("`")
    code, _, after = rest.partition("`")
    command = f"{tick}{code}`"
    after = after if len(command) + len(after) + 2 <= most else ""
    room = most - len(command) - len(after) - 2
    lead = cut_words(before.rstrip(), room) if room >= 8 else "…"
    return f"{lead} {command}{after}".strip()


def cut_words(text: str, most: int) -> str:
    """`text` cut at a word (never inside backticks) to `most` characters, `…` at the cut."""
    if len(text) <= most:
        return text
    head = text[: max(most - 2, 1)]
    if head.count("`") % 2:  # a cut inside a command: before the command
        head = head[: head.rfind("`")]
    cut = head.rsplit(" ", 1)[0] if " " in head.strip() else head
    return cut.rstrip(" ,;:") + " …"
