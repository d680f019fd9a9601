"""A live status line per running streaming query, on a terminal: rows/s and watermark."""

from __future__ import annotations

import sys
import threading
from datetime import datetime, timezone


class ProgressDisplay:
    """Shown on stderr while the wrapped block waits on streaming queries (only on a TTY)."""

    def __init__(self, queries: list):
        self.queries = queries
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> ProgressDisplay:
        if sys.stderr.isatty() and self.queries:
            self._thread = threading.Thread(target=self._show, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(5)

    def _show(self) -> None:
        from rich.console import Console
        from rich.live import Live

        with Live(console=Console(stderr=True), transient=True, auto_refresh=False) as live:
            while not self._done.wait(1):
                live.update("\n".join(self._line(q) for q in self.queries), refresh=True)

    @staticmethod
    def _line(query) -> str:
        progress = query.lastProgress or {}
        rate = progress.get("processedRowsPerSecond") or 0.0
        total = sum(p.numInputRows for p in query.recentProgress)
        watermark = (progress.get("eventTime") or {}).get("watermark")
        text = f"{query.name or query.id}: {total:,} rows, {rate:,.0f} rows/s"
        if watermark and not watermark.startswith("1970"):
            mark = datetime.fromisoformat(watermark.replace("Z", "+00:00"))
            lag = (datetime.now(timezone.utc) - mark).total_seconds()
            text += f", watermark {mark:%Y-%m-%d %H:%M:%S} (lag {lag:,.0f} s)"
        return text
