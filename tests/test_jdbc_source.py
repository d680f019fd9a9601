"""The jdbc connector as a bounded source: a PostgreSQL table read with its declared types,
split by Flink's scan.partition.* options, and every bad table, column or type one clear
error before a task runs."""

from __future__ import annotations

import itertools

import pytest

from streamsql.dialect.script import parse_script
from streamsql.errors import ConnectorError
from streamsql.plan.define import define


def table(sql: str):
    return define(parse_script(sql)[0].expression, "default_database")


def jdbc(name: str, url: str, schema: str, extra: str = "", target: str | None = None) -> str:
    return (f"CREATE OR REPLACE TEMPORARY TABLE {name} ({schema}) WITH ('connector' = 'jdbc', 'url' = '{url}',"
            f" 'table-name' = '{target or name}', 'username' = 'postgres'{extra})")


# -- options, without Spark or PostgreSQL ----------------------------------------------------------

BASE = "'connector' = 'jdbc', 'url' = 'jdbc:postgresql://h/db', 'table-name' = 't'"


@pytest.mark.parametrize("extra, message", [
    (", 'scan.partition.column' = 'a', 'scan.partition.num' = '2'",
     "either all or none of the options .* \\(missing: 'scan.partition.lower-bound', 'scan.partition.upper-bound'\\)"),
    (", 'scan.partition.column' = 'a', 'scan.partition.num' = '2', 'scan.partition.lower-bound' = '9',"
     " 'scan.partition.upper-bound' = '1'", "'scan.partition.lower-bound' = '9' must not be larger than"),
    (", 'scan.partition.column' = 'b', 'scan.partition.num' = '2', 'scan.partition.lower-bound' = '0',"
     " 'scan.partition.upper-bound' = '1'", "'scan.partition.column' must be a column of an integer type, not 'b'"),
    (", 'scan.partition.column' = 'zz', 'scan.partition.num' = '2', 'scan.partition.lower-bound' = '0',"
     " 'scan.partition.upper-bound' = '1'", "'scan.partition.column' = 'zz' is not one of its columns"),
    (", 'scan.partition.column' = 'a', 'scan.partition.num' = '0', 'scan.partition.lower-bound' = '0',"
     " 'scan.partition.upper-bound' = '1'", "'scan.partition.num' must be at least 1"),
    (", 'scan.partition.column' = 'a', 'scan.partition.num' = '2', 'scan.partition.lower-bound' = 'low',"
     " 'scan.partition.upper-bound' = '1'", "'scan.partition.lower-bound' must be an integer, not 'low'"),
    (", 'scan.fetch-size' = 'many'", "'scan.fetch-size' must be a non-negative integer"),
    (", 'lookup.partial-cache.max-rows' = '10'", "'lookup.partial-cache.max-rows' need 'lookup.cache' = 'PARTIAL'"),
    (", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.expire-after-write' = 'later'",
     "'lookup.partial-cache.expire-after-write' must be a duration"),
    (", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.cache-missing-key' = 'maybe'",
     "'lookup.partial-cache.cache-missing-key' must be 'true' or 'false'"),
])
def test_bad_scan_and_lookup_options(extra, message):
    with pytest.raises(ConnectorError, match=message):
        table(f"CREATE TABLE t (a BIGINT, b STRING) WITH ({BASE}{extra})")


def test_flinks_partition_ranges():
    from streamsql.runtime.jdbc_source import partition_ranges

    assert partition_ranges(1, 10, 3) == [(1, 4), (5, 7), (8, 10)]
    assert partition_ranges(0, 9, 5) == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    assert partition_ranges(5, 5, 4) == [(5, 5)]  # never more parts than values
    assert partition_ranges(-3, 2, 2) == [(-3, -1), (0, 2)]
    for lower, upper, num in itertools.product(range(-2, 3), range(3, 9), range(1, 7)):
        ranges = partition_ranges(lower, upper, num)
        covered = [v for a, b in ranges for v in range(a, b + 1)]
        assert covered == list(range(lower, upper + 1))  # consecutive, no gap, no overlap
        sizes = [b - a + 1 for a, b in ranges]
        assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


# -- against PostgreSQL ------------------------------------------------------------------------------


TYPED = ("id bigint PRIMARY KEY, small smallint, n int, name varchar(20), price numeric(12, 4), ratio double precision,"
         " ok boolean, day date, at timestamp(3), tags text[]")


@pytest.mark.spark
def test_a_table_read_with_its_declared_types(run, db):
    url, connection = db
    connection.execute(f"CREATE TABLE items ({TYPED})")
    connection.execute(
        "INSERT INTO items VALUES (1, 2, 30, 'apple', 1.25, 0.5, true, '2026-01-02', '2026-01-02 03:04:05.678', '{a,b}'),"
        " (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
        " (3, -7, 2147483647, 'päron', 12345678.9999, -1e300, false, '1999-12-31', '1970-01-01 00:00:00', '{}')")
    connection.commit()
    ddl = jdbc("items", url, "id BIGINT, small SMALLINT, n INT, name STRING, price DECIMAL(12, 4), ratio DOUBLE,"
                             " ok BOOLEAN, day DATE, at TIMESTAMP(3), tags ARRAY<STRING>")
    rows = run.rows(ddl + ";\nSELECT * FROM items ORDER BY id;\n")
    assert rows == [
        ["1", "2", "30", "apple", "1.2500", "0.5", "true", "2026-01-02", "2026-01-02 03:04:05.678", "[a, b]"],
        ["2", "", "", "", "", "", "", "", "", ""],
        ["3", "-7", "2147483647", "päron", "12345678.9999", "-1.0E300", "false", "1999-12-31", "1970-01-01 00:00:00.000",
         "[]"],
    ]
    # columns by name in any case, in the table's order or not; any column reads as STRING
    ddl = jdbc("items", url, "NAME STRING, Id INT, day STRING, price DECIMAL(10, 1)")
    assert run.rows(ddl + ";\nSELECT * FROM items WHERE Id <> 2 ORDER BY Id;\n") == [
        ["apple", "1", "2026-01-02", "1.3"], ["päron", "3", "1999-12-31", "12345679.0"]]


@pytest.mark.spark
def test_queries_over_a_jdbc_table_and_a_file(run, db, tmp_path):
    url, connection = db
    connection.execute("CREATE TABLE customers (id int PRIMARY KEY, region text)")
    connection.execute("INSERT INTO customers SELECT g, 'r' || (g % 3) FROM generate_series(1, 30) g")
    connection.commit()
    (tmp_path / "orders.csv").write_text("".join(f"{i},{i % 35},{i * 10}\n" for i in range(100)))
    script = (jdbc("customers", url, "id INT, region STRING") + ";\n"
              f"CREATE TEMPORARY TABLE orders (oid INT, cid INT, amount BIGINT) WITH ('connector' = 'filesystem',"
              f" 'path' = '{tmp_path / 'orders.csv'}', 'format' = 'csv');\n"
              "SELECT c.region, COUNT(*), SUM(o.amount) FROM orders o JOIN customers c ON o.cid = c.id"
              " GROUP BY c.region ORDER BY c.region;\n")
    expected = {}
    for i in range(100):
        if 1 <= i % 35 <= 30:
            region = f"r{(i % 35) % 3}"
            count, total = expected.get(region, (0, 0))
            expected[region] = (count + 1, total + i * 10)
    assert run.rows(script) == [[r, str(c), str(t)] for r, (c, t) in sorted(expected.items())]


@pytest.mark.spark
def test_a_partitioned_scan_reads_flinks_ranges_in_parallel(run, db):
    url, connection = db
    connection.execute("CREATE TABLE nums (k bigint, v text)")
    connection.execute("INSERT INTO nums SELECT g, 'v' || g FROM generate_series(-5, 105) g")
    connection.commit()
    options = (", 'scan.partition.column' = 'k', 'scan.partition.num' = '4', 'scan.partition.lower-bound' = '0',"
               " 'scan.partition.upper-bound' = '99', 'scan.fetch-size' = '7'")
    nums = table(jdbc("nums", url, "k BIGINT, v STRING", options))
    from streamsql.runtime.sources import source_frame

    frame = source_frame(run.engine.spark, nums, False, {})
    # (the frame's own session: DataFrame.rdd plans under the thread's active session, which
    # another test module may have changed)
    tasks = {r[0] for r in frame.selectExpr("spark_partition_id()").collect()}
    assert tasks == {0, 1, 2, 3}
    rows = sorted(tuple(r) for r in frame.collect())
    assert rows == [(k, f"v{k}") for k in range(100)]  # as in Flink: outside [lower, upper] is not read


@pytest.mark.spark
def test_bad_tables_columns_and_types_are_named_before_a_task_runs(run, db):
    url, connection = db
    connection.execute("CREATE TABLE t (a int, d date, s text)")
    connection.execute("INSERT INTO t VALUES (1, '2026-01-01', 'x'), (2, NULL, '12')")
    connection.commit()
    cases = [
        (jdbc("missing", url, "a INT"), "jdbc table 'missing' \\(missing\\): no such table in PostgreSQL"),
        (jdbc("t", url, "a INT, nope STRING"), "PostgreSQL table has no column 'nope' \\(columns: a, d, s\\)"),
        (jdbc("t", url, "a INT, d INT"), "column 'd' \\(date in PostgreSQL\\) cannot be read as INT: .*cannot cast type"
                                         " date to integer"),
    ]
    for ddl, message in cases:
        with pytest.raises(ConnectorError, match=message):
            run.output(ddl + ";\nSELECT * FROM " + ddl.split()[5] + ";\n")
    # a value that does not fit its declared type fails as it is read, in PostgreSQL's words
    with pytest.raises(ConnectorError, match="jdbc table 't' \\(t\\): reading failed: invalid input syntax for type"
                                             " integer: \"x\""):
        run.output(jdbc("t", url, "a INT, s INT") + ";\nSELECT * FROM t;\n")


@pytest.mark.spark
def test_a_jdbc_table_in_a_stream_is_read_once(run, db, tmp_path):
    """A bounded jdbc table in an unbounded query: one micro-batch with the whole scan, not
    read again on a restart."""
    url, connection = db
    connection.execute("CREATE TABLE seed (k int, v text)")
    connection.execute("INSERT INTO seed VALUES (1, 'a'), (2, 'b')")
    connection.commit()
    out = tmp_path / "out"
    script = ("SET 'execution.runtime-mode' = 'streaming';\n" + jdbc("seed", url, "k INT, v STRING") + ";\n"
              f"CREATE TEMPORARY TABLE copy (k INT, v STRING) WITH ('connector' = 'filesystem', 'path' = '{out}',"
              " 'format' = 'csv');\nINSERT INTO copy SELECT k, UPPER(v) FROM seed;\n")
    run.output(script)

    def written():
        return sorted(line for f in out.glob("part-*") for line in f.read_text().splitlines())

    assert written() == ["1,A", "2,B"]
    connection.execute("INSERT INTO seed VALUES (3, 'c')")
    connection.commit()
    run.output(script)
    assert written() == ["1,A", "2,B"]
