"""Flink's session time zone ('table.local-time-zone') in the Spark SQL streamsql generates.

Spark's session time zone stays UTC (session.py): a TIMESTAMP holds Flink's wall-clock
value as a UTC time, a TIMESTAMP_LTZ the instant itself. Where Flink reads an instant as
the wall clock of the local time zone, or the other way round, the generated SQL shifts it
(measured on Flink 2.3 with 'Asia/Tokyo'):

- ``CAST(ltz AS TIMESTAMP | DATE | STRING)``, ``DATE_FORMAT(ltz, ...)``, ``EXTRACT(... FROM
  ltz)``, ``HOUR(ltz)`` and the other date parts: the instant's wall clock in the zone
  (``TO_TIMESTAMP_LTZ(0, 0)`` is 1970-01-01 09:00 in Tokyo, its HOUR 9);
- ``CAST(ts AS TIMESTAMP_LTZ)``: the wall clock read in the zone (09:00 is the instant 0);
- ``LOCALTIMESTAMP``, ``CURRENT_DATE``: now, on the zone's wall clock;
- ``FROM_UNIXTIME(n)`` formats the instant in the zone; ``UNIX_TIMESTAMP(s)`` reads ``s``
  as the zone's wall clock.

The planner marks the nodes that depend on the zone with it (plan.time_zone); :func:`localize`
rewrites a marked tree just before Spark SQL is generated, so the Flink SQL the plan shows
(EXPLAIN) stays as written. In UTC nothing is marked and the
generated SQL is unchanged.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.functions import FlinkCall
from streamsql.plan.time_zone import LTZ, ZONE, type_of


def localize(tree: exp.Expression) -> exp.Expression:
    """``tree`` (a copy the generator may change) with each marked node's time points shifted
    between the instant and the zone's wall clock, as Flink reads them."""
    for node in reversed(list(tree.walk(bfs=True))):  # a node after its arguments: it may copy them
        zone = node.meta.get(ZONE) if node._meta else None
        if zone is None or isinstance(node, FlinkCall):  # a call's template reads the mark (spark.functions)
            continue
        if isinstance(node, exp.Cast):
            shift = "FROM_UTC_TIMESTAMP" if type_of(node.this) in LTZ else "TO_UTC_TIMESTAMP"
            _shift(node, "this", shift, zone)
        elif isinstance(node, exp.Extract):
            _shift(node, "expression", "FROM_UTC_TIMESTAMP", zone)
        elif isinstance(node, exp.CurrentDate):
            tree = _replaced(tree, node, exp.Cast(this=now(zone), to=exp.DataType.build("DATE")))
        elif isinstance(node, (exp.Floor, exp.Ceil)):  # rounded on the wall clock, then the instant again
            _shift(node, "this", "FROM_UTC_TIMESTAMP", zone)
            rounded = _call("TO_UTC_TIMESTAMP", node.copy(), zone)
            rounded.type = node.type
            tree = _replaced(tree, node, rounded)
        else:  # a date part, DATE_FORMAT
            _shift(node, "this", "FROM_UTC_TIMESTAMP", zone)
    return tree


def _replaced(tree: exp.Expression, node: exp.Expression, replacement: exp.Expression) -> exp.Expression:
    """``node`` replaced in ``tree``; the tree is the replacement when ``node`` is its root."""
    if node is tree:
        return replacement
    node.replace(replacement)
    return tree


def now(zone: str) -> exp.Expression:
    """The current time on ``zone``'s wall clock."""
    return _call("FROM_UTC_TIMESTAMP", exp.Anonymous(this="CURRENT_TIMESTAMP", expressions=[]), zone)


def wall_clock(instant_sql: str, zone: str | None) -> str:
    """Spark SQL of an instant (a UTC TIMESTAMP) on ``zone``'s wall clock (as is without one)."""
    return instant_sql if zone is None else f"FROM_UTC_TIMESTAMP({instant_sql}, {_quoted(zone)})"


def instant(wall_clock_sql: str, zone: str | None) -> str:
    """Spark SQL of ``zone``'s wall clock read as the instant it is (as is without one)."""
    return wall_clock_sql if zone is None else f"TO_UTC_TIMESTAMP({wall_clock_sql}, {_quoted(zone)})"


def _shift(node: exp.Expression, key: str, function: str, zone: str) -> None:
    value = node.args.get(key)
    if value is None:
        return
    shifted = _call(function, value.copy(), zone)
    precision = value.type.expressions if value.type is not None else []
    shifted.type = exp.DataType(this=exp.DType.TIMESTAMP, expressions=[p.copy() for p in precision])
    node.set(key, shifted)


def _call(function: str, value: exp.Expression, zone: str) -> exp.Expression:
    return exp.Anonymous(this=function, expressions=[value, exp.Literal.string(zone)])


def _quoted(zone: str) -> str:
    return exp.Literal.string(zone).sql(dialect="spark")
