"""The catalog: databases of tables, views and functions, stored as Flink DDL files.

A persistent object is one file, ``<dir>/<database>/<name>.sql`` (functions:
``<name>.function.sql``), holding its normalised CREATE statement: readable, diffable
and loadable by the same parser as any script. Files are written to a temporary name
and renamed into place, so a crash mid-write leaves the old file or the new one, never
half of one. Temporary objects live only in memory and shadow persistent ones, as in
Flink.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from urllib.parse import quote, unquote

from streamsql.errors import CatalogError, StreamsqlError
from streamsql.plan.objects import (
    DEFAULT_DATABASE,
    CatalogObject,
    FunctionDef,
    ObjectName,
    TableDef,
    to_flink_sql,
)

_FUNCTION_SUFFIX = ".function.sql"


class Catalog:
    """Flink's default_catalog, persisted under ``directory`` (None: in memory only)."""

    def __init__(self, directory: str | Path | None):
        self.directory = Path(directory).resolve() if directory else None
        self.current_database = DEFAULT_DATABASE
        self._temporary: dict[tuple[str, ObjectName], CatalogObject] = {}
        self._persistent: dict[tuple[str, ObjectName], CatalogObject] = {}
        self._staged = False
        self._loaded = False
        self._new_databases: set[str] = set()

    # -- reading -----------------------------------------------------------------------

    def get(self, name: ObjectName, kind: str = "relation") -> CatalogObject | None:
        """A table or view (kind 'relation') or a function (kind 'function') by name."""
        key = (kind, name)
        if key in self._temporary:
            return self._temporary[key]
        self._load()
        return self._persistent.get(key)

    def objects(self, database: str | None = None, kind: str = "relation") -> list[CatalogObject]:
        """Every object of a kind in a database, temporary ones included, sorted by name."""
        self._load()
        database = database or self.current_database
        found = {**self._persistent, **self._temporary}
        return sorted(
            (o for (k, n), o in found.items() if k == kind and n.database == database),
            key=lambda o: o.name.name,
        )

    def databases(self) -> list[str]:
        self._load()
        names = {DEFAULT_DATABASE} | {n.database for _, n in self._persistent}
        if self.directory and self.directory.exists():
            names |= {unquote(p.name) for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
        return sorted(names)

    def has_database(self, name: str) -> bool:
        return name in self.databases() or name in self._new_databases

    # -- writing -----------------------------------------------------------------------

    def create_database(self, name: str, if_not_exists: bool = False) -> None:
        if self.has_database(name):
            if if_not_exists:
                return
            raise CatalogError(f"Database '{name}' already exists")
        self._new_databases.add(name)
        if self.directory is not None and not self._staged:
            (self.directory / quote(name, safe="")).mkdir(parents=True, exist_ok=True)

    def drop_database(self, name: str, if_exists: bool = False, cascade: bool = False) -> None:
        if not self.has_database(name):
            if if_exists:
                return
            raise CatalogError(f"Database '{name}' does not exist")
        if name == DEFAULT_DATABASE or name == self.current_database:
            raise CatalogError(f"Cannot drop database '{name}': it is the default or current database")
        contents = self.objects(name) + self.objects(name, "function")
        if contents and not cascade:
            raise CatalogError(f"Database '{name}' is not empty (use DROP DATABASE {name} CASCADE)")
        for obj in contents:
            self.drop(obj.name, "function" if isinstance(obj, FunctionDef) else "relation")
        self._new_databases.discard(name)
        if self.directory is not None and not self._staged:
            folder = self.directory / quote(name, safe="")
            if folder.exists():
                folder.rmdir()

    def use(self, name: str) -> None:
        if not self.has_database(name):
            raise CatalogError(f"Database '{name}' does not exist (databases: {', '.join(self.databases())})")
        self.current_database = name

    def create(self, obj: CatalogObject, if_not_exists: bool = False) -> bool:
        """Register an object; False when IF NOT EXISTS (or an identical definition) made it a no-op.

        Re-running a job script must not fail on its own CREATE TABLE, so creating a
        persistent object whose stored definition is identical is accepted silently;
        a different definition under the same name is an error.
        """
        kind = _kind(obj)
        existing = self._temporary.get((kind, obj.name)) if obj.temporary else self._stored(kind, obj.name)
        if existing is not None:
            if if_not_exists or _same_definition(existing, obj):
                return False
            what = "temporary " if obj.temporary else ""
            raise CatalogError(
                f"{what.capitalize()}{_label(obj)} '{obj.name}' already exists with a different definition"
                " (DROP it first, or use CREATE ... IF NOT EXISTS)"
            )
        if obj.temporary:
            self._temporary[(kind, obj.name)] = obj
        else:
            self._write(obj)
            self._persistent[(kind, obj.name)] = obj
        return True

    def drop(self, name: ObjectName, kind: str, if_exists: bool = False, temporary: bool = False) -> bool:
        """Remove an object; the temporary one first when both exist, as Flink does."""
        key = (kind, name)
        if key in self._temporary:
            del self._temporary[key]
            return True
        if not temporary and self._stored(kind, name) is not None:
            self._delete(key)
            return True
        if if_exists:
            return False
        raise CatalogError(f"{'Function' if kind == 'function' else 'Table or view'} '{name}' does not exist")

    def staged(self) -> Catalog:
        """A copy to plan a script against: it sees every change, but writes no file."""
        self._load()
        clone = copy.copy(self)
        clone._temporary = dict(self._temporary)
        clone._persistent = dict(self._persistent)
        clone._new_databases = set(self._new_databases)
        clone._staged = True
        return clone

    # -- storage -----------------------------------------------------------------------

    def _stored(self, kind: str, name: ObjectName) -> CatalogObject | None:
        self._load()
        return self._persistent.get((kind, name))

    def _path(self, kind: str, name: ObjectName) -> Path:
        suffix = _FUNCTION_SUFFIX if kind == "function" else ".sql"
        return self.directory / quote(name.database, safe="") / (quote(name.name, safe="") + suffix)

    def _write(self, obj: CatalogObject) -> None:
        if self.directory is None or self._staged:
            return
        path = self._path(_kind(obj), obj.name)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                handle.write(to_flink_sql(obj.ddl) + ";\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except OSError as error:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise CatalogError(f"Cannot store {_label(obj)} '{obj.name}' in {path.parent}: {error.strerror}") from None

    def _delete(self, key: tuple[str, ObjectName]) -> None:
        del self._persistent[key]
        if self.directory is not None and not self._staged:
            self._path(*key).unlink(missing_ok=True)

    def _load(self) -> None:
        """Read every stored definition once; a file that fails to load names itself."""
        if self._loaded:
            return
        self._loaded = True
        if self.directory is None or not self.directory.exists():
            return
        for path in sorted(self.directory.glob("*/*.sql")):
            if path.name.startswith("."):
                continue
            obj = self._read(path)
            self._persistent[(_kind(obj), obj.name)] = obj

    def _read(self, path: Path) -> CatalogObject:
        from streamsql.dialect.script import parse_statement
        from streamsql.plan.define import define

        database = unquote(path.parent.name)
        try:
            obj = define(parse_statement(path.read_text()), database, base_dir=self.directory)
        except StreamsqlError as error:
            raise CatalogError(f"Catalog file {path} does not load: {error.message}") from None
        obj.temporary = False
        return obj


def _kind(obj: CatalogObject) -> str:
    return "function" if isinstance(obj, FunctionDef) else "relation"


def _label(obj: CatalogObject) -> str:
    return type(obj).__name__.removesuffix("Def").lower()


def _same_definition(a: CatalogObject, b: CatalogObject) -> bool:
    if type(a) is not type(b) or a.ddl is None or b.ddl is None:
        return False
    if isinstance(a, TableDef) and a.options != b.options:
        return False
    return to_flink_sql(_without_if_not_exists(a.ddl)) == to_flink_sql(_without_if_not_exists(b.ddl))


def _without_if_not_exists(ddl):
    ddl = ddl.copy()
    ddl.set("exists", False)
    return ddl
