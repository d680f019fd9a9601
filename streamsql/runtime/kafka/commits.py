"""A streamed Kafka table's consumed offsets committed to its 'properties.group.id'.

Flink commits a Kafka source's offsets to its consumer group when a checkpoint completes;
they are not what it resumes from (its checkpoint is), but what 'group-offsets' starts
from and what monitoring shows. Spark's Kafka source never commits, so streamsql does it on
the driver: a StreamingQueryListener (one per session) gets each finished micro-batch's
progress, whose Kafka sources carry their end offsets (the offsets Spark's checkpoint now
holds for them), and commits those of the table's topics to its group with
confluent-kafka.

A listener, rather than the sink's foreachBatch: every sink (files, JDBC, Kafka, print)
gets it without the sink knowing about sources, and the offsets are the ones Spark
committed to its checkpoint (a batch that failed never reports progress). The progress
tells sources apart by their subscription (``KafkaV2[Subscribe[a,b]]``, or one partition's
``KafkaV2[Assign[a-0]]``: a watermarked table streams a partition each), so two tables of
one session on the same topics with different groups both commit what either stream read.
A failed commit loses nothing (the checkpoint holds the offsets): it is skipped.
"""

from __future__ import annotations

import json
import threading

from streamsql.plan.objects import TableDef

_LOCK = threading.Lock()


def commit_to_group(spark, table: TableDef, topics: list[str], pattern: str | None,
                    split: tuple[str, int] | None = None) -> None:
    """Commit the end offsets of every micro-batch that reads ``topics`` (or ``pattern``, or
    the one partition ``split``: a stream of its own, ``KafkaV2[Assign[topic-0]]``)."""
    from streamsql.runtime.kafka.client import client_config

    if split is not None:
        description = partition_description(split)
    else:
        described = f"SubscribePattern[{pattern}]" if pattern is not None else f"Subscribe[{','.join(topics)}]"
        description = f"KafkaV2[{described}]"
    config = client_config(table.options, table.name.name)
    session_listener(spark, "_streamsql_group_commits", _make_listener).watch(description, config)


def partition_description(split: tuple[str, int]) -> str:
    """How Spark's progress names the stream of one partition (runtime.kafka.reader.split_streams)."""
    return f"KafkaV2[Assign[{split[0]}-{split[1]}]]"


def session_listener(spark, attribute: str, make):
    """The session's StreamingQueryListener kept as ``spark.<attribute>``, made by ``make()``
    and added on first use (one per session, whichever thread asks first)."""
    with _LOCK:
        listener = getattr(spark, attribute, None)
        if listener is None:
            listener = make()
            spark.streams.addListener(listener)
            setattr(spark, attribute, listener)
        return listener


def _make_listener():
    from pyspark.sql.streaming import StreamingQueryListener

    class GroupCommits(StreamingQueryListener):
        def __init__(self):
            self.watched: dict[tuple, dict] = {}  # (description, group) -> client config
            self.clients: dict[tuple, object] = {}

        def watch(self, description: str, config: dict) -> None:
            self.watched[(description, config["group.id"])] = config

        def onQueryStarted(self, event):  # noqa: N802 (PySpark's names)
            pass

        def onQueryProgress(self, event):  # noqa: N802
            for source in event.progress.sources:
                for (description, group), config in list(self.watched.items()):
                    if source.description == description and source.endOffset:
                        self._commit((description, group), config, source.endOffset)

        def onQueryIdle(self, event):  # noqa: N802
            pass

        def onQueryTerminated(self, event):  # noqa: N802
            pass

        def _commit(self, key: tuple, config: dict, end_offset: str) -> None:
            from confluent_kafka import TopicPartition

            from streamsql.runtime.kafka.client import consumer

            try:
                ends = json.loads(end_offset)
                wanted = [TopicPartition(t, int(p), int(o)) for t, parts in ends.items() for p, o in parts.items()]
                if not wanted:
                    return
                if key not in self.clients:
                    self.clients[key] = consumer(config, group=True)
                self.clients[key].commit(offsets=wanted, asynchronous=False)
            except Exception:  # noqa: BLE001 (nothing is lost: the checkpoint holds the offsets)
                pass

    return GroupCommits()
