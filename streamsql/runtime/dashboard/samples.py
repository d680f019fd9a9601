"""What a job records of its micro-batches, for the dashboard and /metrics.

The job monitor (runtime.jobs) counts each micro-batch of Spark's progress once; for each it
also calls ``record_batch``, which keeps in the job's record

- ``batches``: the last ``HISTORY`` micro-batches of all the job's queries, one small dict
  each (time, rows, input and processing rate, duration, watermark and its lag, state rows
  and bytes, late rows), what the dashboard plots;
- ``queries``: per streaming query (an INSERT), its rows in (in total, and per source as
  Spark describes it), its rows out, and its Spark state operators (state rows and bytes of
  the last micro-batch, rows dropped as late in total).
"""

from __future__ import annotations

from datetime import datetime

from streamsql.runtime.drain import is_sentinel_source
from streamsql.runtime.jobs import NO_WATERMARK, input_rows, late_rows_dropped

HISTORY = 100  # as many as Spark keeps (spark.sql.streaming.numRecentProgressUpdates)


def epoch(text: str | None) -> float | None:
    """Spark's ISO time (``2026-01-01T00:00:01.000Z``) as epoch seconds; None for none."""
    if not text or text in NO_WATERMARK:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def batch_sample(query: str, progress) -> dict:
    """One micro-batch as the dashboard plots it."""
    durations = progress.get("durationMs") or {}
    at, watermark = epoch(progress.get("timestamp")), epoch((progress.get("eventTime") or {}).get("watermark"))
    operators = progress.get("stateOperators") or []
    return {
        "query": query, "batch": progress.get("batchId"), "t": at, "rows": input_rows(progress),
        "input_rate": round(progress.get("inputRowsPerSecond") or 0.0, 1),
        "processed_rate": round(progress.get("processedRowsPerSecond") or 0.0, 1),
        "duration_ms": durations.get("triggerExecution", progress.get("batchDuration")),
        "watermark": watermark,
        "lag_s": round(max(0.0, at - watermark), 3) if at is not None and watermark is not None else None,
        "state_rows": sum(op.get("numRowsTotal", 0) or 0 for op in operators),
        "state_bytes": sum(op.get("memoryUsedBytes", 0) or 0 for op in operators),
        "late": late_rows_dropped(progress),
    }


def record_batch(record, query: str, progress) -> None:
    """Note a micro-batch of ``query`` (counted for the first time) in the job's record."""
    record.batches.append(batch_sample(query, progress))
    del record.batches[:-HISTORY]
    totals = record.queries.setdefault(query, {"rows_in": 0, "rows_out": None, "sources": {}, "operators": []})
    totals["rows_in"] += input_rows(progress)
    for source in progress.get("sources") or []:
        description = source.get("description") or "?"
        if not is_sentinel_source(source):
            totals["sources"][description] = totals["sources"].get(description, 0) + (source.get("numInputRows") or 0)
    operators = totals["operators"]
    for index, op in enumerate(progress.get("stateOperators") or []):
        if index == len(operators):
            operators.append({"name": op.get("operatorName"), "late": 0})
        operators[index].update(state_rows=op.get("numRowsTotal", 0) or 0, state_bytes=op.get("memoryUsedBytes", 0) or 0,
                                rows_updated=op.get("numRowsUpdated", 0) or 0)
        operators[index]["late"] += op.get("numRowsDroppedByWatermark", 0) or 0


def record_rows_out(record, query: str, rows: int | None) -> None:
    """The rows ``query``'s sink committed so far (None: a sink that counts none)."""
    if rows is not None and query in record.queries:
        record.queries[query]["rows_out"] = rows
