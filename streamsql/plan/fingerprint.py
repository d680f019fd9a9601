"""A job's plan fingerprint: what must stay the same for a job to resume from its state.

A streaming INSERT keeps state (Spark's offsets and operator state, and the record of
what it has written); resuming it under a different query would mix two queries'
results. The fingerprint covers what decides the result: the INSERT's query as written
(normalised, so spacing, comments and keyword case do not count), the definitions of the
views it reads (recursively), the schemas and time attributes of the tables it reads,
and the target's columns. It does not cover how streamsql translates the query to Spark,
so a new streamsql version that generates different Spark SQL resumes the same jobs.
"""

from __future__ import annotations

import hashlib

from sqlglot import exp

from streamsql.dialect.flink import Flink
from streamsql.plan.objects import TableDef, ViewDef, object_name


def plan_fingerprint(query: exp.Query, target: TableDef, catalog) -> str:
    parts = [_normalised(query), "target:" + _schema(target)]
    seen: set = set()
    _relations(query, catalog, (catalog.current_catalog, catalog.current_database), parts, seen)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _relations(query: exp.Expression, catalog, current: tuple[str, str], parts: list[str], seen: set) -> None:
    ctes = {cte.alias for cte in query.find_all(exp.CTE)}
    for table in query.find_all(exp.Table):
        if not table.name or (table.name in ctes and not table.db):
            continue
        try:
            name = object_name(table, current[1], current[0])
        except Exception:  # the planner has reported bad names already
            continue
        if name in seen:
            continue
        seen.add(name)
        obj = catalog.get(name)
        if isinstance(obj, ViewDef):
            parts.append(f"view {name}: {_normalised(obj.query)}")
            _relations(obj.query, catalog, (name.catalog, name.database), parts, seen)
        elif isinstance(obj, TableDef):
            parts.append(f"table {name}: {_schema(obj)}")


def _schema(table: TableDef) -> str:
    columns = ", ".join(
        f"{c.name} {c.type.sql(dialect=Flink)}" + (f" AS {_normalised(c.expression)}" if c.is_computed else "")
        + (f" METADATA FROM {c.metadata}{' VIRTUAL' if c.virtual else ''}" if c.metadata else "")
        for c in table.columns
    )
    watermark = f" WATERMARK {table.watermark.column} AS {_normalised(table.watermark.expression)}" if table.watermark else ""
    return columns + watermark


def _normalised(node: exp.Expression) -> str:
    return node.sql(dialect=Flink, pretty=False, comments=False)
