"""Flink's STATE_TTL hint (plan.state_ttl), without Spark: read and checked at plan time,
shown by EXPLAIN per operator, and carried to the stateful operators' stages."""

from __future__ import annotations

import pytest

from streamsql.errors import ValidationError
from streamsql.plan import operators as ops
from streamsql.plan.aggregate_operators import GroupAggregate
from streamsql.plan.join_operators import Join
from streamsql.runtime.sources import is_bounded
from streamsql.spark.stateful.chain import compile_query
from streamsql.spark.stateful.stages import AggregateStage, inserts_only
from tests.operator_plans import below, build, steps


def test_a_join_s_sides_and_an_aggregate_get_their_own_ttl():
    root = build("SELECT /*+ STATE_TTL('b' = '1d', 'users' = '12 h') */ b.price, users.name FROM bid b"
                 " LEFT JOIN users ON b.bidder = users.id")
    assert below(root, Join).state == "left TTL 1d, right TTL 12 h"
    root = build("SELECT /*+ STATE_TTL('u' = '2 h') */ b.price, u.name FROM bid b JOIN users u ON b.bidder = u.id",
                 ttl="1 h")
    assert below(root, Join).state == "left TTL 1 h, right TTL 2 h"  # the other side keeps the setting
    aggregate = build("SELECT /*+ STATE_TTL('bid' = '30 min') */ auction, COUNT(*) FROM bid GROUP BY auction",
                      ttl="1 h")
    assert below(aggregate, GroupAggregate).state == "TTL 30 min"


def test_a_hint_stays_in_its_own_select():
    root = build("SELECT c.auction, c.n FROM (SELECT /*+ STATE_TTL('bid' = '1 h') */ auction, COUNT(*) AS n"
                 " FROM bid GROUP BY auction) c JOIN users u ON c.auction = u.id")
    assert below(root, Join).state == "unbounded" and below(root, GroupAggregate).state == "TTL 1 h"
    outer = build("SELECT /*+ STATE_TTL('c' = '2 h') */ n, COUNT(*) FROM (SELECT auction, COUNT(*) AS n FROM bid"
                  " GROUP BY auction) c GROUP BY n")
    assert [n.state for n in ops.walk(outer) if isinstance(n, GroupAggregate)] == ["TTL 2 h", "unbounded"]


def test_within_a_hint_the_last_value_wins_across_hints_the_first():
    root = build("SELECT /*+ STATE_TTL('b' = '1 h', 'b' = '3 h'), STATE_TTL('b' = '5 h', 'u' = '4 h') */ b.price,"
                 " u.name FROM bid b JOIN users u ON b.bidder = u.id")
    assert below(root, Join).state == "left TTL 3 h, right TTL 4 h"


def test_the_stages_carry_the_hinted_ttls():
    plan = steps("SELECT /*+ STATE_TTL('b' = '1 s', 'u' = '2 s') */ b.price, u.name FROM bid b LEFT JOIN users u"
                 " ON b.bidder = u.id;")[-1].plan
    (_, join), = compile_query(plan, is_bounded).inputs
    assert join.side_ttl_ms == (1000, 2000) and join.side_ttls() == (1000, 2000)
    plan = steps("SELECT /*+ STATE_TTL('u' = '2 s') */ b.price, u.name FROM bid b LEFT JOIN users u"
                 " ON b.bidder = u.id;")[-1].plan
    (_, join), = compile_query(plan, is_bounded, ttl_ms=5000).inputs
    assert join.side_ttls() == (5000, 2000)
    plan = steps("SELECT /*+ STATE_TTL('bid' = '3 s') */ auction, COUNT(*) FROM bid GROUP BY auction;")[-1].plan
    stage = compile_query(plan, is_bounded, ttl_ms=5000)
    assert isinstance(stage, AggregateStage) and stage.ttl_ms == 3000


def test_flink_s_join_hints_are_accepted():
    root = build("SELECT /*+ BROADCAST(u) */ b.price, u.name FROM bid b JOIN users u ON b.bidder = u.id")
    assert below(root, Join).state == "unbounded"


@pytest.mark.parametrize("sql, message, col", [
    ("SELECT /*+ STATE_TTL('x' = '1 h', 'y' = '2 h') */ auction, COUNT(*) FROM bid GROUP BY auction",
     "The options of following hints cannot match the name of input tables or views: \n`x, y` in `STATE_TTL`", 51),
    ("SELECT /*+ STATE_TTL() */ auction, COUNT(*) FROM bid GROUP BY auction",
     "Invalid STATE_TTL hint, expecting at least one key-value options specified.", 27),
    ("SELECT /*+ STATE_TTL('bid' = 'soon') */ auction, COUNT(*) FROM bid GROUP BY auction",
     "Invalid STATE_TTL duration 'soon' for 'bid'", 41),
    ("SELECT /*+ STATE_TTL(bid) */ auction, COUNT(*) FROM bid GROUP BY auction",
     "Invalid STATE_TTL hint option bid", 30),
    ("SELECT /*+ FASTER(bid) */ auction FROM bid", "Unknown hint 'FASTER(bid)'", 27),
])
def test_bad_hints_are_plan_time_errors(sql, message, col):
    """Each is shown at the SELECT's first projection, just after the hint."""
    with pytest.raises(ValidationError) as error:
        steps(sql + ";")
    assert message in error.value.message
    if col is not None:
        assert error.value.position is not None and error.value.position.col == col, error.value.position


def test_an_inner_join_of_inserts_with_a_ttl_runs_on_streamsql_s_join():
    """Spark's stream-stream join keeps its state for ever: with a TTL (hinted or set) a
    regular inner join goes to streamsql's join operator instead."""
    from streamsql.spark.physical import runs_on_stateful_operators
    from streamsql.spark.stateful.stages import JoinStage

    sql = "SELECT {hint} b.price, u.name FROM bid b JOIN users u ON b.bidder = u.id"
    assert compile_query(steps(sql.format(hint="") + ";")[-1].plan, is_bounded) is None
    assert not runs_on_stateful_operators(build(sql.format(hint="")))
    hinted = steps(sql.format(hint="/*+ STATE_TTL('u' = '1 h') */") + ";")[-1].plan
    (_, join), = compile_query(hinted, is_bounded).inputs
    assert isinstance(join, JoinStage) and join.side_ttls() == (None, 3_600_000)
    assert runs_on_stateful_operators(build(sql.format(hint=""), ttl="1 h"))
    (_, join), = compile_query(steps(sql.format(hint="") + ";")[-1].plan, is_bounded, ttl_ms=1000).inputs
    assert join.side_ttls() == (1000, 1000)
    assert inserts_only(join)  # an inner join of inserts emits inserts: it writes to any sink


def test_which_joins_emit_inserts_only():
    def stage(sql):
        return compile_query(steps(sql + ";")[-1].plan, is_bounded)

    assert inserts_only(stage("SELECT b.price FROM bid b WHERE b.bidder IN (SELECT id FROM users)"))
    assert not inserts_only(stage("SELECT b.price FROM bid b WHERE NOT EXISTS (SELECT * FROM users u"
                                  " WHERE u.id = b.bidder)"))
    assert not inserts_only(stage("SELECT b.price, u.name FROM bid b LEFT JOIN users u ON b.bidder = u.id"))
    assert not inserts_only(stage("SELECT b.price FROM bid b WHERE b.bidder IN (SELECT auction FROM bid"
                                  " GROUP BY auction HAVING COUNT(*) > 1)"))


def test_several_inner_joins_of_inserts_with_a_ttl_nest_on_streamsql_s_join():
    """``a JOIN b JOIN c`` with a TTL: one join per level, each on streamsql's join operator
    with its own sides' TTLs (a hint names the inputs of the join it belongs to)."""
    from streamsql.spark.stateful.stages import CalcStage, JoinStage

    sql = ("SELECT {hint} b.price, u.name, a.seller FROM bid b JOIN users u ON b.bidder = u.id"
           " JOIN auction a ON a.id = b.auction;")

    def joins(stage):
        found = [stage.side_ttls()] if isinstance(stage, JoinStage) else []
        return found + [t for _, inner in getattr(stage, "inputs", []) for t in joins(inner)]

    assert compile_query(steps(sql.format(hint=""))[-1].plan, is_bounded) is None  # Spark's own join
    stage = compile_query(steps(sql.format(hint=""))[-1].plan, is_bounded, ttl_ms=1000)
    assert isinstance(stage, CalcStage) and joins(stage) == [(1000, 1000), (1000, 1000)]
    hinted = steps(sql.format(hint="/*+ STATE_TTL('u' = '1 h', 'a' = '2 h') */"))[-1].plan
    assert joins(compile_query(hinted, is_bounded)) == [(None, 7_200_000), (None, 3_600_000)]


def test_equal_subqueries_but_for_a_hint_keep_their_own_ttl():
    """The cut compiles each FROM item once, looking ahead; two subqueries whose SQL differs
    only by a STATE_TTL hint (kept beside the SQL, not in it) are not taken for each other."""
    plain = "(SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction)"
    hinted = "(SELECT /*+ STATE_TTL('bid' = '1 h') */ auction, COUNT(*) AS c FROM bid GROUP BY auction)"
    sql = (f"SELECT y.auction, x.c, a.seller FROM {plain} y JOIN (SELECT h.auction, h.c FROM {hinted} h JOIN users u"
           f" ON h.auction = u.id) x ON y.auction = x.auction JOIN auction a ON a.id = y.auction;")

    def ttls(stage):
        found = [stage.ttl_ms] if isinstance(stage, AggregateStage) else []
        return found + [t for _, inner in getattr(stage, "inputs", []) for t in ttls(inner)]

    assert sorted(ttls(compile_query(steps(sql)[-1].plan, is_bounded)), key=str) == [3_600_000, None]
