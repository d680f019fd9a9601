"""Reading a Delta table: Flink's ``'connector' = 'delta'`` as a bounded source.

**Which files, which partition values.** The driver opens the snapshot with delta-rs
(runtime.delta.table: the version or timestamp asked for, the protocol and the declared
columns checked before any task runs) and takes its add actions: each data file's path
(URI-encoded in the log, decoded here into the file's own name) and its partition values,
typed by delta-rs from the log. Partition values come from those actions, never from the
directory names (a Delta table may name its directories anyhow, or not have any).

**Read by Spark, natively and in parallel.** The files are read with Spark's own Parquet
reader under the Delta schema's types for the declared columns (so Spark splits and
vectorises as for any Parquet table), then cast where the declared type widens the Delta
one. A partitioned table's rows get their partition values by a broadcast join of each
row's ``_metadata.file_path`` (decoded) with the files' actions: one small table, no
shuffle of the rows.

**As a stream** (a bounded table in an unbounded query, or 'execution.bounded-input' =
'stream'): one micro-batch holding the snapshot, then nothing, as the jdbc source does; its
offset is in the checkpoint, so a restarted job does not read it again. Spark has no
native stream over a list of files, so that micro-batch reads the files with pyarrow in a
Spark Python data source (``streamsql_delta``), a task per file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import unquote

from pyspark.sql.datasource import DataSource, InputPartition

from streamsql.plan.objects import TableDef
from streamsql.spark.one_batch import OneMicroBatch
from streamsql.runtime.delta.table import check_protocol, columns, open_snapshot, spark_schema

FILE_COLUMN = "__streamsql_delta_file"
_SCHEME = r"^[A-Za-z][A-Za-z0-9+.-]*:(//[^/]*)?"  # a URI's scheme and authority


def delta_frame(spark, table: TableDef, streaming: bool):
    """The table's physical columns as a DataFrame (a stream: one micro-batch)."""
    delta = open_snapshot(table)
    check_protocol(table, delta)
    matched = columns(table, delta, reading=True)
    fields = {f.name: f for f in spark_schema(delta).fields}
    files = snapshot_files(delta, [c.delta for c in matched if c.partition])
    if streaming:
        return _stream(spark, table, matched, fields, files)
    return _batch(spark, matched, fields, files)


def snapshot_files(delta, partitions: list[str]) -> list[tuple[str, list]]:
    """(the data file's absolute path or URI, its values of ``partitions``) per add action."""
    import pyarrow as pa

    actions = pa.table(delta.get_add_actions(flatten=True))
    root = delta.table_uri.rstrip("/")
    if root.startswith("file://"):
        root = unquote(root[len("file://"):])
    paths = [unquote(p) if "://" in p else f"{root}/{unquote(p)}" for p in actions.column("path").to_pylist()]
    values = [actions.column(f"partition.{p}").to_pylist() for p in partitions]
    return [(path, [v[i] for v in values]) for i, path in enumerate(paths)]


def _batch(spark, matched, fields, files):
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    data = StructType([fields[c.delta] for c in matched if not c.partition])
    partitions = [fields[c.delta] for c in matched if c.partition]
    if not files:
        frame = spark.createDataFrame([], StructType([*data.fields, *partitions]))
    else:
        frame = spark.read.schema(data).parquet(*[path for path, _ in files])
        if partitions:
            key = F.regexp_replace(F.regexp_replace(F.col("_metadata.file_path"), r"\+", "%2B"), _SCHEME, "")
            frame = frame.withColumn(FILE_COLUMN, F.url_decode(key))
            mapping = spark.createDataFrame([(_key(path), *values) for path, values in files],
                                            StructType([StructField(FILE_COLUMN, StringType()), *partitions]))
            frame = frame.join(F.broadcast(mapping), FILE_COLUMN).drop(FILE_COLUMN)
    return frame.selectExpr(*[_projection(c) for c in matched])


def _projection(column) -> str:
    source = f"`{column.delta}`"
    if column.declared_type != column.delta_type:
        source = f"CAST({source} AS {column.declared_type})"
    return f"{source} AS `{column.declared}`"


def _key(path: str) -> str:
    """A file's path without its scheme and host, as the decoded ``_metadata.file_path``."""
    return re.sub(_SCHEME, "", path)


# -- streaming: one micro-batch, read with pyarrow ------------------------------------------


def _stream(spark, table: TableDef, matched, fields, files):
    from streamsql.spark.dialect import spark_type

    register(spark)
    spec = {
        "files": files,
        "columns": [[c.delta, c.partition] for c in matched],
        "types": {c.delta: fields[c.delta].dataType.jsonValue() for c in matched},
    }
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns)
    return spark.readStream.format(DeltaSource.name()).schema(schema).option("spec", json.dumps(spec, default=str)).load()


def register(spark) -> None:
    spark.dataSource.register(DeltaSource)  # every time: a flag on the Python session object can outlive the JVM's


@dataclass
class File(InputPartition):
    path: str
    values: list


class DeltaSource(DataSource):
    @classmethod
    def name(cls):
        return "streamsql_delta"

    def streamReader(self, schema):
        return _OnceStream(json.loads(self.options["spec"]), schema)


class _OnceStream(OneMicroBatch):
    """The snapshot as one micro-batch, a task per file."""

    def __init__(self, spec: dict, schema):
        self.spec, self.schema = spec, schema

    def parts(self):
        return [File(path, values) for path, values in self.spec["files"]]

    def read(self, partition: File):
        yield from read_file(self.spec, partition, self.schema)


def read_file(spec: dict, file: File, schema):
    """A data file's rows as Arrow batches of the declared ``schema``: its columns read by
    their Delta names, the partition values as constant columns, cast to the declared types."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema, to_arrow_type
    from pyspark.sql.types import _parse_datatype_json_value

    arrow = to_arrow_schema(schema, timezone="UTC")
    names = [name for name, partition in spec["columns"] if not partition]
    values = iter(file.values)
    data = pq.read_table(file.path.removeprefix("file://"), columns=names) if names else None
    rows = data.num_rows if data is not None else pq.read_metadata(file.path.removeprefix("file://")).num_rows
    arrays = []
    for (name, partition), field in zip(spec["columns"], arrow):
        if partition:
            delta_type = to_arrow_type(_parse_datatype_json_value(spec["types"][name]), timezone="UTC")
            array = pa.array([_value(next(values), delta_type)] * rows, type=delta_type)
        else:
            array = data.column(name).combine_chunks()
        arrays.append(array.cast(field.type))
    table = pa.Table.from_arrays(arrays, schema=arrow)
    yield from table.to_batches(max_chunksize=65_536)


def _value(value, arrow_type):
    """A partition value shipped as JSON (dates, times and decimals as text) in its Arrow type."""
    import pyarrow as pa

    if value is None or not isinstance(value, str) or pa.types.is_string(arrow_type):
        return value
    return pa.scalar(value).cast(arrow_type).as_py()
