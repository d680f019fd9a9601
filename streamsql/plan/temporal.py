"""FOR SYSTEM_TIME AS OF: which temporal joins streamsql can run with Flink's semantics.

A processing-time temporal join (AS OF a PROCTIME() column) against a bounded table is a
lookup join: each row meets the table's current content, and a bounded table that no job
changes has one content, so it is a plain join over that table. That is Nexmark q13.
An event-time temporal join (AS OF a rowtime column) joins each row with the version of
the table valid at the row's time; run as a plain join it would be silently wrong, so it
is refused until it gets those semantics.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.connectors import is_bounded
from streamsql.plan.objects import Column, TableDef, ViewDef
from streamsql.plan.positions import start_position

UNSUPPORTED = "Temporal joins (FOR SYSTEM_TIME AS OF) are not supported yet: "


def check_temporal_joins(query: exp.Expression, versioned: dict[int, TableDef | ViewDef],
                         relations: dict[str, list[Column]]) -> None:
    """Check every `t FOR SYSTEM_TIME AS OF x` in a qualified query, then drop the clause
    (a lookup join is a plain join). ``versioned`` maps id() of the FROM item to what it reads."""
    for table in list(query.find_all(exp.Table)):
        version = table.args.get("version")
        if version is None:
            continue
        position = start_position(version.expression)
        target = versioned.get(id(table))
        time_attribute = _time_attribute(version.expression, table.find_ancestor(exp.Select), relations)
        if time_attribute is None:
            raise ValidationError(
                "FOR SYSTEM_TIME AS OF needs a time attribute of the left table (a PROCTIME() column for a"
                f" lookup join), not {version.expression.sql()}",
                position,
            )
        if time_attribute == "rowtime":
            raise ValidationError(
                UNSUPPORTED + f"an event-time temporal join (AS OF the rowtime column {version.expression.sql()})"
                " would run as a plain join, matching every version of the table; join on the time explicitly,"
                " or use a PROCTIME() column for a lookup join into a bounded table",
                position,
            )
        if not isinstance(target, TableDef) or not is_bounded(target):
            what = "a view" if isinstance(target, ViewDef) else "unbounded" if target else "a WITH query"
            raise ValidationError(
                UNSUPPORTED + f"a processing-time lookup join needs a bounded table, and "
                f"'{target.name.name if target else table.name}' is {what}",
                position,
            )
        table.set("version", None)


def _time_attribute(expression: exp.Expression, select: exp.Select | None,
                    relations: dict[str, list[Column]]) -> str | None:
    """Whether a column the AS OF names is a time attribute ('rowtime'/'proctime'), following
    subqueries of the FROM clause down to the tables they read."""
    from streamsql.dialect.functions import Proctime

    expression = expression.unalias() if isinstance(expression, exp.Alias) else expression
    if isinstance(expression, Proctime):
        return "proctime"
    if not isinstance(expression, exp.Column) or select is None:
        return None
    sources = [select.args.get("from_")] + list(select.args.get("joins") or [])
    for source in (s.this for s in sources if s is not None):
        if source.alias_or_name != expression.table:
            continue
        if isinstance(source, exp.Subquery):
            inner = source.this
            while isinstance(inner, exp.SetOperation):
                inner = inner.this
            if not isinstance(inner, exp.Select):
                return None
            projection = next((p for p in inner.selects if p.alias_or_name == expression.name), None)
            if projection is None or (inner.args.get("group") and expression.name != "window_time"):
                return None
            return _time_attribute(projection.unalias(), inner, relations)
        column = next((c for c in relations.get(source.alias_or_name, []) if c.name == expression.name), None)
        return column.time_attribute if column else None
    return None
