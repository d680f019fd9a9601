"""A streaming SELECT's rows on their way to the session's writer (the shell's table,
changelog or tableau view, `run`'s output, a gateway operation's pages): foreachBatch in
this process; else (``engine.results_through_memory``) a memory table this process reads,
dropped when the query ends. So through Spark Connect, where foreachBatch runs on the
server, and in the SQL Gateway: there each foreachBatch's call back into Python kept a py4j
connection whose JVM thread had inherited, and so kept, the query's Spark session (a
gateway running streaming SELECTs all day grew without bound, bench/serve_load.py)."""

from __future__ import annotations

import contextlib

from streamsql.runtime.execution import trigger


def select_sink(engine, plan, writer, checkpoint: str):
    """How the query starts, given its frame. ``checkpoint`` is the statement's own (a restart
    at the end of input resumes it)."""
    import uuid

    from streamsql.runtime.session import start_streaming

    def start(frame):
        stream = (
            engine._displayable(frame, plan, writer).writeStream
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger(engine.settings, plan)).outputMode("append")
        )
        if engine.results_through_memory:
            stream = stream.format("memory").queryName(f"streamsql_result_{uuid.uuid4().hex[:8]}")
        else:
            stream = stream.foreachBatch(lambda batch, _: writer.rows(batch.collect()))
        return start_streaming(stream, frame.sparkSession)

    return start


def follow_memory_sink(engine, query, writer) -> None:
    """Print the rows the memory table gains while the query runs, and at its end."""
    shown = 0

    def show_new_rows() -> None:
        nonlocal shown
        rows = engine.spark.sql(f"SELECT * FROM `{query.name}`").offset(shown).collect()
        writer.rows(rows)
        shown += len(rows)

    try:
        engine._await(query, show_new_rows)
    finally:
        with contextlib.suppress(Exception):  # (a failure to say is the query's, not this one's)
            engine.spark.catalog.dropTempView(query.name)  # its rows, held by the session


def show_watermark(writer, query) -> None:
    """A live result's status line shows the query's watermark, when it has one."""
    if hasattr(writer, "note_watermark"):
        watermark = ((query.lastProgress or {}).get("eventTime") or {}).get("watermark")
        writer.note_watermark(watermark if watermark and not watermark.startswith("1970") else None)
