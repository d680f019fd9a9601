"""The catalogs a session knows: their definitions (stored as CREATE CATALOG statements) and,
once used, the opened catalogs (see the package docstring)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

from sqlglot import exp

from streamsql.dialect.catalogs import catalog_ddl
from streamsql.catalog_files import UnknownCatalogError
from streamsql.errors import CatalogError, StreamsqlError
from streamsql.plan.objects import DEFAULT_CATALOG

# Each type's options: required, then optional (Flink's catalog factories' names).
TYPES: dict[str, tuple[set[str], set[str]]] = {
    "jdbc": ({"base-url", "default-database"}, {"username", "password"}),
    "iceberg": (set(), {"warehouse", "catalog-type", "catalog-impl", "uri", "jdbc.user", "jdbc.password", "credential",
                        "token", "default-database",
                                "property-version", "cache-enabled"}),
    "hive": (set(), {"hive-conf-dir", "hadoop-conf-dir", "default-database", "hive-version", "property-version"}),
    "generic_in_memory": (set(), {"default-database"}),
}


@dataclass
class CatalogDef:
    name: str
    options: dict[str, str]
    comment: str | None = None

    @property
    def type(self) -> str:
        return self.options["type"]

    def ddl(self) -> str:
        return catalog_ddl(self.name, self.options, self.comment)


def catalog_def(create: exp.Create) -> CatalogDef:
    """A CREATE CATALOG statement's definition, its type and options checked."""
    name = create.this.name
    options = {p.name: p.args["value"].name for p in create.args["properties"].expressions}
    comment = create.args.get("expression")
    definition = CatalogDef(name, options, comment.name if comment is not None else None)
    check(definition)
    return definition


def check(definition: CatalogDef) -> None:
    name, options = definition.name, definition.options
    if name == DEFAULT_CATALOG:
        raise CatalogError(f"Catalog '{DEFAULT_CATALOG}' is the built-in one; choose another name")
    kind = options.get("type")
    if kind is None:
        raise CatalogError(f"Catalog '{name}': option 'type' is missing (types: {_listing(TYPES)})")
    if kind not in TYPES:
        raise CatalogError(f"Catalog '{name}': type '{kind}' is not supported (types: {_listing(TYPES)})")
    required, optional = TYPES[kind]
    missing = sorted(required - options.keys())
    if missing:
        raise CatalogError(f"Catalog '{name}' (type '{kind}'): option(s) {_listing(missing)} missing")
    unknown = sorted(options.keys() - required - optional - {"type"})
    if unknown:
        raise CatalogError(f"Catalog '{name}' (type '{kind}'): unsupported option(s) {_listing(unknown)}"
                           f" (supported: {_listing(sorted(required | optional))})")
    if kind == "iceberg":
        from streamsql.catalogs.iceberg import connector_options

        connector_options(name, options)  # its tables' options, checked as the connector checks them
        if "://" not in options.get("warehouse", "://"):  # a local path means the same from anywhere
            options["warehouse"] = os.path.abspath(options["warehouse"].removeprefix("file:"))
    if kind == "hive":
        _check_hive(name, options)
    if kind == "jdbc" and not options["base-url"].startswith("jdbc:postgresql://"):
        raise CatalogError(f"Catalog '{name}': 'base-url' must be 'jdbc:postgresql://host:port' (PostgreSQL), not"
                           f" '{options['base-url']}'")
    if kind == "jdbc" and options["base-url"].rstrip("/").count("/") > 2:
        raise CatalogError(f"Catalog '{name}': 'base-url' names the server only ('jdbc:postgresql://host:port'); the"
                           " database is 'default-database'")


def _check_hive(name: str, options: dict[str, str]) -> None:
    """The conf directories made absolute (they mean the same from anywhere) and their files read."""
    from streamsql.runtime.metastore import site_properties

    for key in ("hive-conf-dir", "hadoop-conf-dir"):
        if key in options:
            options[key] = os.path.abspath(options[key])
            if not os.path.isdir(options[key]):
                raise CatalogError(f"Catalog '{name}': '{key}' '{options[key]}' is no directory")
    try:
        site_properties(options.get("hive-conf-dir"), options.get("hadoop-conf-dir"))
    except CatalogError as error:
        raise CatalogError(f"Catalog '{name}': {error}") from None


def _listing(names) -> str:
    return ", ".join(f"'{n}'" for n in names)


@dataclass
class Catalogs:
    """The definitions under ``directory`` (None: in memory), and the catalogs opened from them."""

    directory: Path | None
    staged: bool = False
    _defs: dict[str, CatalogDef] | None = None
    _opened: dict[str, object] = field(default_factory=dict)
    _broken: dict[str, str] = field(default_factory=dict)
    session: object = None  # () -> the Engine's SparkSession: what a 'hive' catalog reads its metastore through

    def names(self) -> list[str]:
        return [DEFAULT_CATALOG] + sorted(self._definitions())

    def definition(self, name: str) -> CatalogDef | None:
        return self._definitions().get(name)

    def open(self, name: str):
        """The opened catalog ``name``; a CatalogError naming the known ones if there is none."""
        if name in self._opened:
            return self._opened[name]
        definition = self.definition(name)
        if definition is None:
            if name in self._broken:
                raise UnknownCatalogError(f"Catalog '{name}' cannot be used: {self._broken[name]}")
            raise UnknownCatalogError(f"Catalog '{name}' does not exist (catalogs: {', '.join(self.names())})")
        opened = _open(definition, self.session)
        self._opened[name] = opened = opened.staged() if self.staged else opened
        return opened

    def create(self, definition: CatalogDef, if_not_exists: bool = False) -> bool:
        existing = self.definition(definition.name)
        if existing is not None:
            if if_not_exists or existing.options == definition.options:
                return False
            raise CatalogError(f"Catalog '{definition.name}' already exists (DROP CATALOG it first)")
        if self.directory is not None and not self.staged:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._path(definition.name)
            temporary = path.with_name("." + path.name)
            temporary.write_text(definition.ddl() + ";\n", encoding="utf-8")
            os.replace(temporary, path)
        self._definitions()[definition.name] = definition
        return True

    def drop(self, name: str, if_exists: bool = False, current: str = DEFAULT_CATALOG) -> bool:
        if name == current:
            raise CatalogError(f"Cannot drop catalog '{name}': it is the current catalog (USE CATALOG another first)")
        if self.definition(name) is None and name not in self._broken:
            if if_exists:
                return False
            raise CatalogError(f"Catalog '{name}' does not exist (catalogs: {', '.join(self.names())})")
        if self.directory is not None and not self.staged:
            self._path(name).unlink(missing_ok=True)
        self._definitions().pop(name, None)
        self._broken.pop(name, None)
        self._opened.pop(name, None)
        return True

    def copy(self) -> Catalogs:
        """A copy to plan a script against: it sees every change but writes no file, and its
        catalogs change nothing either (each one's ``staged()`` copy)."""
        opened = {name: catalog.staged() for name, catalog in self._opened.items()}
        return Catalogs(self.directory, True, dict(self._definitions()), opened, dict(self._broken), self.session)

    def _path(self, name: str) -> Path:
        return self.directory / (quote(name, safe="") + ".sql")

    def _definitions(self) -> dict[str, CatalogDef]:
        if self._defs is None:
            self._defs = {}
            for path in sorted(self.directory.glob("*.sql")) if self.directory and self.directory.is_dir() else []:
                if path.name.startswith("."):
                    continue
                name = unquote(path.stem)
                try:
                    self._defs[name] = _read(path)
                except (OSError, UnicodeDecodeError, StreamsqlError) as error:
                    self._broken[name] = f"its file {path} does not load ({error}); DROP CATALOG {name} removes it"
        return self._defs


def _read(path: Path) -> CatalogDef:
    from streamsql.dialect.script import parse_statement

    node = parse_statement(path.read_text(encoding="utf-8"))
    if not isinstance(node, exp.Create) or node.kind != "CATALOG":
        raise CatalogError("not a CREATE CATALOG statement")
    return catalog_def(node)


def _open(definition: CatalogDef, session=None):
    if definition.type == "jdbc":
        from streamsql.catalogs.postgres import PostgresCatalog

        return PostgresCatalog(definition)
    if definition.type == "iceberg":
        from streamsql.catalogs.iceberg import IcebergCatalog

        return IcebergCatalog(definition)
    if definition.type == "hive":
        from streamsql.catalogs.hive import HiveCatalog

        return HiveCatalog(definition, session)
    from streamsql.catalog import Catalog

    return Catalog(None, name=definition.name, default_database=definition.options.get("default-database", "default"))
