"""What a test broker offers every test (tests/apache_kafka.py's ApacheKafka is the one
there is): its bootstrap address, creating topics, producing records and reading a topic
back (``produce`` is the subclass's), all with confluent-kafka.
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class Broker:
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def create_topic(self, name: str, partitions: int = 1) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
            future.result(timeout=30)

    def read_all(self, topic: str) -> list:
        """Every record of the topic, partition by partition (assign + explicit offsets)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "tests-read-all", "enable.auto.commit": False})
        try:
            partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
            records = []
            for p in sorted(partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if high <= low:
                    continue
                consumer.assign([TopicPartition(topic, p, low)])
                deadline = time.time() + 20
                # Transaction markers take offsets but are no messages: stop at the position, not a last message.
                while consumer.position([TopicPartition(topic, p)])[0].offset < high:
                    if time.time() > deadline:
                        raise RuntimeError(f"timed out reading {topic}[{p}]")
                    records += [m for m in consumer.consume(100, 1.0) if m.error() is None]
            return records
        finally:
            consumer.close()
