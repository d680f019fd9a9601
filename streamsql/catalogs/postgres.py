"""A PostgreSQL server's tables as a catalog, as Flink's JdbcCatalog (its PostgresCatalog) shows them.

    CREATE CATALOG pg WITH ('type' = 'jdbc', 'base-url' = 'jdbc:postgresql://host:5432',
                            'default-database' = 'shop', 'username' = '...', 'password' = '...');
    SELECT * FROM pg.shop.`public.orders`;   -- or pg.shop.orders: a table of schema public

**Databases** are the server's (not its templates); **tables** are every table, view,
materialized view and partitioned table outside PostgreSQL's own schemas, named
``schema.table`` as Flink names them (a name without a schema is in ``public``). Each is a
``jdbc`` table (``url`` the server and database, ``table-name`` the quoted relation, the
catalog's user and password) with its columns as PostgreSQL declares them, NOT NULL and
its primary key kept, so it is read, looked up and written like a declared one.

**Types**, as Flink's PostgresTypeMapper maps them: smallint SMALLINT, integer INT, bigint
BIGINT, real FLOAT, double precision DOUBLE, numeric(p, s) DECIMAL(p, s) (numeric without
one DECIMAL(38, 18)), boolean BOOLEAN, varchar(n) VARCHAR(n) (without n STRING), char(n)
CHAR(n), text STRING, bytea BYTES, date DATE, time(p) TIME(p), timestamp(p) TIMESTAMP(p),
timestamptz TIMESTAMP_LTZ(p), and arrays of those ARRAY<...>. A column of another type (json,
uuid, ...) makes its table unusable, with one error naming the column; Flink's catalog
refuses such a table too. Tables are not created, altered or dropped through the catalog
(Flink's JdbcCatalog does not either): that is PostgreSQL's DDL.
"""

from __future__ import annotations

import re

from streamsql.catalogs.ddl import quoted, table_ddl
from streamsql.catalogs.read_only import ReadOnlyDDL
from streamsql.catalogs.registry import CatalogDef
from streamsql.errors import CatalogError
from streamsql.plan.objects import ObjectName, TableDef

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")
_SIMPLE = {"smallint": "SMALLINT", "integer": "INT", "bigint": "BIGINT", "real": "FLOAT", "double precision": "DOUBLE",
           "boolean": "BOOLEAN", "text": "STRING", "bytea": "BYTES", "date": "DATE", "numeric": "DECIMAL(38, 18)",
           "character varying": "STRING", "character": "CHAR(1)", "time without time zone": "TIME(6)",
           "timestamp without time zone": "TIMESTAMP(6)", "timestamp with time zone": "TIMESTAMP_LTZ(6)"}
_SIZED = [(re.compile(r"numeric\((\d+),(\d+)\)"), "DECIMAL({0}, {1})"),
          (re.compile(r"character varying\((\d+)\)"), "VARCHAR({0})"), (re.compile(r"character\((\d+)\)"), "CHAR({0})"),
          (re.compile(r"time\((\d)\) without time zone"), "TIME({0})"),
          (re.compile(r"timestamp\((\d)\) without time zone"), "TIMESTAMP({0})"),
          (re.compile(r"timestamp\((\d)\) with time zone"), "TIMESTAMP_LTZ({0})")]
_COLUMNS = """
SELECT n.nspname, c.relname, quote_ident(n.nspname) || '.' || quote_ident(c.relname), a.attname,
       format_type(a.atttypid, a.atttypmod), a.attnotnull,
       COALESCE(a.attnum = ANY (i.indkey), false)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE c.relkind IN ('r', 'v', 'm', 'p') AND NOT c.relispartition AND n.nspname <> ALL (%s)
  AND n.nspname NOT LIKE 'pg_temp%%' AND (%s::text IS NULL OR (n.nspname = %s AND c.relname = %s))
ORDER BY n.nspname, c.relname, a.attnum
"""


def flink_type(pg: str) -> str | None:
    """The Flink type of a column PostgreSQL declares as ``pg`` (format_type's text), or None."""
    if pg.endswith("[]"):
        element = flink_type(pg[:-2])
        return f"ARRAY<{element}>" if element else None
    if pg in _SIMPLE:
        return _SIMPLE[pg]
    for pattern, flink in _SIZED:
        match = pattern.fullmatch(pg.replace(", ", ","))
        if match:
            return flink.format(*match.groups())
    return None


class PostgresCatalog(ReadOnlyDDL):
    TYPE = "jdbc"
    REFUSAL = ": its tables are PostgreSQL's, defined by PostgreSQL's own DDL (as in Flink's JdbcCatalog)"

    def __init__(self, definition: CatalogDef):
        from streamsql.runtime.jdbc_target import jdbc_address

        self.definition = definition
        self.name = definition.name
        self.default_database = definition.options["default-database"]
        _, self.host, self.port, _, _ = jdbc_address(definition.options["base-url"])

    # -- the catalog's reading side ----------------------------------------------------

    def databases(self) -> list[str]:
        rows = self._query(self.default_database, "SELECT datname FROM pg_database WHERE NOT datistemplate"
                                                  " AND datallowconn ORDER BY datname")
        return [r[0] for r in rows]

    def has_database(self, name: str) -> bool:
        return name in self.databases()

    def get(self, name: ObjectName, kind: str = "relation") -> TableDef | None:
        if kind != "relation" or not self.has_database(name.database):
            return None
        schema, _, table = name.name.rpartition(".")
        tables = self._tables(name.database, (schema or "public", table))
        return self._table(name.database, name.name, tables[0]) if tables else None

    def objects(self, database: str | None = None, kind: str = "relation") -> list[TableDef]:
        if kind != "relation":
            return []
        found = []
        for columns in self._tables(database or self.default_database, None):
            try:
                found.append(self._table(database, columns[0][0] + "." + columns[0][1], columns))
            except CatalogError:
                continue  # a table with a column of an unmapped type: named when it is used
        return found

    # -- PostgreSQL ------------------------------------------------------------------------

    def _tables(self, database: str, only: tuple[str, str] | None) -> list[list[tuple]]:
        """Each table's column rows (schema, table, relation, column, type, not null, in key)."""
        schema, table = only or (None, None)
        rows = self._query(database, _COLUMNS, (list(SYSTEM_SCHEMAS), schema, schema, table))
        grouped: dict[tuple, list[tuple]] = {}
        for row in rows:
            grouped.setdefault(row[:2], []).append(row)
        return list(grouped.values())

    def _table(self, database: str, name: str, columns: list[tuple]) -> TableDef:
        from streamsql.dialect.script import parse_statement
        from streamsql.plan.define import define

        lines, keys = [], []
        for _, _, _, column, pg, not_null, in_key in columns:
            flink = flink_type(pg)
            if flink is None:
                raise CatalogError(f"Table '{self.name}.{database}.{name}': column '{column}' has PostgreSQL type"
                                   f" '{pg}', which Flink's JDBC catalog does not map (supported: numbers, text,"
                                   " booleans, bytea, dates and times, and arrays of them)")
            lines.append(f"  {quoted(column)} {flink}{' NOT NULL' if not_null or in_key else ''}")
            keys += [column] if in_key else []
        if keys:
            lines.append(f"  PRIMARY KEY ({', '.join(map(quoted, keys))}) NOT ENFORCED")
        options = {"connector": "jdbc", "url": f"jdbc:postgresql://{self.host}:{self.port}/{database}",
                   "table-name": columns[0][2]}
        for key in ("username", "password"):
            if key in self.definition.options:
                options[key] = self.definition.options[key]
        ddl = table_ddl(self.name, database, name, lines, options)
        return define(parse_statement(ddl), database, catalog=self.name)

    def _query(self, database: str, sql: str, params=()) -> list[tuple]:
        import psycopg

        connect = {"host": self.host, "port": self.port, "dbname": database, "connect_timeout": 10}
        connect.update({k: v for k, v in (("user", self.definition.options.get("username")),
                                          ("password", self.definition.options.get("password"))) if v})
        try:
            with psycopg.connect(**connect) as connection:
                return connection.execute(sql, params).fetchall()
        except psycopg.Error as error:
            raise CatalogError(f"Catalog '{self.name}': cannot read database '{database}' at"
                               f" {self.definition.options['base-url']}: {str(error).strip().splitlines()[0]}") from None

