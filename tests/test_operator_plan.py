"""The operator plan (plan.operators, plan.logical): shapes, changelog modes, keys, time
attributes, state, and the plan-time changelog checks. No Spark."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import ValidationError
from streamsql.plan.changelog_checks import accepted_kinds, check_consumption, check_sink, consumption_issues
from streamsql.plan.logical import build_operator_plan
from streamsql.plan.objects import ObjectName, TableDef
from streamsql.plan.operator_explain import explain_operators
from streamsql.plan.planner import InsertStep, Planner, QueryStep
from streamsql.runtime.sources import is_bounded
from tests.operator_plans import DDL, SOURCES, below, build, kinds, ops, steps

ROOT = Path(__file__).resolve().parent.parent
CONFORMANCE = ROOT.parent / "shared" / "conformance"


# -- stateless -----------------------------------------------------------------------

def test_scan_and_calc_are_insert_only_and_keep_time_attributes():
    root = build("SELECT auction, price * 2 AS p2, ts AS t FROM bid WHERE price > 10")
    assert isinstance(root, ops.Calc) and isinstance(root.inputs[0], ops.Scan)
    assert root.mode == ops.INSERT_ONLY and root.state == "none"
    assert root.condition == "price > 10"
    assert [(f.name, f.time_attribute) for f in root.fields] == [("auction", None), ("p2", None), ("t", "rowtime")]
    assert root.fields[0].type_sql() == "BIGINT"


def test_primary_key_is_an_upsert_key_through_a_renaming_calc():
    root = build("SELECT id AS user_id, name FROM users")
    assert root.inputs[0].upsert_keys == [("id",)]
    assert root.upsert_keys == [("user_id",)]
    assert build("SELECT name FROM users").upsert_keys == []


def test_boundedness_is_recorded_per_node():
    assert build("SELECT auction FROM bid").bounded
    root = build("SELECT b.auction FROM bid b JOIN clicks c ON b.bidder = c.user_id")
    assert not root.bounded and root.inputs[0].inputs[0].bounded


# -- aggregates ----------------------------------------------------------------------

def test_group_by_is_a_group_aggregate_that_updates_with_its_keys():
    root = build("SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction")
    assert isinstance(root, ops.GroupAggregate)
    assert kinds(root) == "I,UB,UA" and root.upsert_keys == [("auction",)]
    assert root.state == "unbounded" and build("SELECT auction, COUNT(*) FROM bid GROUP BY auction", ttl="1 h").state == "TTL 1 h"
    assert root.describe() == "GroupAggregate(groupBy=[auction], select=[auction, COUNT(*) AS c])"


def test_aggregate_over_updating_input_also_deletes():
    root = build("SELECT c, COUNT(*) FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) GROUP BY c")
    assert kinds(root) == "I,UB,UA,D" and kinds(root.inputs[0]) == "I,UB,UA"


def test_global_aggregate_and_distinct_are_group_aggregates():
    assert isinstance(build("SELECT MAX(price) FROM bid"), ops.GroupAggregate)
    root = build("SELECT DISTINCT channel FROM bid")
    assert isinstance(root, ops.GroupAggregate) and root.updating and root.upsert_keys == [("channel",)]


def test_window_tvf_aggregate_is_insert_only_and_bounded_by_the_watermark():
    root = build("SELECT auction, COUNT(*) AS c, window_start, window_end, window_time FROM TABLE("
                 "TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end")
    assert isinstance(root, ops.WindowAggregate) and root.mode == ops.INSERT_ONLY
    assert root.state == "watermark" and root.group_by == ["auction"]
    assert root.upsert_keys == [("auction", "window_start", "window_end")]
    assert root.fields[-1].time_attribute == "rowtime" and root.fields[2].time_attribute is None
    tvf = root.inputs[0]
    assert isinstance(tvf, ops.WindowAssign)
    # Flink: after the window TVF the original time column is a plain timestamp
    assert next(f for f in tvf.fields if f.name == "ts").time_attribute is None


def test_legacy_group_window_and_proctime_window():
    legacy = build("SELECT bidder, COUNT(*) FROM bid GROUP BY bidder, SESSION(ts, INTERVAL '10' SECOND)")
    assert isinstance(legacy, ops.WindowAggregate) and legacy.window.kind == "SESSION"
    proc = build("SELECT user_id, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(p), INTERVAL '1' MINUTE))"
                 " GROUP BY user_id, window_start, window_end")
    assert isinstance(proc, ops.WindowAggregate) and proc.state == "processing time" and not proc.bounded


def test_cascaded_window_aggregate_over_renamed_window_bounds():
    root = build("SELECT MAX(c), s, e FROM (SELECT COUNT(*) AS c, window_start AS s, window_end AS e FROM TABLE("
                 "HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))"
                 " GROUP BY auction, window_start, window_end) GROUP BY s, e")
    assert isinstance(root, ops.WindowAggregate) and isinstance(root.inputs[0], ops.WindowAggregate)
    assert root.mode == ops.INSERT_ONLY


def test_grouping_by_a_window_bound_alone_is_a_group_aggregate():
    root = build("SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
                 " GROUP BY window_start")
    assert isinstance(root, ops.GroupAggregate) and root.updating


def test_over_aggregate_over_insert_only_input():
    root = build("SELECT auction, SUM(price) OVER (PARTITION BY auction ORDER BY ts"
                 " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM bid")
    assert isinstance(root, ops.OverAggregate) and root.mode == ops.INSERT_ONLY
    assert root.partition_by == ["auction"] and root.note is None
    assert consumption_issues(root) == []


# -- ranks and deduplication ---------------------------------------------------------

def test_top_n_is_a_rank_that_updates():
    root = build("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn"
                 " FROM bid) WHERE rn <= 3")
    assert isinstance(root, ops.Rank) and kinds(root) == "I,UB,UA,D"
    assert root.rank_end == 3 and root.output_rank and root.order_by == ["price DESC"]
    assert root.upsert_keys == [("auction", "rn")]


def test_rank_without_rank_number_and_n_below():
    root = build("SELECT auction, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC)"
                 " AS rn FROM bid) WHERE rn < 3")
    rank = below(root, ops.Rank)
    assert rank.rank_end == 2 and not rank.output_rank


@pytest.mark.parametrize("order, table, keep_last, rowtime, insert_only", [
    ("ts DESC", "bid", True, True, False),
    ("ts ASC", "bid", False, True, False),   # a row with an earlier event time may still come
    ("p ASC", "clicks", False, False, True),  # keep first on processing time: insert-only
    ("p DESC", "clicks", True, False, False),
])
def test_deduplicate(order, table, keep_last, rowtime, insert_only):
    key = "auction" if table == "bid" else "user_id"
    root = build(f"SELECT {key} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY {order}) AS rn"
                 f" FROM {table}) WHERE rn = 1")
    dedup = below(root, ops.Deduplicate)
    assert (dedup.keep_last, dedup.rowtime, dedup.mode.insert_only) == (keep_last, rowtime, insert_only)
    assert dedup.upsert_keys == [(key,)]


def test_top_1_by_a_non_time_column_is_a_rank():
    root = build("SELECT auction FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn"
                 " FROM bid) WHERE rn <= 1")
    assert isinstance(below(root, ops.Rank), ops.Rank) and not any(isinstance(n, ops.Deduplicate) for n in ops.walk(root))


def test_window_top_n_and_window_deduplicate_are_insert_only():
    tvf = "TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
    root = build(f"SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC)"
                 f" AS rn FROM {tvf}) WHERE rn <= 3")
    assert isinstance(root, ops.WindowRank) and root.mode == ops.INSERT_ONLY and root.state == "watermark"
    root = build(f"SELECT auction FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction, window_start, window_end"
                 f" ORDER BY window_time DESC) AS rn FROM {tvf}) WHERE rn <= 1")
    assert isinstance(below(root, ops.Deduplicate), ops.WindowDeduplicate) and root.mode == ops.INSERT_ONLY


# -- joins ---------------------------------------------------------------------------

def test_regular_inner_join_of_insert_only_inputs_is_insert_only_and_materialises_time():
    root = build("SELECT b.auction, b.ts, a.seller FROM bid b, auction a WHERE a.id = b.auction AND a.category = 1")
    join = below(root, ops.Join)
    assert type(join) is ops.Join and join.join_type == "InnerJoin" and join.mode == ops.INSERT_ONLY
    assert join.condition == "a.id = b.auction" and root.condition == "category = 1"
    assert join.state == "unbounded" and root.fields[1].time_attribute is None


@pytest.mark.parametrize("side, name", [("LEFT", "LeftOuterJoin"), ("RIGHT", "RightOuterJoin"), ("FULL", "FullOuterJoin")])
def test_outer_joins_retract(side, name):
    join = below(build(f"SELECT b.auction FROM bid b {side} JOIN auction a ON a.id = b.auction"), ops.Join)
    assert join.join_type == name and kinds(join) == "I,UB,UA,D"


def test_inner_join_forwards_updates():
    join = below(build("SELECT a.id FROM auction a JOIN (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) q"
                       " ON a.id = q.auction"), ops.Join)
    assert kinds(join) == "I,UB,UA"


def test_interval_join_needs_both_rowtimes_bounded():
    root = build("SELECT b.auction FROM bid b JOIN auction a ON a.id = b.auction"
                 " AND b.ts BETWEEN a.ts - INTERVAL '1' HOUR AND a.ts + INTERVAL '1' HOUR")
    join = below(root, ops.Join)
    assert isinstance(join, ops.IntervalJoin) and join.mode == ops.INSERT_ONLY and join.state == "watermark"
    assert "isRowTime=true" in join.bounds
    # Nexmark q4's bound: `expires` is no time attribute, so it stays a regular join
    root = build("SELECT b.auction FROM auction a, bid b WHERE a.id = b.auction AND b.ts BETWEEN a.ts AND a.expires")
    assert type(below(root, ops.Join)) is ops.Join


def test_window_join_on_window_start_and_end():
    left = ("SELECT auction, window_start, window_end FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
            " GROUP BY auction, window_start, window_end")
    right = ("SELECT id, window_start, window_end FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
             " GROUP BY id, window_start, window_end")
    root = build(f"SELECT l.auction FROM ({left}) l JOIN ({right}) r ON l.auction = r.id"
                 " AND l.window_start = r.window_start AND l.window_end = r.window_end")
    join = below(root, ops.Join)
    assert isinstance(join, ops.WindowJoin) and join.mode == ops.INSERT_ONLY and join.state == "watermark"


HOPS = ("SELECT auction, COUNT(*) AS n, {agg}window_start AS ws, window_end AS we FROM TABLE(HOP(TABLE bid,"
        " DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)){where} GROUP BY auction, window_start, window_end")


def argmax_query(outer="a.auction, a.n", join="JOIN", on="a.ws = m.ws AND a.we = m.we AND a.n >= m.top",
                 right=None, left=None, top="MAX(c.n) AS top, c.ws, c.we", group="c.ws, c.we"):
    left = left or HOPS.format(agg="", where="")
    right = right or HOPS.format(agg="", where="").replace("auction, COUNT", "COUNT")
    return f"SELECT {outer} FROM ({left}) a {join} (SELECT {top} FROM ({right}) c GROUP BY {group}) m ON {on}"


def test_a_window_aggregate_joined_with_its_own_maximum_per_window_is_a_window_rank_by_rank():
    """Nexmark q5's shape: the rows of a window aggregate whose count is their window's
    largest, written as a join with the same aggregate's MAX per window. The planner ranks
    the aggregate's rows instead (RANK() = 1, ties kept): the aggregate once, no join."""
    root = build(argmax_query())
    text = "\n".join(explain_operators(root))
    assert "Join" not in text and text.count("WindowAggregate(") == 1, text
    rank = below(root, ops.WindowRank)
    assert (rank.rank_type, rank.rank_end, rank.partition_by, rank.order_by) == ("RANK", 1, ["ws", "we"], ["n DESC"])
    # m's columns read as a's, under their own names; conditions in any order, = as >=
    plan = steps(argmax_query("m.we, a.auction, m.top AS best, m.top", on="m.top <= a.n AND a.we = m.we AND"
                              " m.ws = a.ws"))[-1].plan
    assert [c.name for c in plan.columns] == ["we", "auction", "best", "top"]
    assert "Join" not in "".join(explain_operators(build_operator_plan(plan, is_bounded)))
    assert "Join" not in "".join(explain_operators(build(argmax_query(on="a.ws = m.ws AND a.we = m.we AND"
                                                                     " a.n = m.top"))))
    # both sides one view of the aggregate; two views, or a CTE shadowing the view, are left alone
    views = DDL + (f"CREATE TEMPORARY VIEW hops AS {HOPS.format(agg='', where='')};"
                   f"CREATE TEMPORARY VIEW hops2 AS {HOPS.format(agg='', where='')};")
    via_view = "SELECT a.auction, a.n FROM hops a JOIN (SELECT MAX(c.n) AS top, c.ws, c.we FROM {} c GROUP BY c.ws, c.we) m" \
               " ON a.ws = m.ws AND a.we = m.we AND a.n >= m.top"

    def joined(sql):
        return "Join" in "".join(explain_operators(build_operator_plan(steps(sql, views)[-1].plan, is_bounded)))

    assert not joined(via_view.format("hops")) and joined(via_view.format("hops2"))
    assert joined(f"WITH hops AS ({HOPS.format(agg='', where='')}) {via_view.format('hops')}")
    # a largest value that may be NULL: rows whose value is NULL are not kept (they join nothing)
    summed = steps(argmax_query(left=HOPS.format(agg="SUM(price) AS s, ", where=""), on="a.ws = m.ws AND a.we = m.we"
                                " AND a.s >= m.top", top="MAX(c.s) AS top, c.ws, c.we",
                                right=HOPS.format(agg="SUM(price) AS s, ", where="")))[-1].plan
    from streamsql.spark.dialect import to_spark_sql

    assert "NOT `a`.`s` IS NULL" in to_spark_sql(summed.query)


@pytest.mark.parametrize("changes", [
    dict(join="LEFT JOIN"),  # unmatched rows padded: not the same rows
    dict(on="a.ws = m.ws AND a.we = m.we AND a.n > m.top"),  # none
    dict(on="a.ws = m.ws AND a.n >= m.top"),  # not per window
    dict(on="a.ws = m.ws AND a.we = m.we AND a.n >= m.top AND a.auction > 3"),
    dict(right=HOPS.format(agg="", where=" WHERE price > 3")),  # another aggregate
    dict(right=HOPS.format(agg="", where=""), group="c.ws, c.we, c.auction"),  # per window and auction
    dict(top="MIN(c.n) AS top, c.ws, c.we"),
    dict(outer="a.auction, m.ws, c.n"),  # not a column of a or m
])
def test_other_joins_with_an_aggregate_are_left_as_they_are(changes):
    if "outer" in changes:
        with pytest.raises(ValidationError):
            build(argmax_query(**changes))
        return
    assert "Join" in "".join(explain_operators(build(argmax_query(**changes))))


def test_temporal_join_forwards_the_left_side():
    """The planner drops `FOR SYSTEM_TIME AS OF` from the tree it hands on (Spark has no
    such join); the builder recognises it from the table's `version` or its meta."""
    for side in ("", "LEFT "):
        plan = steps(f"SELECT c.url, u.name FROM clicks c {side}JOIN users FOR SYSTEM_TIME AS OF c.p AS u"
                     " ON c.user_id = u.id")[-1].plan
        join = below(build_operator_plan(plan, is_bounded), ops.Join)
        assert isinstance(join, ops.TemporalJoin) and not join.rowtime and join.mode == ops.INSERT_ONLY
        assert join.describe().startswith("LookupJoin(") and join.state == "none"


def test_in_subquery_is_a_semi_join():
    root = build("SELECT auction FROM bid WHERE auction IN (SELECT id FROM auction)")
    join = below(root, ops.Join)
    assert join.join_type == "LeftSemiJoin" and join.mode == ops.INSERT_ONLY
    anti = below(build("SELECT auction FROM bid WHERE NOT auction IN (SELECT id FROM auction)"), ops.Join)
    assert anti.join_type == "LeftAntiJoin" and anti.updating


# -- set operations, sort, limit, fallback -------------------------------------------

def test_union_all_merges_modes_and_union_deduplicates():
    root = build("SELECT auction FROM bid UNION ALL SELECT auction FROM (SELECT auction, COUNT(*) FROM bid GROUP BY auction)")
    assert isinstance(root, ops.Union) and kinds(root) == "I,UB,UA"
    assert build("SELECT auction FROM bid UNION ALL SELECT id FROM auction").mode == ops.INSERT_ONLY
    assert isinstance(build("SELECT auction FROM bid UNION SELECT id FROM auction"), ops.GroupAggregate)


def test_order_by_and_limit():
    top = build("SELECT auction FROM bid ORDER BY price DESC LIMIT 5")
    assert isinstance(top, ops.SortLimit) and top.updating and top.fetch == 5
    limit = build("SELECT auction FROM bid LIMIT 5")
    assert isinstance(limit, ops.Limit) and limit.mode == ops.INSERT_ONLY
    temporal = build("SELECT auction, ts FROM bid ORDER BY ts")
    assert isinstance(temporal, ops.Sort) and temporal.temporal and temporal.describe().startswith("TemporalSort(")


def test_intersect_and_except_count_each_side_per_row():
    root = build("SELECT auction FROM bid EXCEPT SELECT id FROM auction")
    assert isinstance(root, ops.Calc) and root.condition == "$left > 0 AND $right = 0" and root.updating
    grouped = root.inputs[0]
    assert isinstance(grouped, ops.GroupAggregate) and grouped.group_by == ["auction"]
    assert isinstance(grouped.inputs[0], ops.Union)


def test_intersect_all_and_except_all_replicate_each_row_by_its_copies():
    root = build("SELECT auction FROM bid INTERSECT ALL SELECT id FROM auction")
    assert isinstance(root, ops.Correlate) and root.updating and root.upsert_keys == []  # duplicates: no key
    assert root.describe() == "Correlate(invocation=[$REPLICATE_ROWS$($copies, auction)], select=[auction])"
    counted = root.inputs[0]
    assert isinstance(counted, ops.Calc) and counted.projections[0] == "LEAST($left, $right) AS $copies"
    assert isinstance(counted.inputs[0], ops.GroupAggregate)
    assert build("SELECT auction FROM bid EXCEPT ALL SELECT id FROM auction").inputs[0].condition == "$left - $right > 0"


def test_unrecognised_shapes_are_conservative():
    root = build("SELECT * FROM UNNEST(ARRAY[1, 2]) AS t(x)").inputs[0]
    assert isinstance(root, ops.Unrecognized) and not root.updating  # no aggregate: forwards its inputs
    assert "not recognised" in root.describe()
    assert ops.Unrecognized(inputs=[], fields=[], sql="x", aggregates=True).updating


# -- checks --------------------------------------------------------------------------

def insert(sql: str):
    step = steps(sql)[-1]
    assert isinstance(step, InsertStep)
    return build_operator_plan(step.plan, is_bounded), step.table


def test_group_by_into_a_file_sink_is_refused_with_flinks_message():
    root, table = insert("INSERT INTO files_out SELECT auction, COUNT(*) FROM bid GROUP BY auction")
    with pytest.raises(ValidationError) as caught:
        check_sink(root, table)
    assert caught.value.message == (
        "Table sink 'default_catalog.default_database.files_out' doesn't support consuming update changes"
        " which is produced by node GroupAggregate(groupBy=[auction], select=[auction, COUNT(*) AS EXPR$1])"
    )


def test_the_producer_is_found_below_forwarding_nodes():
    root, table = insert("INSERT INTO files_out SELECT auction, c + 1 FROM"
                         " (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) WHERE c > 2")
    with pytest.raises(ValidationError, match=r"produced by node GroupAggregate\(groupBy=\[auction\]"):
        check_sink(root, table)


def test_window_aggregate_into_files_and_group_by_into_print_are_fine():
    root, table = insert("INSERT INTO files_out SELECT auction, COUNT(*) FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts),"
                         " INTERVAL '10' SECOND)) GROUP BY auction, window_start, window_end")
    check_sink(root, table)
    root, table = insert("INSERT INTO print_out SELECT auction, COUNT(*) FROM bid GROUP BY auction")
    check_sink(root, table)


def test_sink_capabilities():
    def table(connector, key=()):
        return TableDef(ObjectName("db", "t"), [], {"connector": connector}, primary_key=list(key))

    assert accepted_kinds(table("filesystem")) == {"+I"}
    assert accepted_kinds(table("blackhole")) == accepted_kinds(table("print")) == {"+I", "-U", "+U", "-D"}
    assert accepted_kinds(table("jdbc", ["id"])) == {"+I", "-U", "+U", "-D"}
    assert accepted_kinds(table("jdbc")) == {"+I"}


OVER_RANK = ("SELECT seller, AVG(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)"
             " FROM (SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY id ORDER BY price DESC) AS rn FROM"
             " (SELECT a.id, a.seller, b.price, b.ts FROM {auction} a JOIN bid b ON a.id = b.auction)) WHERE rn <= 1)")


def test_over_aggregate_over_updates_is_a_warning_over_bounded_input():
    root = build(OVER_RANK.format(auction="auction"))
    assert isinstance(root, ops.OverAggregate) and root.updating
    warnings = check_consumption(root)
    assert len(warnings) == 1 and warnings[0].startswith(
        "OverAggregate doesn't support consuming update and delete changes which is produced by node Rank(")


def test_over_aggregate_over_updates_is_an_error_over_unbounded_input():
    ddl = DDL.replace("'path' = 'auction.csv', 'format' = 'csv'",
                      "'path' = 'auction', 'format' = 'csv', 'source.monitor-interval' = '1 s'")
    root = build_operator_plan(steps(OVER_RANK.format(auction="auction"), ddl)[-1].plan, is_bounded)
    with pytest.raises(ValidationError, match="OverAggregate doesn't support consuming update and delete changes"):
        check_consumption(root)


@pytest.mark.parametrize("function", ["RANK", "DENSE_RANK"])
def test_top_n_by_rank_or_dense_rank_is_refused_on_a_stream_as_flink_refuses_it(function):
    """Flink's streaming Rank has ROW_NUMBER() only. Over unbounded input that is an error at
    plan time, over bounded input a warning (the final result is computed), and a RANK()
    = 1 by a time attribute is no deduplication: it ties. A window Top-N takes them."""
    query = (f"SELECT auction, ts FROM (SELECT *, {function}() OVER (PARTITION BY auction ORDER BY ts DESC) AS r"
             f" FROM {{bid}}) WHERE r = 1")
    rank = build(query.format(bid="bid"))
    assert isinstance(below(rank, ops.Rank), ops.Rank) and not any(isinstance(n, ops.Deduplicate) for n in ops.walk(rank))
    assert f"rankType=[{function}]" in explain_operators(rank)[-2]
    assert below(rank, ops.Rank).upsert_keys == []
    warnings = check_consumption(rank)
    assert len(warnings) == 1 and warnings[0].startswith(f"{function}() on streaming table is not supported currently")
    ddl = DDL.replace("'path' = 'bid.csv', 'format' = 'csv'",
                      "'path' = 'auction', 'format' = 'csv', 'source.monitor-interval' = '1 s'")
    unbounded = build_operator_plan(steps(query.format(bid="bid"), ddl)[-1].plan, is_bounded)
    with pytest.raises(ValidationError, match=rf"^{function}\(\) on streaming table is not supported currently"):
        check_consumption(unbounded)
    # a window Top-N ranks each window once, final: its ties never move, so streamsql runs it
    # (Flink refuses it: "not supported on Window TopN currently")
    window = build(f"SELECT * FROM (SELECT *, {function}() OVER (PARTITION BY window_start, window_end ORDER BY"
                   f" price DESC) AS r FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE r <= 3")
    assert isinstance(below(window, ops.WindowRank), ops.WindowRank) and check_consumption(window) == []
    assert f"rankType=[{function}]" in "".join(explain_operators(window))


def test_explain_renders_flinks_tree_with_modes_and_state():
    root, table = insert("INSERT INTO print_out SELECT auction, COUNT(*) FROM bid WHERE price > 1 GROUP BY auction")
    lines = ops.Sink(inputs=[root], fields=root.fields, table=str(table.name), connector="print").explain()
    assert lines[0].startswith("Sink(table=[default_catalog.default_database.print_out]")
    assert lines[1] == ("+- GroupAggregate(groupBy=[auction], select=[auction, COUNT(*) AS EXPR$1],"
                        " changelogMode=[I,UB,UA], upsertKeys=[[auction]], state=[unbounded])")
    assert lines[2].startswith("   +- Calc(select=[auction, bidder, price, channel, ts], where=[price > 1], changelogMode=[I])")
    assert lines[3].startswith("      +- TableSourceScan(table=[[default_catalog, default_database, bid]]")
    assert lines[3].endswith("changelogMode=[I], bounded=[true])")


# -- every Nexmark and conformance query ---------------------------------------------

UPDATING = {"q4", "q6", "q9", "q15", "q16", "q17", "q18", "q19"}


def _conformance_steps(name: str):
    data = str(CONFORMANCE / "data" / "nexmark")
    ddl = (CONFORMANCE / "ddl.sql").read_text().replace("${DATA}", data)
    return steps((CONFORMANCE / "cases" / f"{name}.sql").read_text().replace("${DATA}", data), ddl + "\n")


@pytest.mark.skipif(not (CONFORMANCE / "cases").is_dir(), reason="no conformance suite beside the repository")
@pytest.mark.parametrize("name", [f"q{i}" for i in range(24)])
def test_conformance_query_modes(name, monkeypatch):
    monkeypatch.syspath_prepend(str(CONFORMANCE / "udfs"))
    root = build_operator_plan(_conformance_steps(name)[-1].plan, is_bounded)
    assert root.updating == (name in UPDATING), "\n".join(explain_operators(root))


@pytest.mark.parametrize("path", sorted((ROOT / "queries" / "nexmark").glob("q*.sql")) + [ROOT / "queries" / "demo.sql"],
                         ids=lambda p: p.stem)
def test_every_shipped_query_builds(path, monkeypatch):
    monkeypatch.syspath_prepend(str(path.parent))
    planner = Planner(Catalog(ROOT / "catalog"), base_dir=path.parent)
    built = []
    for statement in parse_script(path.read_text()):
        step = planner.plan(statement)
        if isinstance(step, (QueryStep, InsertStep)):
            root = build_operator_plan(step.plan, is_bounded)
            explain_operators(root)
            built.append(root)
            if isinstance(step, InsertStep):
                check_sink(root, step.table)  # every shipped pipeline writes where it may
    assert built
    if path.parent.name == "nexmark":
        assert built[-1].updating == (path.stem in UPDATING)


# -- the runtime's entry point and EXPLAIN -------------------------------------------

def test_operator_plan_checks_in_streaming_mode_only():
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.runtime.settings import Settings

    step = steps("INSERT INTO files_out SELECT auction, COUNT(*) FROM bid GROUP BY auction")[-1]
    settings = Settings()
    with pytest.raises(ValidationError, match="doesn't support consuming update changes"):
        operator_plan(step, settings)
    settings.set("execution.runtime-mode", "batch")
    plan = operator_plan(step, settings)
    assert isinstance(plan.root, ops.Sink) and plan.updating and plan.warnings == []


def test_operator_plan_warns_for_bounded_input_and_applies_the_state_ttl():
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.runtime.settings import Settings

    settings = Settings()
    settings.set("table.exec.state.ttl", "1 h")
    plan = operator_plan(steps(OVER_RANK.format(auction="auction"))[-1], settings)
    assert len(plan.warnings) == 1 and "OverAggregate doesn't support" in plan.warnings[0]
    assert plan.root.state == "TTL 1 h" and "state=[TTL 1 h]" in plan.explain()[0]


def test_explain_shows_the_operator_plan_before_the_spark_sql(tmp_path):
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.explain import describe

    engine = Engine(Catalog(None), base_dir=SOURCES)
    step = engine.plan_script(DDL + "EXPLAIN INSERT INTO files_out SELECT auction, COUNT(*) FROM bid GROUP BY auction;")[-1]
    lines, _ = describe(engine, step.step)
    start = lines.index("== Operator plan ==")
    assert lines.index("== Spark SQL ==") > start
    assert lines[start + 1].startswith("Sink(table=[default_catalog.default_database.files_out]")
    assert lines[start + 2].startswith("+- GroupAggregate(groupBy=[auction]")
    assert any(line.startswith("note: Table sink 'default_catalog.default_database.files_out' doesn't support")
               for line in lines)
    assert engine._spark is None  # no Spark was started


def test_explain_names_the_result_changelog_of_a_streamed_query():
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.explain import describe

    engine = Engine(Catalog(None), base_dir=SOURCES)
    execution = {}
    for query, mode in [("SELECT url, COUNT(*) AS n FROM clicks GROUP BY url", "retract [+I,-U,+U]"),
                        ("SELECT url FROM clicks WHERE user_id > 1", "insert-only")]:
        lines, streaming = describe(engine, engine.plan_script(DDL + f"EXPLAIN {query};")[-1].step)
        assert streaming
        execution[mode] = [line for line in lines if line.startswith("execution: ")]
        assert execution[mode] == [f"execution: Spark Structured Streaming (append mode, each row with its kind);"
                                   f" result changelog: {mode}; each operator's state as the operator plan shows"]
    assert engine._spark is None  # no Spark was started


def test_explain_of_a_query_refused_over_unbounded_input_shows_the_refusal_without_spark():
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.explain import explain

    engine = Engine(Catalog(None), base_dir=SOURCES)
    step = engine.plan_script(DDL + "EXPLAIN SELECT c.url FROM clicks c WHERE c.user_id NOT IN (SELECT u.id FROM"
                                    " users u WHERE u.name > c.url);")[-1]
    lines = explain(engine, step.step)
    assert lines[-2] == "== Spark plan ==" and lines[-1].startswith("(none: Join(joinType=[LeftAntiJoin]")
    assert "over an unbounded source is not streamed in this query's shape yet" in lines[-1]
    assert engine._spark is None  # no Spark was started


def test_a_refusal_names_the_aggregate_streamsql_does_not_stream():
    from streamsql.runtime.engine import Engine
    from streamsql.runtime.explain import explain

    engine = Engine(Catalog(None), base_dir=SOURCES)
    for sql, reason in (
            ("SELECT url, PERCENTILE(user_id, 0.5) FROM clicks GROUP BY url",
             "(here: PERCENTILE is not an aggregate streamsql's GroupAggregate computes over a stream yet)"),
            ("SELECT url, LISTAGG(url, url) FROM clicks GROUP BY url",
             "(here: LISTAGG in this form (DISTINCT, or arguments other than a value and a literal) is not")):
        lines = explain(engine, engine.plan_script(DDL + f"EXPLAIN {sql};")[-1].step)
        assert reason in lines[-1], lines[-1]
    assert engine._spark is None


def test_top_n_over_a_view_is_recognised():
    root = build("CREATE TEMPORARY VIEW ranked AS SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC)"
                 " AS rn FROM bid;\nSELECT auction, price, rn FROM ranked WHERE rn <= 2")
    assert isinstance(root, (ops.Calc, ops.Rank))
    rank = below(root, ops.Rank)
    assert rank.rank_end == 2 and rank.output_rank and root.updating


def test_scalar_subquery_is_joined_and_makes_the_result_update():
    root = build("SELECT auction, (SELECT MAX(price) FROM bid) AS top FROM bid")
    join = below(root, ops.Join)
    assert join.join_type == "LeftOuterJoin" and isinstance(join.inputs[1], ops.GroupAggregate) and root.updating
    join = below(build("SELECT auction FROM bid WHERE price > (SELECT AVG(price) FROM bid)"), ops.Join)
    assert join.join_type == "InnerJoin" and kinds(join) == "I,UB,UA"


def test_a_subquery_inside_a_condition_still_feeds_the_plan():
    root = build("SELECT auction FROM bid WHERE price > 10 OR auction IN"
                 " (SELECT auction FROM bid GROUP BY auction HAVING COUNT(*) > 1)")
    assert any(isinstance(n, ops.GroupAggregate) for n in ops.walk(root)) and root.updating


# -- the end of bounded input run as a stream ---------------------------------------------

def test_only_operators_that_emit_as_the_watermark_passes_need_the_end_of_input_run():
    """'execution.bounded-input' = 'stream' runs the query once more with the watermark at
    +inf (runtime.end_of_input) only when an operator waits for it."""
    from streamsql.runtime.end_of_input import waits_for_watermark

    untimed = [
        "SELECT auction, price FROM bid WHERE price > 10",
        "SELECT auction, COUNT(*) AS n, MAX(price) AS top FROM bid GROUP BY auction",
        "SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn"
        " FROM bid) WHERE rn <= 3",
        "SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY ts DESC) AS rn"
        " FROM bid) WHERE rn = 1",
        "SELECT b.auction, a.seller FROM bid b LEFT JOIN auction a ON b.auction = a.id",
        "SELECT auction, price FROM bid ORDER BY price DESC LIMIT 3",
        "SELECT auction FROM bid UNION ALL SELECT id FROM auction",
    ]
    timed = [
        "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
        " GROUP BY window_start, window_end",
        "SELECT auction, SUM(price) OVER (PARTITION BY auction ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"
        " AS s FROM bid",
        "SELECT b.auction FROM bid b, auction a WHERE b.auction = a.id"
        " AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE",
        "SELECT auction, price FROM bid ORDER BY ts",
        # over a window aggregate, a GROUP BY still waits for the windows
        "SELECT n, COUNT(*) AS c FROM (SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE bid,"
        " DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) GROUP BY n",
    ]
    assert [waits_for_watermark(build(sql)) for sql in untimed] == [False] * len(untimed)
    assert [waits_for_watermark(build(sql)) for sql in timed] == [True] * len(timed)


def test_what_an_earlier_state_layout_cannot_resume_is_read_from_the_plan():
    """runtime.inserts.layout_concerns: an INSERT with an OVER aggregate is flagged (its
    history moved to generations in layout 7), one whose argmax join is ranked (layout 8),
    one with an event-time temporal join (its versions in generations, layout 9) and a window
    FIRST_VALUE (its read order, layout 10), and a GROUP BY on Spark's own aggregation (into a
    blackhole, layout 11); a GROUP BY into print, a window COUNT and a lookup join are not."""
    from streamsql.runtime.inserts import layout_concerns
    from streamsql.runtime.settings import Settings

    engine = SimpleNamespace(settings=Settings())
    over = steps("INSERT INTO print_out SELECT auction, SUM(price) OVER (PARTITION BY auction ORDER BY ts"
                 " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM bid")[-1]
    grouped = steps("INSERT INTO print_out SELECT auction, COUNT(*) FROM bid GROUP BY auction")[-1]
    assert layout_concerns(engine, over) == (False, True, False, False, False, False, False)
    assert layout_concerns(engine, grouped) == (False, False, False, False, False, False, False)
    # ORDER BY a rowtime without LIMIT: Flink's TemporalSort, which runs on the OVER operator
    sorted_ddl = DDL + "CREATE TEMPORARY TABLE print3 (a BIGINT, b BIGINT, t TIMESTAMP(3)) WITH ('connector' = 'print');"
    temporal_sort = steps("INSERT INTO print3 SELECT auction, price, ts FROM bid ORDER BY ts", sorted_ddl)[-1]
    assert layout_concerns(engine, temporal_sort) == (False, True, False, False, False, False, False)
    # a join with a window aggregate's own maximum per window, ranked instead since layout 8
    ranked = steps(f"INSERT INTO print_out {argmax_query()}")[-1]
    assert layout_concerns(engine, ranked) == (False, False, True, False, False, False, False)
    from tests.test_temporal_join import RATES
    temporal = steps("INSERT INTO print_out SELECT b.auction, r.rate FROM bid b JOIN rates FOR SYSTEM_TIME AS OF"
                     " b.ts AS r ON b.bidder = r.cur", DDL + RATES)[-1]
    assert layout_concerns(engine, temporal) == (False, False, False, True, False, False, False)
    lookup = steps("INSERT INTO print_out SELECT b.auction, r.rate FROM (SELECT *, PROCTIME() AS pt FROM bid) b"
                   " JOIN rates FOR SYSTEM_TIME AS OF b.pt AS r ON b.bidder = r.cur", DDL + RATES)[-1]
    assert layout_concerns(engine, lookup) == (False, False, False, False, False, False, False)
    # a window aggregate's FIRST_VALUE, collected with the rows' read order since layout 10
    listed = steps("INSERT INTO print_out SELECT COUNT(*), FIRST_VALUE(price) FROM TABLE(TUMBLE(TABLE"
                   " bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end")[-1]
    assert layout_concerns(engine, listed) == (False, False, False, False, True, False, False)
    counted = steps("INSERT INTO print_out SELECT COUNT(*), MAX(price) FROM TABLE(TUMBLE(TABLE"
                    " bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end")[-1]
    assert layout_concerns(engine, counted) == (False, False, False, False, False, False, False)
    hole = DDL + "CREATE TEMPORARY TABLE hole (a BIGINT, b BIGINT) WITH ('connector' = 'blackhole');"
    native = steps("INSERT INTO hole SELECT auction, COUNT(*) FROM bid GROUP BY auction", hole)[-1]
    assert layout_concerns(engine, native) == (False, False, False, False, False, True, False)
    # a sink upsert materializer (ON CONFLICT) since layout 12
    keyed = hole + "CREATE TEMPORARY TABLE keyed (a BIGINT, b BIGINT, PRIMARY KEY (b) NOT ENFORCED) WITH ('connector' = 'blackhole');"
    materialized = steps("INSERT INTO keyed SELECT auction, COUNT(*) FROM bid GROUP BY auction ON CONFLICT DO NOTHING",
                         keyed)[-1]
    assert layout_concerns(engine, materialized) == (False, False, False, False, False, False, True)
