"""Tables that fit the width they are printed at (80 columns in pipes and CI logs) without breaking
an id or a path: such columns are never wrapped, the other columns wrap between words only, and
when even that does not fit, the least important columns are left out and a note names them.
Titles are printed as their own line (a rich table title is padded to the table's width)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # an alias only for annotations: `str | Text` is not an expression on 3.9
    from typing import TypeAlias

    Cell: TypeAlias = str | Text


@dataclass(frozen=True)
class Column:
    header: str
    whole: bool = False  # an id or a path: never wrapped, never broken
    keep: int = 0  # higher is kept longer when the table does not fit; the first column is kept
    justify: str = "left"


# Each column costs its text plus one space of padding each side and one border.
COLUMN_OVERHEAD = 3


def cell_text(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def min_width(column: Column, cells: Sequence[Cell]) -> int:
    """The narrowest the column can be without breaking what must stay whole: the longest cell
    (whole columns) or the longest word."""
    texts = [column.header, *(cell_text(c) for c in cells)]
    if column.whole:
        return max(len(line) for text in texts for line in text.splitlines() or [""])
    return max((len(word) for text in texts for word in text.split()), default=1)


def columns_that_fit(
    columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int
) -> list[int]:
    """Indexes of the columns to show: all if they fit, else without the least kept ones."""
    widths = [
        min_width(c, [row[i] for row in rows]) + COLUMN_OVERHEAD for i, c in enumerate(columns)
    ]
    shown = list(range(len(columns)))
    by_keep = sorted(shown[1:], key=lambda i: (columns[i].keep, -i))
    dropped = []
    while sum(widths[i] for i in shown) + 1 > width and by_keep:
        dropped.append(by_keep.pop(0))
        shown.remove(dropped[-1])
    for index in reversed(dropped):  # a wide column may have made room for narrower ones
        if sum(widths[i] for i in shown) + widths[index] + 1 <= width:
            shown.append(index)
    return sorted(shown)


def fitted_table(
    columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int
) -> tuple[Table, list[str]]:
    """The table of the columns that fit `width`, and the headers of those left out."""
    shown = columns_that_fit(columns, rows, width)
    table = Table()
    for index in shown:
        column = columns[index]
        table.add_column(column.header, no_wrap=column.whole, justify=column.justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    return table, [c.header for i, c in enumerate(columns) if i not in shown]


def print_table(
    console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]]
) -> None:
    """Print `title`, then the table at the console's width, then which columns were left out."""
    table, left_out = fitted_table(columns, rows, console.width)
    if title:
        console.print(Text(title, style="bold"), soft_wrap=True)
    console.print(table)
    print_left_out(console, left_out)


def print_left_out(console: Console, left_out: Sequence[str]) -> None:
    if left_out:
        note = f"left out to fit {console.width} columns: {', '.join(left_out)} (set COLUMNS wider)"
        console.print(Text(note, style="dim"))
