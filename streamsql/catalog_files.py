"""The catalog's files: one DDL file per persistent object, read leniently, written safely.

Reading never raises: a file that cannot be read, decoded, parsed or defined becomes a
``BrokenEntry`` that keeps its name (taken from the file name), its path and why it does
not load, so the catalog can report it, refuse to overwrite it, and still drop it.

Writing a new object is exclusive: the DDL is written to a temporary file and published
with ``os.link``, which fails when the name is taken, so of two sessions creating the
same object only one wins. Replacing (CREATE OR REPLACE, ALTER) renames over the old
file atomically. Either way a crash leaves the old file or the new one, never half.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from sqlglot import exp

from streamsql.errors import CatalogError, StreamsqlError
from streamsql.plan.objects import CatalogObject, FunctionDef, ObjectName, identifier_position, to_flink_sql

FUNCTION_SUFFIX = ".function.sql"
# os.link is not available on every filesystem; then O_EXCL creates the file in place.
_NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV}


class UnknownCatalogError(CatalogError):
    """A name whose catalog does not exist (or cannot be used)."""


class BrokenEntryError(CatalogError):
    """A catalog object whose file exists but does not load."""


@contextmanager
def reported_at(reference: exp.Table):
    """Report an entry that does not load at this reference to it (the statement's, not the file's)."""
    try:
        yield
    except BrokenEntryError as error:
        error.position = identifier_position(reference.this)
        raise
    except UnknownCatalogError as error:  # at the catalog's name, if the reference has one
        error.position = error.position or identifier_position(reference.args.get("catalog") or reference.this)
        raise


@dataclass(frozen=True)
class BrokenEntry:
    """A catalog file that does not load: known by its file name, never overwritten."""

    kind: str  # 'relation' or 'function'
    name: ObjectName
    path: Path
    reason: str

    @property
    def drop_statement(self) -> str:
        what = "FUNCTION" if self.kind == "function" else "TABLE"
        return f"DROP {what} {_sql_name(self.name)}"

    def warning(self) -> str:
        return f"Warning: catalog file {self.path} does not load ({self.reason}); skipped. {self.drop_statement} removes it."

    def unusable(self) -> BrokenEntryError:
        return BrokenEntryError(
            f"{self._label()} '{self.name.name}' cannot be used: its catalog file {self.path} does not load"
            f" ({self.reason}). {self.drop_statement} removes it; CREATE OR REPLACE defines it again."
        )

    def blocks_create(self) -> BrokenEntryError:
        return BrokenEntryError(
            f"{self._label()} '{_sql_name(self.name)}' exists but does not load: catalog file {self.path}"
            f" ({self.reason}); DROP it or CREATE OR REPLACE it"
        )

    def _label(self) -> str:
        return "Function" if self.kind == "function" else "Table or view"


class CatalogFiles:
    """The files under a catalog directory: ``<database>/<name>.sql`` and ``<name>.function.sql``."""

    def __init__(self, directory: Path):
        self.directory = directory

    def path(self, kind: str, name: ObjectName) -> Path:
        suffix = FUNCTION_SUFFIX if kind == "function" else ".sql"
        return self.directory / quote(name.database, safe="") / (quote(name.name, safe="") + suffix)

    def database_folders(self) -> list[Path]:
        """Every database folder (names starting with '.' or '_' are not databases)."""
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))

    def scan(self, warn) -> Iterator[tuple[str, ObjectName, Path]]:
        """(kind, name, path) of every catalog file; a folder that cannot be listed is warned about."""
        try:
            folders = self.database_folders()
        except OSError as error:
            warn(f"Warning: catalog directory {self.directory} cannot be read ({_os_reason(error)}); no stored object is available.")
            return
        for folder in folders:
            try:
                paths = sorted(folder.glob("*.sql"))
            except OSError as error:
                warn(f"Warning: catalog folder {folder} cannot be read ({_os_reason(error)}); its objects are skipped.")
                continue
            database = unquote(folder.name)
            for path in paths:
                if path.name.startswith("."):
                    continue  # a temporary file of a write in progress (or interrupted)
                kind = "function" if path.name.endswith(FUNCTION_SUFFIX) else "relation"
                stem = path.name.removesuffix(FUNCTION_SUFFIX if kind == "function" else ".sql")
                yield kind, ObjectName(database, unquote(stem)), path

    def read(self, kind: str, name: ObjectName, path: Path) -> CatalogObject | BrokenEntry:
        """The object a file defines, or why it does not load."""
        from streamsql.dialect.script import parse_statement
        from streamsql.plan.define import define

        try:
            data = path.read_bytes()
            text = data.decode("utf-8")
            obj = define(parse_statement(text), name.database, base_dir=self.directory)
        except OSError as error:
            return BrokenEntry(kind, name, path, _os_reason(error))
        except UnicodeDecodeError as error:
            return BrokenEntry(kind, name, path, f"not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start}")
        except StreamsqlError as error:
            where = f"line {error.position.line}, column {error.position.col}: " if error.position else ""
            return BrokenEntry(kind, name, path, where + error.message)
        except Exception as error:  # anything else the parser may throw at garbage
            detail = (str(error).splitlines() or [""])[0][:120]
            return BrokenEntry(kind, name, path, f"not a readable statement ({type(error).__name__}{': ' if detail else ''}{detail})")
        obj.temporary = False
        found = "function" if isinstance(obj, FunctionDef) else "relation"
        if found != kind or obj.name != name:
            expected = "a function" if kind == "function" else "a table or view"
            return BrokenEntry(kind, name, path, f"it defines {_sql_name(obj.name)}, but its file name says {expected} {_sql_name(name)}")
        return obj

    # -- writing -----------------------------------------------------------------------

    def create(self, kind: str, obj: CatalogObject) -> CatalogObject | BrokenEntry | None:
        """Publish a new file only if there is none; None when published, else what is there."""
        path = self.path(kind, obj.name)
        tmp = self._write_temporary(path, obj)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return self.read(kind, obj.name, path)
        except OSError as error:
            if error.errno not in _NO_HARD_LINKS:
                raise _store_error(obj, path, error) from None
            return self._create_in_place(kind, path, obj)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return None

    def replace(self, kind: str, obj: CatalogObject) -> None:
        """Write a file over whatever is there, atomically."""
        path = self.path(kind, obj.name)
        tmp = self._write_temporary(path, obj)
        try:
            os.replace(tmp, path)
        except OSError as error:
            Path(tmp).unlink(missing_ok=True)
            raise _store_error(obj, path, error) from None

    def delete(self, path: Path, name: ObjectName) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            raise CatalogError(f"Cannot remove '{_sql_name(name)}': deleting {path} failed ({_os_reason(error)})") from None

    def _write_temporary(self, path: Path, obj: CatalogObject) -> str:
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(_file_text(obj))
                handle.flush()
                os.fsync(handle.fileno())
            return tmp
        except OSError as error:
            if tmp is not None:
                Path(tmp).unlink(missing_ok=True)
            raise _store_error(obj, path, error) from None

    def _create_in_place(self, kind: str, path: Path, obj: CatalogObject) -> CatalogObject | BrokenEntry | None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return self.read(kind, obj.name, path)
        except OSError as error:
            raise _store_error(obj, path, error) from None
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(_file_text(obj))
        return None


def _file_text(obj: CatalogObject) -> str:
    return to_flink_sql(obj.ddl) + ";\n"


def _store_error(obj: CatalogObject, path: Path, error: OSError) -> CatalogError:
    label = type(obj).__name__.removesuffix("Def").lower()
    return CatalogError(f"Cannot store {label} '{obj.name}' in {path.parent}: {_os_reason(error)}")


def _os_reason(error: OSError) -> str:
    return error.strerror or str(error)


def _sql_name(name: ObjectName) -> str:
    return ".".join(part if part.isidentifier() else f"`{part.replace('`', '``')}`" for part in (name.database, name.name))
