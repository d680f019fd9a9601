"""Kafka record keys and values to the table's columns and back, as Spark SQL expressions
(Spark's own JSON, CSV and Avro parsers, vectorised in the JVM): json, csv, raw, avro (Flink's
schema, plan.avro_schema, through spark-avro's from_avro/to_avro), and the changelog format
debezium-json.

Flink's conventions: a JSON value is an object with the columns as fields, TIMESTAMPs written
'yyyy-MM-dd HH:mm:ss.SSS'; CSV has no header; raw is the bytes (BYTES) or UTF-8 text
(STRING) of a single column. With 'value.fields-include' = 'EXCEPT_KEY' the key columns come
from the key only, else from the value (which then holds every physical column).
"""

from __future__ import annotations

from streamsql.changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.plan.avro_schema import avro_schema_json
from streamsql.plan.connectors import csv_format
from streamsql.plan.kafka_options import key_fields, value_columns, value_format
from streamsql.plan.objects import Column, TableDef
from streamsql.spark.dialect import spark_string, spark_type

TIMESTAMP_FORMAT = "yyyy-MM-dd HH:mm:ss[.SSSSSS][.SSS]"
WRITE_TIMESTAMP_FORMAT = "yyyy-MM-dd HH:mm:ss.SSS"
CORRUPT = "_streamsql_corrupt"
_METADATA_SOURCE = {"timestamp-type": "timestamp_type", "leader-epoch": "leader_epoch"}


def _struct(columns: list[Column], corrupt: bool = False) -> str:
    fields = [f"`{c.name}`: {spark_type(c.type)}" for c in columns] + ([f"`{CORRUPT}`: STRING"] if corrupt else [])
    return f"STRUCT<{', '.join(fields)}>"


def _options_sql(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"{spark_string(k)}, {spark_string(v)}" for k, v in options.items()) + ")"


def _ignores_errors(table: TableDef, scope: str, fmt: str) -> bool:
    options = table.options
    return any(options.get(f"{prefix}{fmt}.ignore-parse-errors", "false").lower() == "true"
               for prefix in ((scope,) if scope else ("", "value.")))


def _parse(column: str, fmt: str, columns: list[Column], table: TableDef, scope: str) -> tuple[str, bool]:
    """An expression parsing ``column`` (BINARY) into a struct of ``columns``; and whether it
    carries the corrupt-record field (json and csv: the text of a record that does not parse)."""
    base = {"timestampFormat": TIMESTAMP_FORMAT, "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    text = f"CAST({column} AS STRING)"
    if fmt == "json":
        return f"from_json({text}, {spark_string(_struct(columns, True))}, {_options_sql(base)})", True
    if fmt == "csv":
        base.update(csv_format(table.options, scope))
        return f"from_csv({text}, {spark_string(_struct(columns, True))}, {_options_sql(base)})", True
    if fmt == "avro":  # a record that does not decode reads as all NULLs (_avro_corrupt tells)
        schema = spark_string(avro_schema_json(columns))
        return f"CAST(from_avro({column}, {schema}, map('mode', 'PERMISSIVE')) AS {_struct(columns)})", False
    # raw: the one column, as bytes or text
    (only,) = columns
    value = column if only.type.is_type("binary", "varbinary") else text
    return f"named_struct('{only.name}', {value})", False


def key_struct(table: TableDef) -> str:
    """The record key parsed into a struct of the key columns."""
    keys = key_fields(table)
    columns = [c for c in table.physical_columns if c.name in keys]
    return _parse("key", table.options["key.format"], columns, table, "key.")[0]


def decoded_columns(table: TableDef, tombstones: bool = False) -> tuple[list[str], str | None]:
    """Expressions over the raw record (runtime.kafka.reader.RAW_SCHEMA) giving the
    table's physical and metadata columns, and a filter dropping records to skip (tombstones
    unless ``tombstones``, records the format could not parse under ignore-parse-errors), or
    None."""
    keys = key_fields(table)
    fmt = value_format(table)
    except_key = table.options.get("value.fields-include", "ALL").upper() == "EXCEPT_KEY"
    key_columns = [c for c in table.physical_columns if c.name in keys]
    filters = [] if tombstones else ["value IS NOT NULL"]
    selects = []
    if key_columns and except_key:
        parsed, corrupt = _parse("key", table.options["key.format"], key_columns, table, "key.")
        selects.append(f"{parsed} AS __key")
        if corrupt:
            filters.append(_malformed("__key", _ignores_errors(table, "key.", table.options["key.format"])))
        if table.options["key.format"] == "avro":
            filters.append(_avro_malformed("__key", "key", key_columns))
    if fmt != "debezium-json":
        parsed, corrupt = _parse("value", fmt, value_columns(table), table, "value.")
        selects.append(f"{parsed} AS __value")
        malformed = None
        if corrupt:
            malformed = _malformed("__value", _ignores_errors(table, "value.", fmt))
        elif fmt == "avro":
            malformed = _avro_malformed("__value", "value", value_columns(table))
        if malformed is not None:
            filters.append(f"(value IS NULL OR {malformed})" if tombstones else malformed)
    return selects, " AND ".join(filters) or None


def _malformed(struct: str, ignore: bool) -> str:
    """Skip a record that did not parse (ignore-parse-errors), else stop the query naming the
    record: the same mark as a malformed file row (runtime.failures turns it into one line)."""
    from streamsql.runtime.sources import MALFORMED_MARK

    if ignore:
        return f"{struct}.{CORRUPT} IS NULL"
    where = "concat('Kafka topic ', topic, ' partition ', `partition`, ' offset ', `offset`)"
    message = f"concat_ws('|', '{MALFORMED_MARK}', {where}, '0', {struct}.{CORRUPT})"
    return f"CASE WHEN {struct}.{CORRUPT} IS NULL THEN TRUE ELSE raise_error({message}) END"


def _avro_malformed(struct: str, raw: str, columns: list[Column]) -> str:
    """Stop the query at a record that is no Avro record of the table's schema, naming it (as
    Flink's avro format fails on one; it has no option to skip them). spark-avro reads such a
    record as all NULLs: a record is malformed when every field reads NULL and its bytes are
    not those of a row of NULLs (a 0, the null branch, per field; none exist with a NOT NULL
    field)."""
    from streamsql.runtime.sources import MALFORMED_MARK

    all_null = " AND ".join(f"{struct}.`{c.name}` IS NULL" for c in columns)
    nulls = "FALSE" if any(c.not_null for c in columns) else f"{raw} = X'{'00' * len(columns)}'"
    where = "concat('Kafka topic ', topic, ' partition ', `partition`, ' offset ', `offset`)"
    message = f"concat_ws('|', '{MALFORMED_MARK}', {where}, '0', concat('avro ', hex({raw})))"
    return f"CASE WHEN {raw} IS NULL OR NOT ({all_null}) OR {nulls} THEN TRUE ELSE raise_error({message}) END"


def column_expressions(table: TableDef, source: str = "__value") -> list[str]:
    """The table's non-computed columns from the parsed key/value structs and the metadata."""
    keys = set(key_fields(table))
    except_key = table.options.get("value.fields-include", "ALL").upper() == "EXCEPT_KEY"
    result = []
    for column in table.columns:
        if column.is_computed:
            continue
        if column.metadata is not None:
            raw = _METADATA_SOURCE.get(column.metadata, column.metadata)
            result.append(f"CAST(`{raw}` AS {spark_type(column.type)}) AS `{column.name}`")
        elif column.name in keys and except_key:
            result.append(f"__key.`{column.name}` AS `{column.name}`")
        else:
            result.append(f"{source}.`{column.name}` AS `{column.name}`")
    return result


def debezium_rows(table: TableDef) -> tuple[str, str]:
    """debezium-json: the envelope parsed, and an expression exploding it into the change rows
    it stands for: c/r -> +I after, u -> -U before and +U after, d -> -D before."""
    row = _struct(table.physical_columns)
    ignore = _ignores_errors(table, "value.", "debezium-json")
    options = {"timestampFormat": TIMESTAMP_FORMAT, "mode": "PERMISSIVE" if ignore else "FAILFAST"}
    envelope = f"STRUCT<before: {row}, after: {row}, op: STRING>"
    parsed = f"from_json(CAST(value AS STRING), {spark_string(envelope)}, {_options_sql(options)}) AS __envelope"
    change = "named_struct('kind', {kind}, 'row', {row})"
    exploded = (
        "inline(CASE __envelope.op"
        f" WHEN 'c' THEN array({change.format(kind=repr(INSERT), row='__envelope.after')})"
        f" WHEN 'r' THEN array({change.format(kind=repr(INSERT), row='__envelope.after')})"
        f" WHEN 'u' THEN array({change.format(kind=repr(UPDATE_BEFORE), row='__envelope.before')},"
        f" {change.format(kind=repr(UPDATE_AFTER), row='__envelope.after')})"
        f" WHEN 'd' THEN array({change.format(kind=repr(DELETE), row='__envelope.before')})"
        " ELSE raise_error(concat('debezium-json: unknown op ', coalesce(__envelope.op, 'NULL'))) END)"
    )
    return parsed, exploded


def encoded_value(table: TableDef, columns: list[Column], fmt: str, scope: str) -> str:
    """An expression writing ``columns`` of a row in ``fmt`` (the sink side), as BINARY."""
    struct = "named_struct(" + ", ".join(f"'{c.name}', `{c.name}`" for c in columns) + ")"
    if fmt == "json":
        return f"CAST(to_json({struct}, map('timestampFormat', '{WRITE_TIMESTAMP_FORMAT}', 'ignoreNullFields', 'false')) AS BINARY)"
    if fmt == "csv":
        options = {"timestampFormat": WRITE_TIMESTAMP_FORMAT, **csv_format(table.options, scope)}
        return f"CAST(to_csv({struct}, {_options_sql(options)}) AS BINARY)"
    if fmt == "avro":
        return f"to_avro({struct}, {spark_string(avro_schema_json(columns))})"
    (only,) = columns
    return f"CAST(`{only.name}` AS BINARY)"

