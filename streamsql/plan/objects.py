"""Catalog objects (tables, views, functions) as they are defined by Flink DDL.

A definition is built once from its CREATE statement and keeps that statement, so the
catalog can store exactly what the user wrote (normalised) and show it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from streamsql.dialect.flink import Flink
from streamsql.errors import Position

DEFAULT_CATALOG = "default_catalog"
DEFAULT_DATABASE = "default_database"


@dataclass(frozen=True)
class ObjectName:
    """A catalog- and database-qualified object name; Flink names are case-sensitive."""

    database: str
    name: str
    catalog: str = DEFAULT_CATALOG

    def __str__(self) -> str:
        return f"{self.catalog}.{self.database}.{self.name}"


@dataclass
class Column:
    """A physical column, a computed one when ``expression`` is set, or a metadata column
    (``METADATA [FROM 'key'] [VIRTUAL]``) when ``metadata`` is set (its key)."""

    name: str
    type: exp.DataType
    expression: exp.Expression | None = None
    time_attribute: str | None = None  # 'rowtime' or 'proctime'
    not_null: bool = False
    metadata: str | None = None
    virtual: bool = False

    @property
    def is_computed(self) -> bool:
        return self.expression is not None


@dataclass
class Watermark:
    """WATERMARK FOR column AS expression."""

    column: str
    expression: exp.Expression


@dataclass
class TableDef:
    """A table: schema, time attributes, keys and connector options."""

    name: ObjectName
    columns: list[Column]
    options: dict[str, str]
    watermark: Watermark | None = None
    primary_key: list[str] = field(default_factory=list)
    partition_keys: list[str] = field(default_factory=list)
    temporary: bool = False
    ddl: exp.Create | None = None

    @property
    def physical_columns(self) -> list[Column]:
        """Flink's physical columns: neither computed nor metadata (what a format reads and writes)."""
        return [c for c in self.columns if not c.is_computed and c.metadata is None]

    @property
    def metadata_columns(self) -> list[Column]:
        return [c for c in self.columns if c.metadata is not None]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass
class ViewDef:
    """A view: a query with a name, and the columns that query produces."""

    name: ObjectName
    query: exp.Query
    columns: list[Column] = field(default_factory=list)
    temporary: bool = False
    ddl: exp.Create | None = None


@dataclass
class FunctionDef:
    """A user-defined function implemented in Python as 'module.function'."""

    name: ObjectName
    identifier: str
    language: str = "PYTHON"
    temporary: bool = False
    ddl: exp.Create | None = None


CatalogObject = TableDef | ViewDef | FunctionDef


def object_name(table: exp.Table, current_database: str, current_catalog: str = DEFAULT_CATALOG) -> ObjectName:
    """Resolve `t`, `db.t` or `catalog.db.t` against the current catalog and database (whether
    the catalog exists is the catalog's to say: ``Catalog.get``)."""
    return ObjectName(table.db or current_database, table.name, table.catalog or current_catalog)


def identifier_position(node: exp.Expression | None) -> Position | None:
    """The line and column sqlglot recorded for an identifier, if any."""
    if node is None:
        return None
    identifier = node if isinstance(node, exp.Identifier) else node.find(exp.Identifier)
    meta = identifier.meta if identifier is not None else {}
    if "line" not in meta:
        return None
    length = len(identifier.this) + (2 if identifier.quoted else 0)
    return Position(meta["line"], max(1, meta["col"] - length + 1))


def to_flink_sql(node: exp.Expression, pretty: bool = True) -> str:
    return node.sql(dialect=Flink, pretty=pretty)


def uniquify_names(items: list) -> None:
    """Duplicate output names (of columns or fields, anything with a ``name``) get a numeric
    suffix, as Flink's validator gives them: `dateTime`, `dateTime0`."""
    seen: set[str] = set()
    for item in items:
        if item.name in seen:
            suffix = 0
            while f"{item.name}{suffix}" in seen:
                suffix += 1
            item.name = f"{item.name}{suffix}"
        seen.add(item.name)
