"""OVER aggregation over a stream (spark.stateful.over): the cut without Spark, then bounded
input streamed micro-batch by micro-batch against batch mode, and a continuous job over a
watched directory that emits rows as the watermark passes them and the rest on drain."""

from __future__ import annotations

import os
import random
import time

import pytest

from streamsql.spark.stateful.stages import OverStage
from tests.conftest import write
from tests.operator_plans import stages
from tests.streamed import streamed_and_batch


# -- the cut, without Spark ----------------------------------------------------------------------


def test_over_is_cut_into_its_input_the_operator_and_the_projections():
    stage = stages("SELECT auction, ts, COUNT(*) OVER w AS c, MAX(price) OVER w - price AS d FROM bid WHERE price > 1"
                   " WINDOW w AS (PARTITION BY auction % 3 ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING"
                   " AND CURRENT ROW);")
    assert isinstance(stage, OverStage) and stage.rowtime
    assert (stage.unit, stage.preceding) == ("RANGE", 10_000)
    assert [c[0] for c in stage.calls] == ["COUNT", "MAX"] and stage.calls[0][1] is None
    from streamsql.spark.dialect import to_spark_sql

    inner, outer = to_spark_sql(stage.input_query), to_spark_sql(stage.output_query)
    assert "OVER" not in inner.upper() and "WHERE `bid`.`price` > 1" in inner
    assert inner.count("`bid`.`ts`") == 1  # one event-time column
    assert "`__overed`.`__w1` - " in outer and outer.startswith("SELECT `__overed`.`__rowkind`")


@pytest.mark.parametrize("frame, unit, preceding", [
    ("", "RANGE", None),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ROWS", None),
    ("ROWS BETWEEN 5 PRECEDING AND CURRENT ROW", "ROWS", 5),
    ("RANGE BETWEEN INTERVAL '2' MINUTE PRECEDING AND CURRENT ROW", "RANGE", 120_000),
])
def test_frames(frame, unit, preceding):
    stage = stages(f"SELECT auction, SUM(price) OVER (PARTITION BY auction ORDER BY ts {frame}) FROM bid;")
    assert (stage.unit, stage.preceding) == (unit, preceding)


def test_stddev_and_variance_are_computed_by_the_operator():
    stage = stages("SELECT auction, STDDEV_POP(price) OVER w, STDDEV(price) OVER w, VAR_POP(price) OVER w,"
                   " VARIANCE(price) OVER w, VAR_SAMP(price) OVER w FROM bid"
                   " WINDOW w AS (PARTITION BY auction ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW);")
    assert isinstance(stage, OverStage)
    assert [c[0] for c in stage.calls] == ["STDDEV_POP", "STDDEV_SAMP", "VAR_POP", "VAR_SAMP", "VAR_SAMP"]


def test_distinct_aggregates_over_fold_each_frame_s_distinct_values():
    """Every DISTINCT aggregate in an OVER is the operator's: folded over each frame's distinct
    values (python_aggregates.DistinctAggregate), in the call's Flink type."""
    from streamsql.spark.stateful.python_aggregates import BuiltinOver, DistinctAggregate, folder

    stage = stages("SELECT auction, COUNT(DISTINCT price) OVER w, SUM(DISTINCT price) OVER w, AVG(DISTINCT bidder)"
                   " OVER w, VAR_SAMP(DISTINCT price) OVER w, LISTAGG(DISTINCT channel) OVER w, ARRAY_AGG(DISTINCT"
                   " price) OVER w FROM bid WINDOW w AS (PARTITION BY auction ORDER BY ts ROWS BETWEEN 3 PRECEDING"
                   " AND CURRENT ROW);")
    assert isinstance(stage, OverStage) and [c[0] for c in stage.calls] == ["PYTHON"] * 6
    assert all(c[3]["distinct"] for c in stage.calls)
    assert [c[3]["python"].name for c in stage.calls] == ["COUNT", "SUM", "AVG", "VAR_SAMP", "LISTAGG", "ARRAY_AGG"]
    # the fold itself: each value once (NULLs left out); a SUM wraps at the result's width
    total = folder(stage.calls[1][3]["python"], 1, True)
    assert isinstance(total, DistinctAggregate) and (total.inner.function, total.inner.bits) == ("SUM", 64)
    accumulator = total.create_accumulator()
    for value in (2, 2, None, 5):
        total.accumulate(accumulator, value)
    assert total.get_value(accumulator) == 7
    assert BuiltinOver("SUM", "int", 32, 0).get_value([2_000_000_000, 1_000_000_000]) == 3_000_000_000 - 2 ** 32
    assert BuiltinOver("AVG", "int", 32, 0).get_value([-3, -4]) == -3  # Java truncates toward zero
    assert BuiltinOver("VAR_POP", "int", 32, 0).get_value([2, -2, 5]) == 7  # (4 + 25 - 25 DIV 3) DIV 3


def test_lag_first_and_last_value_are_computed_by_the_operator():
    """Flink's streaming OVER has LAG (its frame unbounded: LagAggFunction has no retraction),
    FIRST_VALUE and LAST_VALUE; LAG's default is an input column the operator casts."""
    stage = stages("SELECT auction, LAG(price) OVER w, LAG(price, 3, bidder * 2) OVER w, FIRST_VALUE(bidder) OVER w,"
                   " LAST_VALUE(price) OVER w FROM bid WINDOW w AS (PARTITION BY auction ORDER BY ts);")
    assert isinstance(stage, OverStage) and (stage.unit, stage.preceding) == ("RANGE", None)
    assert [c[0] for c in stage.calls] == ["LAG", "LAG", "FIRST_VALUE", "LAST_VALUE"]
    assert [c[3] for c in stage.calls][:2] == [{"offset": 1, "default": None}, {"offset": 3, "default": "__d1"}]
    from streamsql.spark.dialect import to_spark_sql

    assert "`bid`.`bidder` * 2 AS `__d1`" in to_spark_sql(stage.input_query)
    # one column per distinct argument: string literals differing in case are different values
    stage = stages("SELECT LAST_VALUE(CONCAT(CAST(price AS STRING), 'A')) OVER w, LAST_VALUE(CONCAT(CAST(price AS"
                   " STRING), 'a')) OVER w, LAST_VALUE(concat(cast(`price` as string), 'a')) OVER w FROM bid"
                   " WINDOW w AS (ORDER BY ts);")
    assert [c[1] for c in stage.calls] == ["__v0", "__v1", "__v1"]
    stage = stages("SELECT FIRST_VALUE(price) OVER (PARTITION BY auction ORDER BY ts ROWS BETWEEN 3 PRECEDING AND"
                   " CURRENT ROW) FROM bid;")
    assert (stage.calls[0][0], stage.preceding) == ("FIRST_VALUE", 3)
    # LAG's default is a column of its own, though another projection reads the same value
    stage = stages("SELECT price, LAG(price * 2, 1, price) OVER (PARTITION BY auction ORDER BY ts) AS prev FROM bid;")
    assert stage.calls[0][3] == {"offset": 1, "default": "__d0"}
    assert "`bid`.`price` AS `__d0`" in to_spark_sql(stage.input_query)
    stage = stages("SELECT LISTAGG(CAST(price AS STRING), ';') OVER w, ARRAY_AGG(price) OVER w FROM bid"
                   " WINDOW w AS (ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW);")
    assert [(c[0], c[3]["python"].name, c[3]["python"].instance.separator if i == 0 else None)
            for i, c in enumerate(stage.calls)] == [("PYTHON", "LISTAGG", ";"), ("PYTHON", "ARRAY_AGG", None)]
    # FIRST_VALUE / LAST_VALUE (DISTINCT): a value where it first appears in the frame
    (first, last) = stages("SELECT FIRST_VALUE(DISTINCT price) OVER w, LAST_VALUE(DISTINCT price) OVER w FROM bid"
                           " WINDOW w AS (PARTITION BY auction ORDER BY ts);").calls
    assert [(c[0], c[3]["python"].name, c[3]["distinct"], c[3]["python"].instance.last) for c in (first, last)] == [
        ("PYTHON", "FIRST_VALUE", True, False), ("PYTHON", "LAST_VALUE", True, True)]
    # COLLECT: ARRAY_AGG IGNORE NULLS, an empty array for a frame without values
    (call,) = stages("SELECT COLLECT(price) OVER (ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) FROM bid;").calls
    collect = call[3]["python"].instance
    accumulator = collect.create_accumulator()
    assert collect.get_value(accumulator) == [] and stage.calls[1][3]["python"].instance.get_value([]) is None
    for value in (None, 3, None, 4):
        collect.accumulate(accumulator, value)
    assert collect.get_value(accumulator) == [3, 4]
    # Flink's streaming mode refuses LEAD ('LEAD Function is not supported in stream mode')
    for sql in ("SELECT LAG(price) OVER (ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) FROM bid;",
                "SELECT LISTAGG(DISTINCT CAST(price AS STRING), channel) OVER (ORDER BY ts) FROM bid;",
                "SELECT SUM(price) OVER (ORDER BY ts, price ROWS BETWEEN CURRENT ROW AND CURRENT ROW) FROM bid;",
                "SELECT LAG(price, auction) OVER (ORDER BY ts) FROM bid;",
                "SELECT LEAD(price) OVER (ORDER BY ts) FROM bid;"):
        assert stages(sql) is None, sql


def test_processing_time_over():
    stage = stages("SELECT user_id, COUNT(url) OVER (PARTITION BY user_id ORDER BY p) FROM clicks;")
    assert isinstance(stage, OverStage) and not stage.rowtime


@pytest.mark.parametrize("sql", [
    # ordered by something other than a time attribute (Flink's streaming mode refuses it too)
    "SELECT auction, SUM(price) OVER (PARTITION BY auction ORDER BY price) FROM bid;",
    # two different windows in one SELECT
    "SELECT SUM(price) OVER (PARTITION BY auction ORDER BY ts), SUM(price) OVER (PARTITION BY bidder ORDER BY ts)"
    " FROM bid;",
    # a frame that ends after the current row
    "SELECT SUM(price) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM bid;",
    # over a changelog
    "SELECT a, SUM(c) OVER (ORDER BY a) FROM (SELECT auction AS a, COUNT(*) AS c FROM bid GROUP BY auction);",
])
def test_over_shapes_not_streamed(sql):
    assert stages(sql) is None


# -- streamed for real ---------------------------------------------------------------------------

QUERIES = {
    "rows": "SELECT k, v, ts, SUM(v) OVER w AS s, COUNT(*) OVER w AS n, MIN(v) OVER w AS lo FROM t"
            " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
    "range": "SELECT k, v, AVG(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '5' SECOND PRECEDING"
             " AND CURRENT ROW) AS a, MAX(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '5' SECOND"
             " PRECEDING AND CURRENT ROW) - v AS gap FROM t WHERE v > 100",
    "unbounded": "SELECT k, ts, COUNT(v) OVER (PARTITION BY k ORDER BY ts) AS n, MAX(v) OVER (PARTITION BY k"
                 " ORDER BY ts) AS top FROM t",
    "values": "SELECT k, v, LAG(v) OVER w AS prev, LAG(ts) OVER w AS prev_ts, LAG(v, 2, v - 1000) OVER w AS back2,"
              " FIRST_VALUE(v) OVER w AS first_v, LAST_VALUE(v) OVER w AS last_v,"
              " FIRST_VALUE(CONCAT(k, '-', CAST(v AS STRING))) OVER w AS fk, SUM(v) OVER w AS s FROM t"
              " WINDOW w AS (PARTITION BY k ORDER BY ts)",
    "bounded values": "SELECT k, v, FIRST_VALUE(v) OVER w AS f, LAST_VALUE(v) OVER w AS l FROM t"
                      " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
    "spreads": "SELECT k, v, STDDEV_POP(v) OVER w AS sp, VAR_SAMP(v) OVER w AS vs, ROUND(STDDEV_SAMP(CAST(v AS"
               " DOUBLE)) OVER (PARTITION BY k ORDER BY ts), 6) AS sd, ROUND(VAR_POP(v / 7.0) OVER (PARTITION BY k"
               " ORDER BY ts RANGE BETWEEN INTERVAL '9' SECOND PRECEDING AND CURRENT ROW), 4) AS vp FROM t"
               " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
    # folded frame by frame (spark.stateful.python_aggregates), across the micro-batches
    "lists": "SELECT k, v, LISTAGG(CAST(v AS STRING)) OVER (PARTITION BY k ORDER BY ts) AS l, ARRAY_AGG(v) OVER"
             " (PARTITION BY k ORDER BY ts) AS a FROM t",
    "bounded lists": "SELECT k, v, LISTAGG(k, '/') OVER w AS l, ARRAY_AGG(v) OVER w AS a FROM t"
                     " WINDOW w AS (ORDER BY ts ROWS BETWEEN 4 PRECEDING AND CURRENT ROW)",
    # DISTINCT FIRST_VALUE / LAST_VALUE: each value where it first appears in the frame
    "distinct values": "SELECT k, v, FIRST_VALUE(DISTINCT v / 100) OVER w AS f, LAST_VALUE(DISTINCT v / 100) OVER w"
                       " AS l FROM t WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)",
    "distinct values since": "SELECT k, v, LAST_VALUE(DISTINCT v / 250) OVER (PARTITION BY k ORDER BY ts) AS l FROM t",
    # COLLECT (an ARRAY here): NULLs left out, an empty one for a frame without values
    "collected": "SELECT k, v, COLLECT(CASE WHEN v > 300 THEN v END) OVER w AS c FROM t"
                 " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)",
}


def _table(folder, rng):
    """Four files read in order; times rise but may step back within the watermark's
    delay, so no row is late and streaming and batch agree."""
    values = rng.sample(range(1000), 60)
    for i in range(4):
        rows = "".join(f"k{rng.randint(0, 3)},{values[i * 15 + j]},2026-01-01 00:{(i * 15 + j) * 2 // 60:02d}:"
                       f"{(i * 15 + j) * 2 % 60:02d}\n" for j in range(15))
        os.utime(write(folder / f"part-{i}.csv", rows), (time.time() - 100 + i,) * 2)


@pytest.mark.spark
def test_streamed_over_ends_with_the_batch_result(run, tmp_path):
    folder = tmp_path / "parts"
    _table(folder, random.Random(5))
    ddl = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1'"
           f" SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")
    run.output(ddl)
    for name, query in QUERIES.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, name
        assert set(ops) == {"+I"}, f"{name}: an OVER emits each row once"


@pytest.mark.spark
def test_unbounded_over_emits_as_the_watermark_passes_survives_kill_9_and_drains(run, tmp_path):
    """A continuous INSERT over a watched directory: rows are written while the job runs,
    a kill -9 and a restart resume from the checkpoint (frames span the restart), and a
    drain writes the rest; together, the batch result, each row once."""

    from tests.jobs import killed_then_drained

    source, sink = tmp_path / "in", tmp_path / "out"

    def part(n: int) -> None:
        rows = "".join(f"{i},{'abc'[i * 7 % 3]},{i * 7 % 13},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                       for i in range(n * 30, n * 30 + 30))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (id BIGINT, k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (id BIGINT, k STRING, s INT, n BIGINT, top INT)
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT id, k, SUM(v) OVER w, COUNT(*) OVER w, MAX(v) OVER (PARTITION BY k ORDER BY ts"
             " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM src WINDOW w AS (PARTITION BY k ORDER BY ts"
             " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=30, resumed=30, more=60)
    assert len(streamed) == 90 and streamed == batch


def test_over_a_changelog_is_not_streamed_even_ordered_by_a_time_attribute():
    assert stages("SELECT auction, SUM(n) OVER (PARTITION BY auction ORDER BY t) FROM (SELECT auction, MAX(ts) AS t,"
                  " COUNT(*) AS n FROM bid GROUP BY auction);") is None


@pytest.mark.spark
def test_state_ttl_forgets_an_idle_partition_of_a_streamed_over(run, tmp_path):
    """'table.exec.state.ttl' reaches the OVER operator: with 1 ms, a partition whose rows
    have all been emitted forgets them by its next row (its running sum starts afresh), and
    one with a row still waiting for the watermark keeps them, as Flink's OVER does. Each
    file is a micro-batch; 'z' rows only move the watermark."""
    import csv
    import io

    folder = tmp_path / "parts"
    files = [[("a", 1, 1), ("b", 10, 2), ("z", 0, 9)], [("a", 2, 11), ("z", 0, 19)], [("b", 20, 21), ("z", 0, 29)],
             [("a", 4, 31), ("b", 40, 32), ("z", 0, 39)]]
    for i, rows in enumerate(files):
        text = "".join(f"{k},{v},2026-01-01 00:00:{s:02d}\n" for k, v, s in rows)
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    out = run.output(
        f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ("
        f"'connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');"
        "SET 'execution.bounded-input' = 'stream'; SET 'table.exec.state.ttl' = '1 ms';"
        "SET 'sql-client.execution.result-mode' = 'changelog';"
        "SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
        " AS s FROM t")
    sums = sorted((k, int(v), int(s)) for op, k, v, s in list(csv.reader(io.StringIO(out)))[1:] if k != "z")
    # without the TTL: a 1, 3, 7 and b 10, 30, 70
    assert sums == [("a", 1, 1), ("a", 2, 3), ("a", 4, 4), ("b", 10, 10), ("b", 20, 20), ("b", 40, 60)]


@pytest.mark.spark
def test_stddev_and_variance_over_are_what_flink_computes(run, tmp_path):
    """Flink expands STDDEV/VAR over a window into sums in the argument's type: over an INT
    every step is integer arithmetic. Flink 2.3 printed, for VAR_SAMP, VAR_POP and
    STDDEV_SAMP of x (running, by ts): k=a (1, 2): NULL 0 NULL, then 1 0 1; k=b (1, 4, 6):
    NULL 0 NULL, 5 2 2, 6 4 2 (a GROUP BY's VAR_SAMP of 1 and 2 is 0, computed otherwise).
    Batch mode and the streaming operator give the same."""
    folder = tmp_path / "spread"
    write(folder / "part-0.csv", "a,1,2026-01-01 00:00:01\na,2,2026-01-01 00:00:02\nb,1,2026-01-01 00:00:03\n")
    write(folder / "part-1.csv", "b,4,2026-01-01 00:00:04\nb,6,2026-01-01 00:00:05\n")
    # an INT's square past 2**31 wraps, as Flink's does (Flink 2.3 printed these too)
    write(folder / "part-2.csv", "c,46341,2026-01-01 00:00:06\nc,-46341,2026-01-01 00:00:07\n")
    write(folder / "part-3.csv", "c,7,2026-01-01 00:00:08\nc,300,2026-01-01 00:00:09\n")
    run.output(f"CREATE TEMPORARY TABLE s (k STRING, x INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH"
               f" ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")
    query = ("SELECT k, x, VAR_SAMP(x) OVER w AS vs, VAR_POP(x) OVER w AS vp, STDDEV_SAMP(x) OVER w AS ss FROM s"
             " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
    final, ops, batch = streamed_and_batch(run, query)
    flink = sorted([("a", "1", "", "0", ""), ("a", "2", "1", "0", "1"), ("b", "1", "", "0", ""),
                    ("b", "4", "5", "2", "2"), ("b", "6", "6", "4", "2"), ("c", "46341", "", "0", ""),
                    ("c", "-46341", "9266", "4633", "96"), ("c", "7", "4649", "3099", "68"),
                    ("c", "300", "25251", "18938", "158")])
    assert batch == flink
    assert final == flink and set(ops) == {"+I"}


def test_a_bounded_listagg_or_array_agg_over_gives_each_of_its_aggregates_the_window():
    """LISTAGG and ARRAY_AGG are a count and a COLLECT_LIST in Spark: both take the OVER
    (Spark refused the window around the whole expression: 'MISSING_GROUP_BY')."""
    from streamsql.spark.dialect import to_spark_sql
    from tests.operator_plans import steps

    plan = steps("SELECT LISTAGG(CAST(price AS STRING), ';') OVER (PARTITION BY auction ORDER BY ts),"
                 " ARRAY_AGG(price) OVER (PARTITION BY auction ORDER BY ts) FROM bid")[-1].plan
    sql = to_spark_sql(plan.query)
    over = "OVER (PARTITION BY `bid`.`auction` ORDER BY `bid`.`ts`)"
    assert f"IF(COUNT(CAST(`bid`.`price` AS STRING)) {over} = 0, NULL, ARRAY_JOIN(COLLECT_LIST(" in sql
    assert f"TRANSFORM(COLLECT_LIST(NAMED_STRUCT('v', `bid`.`price`)) {over}, x -> x.v)" in sql


def _repeating_values(tmp_path) -> str:
    """The DDL of a table t whose values repeat in one partition (1, 2, 1, 3) — the rows the
    DISTINCT OVER results below were measured on with Flink 2.3."""
    write(tmp_path / "t" / "a.csv", "a,1,2026-01-01 00:00:01\na,2,2026-01-01 00:00:02\na,1,2026-01-01 00:00:03\n"
                                     "a,3,2026-01-01 00:00:04\nb,5,2026-01-01 00:00:05\n")
    return (f"CREATE TEMPORARY TABLE t (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ("
            f"'connector' = 'filesystem', 'path' = '{tmp_path / 't'}', 'format' = 'csv');")


@pytest.mark.spark
def test_distinct_over_aggregates_follow_flink_bounded_and_streamed(run, tmp_path):
    """STDDEV/VAR(DISTINCT x) OVER as Flink 2.3 computes it (measured): its expansion into
    SUM(x * x), SUM(x) and COUNT(x) keeps DISTINCT on each, so 2 and -2 are two values but
    one square; integer steps truncate. Over bounded input against a model of that on random
    rows, in ROWS and RANGE frames; streamed (the OVER operator), every DISTINCT aggregate
    ends with the batch result (before: refused at plan time, and not streamed)."""
    rng = random.Random(5)
    rows = [(f"k{rng.randint(0, 2)}", rng.choice([None, *range(-4, 5)]), i) for i in range(60)]
    for n in range(4):
        write(tmp_path / "d" / f"part-{n}.csv", "".join(f"{k},{'' if v is None else v},2026-01-01 00:00:{s:02d}\n"
                                                     for k, v, s in rows[n * 15:(n + 1) * 15]))
    run.output(f"CREATE TEMPORARY TABLE d (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ("
               f"'connector' = 'filesystem', 'path' = '{tmp_path / 'd'}', 'format' = 'csv');")

    def spread(values, sample, root, floats):
        present = {v for v in values if v is not None}
        n = len(present)
        if n == 0 or sample and n == 1:
            return None
        total, squares = sum(present), sum({v * v for v in present})
        if floats:
            variance = (squares - total * total / n) / (n - 1 if sample else n)
            return round(variance ** 0.5 if root else variance, 6)
        variance = int((squares - int(total * total / n)) / (n - 1 if sample else n))  # Java's / truncates
        return int(max(variance, 0) ** 0.5) if root else variance  # (a negative one's NaN root: 0, as Java's cast)

    query = ("SELECT k, ts, STDDEV_POP(DISTINCT v) OVER w, VAR_SAMP(DISTINCT v) OVER w,"
             " ROUND(VAR_POP(DISTINCT CAST(v AS DOUBLE)) OVER w, 6), ROUND(STDDEV_SAMP(DISTINCT CAST(v AS"
             " DOUBLE)) OVER w, 6), VAR_POP(DISTINCT v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN"
             " INTERVAL '9' SECOND PRECEDING AND CURRENT ROW) FROM d"
             " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)")
    expected = []
    for at, (k, v, s) in enumerate(rows):
        mine = [r for r in rows[:at + 1] if r[0] == k]
        frame, recent = [r[1] for r in mine[-4:]], [r[1] for r in mine if r[2] >= s - 9]
        expected.append((k, f"2026-01-01 00:00:{s:02d}.000", *(
            "" if x is None else str(x) for x in (
                spread(frame, False, True, False), spread(frame, True, False, False),
                spread(frame, False, False, True), spread(frame, True, True, True),
                spread(recent, False, False, False)))))
    final, ops, batch = streamed_and_batch(run, query)
    assert batch == sorted(expected)
    assert final == batch and set(ops) == {"+I"}
    query = ("SELECT k, ts, COUNT(DISTINCT v) OVER w, SUM(DISTINCT v) OVER w, AVG(DISTINCT v) OVER w,"
             " MIN(DISTINCT v) OVER w, MAX(DISTINCT v) OVER w, LISTAGG(DISTINCT CAST(v AS STRING), '-') OVER w,"
             " ARRAY_AGG(DISTINCT v) OVER w, COLLECT(DISTINCT v) OVER w, SUM(DISTINCT CAST(v AS DECIMAL(5, 2)))"
             " OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '9' SECOND PRECEDING AND CURRENT ROW),"
             " AVG(DISTINCT CAST(v AS DECIMAL(5, 2))) OVER w FROM d"
             " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)")
    final, ops, batch = streamed_and_batch(run, query)
    assert final == batch and len(batch) == 60 and set(ops) == {"+I"}


@pytest.mark.spark
def test_distinct_first_and_last_value_over_take_a_value_where_it_first_appears(run, tmp_path):
    """Flink 2.3 on these rows (streaming mode): LAST_VALUE(DISTINCT v) is the latest value
    seen for the first time in the frame, not the latest row's (before: Spark's "The query
    does not include a GROUP BY clause" over bounded input)."""
    ddl = _repeating_values(tmp_path)
    since = run.rows(ddl + "SELECT k, v, FIRST_VALUE(DISTINCT v) OVER w, LAST_VALUE(DISTINCT v) OVER w FROM t"
                           " WINDOW w AS (PARTITION BY k ORDER BY ts);")
    assert sorted(since) == [["a", "1", "1", "1"], ["a", "1", "1", "2"], ["a", "2", "1", "2"], ["a", "3", "1", "3"],
                             ["b", "5", "5", "5"]]
    rows = run.rows("SELECT k, v, FIRST_VALUE(DISTINCT v) OVER w, LAST_VALUE(DISTINCT v) OVER w FROM t"
                    " WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW);")
    assert sorted(rows) == [["a", "1", "1", "1"], ["a", "1", "1", "2"], ["a", "2", "1", "2"], ["a", "3", "2", "3"],
                            ["b", "5", "5", "5"]]


@pytest.mark.spark
def test_bounded_over_takes_distinct_and_filtered_list_aggregates(run, tmp_path):
    """LISTAGG, ARRAY_AGG and COLLECT (DISTINCT) in an OVER: each value where it first appears
    in the frame (Flink 2.3 on these rows); a FILTER goes on each Spark aggregate they combine
    (before, each failed with Spark's words: "does not include a GROUP BY clause", "`if` does
    not support FILTER CLAUSE"). JSON_ARRAYAGG/JSON_OBJECTAGG and STDDEV/VAR(DISTINCT) of a DECIMAL
    OVER are refused at plan time, with the reason."""
    from streamsql.errors import ValidationError

    ddl = _repeating_values(tmp_path)
    rows = run.rows(ddl + "SELECT ts, LISTAGG(DISTINCT CAST(v AS STRING), '-') OVER w, ARRAY_AGG(DISTINCT v) OVER w,"
                          " COLLECT(DISTINCT v) OVER w FROM t WINDOW w AS (PARTITION BY k ORDER BY ts);")
    assert [r[1:] for r in sorted(rows)] == [["1", "[1]", "[1]"], ["1-2", "[1, 2]", "[1, 2]"],
                                             ["1-2", "[1, 2]", "[1, 2]"], ["1-2-3", "[1, 2, 3]", "[1, 2, 3]"],
                                             ["5", "[5]", "[5]"]]
    rows = run.rows("SELECT ts, LISTAGG(CAST(v AS STRING)) FILTER (WHERE v > 1) OVER w, ARRAY_AGG(v) FILTER (WHERE"
                    " v > 1) OVER w, COLLECT(DISTINCT v) FILTER (WHERE v < 3) OVER w, FIRST_VALUE(DISTINCT v) FILTER"
                    " (WHERE v > 1) OVER w FROM t WINDOW w AS (PARTITION BY k ORDER BY ts);")
    assert [r[1:] for r in sorted(rows)] == [["", "", "[1]", ""], ["2", "[2]", "[1, 2]", "2"],
                                             ["2", "[2]", "[1, 2]", "2"], ["2,3", "[2, 3]", "[1, 2]", "2"],
                                             ["5", "[5]", "[]", "5"]]
    for call, message in (("JSON_ARRAYAGG(v)", "JSON_ARRAYAGG cannot be used with OVER"),
                          ("JSON_OBJECTAGG(KEY k VALUE v)", "JSON_OBJECTAGG cannot be used with OVER"),
                          ("VAR_SAMP(DISTINCT CAST(v AS DECIMAL(5, 1)))",
                           r"VAR_SAMP\(DISTINCT ..\) OVER takes one integer, FLOAT or DOUBLE argument")):
        with pytest.raises(ValidationError, match=message):
            run.rows(f"SELECT {call} OVER (PARTITION BY k ORDER BY ts) FROM t;")
