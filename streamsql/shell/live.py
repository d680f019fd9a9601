"""A result as it arrives in the shell: Flink's table, changelog and tableau result modes.

Table mode keeps the newest rows that fit the screen visible, under a status line (rows,
changes, rows/s, last refresh), and prints the whole table when the result ends.
Changelog and tableau modes print a header, then one line per row. Nothing is drawn
before the first row, so an error never follows an empty table box.
"""

from __future__ import annotations

import os
import select
import threading
import time

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

from streamsql.changelog import ADDS, INSERT
from streamsql.runtime.results import ResultWriter, format_value, truncate
from streamsql.runtime.table_text import print_table, render_table

class LiveResult(ResultWriter):
    """Shows a result as it arrives: an updating table, a changelog, or tableau rows."""

    handles_row_kinds = True  # it prints the op column itself in changelog mode
    shows_labels = True  # an unnamed column is headed by its expression, not Flink's EXPR$n

    def __init__(self, console: Console, mode: str, settings=None, clock=time.monotonic):
        super().__init__("table", console.file, settings)
        self.console = console
        self.mode = mode
        self.clock = clock
        self._live: Live | None = None
        self._started = self._refreshed = clock()
        self.changes = 0
        self.offset = 0  # rows back from the newest (PgUp/PgDn, arrows)
        self.watermark: str | None = None  # the query's, set by the engine as it waits (ISO 8601)
        self._lock = threading.RLock()  # rows arrive on Spark's thread, keys on the reader's
        self._keys: KeyReader | None = None

    def info(self, message: str) -> None:
        self.close()
        self.console.print(f"[INFO] {message}", style="bold blue", markup=False, highlight=False)

    def table(self, columns: list[str], rows: list) -> None:
        """A whole result (SHOW, DESCRIBE, SET): a table in every result mode, as Flink's client."""
        self.close()
        self.begin(columns)
        formatted = [[truncate(format_value(v), self.max_width) for v in row] for row in rows]
        if formatted:
            print_table(self.console, columns, formatted)
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
                print_table(self.console, self._visible_columns, self._buffer)
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
                if kind in ADDS:
                    self._buffer.append(values)
                elif values in self._buffer:  # -U / -D take their row back
                    self._buffer.remove(values)
        else:
            self._buffer.extend(formatted)
        self.count = len(self._buffer)

    def _show(self) -> None:
        with self._lock:
            if self._live is None:
                self._live = Live(self._view(), console=self.console, auto_refresh=False, transient=True)
                self._live.start(refresh=True)
                self._keys = KeyReader.start(self.console, self.scroll)
            else:
                self._live.update(self._view(), refresh=True)

    @property
    def _room(self) -> int:
        return max(3, self.console.size.height - 7)

    def note_watermark(self, watermark: str | None) -> None:
        """The query's watermark (ISO 8601), shown in the status line from now on."""
        with self._lock:
            if watermark != self.watermark:
                self.watermark = watermark
                if self._live is not None:
                    self._live.update(self._view(), refresh=True)

    def scroll(self, rows: int) -> None:
        """Page back (rows > 0) toward older rows or forward toward the newest."""
        with self._lock:
            self.offset = min(max(0, self.offset + rows), max(0, len(self._buffer) - self._room))
            if self._live is not None:
                self._live.update(self._view(), refresh=True)

    def _view(self) -> Group:
        """The rows that fit the screen (the newest, unless paged back), and the status line."""
        room = self._room
        end = len(self._buffer) - min(self.offset, max(0, len(self._buffer) - room))
        first = max(0, end - room)
        shown = self._buffer[first:end]
        return Group(render_table(self._visible_columns, shown), Text(self.status(first, end), style="dim"))

    def status(self, first: int, end: int) -> str:
        elapsed = max(self._refreshed - self._started, 1e-9)
        if end - first < self.count:
            newest = " (newest)" if end == self.count else ""
            window = f"{first + 1}-{end} of {self.count}{newest} · PgUp/PgDn"
        else:
            window = f"{self.count}"
        watermark = f"watermark {self.watermark[11:19]} · " if self.watermark else ""
        return (f"rows: {window} · changes: {self.changes} · {self.changes / elapsed:,.0f} rows/s · "
                f"{watermark}updated {time.strftime('%H:%M:%S')} · Ctrl-C stops")

    def _stop_live(self) -> None:
        with self._lock:
            if self._keys is not None:
                self._keys.stop()
                self._keys = None
            if self._live is not None:
                self._live.stop()
                self._live = None

    # -- changelog and tableau ---------------------------------------------------------

    @property
    def _prefix(self) -> list[str]:
        """Changelog mode shows every row's kind; an insert-only result's rows are all +I."""
        return [INSERT] if self.mode == "changelog" and not self._has_kinds else []

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


class KeyReader:
    """PgUp/PgDn (and the arrows, a row at a time) while a live table shows: a thread reads
    the terminal in cbreak mode (Ctrl-C still interrupts), until stopped."""

    KEYS = {b"\x1b[5~": "page_up", b"\x1b[6~": "page_down", b"\x1b[A": "up", b"\x1b[B": "down"}

    def __init__(self, fd: int, scroll, page: int, saved):
        self.fd, self.scroll, self.page, self.saved = fd, scroll, page, saved
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="streamsql-keys", daemon=True)

    @classmethod
    def start(cls, console: Console, scroll) -> "KeyReader | None":
        import sys
        import termios
        import tty

        try:
            fd = sys.stdin.fileno()
            if not os.isatty(fd) or not console.is_terminal:
                return None
            saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        except (OSError, ValueError, termios.error):
            return None
        reader = cls(fd, scroll, max(3, console.size.height - 7), saved)
        reader.thread.start()
        return reader

    def _run(self) -> None:
        pending = b""
        while not self.done.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                continue
            try:
                pending += os.read(self.fd, 16)
            except OSError:
                return
            for sequence, action in self.KEYS.items():
                while sequence in pending:
                    pending = pending.replace(sequence, b"", 1)
                    step = {"page_up": self.page, "page_down": -self.page, "up": 1, "down": -1}[action]
                    self.scroll(step)
            if len(pending) > 8 or (pending and not pending.startswith(b"\x1b")):
                pending = b""

    def stop(self) -> None:
        import termios

        self.done.set()
        if threading.current_thread() is not self.thread:
            self.thread.join(1)
        try:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        except termios.error:
            pass
