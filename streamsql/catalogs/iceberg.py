"""An Iceberg catalog, as Flink's Iceberg connector's catalog shows it.

    CREATE CATALOG lake WITH ('type' = 'iceberg', 'catalog-type' = 'jdbc', 'warehouse' = '/data/lake');
    CREATE TABLE lake.sales.orders (id BIGINT, amount DOUBLE, PRIMARY KEY (id) NOT ENFORCED);
    INSERT INTO lake.sales.orders SELECT ...;

The catalog kinds are the ``iceberg`` connector's (``runtime.iceberg.catalog``): a JDBC
(SQL) catalog in SQLite (by default ``<warehouse>/iceberg_catalog.db``) or PostgreSQL
(``uri``), the tables Java's JdbcCatalog keeps, keyed by the catalog's name; a Hadoop catalog
(``'catalog-type' = 'hadoop'``: the warehouse's directories); or a REST catalog's server
(``'catalog-type' = 'rest'``, ``uri``). **Databases**
are its namespaces (``default-database``, by default ``default``, always listed, as Flink's
catalog creates it); **tables** its tables, each an ``iceberg`` table of this catalog with
its columns mapped as Flink's FlinkSchemaUtil maps them (boolean, int, long, float, double,
decimal, string, binary, date, timestamp TIMESTAMP(6), timestamptz TIMESTAMP_LTZ(6), list,
map, struct), required fields NOT NULL, identifier fields the PRIMARY KEY, identity
partitions PARTITIONED BY. ``CREATE TABLE`` (without WITH: the catalog names the connector)
creates the Iceberg table, ``DROP TABLE`` drops it from the catalog (its files stay, as
Flink's drop without purge), ``CREATE``/``DROP DATABASE`` make and remove namespaces.
"""

from __future__ import annotations

import os

from sqlglot import exp

from streamsql.catalogs.ddl import quoted, table_ddl
from streamsql.catalogs.registry import CatalogDef
from streamsql.errors import CatalogError, ConnectorError
from streamsql.plan.objects import ObjectName, TableDef, ViewDef

_CONNECTOR_OPTIONS = ("catalog-type", "catalog-impl", "warehouse", "uri", "jdbc.user", "jdbc.password", "credential",
                      "token")


def connector_options(name: str, options: dict[str, str]) -> dict[str, str]:
    """The ``iceberg`` connector's options of a catalog's tables (its catalog type by default
    'jdbc': a SQL catalog), checked as the connector checks them."""
    from streamsql.plan.connectors import check_iceberg

    given = {"connector": "iceberg", "catalog-name": name}
    given.update({k: v for k, v in options.items() if k in _CONNECTOR_OPTIONS})
    if "catalog-impl" not in given:
        given.setdefault("catalog-type", "jdbc")
    try:
        check_iceberg(TableDef(ObjectName("default", name, name), [], given))
    except ConnectorError as error:
        text = str(error)
        text = text.partition(": ")[2] if text.startswith(f"Table '{name}': ") else text.split(") ", 1)[-1]
        raise CatalogError(f"Catalog '{name}' (type 'iceberg'): {text}") from None
    return given


class IcebergCatalog:
    def __init__(self, definition: CatalogDef):
        self.definition = definition
        self.name = definition.name
        self.default_database = definition.options.get("default-database", "default")
        self.options = connector_options(definition.name, definition.options)
        self._pending: dict[ObjectName, TableDef | None] | None = None  # staged: tables created (None: dropped)
        self._pending_databases: dict[str, bool] = {}  # staged: databases created (True) or dropped (False)

    def staged(self) -> IcebergCatalog:
        """A copy that plans a script's DDL without committing it to the catalog."""
        copy = IcebergCatalog(self.definition)
        copy._pending = dict(self._pending or {})
        copy._pending_databases = dict(self._pending_databases)
        return copy

    # -- reading -----------------------------------------------------------------------

    def databases(self) -> list[str]:
        found = self._namespaces() | {self.default_database}
        found |= {name for name, made in self._pending_databases.items() if made}
        return sorted(found - {name for name, made in self._pending_databases.items() if not made})

    def _namespaces(self) -> set[str]:
        catalog = self._catalog(creating=False)
        return {".".join(n) for n in catalog.list_namespaces()} if catalog is not None else set()

    def has_database(self, name: str) -> bool:
        return name in self.databases()

    def get(self, name: ObjectName, kind: str = "relation") -> TableDef | None:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        if kind == "relation" and self._pending is not None and name in self._pending:
            return self._pending[name]
        catalog = self._catalog(creating=False)
        if kind != "relation" or catalog is None:
            return None
        try:
            table = catalog.load_table((name.database, name.name))
        except (NoSuchTableError, NoSuchNamespaceError):
            return None
        except Exception as error:
            raise CatalogError(f"Catalog '{self.name}': cannot load table '{name.database}.{name.name}': {error}") from None
        return self._table(name.database, name.name, table)

    def objects(self, database: str | None = None, kind: str = "relation") -> list[TableDef]:
        catalog = self._catalog(creating=False)
        if kind != "relation" or catalog is None:
            return []
        database = database or self.default_database
        found = []
        for identifier in sorted(catalog.list_tables(database) if database in self._namespaces() else []):
            try:
                found.append(self.get(ObjectName(database, identifier[-1], self.name)))
            except CatalogError:
                continue  # a table with a column Flink does not map: named when it is used
        return [t for t in found if t is not None]

    def completed(self, create: exp.Create, name: ObjectName) -> None:
        """A CREATE TABLE in this catalog gets the catalog's connector options (Flink's tables of
        an Iceberg catalog name none); one that names another connector is refused."""
        properties = create.args.get("properties")
        given = {p.name: p for p in properties.expressions} if properties else {}
        connector = given.get("connector")
        if connector is not None and connector.args["value"].name != "iceberg":
            raise CatalogError(f"Catalog '{self.name}' (type 'iceberg') holds Iceberg tables: leave out 'connector'"
                               f" (it is '{connector.args['value'].name}')")
        added = {**self.options, "catalog-database": name.database, "catalog-table": name.name}
        items = [exp.Property(this=exp.Literal.string(k), value=exp.Literal.string(v))
                 for k, v in added.items() if k not in given]
        if properties is None:
            create.set("properties", exp.Properties(expressions=items))
        else:
            properties.set("expressions", [*items, *properties.expressions])

    # -- writing -----------------------------------------------------------------------

    def create(self, obj, if_not_exists: bool = False, replace: bool = False) -> bool:
        if not isinstance(obj, TableDef) or obj.temporary:
            what = "a temporary table" if isinstance(obj, TableDef) else "a view" if isinstance(obj, ViewDef) else "a function"
            raise CatalogError(f"Catalog '{self.name}' (type 'iceberg') holds Iceberg tables, not {what}")
        existing = self.get(obj.name)
        if existing is not None and not replace:
            if if_not_exists:
                return False
            raise CatalogError(f"Table '{obj.name}' already exists (DROP it first, or CREATE TABLE IF NOT EXISTS)")
        if self._pending is not None:
            self._pending[obj.name] = obj
            return True
        catalog = self._catalog(creating=True)
        identifier = (obj.name.database, obj.name.name)
        if existing is not None:
            catalog.drop_table(identifier)
        try:
            catalog.create_namespace_if_not_exists(obj.name.database)
            table = catalog.create_table(identifier, schema=_arrow_schema(obj))
            if obj.primary_key:
                with table.update_schema() as update:
                    update.set_identifier_fields(*obj.primary_key)
            if obj.partition_keys:
                with table.update_spec() as spec:
                    for key in obj.partition_keys:
                        spec.add_identity(key)
        except ConnectorError:
            raise
        except Exception as error:
            raise CatalogError(f"Catalog '{self.name}': cannot create table '{obj.name}': {error}") from None
        return True

    def drop(self, name: ObjectName, kind: str, if_exists: bool = False, temporary: bool = False) -> bool:
        if kind == "relation" and not temporary and self.get(name) is not None:
            if self._pending is not None:
                self._pending[name] = None
            else:
                self._catalog(creating=False).drop_table((name.database, name.name))
            return True
        if if_exists:
            return False
        raise CatalogError(f"Table '{name}' does not exist")

    def create_database(self, name: str, if_not_exists: bool = False) -> None:
        if self.has_database(name):
            if if_not_exists:
                return
            raise CatalogError(f"Database '{name}' already exists in catalog '{self.name}'")
        if self._pending is not None:
            self._pending_databases[name] = True
            return
        self._catalog(creating=True).create_namespace_if_not_exists(name)

    def drop_database(self, name: str, if_exists: bool = False, cascade: bool = False) -> None:
        if not self.has_database(name):
            if if_exists:
                return
            raise CatalogError(f"Database '{name}' does not exist in catalog '{self.name}'")
        catalog = self._catalog(creating=False)
        tables = catalog.list_tables(name) if name in self._namespaces() else []
        if tables and not cascade:
            raise CatalogError(f"Database '{name}' is not empty (use DROP DATABASE {name} CASCADE)")
        if self._pending is not None:
            self._pending_databases[name] = False
            return
        for identifier in tables:
            catalog.drop_table(identifier)
        if name in self._namespaces():
            catalog.drop_namespace(name)

    # -- Iceberg -------------------------------------------------------------------------

    def _catalog(self, creating: bool):
        """pyiceberg's catalog; None when reading one that was never written (no SQLite file yet)."""
        from streamsql.runtime.iceberg import catalog

        template = TableDef(ObjectName(self.default_database, self.name, self.name), [], self.options)
        file = catalog.catalog_file(template)
        if not creating and file is not None and not os.path.isfile(file):
            return None
        if not creating and catalog.is_hadoop(template) and not os.path.isdir(catalog.local_warehouse(template) or ""):
            return None
        try:
            return catalog.open_catalog(template, creating=creating)
        except ConnectorError as error:
            raise CatalogError(f"Catalog '{self.name}': {str(error).partition(': ')[2] or error}") from None

    def _table(self, database: str, name: str, table) -> TableDef:
        from streamsql.dialect.script import parse_statement
        from streamsql.plan.define import define

        schema = table.schema()
        keys = [schema.find_field(i).name for i in schema.identifier_field_ids]
        lines = []
        for field in schema.fields:
            flink = flink_type(field.field_type)
            if flink is None:
                raise CatalogError(f"Table '{self.name}.{database}.{name}': column '{field.name}' has the Iceberg type"
                                   f" {field.field_type}, which Flink's Iceberg catalog does not map here")
            lines.append(f"  {quoted(field.name)} {flink}{' NOT NULL' if field.required else ''}")
        if keys:
            lines.append(f"  PRIMARY KEY ({', '.join(map(quoted, keys))}) NOT ENFORCED")
        partitions = [schema.find_field(f.source_id).name for f in table.spec().fields if str(f.transform) == "identity"]
        options = {**self.options, "catalog-database": database, "catalog-table": name}
        ddl = table_ddl(self.name, database, name, lines, options, partitions)
        return define(parse_statement(ddl), database, catalog=self.name)


def flink_type(kind) -> str | None:
    """An Iceberg type's Flink type (FlinkSchemaUtil's mapping), or None for one not mapped."""
    from pyiceberg import types as T

    simple = {T.BooleanType: "BOOLEAN", T.IntegerType: "INT", T.LongType: "BIGINT", T.FloatType: "FLOAT",
              T.DoubleType: "DOUBLE", T.StringType: "STRING", T.BinaryType: "BYTES", T.DateType: "DATE",
              T.TimestampType: "TIMESTAMP(6)", T.TimestamptzType: "TIMESTAMP_LTZ(6)"}
    if type(kind) in simple:
        return simple[type(kind)]
    if isinstance(kind, T.DecimalType):
        return f"DECIMAL({kind.precision}, {kind.scale})"
    if isinstance(kind, T.ListType):
        element = flink_type(kind.element_type)
        return element and f"ARRAY<{element}>"
    if isinstance(kind, T.MapType):
        key, value = flink_type(kind.key_type), flink_type(kind.value_type)
        return key and value and f"MAP<{key}, {value}>"
    if isinstance(kind, T.StructType):
        fields = [(f.name, flink_type(f.field_type)) for f in kind.fields]
        if any(t is None for _, t in fields):
            return None
        return "ROW<" + ", ".join(f"{quoted(n)} {t}" for n, t in fields) + ">"
    return None


def _arrow_schema(table: TableDef):
    """The declared columns as Arrow (the iceberg sink's mapping), NOT NULL and key columns required."""
    import pyarrow as pa

    from streamsql.runtime.iceberg.schema import declared_schema

    schema = declared_schema(table)
    required = {c.name for c in table.physical_columns if c.not_null} | set(table.primary_key)
    return pa.schema([f.with_nullable(f.name not in required) for f in schema])

