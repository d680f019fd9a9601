"""Window aggregates Spark cannot stream (CUMULATE, DISTINCT, windows inside a chain of
stateful operators) on streamsql's window operator (spark.stateful.window_aggregate): the
cut and the pandas core without Spark, then bounded input streamed file by file against
batch mode, and a continuous job over a watched directory that emits windows as the
watermark passes them, survives a kill -9 and drains."""

from __future__ import annotations

import os
import signal
import random
import time
from datetime import datetime

import pandas as pd
import pytest
from pyspark.sql import types as T

from streamsql.spark.physical import runs_on_stateful_operators
from streamsql.spark.stateful import accumulate
from streamsql.spark.stateful import window_aggregate as wa
from streamsql.spark.stateful.stages import AggregateStage, RankStage, WindowAggregateStage, inserts_only
from streamsql.spark.stateful.group_aggregate import build_plan
from streamsql.spark.stateful.specs import AggSpec
from tests.conftest import wait_for, write
from tests.operator_plans import build
from tests.operator_plans import stages
from tests.streamed import streamed_and_batch

CUMULATE = "TABLE(CUMULATE(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))"
HOP = "TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))"


# -- the cut, without Spark ----------------------------------------------------------------------


def test_cumulate_with_distinct_and_filter_is_cut_around_the_window_operator():
    sql = (f"SELECT auction, window_start, window_end, COUNT(DISTINCT bidder) AS n, SUM(price) FILTER"
           f" (WHERE price > 3) AS s FROM {CUMULATE} WHERE price > 1 GROUP BY auction, window_start, window_end;")
    assert runs_on_stateful_operators(build(sql))
    stage = stages(sql)
    assert isinstance(stage, WindowAggregateStage) and not stage.inputs
    assert (stage.kind, stage.parameters, stage.start_key, stage.end_key) == (
        "CUMULATE", {"STEP": 2000, "SIZE": 10000}, "__k1", "__k2")
    assert [(c.function, c.distinct, c.condition is not None) for c in stage.split.calls] == [
        ("COUNT", True, False), ("SUM", False, True)]
    sql = _sql(stage.split.input_query)
    assert "UNIX_MILLIS(`bid`.`ts`) AS `__event_ms`" in sql
    # Each row once, into its slice: the input is the TVF's input, the bounds the operator's.
    assert stage.bounds == {"__k1": "start", "__k2": "end"} and "FROM `bid` AS `bid`" in sql
    assert "window_start" not in sql


def test_a_window_column_read_beyond_the_keys_reads_the_windows_rows():
    stage = stages(f"SELECT window_start, window_end, COUNT(DISTINCT bidder) FROM {HOP} WHERE window_start >"
                   f" TIMESTAMP '2026-01-01 00:00:00' GROUP BY window_start, window_end;")
    assert stage.bounds == {} and "FROM `__window_1`" in _sql(stage.split.input_query)


def test_value_and_list_aggregates_fold_each_window_s_rows_in_arrival_order():
    """FIRST_VALUE, LAST_VALUE, LISTAGG and ARRAY_AGG take a window's rows in the order they
    came: the operator reads the window relation's rows (slices would lose their order)."""
    sql = (f"SELECT auction, window_start, window_end, LISTAGG(channel), FIRST_VALUE(price), ARRAY_AGG(DISTINCT"
           f" bidder) FROM {CUMULATE} GROUP BY auction, window_start, window_end;")
    assert runs_on_stateful_operators(build(sql))
    stage = stages(sql)
    assert isinstance(stage, WindowAggregateStage) and stage.bounds == {}
    assert "FROM `__window_1`" in _sql(stage.split.input_query)
    assert [(c.function, c.distinct) for c in stage.split.calls] == [
        ("LISTAGG", False), ("FIRST_VALUE", False), ("ARRAY_AGG", True)]


def test_plain_tumble_and_hop_aggregates_stay_spark_s():
    for window in (HOP, CUMULATE.replace("CUMULATE", "TUMBLE").replace("INTERVAL '2' SECOND, ", "")):
        sql = f"SELECT window_start, window_end, COUNT(*) FROM {window} GROUP BY window_start, window_end;"
        assert not runs_on_stateful_operators(build(sql))
        sql = sql.replace("COUNT(*)", "COUNT(DISTINCT bidder)")
        assert isinstance(stages(sql), WindowAggregateStage)


def test_an_aggregate_over_window_results_reads_the_window_operator():
    stage = stages(f"SELECT MAX(n) AS top, COUNT(*) AS windows FROM (SELECT auction, window_start, window_end,"
                   f" COUNT(*) AS n FROM {HOP} GROUP BY auction, window_start, window_end) GROUP BY auction;")
    assert isinstance(stage, AggregateStage)
    (_, child), = stage.inputs
    assert isinstance(child, WindowAggregateStage) and child.kind == "HOP"


def test_window_top_n_over_a_window_aggregate_ranks_each_window_once():
    stage = stages(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n"
                   f" DESC) AS rn FROM (SELECT auction, window_start, window_end, COUNT(*) AS n FROM {HOP} GROUP BY"
                   f" auction, window_start, window_end)) WHERE rn <= 3;")
    assert isinstance(stage, RankStage) and stage.per_window and inserts_only(stage)
    assert (stage.partition, stage.order, stage.limit) == (["window_start", "window_end"], [("n", True)], 3)
    (_, child), = stage.inputs
    assert isinstance(child, WindowAggregateStage)


def test_window_top_n_over_a_window_aggregate_finds_its_bounds_under_other_names():
    """Flink's window Top-N partitions by both window bounds, whatever the aggregate named them
    (the operator plan follows them through the projection); RANK and DENSE_RANK keep ties."""
    for function in ("ROW_NUMBER", "RANK", "DENSE_RANK"):
        stage = stages(f"SELECT auction, n FROM (SELECT *, {function}() OVER (PARTITION BY ws, we ORDER BY n DESC) AS r"
                       f" FROM (SELECT auction, window_start AS ws, window_end AS we, COUNT(*) AS n FROM {HOP}"
                       f" GROUP BY auction, window_start, window_end)) WHERE r <= 1;")
        assert isinstance(stage, RankStage) and stage.per_window and stage.rank_type == function
        assert stage.partition == ["ws", "we"] and isinstance(stage.inputs[0][1], WindowAggregateStage)
    stage = stages(f"SELECT auction, price, window_end, r FROM (SELECT *, RANK() OVER (PARTITION BY window_start,"
                   f" window_end ORDER BY price DESC) AS r FROM {HOP}) WHERE r <= 2;")  # over the TVF's rows
    assert isinstance(stage, RankStage) and stage.window_end and (stage.rank_type, stage.rank_column) == ("RANK", "r")
    # one bound alone is no window: a Top-N over updates-free rows, not per window
    stage = stages(f"SELECT auction, n FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY n DESC) AS r"
                   f" FROM (SELECT auction, window_start AS ws, window_end AS we, COUNT(*) AS n FROM {HOP}"
                   f" GROUP BY auction, window_start, window_end)) WHERE r <= 1;")
    assert not (isinstance(stage, RankStage) and stage.per_window)


def test_ties_rank_as_rank_and_dense_rank_number_them():
    from streamsql.spark.stateful import ranking

    rows = pd.DataFrame({"p": ["a"] * 5 + ["b"] * 3, "v": [5, 7, 7, None, 5, 1, None, None],
                         ranking.SEQ: range(8)})
    numbers = {}
    for function in ("ROW_NUMBER", "RANK", "DENSE_RANK"):
        plan = {"partition": ["p"], "order": [("v", True)], "limit": 4, "later_wins": False, "rank_type": function}
        ranked = ranking._ranked(plan, rows)
        numbers[function] = list(zip(ranked["p"], ranked[ranking.SEQ], ranked[ranking.RANK]))
    # descending, NULL last (Flink's NULL is the smallest); ROW_NUMBER breaks ties by arrival
    assert numbers["ROW_NUMBER"] == [("a", 1, 1), ("a", 2, 2), ("a", 0, 3), ("a", 4, 4), ("b", 5, 1), ("b", 6, 2),
                                     ("b", 7, 3)]
    assert numbers["RANK"] == [("a", 1, 1), ("a", 2, 1), ("a", 0, 3), ("a", 4, 3), ("b", 5, 1), ("b", 6, 2),
                               ("b", 7, 2)]
    assert numbers["DENSE_RANK"] == [("a", 1, 1), ("a", 2, 1), ("a", 0, 2), ("a", 4, 2), ("a", 3, 3), ("b", 5, 1),
                                     ("b", 6, 2), ("b", 7, 2)]


@pytest.mark.parametrize("sql", [
    # a window Top-N of a SESSION TVF's rows: Flink's window Top-N takes TUMBLE, HOP and CUMULATE
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn"
    " FROM TABLE(SESSION(TABLE bid PARTITION BY auction, DESCRIPTOR(ts), INTERVAL '5' SECOND))) WHERE rn <= 3;",
    # a window join under an aggregate: window relations outside a window aggregate are not cut
    f"SELECT a.auction, COUNT(*) FROM (SELECT * FROM {HOP}) a JOIN (SELECT * FROM {HOP}) b ON a.auction = b.auction"
    " AND a.window_start = b.window_start AND a.window_end = b.window_end GROUP BY a.auction;",
])
def test_window_shapes_not_cut(sql):
    assert stages(sql) is None


@pytest.mark.parametrize("window", [HOP, CUMULATE])
def test_window_top_n_and_deduplication_over_a_tvf_s_rows_read_each_window_s_end(window):
    stage = stages(f"SELECT auction, price, window_end, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
                   f" window_start, window_end, auction ORDER BY price DESC) AS rn FROM {window}) WHERE rn <= 2;")
    assert isinstance(stage, RankStage) and inserts_only(stage) and not stage.per_window
    assert (stage.partition, stage.order, stage.limit, stage.rank_column, stage.window_end) == (
        ["window_start", "window_end", "auction"], [("price", True)], 2, "rn", "__wend_ms")
    assert "UNIX_MILLIS(`bid`.`window_end`) AS `__wend_ms` FROM `__window_1`" in _sql(stage.input_query)
    assert runs_on_stateful_operators(build(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
                                            f" window_start, window_end ORDER BY ts) AS rn FROM {window}) WHERE rn = 1;"))


def test_window_top_n_over_a_tvf_read_through_a_subquery_reads_the_subquery_s_window_end():
    stage = stages(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY"
                   f" price DESC) AS rn FROM (SELECT auction, price, window_start, window_end FROM (SELECT * FROM"
                   f" {HOP}) WHERE price > 2)) WHERE rn <= 3;")
    assert isinstance(stage, RankStage) and not stage.inputs and stage.window_end == "__wend_ms"
    assert "UNIX_MILLIS(`_1`.`window_end`) AS `__wend_ms`" in _sql(stage.input_query)
    # a subquery whose window_end is not the TVF's own: Flink has no window Top-N there either,
    # but a regular (updating) Top-N over the rows
    plain = stages(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY"
                   f" price DESC) AS rn FROM (SELECT auction, price, window_start, window_end + INTERVAL '1' SECOND"
                   f" AS window_end FROM {HOP})) WHERE rn <= 3;")
    assert isinstance(plain, RankStage) and plain.window_end is None and not inserts_only(plain)


PLAIN_TVF = {  # a TVF's rows feeding no window operator: plain rows with window columns
    "grouped_by_one_bound": "SELECT window_start, COUNT(*) AS n, MAX(v) AS top FROM TABLE(TUMBLE(TABLE t,"
                            " DESCRIPTOR(ts), INTERVAL '6' SECOND)) GROUP BY window_start",
    "left_joined": "SELECT a.k, a.v, a.window_end, b.ts FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND,"
                   " INTERVAL '10' SECOND)) a LEFT JOIN (SELECT * FROM t WHERE v > 3) b ON a.k = b.k AND a.v + 3 < b.v",
    "top2_per_key": "SELECT k, v, window_start FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC, ts)"
                    " AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '6' SECOND))) WHERE rn <= 2",
}


def test_a_tvf_s_rows_feeding_no_window_operator_are_read_as_plain_rows():
    from streamsql.spark.stateful.stages import JoinStage

    tvf = "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
    stage = stages(f"SELECT window_start, COUNT(*) AS n FROM {tvf} GROUP BY window_start;")
    assert isinstance(stage, AggregateStage) and not stage.inputs  # a GroupAggregate, updating
    assert "`__window_1`" in _sql(stage.split.input_query)
    joined = stages(f"SELECT b.auction, b.window_start, u.name FROM {tvf} b LEFT JOIN users u ON b.bidder = u.id;")
    assert isinstance(joined.inputs[0][1], JoinStage) and not joined.inputs[0][1].window
    ranked = stages(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn"
                    f" FROM (SELECT * FROM {tvf})) WHERE rn <= 2;")
    assert isinstance(ranked, RankStage) and ranked.window_end is None and not ranked.per_window
    # a CUMULATE TVF's rows grouped by one bound only: Spark assigns no CUMULATE windows itself
    assert not runs_on_stateful_operators(build(f"SELECT COUNT(*) FROM (SELECT window_start, COUNT(DISTINCT bidder)"
                                                f" AS n FROM {CUMULATE} GROUP BY window_start) GROUP BY n;"))
    # with a window operator in the plan, the same rows elsewhere are still refused
    assert stages(f"SELECT a.auction, COUNT(*) FROM (SELECT * FROM {HOP}) a JOIN (SELECT * FROM {HOP}) b ON"
                  " a.auction = b.auction AND a.window_start = b.window_start AND a.window_end = b.window_end"
                  " GROUP BY a.auction;") is None


def _sql(query):
    from streamsql.spark.dialect import to_spark_sql

    return to_spark_sql(query)


# -- the pandas core, without Spark ----------------------------------------------------------------


def _plan(aggregates):
    schema = T.StructType([T.StructField(n, t) for n, t in [
        ("k", T.StringType()), ("ws", T.TimestampType()), ("we", T.TimestampType()), ("v", T.LongType()),
        (wa.WINDOW_END_MS, T.LongType()), (wa.SLICE_END_MS, T.LongType())]])
    plan, _ = build_plan(schema, ["k", "ws", "we", wa.WINDOW_END_MS], aggregates)
    plan.update(out_keys=["k", "ws", "we"], ttl_ms=None)
    return plan


def _rows(*rows):
    """(key, window end s, slice end s, v): windows of 10 s ending at `end`."""
    return pd.DataFrame([{"k": k, "ws": pd.Timestamp((end - 10) * 1000, unit="ms"), "we": pd.Timestamp(end * 1000, unit="ms"),
                          "v": v, wa.WINDOW_END_MS: end * 1000, wa.SLICE_END_MS: slice_end * 1000}
                         for k, end, slice_end, v in rows])


def test_windows_fire_once_when_the_watermark_reaches_their_end_and_late_rows_are_dropped():
    plan = _plan([AggSpec("COUNT", "v", distinct=True, output_name="d"), AggSpec("SUM", "v", output_name="s")])
    state = wa.accept(plan, None, _rows(("a", 10, 10, 1), ("a", 10, 10, 1), ("a", 20, 10, 2), ("b", 20, 20, 5)), 0)
    assert wa.next_end(state) == 10_000
    state, out = wa.fire(plan, state, 9_999)
    assert out.empty
    state, out = wa.fire(plan, state, 10_000)
    assert out[["__rowkind", "k", "d", "s"]].values.tolist() == [["+I", "a", 1, 2]]
    assert wa.next_end(state) == 20_000 and len(state.multisets[0]) == 2  # window 10's values are gone
    # The watermark is past 10 s: a row whose earliest window (slice) ended is late, in all its windows.
    state = wa.accept(plan, state, _rows(("a", 20, 10, 100), ("a", 20, 20, 3)), 10_000)
    state, out = wa.fire(plan, state, 25_000)
    assert sorted(out[["k", "d", "s"]].values.tolist()) == [["a", 2, 5], ["b", 1, 5]]
    assert state is None and wa.next_end(state) is None


# -- on Spark ----------------------------------------------------------------------------------------


def _files(folder, rng):
    """Four files of rows, event times rising across files (a few out of order within one)."""
    for i in range(4):
        rows = [f"k{rng.randint(0, 2)},{rng.randint(0, 6)},2026-01-01 00:00:{i * 12 + j + rng.randint(0, 1):02d}.{j}00"
                for j in range(12)]
        os.utime(write(folder / f"part-{i}.csv", "\n".join(rows) + "\n"), (time.time() - 100 + i,) * 2)


QUERIES = {
    "cumulate": "SELECT k, window_start, window_end, COUNT(*) AS n, COUNT(DISTINCT v) AS d, SUM(v) AS s,"
                " MAX(v) AS top FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '4' SECOND,"
                " INTERVAL '12' SECOND)) GROUP BY k, window_start, window_end",
    "hop_distinct": "SELECT window_start, window_end, window_time, COUNT(DISTINCT k) AS ks, AVG(v) FILTER (WHERE"
                    " v > 1) AS a FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10'"
                    " SECOND)) GROUP BY window_start, window_end, window_time",
    "window_top2": "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY s DESC,"
                   " k) AS rn FROM (SELECT k, window_start, window_end, SUM(v) AS s FROM TABLE(TUMBLE(TABLE t,"
                   " DESCRIPTOR(ts), INTERVAL '6' SECOND)) GROUP BY k, window_start, window_end)) WHERE rn <= 2",
    "max_of_windows": "SELECT k, MAX(n) AS top, COUNT(*) AS windows FROM (SELECT k, window_start, window_end,"
                      " COUNT(*) AS n FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '6' SECOND))"
                      " GROUP BY k, window_start, window_end) GROUP BY k",
    "tvf_top2": "SELECT k, v, ts, window_start, window_end, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
                " window_start, window_end ORDER BY v DESC, ts) AS rn FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts),"
                " INTERVAL '5' SECOND, INTERVAL '10' SECOND))) WHERE rn <= 2",
    "tvf_top3_per_key": "SELECT k, v, window_end FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start,"
                        " window_end, k ORDER BY v, ts DESC) AS rn FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts),"
                        " INTERVAL '6' SECOND)) WHERE v > 0) WHERE rn <= 3",
    "subquery_top2": "SELECT k, v, window_start, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start,"
                     " window_end ORDER BY v DESC, ts) AS rn FROM (SELECT k, v + 1 AS v, ts, window_start, window_end"
                     " FROM (SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10'"
                     " SECOND))) WHERE k <> 'k1')) WHERE rn <= 2",
    "tvf_dedup": "SELECT k, v, ts, window_end FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start,"
                 " window_end, k ORDER BY ts DESC) AS rn FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '4'"
                 " SECOND, INTERVAL '12' SECOND))) WHERE rn = 1",
    # RANK and DENSE_RANK (Flink refuses them in a window Top-N): v ranges over 0..6, so rows tie
    "tvf_rank2": "SELECT k, v, ts, window_end, r FROM (SELECT *, RANK() OVER (PARTITION BY window_start, window_end"
                 " ORDER BY v DESC) AS r FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND,"
                 " INTERVAL '10' SECOND))) WHERE r <= 2",
    "renamed_dense_rank": "SELECT k, n, ws, r FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY ws, we ORDER BY n DESC)"
                          " AS r FROM (SELECT k, COUNT(*) AS n, window_start AS ws, window_end AS we FROM"
                          " TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '6' SECOND)) GROUP BY k, window_start,"
                          " window_end)) WHERE r <= 2",
    # the value and list aggregates on the window operator: a window's rows in arrival order
    "cumulate_lists": "SELECT k, window_start, window_end, LISTAGG(CAST(v AS STRING), '-') AS l, FIRST_VALUE(v) AS f,"
                      " LAST_VALUE(ts) AS lt, ARRAY_AGG(v) AS a, LISTAGG(DISTINCT CAST(v AS STRING)) AS ld"
                      " FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '4' SECOND, INTERVAL '12' SECOND))"
                      " GROUP BY k, window_start, window_end",
    "hop_distinct_lists": "SELECT window_start, window_end, COUNT(DISTINCT k) AS ks, LISTAGG(k) FILTER (WHERE v > 2)"
                          " AS l, LAST_VALUE(v) AS last_v, ARRAY_SORT(COLLECT(DISTINCT v)) AS c, JSON_ARRAYAGG(v) AS j"
                          " FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '5' SECOND,"
                          " INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
    "tumble_distinct_object": "SELECT k, window_end, COUNT(DISTINCT v) AS d, JSON_OBJECTAGG(KEY CAST(ts AS STRING)"
                              " VALUE v) AS o FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '6' SECOND))"
                              " GROUP BY k, window_start, window_end",
}


def _declare_t(run, folder, seed: int) -> None:
    """Table t (k, v, ts) over ``_files``' four files."""
    _files(folder, random.Random(seed))
    run.output(f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
               f" '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")


@pytest.mark.spark
def test_streamed_windows_end_with_the_batch_result(run, tmp_path):
    _declare_t(run, tmp_path / "parts", 11)
    for name, query in QUERIES.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, name
        if name != "max_of_windows":
            assert set(ops) == {"+I"}, f"{name}: a window operator emits each window once"


@pytest.mark.spark
def test_streamed_plain_tvf_rows_end_with_the_batch_result(run, tmp_path):
    _declare_t(run, tmp_path / "parts", 7)
    for name, query in PLAIN_TVF.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, name
        assert ops["-D"] + ops["-U"], f"{name}: an updating result over the TVF's rows"


@pytest.mark.spark
def test_unbounded_cumulate_emits_as_the_watermark_passes_survives_kill_9_and_drains(run, tmp_path):
    """A continuous INSERT over a watched directory: windows are written while the job
    runs, a kill -9 and a restart resume from the checkpoint (windows span the restart),
    and a drain fires the rest; together, the batch result, each window once."""
    from tests.jobs import killed_then_drained

    source, sink = tmp_path / "in", tmp_path / "out"

    def part(n: int) -> None:
        rows = "".join(f"{'abc'[i * 7 % 3]},{i * 5 % 4},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                       for i in range(n * 30, n * 30 + 30))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (k STRING, ws TIMESTAMP(3), we TIMESTAMP(3), n BIGINT, d BIGINT)
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT k, window_start, window_end, COUNT(*), COUNT(DISTINCT v) FROM TABLE(CUMULATE("
             "TABLE src, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY k, window_start,"
             " window_end")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=24, resumed=18, more=30)
    assert len(streamed) == len(set(streamed)) == 60 and streamed == batch


@pytest.mark.spark
def test_a_late_row_is_dropped_from_every_window_it_would_have_joined(run, tmp_path):
    """The late row (1 s) arrives after the watermark passed 4 s, the end of its earliest
    window: Flink drops it from all its windows, the still-open [0 s, 12 s) included."""
    import csv
    import io

    folder = tmp_path / "parts"
    first = "".join(f"k1,1,2026-01-01 00:00:{s:02d}\n" for s in range(0, 11, 2))
    for i, rows in enumerate([first, "k1,1,2026-01-01 00:00:01\nk1,1,2026-01-01 00:00:11\n"]):
        os.utime(write(folder / f"part-{i}.csv", rows), (time.time() - 100 + i,) * 2)
    run.output(f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
               f" '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")
    out = run.output("SET 'execution.bounded-input' = 'stream'; SELECT k, window_end, COUNT(DISTINCT ts) AS n"
                     " FROM TABLE(CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '4' SECOND, INTERVAL '12' SECOND))"
                     " GROUP BY k, window_start, window_end;")
    run.output("RESET 'execution.bounded-input';")
    assert sorted(list(csv.reader(io.StringIO(out)))[1:]) == [
        ["k1", "2026-01-01 00:00:04.000", "2"], ["k1", "2026-01-01 00:00:08.000", "4"],
        ["k1", "2026-01-01 00:00:12.000", "7"]]


@pytest.mark.spark
def test_files_written_within_one_clock_tick_are_streamed_in_name_order(run, tmp_path):
    """Eight part files with one modification time (a directory filled by one program):
    Spark would take them in the file system's order (hash order on ext4), and a later
    part's watermark would make an earlier part's rows late. Read by name, nothing is
    late, and the streamed windows are the batch result."""
    folder, stamp = tmp_path / "parts", time.time() - 100
    for i in range(8):
        rows = "".join(f"k{j % 3},{j},2026-01-01 00:{i:02d}:{j * 6:02d}\n" for j in range(10))
        os.utime(write(folder / f"part-{i:05d}.csv", rows), (stamp, stamp))
    write(folder / ".hidden.csv", "k9,9,2026-01-01 00:00:00\n")  # left out, as Spark leaves it out
    run.output(f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
               f" '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")
    final, ops, expected = streamed_and_batch(run, "SELECT k, window_start, COUNT(*) AS n, SUM(v) AS s FROM TABLE("
                                                   "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '30' SECOND))"
                                                   " GROUP BY k, window_start, window_end")
    assert final == expected and len(expected) == 48 and "k9" not in {row[0] for row in final}


# -- window Top-N over a TVF's rows (window_rank), without Spark ----------------------------------


def _rank_plan(limit: int, rank: str | None = "rn"):
    return {"partition": ["we", "k"], "order": [("v", True)], "limit": limit, "rank": rank, "data": ["k", "v", "we"],
            "later_wins": False, "buckets": 1, "window_end": "__wend_ms", "columns": ["k", "v", "we", "__wend_ms",
                                                                                      "__bucket"]}


def _window_rows(*rows):
    """(key, v, window end s)."""
    return pd.DataFrame([{"k": k, "v": v, "we": pd.Timestamp(end * 1000, unit="ms"), "__wend_ms": end * 1000,
                          "__bucket": 0} for k, v, end in rows])


def test_window_rank_keeps_each_partition_s_top_n_and_fires_each_window_once():
    from streamsql.spark.stateful import window_rank as wr

    plan = _rank_plan(2)
    state, seq = wr.accept(plan, None, 0, _window_rows(("a", 1, 10), ("a", 5, 10), ("a", 3, 10), ("b", 2, 10),
                                                       ("a", 7, 20)), watermark=0)
    assert seq == 5 and sorted(state["v"]) == [2, 3, 5, 7]  # a's 1 in [0, 10) can never rise
    state, seq = wr.accept(plan, state, seq, _window_rows(("a", 4, 10), ("a", 9, 10), ("b", 6, 20)), watermark=0)
    assert wr.next_end(state, plan) == 10_000
    state, out = wr.fire(plan, state, 10_000)
    assert out.values.tolist() == [["+I", "a", 9, pd.Timestamp("1970-01-01 00:00:10"), 1],
                                   ["+I", "a", 5, pd.Timestamp("1970-01-01 00:00:10"), 2],
                                   ["+I", "b", 2, pd.Timestamp("1970-01-01 00:00:10"), 1]]
    state, seq = wr.accept(plan, state, seq, _window_rows(("a", 99, 10), ("a", 8, 20)), watermark=10_000)
    assert sorted(state["v"]) == [6, 7, 8]  # the row for the fired window is late: dropped
    state, out = wr.fire(plan, state, 19_999)
    assert out.empty and wr.next_end(state, plan) == 20_000
    state, out = wr.fire(plan, state, 20_000)
    assert state is None and [r[1:3] for r in out.values.tolist()] == [["a", 8], ["a", 7], ["b", 6]]


def test_each_batch_keeps_only_its_partitions_top_n_before_the_window_operator():
    from streamsql.spark.stateful import window_rank as wr

    plan = _rank_plan(2)
    batch = _window_rows(("a", 1, 10), ("a", 5, 10), ("b", 2, 10), ("a", 3, 10), ("a", 7, 20), ("a", 5, 10))
    (kept,) = wr.local_top(plan)(iter([batch]))
    # a's 1 and 3 in [0, 10) are below the batch's top 2 there (5 and 5): they can never rise
    assert kept[["k", "v", "__wend_ms"]].values.tolist() == [["a", 5, 10_000], ["b", 2, 10_000], ["a", 7, 20_000],
                                                             ["a", 5, 10_000]]
    assert list(kept.columns) == plan["columns"]


def test_window_rank_ties_go_to_the_earlier_row_and_the_rank_may_be_left_out():
    from streamsql.spark.stateful import window_rank as wr

    plan = _rank_plan(1, rank=None)
    state, seq = wr.accept(plan, None, 0, _window_rows(("a", 5, 10), ("a", 5, 10)), watermark=0)
    state, seq = wr.accept(plan, state, seq, _window_rows(("a", 5, 10)), watermark=0)
    _, out = wr.fire(plan, state, 10_000)
    assert list(out.columns) == ["__rowkind", "k", "v", "we"] and len(out) == 1


# -- slices (window_slices), without Spark -----------------------------------------------------------


def _sliced_plan(window: dict):
    from streamsql.spark.stateful import window_slices as ws

    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType()),
                           T.StructField(ws.SLICE, T.LongType())])
    plan, _ = build_plan(schema, ["k", ws.SLICE], [
        AggSpec("COUNT", None, output_name="n"), AggSpec("SUM", "v", output_name="s"),
        AggSpec("MAX", "v", output_name="top"), AggSpec("COUNT", "v", distinct=True, output_name="d")])
    plan.update(window=window, ttl_ms=None)
    return plan


@pytest.mark.parametrize("window", [
    {"kind": "CUMULATE", "SIZE": 12_000, "STEP": 4_000},
    {"kind": "HOP", "SIZE": 10_000, "SLIDE": 2_500, "OFFSET": 1_000},
    {"kind": "TUMBLE", "SIZE": 5_000},
])
def test_windows_combined_from_slices_equal_windows_counted_row_by_row(window):
    """Random rows in batches, the watermark rising between them (no row late); every fired
    window against its rows counted directly, and every window fired exactly once."""
    from streamsql.spark.stateful import window_slices as ws

    plan, rng = _sliced_plan(window), random.Random(hash(window["kind"]))
    size, step, offset = window["SIZE"], ws.width(window), window.get("OFFSET", 0)
    state, fired, seen, emitted, t = None, ws.NEVER, [], [], 0
    for _ in range(12):
        rows = [(rng.choice("ab"), rng.randint(0, 5), t + rng.randint(0, 3_000)) for _ in range(rng.randint(0, 8))]
        t += 2_000
        seen += rows
        batch = pd.DataFrame({"k": [r[0] for r in rows], "v": [r[1] for r in rows],
                              ws.SLICE: [ts - (ts - offset) % step + step for _, _, ts in rows]}, dtype=object)
        batch["v"], batch[ws.SLICE] = batch["v"].astype("int64"), batch[ws.SLICE].astype("int64")
        if len(batch):
            state, _ = accumulate.fold(plan, state, batch)
        watermark = t - 3_001  # below every later row
        state, out = ws.fire(plan, state, fired, watermark)
        fired = watermark
        emitted += [tuple(r) for r in out[["k", ws.START, ws.END, "n", "s", "top", "d"]].itertuples(index=False)]
    state, out = ws.fire(plan, state, fired, 1 << 60)  # the end of input
    emitted += [tuple(r) for r in out[["k", ws.START, ws.END, "n", "s", "top", "d"]].itertuples(index=False)]
    assert state is None
    expected = []
    for k in "ab":
        for end in range(offset - 2 * size, t + 2 * size, step):
            start = (end - 1 - offset) // size * size + offset if window["kind"] == "CUMULATE" else end - size
            if window["kind"] == "CUMULATE" and end - start > size:
                continue
            inside = [v for key, v, ts in seen if key == k and start <= ts < end]
            if inside:
                expected.append((k, start, end, len(inside), sum(inside), max(inside), len(set(inside))))
    assert sorted(emitted) == sorted(expected)


# -- processing-time windows -------------------------------------------------------------------------

PROCTIME_TUMBLE = ("SELECT url, COUNT(*) AS n, window_start FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(p),"
                   " INTERVAL '2' SECOND)) GROUP BY url, window_start, window_end")


def test_a_processing_time_window_over_unbounded_input_runs_on_the_window_operator():
    stage = stages(PROCTIME_TUMBLE + ";")
    assert isinstance(stage, WindowAggregateStage) and stage.proctime and stage.bounds
    assert runs_on_stateful_operators(build(PROCTIME_TUMBLE))
    # over bounded input it is one batch (the input ends before the clock passes its last window)
    bounded = ("CREATE TEMPORARY VIEW b AS SELECT *, PROCTIME() AS p FROM bid; SELECT COUNT(*), window_start FROM"
               " TABLE(TUMBLE(TABLE b, DESCRIPTOR(p), INTERVAL '2' SECOND)) GROUP BY window_start, window_end;")
    assert stages(bounded) is None
    # a processing-time window Top-N is not streamed yet
    assert stages("SELECT * FROM (SELECT url, window_start, ROW_NUMBER() OVER (PARTITION BY window_start,"
                  " window_end ORDER BY user_id DESC) AS rn FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(p),"
                  " INTERVAL '2' SECOND))) WHERE rn <= 1;") is None


def test_the_clock_fires_a_processing_time_window():
    """The pandas side: the operator measures windows against the micro-batch's clock."""
    class Clock:
        def getCurrentProcessingTimeInMs(self):
            return 5_000

        def getCurrentWatermarkInMs(self):
            return 1_000

    assert wa.clock({"proctime": True}, Clock()) == 5_000 and wa.clock({}, Clock()) == 1_000
    assert wa.time_mode({"proctime": True}) == "ProcessingTime" and wa.time_mode({}) == "EventTime"


@pytest.mark.spark
def test_a_continuous_processing_time_tumble_fires_as_the_clock_passes(tmp_path):
    """A continuous job over a watched directory, counting per 2-second processing-time
    window: each file's window fires while the job runs, before the next file is written,
    without a drain (no watermark moves it: the clock does); every row is counted once, in a
    window aligned to 2 s, a window per file."""
    from tests.jobs import finish, lines, reap, start

    source, sink = tmp_path / "in", tmp_path / "out"
    source.mkdir()
    script = write(tmp_path / "job.sql", f"""
CREATE TABLE src (url STRING, n INT, p AS PROCTIME())
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '500 ms');
CREATE TABLE out (url STRING, c BIGINT, total BIGINT, ws TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
SET 'execution.checkpointing.interval' = '500 ms';
INSERT INTO out SELECT url, COUNT(*), SUM(n), window_start FROM TABLE(TUMBLE(TABLE src, DESCRIPTOR(p),
  INTERVAL '2' SECOND)) GROUP BY url, window_start, window_end;
""")
    job = start(tmp_path, script)
    try:
        for part in range(3):  # each file after the last one's window fired: the clock alone fired it
            write(source / f"part-{part}.csv", "".join(f"{'ab'[i % 2]},{i}\n" for i in range(part * 10, part * 10 + 10)))
            assert wait_for(lambda: sum(int(line.split(",")[1]) for line in lines(sink)) == 10 * (part + 1)
                            or job.poll() is not None, 180), lines(sink)
            assert job.poll() is None, job.stderr.read()
        written = lines(sink)
        assert sum(int(line.split(",")[2]) for line in written) == sum(range(30))
        assert finish(job, signal.SIGTERM) == 0
    finally:
        reap(job)
    assert sum(int(line.split(",")[1]) for line in written) == 30
    starts = [datetime.fromisoformat(line.split(",")[3]) for line in written]
    assert all(s.second % 2 == 0 and s.microsecond == 0 for s in starts), starts  # aligned to 2 s
    assert len({(line.split(",")[0], line.split(",")[3]) for line in written}) == len(written)  # each window once
    assert len(set(starts)) == 3  # a window per file
