"""FOR SYSTEM_TIME AS OF: which temporal joins streamsql can run with Flink's semantics.

A processing-time temporal join (AS OF a PROCTIME() column) against a bounded table is a
lookup join: each row meets the table's current content, and a bounded table that no job
changes has one content, so it is a plain join over that table. That is Nexmark q13.
An event-time temporal join (AS OF a rowtime column) joins each row with the version of
a *versioned table* valid at the row's time: the table's row for the key with the latest
time not after the row's. The table needs a PRIMARY KEY, a rowtime attribute (its
WATERMARK) and the key in the join's equalities, as Flink's does; INNER and LEFT joins.
Its FROM item keeps what the Spark side needs in ``meta["temporal"]`` (``TEMPORAL``): the
AS OF expression, the table's time column and its key. In batch, a version is valid from
its time until the key's next version (``spark.temporal_joins``); on a stream,
streamsql's temporal join operator (``spark.stateful.temporal_join``) joins each row once
the watermark passes its time.
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
            _check_versioned(table, target, version.expression, position)
            table.meta[TEMPORAL] = {"as_of": version.expression.copy(), "time": target.watermark.column,
                                    "key": list(target.primary_key)}
            table.meta["version"] = version  # the operator plan's TemporalJoin (plan.logical_from)
            table.set("version", None)
            continue
        if not isinstance(target, TableDef) or not is_bounded(target):
            what = "a view" if isinstance(target, ViewDef) else "unbounded" if target else "a WITH query"
            raise ValidationError(
                UNSUPPORTED + f"a processing-time lookup join needs a bounded table, and "
                f"'{target.name.name if target else table.name}' is {what}",
                position,
            )
        table.set("version", None)


TEMPORAL = "temporal"


def _check_versioned(table: exp.Table, target, as_of: exp.Expression, position) -> None:
    """An event-time temporal join: a versioned table on the right of an INNER or LEFT join
    whose equalities cover its primary key (Flink's rules, in Flink's words where it has some)."""
    join = table.parent
    name = target.name.name if isinstance(target, TableDef) else table.name
    if not isinstance(target, TableDef):
        what = "a view" if isinstance(target, ViewDef) else "a WITH query"
        raise ValidationError(UNSUPPORTED + f"an event-time temporal join into {what} ('{name}'); join a table with"
                              " a PRIMARY KEY and a WATERMARK", position)
    if not isinstance(join, exp.Join) or join.this is not table:
        raise ValidationError("FOR SYSTEM_TIME AS OF belongs to the right side of a JOIN", position)
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
        raise ValidationError(f"Temporal joins support INNER and LEFT joins, not {(side or kind).upper()} JOIN",
                              position)
    if not target.primary_key:
        raise ValidationError(f"Temporal Table Join requires primary key in versioned table '{name}', but no"
                              " primary key can be found (declare PRIMARY KEY (...) NOT ENFORCED)", position)
    if target.watermark is None:
        raise ValidationError(f"Event-Time Temporal Table Join requires both primary key and row time attribute in"
                              f" versioned table '{name}', but no row time attribute can be found (declare a"
                              " WATERMARK)", position)
    alias = table.alias_or_name
    equal = set()
    on = join.args.get("on")
    for condition in (on.flatten() if isinstance(on, exp.And) else [on] if on is not None else []):
        if isinstance(condition, exp.EQ):
            for mine, other in ((condition.this, condition.expression), (condition.expression, condition.this)):
                others = {c.table for c in other.find_all(exp.Column)}
                if isinstance(mine, exp.Column) and mine.table == alias and others and alias not in others:
                    equal.add(mine.name.lower())
    if not {k.lower() for k in target.primary_key} <= equal:
        raise ValidationError(
            f"Temporal table's primary key [{', '.join(target.primary_key)}] must be included in the equivalence"
            f" condition of temporal join, but current temporal join condition is [{on.sql() if on else ''}]",
            position)


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
