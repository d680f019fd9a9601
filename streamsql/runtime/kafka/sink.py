"""Writing into 'kafka' (append-only) and 'upsert-kafka' (by key).

The rows' keys and values are encoded in the JVM (runtime.kafka.formats), then:

- 'sink.delivery-guarantee' = 'at-least-once' (Flink's default) and 'none': Spark's own Kafka
  sink (``format("kafka")``, the Java producer): each task waits for its records' delivery,
  a failed one fails the task, Spark retries it (and replays an unfinished micro-batch
  after a crash), so every row reaches the topic at least once; a retry may write some
  twice. ('none' is written the same way: Flink's 'none' merely does not wait on
  checkpoints, waiting costs nothing here.) The key picks the partition with Kafka's own
  hash (murmur2), 'sink.partitioner' = 'round-robin' Kafka's RoundRobinPartitioner.
- 'exactly-once': Kafka transactions that also record the micro-batch, so a replayed batch
  is not written again (runtime.kafka.transactions, with confluent-kafka: Spark's Kafka
  sink has no transactions).

upsert-kafka writes Flink's changelog by key: +I and +U as the row, -D as a tombstone (the
key with a null value), -U not at all. Rows of one key stay in order: they are produced from
the one task that holds the key (the stateful operator's bucket), and the key picks the
partition, so readers see a key's changes in order.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamsql.changelog import DELETE, ROWKIND_COLUMN, UPDATE_BEFORE
from streamsql.errors import ConnectorError
from streamsql.plan.kafka_options import key_fields, value_columns, value_format
from streamsql.plan.objects import TableDef
from streamsql.runtime.kafka.formats import encoded_value


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


def write_records(frame, table: TableDef, batch_id: int | None = None, query: str | None = None) -> int | None:
    """Produce the frame's rows into the table's topic. With 'exactly-once', in transactions
    recording (query, batch_id) — a batch write (no batch id) is one run of its own — and the
    number of records written now; else with Spark's Kafka sink (None)."""
    if table.options.get("sink.delivery-guarantee") == "exactly-once":
        import uuid

        from streamsql.runtime.kafka.transactions import write_transactionally

        if batch_id is None:
            batch_id, query = 0, uuid.uuid4().hex[:8]
        return write_transactionally(records(frame, table), table, batch_id, query)
    produced = records(frame, table)
    if "sink.parallelism" in table.options:  # by key: a key's rows come from one task, in order
        produced = produced.repartition(int(table.options["sink.parallelism"]), "key")
    from streamsql.runtime.kafka.jars import connector_needed

    with connector_needed(table.name.name, frame.sparkSession):
        produced.write.format("kafka").options(**sink_options(table)).save()
    return None


# Consumer-side or set by Spark: not passed to the producer.
_NOT_PRODUCER = frozenset({"group.id", "auto.offset.reset", "enable.auto.commit", "isolation.level",
                           "partition.discovery.interval.ms", "key.serializer", "value.serializer",
                           "key.deserializer", "value.deserializer"})


def sink_options(table: TableDef) -> dict[str, str]:
    """Spark's Kafka sink options: the topic, 'properties.*' as the producer's ``kafka.*``."""
    from streamsql.runtime.kafka.jars import client_options

    options = table.options
    settings = client_options(options, _NOT_PRODUCER)
    if options.get("sink.partitioner") == "round-robin":
        settings["kafka.partitioner.class"] = "org.apache.kafka.clients.producer.RoundRobinPartitioner"
    settings["topic"] = options["topic"].split(";")[0].strip()
    return settings


@dataclass(frozen=True)
class KafkaMicroBatch:
    """foreachBatch for a kafka sink: produce the micro-batch (at least once across replays,
    or exactly once)."""

    table: TableDef
    checkpoint: str

    def __call__(self, frame, batch_id: int) -> None:
        from streamsql.runtime.kafka.transactions import query_id

        write_records(frame, self.table, batch_id, query_id(self.checkpoint))
