"""Processing-time lookup joins over a stream (Nexmark q13's shape): the bounded table is read
as a static one, so Spark's stream-static join keeps no state, as Flink's LookupJoin keeps
none; a stream-stream join would keep every row of the stream."""

from __future__ import annotations

import time

import pytest

from tests.conftest import in_background, wait_for, write


@pytest.mark.parametrize("side", ["", "LEFT"])
def test_a_lookup_join_over_a_stream_keeps_no_state(run, tmp_path, side):
    source, dims, sink = tmp_path / "in", tmp_path / "dims", tmp_path / "out"
    write(dims / "part-0.csv", "0,zero\n1,one\n2,two\n")
    write(source / "1.csv", "10,100\n11,101\n13,103\n")
    script = (
        "SET 'execution.runtime-mode' = 'streaming';"
        f"CREATE TEMPORARY TABLE bids (auction BIGINT, price BIGINT) WITH ('connector' = 'filesystem', 'path' ="
        f" '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');"
        f"CREATE TEMPORARY TABLE side (k BIGINT, v STRING) WITH ('connector' = 'filesystem', 'path' = '{dims}',"
        " 'format' = 'csv');"
        f"CREATE TEMPORARY TABLE dst (auction BIGINT, price BIGINT, v STRING) WITH ('connector' = 'filesystem',"
        f" 'path' = '{sink}', 'format' = 'csv');"
        "INSERT INTO dst SELECT b.auction, b.price, s.v FROM (SELECT *, PROCTIME() AS p FROM bids) b"
        f" {side} JOIN side FOR SYSTEM_TIME AS OF b.p AS s ON MOD(b.auction, 5) = s.k"
    )
    job, errors = in_background(run, script)

    def written() -> list[str]:
        return sorted(line for f in sink.glob("part-*.csv") for line in f.read_text().splitlines())

    first = ["10,100,zero", "11,101,one"] + (["13,103,"] if side else [])
    assert wait_for(lambda: written() == first or errors), (written(), errors)
    time.sleep(1)
    write(source / "2.csv", "12,102\n15,105\n")  # while it runs: joined as they come
    second = sorted(first + ["12,102,two", "15,105,zero"])
    assert wait_for(lambda: written() == second or errors), (written(), errors)
    queries = run.engine.spark.streams.active
    progress = [p for q in queries for p in q.recentProgress if p["numInputRows"]]
    for query in queries:
        query.stop()
    job.join(30)
    assert not errors
    assert progress and all(p["stateOperators"] == [] for p in progress), progress[-1]["stateOperators"]

