"""Binding a query's names, the helpers of plan.planner: FROM items pointed at their Spark
relations, outputs named as Flink names them (EXPR$0, ...), time attributes followed through
projections, window_time grouped, and sqlglot's resolution errors given Flink's words and
the SQL position."""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import OptimizeError

from streamsql.dialect.flink import Flink
from streamsql.errors import Position, ValidationError
from streamsql.plan.objects import Column


def check_stars_have_tables(query: exp.Expression) -> None:
    """`SELECT *` without FROM has no columns to take (Flink: "SELECT * requires a FROM clause")."""
    for select in query.find_all(exp.Select):
        if not select.args.get("from_") and any(isinstance(p, exp.Star) or isinstance(p, exp.Column) and
                                                isinstance(p.this, exp.Star) for p in select.expressions):
            raise ValidationError("SELECT * requires a FROM clause")


def replace_relation(node: exp.Table, name: str, alias: str, columns: list[Column], schema: dict, relations: dict) -> exp.Table:
    """Point a FROM item at the Spark relation `name` (keeping the alias the query uses) and
    make its columns known to name resolution and time-attribute tracking."""
    schema[name] = {c.name: c.type.sql(dialect=Flink) for c in columns}
    relations[alias] = columns
    bound = exp.Table(this=exp.to_identifier(name), alias=exp.TableAlias(this=exp.to_identifier(alias)))
    node.replace(bound)
    return bound


def group_window_time(query: exp.Expression) -> None:
    """Flink lets a window aggregation select window_time while grouping by window_start
    and window_end (it is determined by them); Spark wants it grouped too."""
    for select in query.find_all(exp.Select):
        group = select.args.get("group")
        if not group:
            continue
        grouped = {(c.table, c.name) for c in group.expressions if isinstance(c, exp.Column)}
        for column in select.find_all(exp.Column):
            key = (column.table, "window_time")
            if column.name == "window_time" and (column.table, "window_end") in grouped and key not in grouped:
                group.append("expressions", exp.column("window_time", column.table))
                grouped.add(key)


def time_attribute(projection: exp.Expression, relations: dict[str, list[Column]]) -> str | None:
    """Whether an output column is still a time attribute: a plain reference to one
    (outside a regular aggregation, window_time excepted) or PROCTIME()."""
    from streamsql.dialect.functions import Proctime

    node = projection.unalias()
    if isinstance(node, Proctime):
        return "proctime"
    if not isinstance(node, exp.Column):
        return None
    select = projection.find_ancestor(exp.Select)
    if select is not None and select.args.get("group") and node.name != "window_time":
        return None
    column = next((c for c in relations.get(node.table, []) if c.name == node.name), None)
    return column.time_attribute if column else None


def merge(into: list, items: list) -> None:
    for item in items:
        if all(item is not existing for existing in into):
            into.append(item)


LABEL = "label"  # the meta key of an unnamed projection's text as written (``labels``)


def name_projections(query: exp.Query) -> None:
    """Unnamed expressions get Flink's names EXPR$0, EXPR$1, ... (by position); each keeps
    the expression as written (``labels``): the shell shows that as the column's header."""
    for select in query.find_all(exp.Select):
        for index, projection in enumerate(select.expressions):
            if isinstance(projection, (exp.Column, exp.Alias, exp.Star)):
                continue
            named = exp.alias_(projection.copy(), f"EXPR${index}", quoted=True)
            named.meta[LABEL] = projection.sql(dialect=Flink)
            projection.replace(named)


def labels(query: exp.Query, names: list[str]) -> list[str]:
    """The headers of a planned query's columns: an unnamed expression as written, else its
    name (``names``). By projection, after ``*`` and ``r.*`` were expanded."""
    return [p.meta.get(LABEL) or name for p, name in zip(query.selects, names)]


def resolution_error(error: OptimizeError) -> ValidationError:
    message = str(error)
    match = re.search(r"Line: (\d+), Col: (\d+)", message)
    message = re.sub(r"\.? ?Line: \d+, Col: \d+.*", "", message, flags=re.DOTALL).strip()
    position = None
    if match:
        name = re.search(r"Column '([^']*)'", message)
        length = len(name.group(1).strip('"`')) if name else 1
        position = Position(int(match.group(1)), max(1, int(match.group(2)) - length + 1))
    message = message.replace('"', "")
    return ValidationError(message, position)


def values_as_select(query: exp.Expression) -> exp.Expression:
    """``INSERT INTO t VALUES (...), ...``: the rows as a query of their own columns
    (``SELECT * FROM (VALUES ...) AS v(EXPR$0, ...)``), as Flink plans them."""
    if not isinstance(query, exp.Values) or not query.expressions:
        return query
    width = len(query.expressions[0].expressions)
    names = [exp.to_identifier(f"EXPR${i}") for i in range(width)]
    values = exp.Values(expressions=query.expressions, alias=exp.TableAlias(this=exp.to_identifier("v"), columns=names))
    return exp.select(exp.Star()).from_(values)


def expand_row_stars(query: exp.Expression) -> None:
    """``SELECT r.*`` of a ROW column ``r`` (typed): its fields, each named as the field,
    as Flink expands it. A ``r.*`` elsewhere than among a SELECT's projections is refused."""
    for select in list(query.find_all(exp.Select)):
        expanded = []
        for projection in select.expressions:
            star = projection.this if isinstance(projection, exp.Alias) else projection
            row = star.this if isinstance(star, exp.Dot) and isinstance(star.expression, exp.Star) else None
            kind = getattr(row, "type", None)
            if row is None or kind is None or not kind.is_type(exp.DType.STRUCT) or projection is not star:
                expanded.append(projection)
                continue
            for field in kind.expressions:
                value = exp.Dot(this=row.copy(), expression=exp.to_identifier(field.name))
                value.type = field.args["kind"].copy()
                alias = exp.alias_(value, field.name)
                alias.type = value.type
                expanded.append(alias)
        select.set("expressions", expanded)
