"""A Kafka table's raw records, read by Spark's own Kafka connector (``format("kafka")``,
runtime.kafka.jars), as ``RAW_SCHEMA``: what runtime.kafka.formats decodes.

Where a read starts and ends is Flink's: the driver resolves every 'scan.startup.mode' and
'scan.bounded.mode' to an offset per partition (runtime.kafka.client, with confluent-kafka)
and hands them to Spark as ``startingOffsets`` / ``endingOffsets`` JSON. A batch read
``assign``s exactly the partitions it resolved. A stream ``subscribe``s (or
``subscribePattern``), so Spark discovers partitions added later (read from their start,
as Flink's partition discovery does) — but a watermarked one ``assign``s one partition per
stream (``split_streams``: a watermark each, runtime.kafka.frames); it resumes from its checkpoint, where
``startingOffsets`` no longer counts. Spark's streaming source has no end offsets, so a
bounded table streamed (bounded input run as micro-batches, availableNow) drops the records
past its bound per partition.

As Flink's KafkaSource: 'properties.*' are the consumer's (``kafka.*``) but for the ones
Flink or Spark set themselves (deserializers, 'group.id', 'auto.offset.reset',
'enable.auto.commit'); records are read 'read_uncommitted', the Kafka client's default and
so Flink's, unless 'properties.isolation.level' says otherwise (a reader of streamsql's
exactly-once sink, which writes in transactions, sets 'read_committed', as in Flink). The
driver resolves offsets with the same level: 'latest' is the high watermark, or under
'read_committed' the last stable offset. A record Spark
cannot fetch fails the query (Spark's ``failOnDataLoss``, kept on): with it off, Spark skips
what a poll did not return in time as if retention had deleted it, and a loaded test run
read 0 of 7 records with no error. Flink reads on past records retention deleted; here the
job stops and says so, and a restart after fixing the startup offsets goes on.
'source.max-rows-per-batch' is ``maxOffsetsPerTrigger``.

A stream of a table with 'properties.group.id' commits each finished micro-batch's end
offsets to the group (runtime.kafka.commits), as Flink does on checkpoints.
"""

from __future__ import annotations

import json

from streamsql.plan.kafka_options import is_bounded_kafka
from streamsql.runtime.kafka.client import ISOLATION
from streamsql.plan.objects import TableDef

RAW_SCHEMA = ("key BINARY, value BINARY, topic STRING, `partition` INT, `offset` BIGINT, `timestamp` TIMESTAMP,"
              " timestamp_type STRING, headers MAP<STRING, BINARY>, leader_epoch INT")
DEFAULT_ROWS_PER_BATCH = 1_000_000
# Set by Flink or Spark, not by 'properties.*' (Spark refuses most of them as kafka.*).
NOT_PASSED = frozenset({"bootstrap.servers", "group.id", "auto.offset.reset", "enable.auto.commit", "isolation.level",
                        "key.deserializer", "value.deserializer", "key.serializer", "value.serializer",
                        "interceptor.classes", "partition.discovery.interval.ms", "client.id.prefix"})
# Spark's timestampType is Kafka's TimestampType id.
TIMESTAMP_TYPE = "CASE timestampType WHEN 0 THEN 'CreateTime' WHEN 1 THEN 'LogAppendTime' END"
# Flink's headers metadata is a map, a later header of a key replacing an earlier one.
HEADERS = ("coalesce(map_from_entries(filter(headers, (h, i) -> NOT exists(slice(headers, i + 2, size(headers)),"
           " x -> x.key = h.key))), CAST(map() AS MAP<STRING, BINARY>))")


class Offsets:
    """Driver side: the table's partitions and the offsets its modes name."""

    def __init__(self, options: dict[str, str], table: str):
        from streamsql.runtime.kafka.client import client_config

        self.options = options
        self.table = table
        self.config = client_config(options, table)
        self._client = None

    @property
    def client(self):
        from streamsql.runtime.kafka.client import consumer

        if self._client is None:
            self._client = consumer(self.config, group=True)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def layout(self) -> dict[str, list[int]]:
        from streamsql.runtime.kafka.client import topic_partitions

        listed = [t.strip() for t in self.options.get("topic", "").split(";") if t.strip()]
        return topic_partitions(self.client, listed, self.options.get("topic-pattern"), self.table)

    def startup(self, layout):
        from streamsql.runtime.kafka.client import resolve

        mode = "earliest-offset" if self.options["connector"] == "upsert-kafka" else \
            self.options.get("scan.startup.mode", "group-offsets")
        return resolve(self.client, self.options, layout, mode, "scan.startup", self.table)

    def end(self, layout):
        """The bound ('scan.bounded.mode'), or the current end of every partition."""
        from streamsql.runtime.kafka.client import resolve

        mode = self.options.get("scan.bounded.mode", "unbounded")
        return resolve(self.client, self.options, layout, "latest-offset" if mode == "unbounded" else mode,
                       "scan.bounded", self.table)


def check_readable(options: dict[str, str], table: str = "?") -> None:
    """Before Spark starts (driver): the client properties are valid, the broker answers and
    every topic exists; each is a ConnectorError naming the table."""
    offsets = Offsets(options, table)
    try:
        offsets.layout()
    finally:
        offsets.close()


def bounded_input(table: TableDef) -> dict:
    """What a bounded read of the table covers now: its bound per partition."""
    offsets = Offsets(table.options, table.name.name)
    try:
        return offsets.end(offsets.layout())
    finally:
        offsets.close()


def spark_options(options: dict[str, str]) -> dict[str, str]:
    """The table's 'properties.*' as the Kafka consumer options of Spark's connector."""
    from streamsql.runtime.kafka.jars import client_options

    return {**client_options(options, NOT_PASSED),
            "kafka.isolation.level": options.get("properties.isolation.level", ISOLATION)}


def split_streams(table: TableDef, streaming: bool, real_time: bool,
                  layout: dict[str, list[int]]) -> list[tuple[str, int]] | None:
    """The partitions of ``layout`` a watermarked stream reads as one stream each (so that
    each has its own watermark and the table's is their minimum, as Flink's per-partition
    watermarks), or None: one stream of every partition (no watermark, one partition, a
    topic pattern whose topics come and go, a real-time read, a changelog topic normalized
    as one stream)."""
    from streamsql.plan.kafka_options import source_changelog

    if not streaming or real_time or table.watermark is None or "topic-pattern" in table.options \
            or not source_changelog(table).insert_only:
        return None
    splits = [(t, p) for t, parts in sorted(layout.items()) for p in parts]
    return splits if len(splits) > 1 else None


def raw_streams(spark, table: TableDef, streaming: bool, real_time: bool = False) -> list:
    """The table's records as ``RAW_SCHEMA``, from its startup offsets (to its bound, or for
    a batch read to the current end): (None, one DataFrame of every partition), or one
    (partition, DataFrame) per partition (split_streams), which share the rows-per-batch
    bound. The driver lists the partitions and resolves their offsets once."""
    offsets = Offsets(table.options, table.name.name)
    try:
        layout = offsets.layout()
        start = offsets.startup(layout)
        end = offsets.end(layout) if not streaming or is_bounded_kafka(table) else None
    finally:
        offsets.close()
    splits = split_streams(table, streaming, real_time, layout)
    if splits is None:
        return [(None, _raw_records(spark, table, streaming, real_time, layout, start, end))]
    return [(split, _raw_records(spark, table, streaming, real_time, layout, _of(start, split), _of(end, split),
                                 split, len(splits))) for split in splits]


def _of(offsets: dict | None, split: tuple[str, int]) -> dict | None:
    """The offsets of one partition only."""
    if offsets is None:
        return None
    topic, partition = split
    return {topic: {k: v for k, v in offsets[topic].items() if int(k) == partition}}


def _raw_records(spark, table: TableDef, streaming: bool, real_time: bool, layout, start, end,
                 split: tuple[str, int] | None = None, splits: int = 1):
    """One DataFrame of the records from ``start`` (to ``end``): of every partition, or of
    ``split`` alone, one of ``splits`` streams."""
    name, options = table.name.name, table.options
    if end is not None:  # (a startup past the bound reads nothing)
        end = {t: {p: max(o, start[t][p]) for p, o in parts.items()} for t, parts in end.items()}
    headers = any(c.metadata == "headers" for c in table.metadata_columns)
    settings = {**spark_options(options), "failOnDataLoss": "true", "includeHeaders": str(headers).lower()}
    if streaming:
        if split is not None:
            settings["assign"] = json.dumps({split[0]: [split[1]]})
        elif "topic-pattern" in options:
            settings["subscribePattern"] = options["topic-pattern"]
        else:
            settings["subscribe"] = ",".join(layout)
        if not real_time:  # a real-time batch reads what arrives while it lasts (spark.real_time)
            rows = int(options.get("source.max-rows-per-batch", DEFAULT_ROWS_PER_BATCH))
            settings["maxOffsetsPerTrigger"] = str(max(1, rows // splits))
        settings["startingOffsets"] = json.dumps(start) if any(start.values()) else "earliest"
        settings["groupIdPrefix"] = "streamsql"
    else:
        if not any(layout.values()):  # a pattern that matches no topic
            return spark.createDataFrame([], RAW_SCHEMA)
        settings.update(assign=json.dumps(layout), startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    from streamsql.runtime.kafka.jars import connector_needed

    with connector_needed(name, spark):
        raw = (spark.readStream if streaming else spark.read).format("kafka").options(**settings).load()
    if streaming and end is not None:
        raw = raw.filter(_within(end))
    if streaming and "properties.group.id" in options:
        from streamsql.runtime.kafka.commits import commit_to_group

        commit_to_group(spark, table, sorted(layout), options.get("topic-pattern"), split)
    return raw.selectExpr("key", "value", "topic", "`partition`", "`offset`", "`timestamp`",
                          f"{TIMESTAMP_TYPE} AS timestamp_type",
                          f"{HEADERS} AS headers" if headers else "CAST(NULL AS MAP<STRING, BINARY>) AS headers",
                          "CAST(NULL AS INT) AS leader_epoch")


def _within(end: dict) -> str:
    """A record before its partition's bound (a partition the bound does not list: none)."""
    from streamsql.spark.dialect import spark_string

    cases = " ".join(f"WHEN topic = {spark_string(t)} AND `partition` = {int(p)} THEN `offset` < {int(o)}"
                     for t, parts in sorted(end.items()) for p, o in sorted(parts.items(), key=lambda kv: int(kv[0])))
    return f"CASE {cases} ELSE FALSE END" if cases else "FALSE"
