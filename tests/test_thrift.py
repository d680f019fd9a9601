"""`streamsql serve --thrift`: Spark's Thrift server (HiveServer2) queried by real clients.

A HiveServer2 client from PyPI (PyHive, as Superset uses it) and PySpark's bundled `beeline`
(Hive's JDBC driver, as DBeaver or any JDBC tool uses it) list and query catalog tables,
and see rows that a streamsql INSERT job writes while the server runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess

import pytest

from tests.conftest import streamsql, wait_for, write
from tests.processes import serving
from tests.ports import free_port, free_ports
from tests.spark_cluster import spark_home

ORDERS = [(1, "apple", 3, "0.50"), (2, "pear", 1, "0.75"), (3, "fig", 5, "1.20"), (4, "apple", 2, "0.50")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A catalog with a source table and an (empty) sink table, served with --thrift."""
    tmp = tmp_path_factory.mktemp("thrift")
    write(tmp / "orders" / "part-0.csv", "".join(f"{i},{item},{qty},{price}\n" for i, item, qty, price in ORDERS))
    (tmp / "big").mkdir()
    ddl = f"""
CREATE DATABASE shop;
CREATE TABLE shop.orders (id BIGINT, item STRING, qty INT, price DECIMAL(10, 2))
  WITH ('connector' = 'filesystem', 'path' = '{tmp / "orders"}', 'format' = 'csv');
CREATE TABLE shop.big_orders (id BIGINT, item STRING, amount DECIMAL(21, 2))
  WITH ('connector' = 'filesystem', 'path' = '{tmp / "big"}', 'format' = 'csv');
"""
    assert streamsql(tmp / "catalog", "run", "-e", ddl).wait(60) == 0
    port, thrift = free_ports(2)  # (two calls of free_port may give one port twice)
    server = streamsql(tmp / "catalog", "serve", "--port", str(port), "--thrift", str(thrift), "--master", "local[1]",
                       cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with serving(server, 2) as lines:
        assert lines[1].startswith("JDBC/ODBC"), "".join(lines)
        yield tmp, thrift
    assert not list(tmp.glob("derby.log")) and not list(tmp.glob("spark-warehouse")), "the server wrote into its cwd"


def test_thrift_flag():
    from streamsql.cli import build_parser

    assert build_parser().parse_args(["serve"]).thrift is None
    assert build_parser().parse_args(["serve", "--thrift"]).thrift == 10000  # HiveServer2's usual port
    assert build_parser().parse_args(["serve", "--thrift", "10123", "--port", "15003"]).thrift == 10123


@pytest.mark.spark  # starts a process
def test_a_port_in_use_is_refused_before_spark_starts(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = streamsql(tmp_path / "catalog", "serve", "--thrift", str(port), "--port", str(free_port()),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, err = server.communicate(timeout=60)
    assert server.returncode == 1
    assert f"Port {port} is already in use" in err


@pytest.mark.spark  # starts a process
def test_one_port_for_both_servers_is_refused_before_spark_starts(tmp_path):
    port = free_port()
    server = streamsql(tmp_path / "catalog", "serve", "--thrift", str(port), "--port", str(port),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = server.communicate(timeout=60)
    assert server.returncode == 1
    assert err.strip() == f"Error: The Connect port and the Thrift port must differ (both are {port})"


def test_the_reason_a_server_exited_is_its_last_error_s_message(tmp_path):
    from streamsql.runtime.serve import exit_reason

    log = write(tmp_path / "server.log", (
        "26/11/27 10:00:00 WARN NativeCodeLoader: Unable to load native-hadoop library\n"
        "26/11/27 10:00:01 ERROR HiveThriftServer2: Error starting HiveThriftServer2\n"
        "org.apache.thrift.transport.TTransportException: Could not create ServerSocket on address 0.0.0.0/0.0.0.0:10000.\n"
        "\tat org.apache.thrift.transport.TServerSocket.<init>(TServerSocket.java:109)\n"
        "\t... 5 more\n"))
    assert exit_reason(str(log)) == "Could not create ServerSocket on address 0.0.0.0/0.0.0.0:10000."
    write(log, "26/11/27 10:00:01 ERROR SparkContext: Error initializing SparkContext.\nsomething else\n")
    assert exit_reason(str(log)) == "Error initializing SparkContext."
    write(log, "only this\n")
    assert exit_reason(str(log)) == "only this"
    assert exit_reason(str(tmp_path / "missing.log")) == "" and exit_reason(None) == ""


@pytest.mark.spark
def test_a_server_that_fails_at_start_says_why(tmp_path):
    server = streamsql(tmp_path / "catalog", "serve", "--port", str(free_port()), "--master", "bogus://x",
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = server.communicate(timeout=120)
    assert server.returncode == 1
    assert err.startswith("Error: The Spark server exited at start (status 1): Master must"), err
    assert "Exception" not in err and "Traceback" not in err


def hive(port: int, database: str = "default"):
    from pyhive import hive as pyhive

    return pyhive.connect(host="127.0.0.1", port=port, username="streamsql", auth="NONE", database=database)


def query(port: int, sql: str, database: str = "default") -> list[tuple]:
    connection = hive(port, database)
    try:
        cursor = connection.cursor()
        cursor.execute(sql)
        return cursor.fetchall()
    finally:
        connection.close()


@pytest.mark.spark
def test_a_hive_client_lists_and_queries_catalog_tables(served):
    _, port = served
    assert ("shop",) in query(port, "SHOW DATABASES")
    assert sorted(query(port, "SHOW TABLES IN shop")) == [("shop", "big_orders", False), ("shop", "orders", False)]
    rows = query(port, "SELECT item, SUM(qty) AS n, SUM(qty * price) AS amount FROM shop.orders GROUP BY item ORDER BY item")
    assert [(item, n, str(amount)) for item, n, amount in rows] == [
        ("apple", 5, "2.50"), ("fig", 5, "6.00"), ("pear", 1, "0.75")]
    # The database in the connection URL, as a JDBC URL gives it (jdbc:hive2://host:port/shop).
    assert query(port, "SELECT COUNT(*) FROM orders WHERE qty > 1", database="shop") == [(3,)]


@pytest.mark.spark
def test_rows_an_insert_job_writes_are_queryable_at_once(served):
    tmp, port = served
    assert query(port, "SELECT COUNT(*) FROM shop.big_orders") == [(0,)]
    job = streamsql(tmp / "catalog", "run", "--conf", "spark.driver.memory=1g", "-e",
                    "INSERT INTO shop.big_orders SELECT id, UPPER(item), qty * price FROM shop.orders WHERE qty > 1",
                    cwd=tmp, stderr=subprocess.PIPE, text=True)
    try:
        assert job.wait(300) == 0, job.stderr.read()
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    # No REFRESH TABLE: the server lists the table's directory on every query.
    rows = query(port, "SELECT id, item, amount FROM shop.big_orders ORDER BY id")
    assert [(i, item, str(amount)) for i, item, amount in rows] == [(1, "APPLE", "1.50"), (3, "FIG", "6.00"),
                                                                     (4, "APPLE", "1.00")]


@pytest.mark.spark
def test_beeline_over_jdbc(served):
    _, port = served
    beeline = spark_home() / "bin" / "beeline"
    result = subprocess.run([str(beeline), "-u", f"jdbc:hive2://127.0.0.1:{port}/shop", "-n", "streamsql",
                             "--outputformat=csv2", "--silent=true", "-e", "SELECT id, item FROM orders WHERE item = 'apple' ORDER BY id"],
                            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, SPARK_HOME=str(spark_home())))
    assert result.returncode == 0, result.stderr[-3000:]
    # Without a terminal, beeline echoes its prompt in front of the first line.
    lines = [re.sub(r"^\d+: jdbc:hive2://\S+> ", "", line) for line in result.stdout.splitlines() if line]
    assert lines == ["id,item", "1,apple", "4,apple"]


@pytest.mark.spark
def test_tables_created_and_dropped_while_serving(served):
    tmp, port = served
    write(tmp / "prices" / "part-0.csv", 'apple|0.55\nfig|1.10\n"say ""hi"""|2.00\n')  # quoted as the source reads it
    create = (f"CREATE TABLE shop.prices (item STRING, price DECIMAL(10, 2)) WITH ('connector' = 'filesystem', "
              f"'path' = '{tmp / 'prices'}', 'format' = 'csv', 'csv.field-delimiter' = '|')")
    assert streamsql(tmp / "catalog", "run", "-e", create).wait(60) == 0
    assert wait_for(lambda: ("shop", "prices", False) in query(port, "SHOW TABLES IN shop"), 60)
    assert [(item, str(price)) for item, price in query(port, "SELECT * FROM shop.prices ORDER BY item")] == [
        ("apple", "0.55"), ("fig", "1.10"), ('say "hi"', "2.00")]
    assert streamsql(tmp / "catalog", "run", "-e", "DROP TABLE shop.prices").wait(60) == 0
    assert wait_for(lambda: ("shop", "prices", False) not in query(port, "SHOW TABLES IN shop"), 60)
