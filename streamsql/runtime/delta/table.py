"""A Delta table as the driver sees it: its snapshot opened with delta-rs, checked, created.

**Which snapshot.** A source reads the table's current version, or the one
``'version-as-of'`` names, or the last one committed at or before ``'timestamp-as-of'``
(``'2024-01-01 12:00:00'``, UTC unless it carries an offset); delta-flink's ``versionAsOf``
and ``timestampAsOf`` are taken as the same options. A sink always writes the current one.

**What is refused, before any task runs.** Spark reads the snapshot's Parquet files
itself, so a table whose protocol makes files mean something Parquet alone does not say is
refused, naming the feature: deletion vectors (rows of a file deleted in a side file),
column mapping in ``name`` or ``id`` mode (physical column names other than the schema's)
and any reader feature this module does not know. The declared columns are matched with
the Delta schema's by name (exactly, else case-insensitively: Delta's own rule), and each
must have the Delta type its Flink type maps to (``INT`` an ``integer``, ``STRING`` a
``string``, ``TIMESTAMP``/``TIMESTAMP_LTZ`` a ``timestamp`` or ``timestamp_ntz``, ``ROW`` a
``struct`` of the same fields, ...). A read may also widen (an ``integer`` column read as
``BIGINT``, a ``float`` as ``DOUBLE``) and may leave Delta columns out; a sink's columns
are the table's, all of them. ``PARTITIONED BY`` must name the table's partition columns,
in order. Each mismatch is one ConnectorError naming the table and the column.

**A sink's missing table is created**, as Flink's Delta catalog creates it at CREATE
TABLE: empty, with the declared columns and ``PARTITIONED BY``. streamsql does it when the
INSERT starts (a script is planned before anything is written), before the first batch.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from streamsql.errors import ConnectorError
from streamsql.plan.objects import TableDef

VERSION_OPTIONS = ("version-as-of", "versionAsOf")
TIMESTAMP_OPTIONS = ("timestamp-as-of", "timestampAsOf")
# Reader features whose tables Spark's Parquet reader reads as they are (the log is delta-rs's).
HANDLED_READER_FEATURES = {"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"}
REFUSED_READER_FEATURES = {
    "deletionVectors": "deletion vectors (rows of its files deleted in side files) are not read yet;"
                       " rewrite the table without them (e.g. OPTIMIZE ... with deletion vectors purged)",
    "columnMapping": "column mapping (physical column names other than the schema's) is not read yet",
}
# A read may widen a Delta column's type into the declared one (Spark casts after reading).
WIDENINGS = {
    "smallint": {"tinyint"}, "int": {"tinyint", "smallint"}, "bigint": {"tinyint", "smallint", "int"},
    "double": {"float"},
}


@dataclass(frozen=True)
class Column:
    """A declared column matched with the Delta schema's field."""

    declared: str  # the DDL's name
    delta: str  # the Delta schema's name
    declared_type: str  # Spark's simple string of the declared type (spark_type, normalised)
    delta_type: str  # the Delta field's, as Spark's simple string
    partition: bool


def table_path(table: TableDef) -> str:
    return table.options["table-path"]


def version_option(table: TableDef) -> int | None:
    value = next((table.options[k] for k in VERSION_OPTIONS if k in table.options), None)
    return None if value is None else int(value)


def timestamp_option(table: TableDef) -> datetime | None:
    """'timestamp-as-of' as an aware datetime (UTC unless it names an offset)."""
    value = next((table.options[k] for k in TIMESTAMP_OPTIONS if k in table.options), None)
    if value is None:
        return None
    moment = datetime.fromisoformat(value.strip().replace(" ", "T", 1))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def exists(table: TableDef) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(table_path(table))


def open_snapshot(table: TableDef, time_travel: bool = True):
    """The table's DeltaTable at the snapshot the source reads (the current one for a sink);
    a ConnectorError when there is no Delta table there, or no such version."""
    from deltalake import DeltaTable

    name, path = table.name.name, table_path(table)
    if not DeltaTable.is_deltatable(path):
        raise ConnectorError(f"Table '{name}': 'table-path' = '{path}' is not a Delta table (it has no"
                             " _delta_log with a commit); write it first, or fix the path")
    version = version_option(table) if time_travel else None
    moment = timestamp_option(table) if time_travel else None
    try:
        delta = DeltaTable(path, version=version)
        if moment is not None:
            delta.load_as_version(moment)
    except Exception as error:  # delta-rs: DeltaError, TableNotFoundError, ...
        at = f" at version {version}" if version is not None else f" as of {moment.isoformat()}" if moment else ""
        raise ConnectorError(f"Table '{name}': cannot open the Delta table at '{path}'{at}: {_first_line(error)}") from None
    return delta


def snapshot_identity(table: TableDef) -> list:
    """What a bounded run reads of the table (runtime.inserts.consumed_inputs): its path and
    the version of the snapshot, so a rerun after a new commit reads it again."""
    return [table_path(table), open_snapshot(table).version()]


def check_protocol(table: TableDef, delta) -> None:
    """Refuse a table whose files Spark's Parquet reader would misread (see the docstring)."""
    name = table.name.name
    protocol = delta.protocol()
    features = set(protocol.reader_features or ())
    mode = (delta.metadata().configuration or {}).get("delta.columnMapping.mode", "none")
    if mode not in (None, "none"):
        features.add("columnMapping")
    for feature in sorted(features - HANDLED_READER_FEATURES):
        why = REFUSED_READER_FEATURES.get(feature, "this reader feature is not supported")
        raise ConnectorError(f"Table '{name}': the Delta table at '{table_path(table)}' uses the reader feature"
                             f" '{feature}': {why}")


def spark_schema(delta):
    """The Delta schema as Spark's StructType (Delta's schema JSON is Spark's)."""
    from pyspark.sql.types import StructType

    return StructType.fromJson(json.loads(delta.schema().to_json()))


def columns(table: TableDef, delta, reading: bool) -> list[Column]:
    """The declared columns matched with the Delta schema (see the docstring), in DDL order;
    a ConnectorError naming the first mismatch."""
    from streamsql.spark.dialect import spark_type

    name = table.name.name
    fields = {f.name: f for f in spark_schema(delta).fields}
    partitions = list(delta.metadata().partition_columns)
    declared_partitions = [p.lower() for p in table.partition_keys]
    if declared_partitions != [p.lower() for p in partitions]:
        raise ConnectorError(
            f"Table '{name}': PARTITIONED BY ({', '.join(table.partition_keys)}) does not match the Delta table's"
            f" partition columns ({', '.join(partitions) or 'none'}) at '{table_path(table)}'")
    matched = []
    for column in table.physical_columns:
        field = fields.get(column.name) or next((f for f in fields.values() if f.name.lower() == column.name.lower()), None)
        if field is None:
            raise ConnectorError(f"Table '{name}': column '{column.name}' is not in the Delta table at"
                                 f" '{table_path(table)}' (its columns: {', '.join(fields)})")
        declared, actual = normalised(spark_type(column.type)), field.dataType.simpleString()
        if not compatible(declared, actual, reading):
            raise ConnectorError(f"Table '{name}': column '{column.name}' is declared {declared.upper()}, but the Delta"
                                 f" table at '{table_path(table)}' has it as {actual}")
        matched.append(Column(column.name, field.name, declared, actual, field.name in partitions))
    if not reading:
        names = {c.delta for c in matched}
        missing = [f for f in fields if f not in names]
        if missing:
            raise ConnectorError(f"Table '{name}': the Delta table at '{table_path(table)}' has column(s)"
                                 f" {', '.join(missing)} the table does not declare; a sink writes every column")
    return matched


def normalised(spark_ddl: str) -> str:
    """A Spark DDL type (``STRUCT<`x`: INT>``) as Spark's simple string (``struct<x:int>``)."""
    return re.sub(r"[\s`]", "", spark_ddl).lower()


def compatible(declared: str, delta: str, reading: bool) -> bool:
    """Whether a column of the declared type reads (or writes) the Delta type: the same type,
    Flink's TIMESTAMP over a timestamp_ntz too; a read may widen (WIDENINGS)."""
    delta = delta.replace("timestamp_ntz", "timestamp")
    return declared == delta or (reading and delta in WIDENINGS.get(declared, ()))


def create(table: TableDef, schema_json: dict):
    """The sink's Delta table, created empty with the declared columns and PARTITIONED BY."""
    from deltalake import DeltaTable, Schema

    try:
        return DeltaTable.create(table_path(table), Schema.from_json(json.dumps(schema_json)),
                                 mode="ignore", partition_by=list(table.partition_keys) or None,
                                 name=table.name.name)
    except Exception as error:
        raise ConnectorError(f"Table '{table.name.name}': cannot create the Delta table at"
                             f" '{table_path(table)}': {_first_line(error)}") from None


def _first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
