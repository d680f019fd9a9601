"""Flink's 'avro' format: the Avro schema a table's columns are written and read with.

Flink derives the schema from the row type (its AvroSchemaConverter, with the default
'avro.timestamp_mapping.legacy' = 'true'), and so does streamsql, so that a record one
writes the other reads: a record ``org.apache.flink.avro.generated.record`` with one field
per column in order; a nullable column is the union ``["null", T]`` with default null, a
NOT NULL one is ``T``; a ROW is a nested record named after the path to it
(``record_<field>``, ``record_<field>_<inner>``); an ARRAY's items and a MAP's values are
nullable unions unless NOT NULL. Checked against the bytes Flink 2.3 writes into Kafka.

Types: BOOLEAN boolean; TINYINT, SMALLINT, INT int; BIGINT long; FLOAT float; DOUBLE
double; CHAR, VARCHAR, STRING string; BINARY, VARBINARY, BYTES bytes; DECIMAL(p, s) bytes
with the decimal logical type; DATE int (date); TIME(p <= 3) int (time-millis);
TIMESTAMP(p <= 3) long (timestamp-millis); MULTISET<T> a map of T to int. Refused, in
Flink's words where it has some: TIMESTAMP or TIME above millisecond precision,
TIMESTAMP_LTZ (Flink's legacy mapping has none), a MAP whose keys are not strings.
"""

from __future__ import annotations

import json

from streamsql.errors import ConnectorError
from streamsql.plan.objects import Column, TableDef
from streamsql.plan.types import type_name

NAMESPACE = "org.apache.flink.avro.generated"
ROW_NAME = "record"
# Flink's avro format options, and the only values streamsql implements
OPTIONS = {"encoding": "binary", "timestamp_mapping.legacy": "true"}
_PLAIN = {"BOOLEAN": "boolean", "TINYINT": "int", "SMALLINT": "int", "INT": "int", "BIGINT": "long",
          "FLOAT": "float", "DOUBLE": "double", "VARCHAR": "string", "CHAR": "string", "TEXT": "string",
          "NCHAR": "string", "NVARCHAR": "string", "BINARY": "bytes", "VARBINARY": "bytes", "BLOB": "bytes"}


def avro_schema(columns: list[Column]) -> dict:
    """The record schema of ``columns`` (the row itself is never null)."""
    return _record(f"{NAMESPACE}.{ROW_NAME}", [(c.name, c.type, not c.not_null) for c in columns])


def avro_schema_json(columns: list[Column]) -> str:
    return json.dumps(avro_schema(columns), separators=(",", ":"))


def check_avro(table: TableDef, columns: list[Column], option_prefix: str) -> None:
    """A ConnectorError for a column 'avro' cannot carry, or an avro option streamsql lacks."""
    for column in columns:
        reason = _unsupported(column.type)
        if reason:
            raise ConnectorError(f"Table '{table.name.name}': format 'avro' cannot carry column '{column.name}':"
                                 f" {reason}")
    for key, value in table.options.items():
        option = key.removeprefix(option_prefix)
        if option.startswith("avro."):
            name = option[len("avro."):]
            if name not in OPTIONS:
                raise ConnectorError(f"Table '{table.name.name}': unsupported option '{key}' for format 'avro'"
                                     f" (supported: {', '.join(repr(f'avro.{o}') for o in OPTIONS)})")
            if value.strip().lower() != OPTIONS[name]:
                raise ConnectorError(f"Table '{table.name.name}': option '{key}' = '{value}' is not supported"
                                     f" (only '{OPTIONS[name]}'; remove the option)")


def _unsupported(dtype) -> str | None:
    name = dtype.this.name
    if name in ("TIMESTAMPLTZ", "TIMESTAMPTZ"):
        return f"Unsupported to derive Schema for type: {type_name(dtype)} (Flink's legacy timestamp mapping)"
    if name in ("TIMESTAMP", "TIMESTAMPNTZ", "TIME") and _precision(dtype) > 3:
        kind = "TIME" if name == "TIME" else "TIMESTAMP"
        return (f"Avro does not support {kind} type with precision: {_precision(dtype)}, it only supports"
                " precision up to 3")
    if name == "MAP":
        if not dtype.expressions[0].is_type("text", "varchar", "char"):
            return f"Avro format doesn't support non-string as key type of map: {type_name(dtype)}"
        return _unsupported(dtype.expressions[1])
    if name in ("ARRAY", "MULTISET"):
        return _unsupported(dtype.expressions[0])
    if name == "STRUCT":
        return next((r for r in (_unsupported(f.args["kind"]) for f in dtype.expressions) if r), None)
    if name not in _PLAIN and name not in ("DECIMAL", "DATE", "TIME", "TIMESTAMP", "TIMESTAMPNTZ"):
        return f"type {type_name(dtype)} has no Avro mapping"
    return None


def _record(name: str, fields: list[tuple]) -> dict:
    return {"type": "record", "name": name,
            "fields": [_field(f, dtype, nullable, name) for f, dtype, nullable in fields]}


def _field(name: str, dtype, nullable: bool, row_name: str) -> dict:
    field = {"name": name, "type": _nullable(_type(dtype, f"{row_name}_{name}"), nullable)}
    if nullable:
        field["default"] = None
    return field


def _nullable(schema, nullable: bool):
    return ["null", schema] if nullable else schema


def _type(dtype, row_name: str):
    name = dtype.this.name
    if name in _PLAIN:
        return _PLAIN[name]
    if name == "DECIMAL":
        sizes = [int(e.name) for e in dtype.expressions] or [10, 0]
        return {"type": "bytes", "logicalType": "decimal", "precision": sizes[0], "scale": sizes[1] if len(sizes) > 1 else 0}
    if name == "DATE":
        return {"type": "int", "logicalType": "date"}
    if name == "TIME":
        return {"type": "int", "logicalType": "time-millis"}
    if name in ("TIMESTAMP", "TIMESTAMPNTZ"):
        return {"type": "long", "logicalType": "timestamp-millis"}
    if name == "ARRAY":
        return {"type": "array", "items": _nullable(_type(dtype.expressions[0], row_name), True)}
    if name == "MULTISET":
        return {"type": "map", "values": "int"}
    if name == "MAP":
        return {"type": "map", "values": _nullable(_type(dtype.expressions[1], row_name), True)}
    if name == "STRUCT":
        return _record(row_name, [(f.name, f.args["kind"], True) for f in dtype.expressions])
    raise ConnectorError(f"type {type_name(dtype)} has no Avro mapping")  # (check_avro refuses it first)


def _precision(dtype) -> int:
    return int(dtype.expressions[0].name) if dtype.expressions else (0 if dtype.this.name == "TIME" else 6)
