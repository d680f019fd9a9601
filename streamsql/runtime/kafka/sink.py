"""Writing into 'kafka' (append-only) and 'upsert-kafka' (by key) from the executors.

Each Spark task encodes its rows' keys and values in the JVM (runtime.kafka.formats), then
produces them with confluent-kafka and waits for every delivery report before it ends:

- 'sink.delivery-guarantee' = 'at-least-once' (Flink's default): a failed delivery fails the
  task, Spark retries it (and replays an unfinished micro-batch after a crash), so every
  row reaches the topic at least once; a retry may write some twice.
- 'none': delivery errors are ignored (each task still flushes before it ends).
- 'exactly-once': Kafka transactions that also record the micro-batch, so a replayed batch
  is not written again (runtime.kafka.transactions).

upsert-kafka writes Flink's changelog by key: +I and +U as the row, -D as a tombstone (the
key with a null value), -U not at all. Rows of one key stay in order: they are produced from
the one task that holds the key (the stateful operator's bucket), and the key picks the
partition with Kafka's own hash (murmur2, as Java producers do), so readers see a key's
changes in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamsql.changelog import DELETE, ROWKIND_COLUMN, UPDATE_BEFORE
from streamsql.errors import ConnectorError
from streamsql.plan.kafka_options import key_fields, value_columns, value_format
from streamsql.plan.objects import TableDef
from streamsql.runtime.kafka.formats import encoded_value

FLUSH_TIMEOUT_S = 120


def records(frame, table: TableDef):
    """The frame's rows as Kafka records: ``key`` and ``value`` (BINARY; value NULL for a tombstone)."""
    keys = key_fields(table)
    key_columns = [c for c in table.physical_columns if c.name in keys]
    key = encoded_value(table, key_columns, table.options["key.format"], "key.") if key_columns else "CAST(NULL AS BINARY)"
    value = encoded_value(table, value_columns(table), value_format(table), "value.")
    if ROWKIND_COLUMN in frame.columns:
        frame = frame.filter(f"`{ROWKIND_COLUMN}` != '{UPDATE_BEFORE}'")
        value = f"CASE WHEN `{ROWKIND_COLUMN}` = '{DELETE}' THEN CAST(NULL AS BINARY) ELSE {value} END"
    return frame.selectExpr(f"{key} AS key", f"{value} AS value")


def check_sink(table: TableDef, overwrite: bool) -> None:
    """What a Kafka table cannot take as a sink, before anything runs."""
    name = table.name.name
    if overwrite:
        raise ConnectorError(f"INSERT OVERWRITE {name}: a Kafka topic is a log and cannot be overwritten")
    if "topic" not in table.options or ";" in table.options["topic"].strip(" ;"):
        raise ConnectorError(f"Table '{name}': a Kafka sink writes into one topic: set 'topic' to a single topic"
                             " (not a list, not 'topic-pattern')")
    if value_format(table) == "debezium-json":
        raise ConnectorError(f"Table '{name}': writing 'debezium-json' is not supported yet"
                             " (write json, or use 'upsert-kafka' for a changelog by key)")


def write_records(frame, table: TableDef, batch_id: int | None = None, query: str | None = None) -> int:
    """Produce the frame's rows into the table's topic; the number of records written. With
    'exactly-once', in transactions recording (query, batch_id); a batch write (no batch id)
    is one run of its own."""
    if table.options.get("sink.delivery-guarantee") == "exactly-once":
        import uuid

        from streamsql.runtime.kafka.transactions import write_transactionally

        if batch_id is None:
            batch_id, query = 0, uuid.uuid4().hex[:8]
        return write_transactionally(records(frame, table), table, batch_id, query)
    produced = records(frame, table)
    if "sink.parallelism" in table.options:  # by key: a key's rows come from one task, in order
        produced = produced.repartition(int(table.options["sink.parallelism"]), "key")
    counts = produced.mapInArrow(PartitionProducer(table), "written BIGINT").collect()
    return sum(row.written for row in counts)


@dataclass(frozen=True)
class PartitionProducer:
    """mapInArrow: produce one task's records; yields how many were delivered."""

    table: TableDef

    def __call__(self, batches):
        import pyarrow as pa

        from streamsql.runtime.kafka.client import client_config, producer

        options = self.table.options
        topic = options["topic"].split(";")[0].strip()
        strict = options.get("sink.delivery-guarantee", "at-least-once") != "none"
        partitioner = "random" if options.get("sink.partitioner") == "round-robin" else "murmur2_random"
        client = producer(client_config(options, self.table.name.name), {"partitioner": partitioner})
        failures: list = []

        def delivered(error, message):
            if error is not None:
                failures.append(error)

        written = 0
        for batch in batches:
            keys, values = batch.column("key").to_pylist(), batch.column("value").to_pylist()
            for key, value in zip(keys, values):
                while True:
                    try:
                        client.produce(topic, value=value, key=key, on_delivery=delivered)
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        client.poll(0.1)
                client.poll(0)
            written += len(keys)
            if strict and failures:
                break
        left = client.flush(FLUSH_TIMEOUT_S)
        if strict and (failures or left):
            reason = failures[0].str() if failures else f"{left} record(s) undelivered after {FLUSH_TIMEOUT_S} s"
            raise RuntimeError(f"Kafka sink '{self.table.name.name}' (topic {topic}): {reason}")
        yield pa.RecordBatch.from_arrays([pa.array([written - len(failures)], pa.int64())], names=["written"])


@dataclass(frozen=True)
class KafkaMicroBatch:
    """foreachBatch for a kafka sink: produce the micro-batch (at least once across replays,
    or exactly once)."""

    table: TableDef
    checkpoint: str

    def __call__(self, frame, batch_id: int) -> None:
        from streamsql.runtime.kafka.transactions import query_id

        write_records(frame, self.table, batch_id, query_id(self.checkpoint))
