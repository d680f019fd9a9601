"""The kafka connectors against a real Apache Kafka (tests/apache_kafka.py, one KRaft node
per module, from its Maven jars): records produced with confluent-kafka read by streamsql
queries through Spark's Kafka connector, bounded and streaming, every startup mode, the
formats and metadata columns, the sinks, upsert-kafka both ways, consumer groups and
transactions as Kafka has them.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid

import pytest

from tests.conftest import ROOT, wait_for

pytestmark = pytest.mark.spark

pytest.importorskip("confluent_kafka")
if shutil.which("mvn") is None or shutil.which("java") is None:
    pytest.skip("Maven and Java are needed to run Apache Kafka from its jars", allow_module_level=True)

from streamsql.runtime.kafka.jars import PACKAGES  # noqa: E402
from streamsql.runtime.maven import MavenError, resolve  # noqa: E402
from tests.apache_kafka import apache_kafka, new_topic  # noqa: E402

try:  # now, at collection: the tests' Spark session starts later and finds them cached (runtime.kafka.jars)
    resolve(PACKAGES)
except MavenError as error:
    pytest.skip(f"Spark's Kafka connector: {error}", allow_module_level=True)


@pytest.fixture(scope="module")
def broker():
    with apache_kafka() as running:
        yield running


def topic(broker, partitions: int = 2) -> str:
    return new_topic(broker, partitions)


def kafka(name: str, columns: str, broker, topic_name: str, extra: str = "", fmt: str = "'format' = 'json'") -> str:
    return (f"CREATE TABLE {name} ({columns}) WITH ('connector' = 'kafka', 'topic' = '{topic_name}',"
            f" 'properties.bootstrap.servers' = '{broker.bootstrap}', {fmt}{extra});")


BOUNDED = ", 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset'"


def orders(n: int, start: int = 0) -> list:
    return [(f"k{i % 3}", json.dumps({"id": i, "name": f"n{i}", "ts": f"2024-01-01 00:00:{i % 60:02d}.000"}),
             1_700_000_000_000 + i) for i in range(start, start + n)]


def test_bounded_read_formats_keys_and_metadata(run, broker):
    """json with metadata columns; csv with the key in the record key (EXCEPT_KEY); raw."""
    j, c, r = topic(broker), topic(broker, 1), topic(broker, 1)
    broker.produce(j, orders(6))
    broker.produce(c, [(b"alice", b"1|2024-01-01 10:00:00"), (b"bob", b"2|"), (b"carol", b"3|2024-01-02 00:00:01.500"),
                       (b"dave", b"four|2024-01-01 10:00:00")])  # malformed: skipped (ignore-parse-errors)
    broker.produce(r, [(None, "first line"), (None, "second, with a comma")])
    rows = run.rows(
        kafka("j", "id BIGINT, name STRING, ts TIMESTAMP(3), tp STRING METADATA FROM 'topic' VIRTUAL,"
                   " `partition` INT METADATA VIRTUAL, `offset` BIGINT METADATA VIRTUAL,"
                   " rt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp', k AS UPPER(name)", broker, j, BOUNDED)
        + kafka("c", "who STRING, n INT, at TIMESTAMP(3)", broker, c,
                BOUNDED + ", 'key.format' = 'raw', 'key.fields' = 'who', 'value.fields-include' = 'EXCEPT_KEY',"
                " 'value.csv.field-delimiter' = '|', 'value.csv.ignore-parse-errors' = 'true'", fmt="'value.format' = 'csv'")
        + kafka("r", "line STRING", broker, r, BOUNDED, fmt="'format' = 'raw'")
        + "SELECT id, name, ts, tp, `partition`, `offset`, rt, k FROM j ORDER BY id;")
    json_rows, csv_rows, raw_rows = rows, run.rows("SELECT * FROM c ORDER BY who"), run.rows("SELECT * FROM r")
    assert [r[0] for r in json_rows] == [str(i) for i in range(6)]
    assert json_rows[2][:3] == ["2", "n2", "2024-01-01 00:00:02.000"] and json_rows[2][7] == "N2"
    assert {r[3] for r in json_rows} == {j}
    read_back = {(int(m.partition()), m.offset(), json.loads(m.value())["id"]) for m in broker.read_all(j)}
    assert {(int(r[4]), int(r[5]), int(r[0])) for r in json_rows} == read_back  # partition and offset are Kafka's
    assert json_rows[0][6] == "2023-11-14 22:13:20.000" and json_rows[5][6] == "2023-11-14 22:13:20.005"
    assert csv_rows == [["alice", "1", "2024-01-01 10:00:00.000"], ["bob", "2", ""], ["carol", "3", "2024-01-02 00:00:01.500"]]
    assert raw_rows == [["first line"], ["second, with a comma"]]


def test_a_malformed_record_stops_the_query_naming_it(run, broker):
    from streamsql.errors import DataError

    t = topic(broker, 1)
    broker.produce(t, [(None, '{"id": 1}'), (None, '{"id": oops')])
    with pytest.raises(DataError, match=f"Malformed row in Kafka topic {t} partition 0 offset 1: '{{\"id\": oops'"):
        run.rows(kafka("bad", "id BIGINT", broker, t, BOUNDED) + "SELECT * FROM bad")


def test_startup_modes(run, broker):
    t = topic(broker, 2)
    broker.produce(t, [(None, json.dumps({"id": i}), 1_700_000_000_000 + i * 1000) for i in range(10)], partition=0)
    broker.produce(t, [(None, json.dumps({"id": 100 + i})) for i in range(4)], partition=1)
    from confluent_kafka import Consumer, TopicPartition

    group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers"})
    group.commit(offsets=[TopicPartition(t, 0, 7), TopicPartition(t, 1, 3)], asynchronous=False)
    group.close()
    bounded = ", 'scan.bounded.mode' = 'latest-offset'"
    rows = run.rows(
        "SET 'execution.runtime-mode' = 'batch';"
        + kafka("e", "id BIGINT", broker, t, ", 'scan.startup.mode' = 'earliest-offset'" + bounded)
        + kafka("l", "id BIGINT", broker, t, ", 'scan.startup.mode' = 'latest-offset'" + bounded)
        + kafka("g", "id BIGINT", broker, t, ", 'properties.group.id' = 'readers'" + bounded)
        + kafka("s", "id BIGINT", broker, t, ", 'scan.startup.mode' = 'specific-offsets',"
                " 'scan.startup.specific-offsets' = 'partition:0,offset:8'" + bounded)
        + kafka("b", "id BIGINT", broker, t, ", 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' ="
                " 'specific-offsets', 'scan.bounded.specific-offsets' = 'partition:0,offset:2;partition:1,offset:1'")
        + "SELECT 'e', COUNT(*), SUM(id) FROM e UNION ALL SELECT 'l', COUNT(*), SUM(id) FROM l"
          " UNION ALL SELECT 'g', COUNT(*), SUM(id) FROM g UNION ALL SELECT 's', COUNT(*), SUM(id) FROM s"
          " UNION ALL SELECT 'b', COUNT(*), SUM(id) FROM b")
    got = {r[0]: (int(r[1]), int(r[2] or 0)) for r in rows}
    assert got["e"] == (14, sum(range(10)) + sum(range(100, 104)))
    assert got["l"] == (0, 0)
    assert got["g"] == (4, 7 + 8 + 9 + 103)  # from the group's committed offsets
    assert got["s"] == (2 + 4, 8 + 9 + sum(range(100, 104)))  # partition 1 not listed: from its start
    assert got["b"] == (3, 0 + 1 + 100)


def test_streaming_insert_resumes_from_its_checkpoint(run, broker, tmp_path):
    """Bounded input in streaming mode runs as micro-batches with a checkpoint: a rerun reads
    exactly the records produced since (none skipped, none twice)."""
    t = topic(broker, 3)
    broker.produce(t, orders(7))
    script = (kafka("src", "id BIGINT, name STRING, ts TIMESTAMP(3)", broker, t,
                    BOUNDED + ", 'source.max-rows-per-batch' = '3'")
              + f"CREATE TABLE dst (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'out'}',"
                " 'format' = 'csv');")
    run.rows(script + "INSERT INTO dst SELECT id, UPPER(name) FROM src;")
    broker.produce(t, orders(5, start=7))
    run.rows("INSERT INTO dst SELECT id, UPPER(name) FROM src;")
    rows = run.rows("SET 'execution.runtime-mode' = 'batch'; SELECT id, name FROM dst ORDER BY id")
    assert rows == [[str(i), f"N{i}"] for i in range(12)]


def test_sink_and_upsert_kafka_round_trip(run, broker, tmp_path):
    """INSERT INTO kafka (json key and value); an updating query into upsert-kafka, a tombstone
    produced by hand, and the topic read back as its final table."""
    t, out, ups = topic(broker), topic(broker, 1), topic(broker, 2)
    broker.produce(t, orders(9))
    upsert = (f"CREATE TABLE totals (name STRING, n BIGINT, top BIGINT, PRIMARY KEY (name) NOT ENFORCED) WITH ("
              f"'connector' = 'upsert-kafka', 'topic' = '{ups}', 'properties.bootstrap.servers' = '{broker.bootstrap}',"
              " 'key.format' = 'json', 'value.format' = 'json');")
    run.rows(kafka("src", "id BIGINT, name STRING, ts TIMESTAMP(3)", broker, t, BOUNDED + ", 'source.max-rows-per-batch' = '4'")
             + kafka("dst", "id BIGINT, name STRING, grp STRING", broker, out,
                     ", 'key.format' = 'json', 'key.fields' = 'grp'")
             + upsert
             + "INSERT INTO dst SELECT id, name, CAST(id % 2 AS STRING) FROM src;"
               "SET 'execution.bounded-input' = 'stream';"
               "INSERT INTO totals SELECT CAST(id % 3 AS STRING), COUNT(*), MAX(id) FROM src GROUP BY CAST(id % 3 AS STRING);")
    written = broker.read_all(out)
    assert sorted((json.loads(m.key())["grp"], json.loads(m.value())["id"]) for m in written) == sorted(
        (str(i % 2), i) for i in range(9))
    assert json.loads(written[0].value()).keys() == {"id", "name", "grp"}
    changes = broker.read_all(ups)
    assert {json.loads(m.key())["name"] for m in changes} == {"0", "1", "2"}
    assert len(changes) > 3  # micro-batches of 4 rows: keys were updated (+U records), not only inserted
    one = next(m for m in changes if json.loads(m.key())["name"] == "1")
    broker.produce(ups, [(b'{"name": "1"}', None)], partition=one.partition())  # a tombstone deletes key 1
    rows = run.rows("SET 'execution.runtime-mode' = 'batch'; SELECT * FROM totals ORDER BY name")
    assert rows == [["0", "3", "6"], ["2", "3", "8"]]


def test_debezium_json_group_by_equals_the_inserts(run, broker):
    t = topic(broker, 1)
    envelope = lambda op, before, after: json.dumps({"before": before, "after": after, "op": op, "ts_ms": 0})  # noqa: E731
    changes = [
        envelope("r", None, {"id": 1, "city": "Oslo", "amount": 10}),
        envelope("c", None, {"id": 2, "city": "Oslo", "amount": 5}),
        envelope("c", None, {"id": 3, "city": "Rome", "amount": 7}),
        envelope("u", {"id": 2, "city": "Oslo", "amount": 5}, {"id": 2, "city": "Rome", "amount": 6}),
        envelope("d", {"id": 1, "city": "Oslo", "amount": 10}, None),
        envelope("c", None, {"id": 4, "city": "Oslo", "amount": 1}),
    ]
    broker.produce(t, [(None, c) for c in changes])
    rows = run.rows(
        kafka("cdc", "id BIGINT, city STRING, amount BIGINT", broker, t, BOUNDED, fmt="'format' = 'debezium-json'")
        + "CREATE TEMPORARY VIEW same AS SELECT * FROM (VALUES (3, 'Rome', 7), (2, 'Rome', 6), (4, 'Oslo', 1))"
          " AS v(id, city, amount);"
        "SELECT city, COUNT(*), SUM(amount) FROM cdc GROUP BY city ORDER BY city;")
    same = run.rows("SELECT city, COUNT(*), SUM(amount) FROM same GROUP BY city ORDER BY city")
    assert rows == same == [["Oslo", "1", "1"], ["Rome", "2", "13"]]


def test_debezium_changes_stream_through_a_group_by_into_upsert_kafka(broker, tmp_path, monkeypatch):
    """An unbounded debezium-json topic is a changelog: a continuous GROUP BY reads its row
    kinds (an update moves a row from one city to another, a delete takes one back) and
    keeps an upsert-kafka table equal to the topic's final table, read in batch."""
    import os

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    source, out = topic(broker, 1), topic(broker, 1)
    envelope = lambda op, before, after: json.dumps({"before": before, "after": after, "op": op})  # noqa: E731
    row = lambda i, city, amount: {"id": i, "city": city, "amount": amount}  # noqa: E731
    broker.produce(source, [(None, envelope("c", None, row(i, "Oslo" if i % 2 else "Rome", i))) for i in range(6)])
    cdc = kafka("cdc", "id BIGINT, city STRING, amount BIGINT", broker, source,
                ", 'scan.startup.mode' = 'earliest-offset'", fmt="'format' = 'debezium-json'")
    totals = (f"CREATE TABLE totals (city STRING, n BIGINT, total BIGINT, PRIMARY KEY (city) NOT ENFORCED) WITH ("
              f"'connector' = 'upsert-kafka', 'topic' = '{out}', 'properties.bootstrap.servers' = '{broker.bootstrap}',"
              " 'key.format' = 'json', 'value.format' = 'json');")
    script = tmp_path / "job.sql"
    script.write_text(cdc + totals + "SET 'execution.checkpointing.interval' = '1 s';"
                      "INSERT INTO totals SELECT city, COUNT(*), SUM(amount) FROM cdc GROUP BY city;")

    def final() -> dict:
        table = {}
        for message in broker.read_all(out):
            key = json.loads(message.key())["city"]
            table[key] = None if message.value() is None else tuple(json.loads(message.value())[c] for c in ("n", "total"))
        return {k: v for k, v in table.items() if v is not None}

    launched, _ = cli(tmp_path, "run", "--detach", str(script)).communicate(timeout=120)
    job_id = launched.split()[1]
    try:
        assert wait_for(lambda: final() == {"Oslo": (3, 9), "Rome": (3, 6)}, 240), final()
        broker.produce(source, [
            (None, envelope("u", row(1, "Oslo", 1), row(1, "Rome", 10))),  # moves from Oslo to Rome
            (None, envelope("d", row(3, "Oslo", 3), None)),
            (None, envelope("d", row(5, "Oslo", 5), None)),  # Oslo is left empty: its key is deleted
            (None, envelope("c", None, row(7, "Bern", 7))),
        ])
        assert wait_for(lambda: final() == {"Rome": (4, 16), "Bern": (1, 7)}, 240), final()
    finally:
        cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}'").wait(120)
    bounded = cdc.replace("CREATE TABLE cdc", "CREATE TEMPORARY TABLE whole").replace(
        "earliest-offset'", "earliest-offset', 'scan.bounded.mode' = 'latest-offset'")
    batch, errors = cli(tmp_path, "run", "--format", "csv", "-e", bounded + "SELECT city, COUNT(*), SUM(amount)"
                          " FROM whole GROUP BY city;").communicate(timeout=180)
    assert sorted(batch.splitlines()[1:]) == ["Bern,1,7", "Rome,4,16"], errors


def test_a_debezium_topic_temporal_joined_forwards_its_changes(broker, tmp_path, monkeypatch):
    """An event-time temporal join whose left side is a debezium topic: each change joins
    the rate valid at its own time and keeps its kind (Flink forwards them), so an update
    retracts the priced row it made and a delete removes one, in an upsert-kafka table;
    a drain prices the rows the watermark had not passed."""
    import os

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    orders_topic, rates_topic, out = topic(broker, 1), topic(broker, 1), topic(broker, 1)
    at = lambda s: f"2024-01-01 00:00:{s:02d}.000"  # noqa: E731
    rate = lambda cur, r, s: (None, json.dumps({"cur": cur, "rate": r, "ts": at(s)}))  # noqa: E731
    order = lambda i, cur, amount, s: {"id": i, "cur": cur, "amount": amount, "ts": at(s)}  # noqa: E731
    change = lambda op, before, after: (None, json.dumps({"before": before, "after": after, "op": op}))  # noqa: E731
    broker.produce(rates_topic, [rate("EUR", 2, 0), rate("USD", 1, 0), rate("EUR", 3, 10)])
    broker.produce(orders_topic, [change("c", None, order(1, "EUR", 10, 5)), change("c", None, order(2, "USD", 4, 6)),
                                  change("c", None, order(3, "EUR", 1, 12)), change("c", None, order(4, "GBP", 7, 13))])
    watermark = ", WATERMARK FOR ts AS ts - INTERVAL '1' SECOND"
    script = tmp_path / "job.sql"
    script.write_text(
        kafka("orders", "id BIGINT, cur STRING, amount BIGINT, ts TIMESTAMP(3)" + watermark, broker, orders_topic,
              ", 'scan.startup.mode' = 'earliest-offset'", fmt="'format' = 'debezium-json'")
        + kafka("rates", "cur STRING NOT NULL, rate BIGINT, ts TIMESTAMP(3)" + watermark
                + ", PRIMARY KEY (cur) NOT ENFORCED", broker, rates_topic, ", 'scan.startup.mode' = 'earliest-offset'")
        + f"CREATE TABLE priced (id BIGINT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',"
          f" 'topic' = '{out}', 'properties.bootstrap.servers' = '{broker.bootstrap}', 'key.format' = 'json',"
          " 'value.format' = 'json');"
          "SET 'execution.checkpointing.interval' = '1 s';"
          "INSERT INTO priced SELECT o.id, o.amount * r.rate FROM orders AS o"
          " LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur"
          " ON CONFLICT DO DEDUPLICATE;")  # debezium orders without a key: no upsert key, Flink 2.3 asks

    def final() -> dict:
        table = {}
        for message in broker.read_all(out):
            key = json.loads(message.key())["id"]
            table[key] = None if message.value() is None else json.loads(message.value())["v"]
        return table

    launched, _ = cli(tmp_path, "run", "--detach", str(script)).communicate(timeout=120)
    job_id = launched.split()[1]
    try:
        # The watermark is 9 s (the rates' 10 s less 1 s): the orders at 5 s and 6 s are priced.
        assert wait_for(lambda: final() == {1: 20, 2: 4}, 240), final()
        broker.produce(orders_topic, [change("u", order(1, "EUR", 10, 5), order(1, "EUR", 10, 11)),
                                      change("d", order(2, "USD", 4, 6), None)])
        assert wait_for(lambda: final().get(2, 0) is None, 240), final()  # the delete is a tombstone
    finally:
        stopper = cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}' WITH DRAIN")
        assert stopper.wait(120) == 0, stopper.stderr.read()
    # Drained: order 1 at 11 s has EUR's rate of 10 s, order 3 too; GBP has no rate (LEFT: NULL).
    assert wait_for(lambda: final() == {1: 30, 2: None, 3: 3, 4: None}, 90), final()


RATE_WATERMARK = ", WATERMARK FOR ts AS ts - INTERVAL '1' SECOND"


def _price_orders(broker, tmp_path, rates_ddl: str, orders_topic: str, out: str):
    """A detached job pricing the orders topic by the rates table's version at each order's
    time (LEFT temporal join) into ``out``: (the priced rows so far, as a function; the job id)."""
    from tests.jobs import cli

    script = tmp_path / "job.sql"
    script.write_text(
        rates_ddl
        + kafka("orders", "id BIGINT, cur STRING, amount BIGINT, ts TIMESTAMP(3)" + RATE_WATERMARK, broker,
                orders_topic, ", 'scan.startup.mode' = 'earliest-offset'")
        + kafka("priced", "id BIGINT, v BIGINT", broker, out)
        + "SET 'execution.checkpointing.interval' = '1 s';"
          "INSERT INTO priced SELECT o.id, o.amount * r.rate FROM orders AS o"
          " LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;")

    def priced() -> list:
        return sorted((row["id"], row["v"]) for row in (json.loads(m.value()) for m in broker.read_all(out)))

    launched, _ = cli(tmp_path, "run", "--detach", str(script)).communicate(timeout=120)
    priced.diagnosis = lambda: _diagnosis(broker, tmp_path, orders_topic, out)
    return priced, launched.split()[1]


def _diagnosis(broker, tmp_path, orders_topic: str, out: str) -> str:
    """Where a row went missing, for a failed assertion: the orders and the priced rows as
    the topics hold them (offset: value), each micro-batch's watermark and end offsets, the
    job's log."""
    def records(name: str) -> str:
        return "; ".join(f"{m.offset()}: {m.value().decode()}" for m in broker.read_all(name))

    batches = []
    for path in sorted((tmp_path / "catalog" / "_checkpoints").glob("*/checkpoint/offsets/[0-9]*"),
                       key=lambda p: int(p.name)):
        lines = path.read_text().splitlines()
        ends = [line for line in lines[2:] if line.startswith('{"t-')]
        batches.append(f"batch {path.name}: watermark {json.loads(lines[1])['batchWatermarkMs']}, offsets {ends}")
    logs = "".join(p.read_text()[-3000:] for p in (tmp_path / "catalog" / "_jobs").glob("*.log"))
    return (f"\norders: {records(orders_topic)}\npriced: {records(out)}\n" + "\n".join(batches)
            + f"\nlog: {logs}")


def test_a_debezium_topic_s_changes_are_the_versions_of_a_temporal_join(broker, tmp_path, monkeypatch):
    """Versions from a debezium topic (a CDC'd rates table): an update is a new version
    from its time on, and a delete ends the key's versions from its time on, so orders
    after it find no rate (LEFT: NULL); the orders topic's rows are joined as the
    watermark passes them, the rest when the job drains."""
    import os

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    rates_topic, orders_topic, out = topic(broker, 1), topic(broker, 1), topic(broker, 1)
    at = lambda s: f"2024-01-01 00:00:{s:02d}.000"  # noqa: E731
    rate = lambda cur, r, s: {"cur": cur, "rate": r, "ts": at(s)}  # noqa: E731
    change = lambda op, before, after: (None, json.dumps({"before": before, "after": after, "op": op}))  # noqa: E731
    order = lambda i, cur, s: (None, json.dumps({"id": i, "cur": cur, "amount": 10, "ts": at(s)}))  # noqa: E731
    broker.produce(rates_topic, [change("c", None, rate("EUR", 2, 0)), change("c", None, rate("USD", 1, 0)),
                                 change("u", rate("EUR", 2, 0), rate("EUR", 3, 10)),
                                 change("c", None, rate("GBP", 5, 3)), change("d", rate("GBP", 5, 8), None),
                                 change("c", None, rate("JPY", 7, 20))])
    broker.produce(orders_topic, [order(1, "EUR", 5), order(2, "USD", 6), order(3, "GBP", 4), order(4, "GBP", 9),
                                  order(5, "EUR", 12), order(6, "JPY", 13)])
    rates = kafka("rates", "cur STRING NOT NULL, rate BIGINT, ts TIMESTAMP(3)" + RATE_WATERMARK + ", PRIMARY KEY (cur)"
                  " NOT ENFORCED", broker, rates_topic, ", 'scan.startup.mode' = 'earliest-offset'",
                  fmt="'format' = 'debezium-json'")
    priced, job_id = _price_orders(broker, tmp_path, rates, orders_topic, out)
    try:
        # The watermark is 12 s (the orders' 13 s less 1 s): the orders before 12 s are priced.
        assert wait_for(lambda: len(priced()) >= 4, 240), priced.diagnosis()
        assert priced() == [(1, 20), (2, 10), (3, 50), (4, None)]
    finally:
        stopper = cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}' WITH DRAIN")
        assert stopper.wait(120) == 0, stopper.stderr.read()
    # EUR: 2 until 10 s, then 3; USD: 1; GBP: 5 from 3 s, deleted at 8 s; JPY: 7 from 20 s.
    assert wait_for(lambda: len(priced()) == 6, 90), priced.diagnosis()
    assert priced() == [(1, 20), (2, 10), (3, 50), (4, None), (5, 30), (6, None)]


def test_an_upsert_kafka_table_s_records_are_the_versions_of_a_temporal_join(broker, tmp_path, monkeypatch):
    """Versions from an upsert-kafka table, as Flink reads them (ChangelogNormalize, then the
    temporal join): every record is a version from its time on, even several of one key in
    one micro-batch, and a tombstone takes back the key's last version from that version's
    time on (its -D is the row it deletes), leaving the earlier ones."""
    import os

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    rates_topic, orders_topic, out = topic(broker, 2), topic(broker, 1), topic(broker, 1)
    at = lambda s: f"2024-01-01 00:00:{s:02d}.000"  # noqa: E731
    rate = lambda cur, r, s: (json.dumps({"cur": cur}), json.dumps({"cur": cur, "rate": r, "ts": at(s)}))  # noqa: E731
    tombstone = lambda cur: (json.dumps({"cur": cur}), None)  # noqa: E731
    order = lambda i, cur, s: (None, json.dumps({"id": i, "cur": cur, "amount": 10, "ts": at(s)}))  # noqa: E731
    broker.produce(rates_topic, [rate("EUR", 2, 0), rate("USD", 1, 0), rate("EUR", 3, 10), rate("CHF", 4, 2),
                                 rate("CHF", 6, 7), tombstone("CHF"), rate("GBP", 5, 3), tombstone("GBP"),
                                 rate("JPY", 7, 20)])
    broker.produce(orders_topic, [order(1, "EUR", 5), order(2, "USD", 6), order(3, "CHF", 5), order(4, "CHF", 8),
                                  order(5, "GBP", 4), order(6, "EUR", 12), order(7, "JPY", 13)])
    rates = (f"CREATE TABLE rates (cur STRING NOT NULL, rate BIGINT, ts TIMESTAMP(3){RATE_WATERMARK}, PRIMARY KEY (cur)"
             f" NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = '{rates_topic}',"
             f" 'properties.bootstrap.servers' = '{broker.bootstrap}', 'key.format' = 'json', 'value.format' = 'json');")
    priced, job_id = _price_orders(broker, tmp_path, rates, orders_topic, out)
    try:
        # The watermark is 12 s (the orders' 13 s less 1 s): the orders before 12 s are priced.
        assert wait_for(lambda: len(priced()) >= 5, 240), priced.diagnosis()
        assert priced()[:5] == [(1, 20), (2, 10), (3, 40), (4, None), (5, None)]
    finally:
        stopper = cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}' WITH DRAIN")
        assert stopper.wait(120) == 0, stopper.stderr.read()
    # EUR: 2 until 10 s, then 3; USD: 1; CHF: 4 from 2 s, and from 7 s none (its version of
    # 7 s is what the tombstone's -D takes back); GBP: none; JPY: 7 from 20 s.
    assert wait_for(lambda: len(priced()) == 7, 90), priced.diagnosis()
    assert priced() == [(1, 20), (2, 10), (3, 40), (4, None), (5, None), (6, 30), (7, None)]


def test_upsert_kafka_streams_through_changelog_normalize(broker, tmp_path, monkeypatch):
    """An unbounded upsert-kafka table: ChangelogNormalize makes each key's records a
    changelog (a new value -U/+U, a tombstone -D), so a continuous count per value keeps an
    upsert-kafka table equal to the same count over the topic's final table, read in batch."""
    import os

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    source, out = topic(broker, 2), topic(broker, 1)

    def record(user: int, plan: str | None):
        return json.dumps({"user": user}), None if plan is None else json.dumps({"user": user, "plan": plan})

    broker.produce(source, [record(u, "free" if u % 3 else "pro") for u in range(9)])

    def table(name: str, columns: str, key: str, topic_name: str) -> str:
        return (f"CREATE TABLE {name} ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',"
                f" 'topic' = '{topic_name}', 'properties.bootstrap.servers' = '{broker.bootstrap}',"
                " 'key.format' = 'json', 'value.format' = 'json');")

    users = table("users", "`user` BIGINT, plan STRING", "`user`", source)
    script = tmp_path / "job.sql"
    script.write_text(users + table("plans", "plan STRING, n BIGINT", "plan", out)
                      + "SET 'execution.checkpointing.interval' = '1 s';"
                        "INSERT INTO plans SELECT plan, COUNT(*) FROM users GROUP BY plan;")

    def final() -> dict:
        latest = {}
        for message in broker.read_all(out):
            latest[json.loads(message.key())["plan"]] = None if message.value() is None else json.loads(
                message.value())["n"]
        return {k: v for k, v in latest.items() if v is not None}

    launched, _ = cli(tmp_path, "run", "--detach", str(script)).communicate(timeout=120)
    job_id = launched.split()[1]
    try:
        assert wait_for(lambda: final() == {"free": 6, "pro": 3}, 240), final()
        # 1 and 2 change plans, 5 writes the value it has (no change), 9 is new; 0, 3, 4 and 6
        # are deleted by tombstones
        broker.produce(source, [record(1, "pro"), record(2, "team"), record(4, None), record(5, "free"),
                                record(9, "team"), record(0, None), record(3, None), record(6, None)])
        assert wait_for(lambda: final() == {"free": 3, "team": 2, "pro": 1}, 240), final()
    finally:
        cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}'").wait(120)
    batch, errors = cli(tmp_path, "run", "--format", "csv", "-e", "SET 'execution.runtime-mode' = 'batch';"
                          "SELECT plan, COUNT(*) FROM users GROUP BY plan;").communicate(timeout=180)
    assert sorted(batch.splitlines()[1:]) == ["free,3", "pro,1", "team,2"], errors


def test_exactly_once_sink_skips_a_replayed_micro_batch(spark, broker, tmp_path):
    """The micro-batch writer as Spark calls it: batch 0, batch 0 again (a replay after a
    crash), batch 1; each batch's records are in the topic once, in committed transactions."""
    from streamsql.plan.define import define
    from streamsql.dialect.script import parse_script
    from streamsql.runtime.kafka.sink import KafkaMicroBatch

    out = topic(broker, 2)
    ddl = kafka("eo", "id BIGINT, name STRING", broker, out, ", 'key.format' = 'json', 'key.fields' = 'id',"
                " 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'eo-test',"
                " 'sink.parallelism' = '3'")
    table = define(parse_script(ddl)[0].expression, "default_database")
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"5e1f0a2b-0000-4000-8000-000000000000"}\n')
    write = KafkaMicroBatch(table, str(checkpoint))
    first = spark.createDataFrame([(i, f"n{i}") for i in range(10)], "id BIGINT, name STRING")
    write(first, 0)
    write(first, 0)  # replayed: skipped part by part
    write(spark.createDataFrame([(i, f"n{i}") for i in range(10, 15)], "id BIGINT, name STRING"), 1)
    ids = sorted(json.loads(m.value())["id"] for m in broker.read_all(out))
    assert ids == list(range(15))


def test_windowed_job_into_kafka_killed_and_restarted_gives_each_window_once(broker, tmp_path, monkeypatch):
    """kafka -> TUMBLE aggregate -> kafka (exactly-once), as a real process killed with kill -9
    mid-stream and restarted: every window's result is in the output topic once."""
    import os
    import signal

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    # One source partition: Spark's watermark is global, not Flink's per partition (README, Kafka).
    source, out = topic(broker, 1), topic(broker, 2)
    events = [(None, json.dumps({"id": i, "ts": f"2024-01-01 00:{i // 60:02d}:{i % 60:02d}.000"})) for i in range(100)]
    broker.produce(source, events + [(None, json.dumps({"id": -1, "ts": "2024-01-01 00:03:20.000"}))])
    script = tmp_path / "job.sql"
    script.write_text(
        kafka("src", "id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND", broker, source,
              ", 'scan.startup.mode' = 'earliest-offset', 'source.max-rows-per-batch' = '8'")
        + kafka("windows", "window_start TIMESTAMP(3), n BIGINT, total BIGINT", broker, out,
                ", 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'windows-job'")
        + "SET 'execution.checkpointing.interval' = '1 s';"
          "INSERT INTO windows SELECT window_start, COUNT(*), SUM(id)"
          " FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;")

    def results() -> list:
        return sorted((json.loads(m.value())["window_start"], json.loads(m.value())["n"]) for m in broker.read_all(out))

    job = cli(tmp_path, "run", str(script))
    assert wait_for(lambda: len(results()) >= 3, 240), job.stderr.read() if job.poll() is not None else "slow"
    os.killpg(job.pid, signal.SIGKILL)
    job.wait()
    out_text, _ = cli(tmp_path, "run", "--detach", str(script)).communicate(120)
    job_id = out_text.split()[1]
    assert wait_for(lambda: len(results()) >= 10, 240), results()
    time.sleep(3)  # a few more (empty) micro-batches: nothing more may arrive
    assert results() == [(f"2024-01-01 00:{s // 60:02d}:{s % 60:02d}.000", 10) for s in range(0, 100, 10)]
    stopper = cli(tmp_path, "run", "-e", f"STOP JOB '{job_id}' WITH DRAIN")
    assert stopper.wait(120) == 0, stopper.stderr.read()
    # Draining fires the window still open (the last record's): the sentinel reaches Kafka sources too.
    assert wait_for(lambda: len(results()) == 11, 90), results()
    assert results()[-1] == ("2024-01-01 00:03:20.000", 1)


def test_missing_topic_and_bad_client_property_are_clear_errors(broker):
    from streamsql.errors import ConnectorError
    from streamsql.runtime.kafka.reader import check_readable

    options = {"connector": "kafka", "properties.bootstrap.servers": broker.bootstrap}
    with pytest.raises(ConnectorError, match="Table 'k': topic 'nowhere' does not exist"):
        check_readable({**options, "topic": "nowhere"}, "k")
    with pytest.raises(ConnectorError, match="Table 'k': 'properties.sasl.jaas.config' uses x: streamsql takes"
                                             " PlainLoginModule and ScramLoginModule"):
        check_readable({**options, "topic": "nowhere", "properties.sasl.jaas.config": "x"}, "k")
    with pytest.raises(ConnectorError, match="Table 'k': Kafka client properties: No such configuration property"):
        check_readable({**options, "topic": "nowhere", "properties.no.such.thing": "1"}, "k")


def test_multi_record_batches_are_read_record_by_record(run, broker):
    """The producer batches (linger.ms): Kafka gives each record of a batch its own offset,
    and Spark's connector reads every one of them, in offset order per partition."""
    t = topic(broker, 2)
    broker.produce(t, [(None, json.dumps({"id": i})) for i in range(0, 1000, 2)], partition=0)
    broker.produce(t, [(None, json.dumps({"id": i})) for i in range(1, 1000, 2)], partition=1)
    rows = run.rows(kafka("many", "id BIGINT, `partition` INT METADATA VIRTUAL, `offset` BIGINT METADATA VIRTUAL",
                          broker, t, BOUNDED)
                    + "SELECT `partition`, COUNT(*), COUNT(DISTINCT `offset`), MIN(`offset`), MAX(`offset`), SUM(id),"
                      " MIN(CASE WHEN id = 2 * `offset` + `partition` THEN 1 ELSE 0 END) FROM many"
                      " GROUP BY `partition` ORDER BY `partition`")
    assert rows == [["0", "500", "500", "0", "499", str(sum(range(0, 1000, 2))), "1"],
                    ["1", "500", "500", "0", "499", str(sum(range(1, 1000, 2))), "1"]]


def test_group_offsets_start_from_a_consumer_group_s_commits_and_a_stream_commits_its_own(run, broker, tmp_path):
    """A real consumer group (subscribed, its offsets committed through the group
    coordinator) is where 'group-offsets' starts; a stream of a table with the group commits
    each micro-batch's end offsets to it, so the next 'group-offsets' read starts there."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    t, group = topic(broker, 2), f"g-{uuid.uuid4().hex[:8]}"
    broker.produce(t, [(None, json.dumps({"id": i})) for i in range(6)], partition=0)
    broker.produce(t, [(None, json.dumps({"id": 10 + i})) for i in range(4)], partition=1)
    member = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False})
    member.subscribe([t])
    seen, deadline = [], time.time() + 30
    while len(seen) < 10 and time.time() < deadline:
        seen += [m for m in member.consume(10, 1.0) if m.error() is None]
    assert len(seen) == 10
    member.commit(offsets=[TopicPartition(t, 0, 3), TopicPartition(t, 1, 1)], asynchronous=False)  # as a member
    member.close()
    grouped = kafka("g", "id BIGINT", broker, t, f", 'properties.group.id' = '{group}', 'scan.bounded.mode' = 'latest-offset'")
    rows = run.rows("SET 'execution.runtime-mode' = 'batch';" + grouped + "SELECT SUM(id), COUNT(*) FROM g")
    assert rows == [[str(3 + 4 + 5 + 11 + 12 + 13), "6"]]

    out = tmp_path / "out"
    streamed = kafka("s", "id BIGINT", broker, t, f", 'properties.group.id' = '{group}',"
                     " 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset',"
                     " 'source.max-rows-per-batch' = '4'")
    run.rows("SET 'execution.runtime-mode' = 'streaming';" + streamed
             + f"CREATE TABLE dst (id BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');"
               "INSERT INTO dst SELECT id FROM s;")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    def committed() -> list:
        listed = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [TopicPartition(t, 0), TopicPartition(t, 1)])])
        return sorted((tp.partition, tp.offset) for tp in listed[group].result(timeout=30).topic_partitions)

    assert wait_for(lambda: committed() == [(0, 6), (1, 4)], 60), committed()
    broker.produce(t, [(None, json.dumps({"id": 100}))], partition=1)
    assert run.rows("SET 'execution.runtime-mode' = 'batch'; SELECT SUM(id), COUNT(*) FROM g") == [["100", "1"]]


def test_timestamp_startup_and_bound_with_the_records_own_timestamps(run, broker):
    """'timestamp' modes find offsets by the records' times (Kafka's time index): the given
    ones (CreateTime) and the broker's own in a LogAppendTime topic."""
    from confluent_kafka.admin import AdminClient, NewTopic

    t = topic(broker, 2)
    base = 1_700_000_000_000
    broker.produce(t, [(None, json.dumps({"id": i}), base + i * 1000) for i in range(10)], partition=0)
    broker.produce(t, [(None, json.dumps({"id": 100 + i}), base + i * 2000) for i in range(5)], partition=1)
    modes = (f", 'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '{base + 4000}',"
             f" 'scan.bounded.mode' = 'timestamp', 'scan.bounded.timestamp-millis' = '{base + 8000}'")
    rows = run.rows(kafka("ts", "id BIGINT, rt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',"
                                " tt STRING METADATA FROM 'timestamp-type'", broker, t, modes)
                    + "SELECT id, rt, tt FROM ts ORDER BY id")
    # partition 0: 4 s up to (not with) 8 s; partition 1: 4 s and 6 s
    assert rows == [[str(i), f"2023-11-14 22:13:{20 + s:02d}.000", "CreateTime"]
                    for i, s in ((4, 4), (5, 5), (6, 6), (7, 7), (102, 4), (103, 6))]

    appended = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(appended, 1, 1, config={"message.timestamp.type": "LogAppendTime"})])[appended].result(30)
    broker.produce(appended, [(None, json.dumps({"id": 1}), base)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    broker.produce(appended, [(None, json.dumps({"id": 2}), base)])
    rows = run.rows(kafka("la", "id BIGINT, rt TIMESTAMP_LTZ(3) METADATA FROM 'timestamp',"
                                " tt STRING METADATA FROM 'timestamp-type'", broker, appended,
                          f", 'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = '{middle}',"
                          " 'scan.bounded.mode' = 'latest-offset'")
                    + "SELECT id, tt, rt > TIMESTAMP '2024-01-01 00:00:00' FROM la")
    assert rows == [["2", "LogAppendTime", "true"]]  # the broker's time, not the producer's


def test_an_aborted_transaction_is_hidden_from_read_committed_and_headers_are_a_map(run, broker):
    """Records of an aborted transaction are in the log: read by default (read_uncommitted,
    Kafka's and Flink's default), not read with 'properties.isolation.level' =
    'read_committed'. A record's headers are Flink's MAP<STRING, BYTES> (a later header of a
    name wins)."""
    from confluent_kafka import Producer

    t = topic(broker, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    for ids, commit in (((1, 2), True), ((3, 4, 5), False), ((6,), True)):
        producer.begin_transaction()
        for i in ids:
            producer.produce(t, value=json.dumps({"id": i}), partition=0,
                             headers=[("h", b"a"), ("h", f"v{i}".encode()), ("x", None)])
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    columns = "id BIGINT, hs MAP<STRING, BYTES> METADATA FROM 'headers'"
    rows = run.rows(kafka("rc", columns, broker, t, BOUNDED + ", 'properties.isolation.level' = 'read_committed'")
                    + kafka("ru", "id BIGINT", broker, t, BOUNDED)
                    + "SELECT id, CAST(hs['h'] AS STRING), hs['x'] IS NULL, cardinality(hs) FROM rc ORDER BY id")
    assert rows == [["1", "v1", "true", "2"], ["2", "v2", "true", "2"], ["6", "v6", "true", "2"]]
    assert run.rows("SELECT id FROM ru ORDER BY id") == [[str(i)] for i in range(1, 7)]


def test_the_at_least_once_sink_is_spark_s_and_round_robin_spreads_records(run, broker):
    t, out = topic(broker, 1), topic(broker, 3)
    broker.produce(t, orders(30))
    run.rows(kafka("src", "id BIGINT, name STRING, ts TIMESTAMP(3)", broker, t, BOUNDED)
             + kafka("rr", "id BIGINT, name STRING", broker, out, ", 'sink.partitioner' = 'round-robin'")
             + "INSERT INTO rr SELECT id, name FROM src;")
    written = broker.read_all(out)
    assert sorted(json.loads(m.value())["id"] for m in written) == list(range(30))
    assert {m.partition() for m in written} == {0, 1, 2}


def test_a_partition_read_ahead_of_another_makes_no_row_late(run, broker):
    """Flink's Kafka source keeps a watermark per partition (the table's is the smallest):
    600 records, even seconds in partition 0 and odd ones in partition 1, each partition in
    time order, are all on time for a bounded 1-minute TUMBLE, though Spark reads partition
    0 whole before partition 1 (it dropped 270 as late when the read order was global). A
    record out of order within its own partition, behind its watermark, is still late."""
    name = topic(broker, 2)
    for part in (0, 1):
        broker.produce(name, [(None, json.dumps({"n": s, "ts": f"2024-01-01 00:{s // 60:02d}:{s % 60:02d}.000"}))
                              for s in range(part, 600, 2)], partition=part)
    broker.produce(name, [(None, json.dumps({"n": -1, "ts": "2024-01-01 00:00:30.000"}))], partition=0)  # late in p0
    rows = run.rows(
        kafka("kbids", "n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND", broker, name, BOUNDED)
        + "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE kbids, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
          " GROUP BY window_start, window_end ORDER BY window_start;")
    assert rows == [[f"2024-01-01 00:{m:02d}:00.000", "60"] for m in range(10)], rows
    assert run.rows("SELECT COUNT(*) FROM kbids;") == [["601"]]


def test_a_job_rides_out_a_broker_restart_with_every_record_once(broker, tmp_path, monkeypatch):
    """kafka -> kafka (exactly-once) as a real `streamsql run`: the broker is stopped and
    started again under the running job (the same ports and log), records keep coming before
    and after; every record lands in the output topic once, and the job is still running."""
    import os
    import signal

    from tests.jobs import cli

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    source, out = topic(broker, 2), topic(broker, 1)
    broker.produce(source, [(None, json.dumps({"id": i})) for i in range(50)])
    script = tmp_path / "job.sql"
    script.write_text(
        kafka("src", "id BIGINT", broker, source, ", 'scan.startup.mode' = 'earliest-offset'")
        + kafka("copy", "id BIGINT, twice BIGINT", broker, out,
                ", 'sink.delivery-guarantee' = 'exactly-once', 'sink.transactional-id-prefix' = 'restart-job'")
        + "SET 'execution.checkpointing.interval' = '1 s';\nINSERT INTO copy SELECT id, id * 2 FROM src;\n")

    def ids() -> list:
        return sorted(json.loads(m.value())["id"] for m in broker.read_all(out))

    job = cli(tmp_path, "run", str(script))
    try:
        assert wait_for(lambda: len(ids()) >= 50 or job.poll() is not None, 240), ids()
        assert job.poll() is None, job.stderr.read()
        broker.restart()
        broker.produce(source, [(None, json.dumps({"id": i})) for i in range(50, 120)])
        assert wait_for(lambda: len(ids()) >= 120 or job.poll() is not None, 240), ids()
        time.sleep(3)  # a few more micro-batches: nothing more may arrive
        assert job.poll() is None, job.stderr.read()
        assert ids() == list(range(120))
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        job.wait()


# Records Flink 2.3 wrote into Kafka with 'format' = 'avro' for FLINK_AVRO's columns (INSERT INTO
# ... VALUES of FLINK_ROWS, read back from the topic as bytes).
FLINK_AVRO = ("b BOOLEAN, i INT NOT NULL, bi BIGINT, dc DECIMAL(10, 2), s STRING, dt DATE, ts TIMESTAMP(3),"
              " arr ARRAY<INT>, m MAP<STRING, BIGINT>, r ROW<x INT, y STRING>")
FLINK_BYTES = [b"\x02\x01\x06\x02\x08\x02\x04\x04\xd2\x02\x06str\x02\x98\xb4\x02\x02\xdc\xec\x86\x82\x99c\x02\x04\x02\x02"
               b"\x02\x04\x00\x02\x02\x02k\x02\n\x00\x02\x02\x0e\x02\x02y",
               b"\x00\x08\x00\x00\x00\x00\x00\x00\x00\x00"]
FLINK_ROWS = ("(TRUE, 3, CAST(4 AS BIGINT), CAST(12.34 AS DECIMAL(10, 2)), 'str', DATE '2024-01-02',"
              " TIMESTAMP '2024-01-02 03:04:05.678', ARRAY[1, 2], MAP['k', CAST(5 AS BIGINT)], ROW(7, 'y')),"
              " (CAST(NULL AS BOOLEAN), 4, CAST(NULL AS BIGINT), CAST(NULL AS DECIMAL(10, 2)), CAST(NULL AS STRING),"
              " CAST(NULL AS DATE), CAST(NULL AS TIMESTAMP(3)), CAST(NULL AS ARRAY<INT>),"
              " CAST(NULL AS MAP<STRING, BIGINT>), CAST(NULL AS ROW<x INT, y STRING>))")


def test_avro_records_read_as_flink_wrote_them_and_written_as_flink_writes_them(run, broker):
    source, out = topic(broker, 1), topic(broker, 1)
    broker.produce(source, [(None, value) for value in FLINK_BYTES])
    rows = run.rows(kafka("flink_avro", FLINK_AVRO, broker, source, BOUNDED, "'format' = 'avro'")
                    + "SELECT b, i, bi, dc, s, dt, ts, arr, m, r.x, r.y FROM flink_avro;")
    assert rows == [["true", "3", "4", "12.34", "str", "2024-01-02", "2024-01-02 03:04:05.678", "[1, 2]", "{k=5}", "7", "y"],
                    ["", "4", "", "", "", "", "", "", "", "", ""]]
    run.rows(kafka("ours", FLINK_AVRO, broker, out, "", "'format' = 'avro'") + f"INSERT INTO ours VALUES {FLINK_ROWS};")
    assert sorted(m.value() for m in broker.read_all(out)) == sorted(FLINK_BYTES)  # byte for byte


def test_a_record_that_is_no_avro_of_the_schema_stops_the_query_naming_it(run, broker):
    from streamsql.errors import DataError

    source = topic(broker, 1)
    broker.produce(source, [(None, b"\x02\x01\x06"), (None, b"\xff\xff\xff")])  # a short record, then junk
    with pytest.raises(DataError, match=f"Kafka topic {source} partition 0 offset 0"):
        run.rows(kafka("bad_avro", "b BOOLEAN, i INT NOT NULL, s STRING", broker, source, BOUNDED, "'format' = 'avro'")
                 + "SELECT * FROM bad_avro;")
    # a row of NULLs is a record, not a malformed one
    nulls = topic(broker, 1)
    broker.produce(nulls, [(None, b"\x00\x00")])
    assert run.rows(kafka("null_avro", "b BOOLEAN, s STRING", broker, nulls, BOUNDED, "'format' = 'avro'")
                    + "SELECT * FROM null_avro;") == [["", ""]]


def test_avro_keys_and_an_upsert_kafka_round_trip(run, broker, tmp_path):
    out = topic(broker, 2)
    ddl = (f"CREATE TABLE totals (k STRING, n BIGINT NOT NULL, PRIMARY KEY (k) NOT ENFORCED) WITH ("
           f"'connector' = 'upsert-kafka', 'topic' = '{out}', 'properties.bootstrap.servers' = '{broker.bootstrap}',"
           " 'key.format' = 'avro', 'value.format' = 'avro');")
    run.rows("SET 'execution.runtime-mode' = 'batch';" + ddl + "INSERT INTO totals SELECT w, COUNT(*) FROM"
             " (VALUES ('a'), ('b'), ('a'), ('c'), ('a')) AS t(w) GROUP BY w;")
    assert sorted(run.rows(ddl + "SET 'execution.runtime-mode' = 'batch';"
                           " SELECT k, n FROM totals")) == [["a", "3"], ["b", "1"], ["c", "1"]]
    keys = sorted(m.key() for m in broker.read_all(out))
    assert keys == [b"\x02\x02a", b"\x02\x02b", b"\x02\x02c"]  # the key record: its one nullable field


def _run_job(tmp_path, script):
    """`streamsql run script` as a process importing this checkout."""
    import os
    from unittest import mock

    from tests.jobs import cli

    with mock.patch.dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))):
        return cli(tmp_path, "run", str(script))


def _window_counts(tmp_path, broker, name: str, options: str, width: str):
    """A job script counting topic ``name``'s records per TUMBLE window of ``width``
    ("1' MINUTE") into CSV files, read from the earliest offset; (the script, the files' folder)."""
    out, script = tmp_path / "out", tmp_path / "job.sql"
    script.write_text(
        kafka("kbids", "n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND", broker, name,
              ", 'scan.startup.mode' = 'earliest-offset'" + options)
        + f"CREATE TABLE counts (window_start TIMESTAMP(3), n BIGINT) WITH ('connector' = 'filesystem',"
          f" 'path' = '{out}', 'format' = 'csv');"
          "INSERT INTO counts SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE kbids, DESCRIPTOR(ts),"
          f" INTERVAL '{width})) GROUP BY window_start, window_end;")
    return script, out


def _seconds(seconds) -> list:
    """Records {"n": s, "ts": second s of 2024-01-01} for each s."""
    return [(None, json.dumps({"n": s, "ts": f"2024-01-01 00:{s // 60:02d}:{s % 60:02d}.000"})) for s in seconds]


def test_a_stream_s_watermark_is_its_slowest_partition_s(broker, tmp_path):
    """Streamed, as Flink's per-partition watermarks: partition 0's 300 records (even seconds)
    are read whole in the first micro-batch while partition 1 has its first 10 (odd seconds);
    its other 290 arrive after. The table's watermark is partition 1's, so none of them is
    late and every 1-minute window fires with its 60 records at the drain (one stream of both
    partitions took partition 0's watermark and dropped partition 1's later records). The
    consumer group gets each partition's offsets from its own stream."""
    import os
    import signal

    from confluent_kafka import Consumer, TopicPartition

    from tests.jobs import committed_batches

    name, group = topic(broker, 2), f"g-{uuid.uuid4().hex[:8]}"

    broker.produce(name, _seconds(range(0, 600, 2)), partition=0)
    broker.produce(name, _seconds(range(1, 21, 2)), partition=1)
    script, out = _window_counts(tmp_path, broker, name, f", 'properties.group.id' = '{group}'", "1' MINUTE")
    job = _run_job(tmp_path, script)
    try:
        assert wait_for(lambda: committed_batches(tmp_path) >= 1 or job.poll() is not None, 240), "no batch"
        assert job.poll() is None, job.stderr.read()
        broker.produce(name, _seconds(range(21, 600, 2)), partition=1)
        batches = committed_batches(tmp_path)
        assert wait_for(lambda: committed_batches(tmp_path) >= batches + 2 or job.poll() is not None, 240)
        os.kill(job.pid, signal.SIGUSR1)  # drain: the last windows fire
        assert job.wait(240) == 0, job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    rows = sorted(line for f in out.glob("part-*.csv") for line in f.read_text().splitlines())
    assert rows == [f"2024-01-01 00:{m:02d}:00.000,60" for m in range(10)], rows
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        committed = consumer.committed([TopicPartition(name, 0), TopicPartition(name, 1)], timeout=10)
    finally:
        consumer.close()
    assert [c.offset for c in committed] == [300, 300]


@pytest.mark.parametrize("timeout", [", 'scan.watermark.idle-timeout' = '1 s'",
                                     "SET 'table.exec.source.idle-timeout' = '1 s';"])
def test_an_idle_partition_stops_holding_the_watermark_after_the_idle_timeout(broker, tmp_path, timeout):
    """'scan.watermark.idle-timeout' (or the session's 'table.exec.source.idle-timeout'), as
    Flink's: partition 1 has records up to second 9 and
    then none; partition 0 goes on. Without a timeout partition 1 holds every window open
    until the drain; with 1 s, the windows partition 0's time has passed fire while the job
    runs (partition 1 left out of the watermark), each once, and the drain fires the rest."""
    import os
    import signal

    from tests.jobs import committed_batches

    name = topic(broker, 2)

    broker.produce(name, _seconds(range(0, 60, 2)), partition=0)
    broker.produce(name, _seconds(range(1, 10, 2)), partition=1)
    session = timeout.startswith("SET")  # Flink's session-wide default, or the table's own option
    script, out = _window_counts(tmp_path, broker, name, "" if session else timeout, "10' SECOND")
    if session:
        script.write_text(timeout + script.read_text())

    def rows() -> list:
        return sorted(line for f in out.glob("part-*.csv") for line in f.read_text().splitlines())

    job = _run_job(tmp_path, script)
    expected = [f"2024-01-01 00:00:{w:02d}.000,{10 if w == 0 else 5}" for w in range(0, 110, 10) if w < 60] + [
        f"2024-01-01 00:01:{w - 60:02d}.000,5" for w in range(60, 110, 10)]
    try:
        assert wait_for(lambda: committed_batches(tmp_path) >= 1 or job.poll() is not None, 240), "no batch"
        time.sleep(2)  # partition 1 quiet for longer than the timeout
        broker.produce(name, _seconds(range(60, 120, 2)), partition=0)
        assert wait_for(lambda: rows() == expected or job.poll() is not None, 120), rows()  # [110, 120) still open
        os.kill(job.pid, signal.SIGUSR1)  # drain
        assert job.wait(240) == 0, job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert rows() == sorted(expected + ["2024-01-01 00:01:50.000,5"])
