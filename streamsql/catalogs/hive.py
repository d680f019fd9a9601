"""A Hive metastore's tables — Spark's session catalog — as Flink's HiveCatalog names them.

    CREATE CATALOG spark WITH ('type' = 'hive', 'hive-conf-dir' = '/etc/hive/conf');
    SELECT region, SUM(amount) FROM spark.sales.orders GROUP BY region;

Flink's options: ``hive-conf-dir`` (its ``hive-site.xml`` names the metastore; without it,
the ``metastore_db`` and ``spark-warehouse`` of a local Spark in the working directory),
``hadoop-conf-dir``, ``default-database`` (``default``) and ``hive-version`` (the client is
Spark's built-in Hive 2.3, which reads metastores of Hive 2.x and 3.x). The metastore is read
through Spark (``runtime.metastore``); **databases** are its databases, **tables** its tables
as Spark restores them, each one a ``TableDef`` of the connector that reads its files:

- a Delta table (``USING delta``): the ``delta`` connector on its location, its columns
  and partitions from its Delta log (the metastore keeps no schema of one);
- a Parquet, JSON or CSV data source table (``USING parquet``, ...), or a Hive table
  ``STORED AS PARQUET``: the ``filesystem`` connector on its location, its partition
  columns ``PARTITIONED BY`` (Spark's ``k=v`` directories);
- a Hive text table (``ROW FORMAT DELIMITED``, LazySimpleSerDe): ``csv`` with its field
  delimiter, no quoting and Hive's ``\\N`` for NULL; of primitive columns only.

Spark's types map to Flink's as Spark means them: ``timestamp`` (an instant) is
TIMESTAMP_LTZ(6), ``timestamp_ntz`` TIMESTAMP(6), ``byte``/``short`` TINYINT/SMALLINT,
``char(n)``/``varchar(n)`` CHAR/VARCHAR, arrays, maps and structs ARRAY, MAP and ROW.
``INSERT INTO`` writes a Delta table (the ``delta`` connector: exactly once) and an
unpartitioned Parquet, JSON or CSV table (files published whole, as the ``filesystem``
sink does, which Spark then lists). Refused, naming the reason: writes into a partitioned
file table (Spark reads a partition the metastore registers, which a file sink does not)
or a Hive text table; views (their query is Spark SQL); ORC, Avro and other SerDes;
``CREATE``/``DROP`` of tables and databases (Spark's own DDL makes them).
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from streamsql.catalogs.ddl import quoted, table_ddl as declaration
from streamsql.catalogs.read_only import ReadOnlyDDL
from streamsql.catalogs.registry import CatalogDef
from streamsql.errors import CatalogError, StreamsqlError
from streamsql.plan.objects import ObjectName, TableDef

LAZY_SIMPLE_SERDE = "org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe"
TEXT_INPUT = "org.apache.hadoop.mapred.TextInputFormat"
_SIMPLE = {"boolean": "BOOLEAN", "byte": "TINYINT", "short": "SMALLINT", "integer": "INT", "long": "BIGINT",
           "float": "FLOAT", "double": "DOUBLE", "string": "STRING", "binary": "BYTES", "date": "DATE",
           "timestamp": "TIMESTAMP_LTZ(6)", "timestamp_ntz": "TIMESTAMP(6)"}
_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"  # Spark keeps CHAR(n)/VARCHAR(n) as STRING with this metadata
_READS = "it reads Delta, Parquet, JSON and CSV tables, and Hive's Parquet and text tables"


def flink_type(kind, metadata: dict | None = None) -> str | None:
    """A Spark type (its JSON form) as Flink's, or None for one Flink has not (intervals, ...)."""
    if isinstance(kind, str):
        declared = (metadata or {}).get(_CHAR_VARCHAR)
        if kind == "string" and declared and re.fullmatch(r"(var)?char\(\d+\)", declared):
            return declared.upper()
        decimal = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", kind)
        return f"DECIMAL({decimal[1]}, {decimal[2]})" if decimal else _SIMPLE.get(kind)
    if kind.get("type") == "array":
        element = flink_type(kind["elementType"])
        return element and f"ARRAY<{element}>"
    if kind.get("type") == "map":
        key, value = flink_type(kind["keyType"]), flink_type(kind["valueType"])
        return key and value and f"MAP<{key}, {value}>"
    if kind.get("type") == "struct":
        fields = [(f["name"], flink_type(f["type"], f.get("metadata"))) for f in kind["fields"]]
        if any(t is None for _, t in fields):
            return None
        return "ROW<" + ", ".join(f"{quoted(n)} {t}" for n, t in fields) + ">"
    return None


def local_path(location: str | None, label: str) -> str:
    """A table location as a local path; a CatalogError for one elsewhere (HDFS, S3, ...)."""
    if not location:
        raise CatalogError(f"Table '{label}' has no location")
    parts = urlsplit(location)
    if parts.scheme not in ("", "file"):
        raise CatalogError(f"Table '{label}' is at '{location}': only tables on the local file system are read yet")
    return unquote(parts.path)


def connector_options(table, label: str) -> dict[str, str]:
    """The options of the connector that reads the metastore table (see the module docstring)."""
    if table.kind == "VIEW":
        raise CatalogError(f"Table '{label}' is a Spark view: its query is Spark SQL, which is not read as Flink SQL")
    provider = (table.provider or "hive").lower()
    if provider == "delta":
        return {"connector": "delta", "table-path": local_path(table.location, label)}
    options = {"connector": "filesystem", "path": local_path(table.location, label)}
    serde = table.serde or ""
    if provider in ("parquet", "json") or provider == "hive" and "parquet" in serde.lower():
        return {**options, "format": "parquet" if provider == "hive" else provider}
    properties = table.properties
    if provider == "csv":
        properties = {k.lower(): v for k, v in properties.items()}  # a data source's options, as the user wrote them
        if properties.get("header", "false").lower() == "true":
            raise CatalogError(f"Table '{label}' is a CSV table with a header line, which Flink's csv format has not")
        delimiter = properties.get("sep", properties.get("delimiter", ","))
        return {**options, "format": "csv", "csv.field-delimiter": delimiter}
    if provider == "hive" and serde == LAZY_SIMPLE_SERDE and table.input_format == TEXT_INPUT:
        if any(not isinstance(f["type"], str) for f in table.schema["fields"]):
            raise CatalogError(f"Table '{label}' is a Hive text table with ARRAY, MAP or STRUCT columns, whose"
                               " collection delimiters Flink's csv format does not read")
        delimiter = properties.get("field.delim", properties.get("serialization.format", "\x01"))
        if delimiter.isdigit() and int(delimiter) < 128:  # LazySimpleSerDe reads a byte's code: Hive's default '1' is ^A
            delimiter = chr(int(delimiter))
        return {**options, "format": "csv", "csv.field-delimiter": delimiter, "csv.disable-quote-character": "true",
                "csv.null-literal": properties.get("serialization.null.format", "\\N")}
    what = f"a Hive table of SerDe {serde}" if provider == "hive" else f"a {provider} table"
    raise CatalogError(f"Table '{label}' is {what}, which is not read yet ({_READS})")


def table_ddl(catalog: str, table, columns: list[dict] | None = None, partitions: list[str] | None = None) -> str:
    """The Flink DDL that declares a metastore table; ``columns``/``partitions`` replace the
    metastore's (a Delta table's come from its log)."""
    label = f"{catalog}.{table.database}.{table.name}"
    options = connector_options(table, label)
    fields = columns if columns is not None else table.schema["fields"]
    lines = []
    for column in fields:
        flink = flink_type(column["type"], column.get("metadata"))
        if flink is None:
            raise CatalogError(f"Table '{label}': column '{column['name']}' has the Spark type"
                               f" {json_type(column['type'])}, which has no Flink type")
        lines.append(f"  {quoted(column['name'])} {flink}{'' if column.get('nullable', True) else ' NOT NULL'}")
    keys = partitions if partitions is not None else list(table.partition_columns)
    return declaration(catalog, table.database, table.name, lines, options, keys)


def write_refusal(table, label: str) -> str | None:
    """Why an INSERT INTO the metastore table is refused, or None when it is written."""
    options = connector_options(table, label)
    if options["connector"] == "delta":
        return None
    if table.partition_columns:
        return (f"Table '{label}' is a partitioned {options['format']} table: Spark reads the partitions its metastore"
                " registers, which a file sink does not; write it from Spark, or into a Delta table")
    if (table.provider or "hive").lower() == "hive" and options["format"] == "csv":
        return f"Table '{label}' is a Hive text table, which is read only here"
    return None


def json_type(kind) -> str:
    return kind if isinstance(kind, str) else kind.get("type", "?")


class HiveCatalog(ReadOnlyDDL):
    TYPE = "hive"
    REFUSAL = " yet: its tables and databases are made by Spark's own DDL"

    def __init__(self, definition: CatalogDef, session=None):
        self.definition = definition
        self.name = definition.name
        self.default_database = definition.options.get("default-database", "default")
        self._session = session  # () -> the SparkSession (the Engine's), or None outside one
        self._metastore = None

    # -- reading -----------------------------------------------------------------------

    def databases(self) -> list[str]:
        return self._store().databases()

    def has_database(self, name: str) -> bool:
        return name in self.databases()

    def get(self, name: ObjectName, kind: str = "relation") -> TableDef | None:
        if kind != "relation":
            return None
        found = self._store().table(name.database, name.name)
        return self._table(found) if found is not None else None

    def objects(self, database: str | None = None, kind: str = "relation") -> list[TableDef]:
        if kind != "relation":
            return []
        database = database or self.default_database
        store, found = self._store(), []
        for name in store.tables(database) if database in store.databases() else []:
            try:
                table = self.get(ObjectName(database, name, self.name))
            except CatalogError:
                continue  # a view, an ORC table, ...: named when it is used
            found += [table] if table is not None else []
        return found

    def check_write(self, table: TableDef) -> None:
        described = self._store().table(table.name.database, table.name.name)
        reason = described is not None and write_refusal(described, f"{self.name}.{table.name.database}.{table.name.name}")
        if reason:
            raise CatalogError(reason)

    # -- what the catalog refuses (and ReadOnlyDDL's) ------------------------------------

    def completed(self, create, name: ObjectName) -> None:
        raise self._read_only("CREATE TABLE")  # before its options are checked

    # -- the metastore -----------------------------------------------------------------

    def _store(self):
        if self._metastore is None:
            if self._session is None:
                raise CatalogError(f"Catalog '{self.name}' (type 'hive') reads its metastore through Spark, which"
                                   " this session does not run")
            from streamsql.runtime.metastore import Metastore

            options = self.definition.options
            try:
                self._metastore = Metastore(self._session(), options.get("hive-conf-dir"), options.get("hadoop-conf-dir"))
            except CatalogError as error:
                raise CatalogError(f"Catalog '{self.name}': {error}") from None
        return self._metastore

    def _table(self, found) -> TableDef:
        from streamsql.dialect.script import parse_statement
        from streamsql.plan.define import define

        columns = partitions = None
        if (found.provider or "").lower() == "delta":
            columns, partitions = _delta_schema(local_path(found.location, f"{self.name}.{found.database}.{found.name}"))
        try:
            return define(parse_statement(table_ddl(self.name, found, columns, partitions)), found.database,
                          catalog=self.name)
        except CatalogError:
            raise
        except StreamsqlError as error:  # the DDL's: name the table
            raise CatalogError(f"Table '{self.name}.{found.database}.{found.name}' cannot be declared: {error}") from None


def _delta_schema(path: str) -> tuple[list[dict], list[str]]:
    """A Delta table's columns (Spark's JSON form, which the Delta log keeps) and partitions."""
    import json

    from deltalake import DeltaTable

    try:
        table = DeltaTable(path)
    except Exception as error:
        raise CatalogError(f"The Delta table at '{path}' does not open: {str(error).strip().splitlines()[0]}") from None
    return json.loads(table.schema().to_json())["fields"], list(table.metadata().partition_columns)
