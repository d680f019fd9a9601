"""SESSION window aggregates over a stream, on Spark's session_window (spark.windows): the
physical choice without Spark, then bounded input streamed file by file against batch
mode (Flink's boundaries: a row exactly GAP after a session's last row joins it)."""

from __future__ import annotations

import csv
import io
import os
import time

import pytest

from streamsql.plan import operators as ops
from streamsql.spark.physical import needs_stateful_operator
from tests.conftest import write
from tests.operator_plans import build

SESSION = "TABLE(SESSION(TABLE bid {by}, DESCRIPTOR(ts), INTERVAL '5' SECOND))"


@pytest.mark.parametrize("sql, native", [
    (f"SELECT auction, window_start, window_end, COUNT(*) FROM {SESSION.format(by='PARTITION BY auction')}"
     " GROUP BY auction, window_start, window_end", True),
    (f"SELECT window_start, window_end, SUM(price) FROM {SESSION.format(by='')} GROUP BY window_start, window_end",
     True),
    # sessions per auction, counted across auctions: Spark's sessions are per group key
    (f"SELECT window_start, window_end, COUNT(*) FROM {SESSION.format(by='PARTITION BY auction')}"
     " GROUP BY window_start, window_end", False),
    # the session rows themselves (Flink streams SESSION only into an aggregate too)
    (f"SELECT * FROM {SESSION.format(by='PARTITION BY auction')}", False),
    (f"SELECT auction, window_start, COUNT(DISTINCT bidder) FROM {SESSION.format(by='PARTITION BY auction')}"
     " GROUP BY auction, window_start, window_end", False),
])
def test_which_session_windows_spark_streams(sql, native):
    missing = needs_stateful_operator(build(sql))
    assert (missing is None) == native
    if not native:
        assert isinstance(missing, (ops.WindowAssign, ops.Operator))


@pytest.mark.spark
def test_streamed_sessions_end_with_the_batch_result(run, tmp_path):
    folder = tmp_path / "parts"
    # k1: 0, 3, 8 (one session: 8 - 3 = 5 s is the gap exactly), 14 (new), 30;
    # k2: 1, 2 | 20, 21, 26; rows reach the stream in three files, times rising
    files = [["k1,1,2026-01-01 00:00:00", "k2,2,2026-01-01 00:00:01", "k2,3,2026-01-01 00:00:02",
              "k1,4,2026-01-01 00:00:03"],
             ["k1,5,2026-01-01 00:00:08", "k1,6,2026-01-01 00:00:14", "k2,7,2026-01-01 00:00:20"],
             ["k2,8,2026-01-01 00:00:21", "k2,9,2026-01-01 00:00:26", "k1,10,2026-01-01 00:00:30"]]
    for i, rows in enumerate(files):
        os.utime(write(folder / f"part-{i}.csv", "\n".join(rows) + "\n"), (time.time() - 100 + i,) * 2)
    run.output(f"CREATE TEMPORARY TABLE t (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1'"
               f" SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")
    query = ("SELECT k, window_start, window_end, window_time, COUNT(*) AS n, SUM(v) AS s FROM TABLE(SESSION("
             "TABLE t PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY k, window_start, window_end,"
             " window_time")
    streamed = run.output("SET 'execution.bounded-input' = 'stream';" + query)
    batch = run.output("RESET 'execution.bounded-input'; SET 'execution.runtime-mode' = 'batch';" + query)
    run.output("RESET 'execution.runtime-mode';")
    rows = sorted(list(csv.reader(io.StringIO(streamed)))[1:])
    assert rows == sorted(list(csv.reader(io.StringIO(batch)))[1:])
    assert rows == [
        ["k1", "2026-01-01 00:00:00.000", "2026-01-01 00:00:13.000", "2026-01-01 00:00:12.999", "3", "10"],
        ["k1", "2026-01-01 00:00:14.000", "2026-01-01 00:00:19.000", "2026-01-01 00:00:18.999", "1", "6"],
        ["k1", "2026-01-01 00:00:30.000", "2026-01-01 00:00:35.000", "2026-01-01 00:00:34.999", "1", "10"],
        ["k2", "2026-01-01 00:00:01.000", "2026-01-01 00:00:07.000", "2026-01-01 00:00:06.999", "2", "5"],
        ["k2", "2026-01-01 00:00:20.000", "2026-01-01 00:00:31.000", "2026-01-01 00:00:30.999", "3", "24"],
    ]
