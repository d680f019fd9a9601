"""A 'hive' catalog over a real Hive metastore (embedded Derby) that Spark with Hive support
wrote: streamsql reads its Parquet, partitioned Parquet, Hive Parquet and Hive text tables,
and writes an unpartitioned table that Spark then reads back. Spark, streamsql and Spark
again are each a process of their own (an embedded Derby metastore is one process's at a
time)."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import streamsql

pytestmark = pytest.mark.spark

# Spark with Hive support, on the metastore of SPARK_CONF_DIR's hive-site.xml: runs argv[2]'s
# statements (JSON) and prints each SELECT's rows as JSON lines.
SPARK_SCRIPT = """
import json, os, sys
os.environ["SPARK_CONF_DIR"] = sys.argv[1]
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.sql.session.timeZone", "UTC").enableHiveSupport().getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
for statement in json.loads(sys.argv[2]):
    rows = spark.sql(statement).collect()
    if statement.startswith("SELECT"):
        print(json.dumps([[str(v) for v in row] for row in rows]))
spark.stop()
"""


def _spark(conf: Path, *statements: str) -> list:
    done = subprocess.run([sys.executable, "-c", SPARK_SCRIPT, str(conf), json.dumps(statements)],
                          capture_output=True, text=True, timeout=600, cwd=conf.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]


def _streamsql(catalog: Path, script: str) -> subprocess.CompletedProcess:
    work = catalog.parent / "work"  # its working directory: no derby.log left there
    work.mkdir(exist_ok=True)
    process = streamsql(catalog, "run", "-e", script, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        cwd=work)
    out, err = process.communicate(timeout=600)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _csv_rows(directory: Path) -> list[list[str]]:
    rows = []
    for path in sorted(directory.rglob("part-*")):
        rows += list(csv.reader(path.read_text().splitlines()))
    return sorted(rows)


def test_spark_tables_are_read_and_written_through_a_hive_catalog(tmp_path):
    conf, warehouse = tmp_path / "conf", tmp_path / "warehouse"
    conf.mkdir()
    (conf / "hive-site.xml").write_text(f"""<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name>
            <value>jdbc:derby:;databaseName={tmp_path / 'metastore'};create=true</value></property>
  <property><name>hive.metastore.warehouse.dir</name><value>{warehouse}</value></property>
</configuration>""")
    rng = random.Random(53)
    orders = [(i, Decimal(rng.randrange(100, 99999)) / 100, rng.choice(["eu", "us", "apac"])) for i in range(1, 41)]
    notes = [(i, rng.choice(["tea", "coffee", None]), rng.randrange(5)) for i in range(1, 13)]
    order_values = ", ".join(f"({i}, {a}, '{r}', TIMESTAMP '2024-03-0{1 + i % 9} 10:00:00')" for i, a, r in orders)
    note_values = ", ".join(f"({i}, {repr(n) if n else 'NULL'}, {q})" for i, n, q in notes)
    _spark(conf,
           "CREATE DATABASE sales",
           "CREATE TABLE sales.orders (id BIGINT, amount DECIMAL(10,2), region STRING, at TIMESTAMP) USING parquet",
           f"INSERT INTO sales.orders VALUES {order_values}",
           "CREATE TABLE sales.by_region (id BIGINT, amount DECIMAL(10,2), region STRING) USING parquet"
           " PARTITIONED BY (region)",
           "INSERT INTO sales.by_region SELECT id, amount, region FROM sales.orders",
           "CREATE TABLE sales.notes (id INT, name STRING, qty INT) ROW FORMAT DELIMITED FIELDS TERMINATED BY '|'"
           " STORED AS TEXTFILE",
           f"INSERT INTO sales.notes VALUES {note_values}",
           "CREATE TABLE sales.plain (id INT, name STRING) STORED AS TEXTFILE",  # Hive's ^A, stored as '1'
           "INSERT INTO sales.plain VALUES (1, 'one'), (21, NULL), (111, 'x1y')",
           "CREATE TABLE sales.legacy (id INT, name STRING) STORED AS PARQUET",
           "INSERT INTO sales.legacy VALUES (7, 'seven')",
           "CREATE VIEW sales.big AS SELECT * FROM sales.orders WHERE amount > 100")

    catalog, out = tmp_path / "catalog", tmp_path / "out"

    def sink(name: str, columns: str) -> str:
        return (f"CREATE TEMPORARY TABLE {name} ({columns}) WITH ('connector' = 'filesystem', 'path' = '{out / name}',"
                " 'format' = 'csv');")

    done = _streamsql(catalog, f"""
        SET 'execution.runtime-mode' = 'batch';
        CREATE CATALOG spark WITH ('type' = 'hive', 'hive-conf-dir' = '{conf}');
        {sink('totals', 'region STRING, n BIGINT, total DECIMAL(38, 2)')}
        {sink('partitioned', 'region STRING, n BIGINT, total DECIMAL(38, 2)')}
        {sink('noted', 'id INT, name STRING, qty INT')}
        {sink('legacy', 'id INT, name STRING')}
        {sink('plain', 'id INT, name STRING')}
        INSERT INTO totals SELECT region, COUNT(*), SUM(amount) FROM spark.sales.orders GROUP BY region;
        INSERT INTO partitioned SELECT region, COUNT(*), SUM(amount) FROM spark.sales.by_region GROUP BY region;
        INSERT INTO noted SELECT id, name, qty FROM spark.sales.notes;
        INSERT INTO plain SELECT * FROM spark.sales.plain;
        USE CATALOG spark;
        INSERT INTO default_catalog.default_database.legacy SELECT * FROM sales.legacy;
        INSERT INTO sales.orders SELECT id + 100, amount, region, at FROM sales.orders WHERE region = 'eu';
        SHOW TABLES IN sales;
        """)
    assert done.returncode == 0, done.stderr[-3000:]
    totals = {}
    for _, amount, region in orders:
        n, total = totals.get(region, (0, Decimal(0)))
        totals[region] = (n + 1, total + amount)
    expected = sorted([r, str(n), str(t)] for r, (n, t) in totals.items())
    assert _csv_rows(out / "totals") == expected
    assert _csv_rows(out / "partitioned") == expected
    assert _csv_rows(out / "noted") == sorted([str(i), n or "", str(q)] for i, n, q in notes)
    assert _csv_rows(out / "legacy") == [["7", "seven"]]
    assert _csv_rows(out / "plain") == [["1", "one"], ["111", "x1y"], ["21", ""]]
    shown = done.stdout.split()
    assert {"by_region", "legacy", "notes", "orders"} <= set(shown) and "big" not in shown  # a view is no Flink table

    refused = _streamsql(catalog, "INSERT INTO spark.sales.by_region VALUES (1, 1.00, 'eu');")
    assert refused.returncode != 0
    assert "Table 'spark.sales.by_region' is a partitioned parquet table" in refused.stderr
    assert "Traceback" not in refused.stderr
    view = _streamsql(catalog, "SELECT * FROM spark.sales.big;")
    assert "Table 'spark.sales.big' is a Spark view" in view.stderr and "Traceback" not in view.stderr

    # Spark reads what streamsql wrote into its table
    eu = [(i, a) for i, a, r in orders if r == "eu"]
    [[count, total]] = _spark(conf, "SELECT COUNT(*), SUM(amount) FROM sales.orders WHERE id > 100")[0:1][0]
    assert (int(count), Decimal(total)) == (len(eu), sum(a for _, a in eu))
    assert list((tmp_path / "work").iterdir()) == []
