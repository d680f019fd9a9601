"""Flink's types as sqlglot DataTypes, and type inference for expressions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify

from streamsql.dialect.flink import Flink

if TYPE_CHECKING:
    from streamsql.plan.objects import Column

PROCTIME_TYPE = exp.DataType.build("TIMESTAMP_LTZ(3)", dialect=Flink)
INTEGER_TYPES = {exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT}


def build_type(text: str) -> exp.DataType:
    """Parse a Flink type name such as 'BIGINT' or 'ROW<a INT>'."""
    return exp.DataType.build(text, dialect=Flink)


def infer_type(expression: exp.Expression, columns: list[Column]) -> exp.DataType:
    """The type of an expression over the given columns (UNKNOWN when sqlglot can't tell)."""
    select = exp.select(expression.copy()).from_("t")
    schema = {"t": {c.name: c.type.sql(dialect=Flink) for c in columns}}
    try:  # qualifying tells `row_column.field` from `table.column`
        select = qualify(select, schema=schema, dialect=Flink, quote_identifiers=False, validate_qualify_columns=False)
    except Exception:
        pass  # unknown names are reported where the expression is checked; the type stays UNKNOWN
    annotated = annotate_types(select, schema=schema, dialect=Flink)
    return annotated.selects[0].type or exp.DataType.build("UNKNOWN")


def type_name(data_type: exp.DataType | None) -> str:
    """How Flink spells a type in messages, DESCRIBE and EXPLAIN."""
    if data_type is None:
        return "UNKNOWN"
    return data_type.sql(dialect=Flink)
