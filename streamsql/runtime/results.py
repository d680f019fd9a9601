"""Writing result rows as CSV, JSON lines or a table, with Flink's value formatting."""

from __future__ import annotations

import csv
import datetime
import decimal
import json
import sys
from typing import IO, Any


def format_value(value: Any) -> str | None:
    """A value as Flink's SQL client prints it; None stays None (NULL)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime.datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
        micros = value.microsecond
        return text + (f".{micros // 1000:03d}" if micros % 1000 == 0 else f".{micros:06d}")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (bytes, bytearray)):
        return "x'" + bytes(value).hex() + "'"
    if isinstance(value, (list, tuple)):
        if hasattr(value, "asDict"):
            return "(" + ", ".join(_nested(v) for v in value) + ")"
        return "[" + ", ".join(_nested(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_nested(k)}={_nested(v)}" for k, v in value.items()) + "}"
    return str(value)


def _nested(value: Any) -> str:
    text = format_value(value)
    return "NULL" if text is None else text


# What Flink's SQL client says after a statement that returns no rows (CliStrings).
EXECUTED = "Execute statement succeeded."
SET_DONE = "Session property has been set."
RESET_DONE = "Session property has been reset."
RESET_ALL = "All session properties have been set to their default values."
SUBMITTING = "Submitting SQL update statement to the cluster..."
UPDATE_DONE = "Complete execution of the SQL update statement."


MAX_WIDTH_KEY = "sql-client.display.max-column-width"


def truncate(value: str | None, width: int | None) -> str | None:
    """A value cut to ``width`` characters, ending in '...' as Flink's client does."""
    if value is None or width is None or len(value) <= width:
        return value
    return value[: width - 3] + "..." if width > 3 else value[:width]


class ResultWriter:
    """Receives a result's column names, then rows in batches, then the end.

    With ``settings``, table output honours 'sql-client.display.max-column-width'."""

    def __init__(self, fmt: str = "table", out: IO[str] | None = None, settings=None):
        self.fmt = fmt
        self.out = out or sys.stdout
        self.settings = settings
        self.max_width: int | None = None
        self.columns: list[str] = []
        self.count = 0
        self._buffer: list[list[str | None]] = []

    def begin(self, columns: list[str]) -> None:
        width = self.settings.get(MAX_WIDTH_KEY) if self.settings is not None else None
        self.max_width = int(width) if width and width.strip().isdigit() and int(width) > 0 else None
        self.columns = columns
        self.count = 0
        self._buffer = []
        self._header_written = False

    def info(self, message: str) -> None:
        """A statement's outcome in words ([INFO] in the shell); scripts print results only."""

    def table(self, columns: list[str], rows: list) -> None:
        """A whole result at once (SHOW, DESCRIBE, SET)."""
        self.begin(columns)
        self.rows(rows)
        self.end()

    def text(self, name: str, lines: list[str]) -> None:
        """A text (EXPLAIN): as it is in table format, a one-column result ``name`` otherwise."""
        if self.fmt != "table":
            self.table([name], [(line,) for line in lines])
            return
        self.out.write("".join(f"{line}\n" for line in lines))
        self.out.flush()

    def _header(self) -> None:
        """Written with the first rows (or at the end), so begin() may be called again until then."""
        if self.fmt == "csv" and not self._header_written:
            csv.writer(self.out, lineterminator="\n").writerow(self.columns)
        self._header_written = True

    def rows(self, rows: list) -> None:
        self._header()
        formatted = [[format_value(v) for v in row] for row in rows]
        self.count += len(formatted)
        if self.fmt == "csv":
            writer = csv.writer(self.out, lineterminator="\n")
            writer.writerows([["" if v is None else v for v in row] for row in formatted])
        elif self.fmt == "json":
            for row in rows:
                self.out.write(json.dumps(dict(zip(self.columns, [_json(v) for v in row])), ensure_ascii=False) + "\n")
        else:
            self._buffer.extend([truncate(v, self.max_width) for v in row] for row in formatted)
        self.out.flush()

    def end(self) -> None:
        self._header()
        if self.fmt != "table":
            return
        from rich.console import Console

        console = Console(file=self.out, width=max(80, min(250, 20 * len(self.columns))))
        console.print(render_table(self.columns, self._buffer))
        console.print(f"{self.count} row{'s' if self.count != 1 else ''} in set", style="dim")


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


def _json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value
    return format_value(value)
