"""Following streaming queries as Spark reports their progress."""

from __future__ import annotations

from collections import defaultdict

from pyspark.sql.streaming import StreamingQueryListener


class ProgressTracker(StreamingQueryListener):
    """Adds up each query's observed metrics (e.g. skipped malformed rows) across micro-batches."""

    def __init__(self):
        self._observed: dict[str, int] = defaultdict(int)

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        for name, row in (event.progress.observedMetrics or {}).items():
            self._observed[name] += int(row["rows"] or 0)

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        pass

    def observed_total(self, metric: str) -> int:
        return self._observed.get(metric, 0)
