"""Lookup joins into PostgreSQL over a stream: keyed lookups per micro-batch (no full scan,
no query per row), the database's rows as they are when a row passes (they change under the
running job), Flink's partial cache, and plain joins where the shape is not a keyed one."""

from __future__ import annotations


import pytest

from tests.conftest import in_background, wait_for, write


# -- the cut, without Spark --------------------------------------------------------------------------


def test_the_cut_of_keyed_lookup_joins(tmp_path):
    from streamsql.catalog import Catalog
    from streamsql.dialect.script import parse_script
    from streamsql.plan.planner import Planner
    from streamsql.spark.lookup_joins import cut_lookups

    (tmp_path / "in").mkdir()
    planner = Planner(Catalog(None), tmp_path)
    ddl = (f"CREATE TEMPORARY TABLE orders (oid BIGINT, cid INT, amount BIGINT, pt AS PROCTIME()) WITH ("
           f"'connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'csv', 'source.monitor-interval' = '1s');"
           "CREATE TEMPORARY TABLE cust (id INT, name STRING, region STRING) WITH ('connector' = 'jdbc',"
           " 'url' = 'jdbc:postgresql://h/db', 'table-name' = 'cust');")

    def cut(sql: str):
        step = [planner.plan(s) for s in parse_script(ddl + sql)][-1]
        return cut_lookups(step.plan.query, {"cust": ["id", "name", "region"]})

    query, cuts = cut("SELECT o.oid, c.name FROM orders AS o JOIN cust FOR SYSTEM_TIME AS OF o.pt AS c"
                      " ON o.cid + 1 = c.id AND c.region <> 'x' WHERE o.amount > 5")
    (one,) = cuts
    n = one.number
    assert query.sql() == (f"SELECT o.oid AS oid, o.__d{n}_1 AS name FROM __lookup_{n} AS o"
                           f" WHERE (o.amount > 5) AND (o.__d{n}_2 <> 'x')")
    assert [k.sql() for k in one.keys] == ["o.cid + 1"] and one.key_columns == ["id"] and not one.outer
    assert one.left.sql() == "orders AS o"
    # a LEFT join: its keys only; with another condition it stays Spark's stream-static join
    query, (left,) = cut("SELECT c.region, COUNT(*) FROM orders AS o LEFT JOIN cust FOR SYSTEM_TIME AS OF o.pt AS c"
                         " ON c.id = o.cid GROUP BY c.region")
    assert left.outer and f"FROM __lookup_{left.number} AS o GROUP BY o.__d{left.number}_2" in query.sql()
    assert cut("SELECT c.name FROM orders AS o LEFT JOIN cust FOR SYSTEM_TIME AS OF o.pt AS c ON c.id = o.cid"
               " AND c.region <> 'r1'")[1] == []
    # an equality with a constant is a key too, as in Flink
    _, (constant,) = cut("SELECT c.name FROM orders AS o LEFT JOIN cust FOR SYSTEM_TIME AS OF o.pt AS c"
                         " ON c.id = o.cid AND c.region = 'r1'")
    assert [k.sql() for k in constant.keys] == ["o.cid", "'r1'"] and constant.key_columns == ["id", "region"]
    # a plain join of the same table is no lookup
    assert cut("SELECT c.name FROM orders AS o JOIN cust AS c ON c.id = o.cid")[1] == []


def test_the_partial_cache_bounds():
    from streamsql.runtime.jdbc_lookup import Cache, LookupSpec

    spec = LookupSpec(params={}, relation="r", select=("a",), keys=(0,), key_types=("int4",), label="t", cache=True,
                      max_rows=2, expire_write_s=10, expire_access_s=3, cache_missing=False)
    cache = Cache(spec)
    cache.put((1,), [(1,)], now=0)
    cache.put((2,), [(2,)], now=0)
    cache.put((9,), [], now=0)  # a missing key is not kept when told so
    assert cache.get((9,), 0) is None
    assert cache.get((1,), 1) == [(1,)]  # used: (2,) is now the least recently used
    cache.put((3,), [(3,)], now=1)
    assert cache.get((2,), 1) is None and cache.get((3,), 1) == [(3,)]
    assert cache.get((1,), 3.9) == [(1,)]  # 2.9 s after its last use: kept (expire-after-access 3 s)
    assert cache.get((1,), 7) is None  # 3.1 s after: gone
    for now in (3.5, 6, 8.5, 10.5):  # used within every 3 s: kept until 10 s after it was read (at 1)
        assert cache.get((3,), now) == [(3,)]
    assert cache.get((3,), 11) is None  # expire-after-write


# -- against PostgreSQL ------------------------------------------------------------------------------


POSTGRES_SETTINGS = {"shared_preload_libraries": "pg_stat_statements"}  # (conftest)
POSTGRES_EXTENSIONS = ["pg_stat_statements"]


HERE = "dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"  # pg_stat_statements counts every database's


def _reads(connection, table: str = "customers") -> tuple[int, int, int]:
    """The lookups into ``table`` (queries, rows they returned), and the rows of whole scans
    (of any table)."""
    lookups = connection.execute("SELECT coalesce(sum(calls), 0), coalesce(sum(rows), 0) FROM pg_stat_statements"
                                 f" WHERE query LIKE '%FROM public.{table} WHERE %' AND {HERE}").fetchone()
    scanned = connection.execute("SELECT coalesce(sum(rows), 0) FROM pg_stat_statements"
                                 f" WHERE query LIKE 'FETCH FORWARD % FROM \"streamsql_scan\"' AND {HERE}").fetchone()
    return (*lookups, *scanned)


@pytest.mark.spark
@pytest.mark.parametrize("side, tiers, cache", [
    ("", True, ""), ("LEFT", False, ""), ("LEFT", True, ""),
    ("", True, ", 'lookup.cache' = 'PARTIAL', 'lookup.partial-cache.max-rows' = '1000',"
               " 'lookup.partial-cache.expire-after-write' = '1 h'"),
], ids=["inner", "left", "left-with-a-condition", "inner-cached"])
def test_a_running_lookup_join_sees_the_database_as_it_is(run, tmp_path, db, side, tiers, cache):
    """``tiers``: ON has a condition beyond the key (for a LEFT join: Spark's stream-static join,
    which reads the whole table each micro-batch)."""
    url, connection = db
    connection.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, tier smallint)")
    connection.execute("INSERT INTO customers SELECT g, 'c' || g, g % 3 FROM generate_series(1, 5000) g")
    connection.execute("ANALYZE customers")
    source, sink = tmp_path / "in", tmp_path / "out"
    write(source / "1.csv", "".join(f"{i},{i % 60},{i * 10}\n" for i in range(400)))
    script = (
        "SET 'execution.runtime-mode' = 'streaming';\n"
        f"CREATE TEMPORARY TABLE orders (oid BIGINT, cid BIGINT, amount BIGINT, pt AS PROCTIME()) WITH ("
        f"'connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');\n"
        f"CREATE TEMPORARY TABLE customers (id INT, name STRING, tier TINYINT) WITH ('connector' = 'jdbc',"
        f" 'url' = '{url}', 'table-name' = 'customers', 'username' = 'postgres'{cache});\n"
        f"CREATE TEMPORARY TABLE enriched (oid BIGINT, name STRING, amount BIGINT) WITH ('connector' = 'filesystem',"
        f" 'path' = '{sink}', 'format' = 'csv');\n"
        "INSERT INTO enriched SELECT o.oid, c.name, o.amount FROM orders AS o"
        f" {side} JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid = c.id{' AND c.tier < 2' if tiers else ''};\n"
    )

    def expected(rows, names):
        out = []
        for oid, cid in rows:
            name = names.get(cid)
            if name is not None:
                out.append(f"{oid},{name},{oid * 10}")
            elif side:
                out.append(f"{oid},,{oid * 10}")
        return sorted(out)

    def written() -> list[str]:
        return sorted(line for f in sink.glob("part-*.csv") for line in f.read_text().splitlines())

    names = {g: f"c{g}" for g in range(1, 61) if g % 3 < 2 or not tiers}
    first = expected([(i, i % 60) for i in range(400)], names)
    before = _reads(connection)
    job, errors = in_background(run, script)
    assert wait_for(lambda: written() == first or errors, seconds=90), (written(), errors)
    # while it runs: customer 7 renamed, 5052 added, 4 removed; a new file's rows see that
    connection.execute("UPDATE customers SET name = 'renamed' WHERE id = 7")
    connection.execute("INSERT INTO customers VALUES (5052, 'new', 1)")
    connection.execute("DELETE FROM customers WHERE id = 4")
    # (cached: keys read before may be seen as they were, as in Flink; 5052 and 10 are certain)
    later = [(1000 + i, cid) for i, cid in enumerate([5052, 10] if cache else [7, 5052, 4, 10])]
    write(source / "2.csv", "".join(f"{oid},{cid},{oid * 10}\n" for oid, cid in later))
    names.update({7: "renamed", 5052: "new"})
    names.pop(4)
    second = sorted(first + expected(later, names))
    assert wait_for(lambda: written() == second or errors, seconds=90), (written(), errors)
    lookups, found, scanned = (now - then for now, then in zip(_reads(connection), before))
    for query in run.engine.spark.streams.active:
        query.stop()
    job.join(30)
    assert not errors
    if side and tiers:  # Spark's stream-static join: the whole table each micro-batch
        assert scanned >= 5000 and lookups == 0, (scanned, lookups)
    else:  # keyed: a query per task and micro-batch, never one per row (404 rows), nor a whole scan
        assert 1 <= lookups <= 10 and found < 200 and scanned == 0, (lookups, found, scanned)


@pytest.mark.parametrize("on", ["c.id > o.cid", "o.cid = o.cid", "c.id = c.id + 0", "TRUE"])
def test_a_lookup_join_needs_an_equality_on_the_tables_fields(plan_lookup, on):
    from streamsql.errors import ValidationError

    with pytest.raises(ValidationError, match="Temporal table join requires an equality condition on fields of"
                                              " table 'cust'") as raised:
        plan_lookup(f"SELECT c.name FROM orders AS o JOIN cust FOR SYSTEM_TIME AS OF o.pt AS c ON {on}")
    assert raised.value.position is not None and raised.value.position.line == 3


@pytest.fixture
def plan_lookup(tmp_path):
    from streamsql.catalog import Catalog
    from streamsql.dialect.script import parse_script
    from streamsql.plan.planner import Planner

    (tmp_path / "in").mkdir()
    ddl = (f"CREATE TEMPORARY TABLE orders (oid BIGINT, cid INT, pt AS PROCTIME()) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'in'}', 'format' = 'csv', 'source.monitor-interval' = '1s');\n"
           "CREATE TEMPORARY TABLE cust (id INT, name STRING) WITH ('connector' = 'jdbc',"
           " 'url' = 'jdbc:postgresql://h/db', 'table-name' = 'cust');\n")

    def planned(sql: str):
        planner = Planner(Catalog(None), tmp_path)
        return [planner.plan(s) for s in parse_script(ddl + sql)][-1]

    return planned


SHAPES = {
    # an updating GROUP BY over the lookup (streamsql's aggregate reads the lookup's rows)
    "aggregate": "SELECT c.region, COUNT(*) AS n, SUM(o.amount) AS total FROM orders AS o"
                 " JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid = c.id GROUP BY c.region",
    # two lookups in a row, the second keyed by the first's column, and a constant key
    "chained": "SELECT o.oid, c.name, r.label FROM orders AS o"
               " JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid = c.id"
               " LEFT JOIN regions FOR SYSTEM_TIME AS OF o.pt AS r ON r.code = c.region AND r.active = TRUE",
    # the lookup inside a view, with a key computed on the left
    "view": "SELECT v.oid, v.name FROM enriched_view AS v WHERE v.name <> 'c3'",
}


@pytest.mark.spark
@pytest.mark.parametrize("shape", SHAPES)
def test_lookup_shapes_streamed_equal_the_bounded_result(run, tmp_path, db, shape):
    """The stream's keyed lookups give the batch run's rows (a plain join of the tables)."""
    url, connection = db
    connection.execute("CREATE TABLE customers (id int PRIMARY KEY, name text, region text)")
    connection.execute("INSERT INTO customers SELECT g, 'c' || g, 'r' || (g % 4) FROM generate_series(1, 40) g")
    connection.execute("CREATE TABLE regions (code text, active boolean, label text)")
    connection.execute("INSERT INTO regions VALUES ('r0', true, 'zero'), ('r1', true, 'one'), ('r1', false, 'old one'),"
                       " ('r2', false, 'two')")
    source = tmp_path / "in"
    write(source / "1.csv", "".join(f"{i},{(i * 7) % 45},{i}\n" for i in range(0, 150)))
    write(source / "2.csv", "".join(f"{i},{(i * 7) % 45},{i}\n" for i in range(150, 300)))
    ddl = (
        f"CREATE TEMPORARY TABLE orders (oid BIGINT, cid INT, amount BIGINT, pt AS PROCTIME()) WITH ("
        f"'connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv'{{monitor}});\n"
        f"CREATE TEMPORARY TABLE customers (id INT, name STRING, region STRING) WITH ('connector' = 'jdbc',"
        f" 'url' = '{url}', 'table-name' = 'customers', 'username' = 'postgres');\n"
        f"CREATE TEMPORARY TABLE regions (code STRING, active BOOLEAN, label STRING) WITH ('connector' = 'jdbc',"
        f" 'url' = '{url}', 'table-name' = 'regions', 'username' = 'postgres', 'lookup.cache' = 'PARTIAL',"
        f" 'lookup.partial-cache.max-rows' = '2');\n"
        "CREATE TEMPORARY VIEW enriched_view AS SELECT o.oid, c.name FROM orders AS o"
        " JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid - 1 = c.id;\n"
    )
    bounded = sorted(map(tuple, run.rows(ddl.format(monitor="") + SHAPES[shape] + ";\n")))
    assert len(bounded) > 3
    script = ("SET 'execution.runtime-mode' = 'streaming';\nSET 'execution.bounded-input' = 'stream';\n"
              + ddl.format(monitor="") + SHAPES[shape] + ";\n")
    before = {t: _reads(connection, t) for t in ("customers", "regions")}
    streamed = run.rows(script)
    for name in ("customers", "regions") if shape == "chained" else ("customers",):  # keyed lookups, no scans
        lookups, _, scanned = (now - then for now, then in zip(_reads(connection, name), before[name]))
        assert lookups > 0 and scanned == 0, (name, lookups, scanned)
    if streamed and streamed[0][0] in ("+I", "-U", "+U", "-D"):  # an updating result's changelog, applied
        table: list = []
        for kind, *row in streamed:
            if kind in ("+I", "+U"):
                table.append(tuple(row))
            else:
                table.remove(tuple(row))
        streamed = table
    assert sorted(map(tuple, streamed)) == bounded
