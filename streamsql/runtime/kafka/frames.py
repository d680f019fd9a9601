"""A 'kafka' or 'upsert-kafka' table as a DataFrame of its physical and metadata columns.

Append-only topics (json, csv, raw) stream or read in batches alike. A changelog topic
(upsert-kafka, or the debezium-json format) is read as its final table — the rows the
changelog leaves, which is what a bounded read gives (batch mode, or a bounded table
under a query computed as one batch): upsert-kafka keeps the latest record per key and
drops keys whose latest record is a tombstone; debezium-json applies +I/+U as additions
and -U/-D as retractions of equal rows. Streamed (unbounded), such a topic is a changelog,
``__rowkind`` first, for streamsql's operators: a debezium-json topic's own row kinds, an
upsert-kafka table's records through ChangelogNormalize (spark.stateful.normalize).
"""

from __future__ import annotations

from streamsql.changelog import ADDS, ROWKIND_COLUMN
from streamsql.errors import ConnectorError
from streamsql.plan.kafka_options import is_bounded_kafka, source_changelog, value_format
from streamsql.plan.objects import TableDef
from streamsql.runtime.kafka.formats import column_expressions, debezium_rows, decoded_columns, key_struct

OFFSET_COLUMN = "__streamsql_offset"  # a record's offset in its partition (a bounded read's order)


def kafka_frames(spark, table: TableDef, streaming: bool, real_time: bool = False) -> list:
    """(partition or None, DataFrame) pairs: the table as one DataFrame, or streamed with a
    watermark over several partitions as one per partition (runtime.kafka.reader.split_streams),
    each to get a watermark of its own: Spark's watermark of a stream is the largest time it
    saw less the delay, over all its partitions (a partition read ahead made another's rows
    late), and of several the smallest (spark.sql.streaming.multipleWatermarkPolicy 'min'),
    which is Flink's for a Kafka table."""
    from streamsql.runtime.kafka.reader import raw_streams

    if streaming and is_bounded_kafka(table) and not source_changelog(table).insert_only:
        raise ConnectorError(
            f"Table '{table.name.name}' is a bounded changelog topic: it is read as its final table, in one batch."
            " Reset 'execution.bounded-input' to read it so, or drop 'scan.bounded.mode' to stream its changes.")
    # Spark's Kafka connector (runtime.kafka.reader)
    return [(split, _table_rows(raw, table, streaming)) for split, raw in raw_streams(spark, table, streaming, real_time)]


def _table_rows(raw, table: TableDef, streaming: bool):
    """Raw records as the table's rows (a changelog topic's as its changes or final table)."""
    if table.options["connector"] == "upsert-kafka":
        return _normalized(raw, table) if streaming else _upserted(raw, table)
    if value_format(table) == "debezium-json":
        return _debezium_changes(raw, table) if streaming else _debezium_final(raw, table)
    return _decoded(raw, table, in_order=not streaming and table.watermark is not None)


def _decoded(raw, table: TableDef, keep_tombstones: bool = False, in_order: bool = False):
    """The records as the table's columns; ``in_order``: with each record's partition
    (``SPLIT_COLUMN``) and offset, a bounded read's order for telling late rows apart per
    partition, as Flink's per-partition watermarks do (spark.windows)."""
    from streamsql.spark.windows import SPLIT_COLUMN

    selects, keep = decoded_columns(table)
    frame = raw.selectExpr("*", *selects)
    if not keep_tombstones:
        frame = frame.filter(keep)
    order = [f"struct(topic, `partition`) AS `{SPLIT_COLUMN}`", f"`offset` AS `{OFFSET_COLUMN}`"] if in_order else []
    return frame.selectExpr(*column_expressions(table), *order)


def _normalized(raw, table: TableDef):
    """An upsert topic streamed: its records through ChangelogNormalize (``__rowkind`` first):
    per key the first value +I, a changed one -U/+U, a tombstone -D. A record without a key
    is skipped, as in the final table."""
    from streamsql.spark.stateful.normalize import KEY, OFFSET, TOMB, changelog_normalize

    selects, keep = decoded_columns(table, tombstones=True)
    records = raw.filter("key IS NOT NULL").selectExpr("*", *selects, f"to_json({key_struct(table)}) AS {KEY}")
    if keep:
        records = records.filter(keep)
    records = records.selectExpr(*column_expressions(table), KEY, f"value IS NULL AS {TOMB}", f"`offset` AS {OFFSET}")
    return changelog_normalize(records)


def _upserted(raw, table: TableDef):
    """The latest record per key (by offset: a key's records are in one partition, in order); a
    key whose latest record is a tombstone is gone. Keys compare by value, not by their bytes."""
    from pyspark.sql import functions as F

    columns = raw.columns
    latest = raw.filter(F.col("key").isNotNull()).selectExpr("*", f"{key_struct(table)} AS __k").groupBy("__k").agg(
        F.max_by(F.struct(*[F.col(f"`{c}`") for c in columns]), F.struct("partition", "offset")).alias("__latest"))
    latest = latest.select("__latest.*").filter(F.col("value").isNotNull())
    return _decoded(latest, table)


def _debezium_changes(raw, table: TableDef):
    """The changelog itself, as a stream: ``__rowkind`` first (c/r +I, u -U and +U, d -D),
    then the table's columns, for streamsql's operators (spark.stateful.chain)."""
    parsed, exploded = debezium_rows(table)
    changes = raw.filter("value IS NOT NULL").selectExpr("*", parsed).selectExpr("*", exploded)
    return changes.selectExpr(f"kind AS `{ROWKIND_COLUMN}`", *column_expressions(table, source="row"))


def _debezium_final(raw, table: TableDef):
    """The rows the changelog leaves: +I/+U add a row, -U/-D take an equal one back."""
    from pyspark.sql import functions as F

    parsed, exploded = debezium_rows(table)
    changes = raw.filter("value IS NOT NULL").selectExpr("*", parsed).selectExpr("*", exploded)
    sign = F.when(F.col("kind").isin(*ADDS), 1).otherwise(-1)
    counted = changes.groupBy("row").agg(F.sum(sign).alias("__n")).filter("__n > 0")
    rows = counted.select(F.explode(F.array_repeat(F.col("row"), F.col("__n").cast("int"))).alias("__value"))
    return rows.selectExpr(*column_expressions(table))
