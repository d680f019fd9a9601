"""Rows each streaming sink of this process committed, for SHOW JOBS's 'rows out'.

Spark reports no output rows for a ``foreachBatch`` sink (its progress says -1), and
those are the sinks streamsql writes files, PostgreSQL and Kafka through: each of them
counts the rows of a micro-batch it committed — a replayed batch found committed before
counts nothing — under its streaming query's name, with the time of its last commit.
The counts live in this process (the driver, where ``foreachBatch`` runs), which is the
one whose job monitor (runtime.jobs) records them.
"""

from __future__ import annotations

import threading
import time

_lock = threading.Lock()
_rows: dict[str, int] = {}
_last_commit: dict[str, float] = {}


def committed(query: str, rows: int) -> None:
    """The sink of ``query`` committed a micro-batch of ``rows`` rows."""
    with _lock:
        _rows[query] = _rows.get(query, 0) + rows
        _last_commit[query] = time.time()


def rows_out(query: str) -> int | None:
    """The rows the sink of ``query`` committed in this process; None if it counts none."""
    with _lock:
        return _rows.get(query)


def last_commit(query: str) -> float | None:
    with _lock:
        return _last_commit.get(query)


def observed(frame):
    """``frame`` with a row count taken as it is written, and the Observation holding it
    (read only after an action on the frame ran: Observation.get waits for one)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    return frame.observe(observation, F.count(F.lit(1)).alias("rows")), observation
