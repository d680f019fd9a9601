"""DISTINCT aggregates in an OVER window (spark.dialect._distinct_over), which Spark refuses
("Distinct window functions are not supported"): computed over the frame's set of values,
in every frame; over an unbounded source on the OVER operator (each frame's distinct values
folded, spark.stateful.over_cut). The expected rows are Flink 2.3's streaming output for the
same queries and data (Flink's batch planner refuses a DISTINCT OVER aggregate)."""

from __future__ import annotations

import pytest

from tests.conftest import write

ROWS = ("1,a,10,2024-01-01 00:00:01\n1,a,10,2024-01-01 00:00:02\n1,b,20,2024-01-01 00:00:03\n"
        "2,a,5,2024-01-01 00:00:03\n1,a,10,2024-01-01 00:00:20\n1,c,,2024-01-01 00:00:21\n2,b,7,2024-01-01 00:00:22\n")
TS = [("1", "01"), ("1", "02"), ("1", "03"), ("2", "03"), ("1", "20"), ("1", "21"), ("2", "22")]
RANGE = "PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW"
FLINK = {  # OVER frame and calls: Flink's values per row of TS
    (RANGE, "COUNT(DISTINCT c)"): ["1", "1", "2", "1", "1", "2", "1"],
    (RANGE, "MAX(DISTINCT c)"): ["a", "a", "b", "a", "a", "c", "b"],
    ("PARTITION BY k ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", "COUNT(DISTINCT c)"):
        ["1", "1", "2", "1", "2", "2", "2"],
    # (Flink 2.3 fails at run time on SUM/AVG DISTINCT over these rows and on the UNBOUNDED
    # frames below; these are each frame's distinct values counted, summed and averaged as
    # integers, NULL skipped)
    (RANGE, "SUM(DISTINCT v)"): ["10", "10", "30", "5", "10", "10", "7"],
    (RANGE, "AVG(DISTINCT v)"): ["10", "10", "15", "5", "10", "10", "7"],
    ("PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "COUNT(DISTINCT c)"):
        ["1", "1", "2", "1", "2", "3", "2"],
    ("PARTITION BY k ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "SUM(DISTINCT v)"):
        ["10", "10", "30", "5", "30", "30", "12"],
}


def _table(tmp_path, extra: str = "") -> str:
    write(tmp_path / "ov" / "p.csv", ROWS)
    return (f"CREATE TEMPORARY TABLE o (k INT, c STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
            f" '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'ov'}', 'format' = 'csv'{extra});")


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_distinct_over_calls_in_every_frame(run, tmp_path, mode):
    ddl = _table(tmp_path)
    settings = "SET 'execution.runtime-mode' = 'batch';" if mode == "batch" else \
        "SET 'execution.bounded-input' = 'stream';"
    for (frame, call), values in FLINK.items():
        rows = run.rows(f"{settings}{ddl} SELECT k, SECOND(ts), {call} OVER ({frame}) FROM o;")
        got = sorted((k, f"{int(s):02d}", v) for k, s, v in rows)
        assert got == sorted((k, s, v) for (k, s), v in zip(TS, values)), (frame, call)
        run.output("RESET 'execution.runtime-mode'; RESET 'execution.bounded-input';")


@pytest.mark.spark
def test_an_unbounded_source_streams_them_survives_kill_9_and_drains(run, tmp_path):
    """Over a watched directory (before: refused at plan time) the OVER operator folds each
    frame's distinct values: rows are written while the job runs, a kill -9 and a restart
    resume from the checkpoint, a drain writes the rest; together, the batch result."""
    import os
    import time

    from tests.jobs import killed_then_drained

    source, sink = tmp_path / "in", tmp_path / "out"

    def part(n: int) -> None:
        rows = "".join(f"{i},{'abc'[i * 7 % 3]},{i * 5 % 4},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                       for i in range(n * 30, n * 30 + 30))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (id BIGINT, k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (id BIGINT, k STRING, d BIGINT, s INT, l STRING)
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT id, k, COUNT(DISTINCT v) OVER w, SUM(DISTINCT v) OVER w, LISTAGG(DISTINCT"
             " CAST(v AS STRING)) OVER w FROM src WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL"
             " '10' SECOND PRECEDING AND CURRENT ROW)")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=30, resumed=30, more=60)
    assert len(streamed) == 90 and streamed == batch
