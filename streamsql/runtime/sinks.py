"""Writing a query's rows into a catalog table: filesystem, print or blackhole.

Files are never written in place: every write stages its files in a hidden directory of
the sink and publishes them by renaming (runtime.commits), so whoever lists the
directory — Spark, streamsql, pandas, DuckDB, `cat part-*` — reads committed rows only.
Jobs (runtime.inserts) add a commit record between the two, which makes their output
exactly-once across restarts; a batch-mode INSERT (Flink's batch semantics: each run
appends) publishes without one.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

from streamsql.changelog import INSERT, ROWKIND_COLUMN
from streamsql.plan.connectors import KAFKA, csv_format, is_true
from streamsql.plan.objects import TableDef
from streamsql.runtime.commits import STAGING, SinkCommitter, _data_files, final_names, publish
from streamsql.runtime.results import format_value, java_text

_WRITE_OPTIONS = {
    "csv": {"header": "false", "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS", "nullValue": ""},
    "json": {"timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS", "ignoreNullFields": "false"},
    "parquet": {},
}


def write_batch(frame, table: TableDef, overwrite: bool) -> None:
    """A batch-mode write: staged, then published (after removing the old files, to overwrite)."""
    connector = table.options["connector"]
    if connector == "print":
        print_rows(java_text(frame).collect(), table)
    elif connector == "blackhole":
        frame.write.format("noop").mode("overwrite").save()
    elif connector == "jdbc":
        from streamsql.runtime.jdbc import write_changelog_batch
        write_changelog_batch(frame, table, overwrite=overwrite)
    elif connector == "delta":
        from streamsql.runtime.delta.sink import write_delta_batch
        write_delta_batch(frame, table, overwrite=overwrite)
    elif connector == "iceberg":
        from streamsql.runtime.iceberg.sink import write_iceberg_batch
        write_iceberg_batch(frame, table, overwrite=overwrite)
    elif connector in KAFKA:
        from streamsql.runtime.kafka.sink import check_sink, write_records
        check_sink(table, overwrite)
        write_records(frame, table)
    else:
        sink = Path(table.options["path"])
        _remove_abandoned_batches(sink)
        staged = sink / STAGING / f"batch-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        write_files(frame, table, staged)
        if overwrite:
            for old in _data_files(sink):
                old.unlink()
        publish(sink, staged, final_names(staged, staged.name))


def write_files(frame, table: TableDef, directory: Path) -> None:
    """The rows as files of the table's format (and partitions) in ``directory``."""
    writer = frame.write.format(table.options["format"]).options(**_file_options(table))
    if table.partition_keys:
        writer = writer.partitionBy(*table.partition_keys)
    writer.mode("overwrite").save(str(directory))


@dataclass(frozen=True)
class CommitMicroBatch:
    """foreachBatch for a file sink: stage the micro-batch, record it, publish it; a batch
    Spark replays after a crash is already recorded and is skipped."""

    table: TableDef
    committer: SinkCommitter
    query: str = ""  # the streaming query's name, under which its rows are counted

    def __call__(self, frame, batch_id: int) -> None:
        from streamsql.runtime.sink_counts import committed, observed

        if self.committer.is_committed(batch_id):
            compute_only(frame)
            return
        frame, rows = observed(frame)
        write_files(frame, self.table, self.committer.stage(batch_id))
        self.committer.commit(batch_id)
        committed(self.query, rows.get["rows"])


def compute_only(frame) -> None:
    """Run a replayed micro-batch whose output was already written, writing nothing: its
    stateful operators must still commit their state for the batch (Spark refuses a batch
    some of whose state stores never committed)."""
    frame.write.format("noop").mode("overwrite").save()


def start_stream(frame, table: TableDef, checkpoint: str, trigger: dict, name: str, committer: SinkCommitter | None,
                 output_mode: str = "append"):
    """Start a streaming query writing into the table; returns the StreamingQuery. ``output_mode``
    'update': a GroupAggregate on Spark's own aggregation (spark.physical.native_update_aggregate)."""
    connector = table.options["connector"]
    writer = frame.writeStream.queryName(name).option("checkpointLocation", checkpoint).trigger(**trigger)
    if connector == "print":
        kinds = ROWKIND_COLUMN in frame.columns
        writer = writer.foreachBatch(lambda batch, _: print_rows(java_text(batch).collect(), table, kinds))
    elif connector == "blackhole":
        writer = writer.format("noop")
    elif connector == "jdbc":
        from streamsql.runtime.jdbc import JdbcMicroBatch
        writer = writer.foreachBatch(JdbcMicroBatch(table, checkpoint, name).checked(frame.columns))
    elif connector == "delta":
        from streamsql.runtime.delta.sink import DeltaMicroBatch
        writer = writer.foreachBatch(DeltaMicroBatch(table, checkpoint, name).checked(frame))
    elif connector == "iceberg":
        from streamsql.runtime.iceberg.sink import IcebergMicroBatch
        writer = writer.foreachBatch(IcebergMicroBatch(table, checkpoint, name).checked())
    elif connector in KAFKA and "realTime" in trigger:  # Spark's Kafka sink, record by record (spark.real_time)
        from streamsql.runtime.kafka.sink import check_sink, records, sink_options
        check_sink(table, overwrite=False)
        writer = (records(frame, table).writeStream.queryName(name).option("checkpointLocation", checkpoint)
                  .trigger(**trigger).format("kafka").options(**sink_options(table)))
        from streamsql.runtime.session import start_streaming

        return start_streaming(writer.outputMode("update"), frame.sparkSession)
    elif connector in KAFKA:
        from streamsql.runtime.kafka.sink import KafkaMicroBatch, check_sink
        check_sink(table, overwrite=False)
        writer = writer.foreachBatch(KafkaMicroBatch(table, checkpoint))
    else:
        writer = writer.foreachBatch(CommitMicroBatch(table, committer, name))
    from streamsql.runtime.session import start_streaming

    return start_streaming(writer.outputMode(output_mode), frame.sparkSession)


def _remove_abandoned_batches(sink: Path) -> None:
    """Staged files of batch-mode writes whose process is gone (it crashed before publishing)."""
    root = sink / STAGING
    if not root.exists():
        return
    for staged in root.glob("batch-*"):
        pid = int(staged.name.split("-")[1]) if staged.name.split("-")[1].isdigit() else 0
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, ValueError):
            shutil.rmtree(staged, ignore_errors=True)
        except PermissionError:
            pass


def print_rows(rows: list, table: TableDef, with_kinds: bool = False) -> None:
    """Flink's print connector: '+I[v1, v2]' per row (its row kind, when the rows carry one
    first: -U, +U, -D), prefixed by print-identifier."""
    stream = sys.stderr if is_true(table.options, "standard-error") else sys.stdout
    prefix = table.options.get("print-identifier")
    prefix = f"{prefix}> " if prefix else ""
    for row in rows:
        kind, row = (row[0], row[1:]) if with_kinds else (INSERT, row)
        values = ", ".join("null" if v is None else format_value(v) for v in row)
        stream.write(f"{prefix}{kind}[{values}]\n")
    stream.flush()


def _file_options(table: TableDef) -> dict[str, str]:
    fmt = table.options["format"]
    options = dict(_WRITE_OPTIONS.get(fmt, {}))
    if fmt == "csv":
        options.update(csv_format(table.options))
    return options
