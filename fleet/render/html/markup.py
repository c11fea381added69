"""Small HTML building blocks for the report. Everything that came from a run goes through `esc`:
host names, values, errors and hints are untrusted text."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

from fleet.hostsets import compact_hosts
from fleet.models import NOT_REACHED, PROBE_TROUBLE

MAX_CELL_CHARS = 4000  # one value opened in a cell; a dir() dump can be 100 kB


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def esc_text(value: object) -> str:
    """For element text only (never attributes): quotes stay as they are, so raw JSON in a <pre>
    is not inflated by a `&quot;` per quote."""
    return escape(str(value), quote=False)


def clip(text: str, limit: int = MAX_CELL_CHARS) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text):,} characters)"


def status_class(status: str) -> str:
    """bad: not reached; warn: probe trouble; ok; other (interrupted)."""
    if status in NOT_REACHED:
        return "bad"
    if status in PROBE_TROUBLE or status in ("failed", "timeout", "fail", "unknown", "skipped"):
        return "warn"
    return "ok" if status in ("ok", "pass", "absent", "n/a") else "other"


def chip(status: str, text: str | None = None) -> str:
    return f'<span class="chip {status_class(status)}">{esc(text or status)}</span>'


def hosts_label(hosts: Iterable[str]) -> str:
    hosts = list(hosts)
    names = compact_hosts(hosts)
    return f"{esc(names)} <span class=dim>({len(hosts)})</span>" if len(hosts) > 1 else esc(names)


def table(headers: Sequence[str], rows: Iterable[str], css: str = "sortable") -> str:
    """A table whose rows are already `<tr>…</tr>` markup; headers are plain text."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return (
        f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def row(cells: Sequence[str], key: str | None = None) -> str:
    """A `<tr>` of markup cells; `key` (host names) is what the page's filter box matches."""
    attribute = f' data-key="{esc(key)}"' if key is not None else ""
    return f"<tr{attribute}>{''.join(f'<td>{c}</td>' for c in cells)}</tr>"


def section(anchor: str, title: str, body: str, intro: str = "") -> str:
    lead = f'<p class="intro">{intro}</p>' if intro else ""
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{lead}{body}</section>'


def folded(summary: str, body: str, key: str | None = None, is_open: bool = False) -> str:
    attribute = f' data-key="{esc(key)}"' if key is not None else ""
    return f"<details{attribute}{' open' if is_open else ''}><summary>{summary}</summary>{body}</details>"
