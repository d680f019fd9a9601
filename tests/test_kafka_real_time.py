"""Spark's real-time mode for Kafka -> Kafka: ``SET 'execution.trigger' = 'real-time'``. The shapes it
cannot run are refused at plan time, naming why (no JVM); a stateless job runs on Apache Kafka and
passes records on while its batch lasts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

from streamsql.catalog import Catalog
from streamsql.errors import ValidationError
from streamsql.runtime.engine import Engine
from tests.conftest import ROOT, wait_for


def _kafka(name: str, columns: str, topic: str, bootstrap: str, extra: str = "") -> str:
    return (f"CREATE TABLE {name} ({columns}) WITH ('connector' = 'kafka', 'topic' = '{topic}',"
            f" 'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json'{extra});\n")


DDL = (_kafka("src", "id BIGINT, k STRING", "a", "localhost:1", ", 'scan.startup.mode' = 'earliest-offset'")
       + _kafka("dst", "id BIGINT, k STRING", "b", "localhost:1")
       + _kafka("once", "id BIGINT, k STRING", "c", "localhost:1",
                ", 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'x'")
       + "CREATE TABLE agg (k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',"
         " 'topic' = 'd', 'properties.bootstrap.servers' = 'localhost:1', 'key.format' = 'json', 'value.format' = 'json');\n"
       + "CREATE TABLE f (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '/tmp/streamsql-nowhere', 'format' = 'csv');\n"
       + "SET 'execution.trigger' = 'real-time';\n")


@pytest.mark.parametrize("query, message", [
    ("INSERT INTO agg SELECT k, COUNT(*) FROM src GROUP BY k", "GroupAggregate(groupBy=[k]"),
    ("INSERT INTO dst SELECT a.id, b.k FROM src a JOIN src b ON a.id = b.id", "Join(joinType=[InnerJoin]"),
    ("INSERT INTO f SELECT id FROM src", "the sink 'f' is a 'filesystem' table"),
    ("INSERT INTO once SELECT id, k FROM src", "writes exactly once, in Kafka transactions"),
    ("SELECT * FROM src", "a SELECT is shown through micro-batches"),
])
def test_shapes_real_time_mode_cannot_run_are_refused_at_plan_time(tmp_path, query, message):
    engine = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)
    with pytest.raises(ValidationError) as error:
        engine.plan_script(DDL + query)
    assert message in str(error.value)
    assert "RESET 'execution.trigger' runs it in micro-batches" in str(error.value)


def test_a_stateless_kafka_to_kafka_insert_plans_for_real_time(tmp_path):
    engine = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)
    engine.plan_script(DDL + "INSERT INTO dst SELECT id, UPPER(k) FROM src WHERE id > 3")
    with pytest.raises(ValidationError, match="must be one of micro-batch, real-time"):
        engine.plan_script("SET 'execution.trigger' = 'soon'")


@pytest.mark.spark
def test_a_real_time_job_passes_records_on_as_they_arrive(tmp_path, monkeypatch):
    pytest.importorskip("confluent_kafka")
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.skip("Maven and Java are needed to run Apache Kafka from its jars")
    from tests.apache_kafka import apache_kafka, new_topic
    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with apache_kafka() as broker:
        source, out = new_topic(broker, 1), new_topic(broker, 1)
        script = tmp_path / "job.sql"
        script.write_text(_kafka("src", "id BIGINT, k STRING", source, broker.bootstrap,
                                 ", 'scan.startup.mode' = 'earliest-offset'")
                          + _kafka("dst", "id BIGINT, k STRING", out, broker.bootstrap)
                          + "SET 'execution.trigger' = 'real-time';\nSET 'execution.checkpointing.interval' = '30 s';\n"
                            "INSERT INTO dst SELECT id, UPPER(k) FROM src WHERE MOD(id, 2) = 0;\n")
        broker.produce(source, [(None, json.dumps({"id": i, "k": f"k{i}"})) for i in range(10)])
        job = cli(tmp_path, "run", str(script))
        try:
            def out_ids() -> list:
                return sorted(json.loads(m.value())["id"] for m in broker.read_all(out))

            assert wait_for(lambda: len(out_ids()) >= 5 or job.poll() is not None, 240), out_ids()
            assert job.poll() is None, job.stderr.read()
            # records produced now come through while the same (30 s) batch runs: one by one
            sent = {}
            for i in range(10, 30):
                sent[i] = int(time.time() * 1000)
                broker.produce(source, [(None, json.dumps({"id": i, "k": f"k{i}"}), sent[i])])
                if i % 2 == 0:
                    assert wait_for(lambda: i in out_ids(), 20), (i, out_ids())
            assert out_ids() == list(range(0, 30, 2))
            records = {json.loads(m.value())["id"]: m for m in broker.read_all(out)}
            assert sorted(json.loads(m.value())["k"] for m in records.values()) == sorted(f"K{i}" for i in range(0, 30, 2))
            stamps = sorted(records[i].timestamp()[1] - sent[i] for i in range(10, 30, 2))
            print(f"real-time mode: sent -> produced {stamps[0]}-{stamps[-1]} ms (the records' own timestamps)")
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            job.wait()
