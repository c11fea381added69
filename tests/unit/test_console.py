"""fleet's consoles print text as it is: rich's `:name:` emoji codes are not read (a host called
`gpu:fire:01`, a path or an error holding `:smile:` would change under them)."""

from __future__ import annotations

import io

import pytest

from fleet.render.terminal.console import make_console
from fleet.render.terminal.wrap import say


def test_a_console_prints_colon_words_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    make_console().print("host [b]gpu:fire:01[/] said :smile: at /srv/:tada:/x")
    assert out.getvalue() == "host gpu:fire:01 said :smile: at /srv/:tada:/x\n"


def test_a_said_line_keeps_its_colon_words(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    say(make_console(), "[b]disk[/] :warning: full on gpu:fire:01", 4)
    assert out.getvalue() == "disk :warning: full on gpu:fire:01\n"
