"""`streamsql serve --read-only` (runtime.read_only): queries over the catalog's tables
answered, everything else refused with one line naming it, on each server: the SQL Gateway
(streamsql's planner), HiveServer2 (beeline, PyHive) and Spark Connect (PySpark's client),
the last two enforced in the server's JVM (runtime/read_only_java/*.java)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from streamsql import cli
from streamsql.runtime import read_only
from streamsql.runtime.read_only import ReadOnlyError, check_script, check_settings
from tests.conftest import streamsql, wait_for, write
from tests.ports import free_ports
from tests.processes import serving
from tests.spark_cluster import spark_home

PREFIX = "streamsql serves read-only: "


# -- the SQL Gateway's statements, without Spark ------------------------------------------------


def refusal(script: str) -> str:
    with pytest.raises(ReadOnlyError) as refused:
        check_script(script)
    return refused.value.render().splitlines()[0]


@pytest.mark.parametrize("script, message", [
    ("CREATE TABLE t (a INT) WITH ('connector' = 'datagen')", "CREATE TABLE is refused (line 1, column 1)"),
    ("CREATE TEMPORARY TABLE etc (line STRING) WITH ('connector' = 'filesystem', 'path' = '/etc', 'format' = 'csv')",
     "CREATE TEMPORARY TABLE is refused (line 1, column 1)"),
    ("CREATE TABLE IF NOT EXISTS t (a INT)", "CREATE TABLE is refused (line 1, column 1)"),
    ("CREATE FUNCTION f AS 'udfs.f' LANGUAGE PYTHON", "CREATE FUNCTION is refused (line 1, column 1)"),
    ("CREATE OR REPLACE TEMPORARY VIEW v AS SELECT 1", "CREATE OR REPLACE TEMPORARY VIEW is refused (line 1, column 1)"),
    ("INSERT INTO t SELECT 1", "INSERT INTO is refused (line 1, column 1)"),
    ("ADD JAR '/tmp/x.jar'", "ADD JAR is refused (line 1, column 1)"),
    ("DROP TABLE t", "DROP TABLE is refused (line 1, column 1)"),
    ("ALTER TABLE t SET ('k' = 'v')", "ALTER TABLE is refused (line 1, column 1)"),
    ("CREATE DATABASE d", "CREATE DATABASE is refused (line 1, column 1)"),
    ("STOP JOB 'abc' WITH DRAIN", "STOP JOB is refused (line 1, column 1)"),
    ("EXECUTE STATEMENT SET BEGIN INSERT INTO t SELECT 1; END", "EXECUTE STATEMENT SET is refused (line 1, column 1)"),
    ("EXPLAIN INSERT INTO t SELECT 1", "EXPLAIN INSERT INTO is refused (line 1, column 1)"),
    ("LOAD MODULE hive", "LOAD MODULE is refused (line 1, column 1)"),
    ("SET 'spark.sql.runSQLOnFiles' = 'true'", "SET 'spark.sql.runSQLOnFiles' is refused (line 1, column 1)"),
    ("SELECT 1;\n  -- then\n  create view v AS SELECT 1", "CREATE VIEW is refused (line 3, column 3)"),
])
def test_the_gateway_refuses_each_statement_that_is_not_a_read_by_name(script, message):
    assert refusal(script) == PREFIX + message


@pytest.mark.parametrize("script", [
    "SELECT * FROM orders", "WITH x AS (SELECT 1 AS a) SELECT a FROM x", "VALUES (1), (2)",
    "SELECT 1 UNION ALL SELECT 2", "SHOW TABLES", "SHOW JOBS", "SHOW CREATE TABLE orders", "DESCRIBE orders",
    "EXPLAIN SELECT * FROM orders", "EXPLAIN CHANGELOG_MODE SELECT 1", "USE shop",
    "SET 'execution.runtime-mode' = 'batch'", "SET", "RESET 'sql-client.execution.result-mode'", "RESET",
    "SELEC 1",  # not a statement at all: the planner's error says so, with a suggestion
])
def test_the_gateway_takes_queries_and_catalog_reads(script):
    check_script(script)


def test_spark_settings_in_a_session_s_properties_are_refused():
    check_settings({"execution.runtime-mode": "batch", "table.local-time-zone": "UTC"})
    with pytest.raises(ReadOnlyError, match="the session property 'spark.sql.catalog.x' is refused"):
        check_settings({"spark.sql.catalog.x": "org.example.Catalog"})


def test_the_flag_and_the_spark_settings_it_sets(monkeypatch, tmp_path):
    assert cli.build_parser().parse_args(["serve"]).read_only is False
    assert cli.build_parser().parse_args(["serve", "--read-only", "--thrift"]).read_only is True
    assert cli.build_parser().parse_args(["serve", "--gateway", "--read-only"]).read_only is True
    monkeypatch.setattr(read_only, "jar", lambda: tmp_path / "streamsql-read-only.jar")
    conf, env = read_only.server_conf({"spark.driver.extraClassPath": "/a.jar", "spark.sql.extensions": "x.Ext"},
                                      tmp_path)
    assert conf["spark.driver.extraClassPath"] == f"/a.jar{os.pathsep}{tmp_path / 'streamsql-read-only.jar'}"
    assert conf["spark.sql.extensions"] == f"x.Ext,{read_only.EXTENSION}"
    assert conf["spark.connect.grpc.interceptor.classes"] == read_only.INTERCEPTOR
    assert conf["spark.sql.runSQLOnFiles"] == conf["spark.sql.variable.substitute"] == "false"  # no ${env:...}
    key_file = tmp_path / "read-only.key"
    assert env == {read_only.KEY_FILE_ENV: str(key_file)} and key_file.stat().st_mode & 0o777 == 0o600
    assert key_file.read_text() == read_only.admin_key() and len(read_only.admin_key()) >= 32
    assert read_only.admin_key() not in " ".join(conf.values())  # a command line shows in ps
    monkeypatch.setattr(read_only, "jar", lambda: None)
    with pytest.raises(Exception, match="compiled by a JDK's javac"):
        read_only.server_conf({}, tmp_path)


# -- a read-only SQL Gateway ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(spark, tmp_path_factory):
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.gateway import Gateway
    from streamsql.runtime.gateway_results import GatewayWriter, ResultBuffer

    base = tmp_path_factory.mktemp("read_only_gateway")
    write(base / "orders" / "a.csv", "1,apple\n2,pear\n3,fig\n")
    ddl = (f"CREATE TABLE orders (id BIGINT, item STRING) WITH ('connector' = 'filesystem',"
           f" 'path' = '{base / 'orders'}', 'format' = 'csv')")
    Engine(Catalog(base / "catalog"), base_dir=base).run_script(ddl, GatewayWriter(ResultBuffer(), None, threading.Event()))
    served = Gateway(base / "catalog", spark=spark, base_dir=base, read_only=True, log=lambda message: None)
    server = served.listen("127.0.0.1", 0)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    served.base = base
    yield served
    served.close()


def call(gateway, method, path, body=None):
    request = urllib.request.Request(gateway.url + path, data=json.dumps(body).encode() if body is not None else None,
                                     method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def outcome(gateway, session, statement, seconds=120):
    """(rows, None) of a statement that ran, or ([], its error's first line)."""
    status, body = call(gateway, "POST", f"/v1/sessions/{session}/statements", {"statement": statement})
    assert status == 200, body
    uri, rows, deadline = f"/v1/sessions/{session}/operations/{body['operationHandle']}/result/0", [], time.time() + seconds
    while uri:
        status, page = call(gateway, "GET", uri)
        if status != 200:
            return rows, page["errors"][-1].splitlines()[0]
        if page["resultType"] == "NOT_READY":
            assert time.time() < deadline, "no result in time"
            time.sleep(0.2)
        else:
            rows += [r["fields"] for r in page["results"]["data"]]
        uri = page.get("nextResultUri")
    return rows, None


@pytest.mark.spark
def test_a_read_only_gateway_answers_queries_over_catalog_tables(gateway):
    status, body = call(gateway, "POST", "/v1/sessions", {"properties": {"execution.runtime-mode": "batch"}})
    session = body["sessionHandle"]
    assert outcome(gateway, session, "SELECT id, item FROM orders WHERE id > 1") == ([[2, "pear"], [3, "fig"]], None)
    assert outcome(gateway, session, "SHOW TABLES") == ([["orders"]], None)
    assert outcome(gateway, session, "SET 'sql-client.execution.result-mode' = 'tableau'")[1] is None


@pytest.mark.spark
def test_a_read_only_gateway_refuses_writes_jars_functions_and_paths(gateway):
    session = call(gateway, "POST", "/v1/sessions", {})[1]["sessionHandle"]
    refused = {
        "CREATE TABLE t (a INT) WITH ('connector' = 'datagen')": "CREATE TABLE is refused (line 1, column 1)",
        "INSERT INTO orders SELECT 9, 'plum'": "INSERT INTO is refused (line 1, column 1)",
        "ADD JAR '/tmp/x.jar'": "ADD JAR is refused (line 1, column 1)",
        "CREATE TEMPORARY FUNCTION f AS 'os.system' LANGUAGE PYTHON":
            "CREATE TEMPORARY FUNCTION is refused (line 1, column 1)",
        # Flink SQL reads a path through a table only
        ("CREATE TEMPORARY TABLE etc (line STRING) WITH ('connector' = 'filesystem', 'path' = '/etc',"
         " 'format' = 'raw')"): "CREATE TEMPORARY TABLE is refused (line 1, column 1)",
        "SET 'spark.sql.runSQLOnFiles' = 'true'": "SET 'spark.sql.runSQLOnFiles' is refused (line 1, column 1)",
    }
    for statement, message in refused.items():
        assert outcome(gateway, session, statement) == ([], PREFIX + message), statement
    _, error = outcome(gateway, session, "SELECT * FROM parquet.`/etc`")  # a name, not a path: no such table
    assert error is not None and "parquet" in error and PREFIX not in error
    status, body = call(gateway, "POST", f"/v1/sessions/{session}/configure-session",
                        {"statement": "CREATE VIEW v AS SELECT 1"})
    assert status == 500 and body["errors"][0].startswith(PREFIX + "CREATE VIEW is refused (line 1, column 1)")
    status, body = call(gateway, "POST", "/v1/sessions", {"properties": {"spark.sql.runSQLOnFiles": "true"}})
    assert status == 500 and "the session property 'spark.sql.runSQLOnFiles' is refused" in body["errors"][0]
    assert [p.name for p in (gateway.base / "catalog").rglob("*.sql")] == ["orders.sql"]  # nothing was stored


# -- HiveServer2 and Spark Connect, served read-only ------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A catalog with one table, served read-only with --thrift (Spark Connect beside it)."""
    tmp = tmp_path_factory.mktemp("read_only_serve")
    write(tmp / "orders" / "a.csv", "1,apple\n2,pear\n3,fig\n")
    ddl = (f"CREATE TABLE orders (id BIGINT, item STRING) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp / 'orders'}', 'format' = 'csv')")
    assert streamsql(tmp / "catalog", "run", "-e", ddl).wait(120) == 0
    port, thrift = free_ports(2)
    server = streamsql(tmp / "catalog", "serve", "--read-only", "--port", str(port), "--thrift", str(thrift),
                       "--master", "local[1]", cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with serving(server, 2) as lines:
        assert lines[0].rstrip().endswith("(read-only)") and "read-only" in lines[1], "".join(lines)
        yield tmp, port, thrift
    assert not list(tmp.glob("spark-warehouse")) and not (tmp / "w").exists(), "a refused statement wrote"


@pytest.mark.spark
def test_beeline_gets_catalog_rows_and_one_line_refusals(served):
    tmp, _, thrift = served
    statements = ["SELECT COUNT(*) AS n FROM orders", "CREATE TABLE x (a INT) USING parquet",
                  "SELECT * FROM parquet.`/etc`", "ADD JAR /tmp/x.jar", "INSERT INTO orders VALUES (4, 'plum')",
                  "SELECT reflect('java.lang.System', 'getenv', 'HOME')", "SELECT item FROM orders WHERE id = 2"]
    url = f"jdbc:hive2://127.0.0.1:{thrift}/default_database"
    result = subprocess.run([str(spark_home() / "bin" / "beeline"), "-u", url,
                             "-n", "bi", "--outputformat=csv2", "--silent=true", "--force=true",  # on after an error
                             "-f", str(write(tmp / "statements.sql", ";\n".join(statements) + ";\n"))],
                            capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                            env=dict(os.environ, SPARK_HOME=str(spark_home())))
    output = [re.sub(r"^\d+: jdbc:hive2://\S+> ", "", line) for line in (result.stdout + result.stderr).splitlines()]
    errors = [line for line in output if line.startswith("Error")]
    assert errors == [
        f"Error: {PREFIX}CREATE TABLE is refused (line 1, column 1) (state=42000,code=0)",
        f"Error: {PREFIX}reading the path `/etc` as parquet is refused (line 1, column 15) (state=42000,code=0)",
        f"Error: {PREFIX}ADD JAR is refused (line 1, column 1) (state=42000,code=0)",
        f"Error: {PREFIX}INSERT INTO is refused (line 1, column 1) (state=42000,code=0)",
        f"Error: {PREFIX}reflect() is refused (line 1, column 8) (state=42000,code=0)",
    ], result.stdout + result.stderr
    assert not any(line.lstrip().startswith("at ") for line in output), "a JVM stack trace reached the client"
    assert [line for line in output if line in ("3", "pear")] == ["3", "pear"]  # the two SELECTs' rows


@pytest.mark.spark
def test_a_hive_client_is_refused_ddl_and_path_reads(served):
    from pyhive import hive

    _, _, thrift = served
    connection = hive.connect(host="127.0.0.1", port=thrift, username="bi", auth="NONE", database="default_database")
    try:
        cursor = connection.cursor()
        cursor.execute("SELECT id, item FROM orders ORDER BY id")
        assert cursor.fetchall() == [(1, "apple"), (2, "pear"), (3, "fig")]
        cursor.execute("SELECT '${env:HOME}', '${system:user.home}'")  # no substitution: the server's environment
        assert cursor.fetchall() == [("${env:HOME}", "${system:user.home}")]
        for statement, message in [("DROP TABLE orders", "DROP TABLE is refused (line 1, column 1)"),
                                   ("SELECT * FROM csv.`/etc/passwd`", "reading the path `/etc/passwd` as csv is refused"),
                                   ("CREATE TEMPORARY FUNCTION f AS 'x.F'", "CREATE TEMPORARY FUNCTION is refused"),
                                   ("SET spark.sql.variable.substitute=true",
                                    "SET spark.sql.variable.substitute is refused")]:
            with pytest.raises(Exception) as refused:
                cursor.execute(statement)
            assert PREFIX + message in str(refused.value) and "\tat " not in str(refused.value), statement
    finally:
        connection.close()


CONNECT_CLIENT = """
import json, sys
from pyspark.sql import SparkSession
from pyspark.sql.functions import udf
spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
def attempt(action):
    try:
        return {"ok": action()}
    except Exception as error:
        return {"error": type(error).__name__, "message": str(error)}
outcomes = {
    "count": attempt(lambda: spark.table("default_database.orders").count()),
    "sql": attempt(lambda: [r.item for r in spark.sql("SELECT item FROM default_database.orders ORDER BY id").collect()]),
    "create": attempt(lambda: spark.sql("CREATE TABLE x (a INT) USING parquet").collect()),
    "path sql": attempt(lambda: spark.sql("SELECT * FROM text.`/etc/passwd`").collect()),
    "read path": attempt(lambda: spark.read.text("/etc/passwd").collect()),
    "python udf": attempt(lambda: spark.table("default_database.orders").select(udf(lambda x: x)("id")).collect()),
    "write": attempt(lambda: spark.table("default_database.orders").write.parquet(sys.argv[2])),
    "setting": attempt(lambda: spark.conf.set("spark.sql.runSQLOnFiles", "true")),
    "a guessed key": attempt(lambda: (spark.conf.set("spark.streamsql.readOnly.admin", "guess"),
                                      spark.sql("DROP TABLE default_database.orders").collect())),
}
spark.stop()
print(json.dumps(outcomes))
"""


@pytest.mark.spark
def test_a_spark_connect_client_reads_tables_and_is_refused_paths_ddl_and_code(served):
    tmp, port, _ = served
    done = subprocess.run([sys.executable, "-c", CONNECT_CLIENT, f"sc://localhost:{port}", str(tmp / "w")],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcomes.pop("count") == {"ok": 3} and outcomes.pop("sql") == {"ok": ["apple", "pear", "fig"]}
    assert outcomes == {name: {"error": "AnalysisException", "message": PREFIX + message} for name, message in {
        "create": "CREATE TABLE is refused (line 1, column 1)",
        "path sql": "reading the path `/etc/passwd` as text is refused (line 1, column 15)",
        "read path": "spark.read of a path or a data source (read catalog tables: spark.table) is refused",
        "python udf": "a Python function is refused",
        "write": "a DataFrame write is refused",
        "setting": "setting spark.sql.runSQLOnFiles is refused",
        "a guessed key": "DROP TABLE is refused (line 1, column 1)",
    }.items()}, outcomes


@pytest.mark.spark
def test_tables_created_while_serving_read_only_are_served(served):
    tmp, _, thrift = served
    write(tmp / "prices" / "a.csv", "apple,0.55\n")
    create = (f"CREATE TABLE prices (item STRING, price DECIMAL(10, 2)) WITH ('connector' = 'filesystem',"
              f" 'path' = '{tmp / 'prices'}', 'format' = 'csv')")
    assert streamsql(tmp / "catalog", "run", "-e", create).wait(120) == 0

    def served_prices():
        from pyhive import hive

        connection = hive.connect(host="127.0.0.1", port=thrift, username="bi", auth="NONE")
        try:
            cursor = connection.cursor()
            cursor.execute("SHOW TABLES IN default_database")
            return ("default_database", "prices", False) in cursor.fetchall()
        finally:
            connection.close()

    assert wait_for(served_prices, 60)  # serve's own session registers it, read-only or not
