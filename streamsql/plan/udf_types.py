"""A Python UDF's declared Flink types as SQL text: a string ('BIGINT', 'ROW<a INT>'),
streamsql's PyFlink surface (streamsql.pyflink) or PyFlink's own DataTypes."""

from __future__ import annotations

_MAX = 2147483647
_SIMPLE = {
    "BooleanType": "BOOLEAN", "TinyIntType": "TINYINT", "SmallIntType": "SMALLINT", "IntType": "INT",
    "BigIntType": "BIGINT", "FloatType": "FLOAT", "DoubleType": "DOUBLE", "DateType": "DATE", "NullType": "NULL",
}


def type_sql(declared) -> str:
    """The Flink SQL text of one declared type; TypeError for something else."""
    if isinstance(declared, str):
        return declared
    sql = getattr(declared, "sql", None)
    if isinstance(sql, str):  # streamsql.pyflink's DataType
        return sql
    kind = type(declared).__name__
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if kind in ("VarCharType", "VarBinaryType"):
        whole = "STRING" if kind == "VarCharType" else "BYTES"
        return whole if declared.length == _MAX else f"{kind[:-4].upper()}({declared.length})"
    if kind in ("CharType", "BinaryType"):
        return f"{kind[:-4].upper()}({declared.length})"
    if kind == "DecimalType":
        return f"DECIMAL({declared.precision}, {declared.scale})"
    if kind in ("TimeType", "TimestampType"):
        return f"{kind[:-4].upper()}({declared.precision})"
    if kind == "LocalZonedTimestampType":
        return f"TIMESTAMP_LTZ({declared.precision})"
    if kind in ("ArrayType", "MultisetType"):
        return f"{kind[:-4].upper()}<{type_sql(declared.element_type)}>"
    if kind == "MapType":
        return f"MAP<{type_sql(declared.key_type)}, {type_sql(declared.value_type)}>"
    if kind == "RowType":
        return "ROW<" + ", ".join(f"`{f.name}` {type_sql(f.data_type)}" for f in declared.fields) + ">"
    raise TypeError(f"not a Flink data type: {declared!r}")


def row_fields(declared) -> list[tuple[str, str]] | None:
    """A ROW type's (name, SQL type) fields, or None for another type."""
    fields = getattr(declared, "fields", None)
    if isinstance(fields, list) and fields:
        return [(f.name, type_sql(f.data_type)) if hasattr(f, "data_type") else (f[0], type_sql(f[1])) for f in fields]
    return None
