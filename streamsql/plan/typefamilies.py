"""Flink's type families, and which casts Flink makes implicitly (LogicalTypeCasts).

Only what the planner needs to refuse what Flink's validator refuses: a value of one
family where another is wanted. Within a family (INT into BIGINT, TIMESTAMP into
TIMESTAMP_LTZ) the planner does not judge, because sqlglot's inferred types are not
always Flink's exact ones, and a false error is worse than none.
"""

from __future__ import annotations

from sqlglot import exp

T = exp.DType
CHARACTER = {T.CHAR, T.NCHAR, T.VARCHAR, T.NVARCHAR, T.TEXT}
NUMERIC = {T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.DECIMAL, T.FLOAT, T.DOUBLE, T.BIGDECIMAL, T.UBIGINT,
           T.UINT, T.USMALLINT, T.UTINYINT, T.INT128, T.INT256}
DATETIME = {T.DATE, T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMPLTZ, T.TIMESTAMPTZ, T.DATETIME}
FAMILIES = {
    "character string": CHARACTER,
    "numeric": NUMERIC,
    "boolean": {T.BOOLEAN},
    "datetime": DATETIME,
    "time": {T.TIME},
    "binary": {T.BINARY, T.VARBINARY},
    "interval": {T.INTERVAL},
    "variant": {T.VARIANT},
}


def family(data_type: exp.DataType | None) -> str | None:
    """A known type's family; None when the type is unknown, NULL, or nested (ROW, ARRAY, MAP)."""
    if data_type is None:
        return None
    return next((name for name, types in FAMILIES.items() if data_type.this in types), None)


def implicitly_castable(source: exp.DataType | None, target: exp.DataType | None) -> bool:
    """Whether Flink writes a value of `source` type into a `target` column without a CAST:
    only within a family (and a DATE into a TIMESTAMP). Unknown types pass."""
    source_family, target_family = family(source), family(target)
    if source_family is None or target_family is None or source_family == target_family:
        return True
    return False
