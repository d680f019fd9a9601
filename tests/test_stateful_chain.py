"""Queries cut into stages around the stateful operators (spark.stateful.chain), and regular
joins that keep every row (spark.regular_joins): the generated Spark SQL without a JVM,
then streamed for real (bounded input run micro-batch by micro-batch) against batch mode."""

from __future__ import annotations

import csv
import io
import os
import random
import time

import pytest

from streamsql.runtime.sources import is_bounded
from streamsql.spark.dialect import to_spark_sql
from streamsql.spark.regular_joins import hide_join_times
from streamsql.spark.stateful.stages import AggregateStage, CalcStage, OverStage, RankStage, inserts_only
from tests.conftest import write
from tests.operator_plans import stages, steps
from tests.streamed import BATCH, STREAMED, streamed_and_batch


# -- the cut, without Spark ----------------------------------------------------------------------


def test_order_by_limit_is_a_top_n_of_the_whole_input():
    """Flink's SortLimit: one partition, the ORDER BY's keys (a key that is no output is a
    hidden column); its Limit: no order, so ties go to the earlier row."""
    stage = stages("SELECT auction FROM bid WHERE price > 3 ORDER BY price DESC, auction LIMIT 5;")
    assert isinstance(stage, RankStage) and (stage.partition, stage.limit, stage.rank_column) == ([], 5, None)
    assert stage.order == [("__o0", True), ("auction", False)] and stage.data == ["auction", "__o0"]
    assert to_spark_sql(stage.input_query) == (
        "SELECT `__sorted`.`auction`, `__sorted`.`__o0` FROM (SELECT `bid`.`auction` AS `auction`, `bid`.`price` AS"
        " `__o0` FROM `bid` AS `bid` WHERE `bid`.`price` > 3) AS `__sorted`")
    assert to_spark_sql(stage.output_query) == ("SELECT `__ranked`.`__rowkind`, `__ranked`.`auction` AS `auction`"
                                                " FROM `__ranked` AS `__ranked`")
    stage = stages("SELECT auction, COUNT(*) AS n FROM bid GROUP BY auction ORDER BY n DESC LIMIT 2;")
    assert stage.order == [("n", True)] and isinstance(stage.inputs[0][1], AggregateStage)
    stage = stages("SELECT auction FROM bid LIMIT 3;")
    assert (stage.order, stage.limit) == ([], 3)
    # a position; NULLs ordered otherwise than the Rank operator's default are refused
    assert stages("SELECT auction, price FROM bid ORDER BY 2 DESC LIMIT 3;").order == [("price", True)]
    assert stages("SELECT auction, price FROM bid ORDER BY price NULLS LAST LIMIT 3;") is None
    # an OFFSET: not a Top-N from the first row
    assert stages("SELECT auction FROM bid ORDER BY price LIMIT 3 OFFSET 1;") is None


def test_order_by_a_rowtime_is_an_over_of_the_current_row():
    """Flink's TemporalSort: rows leave as the watermark passes them, in time order."""
    stage = stages("SELECT auction, price, ts FROM bid WHERE price > 3 ORDER BY ts;")
    assert isinstance(stage, CalcStage)
    (_, over), = stage.inputs
    assert isinstance(over, OverStage) and (over.partition, over.unit, over.preceding, over.rowtime) == (
        [], "ROWS", 0, True)
    assert to_spark_sql(stage.query).startswith("SELECT `__ordered`.`__rowkind`, `__ordered`.`auction` AS `auction`")
    # further keys order rows of equal time: output columns, each with its direction and NULL order
    (_, over), = stages("SELECT auction, price, ts FROM bid ORDER BY ts, price DESC, auction NULLS LAST;").inputs
    assert over.ties == [("__c1", True, False), ("__c2", False, False)]
    # ... and a key that is no output column, computed hidden (not under DISTINCT: it would count)
    stage = stages("SELECT auction, ts FROM bid ORDER BY ts, price * 2 DESC;")
    (_, over), = stage.inputs
    assert over.ties == [("__c1", True, False)] and "`price` * 2 AS `__o1`" in to_spark_sql(over.input_query)
    assert [p.alias_or_name for p in stage.query.expressions] == ["__rowkind", "auction", "ts"]
    for sql in ("SELECT auction, ts FROM bid ORDER BY ts DESC;", "SELECT auction, ts FROM bid ORDER BY price;",
                "SELECT DISTINCT auction, ts FROM bid ORDER BY ts, price;"):
        assert stages(sql) is None, sql
    # COLLECT: ARRAY_AGG IGNORE NULLS, an empty array (not NULL) for no values
    (collect,) = stages("SELECT auction, COLLECT(price) FROM bid GROUP BY auction;").split.calls
    assert (collect.function, collect.ignore_nulls, collect.collect) == ("ARRAY_AGG", True, True)
    assert isinstance(stages("SELECT auction, FIRST_VALUE(DISTINCT price) FROM bid GROUP BY auction;"), AggregateStage)
    # LISTAGG over inserts, its separator a string literal
    stage = stages("SELECT auction, LISTAGG(CAST(price AS STRING)), LISTAGG(CAST(bidder AS STRING), ';') FROM bid"
                   " GROUP BY auction;")
    assert [(c.function, c.separator) for c in stage.split.calls] == [("LISTAGG", ","), ("LISTAGG", ";")]
    assert stages("SELECT auction, LISTAGG(CAST(price AS STRING), CAST(bidder AS STRING)) FROM bid GROUP BY auction;") \
        is None
    # ... and DISTINCT, its separator beside the value
    stage = stages("SELECT auction, LISTAGG(DISTINCT CAST(price AS STRING), '|') FROM bid GROUP BY auction;")
    assert [(c.function, c.distinct, c.separator) for c in stage.split.calls] == [("LISTAGG", True, "|")]
    # over another GROUP BY's changelog: Flink's LISTAGG with retraction (stateful/sequences.py)
    assert isinstance(stages("SELECT n, LISTAGG(CAST(top AS STRING)) FROM (SELECT auction, COUNT(*) AS n, MAX(price)"
                             " AS top FROM bid GROUP BY auction) GROUP BY n;"), AggregateStage)
    # ARRAY_AGG over inserts, NULLs kept or ignored, DISTINCT too
    stage = stages("SELECT auction, ARRAY_AGG(price), ARRAY_AGG(bidder) IGNORE NULLS,"
                   " CARDINALITY(ARRAY_AGG(price) RESPECT NULLS) FROM bid GROUP BY auction;")
    assert [(c.function, c.ignore_nulls) for c in stage.split.calls] == [("ARRAY_AGG", False), ("ARRAY_AGG", True),
                                                                        ("ARRAY_AGG", False)]
    stage = stages("SELECT auction, ARRAY_AGG(DISTINCT price) IGNORE NULLS FROM bid GROUP BY auction;")
    assert [(c.function, c.distinct, c.ignore_nulls) for c in stage.split.calls] == [("ARRAY_AGG", True, True)]
    # a FROM subquery whose SQL only Flink's dialect writes (JSON_VALUE .. DEFAULT .. ON EMPTY)
    assert isinstance(stages("SELECT v, COUNT(*) AS n FROM (SELECT JSON_VALUE(channel, '$.a' RETURNING INT DEFAULT 1"
                             " ON EMPTY) AS v FROM bid) GROUP BY v;"), AggregateStage)
    # JSON_ARRAYAGG over inserts: LISTAGG of its values' JSON (NULLs absent, or 'null'), in brackets
    stage = stages("SELECT auction, JSON_ARRAYAGG(channel NULL ON NULL) FILTER (WHERE price > 2) FROM bid"
                   " GROUP BY auction;")
    assert [(c.function, c.json_array) for c in stage.split.calls] == [("LISTAGG", True)]
    assert "COALESCE(NULLIF(REGEXP_EXTRACT(TO_JSON(NAMED_STRUCT('v', `bid`.`channel`))" in to_spark_sql(
        stage.split.input_query)
    assert "CONCAT('[', COALESCE(`__aggregated`.`__a0`, ''), ']') AS `EXPR$1`" in to_spark_sql(stage.split.output_query)
    # STDDEV / VAR, over a changelog too, and DISTINCT
    stage = stages("SELECT n, STDDEV_POP(top), VAR_SAMP(top) FILTER (WHERE n > 1) FROM (SELECT auction, COUNT(*)"
                   " AS n, MAX(price) AS top FROM bid GROUP BY auction) GROUP BY n;")
    assert [c.function for c in stage.split.calls] == ["STDDEV_POP", "VAR_SAMP"]
    stage = stages("SELECT auction, VAR_POP(DISTINCT price) FROM bid GROUP BY auction;")
    assert [(c.function, c.distinct) for c in stage.split.calls] == [("VAR_POP", True)]
    # JSON_OBJECTAGG: each row's key, NUL, and its member as JSON
    stage = stages("SELECT auction, JSON_OBJECTAGG(KEY channel VALUE price ABSENT ON NULL) FROM bid GROUP BY auction;")
    assert [c.function for c in stage.split.calls] == ["JSON_OBJECTAGG"]
    assert "CONCAT(CAST(`bid`.`channel` AS STRING), '\\0', " in to_spark_sql(stage.split.input_query)
    # ... and in a window aggregate, over each window's rows (not slices: test_window_stream)
    stage = stages("SELECT window_start, JSON_OBJECTAGG(KEY channel VALUE price) FROM TABLE(TUMBLE(TABLE bid,"
                   " DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;")
    assert [c.function for c in stage.split.calls] == ["JSON_OBJECTAGG"] and stage.bounds == {}
    # an OVER's own window keeps one ORDER BY key, as Flink's
    assert stages("SELECT SUM(price) OVER (ORDER BY ts, price ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM bid;") \
        is None


def test_union_of_changelogs_merges_them():
    """UNION ALL: a stage's branch is read from its view, a native branch is inserts; UNION
    is a GroupAggregate by every column over that, with no aggregate."""
    stage = stages("SELECT auction, COUNT(*) AS n FROM bid GROUP BY auction UNION ALL SELECT id, seller FROM auction"
                   " UNION ALL SELECT auction, price FROM bid;")
    assert isinstance(stage, CalcStage) and [type(s) for _, s in stage.inputs] == [AggregateStage]
    assert to_spark_sql(stage.query) == (
        f"SELECT * FROM `{stage.inputs[0][0]}` UNION ALL SELECT '+I' AS `__rowkind`, * FROM (SELECT `auction`.`id` AS"
        " `id`, `auction`.`seller` AS `seller` FROM `auction` AS `auction`) AS `__branch` UNION ALL SELECT '+I' AS"
        " `__rowkind`, * FROM (SELECT `bid`.`auction` AS `auction`, `bid`.`price` AS `price` FROM `bid` AS `bid`) AS"
        " `__branch`")
    stage = stages("SELECT auction, price FROM bid UNION SELECT id, seller FROM auction;")
    assert isinstance(stage, AggregateStage) and stage.split.keys == ["__k0", "__k1"] and not stage.split.calls
    assert " UNION ALL " in to_spark_sql(stage.split.input_query)
    assert to_spark_sql(stage.split.output_query) == ("SELECT `__aggregated`.`__rowkind`, `__aggregated`.`__k0` AS"
                                                      " `auction`, `__aggregated`.`__k1` AS `price` FROM `__aggregated`")
    stage = stages("SELECT auction FROM bid EXCEPT SELECT id FROM auction;")
    assert isinstance(stage, AggregateStage) and [c.function for c in stage.split.calls] == ["SUM", "SUM"]
    assert "HAVING" not in to_spark_sql(stage.split.output_query)
    assert to_spark_sql(stage.split.output_query).endswith(
        "FROM `__aggregated` WHERE `__aggregated`.`__a0` > 0 AND `__aggregated`.`__a1` = 0")
    # ALL: every group with its number of copies, each changelog row repeated that many times
    stage = stages("SELECT auction FROM bid INTERSECT ALL SELECT id FROM auction;")
    assert isinstance(stage, CalcStage) and isinstance(stage.inputs[0][1], AggregateStage)
    assert to_spark_sql(stage.query) == (
        f"SELECT `__rowkind`, `auction` FROM (SELECT *, EXPLODE(ARRAY_REPEAT(0, CAST(`__copies` AS INT))) AS"
        f" `__copy` FROM `{stage.inputs[0][0]}`) AS `__copies`")
    assert to_spark_sql(stage.inputs[0][1].split.output_query).endswith(
        "LEAST(`__aggregated`.`__a0`, `__aggregated`.`__a1`) AS `__copies` FROM `__aggregated`")
    stage = stages("SELECT auction FROM bid EXCEPT ALL SELECT id FROM auction;")
    assert "GREATEST(`__aggregated`.`__a0` - `__aggregated`.`__a1`, 0) AS `__copies`" in to_spark_sql(
        stage.inputs[0][1].split.output_query)


def test_grouping_sets_are_one_group_aggregate_per_set():
    stage = stages("SELECT auction, channel, GROUPING(auction) AS ga, GROUPING_ID(auction, channel) AS gid,"
                   " SUM(price) AS total FROM bid GROUP BY CUBE (auction, channel);")
    assert isinstance(stage, CalcStage) and [s.split.keys for _, s in stage.inputs] == [
        ["__k0", "__k1"], ["__k0"], ["__k0"], []]
    outputs = [to_spark_sql(s.split.output_query) for _, s in stage.inputs]
    assert ("CAST(NULL AS BIGINT) AS `auction`, `__aggregated`.`__k0` AS `channel`, CAST(1 AS BIGINT) AS `ga`,"
            " CAST(2 AS BIGINT) AS `gid`") in outputs[2]
    assert "CAST(NULL AS STRING) AS `channel`, CAST(1 AS BIGINT) AS `ga`, CAST(3 AS BIGINT) AS `gid`" in outputs[3]
    stage = stages("SELECT auction, COUNT(*) AS n FROM bid GROUP BY channel, ROLLUP (auction, bidder);")
    assert [len(s.split.keys) for _, s in stage.inputs] == [3, 2, 1]
    # a FILTER reads the rows as they are; a kept key is read as it is, even when a
    # left-out key is part of it
    stage = stages("SELECT auction + bidder AS ab, auction, COUNT(*) FILTER (WHERE bidder > 0) AS n FROM bid"
                   " GROUP BY GROUPING SETS ((auction + bidder, auction), (auction));")
    full, coarse = (to_spark_sql(s.split.output_query) for _, s in stage.inputs)
    assert "`__aggregated`.`__k0` AS `ab`" in full and "CAST(NULL AS BIGINT) AS `ab`" in coarse
    assert "`bid`.`bidder` > 0 AS `__f0`" in to_spark_sql(stage.inputs[1][1].split.input_query)
    # the empty set without an aggregate would be one row of NULLs: refused
    assert stages("SELECT auction FROM bid GROUP BY ROLLUP (auction);") is None


def test_top_n_with_its_rank_number():
    stage = stages("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, ts)"
                   " AS rn FROM bid) WHERE rn <= 3 AND price > 5;")
    assert isinstance(stage, RankStage) and not stage.inputs
    assert (stage.partition, stage.order, stage.limit, stage.rank_column) == (
        ["auction"], [("price", True), ("ts", False)], 3, "rn")
    assert not stage.later_wins
    assert "ROW_NUMBER" not in to_spark_sql(stage.input_query).upper()
    output = to_spark_sql(stage.output_query)
    assert output.startswith("SELECT `_0`.`__rowkind`") and "`_0`.`price` > 5" in output and "`rn`" in output


def test_rank_key_that_is_an_expression_is_computed_once():
    stage = stages("SELECT auction, price FROM (SELECT auction, price, ROW_NUMBER() OVER"
                   " (PARTITION BY auction % 10 ORDER BY price * 2 DESC) AS rn FROM bid) WHERE rn = 1;")
    assert stage.partition == ["__p0"] and stage.order == [("__o0", True)] and stage.rank_column is None
    sql = to_spark_sql(stage.input_query)
    assert "AS `__p0`" in sql and "AS `__o0`" in sql


@pytest.mark.parametrize("order, later_wins, ordered", [
    ("ts DESC", True, [("ts", True)]),   # keep the last row on event time: a later tie wins
    ("ts ASC", False, [("ts", False)]),  # keep the first
])
def test_deduplication_on_event_time(order, later_wins, ordered):
    stage = stages(f"SELECT auction, bidder, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction, bidder"
                   f" ORDER BY {order}) AS rn FROM bid) WHERE rn <= 1;")
    assert (stage.limit, stage.later_wins, stage.order, stage.partition) == (1, later_wins, ordered, ["auction", "bidder"])


def test_deduplication_on_processing_time_orders_by_arrival():
    stage = stages("SELECT user_id, url FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY user_id ORDER BY p DESC)"
                   " AS rn FROM clicks) WHERE rn = 1;")
    assert stage.order == [] and stage.later_wins


def test_aggregate_of_an_aggregate_reads_its_changelog():
    stage = stages("SELECT c, COUNT(*) AS auctions FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction)"
                   " GROUP BY c;")
    assert isinstance(stage, AggregateStage)
    (view, inner), = stage.inputs
    assert isinstance(inner, AggregateStage) and view.startswith("__stage_")
    sql = to_spark_sql(stage.split.input_query)
    assert "`__rowkind`" in sql and f"FROM `{view}`" in sql


def test_top_n_of_an_aggregate_and_a_filter_over_a_changelog():
    stage = stages("SELECT auction, c FROM (SELECT auction, c, ROW_NUMBER() OVER (ORDER BY c DESC) AS rn FROM"
                   " (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction)) WHERE rn <= 2;")
    assert isinstance(stage, RankStage) and stage.partition == [] and isinstance(stage.inputs[0][1], AggregateStage)
    assert "`__rowkind`" in to_spark_sql(stage.input_query)
    calc = stages("SELECT auction FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) WHERE c > 2;")
    assert isinstance(calc, CalcStage) and to_spark_sql(calc.query).startswith("SELECT `_0`.`__rowkind`")


@pytest.mark.parametrize("sql", [
    # a join of a changelog without a key equality
    "SELECT a.auction, a.c, u.name FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) a"
    " JOIN users u ON a.auction > u.id;",
    # OVER over a changelog (Flink's OverAggregate takes insert-only input)
    "SELECT a, SUM(c) OVER (PARTITION BY a ORDER BY a) FROM (SELECT auction AS a, COUNT(*) AS c FROM bid"
    " GROUP BY auction);",
])
def test_shapes_not_cut(sql):
    assert stages(sql) is None


def test_regular_join_reads_its_inputs_without_event_time():
    plan = steps("SELECT a.id, b.price, b.ts FROM auction a, bid b WHERE a.id = b.auction"
                 " AND b.ts BETWEEN a.ts AND a.expires;")[-1].plan
    sql = to_spark_sql(hide_join_times(plan.query, plan, is_bounded))
    assert "TIMESTAMP_MICROS(UNIX_MICROS(`ts`)) AS `ts` FROM `bid`" in sql
    assert "TIMESTAMP_MICROS(UNIX_MICROS(`b`.`ts`)) AS `ts`" in sql  # the output's ts is no time attribute
    assert plan.query.sql() == steps("SELECT a.id, b.price, b.ts FROM auction a, bid b WHERE a.id = b.auction"
                                     " AND b.ts BETWEEN a.ts AND a.expires;")[-1].plan.query.sql()  # a copy


def test_interval_join_keeps_its_time_attributes():
    plan = steps("SELECT a.id, b.price FROM auction a, bid b WHERE a.id = b.auction"
                 " AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '10' SECOND;")[-1].plan
    assert "UNIX_MICROS" not in to_spark_sql(hide_join_times(plan.query, plan, is_bounded))


# -- streamed for real ---------------------------------------------------------------------------


QUERIES = {
    "top3": "SELECT * FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM t)"
            " WHERE rn <= 3",
    "last": "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM t)"
            " WHERE rn = 1",
    "nested": "SELECT n, COUNT(*) AS ks, MAX(top) AS top FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top FROM t"
              " GROUP BY k) GROUP BY n",
    "joined": "SELECT d.name, MAX(t.v) AS top, COUNT(*) AS n FROM t, d WHERE t.k = d.k AND t.ts >= d.since"
              " GROUP BY d.name",
    "rank_of_counts": "SELECT k, n FROM (SELECT k, n, ROW_NUMBER() OVER (ORDER BY n DESC, k) AS rn FROM"
                      " (SELECT k, COUNT(*) AS n FROM t GROUP BY k)) WHERE rn <= 2",
    # SELECT DISTINCT and GROUP BY without aggregates: a key leaves when its last row is retracted
    "distinct_of_counts": "SELECT DISTINCT n FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k)",
    "bands_of_tops": "SELECT top / 200 AS band FROM (SELECT k, MAX(v) AS top FROM t GROUP BY k) GROUP BY top / 200",
    # STDDEV / VAR over a changelog: integer results truncate; a DOUBLE's rounded to compare
    "spread_of_tops": "SELECT top / 300 AS band, STDDEV_POP(top) AS sp, VAR_SAMP(top) AS vs, ROUND(STDDEV_SAMP("
                      "CAST(top AS DOUBLE)), 6) AS ss, COUNT(*) AS n FROM (SELECT k, MAX(v) AS top FROM t GROUP BY k)"
                      " GROUP BY top / 300",
    # ... and DISTINCT: over each key's distinct values, kept as value -> count
    "distinct_spread_of_tops": "SELECT n, STDDEV_POP(DISTINCT top / 100) AS sp, VAR_SAMP(DISTINCT top / 100) AS vs,"
                               " COUNT(*) AS c FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top FROM t GROUP BY k) GROUP BY n",
    # LISTAGG / ARRAY_AGG (DISTINCT) over a changelog: each value once (their order: test_stateful_aggregate)
    "distinct_lists_of_tops": "SELECT n, CARDINALITY(ARRAY_AGG(DISTINCT top / 200)) AS bands, CHAR_LENGTH(LISTAGG("
                              "DISTINCT k)) AS chars FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top FROM t GROUP BY k)"
                              " GROUP BY n",
    # COLLECT over a changelog (an ARRAY here): the live values, NULLs left out, each once
    # under DISTINCT, an empty one when a FILTER takes none
    "collect_of_tops": "SELECT n, ARRAY_SORT(COLLECT(top / 200)) AS bands, ARRAY_SORT(COLLECT(DISTINCT top / 200)) AS"
                       " once, ARRAY_SORT(COLLECT(k) FILTER (WHERE top > 800)) AS high, CARDINALITY(COLLECT(CASE WHEN"
                       " top > 500 THEN k END)) AS n500 FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top FROM t GROUP BY k)"
                       " GROUP BY n",
    # JSON_OBJECTAGG over a changelog: the live members ordered by key (NULL and ABSENT ON NULL)
    "json_object_of_tops": "SELECT n, JSON_OBJECTAGG(KEY k VALUE top) AS o, JSON_OBJECTAGG(KEY k VALUE CASE WHEN"
                           " top > 500 THEN top END ABSENT ON NULL) AS a FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top"
                           " FROM t GROUP BY k) GROUP BY n",
    # ORDER BY .. LIMIT: a Top-N of the whole input (Flink's SortLimit), by an output, a
    # hidden key, an aggregate
    "order_limit": "SELECT k, v FROM t ORDER BY v DESC LIMIT 3",
    "order_hidden_limit": "SELECT k FROM t ORDER BY v LIMIT 4",
    "aggregate_order_limit": "SELECT k, MAX(v) AS top FROM t GROUP BY k ORDER BY MAX(v) DESC LIMIT 2",
    # UNION ALL merges changelogs (a branch of inserts among them); UNION is distinct over it
    "union_all_of_changelogs": "SELECT k, COUNT(*) AS n FROM t GROUP BY k UNION ALL SELECT k, 1 FROM d",
    "union_of_tops": "SELECT k, MAX(v) / 300 AS band FROM t GROUP BY k UNION SELECT k, 1 FROM d",
    # INTERSECT / EXCEPT: each side's rows counted per row of the union
    "except": "SELECT k FROM t EXCEPT SELECT k FROM d",
    "intersect_of_changelog": "SELECT k, COUNT(*) / 3 AS c FROM t GROUP BY k INTERSECT SELECT k, 1 FROM d",
    # ALL: rows repeated by their copies (min of both sides' counts; the left's less the right's)
    "except_all": "SELECT k FROM t EXCEPT ALL SELECT k FROM d",
    "intersect_all": "SELECT k, v / 400 AS band FROM t INTERSECT ALL SELECT k, v / 300 FROM t WHERE v > 200",
    # GROUPING SETS, ROLLUP, CUBE: one GROUP BY per set, their changelogs merged
    "rollup": "SELECT k, v / 500 AS band, COUNT(*) AS n, MAX(v) AS top FROM t GROUP BY ROLLUP (k, v / 500)",
    "cube_with_grouping_ids": "SELECT k, SECOND(ts) / 20 AS part, GROUPING(k) AS gk, GROUPING_ID(k, SECOND(ts) / 20)"
                              " AS gid, SUM(v) AS total FROM t GROUP BY CUBE (k, SECOND(ts) / 20)",
    "grouping_sets": "SELECT k, v / 500 AS band, COUNT(*) AS n FROM t GROUP BY GROUPING SETS ((k), (v / 500), ())",
}


def test_streamed_stages_end_with_the_batch_result(run, tmp_path):
    rng = random.Random(3)
    folder, dims = tmp_path / "parts", tmp_path / "dims"
    values = rng.sample(range(1000), 40)  # no ties: batch mode's ROW_NUMBER orders ties at random
    lines = []
    for i in range(4):  # Spark's file stream reads files by modification time
        rows = "".join(f"k{rng.randint(0, 5)},{values[i * 10 + j]},2026-01-01 00:00:{i * 10 + j:02d}\n"
                       for j in range(10))
        lines += [line.split(",") for line in rows.splitlines()]
        os.utime(write(folder / f"part-{i}.csv", rows), (time.time() - 100 + i,) * 2)
    for i, text in enumerate(["k0,zero,2026-01-01 00:00:00\nk1,one,2026-01-01 00:00:15\n",
                              "k2,two,2026-01-01 00:00:20\nk3,one,2026-01-01 00:00:00\n"]):
        os.utime(write(dims / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    ddl = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1'"
           f" SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');"
           f"CREATE TEMPORARY TABLE d (k STRING, name STRING, since TIMESTAMP(3), WATERMARK FOR since AS since)"
           f" WITH ('connector' = 'filesystem', 'path' = '{dims}', 'format' = 'csv');")
    run.output(ddl)
    for name, query in QUERIES.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, name
        assert ops["-U"] + ops["-D"] > 0, f"{name}: no retractions, so nothing was computed incrementally"
    # DISTINCT over inserts: each value once, never updated (Flink's GroupAggregate emits a
    # key's row when it first comes, and nothing while its row count only grows)
    final, ops, expected = streamed_and_batch(run, "SELECT DISTINCT k, v / 250 AS band FROM t")
    assert final == expected and ops["+I"] == len(expected) and ops["-U"] + ops["+U"] + ops["-D"] == 0
    rows = sorted(tuple(r) for r in list(csv.reader(io.StringIO(run.output(BATCH + "SELECT k, v, ts FROM t"))))[1:])
    run.output("RESET 'execution.runtime-mode';")
    # ORDER BY a rowtime (Flink's TemporalSort): every row once, in time order
    text = run.output(STREAMED + "SELECT k, v, ts FROM t ORDER BY ts")
    streamed = [row for row in csv.reader(io.StringIO(text))][1:]
    assert {row[0] for row in streamed} == {"+I"} and [r[3] for r in streamed] == sorted(r[3] for r in streamed)
    assert sorted(tuple(r[1:]) for r in streamed) == rows and len(rows) == 40
    # ... and rows of equal time by the further keys
    write(tmp_path / "ties" / "part-0.csv", "a,1,2026-01-01 00:00:01\nb,7,2026-01-01 00:00:01\nc,,2026-01-01 00:00:00\n"
                                             "d,3,2026-01-01 00:00:01\ne,7,2026-01-01 00:00:01\n")
    run.output(f"CREATE TEMPORARY TABLE ties (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH"
               f" ('connector' = 'filesystem', 'path' = '{tmp_path / 'ties'}', 'format' = 'csv');")
    text = run.output(STREAMED + "SELECT k, v, ts FROM ties ORDER BY ts, v DESC, k DESC")
    assert [row[1] for row in csv.reader(io.StringIO(text))][1:] == ["c", "e", "b", "d", "a"]
    text = run.output(STREAMED + "SELECT k, ts FROM ties ORDER BY ts, v DESC, UPPER(k) DESC")  # keys not output
    assert [row[1:] for row in csv.reader(io.StringIO(text))][:3] == [["k", "ts"], ["c", "2026-01-01 00:00:00.000"],
                                                                     ["e", "2026-01-01 00:00:01.000"]]
    assert [row[1] for row in csv.reader(io.StringIO(text))][1:] == ["c", "e", "b", "d", "a"]
    # FIRST_VALUE / LAST_VALUE: in the order rows come, file by file (batch mode's order is Spark's)
    # ... LISTAGG, their values joined in that order, and ARRAY_AGG, their array
    final, ops, _ = streamed_and_batch(run, "SELECT k, FIRST_VALUE(v) AS f, LAST_VALUE(v) AS l,"
                                            " LISTAGG(CAST(v AS STRING), '|') AS vs, CARDINALITY(ARRAY_AGG(v)) AS n,"
                                            " ARRAY_AGG(v)[2] AS second, JSON_ARRAYAGG(v) AS js FROM t GROUP BY k")
    firsts, lasts, joined, arrays = {}, {}, {}, {}
    for k, v, _ in lines:
        firsts.setdefault(k, v)
        lasts[k] = v
        joined[k] = f"{joined[k]}|{v}" if k in joined else v
        arrays.setdefault(k, []).append(v)
    assert final == sorted((k, firsts[k], lasts[k], joined[k], str(len(arrays[k])), (arrays[k] + [""])[1],
                            f"[{','.join(arrays[k])}]") for k in firsts) and ops["-U"] > 0
    # LIMIT without ORDER BY: the first rows to come, never changed (Flink's Limit)
    final, ops, _ = streamed_and_batch(run, "SELECT k, v, ts FROM t WHERE v > 100 LIMIT 5")
    assert len(final) == 5 and set(final) <= set(rows) and ops["+I"] == 5 and sum(ops.values()) == 5
    assert all(int(v) > 100 for _, v, _ in final)


def test_bounded_input_into_a_blackhole_streams_when_asked(tmp_path):
    """'execution.bounded-input' = 'stream' streams into a blackhole too (the benchmark's
    shape); by default bounded input into a blackhole is one bounded computation."""
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.execution import streams

    data = write(tmp_path / "t.csv", "a,1\n")
    engine = Engine(Catalog(tmp_path / "catalog"), base_dir=tmp_path, log=lambda message: None)
    step = engine.plan_script(
        f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{data}',"
        " 'format' = 'csv'); CREATE TEMPORARY TABLE sink (k STRING, n BIGINT) WITH ('connector' = 'blackhole');"
        " INSERT INTO sink SELECT k, COUNT(*) FROM t GROUP BY k;")[-1]
    assert not streams(engine, step)
    engine.settings.set("execution.bounded-input", "stream")
    assert streams(engine, step)


def test_stages_belong_to_their_plan_not_to_a_plan_reusing_its_id(tmp_path):
    """Stages are remembered per plan; a later plan that Python gives the freed plan's id
    (two statements of one script) must not be built with the first one's stages."""
    from streamsql.catalog import Catalog
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.execution import stateful_stages

    data = write(tmp_path / "t.csv", "a,1\n")
    engine = Engine(Catalog(tmp_path / "catalog"), base_dir=tmp_path, log=lambda message: None)
    engine.settings.set("execution.bounded-input", "stream")
    first, second = engine.plan_script(
        f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{data}',"
        " 'format' = 'csv'); SELECT k, COUNT(*) FROM t GROUP BY k; SELECT k, v FROM t;")[-2:]
    stages = stateful_stages(engine, first, True)
    assert stages is not None and engine.stages_of(first.plan) is stages
    engine._stages[id(second.plan)] = engine._stages.pop(id(first.plan))  # as if the id were reused
    assert engine.stages_of(second.plan) is None


def test_a_top_n_by_window_over_a_tvf_joined_with_a_table_is_a_regular_top_n():
    """A regular join drops the window's properties (Flink plans a Rank, not a WindowRank):
    the TVF's rows, joined by Spark, feed an updating Top-N."""
    stage = stages("SELECT * FROM (SELECT w.*, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY"
                   " price DESC) AS rn FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '1' SECOND)) w JOIN"
                   " users u ON w.bidder = u.id) WHERE rn <= 2;")
    assert isinstance(stage, RankStage) and stage.window_end is None and not stage.per_window
    assert stage.partition == ["window_start", "window_end"] and not inserts_only(stage)


def test_bigints_past_2_53_stay_exact_beside_nulls_in_every_stateful_operator(run, tmp_path):
    """An integer column with a NULL used to reach the operators' pandas as float64 (Spark's
    worker), so 2^60 + 1 came out as 2^60; packed, they arrive exact (spark.stateful.transport)."""
    big = 2 ** 60
    lines = [f"{big + k},{'' if i % 3 == 0 else big + 2 * i + 1},2026-01-01 00:00:{i:02d}"
             for i in range(24) for k in [i % 4]]
    for part in range(3):
        os.utime(write(tmp_path / "big" / f"part-{part}.csv", "\n".join(lines[part * 8:part * 8 + 8]) + "\n"),
                 (time.time() - 100 + part,) * 2)
    write(tmp_path / "names" / "part-0.csv", f"{big},zero\n{big + 1},one\n")
    run.output(f"CREATE TEMPORARY TABLE big (k BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH"
               f" ('connector' = 'filesystem', 'path' = '{tmp_path / 'big'}', 'format' = 'csv');"
               f"CREATE TEMPORARY TABLE names (k BIGINT, name STRING) WITH"
               f" ('connector' = 'filesystem', 'path' = '{tmp_path / 'names'}', 'format' = 'csv');")
    for query in ["SELECT k, MAX(v) AS top, MIN(v) AS low, SUM(v - k) AS s FROM big GROUP BY k",
                  "SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn"
                  " FROM big) WHERE rn = 1",
                  "SELECT b.v, n.k AS nk, n.name FROM big AS b LEFT JOIN names AS n ON b.k = n.k",
                  "SELECT k, v, MAX(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"
                  " AS top FROM big"]:
        final, _, expected = streamed_and_batch(run, query)
        assert final == expected, query
        assert any(str(big + 1) in row or any(v.startswith(str(big)[:15]) and int(v) % 2 for v in row if v.isdigit())
                   for row in final), query
