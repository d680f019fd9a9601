"""What the Spark translations of Flink's built-ins share: their errors and NULL handling."""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.functions import FlinkCall
from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position

_NAMES = {"flinkdateformat": "DATE_FORMAT", "similarto": "SIMILAR TO", "currenttime": "CURRENT_TIME"}


def unsupported(e: exp.Expression, why: str) -> ValidationError:
    """The plan-time error for a form of a built-in that cannot run as Flink runs it."""
    return ValidationError(f"{call_name(e)}: {why}", start_position(e))


def call_name(e: exp.Expression) -> str:
    return e.name if isinstance(e, FlinkCall) else _NAMES.get(e.key, e.key.upper())


def null_if_any_null(args: list[str], sql: str) -> str:
    """``sql``, or NULL when any argument is NULL (Flink's rule for most functions)."""
    return f"CASE WHEN {' OR '.join(f'{a} IS NULL' for a in args)} THEN NULL ELSE {sql} END"


# Aggregates whose translation combines several Spark aggregates (a count and a collect, or a
# collect taken apart), so a FILTER goes on each of those (``filtered``), not around the whole.
COMPOSITE_AGGREGATES = ("LISTAGG", "COLLECT", "ARRAY_AGG", "JSON_ARRAYAGG")


def filters_inside(node: exp.Expression) -> bool:
    """Whether ``node``'s FILTER is applied inside its translation (``filtered``)."""
    call = node.this if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)) else node
    if not isinstance(call, FlinkCall):
        return False
    return call.name in COMPOSITE_AGGREGATES or (call.name in ("FIRST_VALUE", "LAST_VALUE") and bool(call.expressions)
                                                 and isinstance(call.expressions[0], exp.Distinct))


def filtered(self, e: FlinkCall, aggregate: str) -> str:
    """One Spark aggregate of ``e``'s translation, with ``e``'s FILTER (WHERE ...) if it has one."""
    holder = e.parent if isinstance(e.parent, (exp.IgnoreNulls, exp.RespectNulls)) else e
    if not isinstance(holder.parent, exp.Filter) or isinstance(holder.parent.parent, exp.Window) \
            or not filters_inside(holder):  # (under an OVER the FILTER stays where it is written)
        return aggregate
    where = holder.parent.expression
    return f"{aggregate} FILTER (WHERE {self.sql(where.this if isinstance(where, exp.Where) else where)})"
