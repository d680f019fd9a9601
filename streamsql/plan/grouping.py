"""Flink's rule for an aggregating SELECT: every column outside an aggregate is grouped.

``SELECT a, b FROM t GROUP BY a`` (or ``SELECT a, COUNT(*) FROM t``) is refused by Flink's
validator: "Expression 'b' is not being grouped". sqlglot reads it, and Spark refused it
only once the query ran, without a position. Checked here on the qualified query: in an
aggregating SELECT (a GROUP BY, or an aggregate in its projections or HAVING), each
projection and the HAVING condition must be built from grouped expressions (those of the
GROUP BY, its GROUPING SETS, ROLLUP and CUBE included), aggregates and constants.

Left to the validators after this one (lenient here): subqueries, OVER aggregates, and
ORDER BY (which may name a projection's alias).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position

# Wrappers an aggregate call may sit in: COUNT(*) FILTER (WHERE ...), LISTAGG(...) WITHIN GROUP, ...
_AGGREGATE_WRAPPERS = (exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)


def aggregate_calls(select: exp.Select) -> list[exp.Expression]:
    """Aggregate calls of this SELECT (not of its subqueries, not OVER windows)."""
    return [agg for agg in select.find_all(exp.AggFunc)
            if agg.find_ancestor(exp.Select) is select and not agg.find_ancestor(exp.Window)]


def check_grouping(query: exp.Expression) -> None:
    for select in query.find_all(exp.Select):
        group = select.args.get("group")
        if group is None and not aggregate_calls(select):
            continue
        grouped = _grouped(group)
        having = select.args.get("having")
        items = [s.this if isinstance(s, exp.Alias) else s for s in select.expressions]
        for expression in items + ([having.this] if having else []):
            stray = _ungrouped(expression, grouped)
            if stray is not None:
                raise ValidationError(f"Expression '{stray.name}' is not being grouped", start_position(stray))


def _grouped(group: exp.Group | None) -> list[exp.Expression]:
    if group is None:
        return []
    found = []
    for key in group.expressions:
        if isinstance(key, (exp.GroupingSets, exp.Rollup, exp.Cube)):
            found += [e for e in key.find_all(exp.Expression) if not isinstance(e, (exp.Tuple, exp.Paren))]
        else:
            found.append(key)
    return found


def _is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, _AGGREGATE_WRAPPERS):
        return _is_aggregate(node.this)
    return isinstance(node, exp.AggFunc) and not isinstance(node.parent, exp.Window)


def _ungrouped(node: exp.Expression, grouped: list[exp.Expression]) -> exp.Column | None:
    """The first column of ``node`` neither grouped nor inside an aggregate, or None."""
    if any(node == g for g in grouped) or _is_aggregate(node):
        return None
    if isinstance(node, (exp.Subquery, exp.Window, exp.Select, exp.Exists)):
        return None
    if isinstance(node, exp.Column):
        return node
    for child in node.iter_expressions():
        stray = _ungrouped(child, grouped)
        if stray is not None:
            return stray
    return None


def group_ids(query: exp.Expression) -> None:
    """``GROUP_ID()``: which copy of a repeated grouping set a row comes from — 0 when none
    repeats (Flink's value then), so it is that constant, a BIGINT. A repeated grouping set
    is refused with it: Flink 2.3 numbers the copies but shows the second one's rows with
    the other sets' keys filled in, which is no result to reproduce."""
    for call in list(query.find_all(exp.Anonymous)):
        if call.name.upper() != "GROUP_ID" or call.expressions:
            continue
        select = call.find_ancestor(exp.Select)
        group = select.args.get("group") if select is not None else None
        if group is None and (select is None or not aggregate_calls(select)):
            raise ValidationError("GROUP_ID() is only allowed in an aggregate query", start_position(call))
        seen = set()
        for key in group.expressions if group is not None else ():
            for grouping in key.expressions if isinstance(key, exp.GroupingSets) else ():
                members = grouping.expressions if isinstance(grouping, exp.Tuple) else [grouping.unnest()]
                written = tuple(sorted(m.sql() for m in members))
                if written in seen:
                    raise ValidationError("GROUP_ID() is not supported with a grouping set written twice (Flink 2.3"
                                          " shows the second copy's rows with other sets' keys)", start_position(call))
                seen.add(written)
        call.replace(exp.cast(exp.Literal.number(0), exp.DataType.build("BIGINT")))
