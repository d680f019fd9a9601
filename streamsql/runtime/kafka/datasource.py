"""Kafka as a Spark Python data source: raw records (key, value, metadata), read in the
executors with confluent-kafka; decoding into the table's columns is runtime.kafka.formats.

The stream's offset is the next offset to read per partition, ``{topic: {partition: offset}}``,
kept in Spark's checkpoint with each micro-batch: a restarted query resumes exactly where the
last committed micro-batch ended (no record skipped, none read twice). A micro-batch is one
input partition per Kafka partition with records in [start, end); a read ``assign()``s the
partition at ``start``, so no consumer group membership is involved. When the table has
'properties.group.id', the offsets of each finished micro-batch are committed to the group
(what Flink does on checkpoints), which is what 'group-offsets' start from.

Options (set by runtime.kafka.frames): the table's options, and 'streamsql.table' (its name).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

RAW_SCHEMA = ("key BINARY, value BINARY, topic STRING, `partition` INT, `offset` BIGINT, `timestamp` TIMESTAMP,"
              " timestamp_type STRING, headers MAP<STRING, BINARY>, leader_epoch INT")
DEFAULT_ROWS_PER_BATCH = 1_000_000
READ_CHUNK = 5_000  # records per consume() call and per Arrow batch
STALL_S = 60  # a partition that yields nothing for this long while records are due is an error
_TIMESTAMP_TYPES = {0: None, 1: "CreateTime", 2: "LogAppendTime"}


@dataclass
class PartitionRange(InputPartition):
    topic: str
    partition: int
    start: int
    end: int


class KafkaSource(DataSource):
    @classmethod
    def name(cls):
        return "streamsql_kafka"

    def schema(self):
        return RAW_SCHEMA

    def reader(self, schema):
        return _BatchReader(dict(self.options))

    def streamReader(self, schema):
        return _StreamReader(dict(self.options))


class Offsets:
    """Driver side: the table's partitions and the offsets its modes name."""

    def __init__(self, options: dict[str, str]):
        from streamsql.runtime.kafka.client import client_config

        self.options = options
        self.table = options.get("streamsql.table", "?")
        self.config = client_config(options, self.table)
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

    def __getstate__(self):  # Spark pickles readers; a client is made again where it is used
        return {**self.__dict__, "_client": None}

    def layout(self):
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


def check_readable(options: dict[str, str]) -> None:
    """Before Spark starts (driver): the client properties are valid, the broker answers and
    every topic exists; each is a ConnectorError naming the table."""
    offsets = Offsets(options)
    try:
        offsets.layout()
    finally:
        offsets.close()


def _ranges(start: dict, end: dict) -> list[PartitionRange]:
    ranges = []
    for topic, parts in sorted(end.items()):
        for partition, stop in sorted(parts.items(), key=lambda kv: int(kv[0])):
            begin = start.get(topic, {}).get(partition, 0)
            if stop > begin:
                ranges.append(PartitionRange(topic, int(partition), begin, stop))
    return ranges


class _BatchReader(DataSourceReader):
    """A bounded read: from the startup offsets to the bound (or to the current end)."""

    def __init__(self, options: dict[str, str]):
        self.options = options

    def partitions(self):
        offsets = Offsets(self.options)
        layout = offsets.layout()
        ranges = _ranges(offsets.startup(layout), offsets.end(layout))
        offsets.close()
        return ranges or [PartitionRange("", 0, 0, 0)]

    def read(self, partition: PartitionRange):
        yield from read_range(self.options, partition)


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]):
        self.options = options
        self.offsets = Offsets(options)
        self.per_batch = int(options.get("source.max-rows-per-batch", DEFAULT_ROWS_PER_BATCH))
        self.bounded = options.get("scan.bounded.mode", "unbounded") != "unbounded"
        self.target = None  # the end a bounded or availableNow run stops at

    def initialOffset(self):
        return self.offsets.startup(self.offsets.layout())

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.per_batch)

    def prepareForTriggerAvailableNow(self):
        self.target = self.offsets.end(self.offsets.layout())

    def latestOffset(self, start, limit):
        layout = self.offsets.layout()  # new partitions are discovered here
        if self.target is None and self.bounded:
            self.target = self.offsets.end(layout)
        end = self.target if self.target is not None else self.offsets.end(layout)
        new = {}
        for topic, parts in end.items():
            for partition, stop in parts.items():
                # A partition that appeared after the start is read from its beginning.
                begin = start.get(topic, {}).get(partition, 0)
                new.setdefault(topic, {})[partition] = max(begin, stop)
        for topic, parts in start.items():  # keep partitions the bound does not list
            for partition, begin in parts.items():
                new.setdefault(topic, {}).setdefault(partition, begin)
        if isinstance(limit, (ReadMaxRows, ReadAllAvailable)):
            new = _capped(start, new, limit.max_rows if isinstance(limit, ReadMaxRows) else None)
        return new

    def partitions(self, start, end):
        return _ranges(start, end)

    def read(self, partition: PartitionRange):
        yield from read_range(self.options, partition)

    def commit(self, end):
        """Flink commits consumed offsets to the group on checkpoints; Spark's checkpoint is
        what the stream resumes from, the group's offsets are for 'group-offsets' and monitoring."""
        if "properties.group.id" not in self.options or not end:
            return
        from confluent_kafka import TopicPartition

        wanted = [TopicPartition(t, int(p), o) for t, parts in end.items() for p, o in parts.items()]
        try:
            self.offsets.client.commit(offsets=wanted, asynchronous=False)
        except Exception:  # a failed commit loses nothing: Spark's checkpoint holds the offsets
            pass

    def stop(self):
        self.offsets.close()


def _capped(start: dict, end: dict, max_rows: int | None) -> dict:
    """At most ``max_rows`` records in the micro-batch, shared evenly by the partitions behind."""
    if max_rows is None:
        return end
    behind = [(t, p) for t, parts in end.items() for p, o in parts.items() if o > start.get(t, {}).get(p, 0)]
    if not behind:
        return end
    share = max(1, max_rows // len(behind))
    capped = json.loads(json.dumps(end))
    for topic, partition in behind:
        begin = start.get(topic, {}).get(partition, 0)
        capped[topic][partition] = min(end[topic][partition], begin + share)
    return capped


def read_range(options: dict[str, str], part: PartitionRange):
    """The records [start, end) of one partition as Arrow batches (executor side)."""
    import pyarrow as pa
    from confluent_kafka import TopicPartition

    from streamsql.runtime.kafka.client import client_config, consumer

    if part.end <= part.start:
        return
    client = consumer(client_config(options, options.get("streamsql.table", "?")))
    try:
        client.assign([TopicPartition(part.topic, part.partition, part.start)])
        position, last_progress = part.start, time.time()
        while position < part.end:
            messages = client.consume(min(READ_CHUNK, part.end - position), timeout=1.0)
            rows = [m for m in messages if m.error() is None and m.offset() < part.end]
            failed = next((m.error() for m in messages if m.error() is not None and not m.error().code() == -191), None)
            if failed is not None and failed.fatal():
                raise RuntimeError(f"Kafka: {failed.str()}")
            if rows:
                position, last_progress = rows[-1].offset() + 1, time.time()
                yield _arrow(rows, pa)
            else:  # transaction markers and aborted records have offsets but no message
                seen = client.position([TopicPartition(part.topic, part.partition)])[0].offset
                if seen >= part.end:
                    break
                if time.time() - last_progress > STALL_S:
                    why = f": {failed.str()}" if failed is not None else ""
                    raise RuntimeError(f"Kafka: no records from {part.topic} partition {part.partition} at offset"
                                       f" {position} for {STALL_S} s (records up to {part.end} were listed){why}")
            if any(m.offset() >= part.end - 1 for m in messages if m.error() is None):
                break
    finally:
        client.close()


def _arrow(messages, pa):
    timestamps = [m.timestamp() for m in messages]
    headers = [m.headers() for m in messages]
    return pa.RecordBatch.from_arrays([
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
        pa.array([m.topic() for m in messages], pa.string()),
        pa.array([m.partition() for m in messages], pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([t[1] * 1000 if t[0] else None for t in timestamps], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([_TIMESTAMP_TYPES.get(t[0]) for t in timestamps], pa.string()),
        pa.array([list(h) if h is not None else [] for h in headers], pa.map_(pa.string(), pa.binary())),
        pa.array([m.leader_epoch() for m in messages], pa.int32()),
    ], names=["key", "value", "topic", "partition", "offset", "timestamp", "timestamp_type", "headers", "leader_epoch"])


def register(spark) -> None:
    if getattr(spark, "_streamsql_kafka_source", False):
        return
    spark.dataSource.register(KafkaSource)
    spark._streamsql_kafka_source = True


def bounded_input(table) -> dict:
    """What a bounded read of the table covers now: its bound per partition. For the record a
    bounded job keeps of its inputs (runtime.inserts.consumed_inputs), so that a rerun sees
    records produced since."""
    offsets = Offsets({**table.options, "streamsql.table": table.name.name})
    try:
        return offsets.end(offsets.layout())
    finally:
        offsets.close()
