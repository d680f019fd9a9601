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
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)


def reads_zone(node: exp.Expression) -> bool:
    """Whether ``node``'s Spark SQL depends on the local time zone (the planner marks it)."""
    if isinstance(node, exp.Cast):
        source, target = type_of(node.this), node.to.this if node.to is not None else None
        return (source in LTZ and target in _WALL_CLOCK_TARGETS) or (
            source == exp.DType.TIMESTAMP and target in LTZ)
    if isinstance(node, exp.Extract):
        return type_of(node.expression) in LTZ
    if isinstance(node, (*_DATE_PARTS, FlinkDateFormat)):
        return type_of(node.this) in LTZ
    if isinstance(node, exp.CurrentDate):
        return True
    if isinstance(node, (exp.Floor, exp.Ceil)):  # FLOOR(ltz TO DAY): the zone's day
        return node.args.get("to") is not None and type_of(node.this) in LTZ
    if isinstance(node, COMPARISONS):  # a TIMESTAMP compared with a TIMESTAMP_LTZ is read in the zone
        return {type_of(node.this), type_of(node.expression)} == {exp.DType.TIMESTAMP, *LTZ}
    return isinstance(node, FlinkCall) and node.name in _ZONED_CALLS and (node.name != "UNIX_TIMESTAMP"
                                                                          or bool(node.expressions))


def mark(query: exp.Expression, zone: str) -> None:
    """Mark ``query``'s nodes that depend on the time zone with ``zone`` (none in UTC)."""
    if zone.upper() in ("UTC", "Z", "GMT", "+00:00", "UTC+00:00"):
        return
    for node in query.walk():
        if reads_zone(node):
            node.meta[ZONE] = zone


def type_of(node: exp.Expression | None):
    return node.type.this if node is not None and node.type is not None else None
