"""Kafka over SASL as Flink users configure it: Java's ``properties.sasl.jaas.config`` with PLAIN, against
Apache Kafka's SASL_PLAINTEXT listener. Reads and both sinks work with the right password; a wrong one,
or a login module streamsql cannot use, is one message naming the table before Spark runs."""

from __future__ import annotations

import json
import shutil

import pytest

from streamsql.errors import ConnectorError
from streamsql.runtime.kafka.client import _librdkafka

# -- the driver client's properties, without a broker ----------------------------------------------


def test_jaas_credentials_become_librdkafka_s_and_java_tuning_stays_with_spark():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="p\\"w";'
    config = {"streamsql.table": "t", "sasl.jaas.config": jaas, "sasl.mechanism": "SCRAM-SHA-256",
              "fetch.max.wait.ms": "10", "max.poll.records": "100", "bootstrap.servers": "h:1"}
    assert _librdkafka(config) == {"sasl.mechanism": "SCRAM-SHA-256", "bootstrap.servers": "h:1",
                                   "sasl.username": "bob", "sasl.password": 'p"w'}
    with pytest.raises(ConnectorError, match="Table 't': 'properties.sasl.jaas.config' uses"
                                             " com.sun.security.auth.module.Krb5LoginModule"):
        _librdkafka({"streamsql.table": "t", "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule"
                                                                 " required useKeyTab=true;"})


# -- against a SASL listener ---------------------------------------------------------------------------

pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def broker():
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("Maven and Java are needed to run Apache Kafka from its jars")
    from tests.apache_kafka import apache_kafka

    with apache_kafka(sasl=True) as running:
        yield running


def _sasl(broker, topic: str, password: str, extra: str = "") -> str:
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{password}";'
    return (f"'connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{broker.sasl_bootstrap}',"
            " 'properties.security.protocol' = 'SASL_PLAINTEXT', 'properties.sasl.mechanism' = 'PLAIN',"
            f" 'properties.sasl.jaas.config' = '{jaas}', 'format' = 'json'{extra}")


BOUNDED = ", 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset'"


@pytest.mark.spark
def test_reads_and_writes_over_sasl_plain(run, broker):
    from tests.apache_kafka import SASL_USERS, new_topic

    source, copy, once = new_topic(broker, 2), new_topic(broker, 1), new_topic(broker, 1)
    broker.produce(source, [(None, json.dumps({"id": i, "k": f"k{i % 3}"})) for i in range(30)])
    password = SASL_USERS["alice"]
    run.rows(f"CREATE TABLE src (id BIGINT, k STRING) WITH ({_sasl(broker, source, password, BOUNDED)});\n"
             f"CREATE TABLE copy (id BIGINT, k STRING) WITH ({_sasl(broker, copy, password)});\n"
             f"CREATE TABLE once (id BIGINT, k STRING) WITH ({_sasl(broker, once, password)},"
             " 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'sasl');\n")
    assert run.rows("SELECT k, COUNT(*) FROM src GROUP BY k ORDER BY k") == [["k0", "10"], ["k1", "10"], ["k2", "10"]]
    run.rows("INSERT INTO copy SELECT id, UPPER(k) FROM src;\nINSERT INTO once SELECT id, k FROM src WHERE id < 5;\n")
    assert sorted(json.loads(m.value())["id"] for m in broker.read_all(copy)) == list(range(30))
    assert sorted(json.loads(m.value())["id"] for m in broker.read_all(once)) == list(range(5))


@pytest.mark.spark
def test_a_wrong_password_is_one_message_naming_the_table(broker):
    from streamsql.runtime.kafka.reader import check_readable
    from tests.apache_kafka import new_topic

    topic = new_topic(broker, 1)
    options = dict(item.split(" = ") for item in _sasl(broker, topic, "wrong").replace("'", "").split(", "))
    with pytest.raises(ConnectorError) as error:
        check_readable(options, "src")
    message = str(error.value)
    assert message.startswith("Table 'src': cannot reach Kafka") and "Authentication failed" in message, message
    assert "Traceback" not in message and len(message.splitlines()) == 1
