"""FOR SYSTEM_TIME AS OF: which temporal joins streamsql can run with Flink's semantics.

A processing-time temporal join (AS OF a PROCTIME() column) against a bounded table is a
lookup join: each row meets the table's current content, and a bounded table that no job
changes has one content, so it is a plain join over that table. That is Nexmark q13. On a
stream the table is read as a static one (``lookup_only``): Spark's stream-static join
keeps no state, as Flink's LookupJoin keeps none, where a stream-stream join would keep
every row of the stream.
An event-time temporal join (AS OF a rowtime column) joins each row with the version of
a *versioned table* valid at the row's time: the table's row for the key with the latest
time not after the row's. The table needs a PRIMARY KEY, a rowtime attribute (its
WATERMARK) and the key in the join's equalities, as Flink's does; INNER and LEFT joins. A
versioned view (a deduplication keeping each key's last row by event time) is one too:
its versions are the rows it deduplicates (``versions``).
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
from streamsql.plan.logical_from import conjuncts
from streamsql.plan.objects import Column, TableDef, ViewDef
from streamsql.plan.positions import start_position

UNSUPPORTED = "Temporal joins (FOR SYSTEM_TIME AS OF) are not supported yet: "


def check_temporal_joins(query: exp.Expression, versioned: dict[int, TableDef | ViewDef],
                         relations: dict[str, list[Column]], derived: dict | None = None) -> None:
    """Check every `t FOR SYSTEM_TIME AS OF x` in a qualified query, then drop the clause
    (a lookup join is a plain join). ``versioned`` maps id() of the FROM item to what it
    reads; ``derived`` holds the planned queries of the views it reads (plan.derived)."""
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
            view = (derived or {}).get(table.name) if isinstance(target, ViewDef) else None
            temporal = _versioned_view(table, target, view, relations, position) if view is not None else None
            keys = _check_versioned(table, target, version.expression, position, temporal)
            if temporal is None:
                temporal = {"time": target.watermark.column}
            # Versions are kept per join key, as Flink keys its state: the primary key, and
            # any other column the ON equalities name.
            table.meta[TEMPORAL] = {"as_of": version.expression.copy(), **temporal, "key": keys}
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
        table.meta["version"] = version  # the operator plan's LookupJoin (plan.logical_from)
        table.set("version", None)
        join = table.parent
        if isinstance(join, exp.Join) and not _looks_up_by_equality(join, table.alias_or_name):
            raise ValidationError(
                f"Temporal table join requires an equality condition on fields of table '{target.name.name}':"
                f" a lookup join finds its rows by key (ON <left expression> = {table.alias_or_name}.<column>)",
                start_position(join.args["on"]) if join.args.get("on") is not None else position,
            )
        if isinstance(join, exp.Join) and join.this is table and (join.args.get("side") or "").upper() in ("", "LEFT") \
                and (join.args.get("kind") or "").upper() in ("", "INNER", "OUTER"):
            table.meta[LOOKUP] = True


TEMPORAL = "temporal"


def _looks_up_by_equality(join: exp.Join, alias: str) -> bool:
    """Whether ON has ``<expression of the left side> = <alias>.<column>`` among its conjuncts."""
    for condition in conjuncts(join.args.get("on")):
        if isinstance(condition, exp.EQ):
            for mine, other in ((condition.left, condition.right), (condition.right, condition.left)):
                if isinstance(mine, exp.Column) and mine.table == alias and not any(
                        c.table == alias for c in other.find_all(exp.Column)):
                    return True
    return False
LOOKUP = "lookup"  # the right side of an INNER or LEFT lookup join: read whole per micro-batch, no state


def lookup_only(query: exp.Expression, derived: dict) -> set[str]:
    """The relations (Spark names) a query and what it reads only ever look up: a stream
    joins them as a static table (Flink's LookupJoin keeps no state), not as another stream."""
    looked, read = set(), set()
    for relation in [query, *derived.values()]:
        if isinstance(relation, exp.Expression):
            for table in relation.find_all(exp.Table):
                (looked if table.meta.get(LOOKUP) else read).add(table.name)
        else:  # a window or MATCH_RECOGNIZE reads its input as a stream
            read.add(relation.input_name)
    return looked - read


def _check_versioned(table: exp.Table, target, as_of: exp.Expression, position, view: dict | None) -> list[str]:
    """An event-time temporal join: a versioned table (or view) on the right of an INNER or
    LEFT join whose equalities cover its primary key (Flink's rules, in Flink's words where
    it has some). The right side's columns in those equalities, in order."""
    join = table.parent
    name = target.name.name if isinstance(target, (TableDef, ViewDef)) else table.name
    if not isinstance(target, TableDef) and view is None:
        raise ValidationError(UNSUPPORTED + f"an event-time temporal join into a WITH query ('{name}'); join a"
                              " table with a PRIMARY KEY and a WATERMARK, or a versioned view", position)
    if not isinstance(join, exp.Join) or join.this is not table:
        raise ValidationError("FOR SYSTEM_TIME AS OF belongs to the right side of a JOIN", position)
    side, kind = (join.args.get("side") or "").upper(), (join.args.get("kind") or "").upper()
    if side not in ("", "LEFT") or kind not in ("", "INNER", "OUTER"):
        raise ValidationError(f"Temporal joins support INNER and LEFT joins, not {(side or kind).upper()} JOIN",
                              position)
    key = view["key"] if view is not None else target.primary_key
    if view is None and not target.primary_key:
        raise ValidationError(f"Temporal Table Join requires primary key in versioned table '{name}', but no"
                              " primary key can be found (declare PRIMARY KEY (...) NOT ENFORCED)", position)
    if view is None and target.watermark is None:
        raise ValidationError(f"Event-Time Temporal Table Join requires both primary key and row time attribute in"
                              f" versioned table '{name}', but no row time attribute can be found (declare a"
                              " WATERMARK)", position)
    alias = table.alias_or_name
    equal: dict[str, str] = {}
    on = join.args.get("on")
    for condition in conjuncts(on):
        if isinstance(condition, exp.EQ):
            for mine, other in ((condition.this, condition.expression), (condition.expression, condition.this)):
                others = {c.table for c in other.find_all(exp.Column)}
                if isinstance(mine, exp.Column) and mine.table == alias and others and alias not in others:
                    equal.setdefault(mine.name.lower(), mine.name)
    if not {k.lower() for k in key} <= set(equal):
        raise ValidationError(
            f"Temporal table's primary key [{', '.join(key)}] must be included in the equivalence"
            f" condition of temporal join, but current temporal join condition is [{on.sql() if on else ''}]",
            position)
    return list(equal.values())


def _versioned_view(table: exp.Table, target: ViewDef, query, relations: dict, position) -> dict:
    """A versioned view, as Flink defines one: a deduplication keeping each key's last row by
    event time (``SELECT .. FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t
    DESC) AS rn FROM s) WHERE rn = 1``). Its key is k, its version time t, and its versions
    are the rows it deduplicates: the view's query without the ROW_NUMBER and its filter."""
    from streamsql.plan.rank_patterns import rank_pattern

    refused = ValidationError(
        f"Temporal Table Join requires primary key in versioned table '{target.name.name}', but no primary key can"
        " be found: a view is versioned when it keeps each key's last row by event time (ROW_NUMBER() OVER"
        " (PARTITION BY key ORDER BY rowtime DESC) = 1 over an append-only input)", position)
    pattern = rank_pattern(query, lambda t: None) if isinstance(query, exp.Select) else None
    if pattern is None:
        raise refused
    inner, name, limit, rest = pattern
    call = next(p for p in inner.expressions if p.alias_or_name == name).unalias()
    order = call.args["order"].expressions if call.args.get("order") else []
    keys = [p for p in call.args.get("partition_by") or []]
    columns = {c.name: c for c in relations.get(table.alias_or_name, [])}
    if (limit != 1 or rest or len(order) != 1 or not order[0].args.get("desc") or not keys
            or not all(isinstance(k, exp.Column) and k.name in columns for k in keys)
            or not isinstance(order[0].this, exp.Column) or order[0].this.name not in columns
            or columns[order[0].this.name].type.this not in (exp.DType.TIMESTAMP, exp.DType.TIMESTAMPLTZ)
            or any(c.name == name for p in query.expressions for c in p.find_all(exp.Column))):
        raise refused
    versions = query.copy()
    versions.set("where", None)
    body = versions.args["from_"].this.this
    body.set("expressions", [p for p in body.expressions if p.alias_or_name != name])
    return {"time": order[0].this.name, "key": [k.name for k in keys], "versions": versions}


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
