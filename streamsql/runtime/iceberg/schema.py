"""The declared columns against an Iceberg table's schema, by Flink's type mapping.

**Types.** As Flink's Iceberg connector maps them (FlinkSchemaUtil): ``BOOLEAN`` boolean,
``INT`` int (``TINYINT`` and ``SMALLINT`` are written as int: Iceberg has nothing smaller),
``BIGINT`` long, ``FLOAT`` float, ``DOUBLE`` double, ``DECIMAL(p, s)`` decimal(p, s),
``CHAR``/``VARCHAR``/``STRING`` string, ``BINARY``/``VARBINARY``/``BYTES`` binary,
``DATE`` date, ``TIMESTAMP`` timestamp (without zone, a UTC wall-clock time here),
``TIMESTAMP_LTZ`` timestamptz, ``ARRAY`` list, ``MAP`` map, ``ROW`` struct. ``TIME``, and
Iceberg's uuid, fixed, time and nanosecond timestamps, are refused by name. Types are
compared as the Arrow types both sides map to (``arrow_type``; pyiceberg's own
``schema_to_pyarrow`` for the table).

**Matching.** Columns match Iceberg's by name, exactly or else case-insensitively (Flink's
``case-sensitive`` read option defaults to false). A read may widen (an int column read
as ``BIGINT``, a float as ``DOUBLE``) and may leave columns out; a sink declares every
column of the table, with its type (``TINYINT``/``SMALLINT`` into an int). Each mismatch is
one ConnectorError naming the table and the column.

**Schema evolution.** Spark's Parquet reader finds a file's columns by name, Iceberg by
field id. A column read is refused when some schema in the table's history gave its field
id another name or type (a rename, a promotion), or gave its name to another field id (a
column dropped and added again): files of that schema would be read wrongly. A column
added later reads as NULL in older files, which is Iceberg's meaning too.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamsql.errors import ConnectorError
from streamsql.plan.objects import TableDef
from streamsql.plan.types import type_name

WIDENINGS = {"int64": {"int32"}, "double": {"float"}}  # declared <- Iceberg, on a read
NARROWER = {"int8": "int32", "int16": "int32"}  # declared -> Iceberg int, on a write


@dataclass(frozen=True)
class Column:
    """A declared column matched with the Iceberg schema's field."""

    declared: str  # the DDL's name
    iceberg: str  # the Iceberg field's name
    field_id: int
    spark_read: str  # Spark's DDL type the Parquet files are read as (from the Iceberg type)


def arrow_type(dtype, label: str):
    """The Arrow type of a declared (sqlglot) type, as Flink's Iceberg maps it (see the docstring)."""
    import pyarrow as pa

    simple = {"boolean": pa.bool_(), "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(),
              "bigint": pa.int64(), "float": pa.float32(), "double": pa.float64(), "date": pa.date32(),
              "timestamp": pa.timestamp("us"), "timestampltz": pa.timestamp("us", tz="UTC")}
    kind = dtype.this.value.lower()
    if kind in simple:
        return simple[kind]
    if dtype.is_type("char", "varchar", "text", "nchar", "nvarchar"):
        return pa.string()
    if dtype.is_type("binary", "varbinary"):
        return pa.binary()
    if dtype.is_type("decimal"):
        precision, scale = (int(e.this.this) for e in dtype.expressions) if dtype.expressions else (10, 0)
        return pa.decimal128(precision, scale)
    if dtype.is_type("array"):
        return pa.list_(arrow_type(dtype.expressions[0], label))
    if dtype.is_type("map"):
        return pa.map_(arrow_type(dtype.expressions[0], label), arrow_type(dtype.expressions[1], label))
    if dtype.is_type("struct"):
        return pa.struct([pa.field(m.name, arrow_type(m.args["kind"], label)) for m in dtype.expressions])
    raise ConnectorError(f"{label}: the iceberg connector has no Iceberg type for {type_name(dtype)}")


def declared_schema(table: TableDef):
    """The Arrow schema of the declared columns, for creating the Iceberg table (ints widened)."""
    import pyarrow as pa

    label = f"Table '{table.name.name}'"
    fields = []
    for column in table.physical_columns:
        kind = arrow_type(column.type, label)
        fields.append(pa.field(column.name, pa.int32() if str(kind) in NARROWER else kind))
    return pa.schema(fields)


def creating_schema(table: TableDef):
    """The pyiceberg Schema a sink creates a missing table with: the declared columns (ints
    widened), the PRIMARY KEY's columns required and the table's identifier fields, as
    Flink's Iceberg catalog creates a table with a primary key."""
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.schema import Schema, assign_fresh_schema_ids

    names = {c.name.lower(): c.name for c in table.physical_columns}
    key = [names.get(k.lower(), k) for k in table.primary_key]
    arrow = pa.schema([f.with_nullable(f.name not in key) for f in declared_schema(table)])
    schema = assign_fresh_schema_ids(Catalog._convert_schema_if_needed(arrow))
    if not key:
        return schema
    return Schema(*schema.fields, identifier_field_ids=[schema.find_field(k).field_id for k in key])


def canonical(kind) -> str:
    """An Arrow type as text without what does not matter here: large or not, nested names and nullability."""
    import pyarrow as pa

    if pa.types.is_large_string(kind) or pa.types.is_string(kind):
        return "string"
    if pa.types.is_large_binary(kind) or pa.types.is_binary(kind):
        return "binary"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return f"list<{canonical(kind.value_type)}>"
    if pa.types.is_map(kind):
        return f"map<{canonical(kind.key_type)},{canonical(kind.item_type)}>"
    if pa.types.is_struct(kind):
        return "struct<" + ",".join(f"{kind.field(i).name}:{canonical(kind.field(i).type)}" for i in range(kind.num_fields)) + ">"
    return str(kind)


def iceberg_arrow(field):
    """An Iceberg field's Arrow type (pyiceberg's mapping); a ConnectorError for types refused."""
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    refused = _refused(field.field_type)
    if refused is not None:
        raise ConnectorError(f"has the Iceberg type {field.field_type}: {refused} is not mapped by the iceberg connector")
    return schema_to_pyarrow(field.field_type, include_field_ids=False)


def _refused(kind):
    """The first type inside ``kind`` with no Flink type here (uuid, fixed, time, nanoseconds, ...), or None."""
    from pyiceberg import types as T

    if isinstance(kind, T.NestedField):
        return _refused(kind.field_type)
    if isinstance(kind, T.StructType):
        return next((r for r in map(_refused, kind.fields) if r is not None), None)
    if isinstance(kind, T.ListType):
        return _refused(kind.element_type)
    if isinstance(kind, T.MapType):
        return _refused(kind.key_type) or _refused(kind.value_type)
    mapped = (T.BooleanType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType, T.StringType,
              T.BinaryType, T.DateType, T.TimestampType, T.TimestamptzType)
    return None if isinstance(kind, mapped) else str(kind)


def columns(table: TableDef, schema, reading: bool, history=()) -> list[Column]:
    """The declared columns matched with the Iceberg ``schema`` (see the docstring), in DDL order;
    ``history``: every schema of the table, for a read's evolution check."""
    from pyspark.sql.pandas.types import from_arrow_type

    name, where = table.name.name, _where(table)
    fields = {f.name: f for f in schema.fields}
    matched = []
    for column in table.physical_columns:
        field = fields.get(column.name) or next((f for f in schema.fields if f.name.lower() == column.name.lower()), None)
        if field is None:
            raise ConnectorError(f"Table '{name}': column '{column.name}' is not in the {where}"
                                 f" (its columns: {', '.join(fields)})")
        try:
            actual = iceberg_arrow(field)
        except ConnectorError as error:
            raise ConnectorError(f"Table '{name}': column '{column.name}' of the {where} {error}") from None
        declared = canonical(arrow_type(column.type, f"Table '{name}'"))
        have = canonical(actual)
        fits = declared == have or (have in WIDENINGS.get(declared, ()) if reading else NARROWER.get(declared) == have)
        if not fits:
            raise ConnectorError(f"Table '{name}': column '{column.name}' is declared {type_name(column.type)}, but the"
                                 f" {where} has it as {field.field_type}")
        if reading:
            _check_history(table, field, history)
        matched.append(Column(column.name, field.name, field.field_id, from_arrow_type(actual).simpleString()))
    if not reading:
        names = {c.iceberg for c in matched}
        missing = [f.name for f in schema.fields if f.name not in names]
        if missing:
            raise ConnectorError(f"Table '{name}': the {where} has column(s) {', '.join(missing)} the table does not"
                                 " declare; a sink writes every column")
    return matched


def _check_history(table: TableDef, field, history) -> None:
    for old in history:
        by_id = next((f for f in old.fields if f.field_id == field.field_id), None)
        by_name = next((f for f in old.fields if f.name == field.name), None)
        changed = (by_id is not None and (by_id.name != field.name or str(by_id.field_type) != str(field.field_type))) \
            or (by_name is not None and by_name.field_id != field.field_id)
        if changed:
            was = by_id if by_id is not None and by_id.name != field.name else by_name or by_id
            raise ConnectorError(
                f"Table '{table.name.name}': column '{field.name}' of the {_where(table)} changed in its schema"
                f" history (schema {old.schema_id} had {was.name} {was.field_type}, field id {was.field_id}); files"
                " of that schema cannot be read by name, so streamsql does not read this column (rewrite the table's"
                " files, or read another column)")


def _where(table: TableDef) -> str:
    from streamsql.runtime.iceberg.catalog import described

    return described(table)
