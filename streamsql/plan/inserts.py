"""INSERT INTO t [(columns)] SELECT ...: which query column feeds which table column.

Flink maps an INSERT's column list by name: the listed columns take the query's columns in
order, every other physical column gets NULL (an error when it is NOT NULL or part of the
primary key). A query column must be of a type Flink casts implicitly to its target's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.objects import Column, TableDef, identifier_position
from streamsql.plan.positions import start_position
from streamsql.plan.typefamilies import implicitly_castable
from streamsql.plan.types import type_name

if TYPE_CHECKING:
    from streamsql.plan.steps import QueryPlan


def insert_sources(table: TableDef, listed: list[exp.Identifier] | None, plan: QueryPlan) -> list[str | None]:
    """For each physical column of `table` (in its order), the query output column that feeds
    it, or None for NULL."""
    physical = table.physical_columns
    names = [c.name for c in physical]
    if listed is None:
        wanted = names
    else:
        wanted = []
        for identifier in listed:
            name = identifier.name
            if name not in names:
                raise ValidationError(
                    f"INSERT INTO {table.name.name}: unknown target column '{name}' (columns: {', '.join(names)})",
                    identifier_position(identifier),
                )
            if name in wanted:
                raise ValidationError(
                    f"INSERT INTO {table.name.name}: target column '{name}' is listed twice", identifier_position(identifier)
                )
            wanted.append(name)
    if len(wanted) != len(plan.columns):
        raise ValidationError(
            f"INSERT INTO {table.name.name}: the query produces {len(plan.columns)} column(s)"
            f" but the target takes {len(wanted)} ({', '.join(wanted)})"
        )
    feeding = dict(zip(wanted, plan.columns))
    for column in physical:
        if column.name not in feeding and (column.not_null or column.name in table.primary_key):
            why = "part of the PRIMARY KEY" if column.name in table.primary_key else "NOT NULL"
            raise ValidationError(
                f"INSERT INTO {table.name.name}: column '{column.name}' is {why} and must be given a value"
                f" (add it to the column list: {', '.join(wanted)})",
                start_position(listed[0]) if listed else None,
            )
    for index, name in enumerate(wanted):
        _check_type(table, table.column(name), plan.columns[index], _projection(plan, index))
    return [feeding[c.name].name if c.name in feeding else None for c in physical]


def _projection(plan: QueryPlan, index: int) -> exp.Expression | None:
    selects = plan.query.selects
    return selects[index] if index < len(selects) else None


def _check_type(table: TableDef, target: Column, source: Column, projection: exp.Expression | None) -> None:
    if implicitly_castable(source.type, target.type):
        return
    raise ValidationError(
        f"INSERT INTO {table.name.name}: incompatible types for sink column '{target.name}': the query's"
        f" column '{source.name}' is {type_name(source.type)}, the column is {type_name(target.type)};"
        f" Flink does not cast {type_name(source.type)} to {type_name(target.type)} implicitly"
        f" (write CAST(... AS {type_name(target.type)}))",
        start_position(projection),
    )
