"""Markdown read back the way GitHub renders it: a real CommonMark parser with GFM tables
(markdown-it-py)."""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt


def table_rows(markdown: str) -> list[list[str]]:
    """Each table row (header included) as the text of its cells, as GitHub would render them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    rows: list[list[str]] = []
    for token in tokens:
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows and _in_cell(tokens, token):
            rows[-1].append(_plain(token))
    return rows


def _in_cell(tokens: list[Any], token: Any) -> bool:
    before = tokens[tokens.index(token) - 1]
    return before.type in ("th_open", "td_open")


def _plain(inline: Any) -> str:
    return "".join(child.content for child in inline.children or [])
