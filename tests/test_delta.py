"""The Delta Lake connector (runtime.delta, on delta-rs): options and checks without Spark; a
table written by streamsql read back by the deltalake library and the other way round,
time travel, partitions, upserts with deletes, and a replayed micro-batch."""

from __future__ import annotations

import datetime
import decimal
import json
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from streamsql.changelog import UPDATE_AFTER
from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError
from streamsql.plan.changelog_checks import accepted_kinds
from streamsql.plan.define import define
from streamsql.runtime.delta import table as delta_table
from streamsql.runtime.delta.files import FileWriter, statistics
from tests.conftest import write

UTC = datetime.timezone.utc


def table(sql: str):
    return define(parse_script(sql)[0].expression, "default_database")


def delta_ddl(name: str, path, schema: str, extra: str = "", partitioned: str = "") -> str:
    partitioned = f" PARTITIONED BY ({partitioned})" if partitioned else ""
    return f"CREATE TABLE {name} ({schema}){partitioned} WITH ('connector' = 'delta', 'table-path' = '{path}'{extra})"


def delta_rows(path, key="id", version=None) -> list[dict]:
    """The table's rows as the deltalake library (delta-rs, another engine) reads them."""
    rows = DeltaTable(str(path), version=version).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: tuple((r[k] is None, r[k]) for k in ([key] if isinstance(key, str) else key)))


# -- options and checks, without Spark -------------------------------------------------------------


@pytest.mark.parametrize("options, message", [
    ("'connector' = 'delta'", "needs option\\(s\\) 'table-path'"),
    ("'connector' = 'delta', 'table-path' = '/t', 'path' = '/t'", "unsupported option\\(s\\) 'path'"),
    ("'connector' = 'delta', 'table-path' = '/t', 'version-as-of' = 'x'", "'version-as-of' must be a non-negative integer"),
    ("'connector' = 'delta', 'table-path' = '/t', 'version-as-of' = '1', 'timestamp-as-of' = '2024-01-01'",
     "each choose the snapshot read; give one"),
    ("'connector' = 'delta', 'table-path' = '/t', 'timestamp-as-of' = 'yesterday'", "must be a timestamp such as"),
])
def test_bad_delta_options(options, message):
    with pytest.raises(ConnectorError, match=message):
        table(f"CREATE TABLE t (a INT) WITH ({options})")


def test_delta_options_time_travel_and_keys(tmp_path):
    t = table(delta_ddl("t", "rel/t", "a INT, PRIMARY KEY (a) NOT ENFORCED", ", 'versionAsOf' = '3'"))
    assert delta_table.version_option(t) == 3 and Path(delta_table.table_path(t)).is_absolute()
    assert UPDATE_AFTER in accepted_kinds(t)  # upserts by its key
    assert UPDATE_AFTER not in accepted_kinds(table(delta_ddl("t", tmp_path, "a INT")))  # appends only
    moment = delta_table.timestamp_option(table(delta_ddl("t", tmp_path, "a INT", ", 'timestamp-as-of' = '2024-01-01 12:00:00'")))
    assert moment == datetime.datetime(2024, 1, 1, 12, tzinfo=UTC)


def test_the_declared_columns_are_checked_against_the_delta_schema(tmp_path):
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": pa.array([1], pa.int32()), "name": ["a"], "p": ["x"]}), partition_by=["p"])
    delta = DeltaTable(str(path))
    ok = delta_table.columns(table(delta_ddl("t", path, "ID BIGINT, p STRING", partitioned="p")), delta, reading=True)
    assert [(c.declared, c.delta, c.declared_type, c.delta_type, c.partition) for c in ok] == [
        ("ID", "id", "bigint", "int", False), ("p", "p", "string", "string", True)]  # read widened, by any case
    cases = [
        ("id INT, nope STRING, p STRING", "column 'nope' is not in the Delta table at"),
        ("id INT, name INT, p STRING", "column 'name' is declared INT, but the Delta table at .* has it as string"),
        ("id INT, name STRING, p STRING", "PARTITIONED BY \\(\\) does not match the Delta table's partition columns \\(p\\)"),
    ]
    for schema, message in cases:
        with pytest.raises(ConnectorError, match=f"Table 't': {message}"):
            delta_table.columns(table(delta_ddl("t", path, schema, partitioned="p" if "nope" in schema or "name INT" in schema else "")),
                                delta, reading=True)
    with pytest.raises(ConnectorError, match="column 'id' is declared BIGINT, but .* has it as int"):  # a sink does not widen
        delta_table.columns(table(delta_ddl("t", path, "id BIGINT, name STRING, p STRING", partitioned="p")), delta, reading=False)
    with pytest.raises(ConnectorError, match="has column\\(s\\) name the table does not declare"):
        delta_table.columns(table(delta_ddl("t", path, "id INT, p STRING", partitioned="p")), delta, reading=False)


def test_no_delta_table_and_unread_protocol_features_are_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConnectorError, match="'table-path' = '.*plain' is not a Delta table"):
        delta_table.open_snapshot(table(delta_ddl("t", tmp_path / "plain", "a INT")))
    write_deltalake(str(tmp_path / "v"), pa.table({"a": [1]}))
    with pytest.raises(ConnectorError, match="cannot open the Delta table at .* at version 5"):
        delta_table.open_snapshot(table(delta_ddl("t", tmp_path / "v", "a BIGINT", ", 'version-as-of' = '5'")))
    for feature, message in [("deletionVectors", "deletion vectors"), ("columnMapping", "column mapping")]:
        path = tmp_path / feature
        write_deltalake(str(path), pa.table({"a": [1]}))
        log = path / "_delta_log" / "00000000000000000000.json"
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        for line in lines:
            if "protocol" in line:
                line["protocol"] = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [feature],
                                    "writerFeatures": [feature]}
            if "metaData" in line and feature == "columnMapping":
                line["metaData"]["configuration"] = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "1"}
                schema = json.loads(line["metaData"]["schemaString"])
                schema["fields"][0]["metadata"] = {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}
                line["metaData"]["schemaString"] = json.dumps(schema)
        log.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
        t = table(delta_ddl("t", path, "a BIGINT"))
        with pytest.raises(ConnectorError, match=f"Table 't': the Delta table at '.*' uses the reader feature '{feature}': {message}"):
            delta_table.check_protocol(t, delta_table.open_snapshot(t))


def test_files_written_by_the_executors_commit_as_delta_rs_reads_them(tmp_path):
    """FileWriter (the mapInArrow function) without Spark: partitioned files, their add
    actions committed with delta-rs, read back by delta-rs with the same values; statistics."""
    from deltalake import CommitProperties, Schema, Transaction
    from deltalake.transaction import AddAction

    path = tmp_path / "t"
    schema = {"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in [("id", "long"), ("p", "string"), ("ts", "timestamp_ntz"), ("d", "decimal(5,2)")]]}
    delta = DeltaTable.create(str(path), Schema.from_json(json.dumps(schema)), partition_by=["p"])
    arrow = pa.schema(delta.schema().to_arrow())
    rows = pa.record_batch({
        "__rowkind": ["+I"] * 4, "id": pa.array([1, 2, 3, 4], pa.int64()), "p": ["a b", "x%y", None, "a b"],
        "ts": pa.array([datetime.datetime(2024, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)] * 4, pa.timestamp("us", tz="UTC")),
        "d": pa.array([decimal.Decimal("1.25"), None, None, decimal.Decimal("-3.00")], pa.decimal128(5, 2))})
    writer = FileWriter(delta.table_uri, arrow, ("p",), "part-0", "Table 't'")
    (actions,) = list(writer(iter([rows])))
    actions = actions.to_pylist()
    assert sorted(a["rows"] for a in actions) == [1, 1, 2]
    delta.create_write_transaction(
        [AddAction(a["path"], a["size"], json.loads(a["partition_values"]), 0, True, a["stats"]) for a in actions],
        "append", delta.schema(), partition_by=["p"], commit_properties=CommitProperties(app_transactions=[Transaction("job", 7)]))
    got = delta_rows(path)
    assert [(r["id"], r["p"], r["d"]) for r in got] == [(1, "a b", decimal.Decimal("1.25")), (2, "x%y", None), (3, None, None),
                                                       (4, "a b", decimal.Decimal("-3.00"))]
    assert got[0]["ts"] == datetime.datetime(2024, 1, 1, 0, 0, 0, 1500)  # Flink's TIMESTAMP: the UTC wall-clock time
    assert DeltaTable(str(path)).transaction_version("job") == 7
    stats = statistics(pa.table({"ts": pa.array([datetime.datetime(2024, 1, 1, 0, 0, 0, 1500)] * 2, pa.timestamp("us")),
                                 "s": ["b" * 40, "a"], "f": pa.array([1.0, float("nan")])}))
    assert stats["minValues"] == {"ts": "2024-01-01T00:00:00.001", "s": "a"}  # rounded down; no NaN bounds
    assert stats["maxValues"] == {"ts": "2024-01-01T00:00:00.002"}  # rounded up; a 40-character maximum left out
    bad = FileWriter(delta.table_uri, arrow, ("p",), "part-1", "Table 't'")
    with pytest.raises(RuntimeError, match="Table 't': the table has no PRIMARY KEY, so it takes inserts only, but the query produced '-D'"):
        list(bad(iter([pa.record_batch({**{n: rows.column(n) for n in rows.schema.names}, "__rowkind": ["-D"] * 4})])))


# -- with Spark ----------------------------------------------------------------------------------

TYPES = "id BIGINT, name STRING, amount DECIMAL(10, 2), x DOUBLE, day DATE, ts TIMESTAMP(3), ok BOOLEAN, p STRING"
CSV = ("1,alpha,10.50,1.5,2024-01-01,2024-01-01 00:00:01.250,true,a\n"
       "2,beta,,2.5,2024-01-02,2024-01-01 00:00:02,false,b\n"
       "3,,30.00,,,2024-01-01 00:00:03,,a\n")


def source_ddl(path, schema: str = TYPES, extra: str = "") -> str:
    return f"CREATE TABLE src ({schema}) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv'{extra});\n"


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_streamsql_writes_a_partitioned_table_that_delta_rs_reads(run, tmp_path, mode):
    write(tmp_path / "in" / "a.csv", CSV)
    run.output(f"SET 'execution.runtime-mode' = '{mode}';\n" + source_ddl(tmp_path / "in")
               + delta_ddl("dst", tmp_path / "dst", TYPES, partitioned="p") + ";\nINSERT INTO dst SELECT * FROM src;\n")
    delta = DeltaTable(str(tmp_path / "dst"))
    assert delta.metadata().partition_columns == ["p"] and delta.version() == 1  # created, then one commit
    assert json.loads(delta.schema().to_json())["fields"][3]["type"] == "double"
    assert delta_rows(tmp_path / "dst") == [
        {"id": 1, "name": "alpha", "amount": decimal.Decimal("10.50"), "x": 1.5, "day": datetime.date(2024, 1, 1),
         "ts": datetime.datetime(2024, 1, 1, 0, 0, 1, 250000, tzinfo=UTC), "ok": True, "p": "a"},
        {"id": 2, "name": "beta", "amount": None, "x": 2.5, "day": datetime.date(2024, 1, 2),
         "ts": datetime.datetime(2024, 1, 1, 0, 0, 2, tzinfo=UTC), "ok": False, "p": "b"},
        {"id": 3, "name": None, "amount": decimal.Decimal("30.00"), "x": None, "day": None,
         "ts": datetime.datetime(2024, 1, 1, 0, 0, 3, tzinfo=UTC), "ok": None, "p": "a"},
    ]
    assert sorted(Path(p).parent.name for p in delta.file_uris()) == ["p=a", "p=b"]  # one file per partition here
    if mode == "batch":  # Flink's batch mode: each run appends again
        run.output("SET 'execution.runtime-mode' = 'batch';\nINSERT INTO dst SELECT * FROM src;\n")
        assert len(delta_rows(tmp_path / "dst")) == 6
        run.output("SET 'execution.runtime-mode' = 'batch';\nINSERT OVERWRITE dst SELECT * FROM src WHERE id = 1;\n")
        assert [r["id"] for r in delta_rows(tmp_path / "dst")] == [1]


@pytest.mark.spark
def test_streamsql_reads_what_delta_rs_wrote_with_time_travel(run, tmp_path):
    path = str(tmp_path / "t")
    first = pa.table({"id": pa.array([1, 2], pa.int32()), "p": ["a b", "c=d"], "ts": pa.array(
        [datetime.datetime(2024, 1, 1, 12), None], pa.timestamp("us"))})  # timestamp_ntz
    write_deltalake(path, first, partition_by=["p"])
    time.sleep(0.05)
    between = datetime.datetime.now(UTC)
    time.sleep(0.05)
    write_deltalake(path, pa.table({"id": pa.array([3], pa.int32()), "p": [None], "ts": pa.array([None], pa.timestamp("us"))}),
                    mode="append", partition_by=["p"])
    DeltaTable(path).delete("id = 1")  # version 2
    ddl = delta_ddl("t", path, "id BIGINT, p STRING, ts TIMESTAMP(3)", partitioned="p")
    query = ";\nSET 'execution.runtime-mode' = 'batch';\nSELECT id, p, ts FROM t ORDER BY id;\n"
    assert run.rows(ddl.replace("CREATE TABLE", "CREATE OR REPLACE TEMPORARY TABLE") + query) == [["2", "c=d", ""], ["3", "", ""]]
    at = {"version-as-of": "0", "timestamp-as-of": between.isoformat()}
    for option, value in at.items():
        sql = delta_ddl("t", path, "id BIGINT, p STRING, ts TIMESTAMP(3)", f", '{option}' = '{value}'", "p")
        assert run.rows(sql.replace("CREATE TABLE", "CREATE OR REPLACE TEMPORARY TABLE") + query) == [
            ["1", "a b", "2024-01-01 12:00:00.000"], ["2", "c=d", ""]]
    # streaming mode: the snapshot as one micro-batch (read with pyarrow), partition values typed
    sql = delta_ddl("t", path, "id BIGINT, p STRING, ts TIMESTAMP(3), day DATE", ", 'version-as-of' = '0'", "p")
    write_deltalake(str(tmp_path / "d"), pa.table({"id": pa.array([7], pa.int64()), "day": pa.array([datetime.date(2024, 2, 3)]),
                                                   "ts": pa.array([datetime.datetime(2024, 1, 1, 1)], pa.timestamp("us", tz="UTC"))}),
                    partition_by=["day", "ts"])
    streamed = run.rows(sql.replace("CREATE TABLE", "CREATE OR REPLACE TEMPORARY TABLE").replace(", day DATE", "")
                        + ";\nSELECT id + 0, p, ts FROM t WHERE id > 0;\n")
    assert sorted(streamed) == [["1", "a b", "2024-01-01 12:00:00.000"], ["2", "c=d", ""]]
    sql = delta_ddl("d", tmp_path / "d", "id BIGINT, day DATE, ts TIMESTAMP(3)", partitioned="day, ts")
    assert run.rows(sql + ";\nSELECT * FROM d WHERE id > 0;\n") == [["7", "2024-02-03", "2024-01-01 01:00:00.000"]]


@pytest.mark.spark
def test_bad_tables_are_one_clear_error(run, tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConnectorError, match="Table 't': 'table-path' = '.*plain' is not a Delta table"):
        run.output(delta_ddl("t", tmp_path / "plain", "a INT") + ";\nSELECT * FROM t;\n")
    write_deltalake(str(tmp_path / "dst"), pa.table({"id": pa.array([1], pa.int64()), "name": pa.array([1], pa.int32())}))
    write(tmp_path / "in" / "a.csv", "1,a\n")
    with pytest.raises(ConnectorError, match="Table 'dst': column 'name' is declared STRING, but the Delta table at .* has it as int"):
        run.output(source_ddl(tmp_path / "in", "id BIGINT, name STRING") + delta_ddl("dst", tmp_path / "dst", "id BIGINT, name STRING")
                   + ";\nINSERT INTO dst SELECT * FROM src;\n")
    assert DeltaTable(str(tmp_path / "dst")).version() == 0  # nothing written


UPDATING = ("INSERT INTO dst SELECT n, COUNT(*) FROM (SELECT k, COUNT(*) AS n FROM src GROUP BY k) GROUP BY n;\n")


@pytest.mark.spark
def test_an_updating_stream_upserts_and_deletes_by_key(run, tmp_path):
    """A two-level GROUP BY, streamed a file per micro-batch: the count of keys seen once
    vanishes when every key is seen twice, a -D the MERGE applies."""
    write(tmp_path / "in" / "1.csv", "a\nb\nc\n")
    script = ("SET 'execution.bounded-input' = 'stream';\n" + source_ddl(tmp_path / "in", "k STRING", ", 'source.max-files-per-batch' = '1'")
              + delta_ddl("dst", tmp_path / "dst", "n BIGINT, keys BIGINT, PRIMARY KEY (n) NOT ENFORCED", partitioned="") + ";\n" + UPDATING)
    run.output(script)
    assert delta_rows(tmp_path / "dst", "n") == [{"n": 1, "keys": 3}]
    write(tmp_path / "in" / "2.csv", "a\nb\n")
    run.output(script)
    assert delta_rows(tmp_path / "dst", "n") == [{"n": 1, "keys": 1}, {"n": 2, "keys": 2}]
    write(tmp_path / "in" / "3.csv", "c\n")
    run.output(script)
    assert delta_rows(tmp_path / "dst", "n") == [{"n": 2, "keys": 3}]  # n = 1 deleted
    history = [h["operation"] for h in DeltaTable(str(tmp_path / "dst")).history()]
    assert history.count("MERGE") == 3


@pytest.mark.spark
@pytest.mark.parametrize("updating", [False, True], ids=["append", "upsert"])
def test_a_replayed_micro_batch_changes_nothing(run, tmp_path, updating):
    write(tmp_path / "in" / "a.csv", "a\nb\na\n")
    if updating:
        script = ("SET 'execution.bounded-input' = 'stream';\n" + source_ddl(tmp_path / "in", "k STRING")
                  + delta_ddl("dst", tmp_path / "dst", "k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED")
                  + ";\nINSERT INTO dst SELECT k, COUNT(*) FROM src GROUP BY k;\n")
        expected = [{"k": "a", "n": 2}, {"k": "b", "n": 1}]
    else:
        script = (source_ddl(tmp_path / "in", "k STRING") + delta_ddl("dst", tmp_path / "dst", "k STRING, n BIGINT")
                  + ";\nINSERT INTO dst SELECT k, CHAR_LENGTH(k) FROM src;\n")
        expected = [{"k": "a", "n": 1}, {"k": "a", "n": 1}, {"k": "b", "n": 1}]
    run.output(script)
    assert delta_rows(tmp_path / "dst", ["k", "n"]) == expected
    version = DeltaTable(str(tmp_path / "dst")).version()
    # a crash after the sink committed batch 0 but before Spark's checkpoint recorded it: Spark
    # replays batch 0 on restart, and the sink finds its app transaction and skips it
    (spark_commit,) = (run.catalog_dir / "_checkpoints").glob("insert-into-dst-*/checkpoint/commits/0")
    spark_commit.unlink()
    (spark_commit.parent / ".0.crc").unlink(missing_ok=True)
    run.output(script)
    assert spark_commit.exists()  # batch 0 did run again
    assert delta_rows(tmp_path / "dst", ["k", "n"]) == expected
    assert DeltaTable(str(tmp_path / "dst")).version() == version  # no commit at all
    write(tmp_path / "in" / "b.csv", "c\n")
    run.output(script)
    assert delta_rows(tmp_path / "dst", ["k", "n"]) == sorted([*expected, {"k": "c", "n": 1}], key=lambda r: (r["k"], r["n"]))


@pytest.mark.spark
def test_a_bounded_updating_job_writes_only_what_changed(run, tmp_path):
    """Streaming mode over bounded input computed as one batch (runtime.inserts.run_bounded):
    a rerun over the same input commits nothing; over more, the changed keys only."""
    write(tmp_path / "in" / "a.csv", "a\nb\n")
    script = (source_ddl(tmp_path / "in", "k STRING") + delta_ddl("dst", tmp_path / "dst", "k STRING, n BIGINT, PRIMARY KEY (k) NOT ENFORCED")
              + ";\nINSERT INTO dst SELECT k, COUNT(*) FROM src GROUP BY k HAVING COUNT(*) < 2;\n")
    run.output(script)
    assert delta_rows(tmp_path / "dst", "k") == [{"k": "a", "n": 1}, {"k": "b", "n": 1}]
    version = DeltaTable(str(tmp_path / "dst")).version()
    run.output(script)
    assert DeltaTable(str(tmp_path / "dst")).version() == version
    write(tmp_path / "in" / "b.csv", "a\nc\n")
    run.output(script)
    assert delta_rows(tmp_path / "dst", "k") == [{"k": "b", "n": 1}, {"k": "c", "n": 1}]  # a deleted
