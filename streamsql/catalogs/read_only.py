"""What a catalog of another system's tables refuses: the DDL that system's own statements make."""

from __future__ import annotations

from streamsql.errors import CatalogError


class ReadOnlyDDL:
    """Every CREATE / DROP refused, naming the catalog, its type and ``REFUSAL`` (why: whose
    DDL makes its tables). Its tables are still read and written by their connector."""

    name: str
    TYPE = ""
    REFUSAL = ""

    def staged(self):
        return self  # it changes nothing

    def create(self, obj, if_not_exists: bool = False, replace: bool = False) -> bool:
        raise self._read_only(f"CREATE {type(obj).__name__.removesuffix('Def').upper()}")

    def drop(self, name, kind, if_exists: bool = False, temporary: bool = False) -> bool:
        raise self._read_only("DROP")

    def create_database(self, name: str, if_not_exists: bool = False) -> None:
        raise self._read_only("CREATE DATABASE")

    def drop_database(self, name: str, if_exists: bool = False, cascade: bool = False) -> None:
        raise self._read_only("DROP DATABASE")

    def _read_only(self, what: str) -> CatalogError:
        return CatalogError(f"Catalog '{self.name}' (type '{self.TYPE}') does not support {what}{self.REFUSAL}")
