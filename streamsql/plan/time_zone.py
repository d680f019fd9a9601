"""Which parts of a query depend on Flink's session time zone ('table.local-time-zone').

A TIMESTAMP is a wall-clock value, a TIMESTAMP_LTZ an instant; Flink converts between them,
and reads "now" as a wall clock, in the local time zone. The planner marks each node whose
result depends on that zone with it (``mark``), so that the Spark SQL generated for it
converts there too (spark.local_time).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.functions import FlinkCall, FlinkDateFormat

ZONE = "local_time_zone"  # the meta key of a node that reads or writes a wall clock

LTZ = (exp.DType.TIMESTAMPLTZ,)
_WALL_CLOCK_TARGETS = (exp.DType.TIMESTAMP, exp.DType.DATE, *exp.DataType.TEXT_TYPES)
# functions of a time point's wall clock (their time point is their `this`; EXTRACT's is its `expression`)
_DATE_PARTS = (exp.Year, exp.Quarter, exp.Month, exp.Week, exp.DayOfMonth, exp.DayOfWeek, exp.DayOfYear, exp.Hour,
               exp.Minute, exp.Second)
_ZONED_CALLS = ("LOCALTIMESTAMP", "FROM_UNIXTIME", "UNIX_TIMESTAMP")  # shifted by their templates (spark.functions)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def reads_zone(node: exp.Expression) -> bool:
    """Whether ``node``'s Spark SQL depends on the local time zone (the planner marks it)."""
    if isinstance(node, exp.Cast):
        source, target = type_of(node.this), node.to.this if node.to is not None else None
        return (source in LTZ and target in _WALL_CLOCK_TARGETS) or (
            source in _WALL_CLOCK_TARGETS and target in LTZ)  # a wall clock (or its text) read in the zone
    if isinstance(node, exp.Extract):
        return type_of(node.expression) in LTZ
    if isinstance(node, (*_DATE_PARTS, FlinkDateFormat)):
        return type_of(node.this) in LTZ
    if isinstance(node, exp.CurrentDate):
        return True
    if isinstance(node, (exp.Floor, exp.Ceil)):  # FLOOR(ltz TO DAY): the zone's day
        return node.args.get("to") is not None and type_of(node.this) in LTZ
    return isinstance(node, FlinkCall) and node.name in _ZONED_CALLS and (node.name != "UNIX_TIMESTAMP"
                                                                          or bool(node.expressions))


def mark(query: exp.Expression, zone: str) -> None:
    """Mark ``query``'s nodes that depend on the time zone with ``zone`` (none in UTC); a
    TIMESTAMP compared with a TIMESTAMP_LTZ gets the cast Flink's validator gives it."""
    if zone.upper() in ("UTC", "Z", "GMT", "+00:00", "UTC+00:00"):
        return
    for node in list(query.walk()):
        if isinstance(node, _COMPARISONS) and {type_of(node.this), type_of(node.expression)} == {exp.DType.TIMESTAMP, *LTZ}:
            _as_instant(node.this if type_of(node.this) == exp.DType.TIMESTAMP else node.expression, zone)
        elif reads_zone(node):
            node.meta[ZONE] = zone


def _as_instant(wall_clock: exp.Expression, zone: str) -> None:
    """A TIMESTAMP compared with a TIMESTAMP_LTZ cast to one, as Flink casts it implicitly (in
    the zone): the conversion then travels with that operand wherever the condition goes (a
    join's key, an outer join's residual, a lookup key)."""
    precision = [p.copy() for p in wall_clock.type.expressions]
    cast = exp.Cast(to=exp.DataType(this=exp.DType.TIMESTAMPLTZ, expressions=precision))
    wall_clock.replace(cast)
    cast.set("this", wall_clock)
    cast.type = cast.to.copy()
    cast.meta[ZONE] = zone


def type_of(node: exp.Expression | None):
    return node.type.this if node is not None and node.type is not None else None
