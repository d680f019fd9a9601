"""A result as it arrives in the shell: Flink's table, changelog and tableau result modes.

Table mode keeps the newest rows that fit the screen visible, under a status line (rows,
changes, rows/s, last refresh), and prints the whole table when the result ends.
Changelog and tableau modes print a header, then one line per row. Nothing is drawn
before the first row, so an error never follows an empty table box.
"""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from streamsql.runtime.results import ResultWriter, format_value, render_table, truncate

class LiveResult(ResultWriter):
    """Shows a result as it arrives: an updating table, a changelog, or tableau rows."""

    handles_row_kinds = True  # it prints the op column itself in changelog mode

    def __init__(self, console: Console, mode: str, settings=None, clock=time.monotonic):
        super().__init__("table", console.file, settings)
        self.console = console
        self.mode = mode
        self.clock = clock
        self._live: Live | None = None
        self._started = self._refreshed = clock()
        self.changes = 0

    def info(self, message: str) -> None:
        self.close()
        self.console.print(f"[INFO] {message}", style="bold blue", markup=False, highlight=False)

    def table(self, columns: list[str], rows: list) -> None:
        """A whole result (SHOW, DESCRIBE, SET): a table in every result mode, as Flink's client."""
        self.close()
        self.begin(columns)
        formatted = [[truncate(format_value(v), self.max_width) for v in row] for row in rows]
        if formatted:
            self.console.print(render_table(columns, formatted))
        self.count = len(formatted)
        self._summary()

    def text(self, name: str, lines: list[str]) -> None:
        """EXPLAIN's plan: plain text, its indentation kept."""
        self.close()
        for line in lines:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def begin(self, columns: list[str]) -> None:
        super().begin(columns)
        self.changes = 0
        self._started = self.clock()

    def rows(self, rows: list) -> None:
        formatted = [[truncate(format_value(v), self.max_width) for v in row] for row in rows]
        self.changes += len(formatted)
        self._refreshed = self.clock()
        if self.mode == "table":
            self._apply(formatted)
            self._show()
            return
        if not self._header_written:
            self._print_header()
        self.count += len(formatted)
        prefix = self._prefix
        for row in formatted:
            cells = ["NULL" if v is None else v for v in row]
            self.console.print(" | ".join(prefix + cells), markup=False, highlight=False)

    def end(self) -> None:
        if self.mode == "table":
            self._stop_live()
            if self._buffer:
                self.console.print(render_table(self._visible_columns, self._buffer))
        self._summary()

    def _summary(self) -> None:
        if self.count == 0:
            self.console.print("Empty set", style="dim")
        else:
            self.console.print(f"{self.count} row{'s' if self.count != 1 else ''} in set", style="dim")

    def close(self) -> None:
        """The result stops early (cancelled, failed): leave the newest rows on screen."""
        if self._live is not None:
            self._stop_live()
            if self._buffer:
                self.console.print(self._view())

    # -- table mode --------------------------------------------------------------------

    def _apply(self, formatted: list[list[str | None]]) -> None:
        if self._has_kinds:  # a changelog: apply it to the table
            for kind, *values in formatted:
                if kind in ("+I", "+U"):
                    self._buffer.append(values)
                elif values in self._buffer:  # -U / -D take their row back
                    self._buffer.remove(values)
        else:
            self._buffer.extend(formatted)
        self.count = len(self._buffer)

    def _show(self) -> None:
        if self._live is None:
            self._live = Live(self._view(), console=self.console, auto_refresh=False, transient=True)
            self._live.start(refresh=True)
        else:
            self._live.update(self._view(), refresh=True)

    def _view(self) -> Group:
        """The newest rows that fit the screen, and the status line under them."""
        room = max(3, self.console.size.height - 7)
        shown = self._buffer[-room:]
        return Group(render_table(self._visible_columns, shown), Text(self.status(len(shown)), style="dim"))

    def status(self, shown: int) -> str:
        elapsed = max(self._refreshed - self._started, 1e-9)
        window = f"newest {shown} of {self.count}" if shown < self.count else f"{self.count}"
        return (f"rows: {window} · changes: {self.changes} · {self.changes / elapsed:,.0f} rows/s · "
                f"updated {time.strftime('%H:%M:%S')} · Ctrl-C stops")

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- changelog and tableau ---------------------------------------------------------

    @property
    def _prefix(self) -> list[str]:
        """Changelog mode shows every row's kind; an insert-only result's rows are all +I."""
        return ["+I"] if self.mode == "changelog" and not self._has_kinds else []

    def _print_header(self) -> None:
        names = (["op"] if self._prefix else []) + self.columns
        line = " | ".join(names)
        self.console.print(line, style="bold", markup=False, highlight=False)
        self.console.print("-" * len(line), style="dim", markup=False, highlight=False)
        self._header_written = True

    @property
    def _has_kinds(self) -> bool:
        """An updating result brings its row kinds as a first 'op' column."""
        return bool(self.columns) and self.columns[0] == "op"

    @property
    def _visible_columns(self) -> list[str]:
        return self.columns[1:] if self._has_kinds else self.columns
