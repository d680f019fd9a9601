"""tests/apache_kafka.py against itself: a real Apache Kafka 4.x (KRaft, one node) starts
from its Maven jars and leaves nothing behind, and has what Tansu lacks — its own offset
for each record of a batch, consumer groups' committed offsets, transactions whose aborted
records a read_committed consumer does not see — and keeps its log across a restart."""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid

import pytest

pytestmark = pytest.mark.spark
confluent_kafka = pytest.importorskip("confluent_kafka")
if shutil.which("mvn") is None or shutil.which("java") is None:
    pytest.skip("Maven and Java are needed to run Apache Kafka from its jars", allow_module_level=True)

from tests.apache_kafka import apache_kafka, new_topic  # noqa: E402


def group_of(pid: int) -> list[str]:
    """The live processes (per ps) whose process group is ``pid``'s."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,pgid=,stat=,args="], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines()
            if line.split()[1] == str(pid) and not line.split()[2].startswith("Z")]


def test_starts_and_stops_leaving_no_process():
    with apache_kafka() as broker:
        pid, directory = broker.process.pid, broker.directory
        assert any("kafka.Kafka" in line for line in group_of(pid))
        broker.create_topic("probe", 3)
        admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        assert len(admin.list_topics("probe", timeout=10).topics["probe"].partitions) == 3
    assert group_of(pid) == []
    assert not directory.exists()


@pytest.fixture(scope="module")
def broker():
    with apache_kafka() as running:
        yield running


def topic(broker, partitions: int = 1) -> str:
    return new_topic(broker, partitions)


def test_a_batch_of_records_gets_distinct_offsets(broker):
    name = topic(broker)
    broker.produce(name, [(f"k{i}", f"v{i}") for i in range(200)], partition=0)
    records = broker.read_all(name)
    assert [m.offset() for m in records] == list(range(200))
    assert [m.value() for m in records] == [f"v{i}".encode() for i in range(200)]


def consume(consumer, count: int, seconds: float = 30) -> list:
    found, deadline = [], time.time() + seconds
    while len(found) < count and time.time() < deadline:
        found += [m for m in consumer.consume(count - len(found), 1.0) if m.error() is None]
    return found


def test_a_consumer_group_commits_its_offsets(broker):
    name, group = topic(broker, 2), f"g-{uuid.uuid4().hex[:8]}"
    broker.produce(name, [(None, f"a{i}") for i in range(5)], partition=0)
    broker.produce(name, [(None, f"b{i}") for i in range(3)], partition=1)
    settings = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False}
    first = confluent_kafka.Consumer(settings)
    first.subscribe([name])
    assert len(consume(first, 8)) == 8
    first.commit(asynchronous=False)
    first.close()

    parts = [confluent_kafka.TopicPartition(name, p) for p in (0, 1)]
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(group, parts)])
    committed = listed[group].result(timeout=30).topic_partitions
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 5), (1, 3)]

    broker.produce(name, [(None, "after")], partition=1)
    second = confluent_kafka.Consumer(settings)
    second.subscribe([name])
    try:
        assert [m.value() for m in consume(second, 1)] == [b"after"]
        assert consume(second, 1, seconds=3) == []
    finally:
        second.close()


def test_an_aborted_transaction_is_hidden_from_read_committed(broker):
    name = topic(broker)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap,
                                         "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for values, commit in ((["c1", "c2"], True), (["x1", "x2", "x3"], False), (["c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(name, value=value, partition=0)
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)

    def values(isolation: str) -> list[bytes]:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                                             "auto.offset.reset": "earliest", "isolation.level": isolation})
        consumer.subscribe([name])
        try:
            return [m.value() for m in consume(consumer, 6, seconds=10)]
        finally:
            consumer.close()

    assert values("read_committed") == [b"c1", b"c2", b"c3"]
    assert values("read_uncommitted") == [b"c1", b"c2", b"x1", b"x2", b"x3", b"c3"]


def test_a_restart_keeps_the_log_and_the_ports(broker):
    name = topic(broker)
    broker.produce(name, [(None, "before")])
    port, old = broker.port, broker.process.pid
    broker.restart()
    assert broker.port == port and broker.process.pid != old and group_of(old) == []
    broker.produce(name, [(None, "after")])
    assert [m.value() for m in broker.read_all(name)] == [b"before", b"after"]
