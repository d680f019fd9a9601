"""Flink's catalogs: CREATE / USE / SHOW / DROP CATALOG, three-part names, and the catalog types
(generic_in_memory, jdbc over a real PostgreSQL, iceberg over a SQL catalog read back with pyiceberg)."""

from __future__ import annotations

import pytest

from streamsql.catalog import Catalog
from streamsql.catalogs.postgres import flink_type
from streamsql.errors import CatalogError, StreamsqlError
from streamsql.runtime.engine import Engine
from tests.statements import run




@pytest.fixture
def engine(tmp_path):
    return Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)


# -- statements, without Spark ---------------------------------------------------------------------

def test_catalog_statements_and_names(spark, tmp_path):  # EXPLAIN shows Spark's plan: a Spark test
    engine = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path, spark=spark)
    run(engine, "CREATE CATALOG mem COMMENT 'scratch' WITH ('type' = 'generic_in_memory')")
    assert run(engine, "SHOW CATALOGS") == [["catalog name"], ["default_catalog"], ["mem"]]
    run(engine, "USE CATALOG mem")
    assert run(engine, "SHOW CURRENT CATALOG") == [["current catalog name"], ["mem"]]
    assert run(engine, "SHOW CURRENT DATABASE") == [["current database name"], ["default"]]
    run(engine, "CREATE TABLE t (a INT) WITH ('connector' = 'datagen', 'number-of-rows' = '3')")
    assert run(engine, "SHOW TABLES") == [["table name"], ["t"]]
    run(engine, "USE CATALOG default_catalog")
    assert run(engine, "SHOW TABLES") == [["table name"]]
    assert run(engine, "DESCRIBE mem.`default`.t")[1] == ["a", "INT", "true", "", "", ""]
    explained = run(engine, "EXPLAIN SELECT a FROM mem.`default`.t")
    assert any("mem, default, t" in cell for row in explained for cell in row)
    # the definition is stored (as Flink's file catalog store keeps it): a new session has it
    again = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)
    assert run(again, "SHOW CATALOGS") == [["catalog name"], ["default_catalog"], ["mem"]]
    assert "'type' = 'generic_in_memory'" in (tmp_path / "cat" / "_catalogs" / "mem.sql").read_text()
    with pytest.raises(StreamsqlError, match="Object 't' not found in default"):
        run(again, "SELECT * FROM mem.`default`.t")  # an in-memory catalog's tables went with its session
    assert run(again, "SHOW CREATE CATALOG mem") == [["result"], [
        "CREATE CATALOG `mem` COMMENT 'scratch' WITH (\n  'type' = 'generic_in_memory'\n);"]]
    run(again, "DROP CATALOG mem")
    assert run(again, "SHOW CATALOGS") == [["catalog name"], ["default_catalog"]]
    assert not (tmp_path / "cat" / "_catalogs" / "mem.sql").exists()


@pytest.mark.parametrize("sql, message", [
    ("CREATE CATALOG c WITH ('type' = 'paimon')", "type 'paimon' is not supported (types: 'jdbc', 'iceberg', 'hive', 'generic_in_memory')"),
    ("CREATE CATALOG c WITH ('a' = 'b')", "option 'type' is missing"),
    ("CREATE CATALOG c WITH ('type' = 'jdbc')", "option(s) 'base-url', 'default-database' missing"),
    ("CREATE CATALOG c WITH ('type' = 'jdbc', 'base-url' = 'jdbc:mysql://h', 'default-database' = 'd')",
     "'base-url' must be 'jdbc:postgresql://host:port'"),
    ("CREATE CATALOG c WITH ('type' = 'jdbc', 'base-url' = 'jdbc:postgresql://h/db', 'default-database' = 'd')",
     "the database is 'default-database'"),
    ("CREATE CATALOG c WITH ('type' = 'iceberg', 'warehouse' = '/w', 'colour' = 'red')", "unsupported option(s) 'colour'"),
    ("CREATE CATALOG default_catalog WITH ('type' = 'generic_in_memory')", "is the built-in one"),
    ("CREATE CATALOG c", "Expected WITH"),
    ("SELECT * FROM nowhere.db.t", "Catalog 'nowhere' does not exist (catalogs: default_catalog)"),
    ("USE CATALOG nowhere", "Catalog 'nowhere' does not exist"),
    ("DROP CATALOG nowhere", "Catalog 'nowhere' does not exist"),
    ("SHOW CREATE CATALOG nowhere", "Catalog 'nowhere' does not exist"),
    ("SHOW CREATE CATALOG default_catalog", "is the built-in one"),
    ("SHOW CREATE", "Incomplete SHOW: expected SHOW CATALOGS"),
    ("SHOW CURRENT", "Incomplete SHOW: expected SHOW CATALOGS"),
])
def test_bad_catalog_statements(engine, sql, message):
    with pytest.raises(StreamsqlError) as error:
        run(engine, sql)
    assert message in str(error.value)


def test_an_unknown_catalog_is_reported_at_its_name(engine):
    with pytest.raises(CatalogError) as error:
        run(engine, "SELECT *\nFROM  nowhere.db.t")
    assert (error.value.position.line, error.value.position.col) == (2, 7)


def test_the_current_catalog_cannot_be_dropped(engine):
    run(engine, "CREATE CATALOG mem WITH ('type' = 'generic_in_memory'); USE CATALOG mem")
    with pytest.raises(CatalogError, match="it is the current catalog"):
        run(engine, "DROP CATALOG mem")


def test_postgres_types_as_flinks_jdbc_catalog_maps_them():
    assert [flink_type(t) for t in ("smallint", "integer", "bigint", "real", "double precision", "numeric(12,4)",
                                    "numeric", "boolean", "character varying(20)", "character varying", "character(3)",
                                    "text", "bytea", "date", "time(3) without time zone", "timestamp(3) without time zone",
                                    "timestamp without time zone", "timestamp with time zone", "integer[]", "text[]")] == [
        "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(12, 4)", "DECIMAL(38, 18)", "BOOLEAN", "VARCHAR(20)",
        "STRING", "CHAR(3)", "STRING", "BYTES", "DATE", "TIME(3)", "TIMESTAMP(3)", "TIMESTAMP(6)", "TIMESTAMP_LTZ(6)",
        "ARRAY<INT>", "ARRAY<STRING>"]
    assert flink_type("jsonb") is None and flink_type("uuid") is None


def test_an_iceberg_catalogs_ddl_is_iceberg_tables(engine, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "lake"
    run(engine, f"CREATE CATALOG lake WITH ('type' = 'iceberg', 'catalog-type' = 'jdbc', 'warehouse' = '{warehouse}')")
    run(engine, "USE CATALOG lake; CREATE DATABASE sales; USE sales")
    run(engine, "CREATE TABLE orders (id BIGINT NOT NULL, amount DOUBLE, day STRING, tags ARRAY<STRING>,"
                " PRIMARY KEY (id) NOT ENFORCED) PARTITIONED BY (day)")
    assert run(engine, "SHOW DATABASES") == [["database name"], ["default"], ["sales"]]
    assert run(engine, "SHOW TABLES") == [["table name"], ["orders"]]
    # another engine sees an Iceberg table with the declared schema, key and partitions
    iceberg = SqlCatalog("lake", uri=f"sqlite:///{warehouse}/iceberg_catalog.db", warehouse=f"file://{warehouse}")
    table = iceberg.load_table(("sales", "orders"))
    schema = table.schema()
    assert [(f.name, str(f.field_type), f.required) for f in schema.fields] == [
        ("id", "long", True), ("amount", "double", False), ("day", "string", False), ("tags", "list<string>", False)]
    assert [schema.find_field(i).name for i in schema.identifier_field_ids] == ["id"]
    assert [schema.find_field(f.source_id).name for f in table.spec().fields] == ["day"]
    described = run(engine, "DESCRIBE orders")
    assert described[1][:4] == ["id", "BIGINT", "false", "PRI(id)"]
    assert ["WITH 'catalog-table'", "orders", "", "", "", ""] in described
    # a table made by another engine shows with Flink's types
    import pyarrow as pa

    iceberg.create_table(("sales", "made_elsewhere"), schema=pa.schema([pa.field("k", pa.int32(), nullable=False),
                                                                      pa.field("at", pa.timestamp("us", tz="UTC"))]))
    assert run(engine, "DESCRIBE made_elsewhere")[1:3] == [["k", "INT", "false", "", "", ""],
                                                          ["at", "TIMESTAMP_LTZ(6)", "true", "", "", ""]]
    with pytest.raises(CatalogError, match="holds Iceberg tables, not a view"):
        run(engine, "CREATE VIEW v AS SELECT 1")
    with pytest.raises(CatalogError, match="leave out 'connector'"):
        run(engine, "CREATE TABLE x (a INT) WITH ('connector' = 'datagen')")
    with pytest.raises(CatalogError, match="already exists"):
        run(engine, "CREATE TABLE orders (id BIGINT)")
    run(engine, "CREATE TABLE IF NOT EXISTS orders (id BIGINT)")
    run(engine, "DROP TABLE made_elsewhere")
    assert iceberg.list_tables("sales") == [("sales", "orders")]
    with pytest.raises(CatalogError, match="is not empty"):
        run(engine, "USE `default`; DROP DATABASE sales")


# -- a PostgreSQL server's tables ------------------------------------------------------------------

def _pg_catalog(url: str) -> tuple[str, str]:
    """CREATE CATALOG pg for the test database's server, and the database's name."""
    server, _, database = url.removeprefix("jdbc:postgresql://").partition("/")
    return (f"CREATE CATALOG pg WITH ('type' = 'jdbc', 'base-url' = 'jdbc:postgresql://{server}',"
            f" 'default-database' = '{database}', 'username' = 'postgres')"), database


@pytest.mark.spark
def test_a_jdbc_catalog_shows_postgres_tables_with_flink_types(engine, db):
    url, connection = db
    connection.execute("CREATE SCHEMA shop")
    connection.execute("CREATE TABLE customers (id int PRIMARY KEY, name varchar(40) NOT NULL, since timestamp(3))")
    connection.execute("CREATE TABLE shop.items (sku text, price numeric(10, 2), tags text[])")
    connection.execute("CREATE TABLE odd (id int, doc jsonb)")
    connection.commit()
    create, database = _pg_catalog(url)
    run(engine, create + "; USE CATALOG pg")
    assert run(engine, "SHOW CURRENT DATABASE") == [["current database name"], [database]]
    assert [database] in run(engine, "SHOW DATABASES")
    assert run(engine, "SHOW TABLES") == [["table name"], ["public.customers"], ["shop.items"]]
    assert run(engine, "DESCRIBE customers")[1:4] == [
        ["id", "INT", "false", "PRI(id)", "", ""], ["name", "VARCHAR(40)", "false", "", "", ""],
        ["since", "TIMESTAMP(3)", "true", "", "", ""]]
    assert run(engine, "DESCRIBE `shop.items`")[1:4] == [
        ["sku", "STRING", "true", "", "", ""], ["price", "DECIMAL(10, 2)", "true", "", "", ""],
        ["tags", "ARRAY<STRING>", "true", "", "", ""]]
    with pytest.raises(CatalogError, match="column 'doc' has PostgreSQL type 'jsonb'"):
        run(engine, "DESCRIBE odd")
    with pytest.raises(CatalogError, match="does not support CREATE TABLE"):
        run(engine, "CREATE TABLE x (a INT) WITH ('connector' = 'datagen')")


@pytest.mark.spark
def test_queries_inserts_and_lookups_through_a_jdbc_catalog(run, db, tmp_path):
    url, connection = db
    connection.execute("CREATE TABLE customers (id int PRIMARY KEY, region text)")
    connection.execute("INSERT INTO customers SELECT g, 'r' || (g % 3) FROM generate_series(1, 20) g")
    connection.execute("CREATE TABLE totals (region text PRIMARY KEY, n bigint)")
    connection.commit()
    create, database = _pg_catalog(url)
    (tmp_path / "orders.csv").write_text("".join(f"{i},{i % 25}\n" for i in range(60)))
    script = (f"{create};\n"
              f"CREATE TEMPORARY TABLE orders (oid INT, cid INT, pt AS PROCTIME()) WITH ('connector' = 'filesystem',"
              f" 'path' = '{tmp_path / 'orders.csv'}', 'format' = 'csv');\n")
    expected: dict[str, int] = {}
    for i in range(60):
        if 1 <= i % 25 <= 20:
            expected[f"r{(i % 25) % 3}"] = expected.get(f"r{(i % 25) % 3}", 0) + 1
    # a three-part name in a join, and the catalog's table as a sink (upsert by its primary key)
    run.rows(script + f"INSERT INTO pg.{database}.totals SELECT c.region, COUNT(*) FROM orders o"
                      f" JOIN pg.{database}.`public.customers` c ON o.cid = c.id GROUP BY c.region;\n")
    assert sorted(connection.execute("SELECT region, n FROM totals").fetchall()) == sorted(expected.items())
    # a lookup join into the catalog's table, unqualified after USE CATALOG
    rows = run.rows(script + "USE CATALOG pg;\nSELECT o.oid, c.region FROM default_catalog.default_database.orders AS o"
                             " JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.cid = c.id WHERE o.oid < 8;\n")
    assert sorted(rows) == sorted([[str(i), f"r{i % 3}"] for i in range(1, 8)])


@pytest.mark.spark
def test_an_insert_into_an_iceberg_catalogs_table_reads_back(run, tmp_path):
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "lake"
    run.rows(f"CREATE CATALOG lake WITH ('type' = 'iceberg', 'catalog-type' = 'jdbc', 'warehouse' = '{warehouse}');\n"
             "CREATE DATABASE lake.sales;\n"
             "CREATE TABLE lake.sales.orders (id BIGINT, amount DOUBLE, day STRING) PARTITIONED BY (day);\n"
             "INSERT INTO lake.sales.orders VALUES (1, 2.5, 'mon'), (2, 4.0, 'tue'), (3, 1.5, 'mon');\n")
    iceberg = SqlCatalog("lake", uri=f"sqlite:///{warehouse}/iceberg_catalog.db", warehouse=f"file://{warehouse}")
    read = iceberg.load_table(("sales", "orders")).scan().to_arrow().sort_by("id").to_pylist()
    assert read == [{"id": 1, "amount": 2.5, "day": "mon"}, {"id": 2, "amount": 4.0, "day": "tue"},
                    {"id": 3, "amount": 1.5, "day": "mon"}]
    assert run.rows("SELECT day, SUM(amount) FROM lake.sales.orders GROUP BY day ORDER BY day;\n") == [
        ["mon", "4.0"], ["tue", "4.0"]]
