"""A finding's text fitted to its lines on plain text (issue 49: a fix naming thousands of hosts is
cut and tried again and again): wrap.line_count counts the lines hanging_lines makes, and the
plain text of lead, text and tail read apart is the one read whole."""

from __future__ import annotations

import random

from rich.cells import cell_len
from rich.markup import escape
from rich.text import Text

from fleet.render.terminal import findings
from fleet.render.terminal.wrap import hanging_lines, line_count, width_of

PIECES = ["a", "bc", " ", "  ", "gpu-[0001,0002]", "é", "中", "\u00a0", "x" * 50, "`", "."]


def test_line_count_is_what_hanging_lines_makes() -> None:
    rng = random.Random(49)
    for _ in range(3000):
        body = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        text = Text(" " * rng.randint(0, 6) + body)
        start = len(text.plain) - len(text.plain.lstrip(" "))
        width = rng.randint(10, 120)
        made = list(hanging_lines(text[:start], text[start:], 6, width))
        assert line_count(text.plain[:start], text.plain[start:], 6, width) == len(made)


def test_a_count_past_the_most_asked_stops_the_walk_there() -> None:
    """`most`: a cut that does not fit is known by its first lines (a fix naming 20,000 hosts is
    tried hundreds of times); a count within it is the whole count."""
    rng = random.Random(49)
    for _ in range(2000):
        body = " ".join(rng.choice(PIECES) for _ in range(rng.randint(0, 60)))
        width, most = rng.randint(10, 80), rng.randint(0, 4)
        whole = line_count("", body, 6, width)
        early = line_count("", body, 6, width, most)
        assert early == whole if whole <= most else most < early <= whole
    long = " ".join(f"gpu-{n:05d}" for n in range(20000))
    assert line_count("", long, 6, 80, 2) == 3


def test_a_word_wider_than_the_line_stands_alone() -> None:
    assert line_count("", "to " + "x" * 30 + " go", 6, 20) == 3
    assert line_count("", "", 6, 20) == 0


def test_the_plain_text_read_in_parts_is_the_text_read_whole() -> None:
    rng = random.Random(49)
    pieces = ["a", " ", ":", "smile", ":smile:", "[", "]", "\\", "[bold]", "x:y", "→", "é", "\r"]
    pieces += ["\x07", ":thumbs_up:", ":-)", "gpu-[01-04]", "\t", ":x :"]
    leads = ["✗ [bold]h[01-02][/] where: ", "    [cyan]→ fix-config[/]: ", "[dim]·[/] x:"]
    for _ in range(6000):
        shown = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        lead, tail = rng.choice(leads), rng.choice(["", " [dim](+2 related)[/]", ":tail"])
        whole = Text.from_markup(f"{lead}{escape(shown)}{tail}", emoji=False).plain
        assert findings._plain(lead, shown, tail) == whole


def test_a_width_is_what_rich_counts() -> None:
    """Printable ASCII in C, anything else (controls, wide, combining, joined) as rich counts it."""
    rng = random.Random(4)
    alphabet = [chr(c) for c in range(0, 128)] + [
        "é",
        "中",
        "\u00a0",
        "\u200d",
        "\ufe0f",
        "👍",
        "\u0301",
    ]
    texts = ["", " ", "gpu-00001", ",".join(f"gpu-{n:05d}" for n in range(2000))]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 700))) for _ in range(500)]
    texts += [
        "".join(rng.choice(alphabet[32:127]) for _ in range(rng.randint(0, 700)))
        for _ in range(200)
    ]
    for text in texts:
        assert width_of(text) == cell_len(text), repr(text[:40])
