"""Which types Flink compares, rows, ARRAYs and MAPs included (Calcite's comparability).

sqlglot types a row constructor ``(auction, 123)`` as UNKNOWN, and the planner's scalar
families (``typefamilies``) leave out every nested type, so a row compared with a number
reached Spark, which refused it in its own words (``named_struct(...) = 0``). Calcite
compares a row only with a row of the same arity, field by field, and an ARRAY or a MAP
only with its own kind; a character string compares with any scalar (Calcite casts it),
never with a nested type. A type sqlglot could not infer compares with anything: a false
error is worse than none.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.typefamilies import family
from streamsql.plan.types import type_name

T = exp.DType
_NESTED = {T.STRUCT: "row", T.ARRAY: "array", T.MAP: "map"}
# Scalar families Calcite never compares (either way round).
_NOT_COMPARABLE = [({"datetime", "time"}, {"numeric", "boolean"}), ({"boolean"}, {"numeric"}),
                   ({"interval"}, {"numeric", "boolean", "datetime", "time"}),
                   ({"variant"}, {"character string", "numeric", "boolean", "datetime", "time", "binary", "interval"})]


def type_of(node: exp.Expression | None) -> exp.DataType | None:
    """A node's type; a row constructor's is a ROW of its values' types, named as Flink
    names them (EXPR$0, EXPR$1, ...), as ``ROW(...)`` is typed."""
    if isinstance(node, exp.Tuple):
        fields = [exp.ColumnDef(this=exp.to_identifier(f"EXPR${i}"), kind=type_of(e) or exp.DataType.build("UNKNOWN"))
                  for i, e in enumerate(node.expressions)]
        return exp.DataType(this=T.STRUCT, expressions=fields, nested=True)
    return None if node is None else node.type


def kind_of(data_type: exp.DataType | None) -> str | None:
    """A scalar type's family, or "row", "array", "map"; None when unknown or NULL."""
    if data_type is not None and data_type.this in _NESTED:
        return _NESTED[data_type.this]
    return family(data_type)


def comparable(left: exp.DataType | None, right: exp.DataType | None) -> bool:
    """Whether Flink compares a value of type ``left`` with one of type ``right``."""
    one, other = kind_of(left), kind_of(right)
    if one is None or other is None:
        return True
    if one in _NESTED.values() or other in _NESTED.values():
        if one != other:
            return False
        ones, others = _parts(left), _parts(right)
        if one == "row" and len(ones) != len(others):
            return False
        return all(comparable(a, b) for a, b in zip(ones, others))
    return not any((one in a and other in b) or (one in b and other in a) for a, b in _NOT_COMPARABLE)


def _parts(data_type: exp.DataType) -> list[exp.DataType | None]:
    """A row's field types, an ARRAY's element type, a MAP's key and value types."""
    parts = []
    for part in data_type.expressions:
        parts.append(part.args.get("kind") if isinstance(part, exp.ColumnDef) else part)
    return [p if isinstance(p, exp.DataType) else None for p in parts]


def flink_type_name(data_type: exp.DataType | None) -> str:
    """A type as Flink's messages show it: INTEGER, RecordType(BIGINT EXPR$0, INTEGER
    EXPR$1), INTEGER ARRAY, (STRING, INTEGER) MAP."""
    found = kind_of(data_type)
    if found == "row":
        fields = [(p.name, p.args.get("kind")) if isinstance(p, exp.ColumnDef) else ("", p)
                  for p in data_type.expressions]
        return f"RecordType({', '.join(f'{flink_type_name(t)} {n}'.rstrip() for n, t in fields)})"
    if found == "array":
        return f"{flink_type_name(_parts(data_type)[0] if data_type.expressions else None)} ARRAY"
    if found == "map" and len(data_type.expressions) == 2:
        key, value = _parts(data_type)
        return f"({flink_type_name(key)}, {flink_type_name(value)}) MAP"
    name = type_name(data_type)
    return {"INT": "INTEGER", "TEXT": "STRING"}.get(name, name)
