"""Cascading windows over unbounded input: a window TVF over a window aggregate's rows (its
``window_time``), Flink's way of rolling 5-second counts up into minutes. Both run on
streamsql's window operator (spark.stateful.window_aggregate): the cut and the pandas core
without Spark, then bounded input streamed file by file against batch mode, and a
continuous job that emits as the watermark passes, survives a kill -9 and drains."""

from __future__ import annotations

import csv
import io
import os
import random
import time

import pandas as pd
import pytest

from streamsql.runtime.sources import is_bounded
from streamsql.spark.physical import runs_on_stateful_operators
from streamsql.spark.stateful import window_aggregate as wa
from streamsql.spark.stateful.chain import compile_query
from streamsql.spark.stateful.stages import AggregateStage, WindowAggregateStage, inserts_only
from streamsql.spark.stateful.specs import AggSpec
from tests.conftest import write
from tests.operator_plans import DDL, steps
from tests.streamed import BATCH, streamed_and_batch

VIEWS = """
CREATE TEMPORARY TABLE feed (auction BIGINT, price BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY VIEW per5 AS SELECT auction, window_start AS ws, window_time AS wt, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE feed, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY auction, window_start, window_end, window_time;
CREATE TEMPORARY VIEW counts AS SELECT auction, COUNT(*) AS n FROM feed GROUP BY auction;
CREATE TEMPORARY VIEW clock5 AS SELECT auction, window_time AS wt, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE feed,
  DESCRIPTOR(p), INTERVAL '5' SECOND)) GROUP BY auction, window_start, window_end, window_time;
"""


def _plan(sql: str):
    return steps(sql, DDL + VIEWS.replace("ts TIMESTAMP(3),", "ts TIMESTAMP(3), p AS PROCTIME(),"))[-1].plan


def _stage(sql: str):
    return compile_query(_plan(sql), is_bounded)


def _operators(sql: str):
    from streamsql.plan.logical import build_operator_plan

    return build_operator_plan(_plan(sql), is_bounded, None)


# -- the cut, without Spark ----------------------------------------------------------------------


def test_a_tumble_over_a_window_aggregate_s_window_time_reads_its_stage():
    sql = ("SELECT window_start, window_end, SUM(n) AS total FROM TABLE(TUMBLE(TABLE per5, DESCRIPTOR(wt),"
           " INTERVAL '1' MINUTE)) GROUP BY window_start, window_end;")
    assert runs_on_stateful_operators(_operators(sql))
    stage = _stage(sql)
    assert isinstance(stage, WindowAggregateStage) and stage.cascaded and inserts_only(stage)
    (view, below), = stage.inputs
    assert isinstance(below, WindowAggregateStage) and not below.cascaded
    assert (below.kind, below.parameters, stage.parameters) == ("TUMBLE", {"SIZE": 5000}, {"SIZE": 60000})
    # Sliced: the operator reads the inner window's rows themselves, one per inner window.
    assert [t.name for t in _tables(stage.split.input_query)] == [view]
    assert stage.window_views == []


def test_value_and_list_aggregates_over_a_window_aggregate_s_rows_are_not_cut():
    """The inner windows fired in one micro-batch come in no order: LISTAGG or FIRST_VALUE of
    them has no arrival order to follow (JSON_OBJECTAGG, ordered by key, has no need of one)."""
    sql = ("SELECT window_start, window_end, {} FROM TABLE(TUMBLE(TABLE per5, DESCRIPTOR(wt), INTERVAL '1' MINUTE))"
           " GROUP BY window_start, window_end;")
    for call in ("LISTAGG(CAST(n AS STRING))", "FIRST_VALUE(n)", "ARRAY_AGG(DISTINCT n)"):
        assert _stage(sql.format(call)) is None, call
    stage = _stage(sql.format("JSON_OBJECTAGG(KEY auction VALUE n)"))
    assert isinstance(stage, WindowAggregateStage) and stage.cascaded


def test_a_window_reading_its_bounds_beyond_the_keys_assigns_them_over_the_stage():
    sql = ("SELECT auction, window_start, window_end, SUM(n) AS total FROM TABLE(TUMBLE(TABLE per5, DESCRIPTOR(wt),"
           " INTERVAL '20' SECOND)) WHERE window_start > TIMESTAMP '2026-01-01 00:00:15'"
           " GROUP BY auction, window_start, window_end;")
    stage = _stage(sql)
    (view, _), = stage.inputs
    (name, window, input_view), = stage.window_views
    assert input_view == view and window.kind == "TUMBLE" and window.time_column == "wt"
    assert name in {t.name for t in _tables(stage.split.input_query)}


HOP_COUNTS = ("(SELECT auction, COUNT(*) AS n, window_start AS ws, window_end AS we FROM TABLE(HOP(TABLE feed,"
              " DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end)")


def test_a_group_by_of_a_window_aggregate_s_bounds_is_a_window_aggregate():
    """Flink's window-attached aggregate: grouped by another window aggregate's window_start
    and window_end (renamed), its rows are that window's, fired once as the watermark passes
    the window's end; insert-only, so a window join can read it (Nexmark q5)."""
    from streamsql.plan.aggregate_operators import WindowAggregate
    from streamsql.plan.operators import walk
    from streamsql.spark.stateful.stages import JoinStage

    top = f"SELECT MAX(c.n) AS top, c.ws, c.we FROM {HOP_COUNTS} c GROUP BY c.ws, c.we;"
    assert [n.kind for n in walk(_operators(top)) if isinstance(n, WindowAggregate)] == ["WindowAggregate"] * 2
    stage = _stage(top)
    assert isinstance(stage, WindowAggregateStage) and stage.cascaded and inserts_only(stage)
    assert (stage.start_key, stage.end_key) == tuple(stage.split.keys) and not stage.bounds
    (_, below), = stage.inputs
    assert isinstance(below, WindowAggregateStage) and below.kind == "HOP" and not below.cascaded
    # and either way round, grouped by another key too
    other = _stage(f"SELECT c.we, c.n, COUNT(*) AS auctions FROM {HOP_COUNTS} c GROUP BY c.n, c.we, c.ws;")
    assert isinstance(other, WindowAggregateStage) and (other.start_key, other.end_key) == tuple(other.split.keys[2:0:-1])
    # (``a.n >= m.top`` itself is planned as a window Top-N: plan.argmax_join)
    hot = (f"SELECT a.auction, a.n FROM {HOP_COUNTS} a JOIN (SELECT MAX(c.n) AS top, c.ws, c.we FROM {HOP_COUNTS} c"
           " GROUP BY c.ws, c.we) m ON a.ws = m.ws AND a.we = m.we AND a.n + 1 > m.top;")
    join = _stage(hot)
    join = join if isinstance(join, JoinStage) else join.inputs[0][1]
    assert isinstance(join, JoinStage) and join.window and join.per_batch  # both sides fire a window at once
    # a GROUP BY of window bounds over rows no window operator fired (a regular join's) stays a
    # GroupAggregate, updating each window's row
    joined = (f"SELECT ws, we, COUNT(*) AS c FROM (SELECT c.ws, c.we, c.n FROM {HOP_COUNTS} c JOIN users u"
              " ON c.auction = u.id) GROUP BY ws, we;")
    assert type(_stage(joined)) is AggregateStage
    # rows a window operator fired in one micro-batch come in no order for LAST_VALUE
    why = []
    assert compile_query(_plan(f"SELECT c.ws, c.we, LAST_VALUE(c.n) FROM {HOP_COUNTS} c GROUP BY c.ws, c.we;"),
                         is_bounded, why=why) is None
    assert why == ["LAST_VALUE reads another stateful operator's rows, which come in no order within a micro-batch,"
                   " and streamsql's LAST_VALUE takes rows in arrival order"]


def test_three_windows_cascade():
    sql = ("SELECT window_start, SUM(n2) FROM TABLE(TUMBLE(TABLE per20, DESCRIPTOR(wt2), INTERVAL '1' MINUTE))"
           " GROUP BY window_start, window_end;")
    ddl = ("CREATE TEMPORARY VIEW per20 AS SELECT auction, window_time AS wt2, SUM(n) AS n2 FROM TABLE(CUMULATE("
           "TABLE per5, DESCRIPTOR(wt), INTERVAL '10' SECOND, INTERVAL '20' SECOND)) GROUP BY auction, window_start,"
           " window_end, window_time;")
    stage = _stage(ddl + sql)
    middle = stage.inputs[0][1]
    assert stage.cascaded and middle.cascaded and middle.kind == "CUMULATE"
    assert not middle.inputs[0][1].cascaded


def test_a_window_over_an_over_aggregate_s_rows_reads_its_stage():
    """An OVER aggregate ordered by event time emits each row as the watermark passes it,
    so the window over its rows takes them as a window aggregate's."""
    from streamsql.spark.stateful.stages import OverStage

    ddl = ("CREATE TEMPORARY VIEW sums AS SELECT auction, ts, SUM(price) OVER (PARTITION BY auction ORDER BY ts"
           " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM feed;")
    sql = ("SELECT window_start, SUM(s) FROM TABLE(TUMBLE(TABLE sums, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
           " GROUP BY window_start, window_end;")
    assert runs_on_stateful_operators(_operators(ddl + sql))
    stage = _stage(ddl + sql)
    assert stage.cascaded and isinstance(stage.inputs[0][1], OverStage)


def test_a_window_top_n_over_windows_of_a_window_aggregate_s_rows_is_refused():
    """Its rows would reach the window rank operator as the watermark fires them, late by
    the watermark it tests: refused (not cut yet), never run with rows dropped."""
    sql = ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn"
           " FROM TABLE(TUMBLE(TABLE per5, DESCRIPTOR(wt), INTERVAL '1' MINUTE))) WHERE rn <= 3;")
    assert not runs_on_stateful_operators(_operators(sql))


def test_a_window_over_an_interval_join_s_rows_is_still_refused():
    """Spark's interval join emits rows as they match, not as the watermark passes them."""
    ddl = ("CREATE TEMPORARY TABLE other (auction BIGINT, ts2 TIMESTAMP(3), WATERMARK FOR ts2 AS ts2) WITH"
           " ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');"
           "CREATE TEMPORARY VIEW pairs AS SELECT f.auction, f.ts FROM feed f, other o WHERE f.auction = o.auction"
           " AND f.ts BETWEEN o.ts2 - INTERVAL '5' SECOND AND o.ts2;")
    sql = ("SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE pairs, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
           " GROUP BY window_start, window_end;")
    assert not runs_on_stateful_operators(_operators(ddl + sql))


def test_a_window_over_processing_time_windows_is_not_cut():
    sql = ("SELECT window_start, SUM(n) FROM TABLE(TUMBLE(TABLE clock5, DESCRIPTOR(wt), INTERVAL '1' MINUTE))"
           " GROUP BY window_start, window_end;")
    try:
        stage = _stage(sql)
    except Exception as error:  # the planner's own refusal: window_time of processing time is no rowtime
        assert "time attribute" in str(error)
    else:
        assert stage is None


# -- the pandas core ----------------------------------------------------------------------------


def _core(late: bool) -> dict:
    from streamsql.spark.stateful.group_aggregate import build_plan
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(n, T.LongType()) for n in ("k", wa.WINDOW_END_MS, "v", wa.SLICE_END_MS)])
    plan, _ = build_plan(schema, ["k", wa.WINDOW_END_MS], [AggSpec("SUM", "v", False, None, "s")])
    plan.update(out_keys=["k"], late=late)
    return plan


def test_rows_another_window_operator_fired_are_never_late():
    batch = pd.DataFrame({"k": [1, 1], wa.WINDOW_END_MS: [10_000, 10_000], "v": [3, 4],
                          wa.SLICE_END_MS: [10_000, 10_000]})

    class Clock:
        @staticmethod
        def getCurrentWatermarkInMs():
            return 12_000  # the watermark that fired the inner windows has passed the outer one too

    state = wa.accept(_core(True), None, batch, wa.lateness_clock(_core(True), Clock))
    assert state is None  # a window of the source's rows: late, dropped
    plan = _core(False)
    state = wa.accept(plan, None, batch, wa.lateness_clock(plan, Clock))
    state, out = wa.fire(plan, state, 12_000)  # and it fires in the same micro-batch
    assert state is None and out.to_dict("records") == [{"__rowkind": "+I", "k": 1, "s": 7}]


# -- on Spark ------------------------------------------------------------------------------------


SOURCE = ("CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1'"
          " SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');"
          "CREATE TEMPORARY VIEW fives AS SELECT k, window_start AS ws, window_time AS wt, COUNT(*) AS n,"
          " MAX(v) AS top FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND))"
          " GROUP BY k, window_start, window_end, window_time;"
          "CREATE TEMPORARY VIEW tens AS SELECT k, window_time AS wt2, SUM(n) AS n2 FROM TABLE(HOP(TABLE fives,"
          " DESCRIPTOR(wt), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end,"
          " window_time;"
          "CREATE TEMPORARY VIEW sums AS SELECT k, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2"
          " PRECEDING AND CURRENT ROW) AS s FROM t;"
          "CREATE TEMPORARY VIEW hops AS SELECT k, COUNT(*) AS n, window_start AS ws, window_end AS we FROM"
          " TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))"
          " GROUP BY k, window_start, window_end;")

QUERIES = {
    "tumble": "SELECT window_start, window_end, SUM(n) AS total, MAX(top) AS top, COUNT(*) AS windows FROM"
              " TABLE(TUMBLE(TABLE fives, DESCRIPTOR(wt), INTERVAL '20' SECOND)) GROUP BY window_start, window_end",
    "cumulate_distinct": "SELECT window_start, window_end, SUM(n) AS total, COUNT(DISTINCT k) AS ks FROM"
                         " TABLE(CUMULATE(TABLE fives, DESCRIPTOR(wt), INTERVAL '10' SECOND, INTERVAL '30' SECOND))"
                         " GROUP BY window_start, window_end",
    "hop_filtered": "SELECT k, window_start, window_end, window_time, SUM(n) AS total FROM TABLE(HOP(TABLE fives,"
                    " DESCRIPTOR(wt), INTERVAL '5' SECOND, INTERVAL '15' SECOND)) WHERE n > 1"
                    " GROUP BY k, window_start, window_end, window_time",
    "bounds_read": "SELECT k, window_start, SUM(n) AS total FROM TABLE(TUMBLE(TABLE fives, DESCRIPTOR(wt),"
                   " INTERVAL '20' SECOND)) WHERE window_start >= TIMESTAMP '2026-01-01 00:00:20'"
                   " GROUP BY k, window_start, window_end",
    "three_deep": "SELECT window_start, SUM(n2) AS total FROM TABLE(TUMBLE(TABLE tens, DESCRIPTOR(wt2),"
                  " INTERVAL '30' SECOND)) GROUP BY window_start, window_end",
    "over_rows": "SELECT k, window_start, MAX(s) AS top, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE sums, DESCRIPTOR(ts),"
                 " INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end",
    # grouped by a window aggregate's bounds (Flink's window-attached aggregate), and joined
    # with that aggregate's rows by window (Nexmark q5's shape: the same HOP counts twice)
    "attached": "SELECT ws, we, MAX(n) AS top, COUNT(*) AS ks FROM hops GROUP BY ws, we",
    # (``a.n >= m.top`` would be ranked, not joined: plan.argmax_join, below)
    "hot_keys": "SELECT a.k, a.n, a.we FROM hops a JOIN (SELECT MAX(n) AS top, ws, we FROM hops GROUP BY ws, we) m"
                " ON a.ws = m.ws AND a.we = m.we AND a.n + 1 > m.top",
    # the same, each side its own subquery, as Nexmark q5 writes it: ranked (RANK() = 1), not joined
    "hot_keys_ranked": "SELECT a.k, a.n, m.we FROM (SELECT k, COUNT(*) AS n, window_start AS ws, window_end AS we FROM"
                       " TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) GROUP BY k,"
                       " window_start, window_end) a JOIN (SELECT MAX(c.n) AS top, c.ws, c.we FROM (SELECT COUNT(*) AS"
                       " n, window_start AS ws, window_end AS we FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5'"
                       " SECOND, INTERVAL '10' SECOND)) GROUP BY k, window_start, window_end) c GROUP BY c.ws, c.we) m"
                       " ON a.ws = m.ws AND a.we = m.we AND a.n >= m.top",
}


@pytest.mark.spark
def test_streamed_cascades_end_with_the_batch_result(run, tmp_path):
    folder, rng = tmp_path / "parts", random.Random(5)
    for i in range(4):  # rising event times across files, a few out of order within one
        rows = [f"k{rng.randint(0, 2)},{rng.randint(0, 9)},2026-01-01 00:00:{i * 14 + j + rng.randint(0, 1):02d}.{j}00"
                for j in range(14)]
        os.utime(write(folder / f"part-{i}.csv", "\n".join(rows) + "\n"), (time.time() - 100 + i,) * 2)
    run.output(SOURCE.format(folder=folder))
    for name, query in QUERIES.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected and len(expected) > 2, name
        assert set(ops) == {"+I"}, f"{name}: each window once"
        if name == "hot_keys_ranked":  # the rows the join gives, as batch mode joins them unrewritten
            joined = run.output(BATCH + query.replace("a.n >= m.top", "a.n + 0 >= m.top"))
            run.output("RESET 'execution.runtime-mode';")
            assert final == sorted(tuple(r) for r in list(csv.reader(io.StringIO(joined)))[1:]), name
    # a streaming query starts without exchange reuse (hot_keys' second HOP branch would never
    # get a watermark); the session keeps it for batch queries
    assert run.engine._spark.conf.get("spark.sql.exchange.reuse", "true") == "true"


@pytest.mark.spark
def test_an_unbounded_cascade_emits_as_the_watermark_passes_survives_kill_9_and_drains(run, tmp_path):
    """Per-key 5-second counts rolled up into 20-second totals, continuously: totals are
    written while the job runs, a kill -9 and a restart resume both windows' state from the
    checkpoint, and the drain fires the rest; together, the batch result, each window once."""
    from tests.jobs import killed_then_drained

    source, sink = tmp_path / "in", tmp_path / "out"

    def part(n: int) -> None:
        rows = "".join(f"{'abc'[i * 7 % 3]},{i % 5},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                       for i in range(n * 40, n * 40 + 40))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TEMPORARY VIEW fives AS SELECT k, window_time AS wt, COUNT(*) AS n, SUM(v) AS s FROM TABLE(TUMBLE(TABLE src,
  DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY k, window_start, window_end, window_time;
CREATE TABLE out (ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT, s BIGINT, ks BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT window_start, window_end, SUM(n), SUM(s), COUNT(DISTINCT k) FROM TABLE(TUMBLE("
             "TABLE fives, DESCRIPTOR(wt), INTERVAL '20' SECOND)) GROUP BY window_start, window_end")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=2, resumed=2, more=4)
    assert len(streamed) == len(set(streamed)) == 6 and streamed == batch


def _tables(query):
    from sqlglot import exp

    return list(query.find_all(exp.Table))
