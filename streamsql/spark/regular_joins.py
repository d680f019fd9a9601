"""Regular joins on Spark streaming keep every row, as Flink's do.

A Flink join whose condition does not bound both rowtimes against each other with
constants (an interval join) or join windows is a *regular* join: its time attributes
become plain timestamps, it keeps both sides (TTL or unbounded) and drops nothing for
being late. Spark, given a condition that relates two event-time columns with watermarks
(``b.ts BETWEEN a.ts AND a.expires``), derives a state watermark from it: it evicts rows
and drops input rows behind that watermark, and matches are lost (Nexmark q4 lost three
quarters of its auctions that way).

So the streaming SQL of a regular join refers to the time attributes in its conditions
through ``timestamp_micros(unix_micros(t))``: the same value, which Spark's join cannot
read a state watermark from. Interval and window joins are left as they are: their
watermark-bounded state is Flink's too.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.steps import spark_name


def hide_join_times(query: exp.Expression, plan, bounded, time_columns: set[str] | None = None) -> exp.Expression:
    """A copy of ``query`` (part of ``plan``, a QueryPlan) whose regular joins' conditions
    read the sources' rowtime columns opaquely."""
    from streamsql.plan.logical import Builder

    times = {n.lower() for n in (time_columns if time_columns is not None else rowtime_columns(plan))}
    copy = query.copy()
    if not times or not any(isinstance(n, exp.Join) for n in query.walk()):
        return copy
    builder = Builder(plan, bounded)
    try:
        builder.query(query)
    except Exception:  # the operator plan was built (and checked) before; never fail here
        return copy
    selects = {id(node.parent): node.parent for original, node in zip(query.walk(), copy.walk())
               if isinstance(original, exp.Join) and id(original) in builder.regular_joins
               and isinstance(node.parent, exp.Select)}
    tables = {spark_name(t.name).lower(): t for t in plan.tables if t.watermark is not None}
    for select in selects.values():
        _hide(select, times)
        for item in [select.args.get("from_")] + list(select.args.get("joins") or []):
            if item is not None:
                _plain_input(item.this, tables, times)
    return copy


def _plain_input(source: exp.Expression, tables: dict, times: set[str]) -> None:
    """A join input without event-time columns: Spark's stream-stream join drops input rows
    behind the watermark when its input has one, whatever the condition; Flink's regular
    join drops nothing. A temporal join's versioned table stays as it is (its meta marks
    the join)."""
    from streamsql.plan.temporal import TEMPORAL

    if source.meta.get(TEMPORAL):
        return
    if isinstance(source, exp.Table) and not source.db and source.name.lower() in tables:
        table = tables[source.name.lower()]
        projections = [_opaque(exp.column(c.name), c.name) if c.name.lower() in times else exp.column(c.name)
                       for c in table.columns]
        body = exp.select(*projections).from_(exp.Table(this=source.this.copy()))
        source.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(source.alias_or_name))))
    elif isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
        for projection in source.this.expressions:
            inner = projection.unalias()
            if isinstance(inner, exp.Column) and inner.name.lower() in times:
                projection.replace(_opaque(inner.copy(), projection.alias_or_name))


def _opaque(column: exp.Expression, name: str) -> exp.Expression:
    return exp.alias_(exp.func("timestamp_micros", exp.func("unix_micros", column)), name)


def rowtime_columns(plan) -> set[str]:
    return {t.watermark.column for t in plan.tables if t.watermark is not None}


def _hide(select: exp.Select, times: set[str]) -> None:
    """The SELECT of a regular join reads its time attributes as plain timestamps, in its
    conditions (no state watermark) and its output (Flink materialises them: one stream
    with two event-time columns is an error to Spark's stateful operators)."""
    for column in list(select.find_all(exp.Column)):
        if column.find_ancestor(exp.Select) is not select or column.name.lower() not in times or _hidden(column):
            continue
        opaque = exp.func("timestamp_micros", exp.func("unix_micros", column.copy()))
        if column.parent is select:  # a bare projection keeps its name
            opaque = exp.alias_(opaque, column.name)
        column.replace(opaque)


def _hidden(column: exp.Column) -> bool:
    return isinstance(column.parent, exp.UnixMicros)
