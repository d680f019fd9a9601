"""`streamsql serve --gateway` with Apache Flink's own clients (tests/flink_clients.py: their
jars from Maven): the SQL client in gateway mode runs a script of DDL, SET, SHOW, a bounded
SELECT, a streaming GROUP BY (its changelog, row kinds and all) and a bad query; the Flink
JDBC driver runs DDL, typed queries and metadata calls. Neither sends a token: the gateway
is on loopback without one, as `serve --gateway` is by default. Each leaves no session."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from streamsql.runtime.gateway import Gateway
from tests.conftest import write
from tests.flink_clients import run_jdbc, run_sql_client, tableau_rows


@pytest.fixture(scope="module")
def gateway(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("flink-clients")
    folder = base / "parts"
    for i, text in enumerate(["a,1\nb,5\n", "a,7\nc,2\n", "a,3\nb,1\n"]):  # read in this order, a file a batch
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    write(base / "bids.csv", "".join(f"{i},{i * 1.5},bidder{i % 3},2024-01-01 10:00:0{i},{i}.25\n" for i in range(5)))
    served = Gateway(base / "catalog", spark=spark, base_dir=base)
    served.port = served.listen("127.0.0.1", 0).server_address[1]
    served.folder = folder
    yield served
    served.close()


def changelog_table(rows):
    """The table a changelog ends in: each row's count, +I/+U adding, -U/-D taking away."""
    table = Counter()
    for kind, fields in rows:
        table[tuple(fields)] += 1 if kind in ("+I", "+U") else -1
    return sorted(row for row, count in table.items() if count)


@pytest.mark.spark
def test_flinks_sql_client(gateway, tmp_path):
    script = f"""SET 'sql-client.execution.result-mode' = 'tableau';
CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{gateway.folder}',
  'format' = 'csv', 'source.max-files-per-batch' = '1');
SHOW TABLES;
SELECT k, v FROM t WHERE v > 4;
SET 'execution.bounded-input' = 'stream';
SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY k;
RESET 'execution.bounded-input';
SELECT nope FROM t;
"""
    done = run_sql_client(f"127.0.0.1:{gateway.port}", script, tmp_path)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr[-3000:]
    assert out.count("[INFO] Execute statement succeeded.") == 4, out  # SET, CREATE, SET, RESET
    assert "| table name |" in out and "|          t |" in out
    rows = tableau_rows(out)
    assert sorted(rows[:2]) == [("+I", ["a", "7"]), ("+I", ["b", "5"])], out
    assert "Received a total of 2 rows" in out
    changelog = rows[2:]  # a file a micro-batch: 2 + 3 + 4 changes
    assert "Received a total of 9 rows" in out, out
    assert ("-U", ["a", "1", "1"]) in changelog and ("+U", ["a", "2", "8"]) in changelog
    assert ("-U", ["a", "2", "8"]) in changelog and ("+U", ["a", "3", "11"]) in changelog
    assert Counter(kind for kind, _ in changelog) == {"+I": 3, "-U": 3, "+U": 3}
    assert changelog_table(changelog) == [("a", "3", "11"), ("b", "2", "6"), ("c", "1", "2")]
    assert "[ERROR] Could not execute SQL statement." in out
    assert "Column 'nope' could not be resolved (line 1, column 8)" in out and "Traceback" not in out
    assert "Shutting down the session..." in out
    assert gateway.sessions == {}  # the client closed its session


@pytest.mark.spark
def test_flinks_jdbc_driver(gateway, tmp_path):
    url = f"jdbc:flink://127.0.0.1:{gateway.port}/default_catalog/default_database?table.local-time-zone=UTC"
    done = run_jdbc(url, [
        f"CREATE TEMPORARY TABLE bids (auction BIGINT, price DOUBLE, bidder STRING, ts TIMESTAMP(3),"
        f" amount DECIMAL(10, 2)) WITH ('connector' = 'filesystem', 'path' = '{gateway.base_dir / 'bids.csv'}',"
        " 'format' = 'csv')",
        "SELECT auction, price, bidder, ts, amount FROM bids WHERE auction < 3",
        "SELECT bidder, COUNT(*) AS n FROM bids GROUP BY bidder",
        "SHOW TABLES",
        "SET",
        "SELECT nope FROM bids",
    ], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = [line.split("\t") for line in done.stdout.splitlines()]
    assert ["product", "Flink JDBC Driver", "2.3.0"] in lines
    assert ["catalog", "default_catalog"] in lines and ["schema", "default_catalog", "default_database"] in lines
    blocks, block = [], None
    for line in lines:
        if line[0] in ("columns", "done", "error"):
            block = [line]
            blocks.append(block)
        elif line[0] == "row" and block is not None:
            block.append(line[1:])
    ddl, select, group_by, show, settings, bad = blocks
    assert ddl == [["done", "0"]]
    assert select[0] == ["columns", "auction:BIGINT", "price:DOUBLE", "bidder:STRING", "ts:TIMESTAMP(3)",
                         "amount:DECIMAL(10, 2)"]
    assert sorted(select[1:]) == [[str(i), str(i * 1.5), f"bidder{i}", f"2024-01-01 10:00:0{i}.0", f"{i}.25"]
                                  for i in range(3)]
    assert group_by[0] == ["columns", "bidder:STRING", "n:BIGINT"]
    assert sorted(group_by[1:]) == [["bidder0", "2"], ["bidder1", "2"], ["bidder2", "1"]]
    assert show == [["columns", "table name:STRING"], ["bids"]]
    assert ["table.local-time-zone", "UTC"] in settings[1:]
    assert bad[0][0] == "error" and "Column 'nope' could not be resolved (line 1, column 8)" in "\t".join(bad[0])
    assert gateway.sessions == {}  # the connection's close closed its session


def test_an_empty_page_waits_for_rows_or_the_end():
    """Flink's clients fetch again at once after an empty page: the gateway answers one only
    after a while without rows (a long poll), and at once when rows or the end come."""
    import threading

    from streamsql.runtime.gateway_results import GatewayWriter, ResultBuffer

    buffer = ResultBuffer()
    started = time.monotonic()
    assert buffer.fetch(0, 10, wait=0.3) == ("NOT_READY", []) and time.monotonic() - started >= 0.3
    writer = GatewayWriter(buffer, None, threading.Event())
    writer.begin(["op", "k"])
    threading.Timer(0.2, lambda: writer.rows([("+I", "a")])).start()
    started = time.monotonic()
    assert buffer.fetch(0, 10, wait=5) == ("PAYLOAD", [("INSERT", ["a"])])
    assert 0.1 < time.monotonic() - started < 4
    threading.Timer(0.2, buffer.finish).start()
    started = time.monotonic()
    assert buffer.fetch(1, 10, wait=5) == ("EOS", []) and time.monotonic() - started < 4
