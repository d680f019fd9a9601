"""Regular joins that retract (spark.stateful.join): outer joins and joins of a changelog,
cut into a JoinStage without Spark, then streamed micro-batch by micro-batch against batch
mode: the changelog applied ends as the batch result, and outer joins retract their
null-padded rows as partners arrive."""

from __future__ import annotations

import os
import random
import time

import pytest

from streamsql.spark.dialect import to_spark_sql
from streamsql.spark.stateful.stages import AggregateStage, CalcStage, JoinStage
from tests.conftest import write
from tests.operator_plans import stages
from tests.streamed import streamed_and_batch


def test_outer_join_of_inserts_is_cut_with_its_keys_and_filters():
    stage = stages("SELECT u.name, b.price FROM bid b LEFT JOIN users u ON b.bidder = u.id WHERE b.price > 3;")
    assert isinstance(stage, CalcStage)
    (_, join), = stage.inputs
    assert isinstance(join, JoinStage) and (join.keys, join.join_type) == (1, "LeftOuterJoin")
    assert to_spark_sql(join.left_query).startswith("SELECT `b`.`bidder` AS `__lk0`")
    assert "WHERE `__joined`.`__l0` > 3" in to_spark_sql(stage.query)


def test_inner_join_of_a_changelog_takes_keys_from_where_too():
    stage = stages("SELECT a.auction, a.c, u.name FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) a,"
                   " users u WHERE a.auction = u.id AND a.c > u.id + 1;")
    (_, join), = stage.inputs
    assert isinstance(join, JoinStage) and join.join_type == "InnerJoin" and join.keys == 1
    assert isinstance(join.inputs[0][1], AggregateStage)
    assert "`__rowkind`" in to_spark_sql(join.left_query)
    assert "WHERE `__joined`.`__l1` > `__joined`.`__r1` + 1" in to_spark_sql(stage.query)


def test_aggregate_over_an_outer_join():
    stage = stages("SELECT u.name, COUNT(b.price) FROM users u LEFT JOIN bid b ON b.bidder = u.id GROUP BY u.name;")
    assert isinstance(stage, AggregateStage) and isinstance(stage.inputs[0][1], JoinStage)


def test_in_and_exists_are_semi_and_anti_joins():
    """Decorrelated: the subquery's conditions on the outer row go into the join's ON."""
    stage = stages("SELECT b.auction FROM bid b WHERE b.price > 3 AND NOT EXISTS (SELECT * FROM users u WHERE"
                   " u.id = b.bidder AND u.id < b.price AND u.name <> 'x');")
    (_, join), = stage.inputs
    assert (join.join_type, join.keys, join.residual) == ("LeftAntiJoin", 1, ("cmp", "<", ("col", "__r0"),
                                                                               ("col", "__l1")))
    assert to_spark_sql(join.right_query) == (
        "SELECT `__sq1`.`__e0` AS `__rk0`, `__sq1`.`__e1` AS `__r0` FROM (SELECT `u`.`id` AS `__e0`, `u`.`id` AS"
        " `__e1` FROM `users` AS `u` WHERE `u`.`name` <> 'x') AS `__sq1`".replace("__sq1", _sq(join)))
    assert "WHERE `__joined`.`__l1` > 3" in to_spark_sql(stage.query)
    # IN over an aggregate (a changelog): the aggregate is a stage feeding the join
    stage = stages("SELECT auction FROM bid WHERE bidder IN (SELECT auction FROM bid GROUP BY auction"
                   " HAVING COUNT(*) > 2);")
    (_, join), = stage.inputs
    assert join.join_type == "LeftSemiJoin" and isinstance(join.inputs[0][1], AggregateStage)


def test_not_in_is_a_null_aware_anti_join_on_one_bucket():
    stage = stages("SELECT b.auction FROM bid b WHERE b.price > 3 AND b.bidder NOT IN (SELECT id FROM users"
                   " WHERE name <> 'x');")
    (_, join), = stage.inputs
    assert (join.join_type, join.keys, join.residual, join.null_aware) == ("LeftAntiJoin", 1, None, True)
    assert not stages("SELECT b.auction FROM bid b WHERE NOT EXISTS (SELECT * FROM users u WHERE u.id = b.bidder);"
                      ).inputs[0][1].null_aware


def _sq(join) -> str:
    return to_spark_sql(join.right_query).split(" AS `")[-1].rstrip("`")


def test_a_not_in_correlated_by_equalities_is_null_aware_within_each_key():
    stage = stages("SELECT b.auction FROM bid b WHERE b.bidder NOT IN (SELECT u.id FROM users u WHERE u.name ="
                   " b.channel);")
    (_, join), = stage.inputs
    assert (join.join_type, join.keys, join.residual, join.null_aware) == ("LeftAntiJoin", 2, None, True)
    assert to_spark_sql(join.left_query).startswith("SELECT `b`.`bidder` AS `__lk0`, `b`.`channel` AS `__lk1`")


def test_scalar_aggregate_subqueries_are_joins_with_the_subquery_grouped_by_its_correlation():
    """Compared in WHERE, a row without a group is filtered anyway: an inner join."""
    stage = stages("SELECT b.auction FROM bid b WHERE b.price > 2 * (SELECT AVG(b2.price) FROM bid b2 WHERE"
                   " b2.auction = b.auction AND b2.bidder <> 7);")
    (_, join), = stage.inputs
    assert (join.join_type, join.keys) == ("InnerJoin", 1) and isinstance(join.inputs[0][1], AggregateStage)
    sq = _sq(join)
    body = join.inputs[0][1].split.input_query
    assert "WHERE `b2`.`bidder` <> 7" in to_spark_sql(body)
    assert to_spark_sql(join.right_query) == (f"SELECT `{sq}`.`__rowkind`, `{sq}`.`__e0` AS `__rk0`, `{sq}`.`__v`"
                                              f" AS `__r0` FROM `{join.inputs[0][0]}` AS `{sq}`")
    assert to_spark_sql(stage.query).endswith("WHERE `__joined`.`__l1` > 2 * `__joined`.`__r0`")
    # in the select list: a left join; a COUNT over no rows is 0, not NULL
    stage = stages("SELECT u.name, (SELECT COUNT(*) FROM bid b WHERE b.bidder = u.id) AS n FROM users u;")
    (_, join), = stage.inputs
    assert join.join_type == "LeftOuterJoin"
    assert "COALESCE(`__joined`.`__r0`, 0) AS `n`" in to_spark_sql(stage.query)
    # uncorrelated: one group, joined on a constant key (one bucket)
    stage = stages("SELECT b.auction FROM bid b WHERE b.price > (SELECT AVG(price) FROM bid) OR b.price IS NULL;")
    (_, join), = stage.inputs
    assert join.join_type == "LeftOuterJoin" and to_spark_sql(join.left_query).startswith("SELECT 0 AS `__lk0`")


def test_several_scalar_subqueries_are_joined_one_at_a_time():
    """Each level one join: the first subquery's value is a column of a derived table of the
    FROM item's name, over which the next is joined."""
    stage = stages("SELECT b.auction, (SELECT MAX(b2.price) FROM bid b2 WHERE b2.auction = b.auction) AS top"
                   " FROM bid b WHERE b.price > (SELECT AVG(price) FROM bid) AND b.bidder < (SELECT COUNT(*) FROM"
                   " users u WHERE u.id = b.bidder);")
    top, joins = to_spark_sql(stage.query), []
    while stage is not None:
        joins += [stage] if isinstance(stage, JoinStage) else []
        stage = next((s for _, s in stage.inputs if not isinstance(s, AggregateStage)), None)
    # a value taken into a derived table is compared in the outer WHERE: left joins, then the filter
    assert [j.join_type for j in joins] == ["LeftOuterJoin"] * 3
    assert "WHERE `__joined`.`__l2` > `__joined`.`__l3` AND `__joined`.`__l4` < COALESCE(`__joined`.`__r0`, 0)" in top
    innermost = to_spark_sql(joins[-1].left_query)
    assert innermost.startswith("SELECT `b`.`auction` AS `__lk0`, `b`.`auction` AS `__l0`, `b`.`bidder` AS `__l1`")


@pytest.mark.parametrize("sql", [
    # correlated by more than equalities; grouped; a COUNT in a larger value (1 over no rows)
    "SELECT b.auction FROM bid b WHERE b.price > (SELECT AVG(b2.price) FROM bid b2 WHERE b2.auction < b.auction);",
    "SELECT b.auction FROM bid b WHERE b.price > (SELECT MAX(b2.price) FROM bid b2 WHERE b2.auction = b.auction"
    " GROUP BY b2.bidder);",
    "SELECT b.auction FROM bid b WHERE b.price > (SELECT COUNT(*) + 1 FROM bid b2 WHERE b2.auction = b.auction);",
    "SELECT b.auction, (SELECT COALESCE(SUM(b2.price), 0) FROM bid b2 WHERE b2.auction = b.auction) FROM bid b;",
    # two scalar subqueries, one of them correlated beyond equalities
    "SELECT b.auction FROM bid b WHERE b.price > (SELECT AVG(price) FROM bid) AND b.price < (SELECT MAX(b2.price)"
    " FROM bid b2 WHERE b2.auction < b.auction);",
])
def test_scalar_subqueries_not_made_joins(sql):
    assert stages(sql) is None


@pytest.mark.parametrize("sql", [
    # NULL-aware per outer row: a NOT IN correlated by more than equalities
    "SELECT b.auction FROM bid b WHERE b.bidder NOT IN (SELECT u.id FROM users u WHERE u.name > b.channel);",
    "SELECT b.auction FROM bid b WHERE EXISTS (SELECT COUNT(*) FROM users u WHERE u.id = b.bidder);",
])
def test_subqueries_not_made_joins(sql):
    assert stages(sql) is None


def test_several_joins_are_nested_one_join_per_select():
    """The joins before the last one read through a derived table carrying the columns the
    rest uses under names of their own; WHERE conjuncts of the inner inputs go with them
    (an inner join's keys), unless the last join pads the inner side (FULL, RIGHT)."""
    stage = stages("SELECT b.auction, u.name FROM bid b CROSS JOIN auction a LEFT JOIN users u ON u.id = a.seller"
                   " WHERE b.auction = a.id AND b.price > 3 AND (u.name IS NULL OR b.price > a.seller);")
    (_, join), = stage.inputs
    assert (join.join_type, join.keys) == ("LeftOuterJoin", 1)
    left = to_spark_sql(join.left_query)
    assert left.startswith("SELECT `__nested") and " AS `__n0`, `b`.`price` AS `__n1`, `a`.`seller` AS `__n2` FROM" in left
    assert left.endswith("WHERE `b`.`auction` = `a`.`id` AND `b`.`price` > 3) AS `" + left.rsplit("AS `", 1)[1])
    assert to_spark_sql(stage.query).endswith("WHERE `__joined`.`__r0` IS NULL OR `__joined`.`__l1` > `__joined`.`__l2`")
    stage = stages("SELECT b.auction, u.name FROM bid b JOIN auction a ON b.auction = a.id FULL JOIN users u"
                   " ON u.id = a.seller WHERE b.price > 3;")
    (_, join), = stage.inputs
    assert join.join_type == "FullOuterJoin" and "WHERE" not in to_spark_sql(join.left_query)
    assert stages("SELECT b.auction, u.name, u2.name FROM bid b JOIN auction a ON b.auction = a.id LEFT JOIN users u"
                  " ON u.id = a.seller RIGHT JOIN users u2 ON u2.id = b.bidder;") is not None
    # a comma binds looser than JOIN: b × (a ⟕ u), not nested left-deep
    assert stages("SELECT b.auction, u.name FROM bid b, auction a LEFT JOIN users u ON u.id = a.seller"
                  " WHERE b.auction = a.id;") is None


def test_several_joins_keep_their_hints_and_count_star_and_leave_temporal_joins_whole():
    from streamsql.runtime.sources import is_bounded
    from streamsql.spark.stateful.chain import compile_query
    from tests.operator_plans import DDL, SOURCES, steps

    # a STATE_TTL hint's inputs go with their join (Flink's cascade: the inner join's two
    # sides, the outer join's right side)
    stage = stages("SELECT /*+ STATE_TTL('b' = '1d', 'a' = '3d', 'u' = '2d') */ b.auction, u.name FROM bid b"
                   " LEFT JOIN auction a ON b.auction = a.id LEFT JOIN users u ON u.id = a.seller;")
    (_, outer), = stage.inputs
    (_, inner), = [(v, s) for v, s in outer.inputs if isinstance(s, CalcStage)]
    assert outer.side_ttls() == (None, 172_800_000) and inner.inputs[0][1].side_ttls() == (86_400_000, 259_200_000)
    # COUNT(*) is no star of the select list
    stage = stages("SELECT a.seller, COUNT(*) AS n FROM bid b JOIN auction a ON b.auction = a.id LEFT JOIN users u"
                   " ON u.id = a.seller GROUP BY a.seller;")
    assert isinstance(stage, AggregateStage) and stage.inputs[0][1].join_type == "LeftOuterJoin"
    # a temporal join keeps the SELECT whole (refused, as before: its versions must stay versions)
    (SOURCES / "rates.csv").touch()
    ddl = DDL + ("CREATE TEMPORARY TABLE rates (cur STRING, rate BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts,"
                 " PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = 'rates.csv',"
                 " 'format' = 'csv');")
    temporal = "JOIN rates FOR SYSTEM_TIME AS OF b.ts AS r ON r.cur = b.channel"
    for sql in (f"SELECT b.auction, r.rate, u.name FROM bid b {temporal} LEFT JOIN users u ON u.id = b.bidder;",
                f"SELECT b.auction, r.rate, u.name FROM bid b LEFT JOIN users u ON u.id = b.bidder {temporal};"):
        assert compile_query(steps(sql, ddl)[-1].plan, is_bounded) is None, sql
    assert compile_query(steps(f"SELECT b.auction, r.rate FROM bid b {temporal};", ddl)[-1].plan, is_bounded).inputs[
        0][1].temporal


def test_keys_inside_parentheses_are_keys():
    stage = stages("SELECT u.name, b.price FROM bid b LEFT JOIN users u ON (b.bidder = u.id AND b.auction = u.id);")
    (_, join), = stage.inputs
    assert join.keys == 2 and join.residual is None


def test_outer_join_conditions_beyond_the_keys():
    """One side's condition: a filter of a side that is not preserved, or a preserved side's
    keys made NULL where it fails (the row then has no partner and stays padded); a
    condition of both sides is evaluated by the join operator on each pair."""
    stage = stages("SELECT u.name, b.price FROM bid b LEFT JOIN users u ON b.bidder = u.id AND b.price > 3"
                   " AND u.name <> 'x' AND b.price < u.id * 2;")
    (_, join), = stage.inputs
    assert to_spark_sql(join.left_query).startswith(
        "SELECT CASE WHEN `b`.`price` > 3 THEN `b`.`bidder` END AS `__lk0`")
    assert to_spark_sql(join.right_query).endswith("WHERE `u`.`name` <> 'x'")
    assert join.residual == ("cmp", "<", ("col", "__l0"), ("col", "__r1"))  # u.id * 2, computed by Spark
    assert "`u`.`id` * 2 AS `__r1`" in to_spark_sql(join.right_query)
    full = stages("SELECT u.name, b.price FROM bid b FULL JOIN users u ON b.bidder = u.id AND u.name IS NOT NULL;")
    (_, join), = full.inputs
    assert to_spark_sql(join.right_query).startswith(
        "SELECT CASE WHEN NOT `u`.`name` IS NULL THEN `u`.`id` END AS `__rk0`") and join.residual is None


def test_outer_join_functions_of_both_sides():
    """Each largest part of a condition of both sides that reads one side is computed by
    Spark in that side's query; the operator compares the values and applies the functions
    of values from both sides (ABS, COALESCE, CASE, LIKE)."""
    stage = stages("SELECT a.seller, b.price FROM bid b LEFT JOIN auction a ON b.auction = a.id"
                   " AND b.ts > a.ts + INTERVAL '1' MINUTE AND ABS(b.price - a.seller * 2) < 5"
                   " AND a.category LIKE CONCAT(b.channel, '%');")
    (_, join), = stage.inputs
    assert join.residual == ("and", ("and", ("cmp", ">", ("col", "__l2"), ("col", "__r2")),
                                     ("cmp", "<", ("abs", ("arith", "-", ("col", "__l0"), ("col", "__r3"))),
                                      ("lit", 5))),
                             ("like", ("col", "__r1"), ("col", "__l1")))
    assert to_spark_sql(join.right_query).startswith(
        "SELECT `a`.`id` AS `__rk0`, `a`.`seller` AS `__r0`, `a`.`category` AS `__r1`, TIMESTAMP_MICROS(UNIX_MICROS("
        "`a`.`ts`)) + INTERVAL '1' MINUTE AS `__r2`, `a`.`seller` * 2 AS `__r3` FROM")
    assert "CONCAT(`b`.`channel`, '%') AS `__l1`" in to_spark_sql(join.left_query)
    # IS NOT DISTINCT FROM, ||, CONCAT, UPPER, GREATEST and TIMESTAMPDIFF of both sides
    stage = stages("SELECT a.seller, b.price FROM bid b LEFT JOIN auction a ON b.auction = a.id"
                   " AND (b.bidder IS NOT DISTINCT FROM a.seller OR UPPER(b.channel || a.category) = 'X')"
                   " AND GREATEST(b.price, a.seller + 1) < 9 AND TIMESTAMPDIFF(MINUTE, a.ts, b.ts) BETWEEN 0 AND 5")
    (_, join), = stage.inputs
    minutes = ("tsdiff", 60_000, ("col", "__r1"), ("col", "__l1"))
    assert join.residual == (
        "and", ("and", ("or", ("same", ("col", "__l2"), ("col", "__r0")),
                        ("cmp", "=", ("upper", ("concat", ("col", "__l3"), ("col", "__r3"))), ("lit", "X"))),
                ("cmp", "<", ("greatest", ("col", "__l0"), ("col", "__r2")), ("lit", 9))),
        ("and", ("cmp", ">=", minutes, ("lit", 0)), ("cmp", "<=", minutes, ("lit", 5))))
    # in a NOT EXISTS: a CASE of both sides, its one-side condition computed
    stage = stages("SELECT b.auction FROM bid b WHERE NOT EXISTS (SELECT * FROM users u WHERE u.id = b.bidder"
                   " AND COALESCE(u.id, 0) > CASE WHEN b.price > 3 THEN b.price ELSE u.id END);")
    (_, join), = stage.inputs
    assert join.residual == ("cmp", ">", ("col", "__r0"),
                             ("case", ((("col", "__l1"), ("col", "__l2")),), ("col", "__r1")))
    assert "`b`.`price` > 3 AS `__l1`" in to_spark_sql(join.left_query)


@pytest.mark.parametrize("sql", [
    # an outer join's condition of both sides that the operator does not evaluate: a
    # volatile function, a function of values from both sides it does not have
    "SELECT u.name, b.price FROM bid b LEFT JOIN users u ON b.bidder = u.id AND u.name > b.channel"
    " || CAST(RAND() AS STRING);",
    "SELECT u.name, b.price FROM bid b LEFT JOIN users u ON b.bidder = u.id AND REVERSE(u.name || b.channel) = 'X';",
    # no key equality at all
    "SELECT u.name, b.price FROM bid b LEFT JOIN users u ON b.bidder > u.id;",
    # an interval join stays Spark's (inner) or is not a regular join (outer)
    "SELECT a.id, b.price FROM auction a LEFT JOIN bid b ON a.id = b.auction AND b.ts BETWEEN a.ts AND"
    " a.ts + INTERVAL '10' SECOND;",
])
def test_joins_not_cut(sql):
    assert stages(sql) is None


def test_inner_join_of_inserts_stays_spark_s():
    assert stages("SELECT u.name, b.price FROM bid b JOIN users u ON b.bidder = u.id;") is None


def test_several_inner_joins_of_inserts_chain_on_spark_s_joins():
    """``a JOIN b JOIN c`` of inserts without a TTL: Spark chains its stream-stream joins
    (Nexmark q23), each input read without event time, so none drops a late row."""
    from streamsql.plan.operators import Scan, walk
    from streamsql.runtime.sources import is_bounded
    from streamsql.spark.physical import needs_stateful_operator
    from streamsql.spark.regular_joins import hide_join_times
    from tests.operator_plans import build, steps

    three = ("SELECT b.price, u.name, a.seller FROM bid b JOIN users u ON b.bidder = u.id"
             " JOIN auction a ON a.seller = b.bidder")
    assert needs_stateful_operator(build(three)) is None and stages(three + ";") is None
    assert needs_stateful_operator(build(three + " JOIN bid c ON c.auction = a.id WHERE c.price > 3")) is None
    plan = steps(three + ";")[-1].plan
    sql = to_spark_sql(hide_join_times(plan.query, plan, is_bounded))
    assert "TIMESTAMP_MICROS(UNIX_MICROS(`ts`)) AS `ts` FROM `bid`" in sql
    assert "TIMESTAMP_MICROS(UNIX_MICROS(`ts`)) AS `ts`, `expires` FROM `auction`" in sql
    for other in (three.replace("JOIN auction", "LEFT JOIN auction"),  # retracts: streamsql's join
                  three.replace("FROM bid b", "FROM (SELECT bidder, MAX(price) AS price FROM bid GROUP BY"
                                " bidder) b"),  # a changelog below
                  three.replace("JOIN users u", "JOIN auction x ON x.id = b.auction AND x.ts BETWEEN b.ts AND"
                                " b.ts + INTERVAL '1' SECOND JOIN users u")):  # an interval join below
        assert not isinstance(needs_stateful_operator(build(other)), (type(None), Scan)), other
    assert needs_stateful_operator(build(three, ttl="1 h")) is not None  # streamsql's join, nested
    assert [n.kind for n in walk(build(three))].count("Join") == 2


# -- streamed for real ---------------------------------------------------------------------------

QUERIES = {
    "left": "SELECT t.k, t.v, d.name FROM t LEFT JOIN d ON t.k = d.k",
    "full": "SELECT t.v, d.name FROM t FULL JOIN d ON t.k = d.k",
    # d carries its key alone; a padded row and its matched row look the same, so nothing retracts
    "keys_only_on_the_right": "SELECT t.v FROM t LEFT JOIN d ON t.k = d.k",
    "right_of_counts": "SELECT c.k, c.n, d.name FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) c"
                       " RIGHT JOIN d ON c.k = d.k",
    "counts_per_name": "SELECT d.name, COUNT(t.v) AS n, MAX(t.v) AS top FROM d LEFT JOIN t ON d.k = t.k"
                       " GROUP BY d.name",
    "inner_of_changelog": "SELECT c.k, c.top, d.name FROM (SELECT k, MAX(v) AS top FROM t GROUP BY k) c JOIN d"
                          " ON c.k = d.k WHERE c.top > 100",
    # ON conditions beyond the keys: of both sides (evaluated by the operator), of one side
    "left_on_both": "SELECT t.k, t.v, d.name FROM t LEFT JOIN d ON t.k = d.k AND t.v < d.lim",
    "full_on_each_side": "SELECT t.v, d.name FROM t FULL JOIN d ON t.k = d.k AND t.v > 300 AND d.name <> 'one'",
    "right_on_both": "SELECT t.v, d.name, d.lim FROM t RIGHT JOIN d ON t.k = d.k AND (t.v BETWEEN d.lim - 400"
                     " AND d.lim OR d.lim IS NULL)",
    # functions of both sides (ABS, COALESCE, CASE, LIKE), their one-side parts computed by Spark
    "left_on_functions": "SELECT t.k, t.v, d.name FROM t LEFT JOIN d ON t.k = d.k"
                         " AND ABS(t.v - COALESCE(d.lim, 500)) < 300",
    "full_on_like": "SELECT t.v, d.name FROM t FULL JOIN d ON t.k = d.k AND CONCAT('k', d.name)"
                    " LIKE CASE WHEN t.v > 500 THEN 'k%o' ELSE 'k_n%' END",
    "full_on_concat": "SELECT t.v, d.name FROM t FULL JOIN d ON t.k = d.k AND (UPPER(t.k || d.name) <> 'K1ONE'"
                      " OR d.lim IS NOT DISTINCT FROM t.v) AND GREATEST(t.v, d.lim) > 200 AND TIMESTAMPDIFF(MINUTE,"
                      " TO_TIMESTAMP_LTZ(t.v, 0), TO_TIMESTAMP_LTZ(d.lim, 0)) <> 2",
    # scalar aggregate subqueries: joins with the subquery grouped by its correlation
    "scalar_correlated": "SELECT t.k, t.v FROM t WHERE t.v > (SELECT AVG(t2.v) FROM t t2 WHERE t2.k = t.k)",
    "scalar_uncorrelated": "SELECT t.k, t.v FROM t WHERE t.v + 100 > (SELECT AVG(lim) FROM d)",
    "scalar_count_selected": "SELECT d.name, (SELECT COUNT(*) FROM t WHERE t.k = d.k AND t.v > 300) AS n FROM d",
    "scalar_three": "SELECT t.k, t.v, (SELECT MAX(t2.v) FROM t t2 WHERE t2.k = t.k) AS top, (SELECT COUNT(*) FROM d"
                    " WHERE d.k = t.k) AS dims FROM t WHERE t.v > (SELECT AVG(t3.v) FROM t t3 WHERE t3.k = t.k)",
    # IN / EXISTS: semi and anti joins, of inserts and of a changelog
    "in": "SELECT t.k, t.v FROM t WHERE t.v > 100 AND t.k IN (SELECT k FROM d WHERE name <> 'two')",
    "not_exists": "SELECT t.k, t.v FROM t WHERE NOT EXISTS (SELECT * FROM d WHERE d.k = t.k AND d.lim > t.v)",
    "in_changelog": "SELECT d.name, d.k FROM d WHERE d.k IN (SELECT k FROM t GROUP BY k HAVING MAX(v) < 900)",
    # NOT IN: NULL-aware; k2's NULL arrives with the second file of d and empties the result
    "not_in": "SELECT t.k, t.v FROM t WHERE t.k NOT IN (SELECT k FROM d WHERE lim > 400)",
    "not_in_a_null": "SELECT t.k, t.v FROM t WHERE t.k NOT IN (SELECT CASE WHEN lim IS NULL THEN NULL ELSE k END"
                     " FROM d)",
    # a correlated NOT IN: NULL-aware among the rows of d with the same key; k2's NULL lim
    # empties only k2's rows
    "not_in_correlated": "SELECT t.k, t.v FROM t WHERE t.v / 100 NOT IN (SELECT lim / 100 FROM d WHERE d.k = t.k)",
    # several joins in one SELECT: one join per level, inner then left, the same names on both sides
    "three_way": "SELECT t.k, t.v, d.name, e.k AS other FROM t JOIN d ON t.k = d.k LEFT JOIN d e ON e.name = d.name"
                 " AND e.k <> d.k WHERE t.v > 100",
    "counts_then_full": "SELECT c.k, c.n, d.lim, e.name FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k) c"
                        " JOIN d ON c.k = d.k FULL JOIN d e ON e.lim = d.lim + 300 WHERE c.n > 2 OR c.n IS NULL",
}


@pytest.mark.spark
def test_streamed_joins_end_with_the_batch_result(run, tmp_path):
    rng = random.Random(8)
    folder, dims = tmp_path / "parts", tmp_path / "dims"
    values = rng.sample(range(1000), 40)
    for i in range(4):  # Spark's file stream reads files by modification time
        rows = "".join(f"k{rng.randint(0, 6)},{values[i * 10 + j]}\n" for j in range(10))
        os.utime(write(folder / f"part-{i}.csv", rows), (time.time() - 100 + i,) * 2)
    # dims arrive later than some of t's rows, and one key (k9) never has a partner
    for i, text in enumerate(["k0,zero,300\nk1,one,900\n", "k2,two,\nk9,nine,50\n", "k3,one,600\nk1,uno,500\n"]):
        os.utime(write(dims / f"part-{i}.csv", text), (time.time() - 99 + i,) * 2)
    ddl = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{folder}',"
           f" 'format' = 'csv'); CREATE TEMPORARY TABLE d (k STRING, name STRING, lim BIGINT) WITH ('connector' = 'filesystem',"
           f" 'path' = '{dims}', 'format' = 'csv');")
    run.output(ddl)
    retracted = set()
    for name, query in QUERIES.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, name
        if ops["-D"] + ops["-U"]:
            retracted.add(name)
    assert {"left", "full", "right_of_counts", "counts_per_name", "left_on_both", "full_on_each_side",
            "right_on_both", "left_on_functions", "full_on_like", "scalar_correlated", "scalar_uncorrelated",
            "scalar_count_selected", "not_exists", "in_changelog", "not_in", "not_in_a_null", "not_in_correlated",
            "three_way", "counts_then_full"} <= retracted
    # STATE_TTL: rows expire between micro-batches (seconds apart), so the count starts
    # afresh in each and nothing is retracted; without the hint it is updated in place.
    final, ops, expected = streamed_and_batch(run, "SELECT /*+ STATE_TTL('t' = '1 ms') */ k, COUNT(*) AS n"
                                                   " FROM t GROUP BY k")
    assert ops["-U"] == 0 and ops["+I"] > len(expected) and final != expected
    # d's rows expire before t's later rows arrive: those are padded, none joined
    final, ops, expected = streamed_and_batch(run, "SELECT /*+ STATE_TTL('d' = '1 ms') */ t.v, d.name FROM t"
                                                   " LEFT JOIN d ON t.k = d.k")
    assert sum(name == "" for _, name in final) > sum(name == "" for _, name in expected)
    # several inner joins of inserts with a TTL: nested on streamsql's join, one per level;
    # a long one changes nothing, one that expires d's rows between micro-batches drops matches
    three = ("SELECT /*+ STATE_TTL({ttls}) */ t.k, t.v, d.name, e.lim FROM t JOIN d ON t.k = d.k JOIN d e"
             " ON e.name = d.name")
    final, ops, expected = streamed_and_batch(run, three.format(ttls="'t' = '1 h', 'd' = '1 h', 'e' = '1 h'"))
    assert final == expected and len(expected) > 10 and ops["-D"] + ops["-U"] == 0
    final, _, expected = streamed_and_batch(run, three.format(ttls="'d' = '1 ms'"))
    assert set(final) < set(expected)


@pytest.mark.spark
def test_a_continuous_semi_join_with_a_condition_survives_kill_9_and_drains(run, tmp_path):
    """A continuous INSERT of the rows whose key is IN a watched dimension (with a condition
    on both sides: the join operator evaluates it): rows are emitted as their partner
    arrives, state (both sides, partner counts) survives a kill -9, and a drain ends it;
    together, the batch result, each row once."""
    from tests.jobs import killed_then_drained

    source, dims, sink = tmp_path / "in", tmp_path / "dims", tmp_path / "out"

    def part(n: int) -> None:
        rows = "".join(f"{i},k{i * 7 % 9},{i * 13 % 100}\n" for i in range(n * 30, n * 30 + 30))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)
        keys = "".join(f"k{k},{k * 10}\n" for k in range(n * 3, n * 3 + 3))  # k0-k2, then k3-k5, then k6-k8
        os.utime(write(dims / f"part-{n}.csv", keys), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (id BIGINT, k STRING, v INT)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE dims (k STRING, floor INT)
  WITH ('connector' = 'filesystem', 'path' = '{dims}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (id BIGINT, k STRING, v INT)
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT id, k, v FROM src WHERE EXISTS (SELECT * FROM dims WHERE dims.k = src.k"
             " AND dims.floor <= src.v)")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=90, resumed=5, more=20)
    assert len(batch) > 40 and sorted(streamed) == sorted(batch)


@pytest.mark.spark
def test_a_continuous_three_way_inner_join_survives_kill_9_and_drains(run, tmp_path):
    """``a JOIN b JOIN c`` of watched directories with watermarks (Nexmark q23's shape) on
    Spark's chained stream-stream joins: rows as partners arrive, every row kept without a
    TTL (late ones too: a regular join drops none, as in Flink), state through a kill -9,
    and a drain; together, the batch result, each row once."""
    from tests.jobs import killed_then_drained

    source, people, sellers, sink = tmp_path / "in", tmp_path / "people", tmp_path / "sellers", tmp_path / "out"

    def part(n: int) -> None:
        # part 1's times go back behind the watermark part 0 set: late rows, which still join
        seconds = [10, 0, 20][n]
        rows = "".join(f"{i},{i % 7},2026-01-01 00:00:{seconds + i % 10:02d}\n" for i in range(n * 20, n * 20 + 20))
        os.utime(write(source / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)
        names = "".join(f"{p},p{p},2026-01-01 00:00:{seconds:02d}\n" for p in range(n * 3, n * 3 + 3))
        os.utime(write(people / f"part-{n}.csv", names), (time.time() - 100 + n,) * 2)
        items = "".join(f"{p},item{p}\n" for p in range(n * 3, n * 3 + 3))
        os.utime(write(sellers / f"part-{n}.csv", items), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE bids (id BIGINT, bidder BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE people (id BIGINT, name STRING, since TIMESTAMP(3), WATERMARK FOR since AS since)
  WITH ('connector' = 'filesystem', 'path' = '{people}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE items (seller BIGINT, item STRING)
  WITH ('connector' = 'filesystem', 'path' = '{sellers}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (id BIGINT, name STRING, item STRING, ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT b.id, p.name, i.item, b.ts FROM bids b JOIN people p ON p.id = b.bidder"
             " JOIN items i ON i.seller = b.bidder")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=1000, resumed=0, more=10)
    assert len(batch) > 10 and sorted(streamed) == sorted(batch)
    assert any(" 00:00:0" in line for line in streamed), streamed[:3]  # part 1's late rows joined
