"""'scan.watermark.idle-timeout': a partition that has gone quiet stops holding the watermark.

A watermarked Kafka table streams one partition per stream (runtime.kafka.frames), and the
table's watermark is the smallest of theirs: one quiet partition holds every window open,
in Flink as here. Flink marks a split idle once it has had no record for the timeout and
leaves it out of the minimum until its next record. Spark keeps each stream's watermark
and has no idleness, so each partition's stream reads a heartbeat directory of its own
beside the topic (under the drain's private directory: runtime.drain): when a finished
micro-batch finds a partition without a record for the timeout while the query's event time
has moved on, the driver (a StreamingQueryListener, one per session) writes one row there
at the largest event time the query has seen. That stream's watermark follows the others,
so the smallest is the active partitions'; the row is filtered out right after the
watermark is taken, as the drain's sentinel is. A partition that comes back has its
records judged by that watermark, as in Flink (its records behind it are late).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

HEARTBEAT_COLUMN = "__streamsql_heartbeat"  # TRUE on a heartbeat row, NULL on the table's own


def heartbeats(spark, table, split: tuple[str, int] | None, drains, default: str | None = None) -> Path | None:
    """The heartbeat directory of one partition's stream, watched, when the table has
    'scan.watermark.idle-timeout' (or the session ``default``, Flink's
    'table.exec.source.idle-timeout') more than 0 and is streamed a partition per stream."""
    from streamsql.plan.durations import parse_duration

    timeout_ms = parse_duration(table.options.get("scan.watermark.idle-timeout", default or "0")) or 0
    if split is None or drains is None or timeout_ms <= 0:
        return None
    from streamsql.runtime.kafka.commits import partition_description

    directory = drains.heartbeat_directory(table, split)
    watch(spark, partition_description(split), directory, timeout_ms / 1000)
    return directory


def watch(spark, description: str, directory: Path, timeout_s: float) -> None:
    """Write heartbeats into ``directory`` when the source ``description`` (a partition's
    stream, ``KafkaV2[Assign[topic-0]]``) has read nothing for ``timeout_s``."""
    from streamsql.runtime.kafka.commits import session_listener

    listener = session_listener(spark, "_streamsql_idleness", _make_listener)
    listener.watched[description] = _Watched(directory, timeout_s, time.monotonic())


class _Watched:
    def __init__(self, directory: Path, timeout_s: float, active_at: float):
        self.directory, self.timeout_s, self.active_at = directory, timeout_s, active_at
        self.sent = ""  # the latest heartbeat's time


def heartbeat_due(watched: _Watched, rows: int, now: float, latest: str | None) -> str | None:
    """The time of the heartbeat to write for a partition's stream after a micro-batch that
    read ``rows`` of it, or None: it read some (it is active), it has been quiet for less
    than the timeout, the query has seen no event time, or it had one at that time already."""
    if rows > 0:
        watched.active_at = now
        return None
    if now - watched.active_at < watched.timeout_s or not latest or latest <= watched.sent:
        return None
    return latest


def write_heartbeat(directory: Path, at: str) -> None:
    """One row at ``at`` (Spark's 'yyyy-MM-ddTHH:mm:ss.SSSZ'), renamed into place so that it is read whole."""
    fd, tmp = tempfile.mkstemp(dir=directory.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as handle:
        handle.write(at.replace("T", " ").rstrip("Z") + "\n")
    os.replace(tmp, directory / f"heartbeat-{time.time_ns()}.csv")


def _make_listener():
    from pyspark.sql.streaming import StreamingQueryListener

    class Idleness(StreamingQueryListener):
        def __init__(self):
            self.watched: dict[str, _Watched] = {}
            self.latest: dict[str, str] = {}  # query id -> the largest event time it has seen

        def onQueryStarted(self, event):  # noqa: N802 (PySpark's names)
            pass

        def onQueryProgress(self, event):  # noqa: N802
            progress = event.progress
            seen = (progress.eventTime or {}).get("max")
            query = str(progress.id)
            if seen and seen > self.latest.get(query, ""):
                self.latest[query] = seen
            now = time.monotonic()
            for source in progress.sources:
                watched = self.watched.get(source.description)
                if watched is None:
                    continue
                at = heartbeat_due(watched, source.numInputRows or 0, now, self.latest.get(query))
                if at is not None:
                    try:
                        write_heartbeat(watched.directory, at)
                        watched.sent = at
                    except OSError:  # the query is stopping (its directories went): nothing to hold back
                        pass

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            self.latest.pop(str(event.id), None)

    return Idleness()
