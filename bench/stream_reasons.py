"""What bounds a streaming query's throughput, read from its own measurements.

bench/stream_job.py sums each micro-batch's phases (Spark's `durationMs`: `addBatch` runs the
query's operators on the batch; `queryPlanning`, `latestOffset`, `getBatch`, `walCommit`,
`commitOffsets` are the micro-batch's bookkeeping) and names the state operators. The time
before the first micro-batch ends is the query's start (planning, the state store, Python
workers). q0 (a projection of the source) measures the source: reading the CSV files, or
generating the events.
"""

from __future__ import annotations

# Spark's names for the stateful operators in a query's progress, as a reader knows them.
OPERATORS = {
    "transformWithStateInPandasExec": "streamsql's stateful pandas operator (rows to Python workers as Arrow, pandas per key bucket)",
    "transformWithStateInPySparkExec": "streamsql's stateful pandas operator (rows to Python workers as Arrow, pandas per key bucket)",
    "symmetricHashJoin": "Spark's stream-stream join (every row of both sides into the RocksDB state store)",
    "stateStoreSave": "Spark's streaming aggregate (partial aggregates in the RocksDB state store)",
    "dedupe": "Spark's streaming deduplication",
    "globalLimit": "Spark's streaming limit",
    "sessionWindowStateStoreSaveExec": "Spark's session window state",
}
BOOKKEEPING = ("queryPlanning", "latestOffset", "getBatch", "walCommit", "commitOffsets")


SOURCES = {
    "files": "the source alone: Spark's CSV reader, a file a micro-batch",
    "nexmark": "the source alone: the events generated in Python workers (numpy to Arrow to the JVM)",
}


def reason(query: str, report: dict, source_seconds: float | None = None, source: str = "files") -> str:
    """One line: where the query's time went (``source_seconds``: what generating the events it
    read costs, from q0)."""
    durations = report.get("durations_ms") or {}
    total = report["seconds"]
    batches = max(1, report.get("batches", 1))
    run = durations.get("triggerExecution", 0) / 1000
    execute = durations.get("addBatch", 0) / 1000
    bookkeeping = sum(durations.get(phase, 0) for phase in BOOKKEEPING) / 1000
    parts = []
    operators = sorted({OPERATORS.get(name, name) for name in report.get("state_operators", [])})
    if operators:
        parts.append(f"operators {execute:.1f} s of {total:.1f} s ({'; '.join(operators)})")
    else:
        parts.append(f"no state: operators {execute:.1f} s of {total:.1f} s")
    if source_seconds and query != "q0":
        reads = report.get("input_rows", 0) / max(1, report.get("events", 1))
        parts.append(f"reading the input ≈ {min(execute, source_seconds):.1f} s of that"
                     + (f" (the source is read {reads:.0f}x)" if reads > 1.5 else ""))
    elif query == "q0":
        parts.append(SOURCES[source])
    first = report.get("first_batch_ms") or {}
    planning = first.get("queryPlanning", 0) / 1000
    if planning >= 0.5:
        parts.append(f"planning the first micro-batch {planning:.1f} s (once)")
        bookkeeping -= planning
    parts.append(f"micro-batch bookkeeping {bookkeeping:.1f} s ({bookkeeping / batches:.2f} s a batch)")
    parts.append(f"start to first batch {max(0.0, total - run):.1f} s")
    return "; ".join(parts)
