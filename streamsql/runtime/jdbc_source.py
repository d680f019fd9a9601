"""Reading a PostgreSQL table: Flink's ``'connector' = 'jdbc'`` as a bounded source.

**What is read.** The table's declared columns, matched by name as the sink matches them
(exactly, else case-insensitively), each cast in PostgreSQL to the type its Flink type
maps to (``PG_TYPES``: ``INT`` reads ``int4``, ``STRING`` reads any column as ``text``,
``DECIMAL(p, s)`` rounds to ``numeric(p, s)``), so a value arrives with the declared type or
the read fails in PostgreSQL's words (a value out of range). Before any task runs, the
driver looks the table and its columns up and asks PostgreSQL to plan the read
(``LIMIT 0``): a missing table or column, a column that cannot be cast (a ``date`` read as
``INT``), an unreachable server are each one ``ConnectorError`` naming the table.

**In parallel, as Flink splits it.** With ``scan.partition.column``/``num``/``lower-bound``/
``upper-bound`` the scan is ``num`` queries ``WHERE column BETWEEN a AND b`` over
consecutive ranges covering [lower-bound, upper-bound] (the ranges of Flink's
``JdbcNumericBetweenParametersProvider``): as in Flink, rows outside the bounds are not
read. Each is one Spark task; without them the table is one task. A task reads through a
server-side cursor, ``scan.fetch-size`` rows a round trip (10,000 when 0 or unset: the
PostgreSQL driver's own default of all rows at once would hold a whole table in memory),
each round trip one Arrow record batch.

**From the executors.** A Spark Python data source (``streamsql_jdbc``) on psycopg 3, as
the sink writes: the driver only resolves the table. Read as a stream (a bounded table in an
unbounded query), it is one micro-batch holding the whole scan, then nothing: its offset
is in the checkpoint, so a restarted job does not read it again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from streamsql.errors import EXECUTOR_MARK, ConnectorError
from streamsql.plan.objects import TableDef
from streamsql.spark.one_batch import OneMicroBatch

DEFAULT_FETCH_SIZE = 10_000
# A Flink type's PostgreSQL type (arrays: the element's, with []); ROW and MAP are refused
# when the table is defined (plan.connectors).
PG_TYPES = {
    "TINYINT": "int2", "SMALLINT": "int2", "INT": "int4", "BIGINT": "int8", "FLOAT": "float4",
    "DOUBLE": "float8", "BOOLEAN": "boolean", "DATE": "date", "TIMESTAMP": "timestamp",
    "TIMESTAMPNTZ": "timestamp", "TIMESTAMPLTZ": "timestamptz", "TIMESTAMPTZ": "timestamptz",
    "VARCHAR": "text", "CHAR": "text", "TEXT": "text", "NCHAR": "text", "NVARCHAR": "text",
    "BINARY": "bytea", "VARBINARY": "bytea", "BLOB": "bytea", "TIME": "time",
}


def pg_type(dtype) -> str:
    """The PostgreSQL type a column of Flink type ``dtype`` (a sqlglot DataType) is read as."""
    name = dtype.this.name
    if name == "ARRAY":
        return pg_type(dtype.expressions[0]) + "[]"
    if name == "DECIMAL":
        sizes = [e.name for e in dtype.expressions]
        return f"numeric({', '.join(sizes)})" if sizes else "numeric(10, 0)"  # Flink's DECIMAL is (10, 0)
    return PG_TYPES.get(name, "text")


@dataclass(frozen=True)
class SourceSpec:
    """A resolved scan (plain data: shipped to the executors as the data source's option)."""

    params: dict
    relation: str  # schema-qualified, quoted
    select: list  # one SQL expression per declared column, in order
    label: str
    ranges: list | None = None  # [(a, b)] of the partition column, or None: one task
    column: str | None = None  # the partition column, quoted
    fetch: int = DEFAULT_FETCH_SIZE

    def query(self, where: str = "") -> str:
        return f"SELECT {', '.join(self.select)} FROM {self.relation}{where}"


def partition_ranges(lower: int, upper: int, num: int) -> list[tuple[int, int]]:
    """[lower, upper] in ``num`` consecutive inclusive ranges, the first ones one longer when
    they do not divide evenly (Flink's JdbcNumericBetweenParametersProvider)."""
    count = upper - lower + 1
    num = max(1, min(num, count))
    size = -(-count // num)
    bigger = count - (size - 1) * num
    ranges, start = [], lower
    for i in range(num):
        end = start + size - 1 - (1 if i >= bigger else 0)
        ranges.append((start, end))
        start = end + 1
    return ranges


def resolve_source(table: TableDef) -> SourceSpec:
    """Look the table up in PostgreSQL (driver side) and check that its declared columns read."""
    import psycopg

    from streamsql.runtime.jdbc_target import (connection_parameters, find_relation, match_column, opened, quote,
                                               table_label)

    label = table_label(table)
    params = connection_parameters(table)
    options = table.options
    with opened(table, params, label) as connection:
        _, schema, name, actual = find_relation(connection, table, label, "the jdbc source reads an existing table")
        relation = f"{schema}.{name}"
        names = {c.name: match_column(label, c.name, actual) for c in table.physical_columns}
        select = [f"{quote(names[c.name])}::{pg_type(c.type)}" for c in table.physical_columns]
        for column, expression in zip(table.physical_columns, select):
            try:
                connection.execute(f"SELECT {expression} FROM {relation} LIMIT 0")
            except psycopg.Error as error:
                connection.rollback()
                raise ConnectorError(f"{label}: column '{column.name}' ({actual[names[column.name]]} in PostgreSQL)"
                                     f" cannot be read as {_flink(column.type)}: {_first_line(error)}") from None
    ranges = column = None
    if "scan.partition.column" in options:
        declared = next(c.name for c in table.physical_columns if c.name.lower() == options["scan.partition.column"].lower())
        column = quote(names[declared])
        ranges = partition_ranges(int(options["scan.partition.lower-bound"]), int(options["scan.partition.upper-bound"]),
                                  int(options["scan.partition.num"]))
    fetch = int(options.get("scan.fetch-size", "0")) or DEFAULT_FETCH_SIZE
    return SourceSpec(params=params, relation=relation, select=select, label=label, ranges=ranges, column=column,
                      fetch=fetch)


def jdbc_frame(spark, table: TableDef, streaming: bool):
    """The table's physical columns as a DataFrame (a stream: one micro-batch)."""
    from streamsql.spark.dialect import spark_type

    spec = resolve_source(table)
    register(spark)
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns)
    reader = (spark.readStream if streaming else spark.read).format(JdbcSource.name()).schema(schema)
    return reader.option("spec", json.dumps(asdict(spec))).load()


def register(spark) -> None:
    spark.dataSource.register(JdbcSource)  # every time: a flag on the Python session object can outlive the JVM's


@dataclass
class Scan(InputPartition):
    where: str


class JdbcSource(DataSource):
    @classmethod
    def name(cls):
        return "streamsql_jdbc"

    def _spec(self) -> SourceSpec:
        return SourceSpec(**json.loads(self.options["spec"]))

    def reader(self, schema):
        return _Reader(self._spec(), schema)

    def streamReader(self, schema):
        return _OnceStream(self._spec(), schema)


def _scans(spec: SourceSpec) -> list[Scan]:
    if spec.ranges is None:
        return [Scan("")]
    return [Scan(f" WHERE {spec.column} BETWEEN {a} AND {b}") for a, b in spec.ranges]


class _Reader(DataSourceReader):
    def __init__(self, spec: SourceSpec, schema):
        self.spec, self.schema = spec, schema

    def partitions(self):
        return _scans(self.spec)

    def read(self, partition: Scan):
        yield from read_batches(self.spec, partition.where, self.schema)


class _OnceStream(OneMicroBatch):
    def __init__(self, spec: SourceSpec, schema):
        self.spec, self.schema = spec, schema

    def parts(self):
        return _scans(self.spec)

    def read(self, partition: Scan):
        yield from read_batches(self.spec, partition.where, self.schema)


def read_batches(spec: SourceSpec, where: str, schema):
    """The scan's rows as Arrow record batches of ``schema``, ``spec.fetch`` rows each."""
    import psycopg
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(schema, timezone="UTC")
    from streamsql.runtime.jdbc_target import connect

    try:
        with connect(spec.params) as connection, connection.cursor(name="streamsql_scan") as cursor:
            connection.read_only = True
            cursor.itersize = spec.fetch
            cursor.execute(spec.query(where))
            while True:
                rows = cursor.fetchmany(spec.fetch)
                if not rows:
                    break
                columns = list(zip(*rows))
                yield pa.RecordBatch.from_arrays(
                    [pa.array(values, type=field.type) for values, field in zip(columns, arrow)], schema=arrow)
    except psycopg.Error as error:
        raise ConnectorError(f"{EXECUTOR_MARK}{spec.label}: reading failed: {_first_line(error)}") from None


def _flink(dtype) -> str:
    from streamsql.plan.types import type_name

    return type_name(dtype)


def _first_line(error) -> str:
    return (str(error).strip().splitlines() or ["unknown error"])[0]
