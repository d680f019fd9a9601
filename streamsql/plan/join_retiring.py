"""Which rows of a regular join's side the watermark retires: those no row still to come on
the other side can match.

Flink's regular join keeps both sides for the job's life (or a TTL). Nexmark q7 joins every
bid with its window's maximum, ``B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND
B1.dateTime`` where ``B1.dateTime`` is a TUMBLE aggregate's ``window_end``: no interval join
(``window_end`` is no time attribute), so every bid stays in Flink's state. Yet a window
aggregate emits a window once the watermark passes its end and drops the rows of windows
already fired, so every row it emits later has a ``window_end`` past the watermark of the
micro-batch the join is in now. When an inner join's conditions say

    other.window_end <= side.t + c        (or <; or side.t >= other.window_end - c; or BETWEEN)

a row of ``side`` whose ``t + c`` the watermark has passed matches nothing still to come:
dropping it leaves the join's output exactly Flink's. ``other`` must be an event-time window
aggregate over rows of no other window aggregate (a cascade's windows fire with the same
watermark as the rows they take in). The side must be insert-only (a row that goes never owes
a retraction): the join's ``state`` says so only then, and the stateful join keeps the rows
of such a side only (``spark.stateful.join_expiry``).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.windows import interval_ms


def retired_sides(conditions: list[exp.Expression], lscope, rscope, left, right) -> tuple:
    """Per side (left, right): (its alias, its time column, c in ms, the other side's window
    end column) when the conditions bound that window end by the side's time plus c, else None."""
    from streamsql.plan.aggregate_operators import WindowAggregate
    from streamsql.plan.operators import Calc, walk

    def window_aggregate(op) -> bool:
        while isinstance(op, Calc):
            op = op.inputs[0]
        return (isinstance(op, WindowAggregate) and op.window is not None and not op.window.proctime
                and not any(isinstance(n, WindowAggregate) for i in op.inputs for n in walk(i)))

    scopes, operators = (lscope, rscope), (left, right)
    found: list = [None, None]
    for small, big in at_most(conditions):
        a, b = linear(small), linear(big)
        if a is None or b is None:
            continue
        sides = [next((i for i, s in enumerate(scopes) if node.table in s.aliases and s.lookup(node)), None)
                 for node in (a[0], b[0])]
        if None in sides or sides[0] == sides[1]:
            continue
        other, side = sides
        end = scopes[other].lookup(a[0])
        if end.window is None or end.window.role != "end" or not window_aggregate(operators[other]):
            continue
        if found[side] is None:
            found[side] = (b[0].table, b[0].name, b[1] - a[1], a[0].name)  # window_end <= t + c
    return tuple(found)


def at_most(conditions: list[exp.Expression]):
    """Each comparison ``small <= big`` (or ``<``) the conditions state, as (small, big)."""
    for condition in conditions:
        while isinstance(condition, exp.Paren):
            condition = condition.this
        if isinstance(condition, exp.Between):
            yield condition.args["low"], condition.this
            yield condition.this, condition.args["high"]
        elif isinstance(condition, (exp.LTE, exp.LT)):
            yield condition.this, condition.expression
        elif isinstance(condition, (exp.GTE, exp.GT)):
            yield condition.expression, condition.this


def linear(node: exp.Expression) -> tuple[exp.Column, int] | None:
    """(the qualified column, ms) for ``table.column`` plus or minus an interval literal."""
    node = _plain(node)
    offset = 0
    if isinstance(node, (exp.Add, exp.Sub)):
        this, other = node.this, node.expression
        if isinstance(node, exp.Add) and isinstance(this, exp.Interval):
            this, other = other, this
        if not isinstance(other, exp.Interval):
            return None
        try:
            offset = interval_ms(other, "an interval")
        except ValidationError:  # not a literal: no bound
            return None
        offset = -offset if isinstance(node, exp.Sub) else offset
        node = _plain(this)
    if not isinstance(node, exp.Column) or not node.table:
        return None
    return node, offset


def _plain(node: exp.Expression) -> exp.Expression:
    """``node`` without parentheses, and a time column without the wrapping that makes it a
    plain timestamp to Spark's join (``spark.regular_joins.hide_join_times``, whose queries
    are planned again when cut into stages)."""
    while True:
        if isinstance(node, exp.Paren):
            node = node.this
        elif isinstance(node, exp.Anonymous) and str(node.this).lower() == "timestamp_micros" \
                and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.UnixMicros):
            node = node.expressions[0].this
        else:
            return node
