"""MATCH_RECOGNIZE end to end on Spark: CSV files, the matcher on the executors
(applyInPandas per partition key), and the rest of the query over its output."""

from __future__ import annotations

from tests.conftest import write

TICKS = """\
ACME,12,1,2026-01-01 10:00:00
ACME,17,1,2026-01-01 10:00:01
BETA,5,2,2026-01-01 10:00:00
ACME,13,1,2026-01-01 10:00:02
BETA,4,,2026-01-01 10:00:01
ACME,11,3,2026-01-01 10:00:03
BETA,6,2,2026-01-01 10:00:02
ACME,15,1,2026-01-01 10:00:04
BETA,7,1,2026-01-01 10:00:03
BETA,8,1,2026-01-01 10:00:04
BETA,2,1,2026-01-01 10:00:05
BETA,9,1,2026-01-01 09:59:58
"""


def _ddl(tmp_path) -> str:
    # Rows out of time order in the file: the matcher sorts each partition by event time. The
    # last row is late (the watermark is at 10:00:05 - 5 s when it is read): Flink drops it.
    path = write(tmp_path / "ticks.csv", TICKS)
    return f"""
CREATE TABLE ticks (symbol STRING, price INT, qty INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
"""


def test_v_shape_and_rising_run_per_partition(run, tmp_path):
    v_shape = run.rows(_ddl(tmp_path) + """
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, SUM(B.qty) AS qty, COUNT(B.*) AS downs,
    MATCH_ROWTIME() AS matched_at
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)
) AS v;
""")
    # ACME 12 17 13 11 15: top 17, B = 13, 11 (qty 1 + 3), C = 15 at 10:00:04.
    # BETA 5 4 6 7 8 2: top 5, B = 4 (qty NULL), C = 6 at 10:00:02 (with the late 9 kept, the
    # match would start at 9: top 9, B = 5, 4).
    assert sorted(v_shape) == [["ACME", "17", "11", "4", "2", "2026-01-01 10:00:04.000"],
                               ["BETA", "5", "4", "", "1", "2026-01-01 10:00:02.000"]]


def test_rising_run_over_a_subquery_into_insert_and_an_outer_query(run, tmp_path):
    out = tmp_path / "out"
    rows = run.rows(_ddl(tmp_path) + f"""
CREATE TABLE runs (symbol STRING, low INT, high INT, ups BIGINT) WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'csv');
INSERT INTO runs
SELECT symbol, low, high, ups FROM (SELECT symbol, price, ts FROM ticks WHERE price > 0) MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES S.price AS low, LAST(U.price) AS high, COUNT(U.price) AS ups
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN (S U{{2,}} E)
  DEFINE U AS U.price > PREV(U.price), E AS E.price <= PREV(E.price)
) AS r;
SELECT symbol, high - low AS rise, ups FROM runs WHERE ups >= 2;
""")
    # BETA 5 4 6 7 8 2: from 4: U = 6 7 8, E = 2 (rise 4, 3 ups); from 6: U = 7 8, E = 2 (rise 2, 2 ups).
    # ACME never rises twice in a row.
    assert sorted(rows) == [["BETA", "2", "2"], ["BETA", "4", "3"]]


def test_without_partition_by_every_row_is_one_partition(run, tmp_path):
    rows = run.rows(_ddl(tmp_path) + """
SELECT * FROM ticks MATCH_RECOGNIZE (
  ORDER BY ts, price
  MEASURES FIRST(A.symbol) AS first_symbol, COUNT(*) AS n, MAX(B.price) AS high
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B{3} C)
  DEFINE A AS A.symbol = 'BETA', C AS C.symbol = 'BETA' AND C.price < 5
) AS m;
""")
    # Time order, equal times by price: 10:00:00 BETA 5, ACME 12 | :01 BETA 4, ACME 17 | :02 ACME 13,
    # BETA 6 | :03 BETA 7, ACME 11 | :04 BETA 8, ACME 15 | :05 BETA 2.
    # A = BETA 5, B = 12 4 17, C must be BETA below 5: ACME 13 is not. A = BETA 4 (:01), B = 17 13 6,
    # C = BETA 7: not below 5. A = BETA 6: B = 7 11 8, C = ACME 15: no. A = BETA 7: B = 11 8 15, C = BETA 2.
    assert rows == [["BETA", "5", "15"]]


def test_over_unbounded_input_matches_as_the_watermark_passes_and_drains(run, tmp_path):
    """A continuous INSERT over a watched directory: matches are written while the job runs
    (the watermark decides them), the rest when it drains; together, the batch result."""
    import os
    import time

    from tests.conftest import wait_for
    from tests.jobs import finish, lines, reap, start

    source, sink = tmp_path / "in", tmp_path / "out"
    ticks = TICKS.splitlines(keepends=True)[:-1]  # no late row: batch and stream agree on the rest
    halves = [ticks[:6], ticks[6:]]
    os.utime(write(source / "part-0.csv", "".join(halves[0])), (time.time() - 100,) * 2)
    query = """INSERT INTO out SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol ORDER BY ts
  MEASURES FIRST(A.price) AS top, LAST(B.price) AS bottom, C.price AS up
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C)
  DEFINE B AS B.price < PREV(B.price), C AS C.price > PREV(C.price)
) AS v"""
    ddl = f"""
CREATE TABLE ticks (symbol STRING, price INT, qty INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (symbol STRING, top INT, bottom INT, up INT)
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    job = start(tmp_path, write(tmp_path / "job.sql", ddl + query + ";"))
    try:
        # ACME 12 17 13 11 | 15 arrives with the second file: nothing can match before it
        assert wait_for(lambda: (tmp_path / "catalog" / "_checkpoints").exists() or job.poll() is not None, 120)
        os.utime(write(source / "part-1.csv", "".join(halves[1])), (time.time() - 50,) * 2)
        # ACME's match ends at 10:00:04, BETA's at 10:00:02: the watermark (10:00:04 - 1 s) passes BETA's
        assert wait_for(lambda: lines(sink) or job.poll() is not None, 180), "no output before the input ended"
        assert finish(job) == 0, job.stderr.read()  # drain: the watermark goes to +infinity, the rest fires
    finally:
        reap(job)
    streamed = lines(sink)
    batch_sink = tmp_path / "batch"
    write(batch_sink / "part-0.csv", "")
    os.remove(batch_sink / "part-0.csv")
    run.rows(ddl.replace(str(sink), str(batch_sink)).replace("CREATE TABLE", "CREATE TEMPORARY TABLE")
             + "SET 'execution.runtime-mode' = 'batch';" + query + ";")
    assert streamed == lines(batch_sink) == ["ACME,17,11,15", "BETA,5,4,6"]
