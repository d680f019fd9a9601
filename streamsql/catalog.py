"""The catalog: databases of tables, views and functions, stored as Flink DDL files.

A persistent object is one file, ``<dir>/<database>/<name>.sql`` (functions:
``<name>.function.sql``), holding its normalised CREATE statement: readable, diffable
and loadable by the same parser as any script (see ``catalog_files``). Temporary objects
live only in memory and shadow persistent ones, as in Flink.

The catalog degrades, it never breaks: a file that does not load is reported once (with
its path and why) and skipped; everything else loads. The broken entry keeps its name:
using it is an error naming the file, DROP removes the file, CREATE OR REPLACE replaces
it, and a plain CREATE refuses to overwrite it.
"""

from __future__ import annotations

import copy
import sys
import threading
from pathlib import Path
from urllib.parse import quote, unquote

from sqlglot import exp

from streamsql.catalog_files import BrokenEntry, CatalogFiles
from streamsql.catalogs.registry import CatalogDef, Catalogs
from streamsql.errors import CatalogError
from streamsql.plan.objects import (
    DEFAULT_CATALOG,
    DEFAULT_DATABASE,
    CatalogObject,
    FunctionDef,
    ObjectName,
    TableDef,
    object_name,
    to_flink_sql,
)

Key = tuple[str, ObjectName]


class Catalog:
    """Flink's default_catalog, persisted under ``directory`` (None: in memory only), and the
    session's other catalogs (``catalogs``: CREATE CATALOG, kept in ``<directory>/_catalogs``).

    ``warn`` receives one line per file that does not load (once per session); unset,
    the Engine sets it to its log, else warnings go to stderr. Reading and listing
    (``get``, ``objects``, ``databases``, ``create``, ``drop``) go to the catalog an object's
    name carries, or the current one (USE CATALOG); an in-memory catalog of type
    ``generic_in_memory`` is itself a ``Catalog`` named ``name``.
    """

    def __init__(self, directory: str | Path | None, warn=None, name: str = DEFAULT_CATALOG,
                 default_database: str = DEFAULT_DATABASE):
        self.directory = Path(directory).resolve() if directory else None
        self.warn = warn
        self.name = name
        self.default_database = default_database
        self.current_database = default_database
        self.current_catalog = name
        self.catalogs = Catalogs(self.directory / "_catalogs" if self.directory else None)
        self._files = CatalogFiles(self.directory) if self.directory else None
        self._temporary: dict[Key, CatalogObject] = {}
        self._persistent: dict[Key, CatalogObject] = {}
        self._broken: dict[Key, BrokenEntry] = {}
        self._paths: dict[Key, Path] = {}
        self._staged = False
        self._loaded = False
        self._new_databases: set[str] = set()
        self._reported: set[str] = set()
        self._lock = threading.RLock()

    # -- reading -----------------------------------------------------------------------

    # -- catalogs ----------------------------------------------------------------------

    def name_of(self, table: exp.Table) -> ObjectName:
        """`t`, `db.t` or `catalog.db.t` resolved against the current catalog and database."""
        return object_name(table, self.current_database, self.current_catalog)

    def _other(self, catalog: str | None):
        """The catalog ``catalog`` names when it is not this one, else None."""
        catalog = catalog or self.current_catalog
        return None if catalog == self.name else self.catalogs.open(catalog)

    def use_catalog(self, name: str) -> None:
        other = self._other(name)
        self.current_catalog = name
        self.current_database = other.default_database if other is not None else self.default_database

    def prepare(self, create: exp.Create) -> None:
        """Let the catalog a CREATE TABLE goes to complete it (an Iceberg catalog adds its
        connector's options: Flink's tables of a catalog name none)."""
        target = create.this.this if isinstance(create.this, exp.Schema) else create.this
        if create.kind == "TABLE" and isinstance(target, exp.Table):
            name = self.name_of(target)
            other = self._other(name.catalog)
            if hasattr(other, "completed"):
                other.completed(create, name)

    def check_write(self, table: TableDef) -> None:
        """A CatalogError when the catalog that holds ``table`` refuses an INSERT INTO it (a
        'hive' catalog's partitioned file tables: catalogs.hive)."""
        other = self._other(table.name.catalog)
        if hasattr(other, "check_write"):
            other.check_write(table)

    def create_catalog(self, definition: CatalogDef, if_not_exists: bool = False) -> bool:
        return self.catalogs.create(definition, if_not_exists)

    def drop_catalog(self, name: str, if_exists: bool = False) -> bool:
        return self.catalogs.drop(name, if_exists, self.current_catalog)

    # -- reading -----------------------------------------------------------------------

    def get(self, name: ObjectName, kind: str = "relation") -> CatalogObject | None:
        """A table or view (kind 'relation') or a function (kind 'function') by name.

        An object whose file does not load raises a CatalogError naming the file.
        """
        if name.catalog != self.name:
            return self.catalogs.open(name.catalog).get(name, kind)
        key = (kind, name)
        if key in self._temporary:
            return self._temporary[key]
        self._load()
        if key in self._broken:
            raise self._broken[key].unusable()
        return self._persistent.get(key)

    def objects(self, database: str | None = None, kind: str = "relation", catalog: str | None = None) -> list[CatalogObject]:
        """Every loadable object of a kind in a database, temporary ones included, sorted by name."""
        other = self._other(catalog)
        if other is not None:
            return other.objects(database or self.current_database, kind)
        self._load()
        database = database or self.current_database
        found = {**self._persistent, **self._temporary}
        return sorted(
            (o for (k, n), o in found.items() if k == kind and n.database == database),
            key=lambda o: o.name.name,
        )

    def broken(self, database: str | None = None) -> list[BrokenEntry]:
        """The entries of a database (None: all) whose files do not load."""
        self._load()
        return [b for (_, n), b in sorted(self._broken.items(), key=lambda i: str(i[0][1]))
                if database is None or n.database == database]

    def databases(self, catalog: str | None = None) -> list[str]:
        """The databases of ``catalog`` (None: the current one)."""
        other = self._other(catalog)
        if other is not None:
            return other.databases()
        self._load()
        names = {self.default_database} | {n.database for _, n in self._persistent} | {n.database for _, n in self._broken}
        if self._files is not None:
            try:
                names |= {unquote(p.name) for p in self._files.database_folders()}
            except OSError:
                pass  # reported by the load
        return sorted(names)

    def has_database(self, name: str) -> bool:
        other = self._other(None)
        if other is not None:
            return other.has_database(name)
        return name in self.databases() or name in self._new_databases

    # -- writing -----------------------------------------------------------------------

    def create_database(self, name: str, if_not_exists: bool = False) -> None:
        other = self._other(None)
        if other is not None:
            return other.create_database(name, if_not_exists)
        if self.has_database(name):
            if if_not_exists:
                return
            raise CatalogError(f"Database '{name}' already exists")
        self._new_databases.add(name)
        if self._writes_files():
            try:
                (self.directory / quote(name, safe="")).mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise CatalogError(f"Cannot create database '{name}' in {self.directory}: {error.strerror}") from None

    def drop_database(self, name: str, if_exists: bool = False, cascade: bool = False) -> None:
        other = self._other(None)
        if other is not None:
            return other.drop_database(name, if_exists, cascade)
        if not self.has_database(name):
            if if_exists:
                return
            raise CatalogError(f"Database '{name}' does not exist")
        if name == self.default_database or name == self.current_database:
            raise CatalogError(f"Cannot drop database '{name}': it is the default or current database")
        contents = [(_kind(o), o.name) for o in self.objects(name) + self.objects(name, "function")]
        contents += [(b.kind, b.name) for b in self.broken(name)]
        if contents and not cascade:
            raise CatalogError(f"Database '{name}' is not empty (use DROP DATABASE {name} CASCADE)")
        for kind, entry in contents:
            self.drop(entry, kind)
        self._new_databases.discard(name)
        if self._writes_files():
            folder = self.directory / quote(name, safe="")
            try:
                if folder.exists():
                    folder.rmdir()
            except OSError as error:
                raise CatalogError(f"Database '{name}' is empty, but its folder {folder} cannot be removed"
                                   f" ({error.strerror}): it holds other files") from None

    def use(self, name: str) -> None:
        if not self.has_database(name):
            raise CatalogError(f"Database '{name}' does not exist (databases: {', '.join(self.databases())})")
        self.current_database = name

    def create(self, obj: CatalogObject, if_not_exists: bool = False, replace: bool = False) -> bool:
        """Register an object; False when IF NOT EXISTS (or an identical definition) made it a no-op.

        Re-running a job script must not fail on its own CREATE TABLE, so creating a
        persistent object whose stored definition is identical is accepted silently;
        a different definition under the same name is an error, unless ``replace``
        (CREATE OR REPLACE). A file that does not load is only ever replaced or dropped.
        """
        if if_not_exists and replace:
            raise CatalogError("CREATE OR REPLACE cannot be combined with IF NOT EXISTS")
        if obj.name.catalog != self.name:
            return self.catalogs.open(obj.name.catalog).create(obj, if_not_exists=if_not_exists, replace=replace)
        key = (_kind(obj), obj.name)
        if obj.temporary:
            existing = self._temporary.get(key)
        else:
            self._load()
            existing = self._broken.get(key) or self._persistent.get(key)
        if existing is not None and not replace:
            if if_not_exists:
                return False
            if isinstance(existing, BrokenEntry):
                raise existing.blocks_create()
            if _same_definition(existing, obj):
                return False
            what = "temporary " if obj.temporary else ""
            raise CatalogError(
                f"{what.capitalize()}{_label(obj)} '{obj.name}' already exists with a different definition"
                " (DROP it first, use CREATE OR REPLACE, or CREATE ... IF NOT EXISTS)"
            )
        if obj.temporary:
            self._temporary[key] = obj
            return True
        if replace:
            self._replace_file(key, obj)
        elif not self._create_file(key, obj):
            return False
        self._broken.pop(key, None)
        self._persistent[key] = obj
        return True

    def alter(self, old: ObjectName, new: CatalogObject) -> None:
        """ALTER TABLE: the new definition replaces the old one (renamed: under its new name)."""
        if new.name == old:
            self.create(new, replace=True)
            return
        kind = _kind(new)
        self._load()
        if (kind, new.name) in self._persistent or (kind, new.name) in self._broken:
            raise CatalogError(f"Cannot rename '{old.name}' to '{new.name.name}': that name is taken")
        self.create(new)
        self.drop(old, kind)

    def drop(self, name: ObjectName, kind: str, if_exists: bool = False, temporary: bool = False) -> bool:
        """Remove an object; the temporary one first when both exist, as Flink does.

        An entry whose file does not load is dropped like any other: its file goes.
        """
        if name.catalog != self.name:
            return self.catalogs.open(name.catalog).drop(name, kind, if_exists, temporary)
        key = (kind, name)
        if key in self._temporary:
            del self._temporary[key]
            return True
        if not temporary:
            self._load()
            if key in self._persistent or key in self._broken:
                if self._writes_files():
                    self._files.delete(self._file(key), name)
                self._persistent.pop(key, None)
                self._broken.pop(key, None)
                self._paths.pop(key, None)
                return True
        if if_exists:
            return False
        raise CatalogError(f"{'Function' if kind == 'function' else 'Table or view'} '{name}' does not exist")

    def staged(self) -> Catalog:
        """A copy to plan a script against: it sees every change (and every broken entry), but writes no file."""
        self._load()
        clone = copy.copy(self)
        clone._temporary = dict(self._temporary)
        clone._persistent = dict(self._persistent)
        clone._broken = dict(self._broken)
        clone._paths = dict(self._paths)
        clone._new_databases = set(self._new_databases)
        clone.catalogs = self.catalogs.copy()
        clone._staged = True
        return clone

    # -- storage -----------------------------------------------------------------------

    def _writes_files(self) -> bool:
        return self._files is not None and not self._staged

    def _file(self, key: Key) -> Path:
        return self._paths.get(key) or self._files.path(*key)

    def _create_file(self, key: Key, obj: CatalogObject) -> bool:
        """Publish a new object's file exclusively; False when an identical one is already there."""
        if not self._writes_files():
            return True
        found = self._files.create(key[0], obj)
        if found is None:
            self._paths[key] = self._files.path(*key)
            return True
        path = self._files.path(*key)
        if isinstance(found, BrokenEntry):
            self._broken[key] = found
            raise found.blocks_create()
        if not _same_definition(found, obj):
            raise CatalogError(
                f"{_label(obj).capitalize()} '{obj.name}' was created by another session meanwhile with a"
                f" different definition ({path}); DROP it first, or use CREATE OR REPLACE"
            )
        self._persistent[key] = found
        self._paths[key] = path
        return False

    def _replace_file(self, key: Key, obj: CatalogObject) -> None:
        if not self._writes_files():
            return
        self._files.replace(key[0], obj)
        old, new = self._paths.get(key), self._files.path(*key)
        if old is not None and old != new:
            self._files.delete(old, obj.name)
        self._paths[key] = new

    def _load(self) -> None:
        """Read every stored definition once; whatever does not load is reported and kept aside.

        The result is installed only when the whole directory has been read, so an
        interruption (Ctrl-C) leaves the catalog unloaded, to be read again, never half-read.
        """
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            persistent: dict[Key, CatalogObject] = {}
            broken: dict[Key, BrokenEntry] = {}
            paths: dict[Key, Path] = {}
            warnings: list[str] = []
            if self._files is not None:
                for kind, name, path in self._files.scan(warnings.append):
                    entry = self._files.read(kind, name, path)
                    (broken if isinstance(entry, BrokenEntry) else persistent)[(kind, name)] = entry
                    paths[(kind, name)] = path
            self._persistent, self._broken, self._paths = persistent, broken, paths
            self._loaded = True
        for message in warnings + [b.warning() for b in broken.values()]:
            self._warn(message)

    def _warn(self, message: str) -> None:
        """Each warning once per session (a staged copy shares what was reported)."""
        if message in self._reported:
            return
        self._reported.add(message)
        (self.warn or _stderr)(message)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _kind(obj: CatalogObject) -> str:
    return "function" if isinstance(obj, FunctionDef) else "relation"


def _label(obj: CatalogObject) -> str:
    return type(obj).__name__.removesuffix("Def").lower()


def _same_definition(a: CatalogObject, b: CatalogObject) -> bool:
    if type(a) is not type(b) or a.ddl is None or b.ddl is None:
        return False
    if isinstance(a, TableDef) and a.options != b.options:
        return False
    return to_flink_sql(_normalised(a.ddl)) == to_flink_sql(_normalised(b.ddl))


def _normalised(ddl):
    """The statement without what does not belong to the definition (IF NOT EXISTS, OR REPLACE)."""
    ddl = ddl.copy()
    ddl.set("exists", False)
    ddl.set("replace", False)
    return ddl
