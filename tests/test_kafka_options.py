"""The kafka connectors without a broker: METADATA columns in the DDL, option checks, sink
capabilities, and the records the formats make (Spark SQL expressions, checked as text)."""

from __future__ import annotations

import os

import pytest

from streamsql.changelog import INSERT, UPDATE_AFTER
from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError, SqlSyntaxError
from streamsql.plan.changelog_checks import accepted_kinds
from streamsql.plan.define import define
from streamsql.plan.kafka_options import key_fields, source_changelog, specific_offsets, value_columns
from streamsql.plan.objects import to_flink_sql

BASE = "'connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'h:9092'"


def table(sql: str):
    return define(parse_script(sql)[0].expression, "default_database")


def test_metadata_columns_parse_and_round_trip():
    t = table("CREATE TABLE k (id BIGINT, ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,"
              f" `partition` INT METADATA VIRTUAL, `offset` BIGINT METADATA) WITH ({BASE}, 'format' = 'json')")
    assert [(c.name, c.metadata, c.virtual) for c in t.metadata_columns] == [
        ("ts", "timestamp", True), ("partition", "partition", True), ("offset", "offset", False)]
    assert [c.name for c in t.physical_columns] == ["id"]
    text = to_flink_sql(t.ddl, pretty=False)
    assert "ts TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL" in text
    assert "`partition` INT METADATA VIRTUAL, `offset` BIGINT METADATA)" in text
    assert table(text).metadata_columns == t.metadata_columns  # what the catalog stores reads back the same


def test_metadata_syntax_error_has_a_position():
    with pytest.raises(SqlSyntaxError) as error:
        parse_script(f"CREATE TABLE k (id BIGINT,\n  ts BIGINT METADATA FROM) WITH ({BASE})")
    assert "metadata key" in error.value.message and error.value.position.line == 2


def test_metadata_columns_only_on_kafka():
    with pytest.raises(ConnectorError, match="column 'o' is a METADATA column; connector 'datagen' has no metadata"):
        table("CREATE TABLE g (a INT, o BIGINT METADATA FROM 'offset') WITH ('connector' = 'datagen')")


@pytest.mark.parametrize("options, message", [
    ("'connector' = 'kafka', 'properties.bootstrap.servers' = 'h:1', 'format' = 'json'", "exactly one of 'topic'"),
    (f"{BASE}, 'topic-pattern' = 'x.*', 'format' = 'json'", "exactly one of 'topic'"),
    ("'connector' = 'kafka', 'topic' = 't', 'format' = 'json'", "'properties.bootstrap.servers' is required"),
    (BASE, "needs option 'format'"),
    (f"{BASE}, 'format' = 'protobuf'", "unsupported value format 'protobuf'"),
    (f"{BASE}, 'format' = 'json', 'value.format' = 'json'", "either 'format' or 'value.format'"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'newest'", "'scan.startup.mode' must be one of"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'timestamp'", "needs option 'scan.startup.timestamp-millis'"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'timestamp', 'scan.startup.timestamp-millis' = 'yesterday'",
     "must be milliseconds since the epoch"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.timestamp-millis' = '5'", "only used with 'scan.startup.mode' = 'timestamp'"),
    (f"{BASE}, 'format' = 'json', 'scan.bounded.mode' = 'specific-offsets', 'scan.bounded.specific-offsets' = 'p:0'",
     "'p:0' is not 'partition:<n>,offset:<n>'"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'group-offsets'", "'group-offsets' needs 'properties.group.id'"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'earliest-offset', 'key.fields' = 'id'", "'key.fields' needs 'key.format'"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'earliest-offset', 'key.format' = 'json', 'key.fields' = 'nope'",
     "key field 'nope' is not a physical column"),
    (f"{BASE}, 'format' = 'raw', 'scan.startup.mode' = 'earliest-offset'", "exactly one physical column, not 2"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'earliest-offset', 'sink.delivery-guarantee' = 'exactly-once'",
     "'exactly-once' needs 'sink.transactional-id-prefix'"),
    (f"{BASE}, 'format' = 'json', 'scan.startup.mode' = 'earliest-offset', 'json.encode.x' = '1'",
     "unsupported option\\(s\\) 'json.encode.x'"),
    (f"{BASE}, 'value.format' = 'json', 'scan.startup.mode' = 'earliest-offset',"
     " 'value.json.timestamp-format.standard' = 'ISO-8601'", "'ISO-8601' is not supported: timestamps are read"),
    ("'connector' = 'upsert-kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'h:1', 'key.format' = 'json',"
     " 'value.format' = 'json'", "needs a PRIMARY KEY"),
])
def test_bad_kafka_options(options, message):
    with pytest.raises(ConnectorError, match=message):
        table(f"CREATE TABLE k (id BIGINT, name STRING) WITH ({options})")


def test_keys_values_and_changelogs():
    t = table(f"CREATE TABLE k (id BIGINT, name STRING) WITH ({BASE}, 'value.format' = 'csv', 'key.format' = 'raw',"
              " 'key.fields' = 'name', 'value.fields-include' = 'EXCEPT_KEY', 'scan.startup.mode' = 'earliest-offset',"
              " 'properties.client.id' = 'me', 'value.csv.field-delimiter' = '|')")
    assert key_fields(t) == ["name"] and [c.name for c in value_columns(t)] == ["id"]
    assert source_changelog(t).insert_only and accepted_kinds(t) == {INSERT}  # a kafka sink takes inserts only
    u = table("CREATE TABLE u (id BIGINT, n BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',"
              " 'topic' = 'u', 'properties.bootstrap.servers' = 'h:1', 'key.format' = 'json', 'value.format' = 'json')")
    assert key_fields(u) == ["id"] and str(source_changelog(u)) == "upsert by (id) [+I,+U,-D]"
    assert UPDATE_AFTER in accepted_kinds(u)
    d = table(f"CREATE TABLE d (id BIGINT) WITH ({BASE}, 'format' = 'debezium-json', 'scan.startup.mode' = 'earliest-offset')")
    assert str(source_changelog(d)) == "retract [+I,-U,+U,-D]"
    assert specific_offsets("partition:0,offset:42;partition:1,offset:300") == {0: 42, 1: 300}


def test_updating_query_into_kafka_is_refused_at_plan_time():
    from streamsql.catalog import Catalog
    from streamsql.errors import ValidationError
    from streamsql.plan.changelog_checks import check_sink
    from streamsql.plan.logical import build_operator_plan
    from streamsql.plan.planner import Planner
    from streamsql.runtime.sources import is_bounded

    out = BASE.replace("'topic' = 't'", "'topic' = 'out'")
    planner = Planner(Catalog(None))
    steps = [planner.plan(s) for s in parse_script(
        f"CREATE TEMPORARY TABLE src (id BIGINT, name STRING) WITH ({BASE}, 'format' = 'json',"
        " 'scan.startup.mode' = 'earliest-offset');"
        f"CREATE TEMPORARY TABLE dst (name STRING, n BIGINT) WITH ({out}, 'format' = 'json');"
        "CREATE TEMPORARY TABLE ups (name STRING, n BIGINT, PRIMARY KEY (name) NOT ENFORCED) WITH ('connector' ="
        " 'upsert-kafka', 'topic' = 'u', 'properties.bootstrap.servers' = 'h:1', 'key.format' = 'json', 'value.format' = 'json');"
        "INSERT INTO dst SELECT name, COUNT(*) FROM src GROUP BY name;"
        "INSERT INTO ups SELECT name, COUNT(*) FROM src GROUP BY name")]
    into_kafka, into_upsert = steps[-2], steps[-1]
    with pytest.raises(ValidationError, match="Table sink 'default_catalog.default_database.dst' doesn't support"
                                              " consuming update changes which is produced by node GroupAggregate"):
        check_sink(build_operator_plan(into_kafka.plan, is_bounded), into_kafka.table)
    check_sink(build_operator_plan(into_upsert.plan, is_bounded), into_upsert.table)  # takes the updates


def test_reading_needs_a_group_for_flinks_default_start():
    from streamsql.catalog import Catalog
    from streamsql.plan.planner import Planner

    planner = Planner(Catalog(None))
    create, select = parse_script(f"CREATE TEMPORARY TABLE k (id BIGINT) WITH ({BASE}, 'format' = 'json');"
                                  "SELECT * FROM k")
    planner.plan(create)  # a sink-only table needs no group
    with pytest.raises(ConnectorError, match="Flink's default 'scan.startup.mode' = 'group-offsets'.*needs 'properties.group.id'"):
        planner.plan(select)


class _Offsets:
    """The two broker answers timestamp modes use (Tansu answers offsets_for_times wrongly,
    so the mapping from Kafka's answer to offsets is checked here)."""

    def get_watermark_offsets(self, tp, timeout):
        return {0: (2, 10), 1: (0, 5)}[tp.partition]

    def offsets_for_times(self, wanted, timeout):
        from confluent_kafka import TopicPartition

        assert {tp.offset for tp in wanted} == {1_700_000_000_000}  # the timestamp goes to the broker
        return [TopicPartition(tp.topic, tp.partition, {0: 7, 1: -1}[tp.partition]) for tp in wanted]


def test_timestamp_mode_takes_kafkas_answer_and_the_end_when_there_is_none():
    pytest.importorskip("confluent_kafka")
    from streamsql.runtime.kafka.client import resolve

    options = {"scan.startup.timestamp-millis": "1700000000000"}
    offsets = resolve(_Offsets(), options, {"t": [0, 1]}, "timestamp", "scan.startup", "k")
    assert offsets == {"t": {"0": 7, "1": 5}}  # partition 1 has no record that late: its end


def test_a_debezium_topic_streams_as_a_changelog_into_streamsql_s_operators():
    """Unbounded, a debezium-json table's scan retracts: a GROUP BY over it reads its row
    kinds, an append-only sink is refused at plan time; bounded, it is its final table.
    An upsert-kafka source's upserts go through ChangelogNormalize."""
    from streamsql.plan.operators import ChangelogNormalize, Scan, short_mode, walk
    from streamsql.spark.dialect import to_spark_sql
    from streamsql.spark.physical import runs_on_stateful_operators
    from streamsql.spark.stateful.chain import compile_query
    from streamsql.spark.stateful.stages import AggregateStage, inserts_only
    from streamsql.plan.logical import build_operator_plan
    from streamsql.runtime.sources import is_bounded
    from tests.operator_plans import steps

    cdc = (f"CREATE TEMPORARY TABLE cdc (id BIGINT, city STRING, amount BIGINT) WITH ({BASE},"
           " 'format' = 'debezium-json', 'scan.startup.mode' = 'earliest-offset');")
    plan = steps("SELECT city, SUM(amount) FROM cdc GROUP BY city;", cdc)[-1].plan
    root = build_operator_plan(plan, is_bounded, None)
    scan = next(n for n in walk(root) if isinstance(n, Scan))
    assert short_mode(scan.mode) == "I,UB,UA,D" and runs_on_stateful_operators(root)
    stage = compile_query(plan, is_bounded)
    assert isinstance(stage, AggregateStage) and "`cdc`.`__rowkind`" in to_spark_sql(stage.split.input_query)
    # read as it is, or joined: its row kinds go on (an append-only sink is refused at plan time)
    for sql in ("SELECT id, city FROM cdc WHERE amount > 3;",
                "SELECT id FROM cdc WHERE city IN (SELECT city FROM cdc WHERE amount > 100);"):
        stage = compile_query(steps(sql, cdc)[-1].plan, is_bounded)
        assert stage is not None and not inserts_only(stage), sql
    bounded = cdc.replace("'debezium-json'", "'debezium-json', 'scan.bounded.mode' = 'latest-offset'")
    root = build_operator_plan(steps("SELECT * FROM cdc;", bounded)[-1].plan, is_bounded, None)
    assert root.mode.insert_only
    upserts = ("CREATE TEMPORARY TABLE u (id BIGINT, n BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH ("
               "'connector' = 'upsert-kafka', 'topic' = 'u', 'properties.bootstrap.servers' = 'h:1',"
               " 'key.format' = 'json', 'value.format' = 'json');")
    root = build_operator_plan(steps("SELECT n, COUNT(*) FROM u GROUP BY n;", upserts)[-1].plan, is_bounded, None)
    normalize = next(n for n in walk(root) if isinstance(n, ChangelogNormalize))
    assert short_mode(normalize.inputs[0].mode) == "I,UA,D" and short_mode(normalize.mode) == "I,UB,UA,D"
    assert normalize.state == "unbounded" and runs_on_stateful_operators(root)


def test_csv_records_quote_as_flink_s_csv_format():
    """A quote inside a quoted csv field is doubled (RFC 4180), read and written, unless
    'csv.escape-character' (or the key's or value's own) names another escape."""
    from streamsql.runtime.kafka.formats import _parse, encoded_value

    t = table(f"CREATE TABLE k (id BIGINT, name STRING) WITH ({BASE}, 'format' = 'csv')")
    parsed, _ = _parse("value", "csv", t.physical_columns, t, "value.")
    assert "'quote', '\"', 'escape', '\"'" in parsed
    assert "'quote', '\"', 'escape', '\"'" in encoded_value(t, t.physical_columns, "csv", "value.")
    e = table(f"CREATE TABLE e (id BIGINT, name STRING) WITH ({BASE}, 'value.format' = 'csv',"
              " 'value.csv.escape-character' = '\\', 'value.csv.quote-character' = '''')")
    assert "'quote', '\\'', 'escape', '\\\\'" in _parse("value", "csv", e.physical_columns, e, "value.")[0]
    with pytest.raises(ConnectorError, match="'value.csv.escape-character' must be a single character"):
        table(f"CREATE TABLE b (id BIGINT) WITH ({BASE}, 'value.format' = 'csv', 'value.csv.escape-character' = '\\\\')")


def _jars_cache(tmp_path, monkeypatch, cached: bool, wanted: bool):
    """runtime.kafka.jars with its cache in tmp_path (the connector's folder filled or not),
    a Kafka table defined or not, and a Maven that only records that it was asked."""
    from streamsql.plan import kafka_options
    from streamsql.runtime import maven
    from streamsql.runtime.kafka import jars

    monkeypatch.setenv("STREAMSQL_JARS_CACHE", str(tmp_path))
    monkeypatch.setattr(kafka_options, "_DEFINED", [True] if wanted else [])
    monkeypatch.setattr(jars, "_failure", [])
    asked = []

    def no_maven(coordinates, exclude, staging):
        asked.append(coordinates)
        raise maven.MavenError(f"cannot resolve {', '.join(coordinates)}: Maven (mvn) is not on the PATH")

    monkeypatch.setattr(maven, "_copy_dependencies", no_maven)
    if cached:
        _, _, _, folder = maven._folder(jars.PACKAGES, maven.SPARK_SHIPPED, None)
        folder.mkdir(parents=True)
        for name in ("org.apache.spark.spark-sql-kafka-0-10_2.13-4.2.0.jar", "org.apache.kafka.kafka-clients-3.9.2.jar"):
            (folder / name).write_bytes(b"")
        (folder / maven.DONE).write_text("\n".join(jars.PACKAGES) + "\n")
    return jars, asked


def test_cached_kafka_jars_go_on_spark_jars_after_the_user_s_own(tmp_path, monkeypatch):
    """On a cluster, spark.jars (shipped to the executors); locally, the end of the driver's
    class path (the executors are in its JVM: nothing fetched, no chmod process per jar, and
    the class archive made without them still maps)."""
    jars, asked = _jars_cache(tmp_path, monkeypatch, cached=True, wanted=False)
    names = ["org.apache.kafka.kafka-clients-3.9.2.jar", "org.apache.spark.spark-sql-kafka-0-10_2.13-4.2.0.jar"]
    conf = jars.with_kafka_jars({"spark.jars": "/mine.jar", "spark.master": "spark://host:7077"})
    listed = conf["spark.jars"].split(",")
    assert listed[0] == "/mine.jar" and [p.rsplit("/", 1)[1] for p in listed[1:]] == names
    local = jars.with_kafka_jars({"spark.jars": "/mine.jar", "spark.master": "local[2]",
                                  "spark.driver.extraClassPath": "/fs.jar"})
    assert local["spark.jars"] == "/mine.jar" and local["spark.driver.extraClassPath"] == "/fs.jar"
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", "/dist.jar")
    paths = jars.appended_class_path(local)["SPARK_DIST_CLASSPATH"].split(os.pathsep)
    assert paths[0] == "/dist.jar" and [p.rsplit("/", 1)[1] for p in paths[1:]] == names
    assert jars.with_kafka_jars(local) == local  # already there: not added twice
    assert asked == []
    own = {"spark.jars": "/opt/spark-sql-kafka-0-10_2.13-4.3.0.jar"}
    assert jars.with_kafka_jars(own) == own  # the user's own connector: nothing added


def test_a_session_without_kafka_tables_never_starts_maven(tmp_path, monkeypatch):
    jars, asked = _jars_cache(tmp_path, monkeypatch, cached=False, wanted=False)
    assert jars.with_kafka_jars({"spark.master": "local[2]"}) == {"spark.master": "local[2]"}
    assert asked == []


def test_without_maven_spark_starts_and_a_kafka_table_fails_in_one_paragraph(tmp_path, monkeypatch):
    jars, asked = _jars_cache(tmp_path, monkeypatch, cached=False, wanted=True)
    assert jars.with_kafka_jars({"spark.master": "local[2]"}) == {"spark.master": "local[2]"}
    assert asked == [sorted(jars.PACKAGES)]  # tried, failed, Spark starts all the same
    error = jars.missing_connector("orders")
    assert isinstance(error, ConnectorError) and "\n" not in str(error)
    assert str(error).startswith("Table 'orders' is read and written with Spark's Kafka connector"
                                 " (org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0), which is not on this Spark"
                                 " session's classpath: cannot resolve")
    assert "Maven (mvn) is not on the PATH" in str(error) and "'spark.jars'" in str(error)


def test_a_kafka_table_defined_before_spark_starts_asks_for_the_jars():
    from streamsql.plan import kafka_options

    table(f"CREATE TABLE k (id BIGINT) WITH ({BASE}, 'format' = 'json')")
    assert kafka_options.kafka_defined()


def test_properties_pass_to_spark_s_connector_less_what_flink_and_spark_set():
    from streamsql.runtime.kafka.reader import spark_options
    from streamsql.runtime.kafka.sink import sink_options

    options = {"connector": "kafka", "topic": "t", "properties.bootstrap.servers": "h:9092",
               "properties.group.id": "g", "properties.auto.offset.reset": "earliest",
               "properties.security.protocol": "SASL_SSL", "properties.sasl.mechanism": "PLAIN",
               "properties.key.deserializer": "x", "sink.partitioner": "round-robin"}
    assert spark_options(options) == {"kafka.bootstrap.servers": "h:9092", "kafka.security.protocol": "SASL_SSL",
                                      "kafka.sasl.mechanism": "PLAIN", "kafka.isolation.level": "read_uncommitted"}
    t = table(f"CREATE TABLE k (id BIGINT) WITH ({BASE}, 'format' = 'json', 'properties.group.id' = 'g',"
              " 'properties.linger.ms' = '5', 'sink.partitioner' = 'round-robin')")
    assert sink_options(t) == {"kafka.bootstrap.servers": "h:9092", "kafka.linger.ms": "5", "topic": "t",
                               "kafka.partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"}


# -- the 'avro' format --------------------------------------------------------------------------------

AVRO_COLUMNS = ("b BOOLEAN, i INT NOT NULL, bi BIGINT, dc DECIMAL(10, 2), s STRING, dt DATE, tm TIME(3), ts TIMESTAMP(3),"
                " arr ARRAY<INT>, m MAP<STRING, BIGINT>, r ROW<x INT, y STRING>")


def _avro_table(columns: str = AVRO_COLUMNS, extra: str = ""):
    return table(f"CREATE TABLE k ({columns}) WITH ('connector' = 'kafka', 'topic' = 't', 'format' = 'avro',"
                 f" 'properties.bootstrap.servers' = 'h:9092'{extra})")


def test_the_avro_schema_is_the_one_flink_derives():
    """As Flink 2.3's avro format writes it (read from the records it wrote into Kafka)."""
    from streamsql.plan.avro_schema import avro_schema

    def nullable(schema):
        return ["null", schema]

    row = "org.apache.flink.avro.generated.record"
    expected = {"type": "record", "name": row, "fields": [
        {"name": "b", "type": nullable("boolean"), "default": None},
        {"name": "i", "type": "int"},
        {"name": "bi", "type": nullable("long"), "default": None},
        {"name": "dc", "type": nullable({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
         "default": None},
        {"name": "s", "type": nullable("string"), "default": None},
        {"name": "dt", "type": nullable({"type": "int", "logicalType": "date"}), "default": None},
        {"name": "tm", "type": nullable({"type": "int", "logicalType": "time-millis"}), "default": None},
        {"name": "ts", "type": nullable({"type": "long", "logicalType": "timestamp-millis"}), "default": None},
        {"name": "arr", "type": nullable({"type": "array", "items": nullable("int")}), "default": None},
        {"name": "m", "type": nullable({"type": "map", "values": nullable("long")}), "default": None},
        {"name": "r", "type": nullable({"type": "record", "name": f"{row}_r", "fields": [
            {"name": "x", "type": nullable("int"), "default": None},
            {"name": "y", "type": nullable("string"), "default": None}]}), "default": None},
    ]}
    assert avro_schema(_avro_table().physical_columns) == expected
    nested = avro_schema(_avro_table("o ROW<p ROW<q INT>>").physical_columns)
    assert nested["fields"][0]["type"][1]["fields"][0]["type"][1]["name"] == f"{row}_o_p"


@pytest.mark.parametrize("columns, extra, message", [
    ("ts TIMESTAMP", "", "column 'ts': Avro does not support TIMESTAMP type with precision: 6"),  # Flink's default 6
    ("t TIME(6)", "", "column 't': Avro does not support TIME type with precision: 6"),
    ("l TIMESTAMP_LTZ(3)", "", "column 'l': Unsupported to derive Schema for type: TIMESTAMP_LTZ"),
    ("m MAP<INT, STRING>", "", "column 'm': Avro format doesn't support non-string as key type of map"),
    ("a INT", ", 'avro.encoding' = 'json'", "option 'avro.encoding' = 'json' is not supported \\(only 'binary'"),
    ("a INT", ", 'avro.codec' = 'snappy'", "unsupported option 'avro.codec' for format 'avro'"),
])
def test_what_the_avro_format_refuses(columns, extra, message):
    with pytest.raises(ConnectorError, match=message):
        _avro_table(columns, extra)


@pytest.mark.parametrize("sql, streaming, real_time", [
    ("CREATE TABLE k (n INT) WITH ('connector' = 'kafka', 'topic' = 't', 'properties.bootstrap.servers' = 'h:1',"
     " 'format' = 'json')", True, False),  # no watermark: one stream
    ("CREATE TABLE k (n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', 'topic-pattern'"
     " = 't.*', 'properties.bootstrap.servers' = 'h:1', 'format' = 'json')", True, False),  # topics come and go
    ("CREATE TABLE k (n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', 'topic' = 't',"
     " 'properties.bootstrap.servers' = 'h:1', 'format' = 'json')", False, False),  # a batch read
    ("CREATE TABLE k (n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', 'topic' = 't',"
     " 'properties.bootstrap.servers' = 'h:1', 'format' = 'json')", True, True),  # real-time mode
    ("CREATE TABLE k (n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka', 'topic' = 't',"
     " 'properties.bootstrap.servers' = 'h:1', 'format' = 'debezium-json')", True, False),  # a changelog
])
def test_a_stream_of_every_partition_where_no_per_partition_watermark_is_wanted(sql, streaming, real_time):
    from streamsql.runtime.kafka.reader import split_streams

    assert split_streams(table(sql), streaming, real_time, {"t": [0, 1]}) is None


def test_a_watermarked_stream_of_several_partitions_is_a_stream_each():
    from streamsql.runtime.kafka.reader import split_streams

    watermarked = table("CREATE TABLE k (n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka',"
                        " 'topic' = 't;u', 'properties.bootstrap.servers' = 'h:1', 'format' = 'json')")
    assert split_streams(watermarked, True, False, {"u": [0], "t": [0, 1]}) == [("t", 0), ("t", 1), ("u", 0)]
    assert split_streams(watermarked, True, False, {"t": [0]}) is None  # one partition: one stream


def test_a_checkpoint_of_other_streams_is_a_job_error_saying_why():
    from streamsql.errors import JobStateError
    from streamsql.runtime.failures import translate

    error = translate(Exception("java.lang.AssertionError: assertion failed: There are [4] sources in the checkpoint"
                                " offsets and now there are [6] sources requested by the query. Cannot continue."))
    assert isinstance(error, JobStateError)
    assert error.message.startswith("The job's checkpoint holds the positions of 4 streams and its query now reads 6")
    assert "gained partitions" in error.message and "assertion" not in error.message


def test_an_idle_partition_s_heartbeat_is_due_once_it_has_been_quiet_for_the_timeout(tmp_path):
    from streamsql.runtime.kafka.idleness import _Watched, heartbeat_due, write_heartbeat

    watched = _Watched(tmp_path, 2.0, active_at=100.0)
    assert heartbeat_due(watched, 0, 101.0, "2024-01-01T00:00:58.000Z") is None  # quiet for less than 2 s
    assert heartbeat_due(watched, 3, 103.0, "2024-01-01T00:00:58.000Z") is None  # active again
    assert heartbeat_due(watched, 0, 104.5, "2024-01-01T00:00:58.000Z") is None
    assert heartbeat_due(watched, 0, 105.0, None) is None  # no event time seen yet
    assert heartbeat_due(watched, 0, 105.0, "2024-01-01T00:00:58.000Z") == "2024-01-01T00:00:58.000Z"
    watched.sent = "2024-01-01T00:00:58.000Z"
    assert heartbeat_due(watched, 0, 106.0, "2024-01-01T00:00:58.000Z") is None  # that time was sent
    assert heartbeat_due(watched, 0, 106.0, "2024-01-01T00:01:04.000Z") == "2024-01-01T00:01:04.000Z"
    folder = tmp_path / "beats"
    folder.mkdir()
    write_heartbeat(folder, "2024-01-01T00:01:04.000Z")
    assert [f.read_text() for f in folder.iterdir()] == ["2024-01-01 00:01:04.000\n"]


def test_the_idle_timeout_is_a_duration():
    sql = ("CREATE TABLE k (n INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH (" + BASE + ", 'format' = 'json',"
           " 'scan.watermark.idle-timeout' = '{}')")
    assert table(sql.format("5 s")).options["scan.watermark.idle-timeout"] == "5 s"
    with pytest.raises(ConnectorError, match="'scan.watermark.idle-timeout' must be a duration"):
        table(sql.format("soon"))


def test_the_session_idle_timeout_is_a_duration():
    from streamsql.plan.setting_values import check_setting

    check_setting("table.exec.source.idle-timeout", "5 s")
    check_setting("table.exec.source.idle-timeout", "0")
    with pytest.raises(Exception, match="'table.exec.source.idle-timeout' must be a duration"):
        check_setting("table.exec.source.idle-timeout", "soon")
