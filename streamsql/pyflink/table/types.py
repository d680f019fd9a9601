"""``pyflink.table.types``: DataTypes, each one the Flink SQL type it names."""

from __future__ import annotations


class DataType:
    """A Flink type, kept as its SQL text (``sql``) and nullability."""

    def __init__(self, sql: str, nullable: bool = True, fields: list | None = None):
        self.sql = sql
        self._nullable = nullable
        self.fields = fields  # a ROW's [(name, DataType)]

    def not_null(self) -> "DataType":
        return DataType(self.sql, False, self.fields)

    def nullable(self) -> "DataType":
        return DataType(self.sql, True, self.fields)

    def field_types(self) -> list:
        return [t for _, t in self.fields or []]

    def __repr__(self) -> str:
        return self.sql + ("" if self._nullable else " NOT NULL")

    def __eq__(self, other) -> bool:
        return isinstance(other, DataType) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


def _simple(sql: str):
    def make(nullable: bool = True) -> DataType:
        return DataType(sql, nullable)

    make.__name__ = sql.split("(")[0]
    return make


def _sized(name: str, default: int | None = None):
    def make(length: int | None = default, nullable: bool = True) -> DataType:
        return DataType(name if length is None else f"{name}({length})", nullable)

    make.__name__ = name
    return make


class DataTypes:
    """PyFlink's DataTypes factory."""

    NULL = staticmethod(_simple("NULL"))
    BOOLEAN = staticmethod(_simple("BOOLEAN"))
    TINYINT = staticmethod(_simple("TINYINT"))
    SMALLINT = staticmethod(_simple("SMALLINT"))
    INT = staticmethod(_simple("INT"))
    BIGINT = staticmethod(_simple("BIGINT"))
    FLOAT = staticmethod(_simple("FLOAT"))
    DOUBLE = staticmethod(_simple("DOUBLE"))
    DATE = staticmethod(_simple("DATE"))
    STRING = staticmethod(_simple("STRING"))
    BYTES = staticmethod(_simple("BYTES"))
    CHAR = staticmethod(_sized("CHAR", 1))
    VARCHAR = staticmethod(_sized("VARCHAR"))
    BINARY = staticmethod(_sized("BINARY", 1))
    VARBINARY = staticmethod(_sized("VARBINARY"))
    TIME = staticmethod(_sized("TIME", 0))
    TIMESTAMP = staticmethod(_sized("TIMESTAMP", 6))
    TIMESTAMP_LTZ = staticmethod(_sized("TIMESTAMP_LTZ", 6))
    TIMESTAMP_WITH_LOCAL_TIME_ZONE = TIMESTAMP_LTZ

    @staticmethod
    def DECIMAL(precision: int = 10, scale: int = 0, nullable: bool = True) -> DataType:
        return DataType(f"DECIMAL({precision}, {scale})", nullable)

    @staticmethod
    def ARRAY(element: DataType, nullable: bool = True) -> DataType:
        return DataType(f"ARRAY<{element!r}>", nullable)

    @staticmethod
    def MULTISET(element: DataType, nullable: bool = True) -> DataType:
        return DataType(f"MULTISET<{element!r}>", nullable)

    @staticmethod
    def MAP(key: DataType, value: DataType, nullable: bool = True) -> DataType:
        return DataType(f"MAP<{key!r}, {value!r}>", nullable)

    @staticmethod
    def FIELD(name: str, data_type: DataType, description: str | None = None) -> tuple:
        return name, data_type

    @staticmethod
    def ROW(fields: list | None = None, nullable: bool = True) -> DataType:
        fields = list(fields or [])
        return DataType("ROW<" + ", ".join(f"`{n}` {t!r}" for n, t in fields) + ">", nullable, fields)
