"""A throwaway Apache Kafka broker for tests: one real Kafka 4.x node in KRaft combined mode
(broker and controller in one JVM), started from its Maven jars, on free loopback ports,
its log in a temp dir; always stopped, its whole process group, and the dir removed.

It is a tests/kafka_broker.py Broker (``bootstrap``, ``create_topic``, ``read_all``) with
``produce`` (the producer batches: each record of a batch gets its own offset), ``stop()``
and ``restart()`` (the same ports and log dir: what was written survives); consumer groups
and transactions are Kafka's own.

The jars (``org.apache.kafka:kafka_2.13`` and what it needs at run time, with Log4j 2
behind SLF4J for its logging) come from streamsql.runtime.maven, cached after the first
resolution; ``kafka_classpath()`` is None when Maven is not installed.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.kafka_broker import Broker
from tests.ports import free_ports

KAFKA_VERSION = "4.4.0"  # the newest 4.x served here (4.0.0-4.4.0 resolve)
COORDINATES = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
               "org.apache.logging.log4j:log4j-slf4j2-impl:2.25.4",  # Kafka 4 logs through Log4j 2
               "org.slf4j:slf4j-api:2.0.17")  # (Kafka asks for 1.7; the binding needs 2)
JVM_OPTIONS = ("-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
START_S = 90  # a cold JVM on a busy 2-core machine
STOP_GRACE_S = 15  # SIGTERM's controlled shutdown, then SIGKILL
LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.started.name = kafka.server.KafkaRaftServer
logger.started.level = INFO
"""


def kafka_classpath() -> str | None:
    """The broker's classpath, resolved with Maven (cached); None when Maven is missing."""
    if shutil.which("mvn") is None:
        return None
    from streamsql.runtime.maven import classpath

    return classpath(list(COORDINATES), exclude=())


SASL_USERS = {"alice": "alice-secret"}  # a SASL_PLAINTEXT listener's PLAIN users (apache_kafka(sasl=True))


def server_properties(port: int, controller_port: int, log_dir: Path, sasl_port: int | None = None) -> str:
    """One node that is both the broker and the (only) controller, loopback only; with
    ``sasl_port``, a SASL_PLAINTEXT listener there too (PLAIN, the users of SASL_USERS)."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",  # (50 by default: a first group's coordinator loads slower)
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Tests stamp records in 2023-2024: Kafka's time retention (7 days by the records' own
        # timestamps, checked every 5 minutes) deleted a topic's records between a test's
        # produce and its read now and then (Spark's reader: offset 0 out of range).
        "log.retention.ms": "-1",
    }
    if sasl_port is not None:
        for key in ("listeners", "advertised.listeners"):
            settings[key] += f",SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        settings["listener.security.protocol.map"] += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
        settings["sasl.enabled.mechanisms"] = "PLAIN"
        users = " ".join(f'user_{name}="{password}"' for name, password in SASL_USERS.items())
        settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.plain.PlainLoginModule required {users};')
    return "".join(f"{key}={value}\n" for key, value in settings.items())


@dataclass
class ApacheKafka(Broker):
    controller_port: int = 0
    directory: Path = Path()
    classpath: str = ""
    process: subprocess.Popen | None = field(default=None, repr=False)
    sasl_port: int | None = None

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def log(self) -> Path:
        return self.directory / "kafka.log"

    def produce(self, topic: str, records, partition: int | None = None) -> None:
        """records: (key, value) pairs of str/bytes/None, or (key, value, timestamp-ms);
        sent in batches (Kafka gives each record of a batch its own offset)."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        errors = []
        for key, value, *rest in records:
            extra = {"timestamp": rest[0]} if rest else {}
            if partition is not None:
                extra["partition"] = partition
            producer.produce(topic, value=value, key=key, on_delivery=lambda e, m: e and errors.append(e), **extra)
            producer.poll(0)
        if producer.flush(30) or errors:
            raise RuntimeError(f"produce failed: {errors[0] if errors else 'records left unsent after 30 s'}")

    def java(self, main: str, *args: str) -> list[str]:
        return ["java", *JVM_OPTIONS, f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
                "-cp", self.classpath, main, *args]

    def start(self) -> None:
        """Start the node on its ports and log dir (formatted already) and wait until it
        answers metadata requests with itself as a broker."""
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.java("kafka.Kafka", str(self.directory / "server.properties")),
                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)  # its own process group
        from confluent_kafka.admin import AdminClient

        admin = None  # made once the port accepts (librdkafka logs each refused connection)
        deadline = time.time() + START_S
        while True:
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"kafka did not start: {self.log.read_text(errors='replace')[-3000:]}")
            try:
                if admin is None:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    admin = AdminClient({"bootstrap.servers": self.bootstrap})
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # refused, or a KafkaException while it starts
                time.sleep(0.2)

    def stop(self) -> None:
        """SIGTERM to the node's process group (a controlled shutdown), SIGKILL after the grace."""
        process, self.process = self.process, None
        if process is None:
            return
        for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
        try:  # anything else in the group (there should be none)
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)

    def restart(self) -> None:
        """Stop and start again on the same ports and log dir."""
        self.stop()
        self.start()


@contextmanager
def apache_kafka(classpath: str | None = None, sasl: bool = False):
    """A running ApacheKafka (``sasl``: with a SASL_PLAINTEXT listener as well); stopped and its
    dir removed on exit, errors included."""
    classpath = classpath or kafka_classpath()
    if classpath is None:
        raise RuntimeError("Maven (mvn) is needed to fetch Apache Kafka's jars")
    port, controller_port, sasl_port = free_ports(3)
    directory = Path(tempfile.mkdtemp(prefix="streamsql-kafka-"))
    broker = ApacheKafka(port, controller_port, directory, classpath, sasl_port=sasl_port if sasl else None)
    try:
        (directory / "log4j2.properties").write_text(LOG4J)
        (directory / "server.properties").write_text(
            server_properties(port, controller_port, directory / "logs", broker.sasl_port))
        cluster_id = "-"
        while cluster_id.startswith("-"):  # (an id starting with '-' reads as an option: the format fails)
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        formatted = subprocess.run(broker.java("kafka.tools.StorageTool", "format", "--cluster-id", cluster_id,
                                               "--config", str(directory / "server.properties"), "--standalone"),
                                   capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed: {(formatted.stdout + formatted.stderr)[-3000:]}")
        broker.start()
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


def new_topic(broker: Broker, partitions: int = 1) -> str:
    """A topic of its own for one test, on the module's broker."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name
