"""Iceberg REST catalogs ('catalog-type' = 'rest'): pyiceberg's REST client against a real REST
catalog server — Iceberg's own REST adapter and servlet (Java, from Maven: tests/java/IcebergRest.java)
over a JdbcCatalog in SQLite — started by the tests on loopback and always stopped."""

from __future__ import annotations

import os
import sqlite3
import subprocess

import pytest

from streamsql.catalog import Catalog
from streamsql.errors import CatalogError, ConnectorError
from streamsql.plan.define import define
from streamsql.dialect.script import parse_statement
from streamsql.runtime.engine import Engine
from tests.java_iceberg import java_classpath
from tests.statements import run as statements

REST_SERVER = ["org.apache.iceberg:iceberg-core:1.10.0", "org.apache.iceberg:iceberg-core:1.10.0:tests",
               "org.eclipse.jetty:jetty-servlet:11.0.25", "org.xerial:sqlite-jdbc:3.49.1.0"]


@pytest.mark.parametrize("options, message", [
    ("'catalog-type' = 'rest'", "a REST catalog needs 'uri' = 'http\\(s\\)://host:port/...' \\(its server\\), not none"),
    ("'catalog-type' = 'rest', 'uri' = 'jdbc:sqlite:/x'", "not 'jdbc:sqlite:/x'"),
    ("'catalog-type' = 'jdbc', 'warehouse' = '/w', 'token' = 't'", "'credential' and 'token' are a REST catalog's"),
    ("'catalog-type' = 'jdbc'", "needs option\\(s\\) 'warehouse'"),
    ("'catalog-impl' = 'org.apache.iceberg.rest.RESTCatalog', 'catalog-type' = 'hadoop', 'warehouse' = '/w'",
     "name different catalogs"),
])
def test_rest_catalog_options(options, message):
    with pytest.raises(ConnectorError, match=message):
        define(parse_statement(f"CREATE TABLE t (a INT) WITH ('connector' = 'iceberg', 'catalog-name' = 'c', {options})"),
               "default_database")


def test_an_unreachable_rest_catalog_is_one_message(tmp_path):
    engine = Engine(Catalog(tmp_path / "cat"), base_dir=tmp_path)
    for options, message in [
            ("'catalog-type' = 'jdbc'", "Catalog 'r' \\(type 'iceberg'\\): needs option\\(s\\) 'warehouse'$"),
            ("'catalog-type' = 'rest'", "Catalog 'r' \\(type 'iceberg'\\): a REST catalog needs 'uri'"),
            ("'catalog-type' = 'REST', 'uri' = 'jdbc:sqlite:/x'", "a REST catalog needs 'uri' = .* not 'jdbc:sqlite:/x'"),
            ("'catalog-type' = 'hadoop', 'warehouse' = 's3://b/w'", "must be on the local file system here"),
            ("'catalog-type' = 'hadoop', 'warehouse' = '/w', 'token' = 't'", "'credential' and 'token' are a REST"),
            ("'catalog-type' = 'glue', 'warehouse' = '/w'", "'catalog-type' = 'glue' is not supported")]:
        with pytest.raises(CatalogError, match=message):
            statements(engine, f"CREATE CATALOG r WITH ('type' = 'iceberg', {options})")
    assert not (tmp_path / "w").exists()
    statements(engine, "CREATE CATALOG rr WITH ('type' = 'iceberg', 'catalog-impl' = 'org.apache.iceberg.rest.RESTCatalog',"
                       " 'uri' = 'http://127.0.0.1:9')")  # the impl names a REST catalog: no warehouse needed
    statements(engine, "CREATE CATALOG r WITH ('type' = 'iceberg', 'catalog-type' = 'rest', 'uri' = 'http://127.0.0.1:9')")
    statements(engine, "USE CATALOG r")
    with pytest.raises(CatalogError, match="Catalog 'r': cannot reach the Iceberg REST catalog at 'http://127.0.0.1:9'"):
        statements(engine, "SHOW DATABASES")


@pytest.fixture(scope="module")
def rest_server(tmp_path_factory):
    """A REST catalog server's URI; its warehouse and SQLite file are beside it."""
    folder = tmp_path_factory.mktemp("rest")
    classpath = java_classpath(REST_SERVER, folder / "classes", "IcebergRest.java")
    server = subprocess.Popen(["java", "-cp", classpath, "IcebergRest", str(folder / "warehouse"),
                               str(folder / "catalog.db")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, start_new_session=True)
    try:
        line = server.stdout.readline()  # "port <n>" once it listens
        assert line.startswith("port "), "the REST catalog server did not start"
        yield f"http://127.0.0.1:{line.split()[1]}", folder
    finally:
        os.killpg(server.pid, 9)
        server.wait()


def test_tables_of_a_rest_catalog_are_written_and_read(run, rest_server):
    uri, folder = rest_server
    batch = "SET 'execution.runtime-mode' = 'batch';\n"
    run.output(batch + f"""
        CREATE TEMPORARY TABLE orders (id BIGINT, amount DOUBLE, PRIMARY KEY (id) NOT ENFORCED) WITH (
          'connector' = 'iceberg', 'catalog-name' = 'lake', 'catalog-type' = 'rest', 'uri' = '{uri}',
          'catalog-database' = 'sales');
        INSERT INTO orders VALUES (1, 1.5), (2, 2.5), (3, 3.5);
        INSERT INTO orders VALUES (2, 20.0);""")
    # the server committed it: its JdbcCatalog holds the table, at its second metadata version or later
    with sqlite3.connect(folder / "catalog.db") as db:
        [(location,)] = db.execute("SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'sales'"
                                   " AND table_name = 'orders'").fetchall()
    assert str(folder / "warehouse") in location
    from pyiceberg.catalog.rest import RestCatalog

    rows = RestCatalog("other", uri=uri).load_table("sales.orders").scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["amount"]) for r in rows) == [(1, 1.5), (2, 20.0), (3, 3.5)]

    # the same server as a catalog: its namespaces and tables, and DDL through it
    assert run.rows(f"CREATE CATALOG rest WITH ('type' = 'iceberg', 'catalog-type' = 'rest', 'uri' = '{uri}');"
                    "\nSHOW TABLES FROM rest.sales;") == [["orders"]]
    run.output(batch + "CREATE DATABASE rest.marts;\nCREATE TABLE rest.marts.big (id BIGINT, amount DOUBLE);\n"
               "INSERT INTO rest.marts.big SELECT id, amount FROM rest.sales.orders WHERE amount > 2;")
    assert sorted(run.rows(batch + "SELECT * FROM rest.marts.big;")) == [["2", "20.0"], ["3", "3.5"]]
