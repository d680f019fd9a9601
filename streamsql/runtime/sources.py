"""Reading catalog tables into Spark DataFrames, batch or streaming.

Malformed rows never pass silently: by default the first one stops the job with the
file and line it came from; with ``<format>.ignore-parse-errors`` it is skipped and
counted (the count is in the run summary).
"""

from __future__ import annotations

import glob as globlib
import itertools
from pathlib import Path

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.errors import ConnectorError
from streamsql.plan.connectors import CONNECTORS, KAFKA, csv_format, is_bounded, is_true
from streamsql.plan.objects import TableDef
from streamsql.plan.windows import watermark_delay_ms
from streamsql.spark.dialect import spark_type, to_spark_sql
from streamsql.runtime.drain import SENTINEL
from streamsql.runtime.kafka.frames import OFFSET_COLUMN
from streamsql.spark.windows import SEQ_COLUMN, SPLIT_COLUMN

CORRUPT_COLUMN = "_streamsql_corrupt_record"
MALFORMED_MARK = "streamsql-malformed-row"


GENERATED = {"nexmark": "events.num", "datagen": "number-of-rows"}  # connector -> option that bounds it
_BARRIERS = itertools.count(1)  # observe() names are unique per query
# A stream's read order: its micro-batches in turn (a file that comes late with an older
# time is read after the rows before it), and in each the files oldest first, ties by name,
# as Spark takes them (_in_name_order). (A batch read orders files by name.)
_STREAM_ORDER = ("current_timestamp()", "_metadata.file_modification_time")
_FILE_ORDER = ("_metadata.file_path", "_metadata.file_block_start")
_POSITION = "__streamsql_position"  # a row's place in its task's rows (_numbered)
DEFAULT_POLL_INTERVAL = "1 second"  # an unbounded source without 'source.monitor-interval' (a generated one)


def source_frame(spark, table: TableDef, streaming: bool, skipped_counters: dict, drain=None,
                 files_per_batch: int = 100, in_order: bool = False, real_time: bool = False,
                 idle_timeout: str | None = None):
    """The table's rows as a DataFrame: physical columns, then computed ones, then the watermark.

    ``drain`` (runtime.drain.DrainSources) adds the sentinel directory that ends a
    watermarked stream: a continuous job stopped WITH DRAIN, or bounded input run as a
    stream reaching its end (runtime.end_of_input). ``in_order``: a stream of files with
    a watermark carries its read order too (``SEQ_COLUMN``), for the order-sensitive
    aggregates that read it (spark.arrival_order); a batch read always does. ``real_time``: a
    Kafka stream read for Spark's real-time mode (spark.real_time: no rows-per-batch bound).
    ``idle_timeout``: 'table.exec.source.idle-timeout', for a Kafka table without its own
    'scan.watermark.idle-timeout' (runtime.kafka.idleness).
    """
    from pyspark.sql import functions as F

    drains = drain if streaming and drain is not None and table.watermark is not None else None
    if table.options["connector"] in GENERATED:
        return _with_computed_columns(_generated_frame(spark, table, streaming), table, streaming, drains, False)
    if table.options["connector"] in KAFKA:
        from functools import reduce

        from streamsql.runtime.kafka.frames import kafka_frames
        from streamsql.runtime.kafka.idleness import heartbeats

        branches = [_with_computed_columns(frame, table, streaming, drains, False,
                                           heartbeats(spark, table, split, drains, idle_timeout))
                    for split, frame in kafka_frames(spark, table, streaming, real_time)]  # (a watermark each)
        return reduce(lambda a, b: a.unionByName(b), branches)
    if table.options["connector"] == "jdbc":
        from streamsql.runtime.jdbc_source import jdbc_frame

        return _with_computed_columns(jdbc_frame(spark, table, streaming), table, streaming, drains, False)
    if table.options["connector"] == "delta":
        from streamsql.runtime.delta.source import delta_frame
        from streamsql.runtime.delta.stream import is_streaming, stream_frame

        frame = stream_frame(spark, table) if streaming and is_streaming(table) else delta_frame(spark, table, streaming)
        return _with_computed_columns(frame, table, streaming, drains, False)
    if table.options["connector"] == "iceberg":
        from streamsql.runtime.iceberg.source import iceberg_frame

        return _with_computed_columns(iceberg_frame(spark, table, streaming), table, streaming, drains, False)
    if not CONNECTORS[table.options["connector"]].as_source:
        raise ConnectorError(f"Table '{table.name.name}' (connector '{table.options['connector']}') cannot be read: it is a sink")
    options = table.options
    fmt = options["format"]
    path = Path(options["path"])
    if not path.exists():
        raise ConnectorError(f"Table '{table.name.name}': path '{path}' does not exist")
    checks_rows = fmt in ("csv", "json")
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns)
    if checks_rows:
        schema += f", `{CORRUPT_COLUMN}` STRING"

    def reader():
        read = (spark.readStream if streaming else spark.read).format(fmt).schema(schema)
        read = read.options(**_format_options(table))
        if streaming:
            read = read.option("maxFilesPerTrigger", table.options.get("source.max-files-per-batch", str(files_per_batch)))
        return read

    pattern = options.get("source.path.regex-pattern")
    if path.is_file():
        # A streaming file source watches a directory: read the file's folder, only that file.
        frame = reader().option("pathGlobFilter", globlib.escape(path.name)).load(str(path.parent))
    elif pattern:
        frame = reader().option("recursiveFileLookup", "true").load(str(path))
    else:
        frame = reader().load(_in_name_order(path) if streaming else str(path))
    if pattern:
        frame = frame.filter(_path_matches(pattern, F))
    if checks_rows:
        frame = _handle_malformed(frame, table, streaming, skipped_counters, F)
    return _with_computed_columns(frame, table, streaming, drains, in_order)


def lookup_frame(spark, table: TableDef):
    """A bounded table a stream only looks up (a lookup join's right side), read as a static
    table: Spark joins each micro-batch with its rows and keeps no state, as Flink's
    LookupJoin. Its malformed rows fail or are skipped as a stream's are; skipped ones are
    not counted (the table is read again every micro-batch)."""
    frame = source_frame(spark, table, False, None)
    return frame.drop(SEQ_COLUMN, SPLIT_COLUMN)


def _in_name_order(directory: Path) -> str:
    """The path a stream reads a directory's files by: Spark takes them oldest first, and
    files written within the same clock tick (a directory filled by one program) in the
    order the file system lists them, hash order on ext4 — part-2 before part-1, so the
    watermark of part-2 made part-1's rows late. A glob over the directory's entries
    (Hadoop sorts glob results, and Spark globs the path again every micro-batch, so new
    files are still picked up) breaks those ties by name. Hidden entries ('.', '_') stay
    out as Spark leaves them out of a directory; a directory with subdirectories, or a
    path with glob characters of its own, is read as it is."""
    if any(c in str(directory) for c in "*?[]{}\\") or any(
            child.is_dir() and not child.name.startswith((".", "_")) for child in directory.iterdir()):
        return str(directory)
    return f"{directory}/[!._]*"


def _with_computed_columns(frame, table: TableDef, streaming: bool, drains, in_order: bool, heartbeats=None):
    """Physical columns, computed ones, the watermark (streaming) or the read order (batch;
    streaming too when ``in_order``). ``heartbeats``: a directory of rows that move this
    stream's watermark and leave (runtime.kafka.idleness)."""
    from pyspark.sql import functions as F

    columns = [f"`{c.name}`" for c in table.columns if not c.is_computed]  # physical and metadata
    if ROWKIND_COLUMN in frame.columns:  # a changelog source read as a stream: each row's kind first
        columns.insert(0, f"`{ROWKIND_COLUMN}`")
    columns += [f"{to_spark_sql(c.expression)} AS `{c.name}`" for c in table.columns if c.is_computed]
    per_split = not streaming and SPLIT_COLUMN in frame.columns  # (a Kafka partition: kafka.frames)
    if per_split:
        columns += [f"`{SPLIT_COLUMN}`", f"`{OFFSET_COLUMN}`"]
    from_files = (in_order or not streaming) and table.watermark is not None and "path" in table.options
    if from_files:  # which file, and where in it (Spark orders a directory's splits by size, not name)
        order = (*_STREAM_ORDER, *_FILE_ORDER) if streaming else _FILE_ORDER
        columns.append(f"struct({', '.join(order)}) AS `{SEQ_COLUMN}`")
    frame = frame.selectExpr(*columns)
    if table.watermark is not None:
        if streaming:
            if from_files:  # a micro-batch's files, each split's rows in the order they were read
                frame = _numbered(frame)
            if heartbeats is not None:  # a quiet partition's stream: rows marked to leave after the watermark
                from streamsql.runtime.kafka.idleness import HEARTBEAT_COLUMN

                beats = drain_rows(frame, table, heartbeats).withColumn(HEARTBEAT_COLUMN, F.lit(True))
                frame = frame.withColumn(HEARTBEAT_COLUMN, F.lit(None).cast("boolean")).unionByName(beats)
            if drains is not None:  # the end-of-input signal: a sentinel row at the end of time
                frame = frame.unionByName(drain_rows(frame, table, drains.directory(table)))
            frame = frame.withWatermark(table.watermark.column, _watermark_delay(table))
            if drains is not None or heartbeats is not None:
                # The sentinel moves the watermark, then leaves. Spark pushes a query's filters
                # (a WHERE, a join key's IS NOT NULL) below the watermark, where they would
                # remove the sentinel first; observe() is a node they cannot pass.
                frame = frame.observe(f"streamsql_drain_{next(_BARRIERS)}", F.count(F.lit(1)))
            if drains is not None:
                time_column = F.col(f"`{table.watermark.column}`")
                frame = frame.filter(time_column.isNull() | (time_column < F.lit(SENTINEL).cast("timestamp")))
            if heartbeats is not None:
                frame = frame.filter(F.col(HEARTBEAT_COLUMN).isNull()).drop(HEARTBEAT_COLUMN)
        elif per_split:  # the read order per partition: its offsets (the watermark is per partition)
            frame = frame.withColumn(SEQ_COLUMN, F.struct(F.col(SPLIT_COLUMN), F.col(OFFSET_COLUMN))).drop(OFFSET_COLUMN)
        else:  # the read order, for telling late rows apart (spark.windows): files by name, rows in order
            position = F.monotonically_increasing_id()
            frame = frame.withColumn(SEQ_COLUMN, F.struct(F.col(SEQ_COLUMN), position) if from_files else position)
    return frame


def _numbered(frame):
    """``SEQ_COLUMN`` (a row's file and split) with the row's place in its task's rows next to
    it. A stream has no monotonically_increasing_id (Spark refuses it), so the rows are
    numbered as Arrow batches in a Python worker: only a stream whose query needs the order."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    def number(batches):  # (nested: shipped by value, nothing of streamsql's to import)
        import numpy as np
        import pyarrow as pa

        seen = 0
        for batch in batches:
            yield batch.append_column(_POSITION, pa.array(np.arange(seen, seen + batch.num_rows, dtype=np.int64)))
            seen += batch.num_rows

    schema = T.StructType([*frame.schema.fields, T.StructField(_POSITION, T.LongType(), False)])
    numbered = frame.mapInArrow(number, schema)
    return numbered.withColumn(SEQ_COLUMN, F.struct(F.col(SEQ_COLUMN), F.col(_POSITION))).drop(_POSITION)



def drain_rows(frame, table: TableDef, directory):
    """The drain directory's sentinel rows in the table's columns: the watermark column at
    the sentinel time, every other column NULL (a stream of no rows until a drain)."""
    from pyspark.sql import functions as F

    reader = frame.sparkSession.readStream.schema("t STRING").option("maxFilesPerTrigger", "1")
    sentinel = reader.csv(str(directory))
    return sentinel.select(*[
        (F.to_timestamp(F.col("t")) if f.name == table.watermark.column else F.lit(None))
        .cast(f.dataType).alias(f.name) for f in frame.schema.fields])


def _path_matches(pattern: str, F):
    """Flink's 'source.path.regex-pattern': the whole absolute path of a row's file matches.
    Spark knows the file as a URI (file:/dir/name); its path part is what Flink matches."""
    file_path = F.regexp_replace(F.col("_metadata.file_path"), "^file:(//)?", "")
    return file_path.rlike(f"^(?:{pattern})$")


def _generated_frame(spark, table: TableDef, streaming: bool):
    """A 'nexmark' or 'datagen' table: rows generated in the executors (runtime.datasources)."""
    from streamsql.runtime.datasources import register

    if not streaming and not is_bounded(table):
        raise ConnectorError(
            f"Table '{table.name.name}' is unbounded: set '{GENERATED[table.options['connector']]}' to read it"
            " in batch mode (or run in streaming mode)"
        )
    register(spark)
    try:
        parallelism = spark.sparkContext.defaultParallelism
    except Exception:  # Spark Connect has no SparkContext here
        parallelism = int(spark.conf.get("spark.sql.shuffle.partitions", "4")) // 2
    parallelism = int(table.options.get("scan.parallelism", parallelism))  # datagen's option, if set
    options = {**table.options, "streamsql.partitions": str(max(1, parallelism))}
    reader = (spark.readStream if streaming else spark.read).format(f"streamsql_{table.options['connector']}")
    if table.options["connector"] == "datagen":
        reader = reader.schema(", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns))
    return reader.options(**options).load()


def _handle_malformed(frame, table: TableDef, streaming: bool, counters: dict, F):
    """Fail on (default) or skip and count rows the reader marked corrupt.

    Spark parses only the columns a query reads, so a bad value in an unread column
    would slip through; the check refers to every column (in a branch evaluated only
    for corrupt rows) to keep them all in the scan. The error carries the table's path
    and the raw row; runtime.failures finds the file and line.
    """
    fmt = table.options["format"]
    corrupt = F.col(CORRUPT_COLUMN)
    every_column = F.length(F.to_json(F.struct(*[F.col(f"`{c.name}`") for c in table.physical_columns])))
    if is_true(table.options, f"{fmt}.ignore-parse-errors"):
        metric = f"skipped_{table.name.database}_{table.name.name}"
        counted = F.count(F.when(corrupt.isNotNull(), 1)).alias("rows")
        if counters is None:  # not counted (runtime.sources.lookup_frame)
            pass
        elif streaming:
            frame = frame.observe(metric, counted)
            counters[metric] = table
        else:
            from pyspark.sql import Observation

            observation = Observation(metric)
            frame = frame.observe(observation, counted)
            counters[metric] = (table, observation)
        return frame.filter(F.when(corrupt.isNull(), F.lit(True)).otherwise(every_column < 0))
    message = F.concat_ws("|", F.lit(MALFORMED_MARK), F.lit(table.options["path"]), every_column.cast("string"), corrupt)
    return frame.filter(F.when(corrupt.isNotNull(), F.raise_error(message)).otherwise(F.lit(True)))


def _format_options(table: TableDef) -> dict[str, str]:
    options = table.options
    fmt = options["format"]
    if fmt == "csv":
        result = {
            **csv_format(options),
            "header": "false",
            "mode": "PERMISSIVE",
            "columnNameOfCorruptRecord": CORRUPT_COLUMN,
        }
        if is_true(options, "csv.allow-comments"):
            result["comment"] = "#"
        return result
    if fmt == "json":
        return {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    return {}


def _watermark_delay(table: TableDef) -> str:
    return f"{watermark_delay_ms(table)} milliseconds"
