"""A result table printed as rich prints its ``Table``, in time linear in the rows.

rich lays a table out by measuring every cell and renders it through its segment machinery
cell by cell: about 5 ms a row of 21 columns, so a 57,599-row result (Nexmark q23 over the
conformance data) took 5.5 minutes to print where computing it took 30 s. The layout rich
chooses depends only on each column's widest cell and its longest word (its measurement),
so rich lays out a table of those few cells, and the rows are then written line by line at
those widths: a cell that fits on one line is padded, a longer one of printable ASCII is
cut where rich's word wrap (``divide_line``) cuts it, any other (a line break, a tab, a
character that is not printable ASCII) is wrapped by rich's ``Text``, as its table wraps
it (``overflow="fold"``). The header and the box come from rich's own rendering of
the same layout, so styles, the box's characters and the console's width are rich's.
"""

from __future__ import annotations

import re

_STYLES = re.compile(r"\x1b\[[0-9;]*m")  # a terminal's style codes


def render_table(columns: list[str], rows: list[list[str | None]]):
    """A rich Table of formatted values; cells are plain text (a '[' in data is not markup)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(header_style="bold")
    for name in columns:
        table.add_column(Text(name), overflow="fold")
    for row in rows:
        table.add_row(*[Text("NULL" if v is None else v) for v in row])
    return table


def print_table(console, columns: list[str], rows: list[list[str | None]]) -> None:
    """``console.print(render_table(columns, rows))``, the same text, written row by row."""
    cells = [["NULL" if v is None else v for v in row] for row in rows]
    if not columns:
        console.print(render_table(columns, cells))
        return
    layout = _rendered(console, render_table(columns, _widest(columns, cells)))
    plain = [_plain(line) for line in layout]
    header_end = next((i for i in range(1, len(plain)) if _is_rule(plain[i])), None)
    if header_end is None or not _known_layout(plain, header_end):
        console.print(render_table(columns, cells))  # a layout this does not know: rich's own
        return
    widths = _widths(plain[0])
    body, bottom = plain[header_end + 1], plain[-1]
    left, middle, right = body[0], body[widths[0] + 1], body[-1]
    write = console.file.write
    for line in layout[:header_end + 1]:
        write(line + "\n")
    fit = _fitter(console)
    inner = [w - 2 for w in widths]
    blanks = [" " * width for width in inner]
    joint, start, end = f" {middle} ", left + " ", " " + right + "\n"
    lines: list[str] = []
    for row in cells:
        parts = [fit(value, width) for value, width in zip(row, inner)]
        height = max(map(len, parts))
        if height == 1:
            lines.append(start + joint.join([p[0] for p in parts]) + end)
        else:
            for k in range(height):
                lines.append(start + joint.join([p[k] if k < len(p) else blank for p, blank in zip(parts, blanks)]) + end)
        if len(lines) >= 4096:
            write("".join(lines))
            lines = []
    write("".join(lines))
    write(bottom + "\n")
    console.file.flush()


def _widest(columns: list[str], cells: list[list[str]]) -> list[list[str]]:
    """Rows holding, for each column, its widest value and the value with its longest word:
    rich measures a column by those two alone."""
    from rich.cells import cell_len

    def size(value: str) -> int:
        return len(value) if value.isascii() else cell_len(value)

    def longest_line(value: str) -> int:
        if value.isascii() and value.isprintable():
            return len(value)
        return max((size(line) for line in value.splitlines()), default=0)

    def longest_word(value: str) -> int:
        if value.isascii() and value.isprintable() and " " not in value:
            return len(value)
        return max((size(word) for word in value.split()), default=0)

    chosen: list[list[str]] = [[], []]
    for i in range(len(columns)):
        column = [row[i] for row in cells]
        if not column:
            return []
        chosen[0].append(max(column, key=longest_line))
        chosen[1].append(max(column, key=longest_word))
    return chosen


def _rendered(console, table) -> list[str]:
    """``table`` as the console would print it, its lines (styles kept)."""
    with console.capture() as capture:
        console.print(table)
    return capture.get().splitlines()


def _plain(line: str) -> str:
    return _STYLES.sub("", line)


def _is_rule(line: str) -> bool:
    return not any(c.isalnum() for c in line) and " " not in line


def _widths(border: str) -> list[int]:
    """The columns' widths (padding included) from a border line such as ``┏━━┳━━━┓``."""
    inner = border[1:-1]
    joint = next((c for c in inner if c != inner[0]), None)
    return [len(part) for part in (inner.split(joint) if joint else [inner])]


def _known_layout(plain: list[str], header_end: int) -> bool:
    """Whether the layout is the one this writes: a top border, the header, a rule at
    ``header_end``, a row's lines and a bottom border, all as wide as the top."""
    return (len(plain) >= header_end + 3 and _is_rule(plain[-1])
            and all(len(line) == len(plain[0]) for line in plain))


def _fitter(console):
    """``fit(value, width)``: a cell's lines, each ``width`` wide, as rich's table wraps it."""
    from rich._wrap import divide_line  # rich's word wrap, without its Text and Segments
    from rich.cells import cell_len
    from rich.text import Text

    tab_size = console.tab_size or 8

    def fit(value: str, width: int) -> list[str]:
        if value.isascii() and value.isprintable():
            if len(value) <= width:
                return [value + " " * (width - len(value))]
            if " " not in value:  # one word: folded every ``width`` characters
                return [value[i:i + width].ljust(width) for i in range(0, len(value), width)]
            bounds = [0, *divide_line(value, width, fold=True), len(value)]
            return [value[a:b][:width].ljust(width) for a, b in zip(bounds, bounds[1:])]
        lines = Text(value).wrap(console, width, justify="left", overflow="fold", tab_size=tab_size, no_wrap=False)
        return [line.plain + " " * (width - cell_len(line.plain)) for line in lines]

    return fit
