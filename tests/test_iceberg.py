"""The Iceberg connector (runtime.iceberg, on pyiceberg's SQL catalog): options and checks
without Spark; a table written by streamsql read back by pyiceberg and the other way round,
time travel by snapshot id, a replayed micro-batch, and each bad input's ConnectorError."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError
from streamsql.plan.define import define
from streamsql.runtime.iceberg import catalog as iceberg_catalog
from streamsql.runtime.iceberg.schema import columns
from tests.conftest import write


def table(sql: str):
    return define(parse_script(sql)[0].expression, "default_database")


def iceberg_ddl(name: str, warehouse, schema: str, extra: str = "", exists: bool = True) -> str:
    create = "CREATE TABLE IF NOT EXISTS" if exists else "CREATE TABLE"
    return (f"{create} {name} ({schema}) WITH ('connector' = 'iceberg', 'catalog-name' = 'lake',"
            f" 'catalog-type' = 'jdbc', 'warehouse' = '{warehouse}', 'catalog-database' = 'db'{extra})")


def catalog_of(warehouse):
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog("lake", uri=f"sqlite:///{warehouse}/iceberg_catalog.db", warehouse=f"file://{warehouse}")


def iceberg_rows(warehouse, name: str, snapshot_id=None) -> list[dict]:
    """The table's rows as pyiceberg (another reader) reads them, sorted by id."""
    loaded = catalog_of(warehouse).load_table(("db", name))
    return sorted(loaded.scan(snapshot_id=snapshot_id).to_arrow().to_pylist(), key=lambda r: r["id"])


# -- options and checks, without Spark -------------------------------------------------------------


BASE = "'connector' = 'iceberg', 'catalog-name' = 'c', 'warehouse' = '/w'"


@pytest.mark.parametrize("options, message", [
    ("'connector' = 'iceberg', 'catalog-name' = 'c', 'catalog-type' = 'hadoop'", "needs option\\(s\\) 'warehouse'"),
    ("'connector' = 'iceberg', 'warehouse' = '/w'", "needs option\\(s\\) 'catalog-name'"),
    (BASE, "'catalog-type' = 'hive' is not supported .*use 'catalog-type' = 'jdbc'"),
    (BASE + ", 'catalog-type' = 'glue'", "'catalog-type' = 'glue' is not supported \\(a Hive metastore or a custom"),
    (BASE + ", 'catalog-type' = 'hadoop', 'uri' = 'jdbc:sqlite:/x'", "a Hadoop catalog is its warehouse's directories"),
    (BASE + ", 'catalog-type' = 'jdbc', 'catalog-impl' = 'org.apache.iceberg.hadoop.HadoopCatalog'",
     "'catalog-type' = 'jdbc' and 'catalog-impl' = 'org.apache.iceberg.hadoop.HadoopCatalog' name different"),
    (BASE + ", 'catalog-impl' = 'com.x.Mine'", "'catalog-impl' = 'com.x.Mine' is not supported"),
    (BASE + ", 'catalog-type' = 'jdbc', 'uri' = 'jdbc:mysql://h/d'", "option 'uri' must be 'jdbc:sqlite:<file>' or"),
    (BASE + ", 'catalog-type' = 'jdbc', 'snapshot-id' = 'x'", "'snapshot-id' must be a non-negative integer"),
    (BASE + ", 'catalog-type' = 'jdbc', 'snapshot-id' = '1', 'as-of-timestamp' = '2'", "each choose the snapshot read"),
    (BASE + ", 'catalog-type' = 'jdbc', 'path' = '/p'", "unsupported option\\(s\\) 'path'"),
    (BASE + ", 'catalog-type' = 'jdbc', 'uri' = 'jdbc:postgresql://h/d?currentSchema=x'",
     "URL parameter\\(s\\) 'currentSchema' of 'uri' not supported"),
])
def test_bad_iceberg_options(options, message):
    with pytest.raises(ConnectorError, match=message):
        table(f"CREATE TABLE t (a INT) WITH ({options})")


def test_catalog_uris_and_identifier():
    t = table(f"CREATE TABLE t (a INT) WITH ({BASE}, 'catalog-impl' = 'org.apache.iceberg.jdbc.JdbcCatalog')")
    assert iceberg_catalog.sqlalchemy_uri(t) == "sqlite:////w/iceberg_catalog.db"
    assert iceberg_catalog.identifier(t) == ("default_database", "t")
    t = table(f"CREATE TABLE t (a INT) WITH ({BASE}, 'catalog-type' = 'jdbc', 'catalog-database' = 'd',"
              " 'catalog-table' = 'x', 'uri' = 'jdbc:postgresql://H:5433/cat?user=u&password=p%40&sslmode=require')")
    assert iceberg_catalog.sqlalchemy_uri(t) == "postgresql+psycopg://u:p%40@H:5433/cat?sslmode=require"
    assert iceberg_catalog.identifier(t) == ("d", "x")
    t = table(f"CREATE TABLE t (a INT) WITH ({BASE}, 'catalog-type' = 'jdbc', 'uri' = 'jdbc:sqlite:/tmp/c.db')")
    assert iceberg_catalog.sqlalchemy_uri(t) == "sqlite:////tmp/c.db"


def test_declared_columns_against_the_iceberg_schema():
    from pyiceberg import types as T
    from pyiceberg.schema import Schema

    schema = Schema(T.NestedField(1, "id", T.IntegerType()), T.NestedField(2, "name", T.StringType()),
                    T.NestedField(3, "ts", T.TimestampType()), T.NestedField(4, "u", T.UUIDType()))
    ok = columns(table(f"CREATE TABLE t (ID BIGINT, ts TIMESTAMP(3)) WITH ({BASE}, 'catalog-type' = 'jdbc')"),
                 schema, reading=True)
    assert [(c.declared, c.iceberg, c.field_id, c.spark_read) for c in ok] == [
        ("ID", "id", 1, "int"), ("ts", "ts", 3, "timestamp_ntz")]  # widened, by any case
    cases = [
        ("id INT, nope STRING", True, "column 'nope' is not in the Iceberg table 'db.t' of catalog 'c'"),
        ("id INT, name INT", True, "column 'name' is declared INT, but the Iceberg table .* has it as string"),
        ("id INT, ts TIMESTAMP_LTZ(3)", True, "column 'ts' is declared TIMESTAMP_LTZ\\(3\\), but .* has it as timestamp$"),
        ("id INT, u STRING", True, "column 'u' of the Iceberg table .* has the Iceberg type uuid"),
        ("id BIGINT, name STRING, ts TIMESTAMP, u STRING", False, "column 'id' is declared BIGINT"),
        ("id INT, name STRING", False, "has column\\(s\\) ts, u the table does not declare"),
    ]
    for declared, reading, message in cases:
        with pytest.raises(ConnectorError, match=message):
            columns(table(f"CREATE TABLE t ({declared}) WITH ({BASE}, 'catalog-type' = 'jdbc', 'catalog-database' = 'db')"),
                    schema, reading=reading)


def test_a_renamed_column_is_refused():
    from pyiceberg import types as T
    from pyiceberg.schema import Schema

    old = Schema(T.NestedField(1, "id", T.LongType()), T.NestedField(2, "title", T.StringType()), schema_id=0)
    new = Schema(T.NestedField(1, "id", T.LongType()), T.NestedField(2, "name", T.StringType()), schema_id=1)
    t = table(f"CREATE TABLE t (id BIGINT, name STRING) WITH ({BASE}, 'catalog-type' = 'jdbc')")
    with pytest.raises(ConnectorError, match="column 'name' .* changed in its schema history \\(schema 0 had title string"):
        columns(t, new, reading=True, history=[old, new])
    assert [c.iceberg for c in columns(table(f"CREATE TABLE t (id BIGINT) WITH ({BASE}, 'catalog-type' = 'jdbc')"),
                                       new, reading=True, history=[old, new])] == ["id"]


def lake_table(warehouse, name: str = "t", schema=None):
    """A table created by pyiceberg in a SQLite catalog under ``warehouse``, with rows (1, 'a'), (2, 'b')."""
    created = catalog_of(warehouse)
    created.create_namespace_if_not_exists("db")
    schema = schema or pa.schema([("id", pa.int64()), ("name", pa.string())])
    loaded = created.create_table(("db", name), schema=schema)
    loaded.append(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=schema))
    return loaded


def test_exactly_once_commits_by_the_snapshot_summary(tmp_path):
    """The sink's commit, without Spark: a batch is found in the snapshots it committed, and a
    commit that loses a race with another writer is checked again and retried."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    from streamsql.runtime.iceberg.sink import _commit, committed_batch

    lake = tmp_path / "lake"
    lake.mkdir()
    stale = lake_table(lake)
    t = table(iceberg_ddl("t", lake, "id BIGINT, name STRING"))
    rows = pa.table({"id": [3], "name": ["c"]}, schema=stale.schema().as_arrow())
    files = list(_dataframe_to_data_files(stale.metadata, rows, stale.io))
    assert committed_batch(stale, "job") is None
    catalog_of(lake).load_table(("db", "t")).append(rows)  # another writer commits first
    assert _commit(t, stale, files, {"streamsql.job-id": "job", "streamsql.batch-id": "0"}, False, "job", 0)
    fresh = catalog_of(lake).load_table(("db", "t"))
    assert committed_batch(fresh, "job") == 0 and committed_batch(fresh, "other") is None
    assert len(fresh.snapshots()) == 3 and sorted(fresh.scan().to_arrow().column("id").to_pylist()) == [1, 2, 3, 3]


def test_snapshots_and_schema_history_are_checked_before_reading(tmp_path):
    from streamsql.runtime.iceberg.source import opened

    lake = tmp_path / "lake"
    lake.mkdir()
    loaded = lake_table(lake)
    _, snapshot, matched, files = opened(table(iceberg_ddl("t", lake, "id BIGINT")))
    assert snapshot.snapshot_id == loaded.current_snapshot().snapshot_id and len(files) == 1
    with pytest.raises(ConnectorError, match="no snapshot committed at or before 'as-of-timestamp' = '1'"):
        opened(table(iceberg_ddl("t", lake, "id BIGINT", ", 'as-of-timestamp' = '1'")))
    with loaded.update_schema() as update:
        update.rename_column("name", "title")
    with pytest.raises(ConnectorError, match="column 'title' .* changed in its schema history \\(schema 0 had name string"):
        opened(table(iceberg_ddl("t", lake, "id BIGINT, title STRING")))
    assert [c.iceberg for c in opened(table(iceberg_ddl("t", lake, "id BIGINT")))[2]] == ["id"]
    with pytest.raises(ConnectorError, match="there is no Iceberg catalog at '.*/empty/iceberg_catalog.db'"):
        (tmp_path / "empty").mkdir()
        opened(table(iceberg_ddl("t", tmp_path / "empty", "id BIGINT")))


# -- with Spark -------------------------------------------------------------------------------------


SCHEMA = "id BIGINT, name STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3), tags ARRAY<STRING>"


@pytest.mark.spark
def test_written_by_streamsql_read_by_pyiceberg_and_back(run, tmp_path):
    lake = tmp_path / "lake"
    write(tmp_path / "in" / "a.csv", "1,alpha,1.50,2026-01-01 00:00:01\n2,beta,2.25,2026-01-01 00:00:02.5\n")
    run.output(
        "SET 'execution.runtime-mode' = 'batch';\n"
        f"CREATE TABLE src (id BIGINT, name STRING, amount DECIMAL(10, 2), ts TIMESTAMP(3)) WITH ("
        f"'connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n"
        + iceberg_ddl("t", lake, SCHEMA) + ";\n"
        "INSERT INTO t SELECT id, name, amount, ts, ARRAY[name, 'x'] FROM src;\n")
    loaded = catalog_of(lake).load_table(("db", "t"))
    assert [str(f.field_type) for f in loaded.schema().fields] == ["long", "string", "decimal(10, 2)", "timestamp", "list<string>"]
    assert iceberg_rows(lake, "t") == [
        {"id": 1, "name": "alpha", "amount": decimal.Decimal("1.50"), "ts": datetime.datetime(2026, 1, 1, 0, 0, 1),
         "tags": ["alpha", "x"]},
        {"id": 2, "name": "beta", "amount": decimal.Decimal("2.25"), "ts": datetime.datetime(2026, 1, 1, 0, 0, 2, 500000),
         "tags": ["beta", "x"]}]
    # pyiceberg appends; streamsql reads both snapshots' files, and time travels to the first
    first = loaded.current_snapshot().snapshot_id
    loaded.append(pa.table({"id": [3], "name": ["gamma"], "amount": [decimal.Decimal("3.00")],
                            "ts": [datetime.datetime(2026, 1, 1, 0, 0, 3)], "tags": [["g"]]},
                           schema=loaded.schema().as_arrow()))
    assert run.rows("SET 'execution.runtime-mode' = 'batch';\n" + iceberg_ddl("t", lake, SCHEMA)
                    + ";\nSELECT id, name, amount, ts, CARDINALITY(tags) FROM t ORDER BY id;") == [
        ["1", "alpha", "1.50", "2026-01-01 00:00:01.000", "2"], ["2", "beta", "2.25", "2026-01-01 00:00:02.500", "2"],
        ["3", "gamma", "3.00", "2026-01-01 00:00:03.000", "1"]]
    past = iceberg_ddl("t_then", lake, "id BIGINT, name STRING", f", 'catalog-table' = 't', 'snapshot-id' = '{first}'")
    assert run.rows(f"SET 'execution.runtime-mode' = 'batch';\n{past};\nSELECT * FROM t_then ORDER BY id;") == [
        ["1", "alpha"], ["2", "beta"]]
    moment = loaded.snapshot_by_id(first).timestamp_ms
    past = iceberg_ddl("t_at", lake, "id BIGINT", f", 'catalog-table' = 't', 'as-of-timestamp' = '{moment}'")
    assert run.rows(f"SET 'execution.runtime-mode' = 'batch';\n{past};\nSELECT COUNT(*) FROM t_at;") == [["2"]]


@pytest.mark.spark
def test_written_by_pyiceberg_partitioned_read_by_streamsql(run, tmp_path):
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    lake = tmp_path / "lake"
    lake.mkdir()
    lake_catalog = catalog_of(lake)
    lake_catalog.create_namespace("db")
    schema = pa.schema([("id", pa.int32()), ("day", pa.date32()), ("v", pa.float32())])
    created = lake_catalog.create_table(("db", "p"), schema=schema)
    with created.update_spec() as spec:
        spec.add_identity("day")
    created = lake_catalog.load_table(("db", "p"))
    days = [datetime.date(2026, 1, d) for d in (1, 2, 1)]
    created.append(pa.table({"id": pa.array([1, 2, 3], pa.int32()), "day": days, "v": pa.array([0.5, 1.5, 2.5], pa.float32())}))
    assert len(list(created.scan().plan_files())) == 2
    rows = run.rows("SET 'execution.runtime-mode' = 'batch';\n" + iceberg_ddl("p", lake, "id BIGINT, `day` DATE, v DOUBLE")
                    + ";\nSELECT `day`, SUM(id), SUM(v) FROM p GROUP BY `day` ORDER BY `day`;")
    assert rows == [["2026-01-01", "4", "3.0"], ["2026-01-02", "2", "1.5"]]


@pytest.mark.spark
def test_streaming_insert_into_iceberg_is_exactly_once_across_reruns(run, tmp_path):
    lake = tmp_path / "lake"
    write(tmp_path / "in" / "a.csv", "1,alpha,10\n2,beta,20\n3,,30\n")
    script = (
        f"CREATE TABLE IF NOT EXISTS src (id BIGINT, name STRING, amount INT) WITH ("
        f"'connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n"
        + iceberg_ddl("totals", lake, "id BIGINT, name STRING, amount INT") + ";\n"
        "INSERT INTO totals SELECT id, UPPER(name), amount * 2 FROM src WHERE amount > 10;\n")
    run.output(script)
    expected = [{"id": 2, "name": "BETA", "amount": 40}, {"id": 3, "name": None, "amount": 60}]
    assert iceberg_rows(lake, "totals") == expected
    run.output(script)  # nothing new to read: nothing written again
    assert iceberg_rows(lake, "totals") == expected
    # a crash after the sink committed batch 0 but before Spark's checkpoint recorded it: Spark
    # replays batch 0 on restart, and the sink must not append it again
    (spark_commit,) = (run.catalog_dir / "_checkpoints").glob("insert-into-totals-*/checkpoint/commits/0")
    spark_commit.unlink()
    (spark_commit.parent / ".0.crc").unlink(missing_ok=True)
    run.output(script)
    assert spark_commit.exists()  # batch 0 did run again
    assert iceberg_rows(lake, "totals") == expected
    write(tmp_path / "in" / "b.csv", "4,delta,40\n")
    run.output(script)
    assert iceberg_rows(lake, "totals") == [*expected, {"id": 4, "name": "DELTA", "amount": 80}]
    snapshots = catalog_of(lake).load_table(("db", "totals")).snapshots()
    assert [s.summary["streamsql.batch-id"] for s in snapshots] == ["0", "1"]
    assert len({s.summary["streamsql.job-id"] for s in snapshots}) == 1


@pytest.mark.spark
def test_bad_input_is_one_connector_error(run, tmp_path):
    lake = tmp_path / "lake"
    batch = "SET 'execution.runtime-mode' = 'batch';\n"
    with pytest.raises(ConnectorError, match="warehouse '.*/nowhere' does not exist"):
        run.rows(batch + iceberg_ddl("a", tmp_path / "nowhere", "id BIGINT") + ";\nSELECT * FROM a;")
    run.output(batch + iceberg_ddl("t", lake, "id BIGINT, name STRING") + ";\nINSERT INTO t VALUES (1, 'x');")
    with pytest.raises(ConnectorError, match="the Iceberg table 'db.missing' of catalog 'lake' does not exist"):
        run.rows(batch + iceberg_ddl("missing", lake, "id BIGINT") + ";\nSELECT * FROM missing;")
    with pytest.raises(ConnectorError, match="column 'name' is declared INT, but the Iceberg table 'db.t'"):
        run.rows(batch + iceberg_ddl("t2", lake, "id BIGINT, name INT", ", 'catalog-table' = 't'") + ";\nSELECT * FROM t2;")
    with pytest.raises(ConnectorError, match="has column\\(s\\) name the table does not declare"):
        run.output(batch + iceberg_ddl("t3", lake, "id BIGINT", ", 'catalog-table' = 't'") + ";\nINSERT INTO t3 VALUES (2);")
    with pytest.raises(ConnectorError, match="has no snapshot 42"):
        run.rows(batch + iceberg_ddl("t4", lake, "id BIGINT", ", 'catalog-table' = 't', 'snapshot-id' = '42'")
                 + ";\nSELECT * FROM t4;")
    with pytest.raises(ConnectorError, match="'catalog-type' = 'glue' is not supported"):
        run.rows(iceberg_ddl("h", lake, "id BIGINT", exists=False).replace("'jdbc'", "'glue'") + ";")


def test_a_snapshot_with_delete_files_is_refused():
    """pyiceberg writes no delete files (its merge-on-read falls back to copy-on-write), so the
    scan of a table Java's Iceberg wrote them into is stood in for."""
    from types import SimpleNamespace

    from pyiceberg.manifest import FileFormat

    from streamsql.runtime.iceberg.source import data_files

    data = SimpleNamespace(file_path="file:///w/db/t/data/a.parquet", file_format=FileFormat.PARQUET)
    deletes = SimpleNamespace(file_path="file:///w/db/t/data/a-deletes.parquet")
    tasks = [SimpleNamespace(file=data, delete_files=[deletes])]
    fake = SimpleNamespace(scan=lambda **_: SimpleNamespace(plan_files=lambda: tasks))
    t = table(f"CREATE TABLE t (id BIGINT) WITH ({BASE}, 'catalog-type' = 'jdbc', 'catalog-database' = 'db')")
    with pytest.raises(ConnectorError, match="snapshot 7 of the Iceberg table 'db.t' .* has delete files \\(rows of"
                                             " 'file:///w/db/t/data/a.parquet' deleted in '.*a-deletes.parquet'\\)"):
        data_files(t, fake, SimpleNamespace(snapshot_id=7), ["id"])
    tasks[0] = SimpleNamespace(file=SimpleNamespace(file_path="x.orc", file_format=FileFormat.ORC), delete_files=[])
    with pytest.raises(ConnectorError, match="data file 'x.orc' .* is ORC; only Parquet is read"):
        data_files(t, fake, SimpleNamespace(snapshot_id=7), ["id"])


@pytest.mark.spark
def test_an_iceberg_catalog_on_postgresql(run, tmp_path, db):
    """The catalog's tables in PostgreSQL ('uri' = 'jdbc:postgresql://...'), the layout of
    Iceberg's Java JdbcCatalog; and a bounded iceberg table read by a streaming job."""
    url, connection = db
    lake = tmp_path / "lake"
    extra = f", 'uri' = '{url}', 'jdbc.user' = 'postgres'"
    run.output("SET 'execution.runtime-mode' = 'batch';\n" + iceberg_ddl("t", lake, "id BIGINT, name STRING", extra)
               + ";\nINSERT INTO t VALUES (1, 'a'), (2, 'b');")
    assert connection.execute("SELECT catalog_name, table_namespace, table_name FROM iceberg_tables").fetchall() == [
        ("lake", "db", "t")]
    write(tmp_path / "in" / "a.csv", "1,10\n2,20\n")
    script = ("SET 'execution.runtime-mode' = 'streaming';\n"
              f"CREATE TABLE IF NOT EXISTS src (id BIGINT, v INT) WITH ('connector' = 'filesystem',"
              f" 'path' = '{tmp_path / 'in'}', 'format' = 'csv');\n"
              + iceberg_ddl("t", lake, "id BIGINT, name STRING", extra) + ";\n"
              + iceberg_ddl("out", lake, "id BIGINT, name STRING, v INT", extra) + ";\n"
              "INSERT INTO out SELECT s.id, t.name, s.v FROM src AS s JOIN t ON s.id = t.id;\n")
    run.output(script)
    from pyiceberg.catalog.sql import SqlCatalog

    from streamsql.runtime.iceberg.catalog import sqlalchemy_uri

    uri = sqlalchemy_uri(table(iceberg_ddl("out", lake, "id BIGINT", extra)))
    rows = SqlCatalog("lake", uri=uri, warehouse=f"file://{lake}").load_table(("db", "out")).scan().to_arrow().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [{"id": 1, "name": "a", "v": 10}, {"id": 2, "name": "b", "v": 20}]
    assert list((run.catalog_dir / "_checkpoints").glob("insert-into-out-*/checkpoint/commits/0"))  # streamed


@pytest.mark.spark
def test_a_bounded_window_job_over_iceberg_writes_each_window_once(run, tmp_path):
    """Iceberg in, Iceberg out, a TUMBLE over bounded input computed as one batch
    (runtime.inserts.run_bounded): a rerun over the same snapshot commits nothing; after
    pyiceberg appends rows of a later window, the rerun appends only that window."""
    lake = tmp_path / "lake"
    lake.mkdir()
    created = catalog_of(lake)
    created.create_namespace("db")
    events = created.create_table(("db", "events"), schema=pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))]))
    minute = datetime.datetime(2026, 1, 1)
    events.append(pa.table({"id": [1, 2, 3], "ts": [minute + datetime.timedelta(seconds=s) for s in (1, 20, 70)]},
                           schema=events.schema().as_arrow()))
    script = (iceberg_ddl("events", lake, "id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts") + ";\n"
              + iceberg_ddl("counts", lake, "window_start TIMESTAMP(3), id BIGINT, n BIGINT") + ";\n"
              "INSERT INTO counts SELECT window_start, SUM(id), COUNT(*) FROM TABLE(TUMBLE(TABLE events,"
              " DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;\n")
    run.output(script)
    first = [{"window_start": minute, "id": 3, "n": 2}, {"window_start": minute + datetime.timedelta(minutes=1), "id": 3, "n": 1}]
    assert sorted(iceberg_rows(lake, "counts"), key=lambda r: r["window_start"]) == first
    run.output(script)
    counts = catalog_of(lake).load_table(("db", "counts"))
    assert len(counts.snapshots()) == 1  # the same snapshot read: nothing committed
    events.append(pa.table({"id": [10], "ts": [minute + datetime.timedelta(minutes=2, seconds=5)]},
                           schema=events.schema().as_arrow()))
    run.output(script)
    rows = sorted(catalog_of(lake).load_table(("db", "counts")).scan().to_arrow().to_pylist(), key=lambda r: r["window_start"])
    assert rows == [*first, {"window_start": minute + datetime.timedelta(minutes=2), "id": 10, "n": 1}]


@pytest.mark.spark
def test_an_iceberg_table_read_as_a_stream(run, tmp_path):
    """'execution.bounded-input' = 'stream': the snapshot is one micro-batch, read with pyarrow
    (a TIMESTAMP's wall-clock time kept), and a rerun of the job reads nothing again."""
    lake = tmp_path / "lake"
    run.output("SET 'execution.runtime-mode' = 'batch';\n" + iceberg_ddl("src", lake, "id BIGINT, ts TIMESTAMP(3)")
               + ";\nINSERT INTO src VALUES (1, TIMESTAMP '2026-01-01 10:00:00.250'), (2, TIMESTAMP '2026-01-02 00:00:00');")
    script = ("SET 'execution.runtime-mode' = 'streaming';\nSET 'execution.bounded-input' = 'stream';\n"
              + iceberg_ddl("src", lake, "id BIGINT, ts TIMESTAMP(3)") + ";\n"
              + iceberg_ddl("dst", lake, "id BIGINT, ts TIMESTAMP(3)") + ";\nINSERT INTO dst SELECT id, ts FROM src;\n")
    run.output(script)
    expected = [{"id": 1, "ts": datetime.datetime(2026, 1, 1, 10, 0, 0, 250000)},
                {"id": 2, "ts": datetime.datetime(2026, 1, 2)}]
    assert iceberg_rows(lake, "dst") == expected
    assert list((run.catalog_dir / "_checkpoints").glob("insert-into-dst-*/checkpoint/commits/0"))  # streamed
    run.output(script)
    assert iceberg_rows(lake, "dst") == expected
