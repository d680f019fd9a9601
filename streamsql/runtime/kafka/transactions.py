"""'sink.delivery-guarantee' = 'exactly-once': each micro-batch is written in Kafka
transactions that also record it, so a batch Spark replays after a crash is not written again.

1. *Parts.* The batch's records are split into ``N`` parts by a hash of key and value
   (``sink.parallelism``, else Spark's shuffle partitions): a replay of the batch (same
   records, the source reads by offsets) puts each record into the same part again.
2. *One transaction per part.* Part ``p`` is written by a producer with the transactional id
   ``<sink.transactional-id-prefix>-<p>``. Starting it (``init_transactions``) fences any
   earlier producer with that id — a task of a crashed run — and aborts what it left open.
3. *The marker.* In the same transaction the part records the batch as the offset
   ``batch + 1`` committed for the consumer group ``<prefix>-<query id>-<p>`` (Kafka's
   ``send_offsets_to_transaction``, on partition 0 of the sink topic). Before writing, a part
   reads that group's committed offset: at ``batch + 1`` or more, the part was written and is
   skipped. The query id comes from the job's Spark checkpoint, so a job started afresh
   (checkpoint deleted) writes again, as Flink's would with a new prefix.

Readers see the records once the transaction commits when they read with
``isolation.level`` = ``read_committed`` (a streamsql table reading it says so in
'properties.isolation.level': reads default to Kafka's and Flink's 'read_uncommitted').
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from streamsql.plan.objects import TableDef

PART_COLUMN = "__streamsql_part"
TIMEOUT_S = 60


def parts(frame, table: TableDef) -> int:
    if "sink.parallelism" in table.options:
        return int(table.options["sink.parallelism"])
    return int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def query_id(checkpoint: str) -> str:
    """The id Spark keeps in the checkpoint (the same across restarts, new for a fresh start)."""
    try:
        return json.loads((Path(checkpoint) / "metadata").read_text().splitlines()[0])["id"][:8]
    except (OSError, ValueError, KeyError, IndexError):
        return "nocheckpoint"


def write_transactionally(records, table: TableDef, batch_id: int, query: str) -> int:
    """``records`` (key, value) written exactly once for ``batch_id``; the records written now."""
    from pyspark.sql import functions as F

    n = parts(records, table)
    split = records.withColumn(PART_COLUMN, F.pmod(F.hash("key", "value"), F.lit(n)).cast("int")).repartition(n, PART_COLUMN)
    counts = split.mapInArrow(TransactionalParts(table, batch_id, query), "written BIGINT").collect()
    return sum(row.written for row in counts)


@dataclass(frozen=True)
class TransactionalParts:
    """mapInArrow: each part this task holds, in its own transaction with its marker."""

    table: TableDef
    batch_id: int
    query: str

    def __call__(self, batches):
        import pyarrow as pa

        by_part: dict[int, list] = {}
        for batch in batches:
            columns = batch.to_pydict()
            for key, value, part in zip(columns["key"], columns["value"], columns[PART_COLUMN]):
                by_part.setdefault(part, []).append((key, value))
        written = sum(self._write_part(part, rows) for part, rows in sorted(by_part.items()))
        yield pa.RecordBatch.from_arrays([pa.array([written], pa.int64())], names=["written"])

    def _write_part(self, part: int, rows: list) -> int:
        from confluent_kafka import TopicPartition

        from streamsql.runtime.kafka.client import client_config, consumer, producer

        options = self.table.options
        topic = options["topic"].strip(" ;")
        prefix = options["sink.transactional-id-prefix"]
        config = client_config(options, self.table.name.name)
        marker = consumer({**config, "group.id": f"{prefix}-{self.query}-{part}"}, group=True)
        client = producer(config, {"transactional.id": f"{prefix}-{part}", "partitioner": "murmur2_random"})
        try:
            client.init_transactions(TIMEOUT_S)  # fences an earlier writer of this part, aborts its transaction
            done = marker.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)[0].offset
            if done >= self.batch_id + 1:
                return 0  # this part of this batch was committed before the replay
            client.begin_transaction()
            for key, value in rows:
                while True:
                    try:
                        client.produce(topic, value=value, key=key)
                        break
                    except BufferError:
                        client.poll(0.1)
                client.poll(0)
            client.send_offsets_to_transaction([TopicPartition(topic, 0, self.batch_id + 1)],
                                               marker.consumer_group_metadata(), TIMEOUT_S)
            client.commit_transaction(TIMEOUT_S)
            return len(rows)
        finally:
            marker.close()
