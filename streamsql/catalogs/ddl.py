"""The Flink DDL a catalog writes for a table it holds (each catalog maps its own types into
the column lines; the planner then reads the table as any declared one)."""

from __future__ import annotations


def quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def table_ddl(catalog: str, database: str, name: str, lines: list[str], options: dict[str, str],
              partitions: list[str] | tuple[str, ...] = ()) -> str:
    """``CREATE TABLE catalog.database.name (lines) [PARTITIONED BY (...)] WITH (options)``."""
    partitioned = f" PARTITIONED BY ({', '.join(map(quoted, partitions))})" if partitions else ""
    with_ = ", ".join(f"'{k}' = '{v.replace(chr(39), chr(39) * 2)}'" for k, v in options.items())
    return (f"CREATE TABLE {quoted(catalog)}.{quoted(database)}.{quoted(name)} (\n" + ",\n".join(lines)
            + f"\n){partitioned} WITH ({with_})")
