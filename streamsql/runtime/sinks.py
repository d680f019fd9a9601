"""Writing a query's rows into a catalog table: filesystem, print or blackhole.

Streaming writes to the filesystem go through Spark's file sink, whose commit log
(``_spark_metadata``) together with the job's checkpoint makes output exactly-once
across restarts; batch readers of the directory honour that log.
"""

from __future__ import annotations

import sys
from pathlib import Path

from streamsql.errors import ConnectorError
from streamsql.plan.connectors import csv_separator, is_true
from streamsql.plan.objects import TableDef
from streamsql.runtime.results import format_value

_WRITE_OPTIONS = {
    "csv": {"header": "false", "timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS", "nullValue": ""},
    "json": {"timestampFormat": "yyyy-MM-dd HH:mm:ss.SSS", "ignoreNullFields": "false"},
    "parquet": {},
}


def write_batch(frame, table: TableDef, overwrite: bool) -> None:
    connector = table.options["connector"]
    if connector == "print":
        print_rows(frame.collect(), table)
    elif connector == "blackhole":
        frame.write.format("noop").mode("overwrite").save()
    else:
        if (Path(table.options["path"]) / "_spark_metadata").exists():
            raise ConnectorError(
                f"Table '{table.name.name}': {table.options['path']} is written by a streaming job; rows"
                " a batch INSERT adds there would be invisible to its readers. Insert in streaming mode."
            )
        writer = frame.write.format(table.options["format"]).options(**_file_options(table))
        if table.partition_keys:
            writer = writer.partitionBy(*table.partition_keys)
        writer.mode("overwrite" if overwrite else "append").save(table.options["path"])


def start_stream(frame, table: TableDef, checkpoint: str, trigger: dict, name: str):
    """Start a streaming query writing into the table; returns the StreamingQuery."""
    connector = table.options["connector"]
    writer = frame.writeStream.queryName(name).option("checkpointLocation", checkpoint).trigger(**trigger)
    if connector == "print":
        writer = writer.foreachBatch(lambda batch, _: print_rows(batch.collect(), table))
    elif connector == "blackhole":
        writer = writer.format("noop")
    else:
        writer = writer.format(table.options["format"]).options(**_file_options(table))
        writer = writer.option("path", table.options["path"])
        if table.partition_keys:
            writer = writer.partitionBy(*table.partition_keys)
    return writer.outputMode("append").start()


def print_rows(rows: list, table: TableDef) -> None:
    """Flink's print connector: '+I[v1, v2]' per row, prefixed by print-identifier."""
    stream = sys.stderr if is_true(table.options, "standard-error") else sys.stdout
    prefix = table.options.get("print-identifier")
    prefix = f"{prefix}> " if prefix else ""
    for row in rows:
        values = ", ".join("null" if v is None else format_value(v) for v in row)
        stream.write(f"{prefix}+I[{values}]\n")
    stream.flush()


def _file_options(table: TableDef) -> dict[str, str]:
    fmt = table.options["format"]
    options = dict(_WRITE_OPTIONS.get(fmt, {}))
    if fmt == "csv":
        options["sep"] = csv_separator(table.options)
        if "csv.null-literal" in table.options:
            options["nullValue"] = table.options["csv.null-literal"]
    return options
