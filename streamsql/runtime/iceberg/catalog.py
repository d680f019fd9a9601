"""An Iceberg table's catalog, from Flink's catalog options: pyiceberg's SQL or REST catalog, or a Hadoop one.

**Which catalogs.** Flink's ``'connector' = 'iceberg'`` names its catalog with
``catalog-name``, ``catalog-type`` (or ``catalog-impl``), ``warehouse`` and ``uri``.
pyiceberg can commit to REST, Hive, Glue, DynamoDB, BigQuery and SQL catalogs, but not to a
Hadoop one, and a Hive metastore is nothing this connector is wired to yet. So the catalog
types are:

- ``rest`` (``catalog-impl`` = ``org.apache.iceberg.rest.RESTCatalog``): pyiceberg's REST
  client, at ``uri`` (``http(s)://``), with ``warehouse``, ``credential`` and ``token`` as
  Iceberg's RESTCatalog takes them; the server keeps the catalog and checks each commit.
- ``hadoop`` (``catalog-impl`` = ``org.apache.iceberg.hadoop.HadoopCatalog``): the
  warehouse's directories, in Java's layout (``v<N>.metadata.json``, ``version-hint.text``),
  committed to by streamsql's own pyiceberg catalog (``runtime.iceberg.hadoop_catalog``);
  so a table Flink's or Spark's Java Iceberg writes to the same warehouse is the same table.
- ``jdbc`` (``catalog-impl`` = ``org.apache.iceberg.jdbc.JdbcCatalog``): Iceberg's Java
  JdbcCatalog, whose two tables (``iceberg_tables``, ``iceberg_namespace_properties``, keyed
  by the catalog's name) pyiceberg's SqlCatalog reads and writes alike, so a table committed
  by Flink or Spark's Java Iceberg through the same database is the same table here.

**Where the catalog is.** ``uri`` is the JDBC URL Java's catalog takes, mapped to SQLAlchemy's:
``jdbc:sqlite:<file>`` (``jdbc:sqlite:file:<file>`` too) to ``sqlite:///<file>``, and
``jdbc:postgresql://host:port/db?user=..&password=..`` (with ``jdbc.user``/``jdbc.password``,
Java's catalog properties) to ``postgresql+psycopg://`` (psycopg 3). Without ``uri`` the
catalog is a SQLite file in the warehouse, ``<warehouse>/iceberg_catalog.db``. ``warehouse``
is where new tables' files go (``<warehouse>/<database>/<table>``); a local path or a
``file:`` URI. The table is ``catalog-database``.``catalog-table``, by default the Flink
table's own database and name, as in Flink.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, quote, urlsplit

from streamsql.errors import ConnectorError
from streamsql.plan.objects import TableDef

CATALOG_FILE = "iceberg_catalog.db"
_CATALOGS: dict[tuple, object] = {}  # (name, server URI, warehouse) -> SqlCatalog: one engine (pool) per server


def warehouse(table: TableDef) -> str:
    """The warehouse as a URI (a local path made absolute, ``file://``)."""
    value = table.options["warehouse"]
    if "://" in value:
        return value.rstrip("/")
    return "file://" + os.path.abspath(value.removeprefix("file:"))


def local_warehouse(table: TableDef) -> str | None:
    location = warehouse(table)
    return location[len("file://"):] if location.startswith("file://") else None


def sqlalchemy_uri(table: TableDef) -> str:
    """The catalog's database as SQLAlchemy names it (see the module docstring)."""
    options = table.options
    uri = options.get("uri")
    if uri is None:
        local = local_warehouse(table)
        if local is None:
            raise ConnectorError(f"Table '{table.name.name}': a warehouse that is no local path needs 'uri' (the"
                                 " catalog's database: 'jdbc:sqlite:<file>' or 'jdbc:postgresql://...')")
        return f"sqlite:///{os.path.join(local, CATALOG_FILE)}"
    if uri.startswith("jdbc:sqlite:"):
        return "sqlite:///" + os.path.abspath(uri[len("jdbc:sqlite:"):].removeprefix("file:"))
    parts = urlsplit(uri[len("jdbc:"):])
    query = dict(parse_qsl(parts.query))
    user = options.get("jdbc.user", query.pop("user", None))
    password = options.get("jdbc.password", query.pop("password", None))
    credentials = ""
    if user:
        credentials = quote(user, safe="") + (f":{quote(password, safe='')}" if password else "") + "@"
    rest = "&".join(f"{k}={quote(v, safe='/')}" for k, v in query.items())  # ssl* (checked at definition)
    return f"postgresql+psycopg://{credentials}{parts.netloc.rpartition('@')[2]}{parts.path}" + (f"?{rest}" if rest else "")


def catalog_file(table: TableDef) -> str | None:
    """The SQLite file of the catalog, if it is one."""
    if catalog_kind(table) != "jdbc":
        return None
    uri = sqlalchemy_uri(table)
    return uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None


def catalog_kind(table: TableDef) -> str | None:
    """'jdbc', 'hadoop' or 'rest' (plan.connectors checked it)."""
    from streamsql.plan.connectors import iceberg_catalog_kind

    return iceberg_catalog_kind(table.options)


def location(table: TableDef) -> str:
    """Where the catalog is, credentials left out: its database, directory or server."""
    kind = catalog_kind(table)
    if kind == "rest":
        return table.options["uri"]
    return warehouse(table) if kind == "hadoop" else sqlalchemy_uri(table).rpartition("@")[2]


def is_hadoop(table: TableDef) -> bool:
    return catalog_kind(table) == "hadoop"


def identifier(table: TableDef) -> tuple[str, str]:
    """(catalog-database, catalog-table): the Flink table's own database and name by default."""
    return (table.options.get("catalog-database", table.name.database), table.options.get("catalog-table", table.name.name))


def described(table: TableDef) -> str:
    database, name = identifier(table)
    return f"Iceberg table '{database}.{name}' of catalog '{table.options['catalog-name']}'"


def open_catalog(table: TableDef, creating: bool = False):
    """pyiceberg's SqlCatalog for the table's options. A reader's SQLite catalog must exist
    (connecting would create an empty one); a writer's is created, warehouse and all."""
    from pyiceberg.catalog.sql import SqlCatalog

    name = table.name.name
    if catalog_kind(table) == "rest":
        return _rest_catalog(table)
    if is_hadoop(table):
        from streamsql.runtime.iceberg.hadoop_catalog import HadoopCatalog

        local = local_warehouse(table)
        if creating:
            os.makedirs(local, exist_ok=True)
        elif not os.path.isdir(local):
            raise ConnectorError(f"Table '{name}': warehouse '{table.options['warehouse']}' does not exist (write the"
                                 " table first, or fix 'warehouse')")
        return HadoopCatalog(table.options["catalog-name"], warehouse=warehouse(table))
    local, file = local_warehouse(table), catalog_file(table)
    if not creating:
        if local is not None and not os.path.isdir(local):
            raise ConnectorError(f"Table '{name}': warehouse '{table.options['warehouse']}' does not exist (write the"
                                 " table first, or fix 'warehouse')")
        if file is not None and not os.path.isfile(file):
            raise ConnectorError(f"Table '{name}': there is no Iceberg catalog at '{file}' (no SQLite catalog file;"
                                 " write the table first, or fix 'warehouse' / 'uri')")
    if creating:
        for directory in (local, os.path.dirname(file) if file else None):
            if directory:
                os.makedirs(directory, exist_ok=True)
    key = (table.options["catalog-name"], sqlalchemy_uri(table), warehouse(table))
    if file is None and key in _CATALOGS:
        return _CATALOGS[key]
    try:
        opened = SqlCatalog(key[0], uri=key[1], warehouse=key[2])
    except Exception as error:  # SQLAlchemy: OperationalError, ...
        raise ConnectorError(f"Table '{name}': cannot open the Iceberg catalog at '{table.options.get('uri', file)}':"
                             f" {first_line(error)}") from None
    if file is None:  # a server's: kept. A SQLite file removed and made again at the same path (a new
        _CATALOGS[key] = opened  # warehouse) is another database, which a kept engine's connection would not see
    return opened


def _rest_catalog(table: TableDef):
    """pyiceberg's REST catalog at 'uri' (the server keeps the catalog; this process writes the
    data and metadata files where the server's table locations say), one per server."""
    from pyiceberg.catalog.rest import RestCatalog

    options = table.options
    properties = {"uri": options["uri"]}
    properties.update({k: options[k] for k in ("warehouse", "credential", "token") if k in options})
    key = (options["catalog-name"], *sorted(properties.items()))
    if key not in _CATALOGS:
        try:
            _CATALOGS[key] = RestCatalog(options["catalog-name"], **properties)  # asks the server for its config
        except Exception as error:  # requests' ConnectionError, pyiceberg's RESTError, ...
            raise ConnectorError(f"Table '{table.name.name}': cannot reach the Iceberg REST catalog at"
                                 f" '{options['uri']}': {first_line(error)}") from None
    return _CATALOGS[key]


def load(table: TableDef, creating_schema=None):
    """The pyiceberg Table; with ``creating_schema`` (a pyiceberg Schema) a missing table (and
    database) is created with it, as Flink's connector creates it; else a ConnectorError."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    catalog = open_catalog(table, creating=creating_schema is not None)
    database, name = identifier(table)
    try:
        return catalog.load_table((database, name))
    except (NoSuchTableError, NoSuchNamespaceError):
        if creating_schema is None:
            raise ConnectorError(f"Table '{table.name.name}': the {described(table)} does not exist (write it first,"
                                 " or fix 'catalog-database' / 'catalog-table')") from None
    except Exception as error:
        raise ConnectorError(f"Table '{table.name.name}': cannot load the {described(table)}: {first_line(error)}") from None
    try:
        catalog.create_namespace_if_not_exists(database)
        return catalog.create_table_if_not_exists((database, name), schema=creating_schema)
    except Exception as error:
        raise ConnectorError(f"Table '{table.name.name}': cannot create the {described(table)}: {first_line(error)}") from None


def first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
