"""Lines that wrap between words with a hanging indent, at the width they are printed at (rich
wraps a Text at its start column only). A word longer than the line (a fact's JMESPath, an import
spec) is never broken: it stands alone on its line, whole, and the text goes on under it. Print
with crop=False so such a line is not cut at the edge. Words joined by KEEP (a no-break space:
`keep("2× H200")`) stay on one line; they print with plain spaces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

KEEP = "\u00a0"


def width_of(text: str) -> int:
    """The cells `text` takes, as rich's cell_len counts them: printable ASCII is a cell a
    character, found in C (rich matches a long text against its table of widths each time: a fix
    naming 1,000 hosts, cut and measured again and again, spent 0.2 s of a 20,000-host drift)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


def keep(text: str) -> str:
    """`text` as one word: never broken between lines."""
    return text.replace(" ", KEEP)


def keep_all(text: str, phrases: Iterable[str]) -> str:
    """`text` with each of `phrases` kept whole (longest first: one may hold another)."""
    for phrase in sorted(set(phrases), key=len, reverse=True):
        if " " in phrase:
            text = text.replace(phrase, keep(phrase))
    return text


@dataclass
class Hanging:
    """`head` (kept whole on the first line), then `body` wrapped between its words, every line
    after the first indented by `indent` columns."""

    head: Text
    body: Text
    indent: int = 6

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from hanging_lines(self.head, self.body, self.indent, options.max_width)


def hanging_lines(head: Text, body: Text, indent: int, width: int) -> Iterator[Text]:
    words = [w for w in body.split(" ", allow_blank=False) if w.plain]
    line = head.copy()
    alone = width_of(line.plain) >= width  # a head as wide as the line: the body goes under it
    for word in words:
        gap = 1 if line.plain and not line.plain.endswith(" ") else 0
        fits = width_of(line.plain) + gap + width_of(word.plain) <= width
        if fits and not alone:
            line.append(" " * gap)
            line.append_text(word)
            continue
        if line.plain.strip():
            yield _whole(line)
        line = Text(" " * indent)
        line.append_text(word)
        alone = False
    if line.plain.strip():
        yield _whole(line)


def line_count(head: str, body: str, indent: int, width: int, most: int | None = None) -> int:
    """How many lines hanging_lines makes of the plain texts `head` and `body`: the same walk
    on strings, without a Text per word and line (a finding's fix is fitted by trying shorter
    and shorter cuts of a text that may name 1,000 hosts). `most`: a count past it is returned
    as soon as it is reached (the cut does not fit: the rest of the text is not walked)."""
    line = head
    alone = width_of(line) >= width
    count = 0
    for word in body.split(" "):
        if not word:
            continue
        gap = 1 if line and not line.endswith(" ") else 0
        if width_of(line) + gap + width_of(word) <= width and not alone:
            line = f"{line}{' ' * gap}{word}"
            continue
        if line.strip():
            count += 1
            if most is not None and count > most:
                return count
        line = " " * indent + word
        alone = False
    return count + 1 if line.strip() else count


def _whole(line: Text) -> Text:
    line.rstrip()
    plain = Text(line.plain.replace(KEEP, " "), style=line.style, end="\n", no_wrap=True)
    plain.overflow = "ignore"
    plain.spans = list(line.spans)
    return plain


def say(console: Console, markup: str, indent: int) -> None:
    """A line of markup wrapped between words, continuation lines indented by `indent`: a fix,
    a reason or a path never runs on at column 0, and a word is never broken."""
    text = Text.from_markup(markup, emoji=False)
    lead = len(text.plain) - len(text.plain.lstrip(" "))
    console.print(Hanging(text[:lead], text[lead:], indent), crop=False)
