"""Iceberg's Hadoop catalog (``'catalog-type' = 'hadoop'``) for pyiceberg, which has none.

**The layout is Java's** (``HadoopCatalog``/``HadoopTableOperations``), so a table is the
same table to Flink's and Spark's Java Iceberg: the warehouse's directories are namespaces,
a table is ``<warehouse>/<namespace>/<table>`` (its data under ``data/``), its versions are
``metadata/v<N>.metadata.json`` (``v<N>.gz.metadata.json`` read too) and
``metadata/version-hint.text`` holds the current ``N`` (without it, the highest version).
A directory is a table when its ``metadata/`` holds a version.

**A commit** writes the next version to a hidden file and links it to
``v<N+1>.metadata.json``, which fails if that name exists: of two writers that read
version ``N``, one commits and the other gets a CommitFailedException (pyiceberg's conflict,
which the Iceberg sink handles as for any catalog) — Java's rename-if-absent. Then the
version hint is replaced atomically. The current version is the highest one (the hint's, or
past it when a writer stopped between the two), as Java reads it. The version committed is
always the one after the version the update was checked against, so a writer never lands
on top of a version it did not see.

On a local file system only (``file:`` or a path), as the ``iceberg`` connector's warehouse
is. As in Java: namespaces carry no properties, tables take no custom location and cannot be
renamed, and dropping a table deletes its directory.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import CommitTableResponse, Table, TableProperties
from pyiceberg.table.metadata import new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.typedef import EMPTY_DICT

VERSION_HINT = "version-hint.text"
_VERSION = re.compile(r"v(\d+)(\.gz)?\.metadata\.json")


class HadoopCatalog(MetastoreCatalog):
    def __init__(self, name: str, warehouse: str, **properties: str):
        super().__init__(name, warehouse=warehouse, **properties)
        self.root = Path(warehouse.removeprefix("file://").removeprefix("file:"))

    # -- tables ------------------------------------------------------------------------

    def load_table(self, identifier) -> Table:
        names = self.identifier_to_tuple(identifier)
        directory = self._path(names)
        version = current_version(directory)
        if version is None:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(names)}")
        location = str(metadata_file(directory, version))
        io = self._load_file_io(location=location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        return Table(identifier=names, metadata=metadata, metadata_location=location,
                     io=self._load_file_io(metadata.properties, location), catalog=self)

    def create_table(self, identifier, schema, location=None, partition_spec=UNPARTITIONED_PARTITION_SPEC,
                     sort_order=UNSORTED_SORT_ORDER, properties=EMPTY_DICT) -> Table:
        names = self.identifier_to_tuple(identifier)
        directory = self._path(names)
        if location is not None and location.rstrip("/") not in (str(directory), directory.as_uri()):
            raise ValueError(f"A Hadoop catalog's table is at {directory}; it takes no other location")
        if current_version(directory) is not None:
            raise TableAlreadyExistsError(f"Table already exists: {'.'.join(names)}")
        schema = self._convert_schema_if_needed(
            schema, int(properties.get(TableProperties.FORMAT_VERSION, TableProperties.DEFAULT_FORMAT_VERSION)))
        metadata = new_table_metadata(location=directory.as_uri(), schema=schema, partition_spec=partition_spec,
                                      sort_order=sort_order, properties=properties)
        commit_version(directory, 1, metadata.model_dump_json())
        return self.load_table(names)

    def commit_table(self, table: Table, requirements, updates) -> CommitTableResponse:
        names = self.identifier_to_tuple(table.name())
        try:
            current = self.load_table(names)
        except NoSuchTableError:
            current = None
        staged = self._update_and_stage_table(current, names, requirements, updates)
        if current is not None and staged.metadata == current.metadata:
            return CommitTableResponse(metadata=current.metadata, metadata_location=current.metadata_location)
        # the version after the one the update was checked against: had another writer taken
        # it meanwhile, linking it fails (never a version on top of one this update did not see)
        version = version_of(current.metadata_location) + 1 if current is not None else 1
        location = commit_version(self._path(names), version, staged.metadata.model_dump_json())
        return CommitTableResponse(metadata=staged.metadata, metadata_location=str(location))

    def drop_table(self, identifier) -> None:
        names = self.identifier_to_tuple(identifier)
        if current_version(self._path(names)) is None:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(names)}")
        shutil.rmtree(self._path(names))

    def purge_table(self, identifier) -> None:
        self.drop_table(identifier)

    def rename_table(self, from_identifier, to_identifier) -> Table:
        raise NotImplementedError("A Hadoop catalog cannot rename tables (as Java's)")

    def register_table(self, identifier, metadata_location: str) -> Table:
        raise NotImplementedError("A Hadoop catalog cannot register tables (as Java's)")

    def list_tables(self, namespace) -> list[tuple]:
        names = self.identifier_to_tuple(namespace)
        return [(*names, child.name) for child in self._children(names) if current_version(child) is not None]

    # -- namespaces ----------------------------------------------------------------------

    def create_namespace(self, namespace, properties=EMPTY_DICT) -> None:
        names = self.identifier_to_tuple(namespace)
        if properties:
            raise ValueError("A Hadoop catalog's namespaces carry no properties (as Java's)")
        try:
            self._path(names).mkdir(parents=True)
        except FileExistsError:
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {'.'.join(names)}") from None

    def drop_namespace(self, namespace) -> None:
        names = self.identifier_to_tuple(namespace)
        if not self.namespace_exists(names):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(names)}")
        if any(self._path(names).iterdir()):
            raise NamespaceNotEmptyError(f"Namespace is not empty: {'.'.join(names)}")
        self._path(names).rmdir()

    def list_namespaces(self, namespace=()) -> list[tuple]:
        names = self.identifier_to_tuple(namespace) if namespace else ()
        return [(*names, child.name) for child in self._children(names) if current_version(child) is None]

    def namespace_exists(self, namespace) -> bool:
        path = self._path(self.identifier_to_tuple(namespace))
        return path.is_dir() and current_version(path) is None

    def load_namespace_properties(self, namespace) -> dict:
        names = self.identifier_to_tuple(namespace)
        if not self.namespace_exists(names):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(names)}")
        return {"location": self._path(names).as_uri()}

    def update_namespace_properties(self, namespace, removals=None, updates=EMPTY_DICT):
        raise NotImplementedError("A Hadoop catalog's namespaces carry no properties (as Java's)")

    # -- views (none, as in Java's) ----------------------------------------------------

    def list_views(self, namespace) -> list:
        return []

    def view_exists(self, identifier) -> bool:
        return False

    def load_view(self, identifier):
        raise NoSuchViewError(f"A Hadoop catalog has no views: {identifier}")

    def drop_view(self, identifier) -> None:
        raise NoSuchViewError(f"A Hadoop catalog has no views: {identifier}")

    def register_view(self, identifier, metadata_location: str):
        raise NotImplementedError("A Hadoop catalog has no views (as Java's)")

    # -- the file system -----------------------------------------------------------------

    def _path(self, names: tuple) -> Path:
        return self.root.joinpath(*names)

    def _children(self, names: tuple) -> list[Path]:
        directory = self._path(names)
        if not directory.is_dir():
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(names)}")
        return sorted(c for c in directory.iterdir() if c.is_dir() and not c.name.startswith((".", "_")))


def current_version(directory: Path) -> int | None:
    """The table's current version, the highest one; None for no table."""
    metadata = directory / "metadata"
    if not metadata.is_dir():
        return None
    versions = [int(m[1]) for m in map(_VERSION.fullmatch, os.listdir(metadata)) if m]
    if not versions:
        return None
    return max(versions)  # the hint's, or past it if a writer stopped before moving the hint (as Java reads)


def version_of(location: str) -> int:
    """The version of a ``.../metadata/v<N>.metadata.json``."""
    return int(_VERSION.fullmatch(Path(location).name)[1])


def metadata_file(directory: Path, version: int) -> Path:
    plain = directory / "metadata" / f"v{version}.metadata.json"
    packed = directory / "metadata" / f"v{version}.gz.metadata.json"
    return packed if packed.exists() and not plain.exists() else plain


def commit_version(directory: Path, version: int, text: str) -> Path:
    """Write ``text`` as version ``version``: linked into place only if no writer took that
    version first (a CommitFailedException then), then the hint moved to it."""
    metadata = directory / "metadata"
    metadata.mkdir(parents=True, exist_ok=True)
    final = metadata / f"v{version}.metadata.json"
    staged = metadata / f".v{version}-{uuid.uuid4().hex}.metadata.json.tmp"
    with open(staged, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())  # whole on disk before its name is: a crash leaves no torn version
    try:
        if (metadata / f"v{version}.gz.metadata.json").exists():
            raise FileExistsError(final)
        os.link(staged, final)
    except FileExistsError:
        if version == 1:  # two writers creating the table: the other one's is the table
            raise TableAlreadyExistsError(f"Table already exists at {directory}") from None
        raise CommitFailedException(f"Version {version} of the table at {directory} was committed by another"
                                    " writer first") from None
    finally:
        staged.unlink()
    hint = metadata / f".{VERSION_HINT}-{uuid.uuid4().hex}.tmp"
    hint.write_text(str(version), encoding="utf-8")
    os.replace(hint, metadata / VERSION_HINT)
    return final

