"""Kafka read and write throughput through streamsql, against a local Apache Kafka broker
(the tests' tests/apache_kafka.py: Kafka 4.4 in KRaft mode from its Maven jars, on loopback).

    python bench/kafka.py [records]      # default 100000; prints rows/s for each step
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(records: int) -> None:
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.results import ResultWriter
    from streamsql.runtime.session import default_conf, start_session, stop_session
    from tests.apache_kafka import apache_kafka

    spark = start_session(default_conf())
    try:
        with apache_kafka() as broker:
            broker.create_topic("bench_in", 4)
            broker.create_topic("bench_out", 4)
            began = time.time()
            broker.produce("bench_in", ((str(i), json.dumps({"id": i, "name": f"name-{i}", "price": i % 1000}))
                                        for i in range(records)))
            _report("produce (confluent-kafka)", records, time.time() - began)
            work = Path(tempfile.mkdtemp())
            engine = Engine(Catalog(work / "catalog"), base_dir=work, log=lambda _: None, spark=spark)
            common = f"'properties.bootstrap.servers' = '{broker.bootstrap}', 'format' = 'json'"
            engine.run_script(
                f"CREATE TABLE src (id BIGINT, name STRING, price BIGINT) WITH ('connector' = 'kafka', 'topic' = 'bench_in',"
                f" 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset', {common});"
                f"CREATE TABLE dst (id BIGINT, name STRING, price BIGINT) WITH ('connector' = 'kafka', 'topic' = 'bench_out',"
                f" {common}); SET 'execution.runtime-mode' = 'batch';", ResultWriter("csv", io.StringIO()))
            began = time.time()
            out = io.StringIO()
            engine.run_script("SELECT COUNT(*), SUM(price) FROM src", ResultWriter("csv", out))
            _report(f"read: SELECT COUNT(*) over the topic ({out.getvalue().splitlines()[1]})", records, time.time() - began)
            began = time.time()
            engine.run_script("INSERT INTO dst SELECT * FROM src", ResultWriter("csv", io.StringIO()))
            _report("read + write: INSERT INTO kafka SELECT * FROM kafka", records, time.time() - began)
            engine.stop()
    finally:
        stop_session(spark)


def _report(what: str, rows: int, seconds: float) -> None:
    print(f"{what}: {rows} rows in {seconds:.1f} s = {rows / seconds:,.0f} rows/s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
