"""Reading an Iceberg table: Flink's ``'connector' = 'iceberg'`` as a bounded source.

**Which snapshot.** The table's current snapshot, or the one Flink's read options name:
``snapshot-id``, or ``as-of-timestamp`` (epoch milliseconds: the last snapshot committed at
or before it). A table with no snapshot yet reads no rows. The schema read is the
table's current one, under time travel the snapshot's own (the columns as they were), as
Iceberg's engines read them; the declared columns are
checked against it (runtime.iceberg.schema) on the driver before any task runs.

**Which files.** pyiceberg plans the scan (``plan_files``: the snapshot's manifests, on
the driver); Spark reads the data files it lists with its own Parquet reader, natively and
split across tasks like any Parquet table, under the Iceberg types of the declared columns
(a ``timestamp`` column as TIMESTAMP_NTZ, the UTC wall-clock time), then cast to the
declared types. The Parquet files hold every column, partition columns too (Iceberg
writes them, unlike Hive's layout), so nothing comes from directory names. Refused, naming
the file: a snapshot whose scan has delete files (positional or equality deletes, deletion
vectors: rows of a file deleted elsewhere, which Spark's reader alone would bring back),
and data files that are not Parquet (ORC, Avro).

**As a stream** (a bounded table in an unbounded query, or 'execution.bounded-input' =
'stream'): one micro-batch holding the snapshot, as the jdbc and delta sources do, read
with pyarrow in a Spark Python data source (``streamsql_iceberg``), a task per file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, InputPartition

from streamsql.errors import ConnectorError
from streamsql.plan.objects import TableDef
from streamsql.runtime.iceberg import catalog
from streamsql.runtime.iceberg.schema import columns
from streamsql.spark.one_batch import OneMicroBatch


def chosen_snapshot(table: TableDef, iceberg):
    """The snapshot the source reads (None: the table has none yet)."""
    name, options = table.name.name, table.options
    if "snapshot-id" in options:
        snapshot = iceberg.snapshot_by_id(int(options["snapshot-id"]))
        if snapshot is None:
            known = ", ".join(str(s.snapshot_id) for s in iceberg.snapshots()[-5:]) or "none"
            raise ConnectorError(f"Table '{name}': the {catalog.described(table)} has no snapshot"
                                 f" {options['snapshot-id']} (its latest: {known})")
        return snapshot
    if "as-of-timestamp" in options:
        moment = int(options["as-of-timestamp"])
        snapshot = iceberg.snapshot_as_of_timestamp(moment)
        if snapshot is None:
            raise ConnectorError(f"Table '{name}': the {catalog.described(table)} has no snapshot committed at or"
                                 f" before 'as-of-timestamp' = '{moment}' (epoch milliseconds)")
        return snapshot
    return iceberg.current_snapshot()


def snapshot_schema(table: TableDef, iceberg, snapshot):
    """The schema read: the table's current one, or under time travel the snapshot's own."""
    schemas = iceberg.schemas()
    travels = "snapshot-id" in table.options or "as-of-timestamp" in table.options
    if travels and snapshot is not None and snapshot.schema_id in schemas:
        return schemas[snapshot.schema_id]
    return iceberg.schema()


def data_files(table: TableDef, iceberg, snapshot, names: list[str]) -> list[str]:
    """The paths of the snapshot's data files; a ConnectorError for what Spark cannot read alone."""
    from pyiceberg.manifest import FileFormat

    if snapshot is None:
        return []
    paths = []
    for task in iceberg.scan(snapshot_id=snapshot.snapshot_id, selected_fields=tuple(names) or ("*",)).plan_files():
        if task.delete_files:
            raise ConnectorError(
                f"Table '{table.name.name}': snapshot {snapshot.snapshot_id} of the {catalog.described(table)} has delete"
                f" files (rows of '{task.file.file_path}' deleted in"
                f" '{next(iter(task.delete_files)).file_path}'); streamsql reads data files without deletes only"
                " (compact the table, e.g. rewrite_data_files, or read an earlier snapshot)")
        if task.file.file_format != FileFormat.PARQUET:
            raise ConnectorError(f"Table '{table.name.name}': data file '{task.file.file_path}' of the"
                                 f" {catalog.described(table)} is {task.file.file_format.value}; only Parquet is read")
        paths.append(task.file.file_path)
    return paths


def opened(table: TableDef):
    """(the pyiceberg table, its snapshot read, the matched columns, the data files)."""
    iceberg = catalog.load(table)
    snapshot = chosen_snapshot(table, iceberg)
    schema = snapshot_schema(table, iceberg, snapshot)
    matched = columns(table, schema, reading=True, history=list(iceberg.schemas().values()))
    return iceberg, snapshot, matched, data_files(table, iceberg, snapshot, [c.iceberg for c in matched])


def snapshot_identity(table: TableDef) -> list:
    """What a bounded run reads of the table (runtime.inserts.consumed_inputs): the catalog,
    the table and the snapshot read, so a rerun after a new commit reads it again."""
    iceberg = catalog.load(table)
    snapshot = chosen_snapshot(table, iceberg)
    return [catalog.location(table), *catalog.identifier(table),
            None if snapshot is None else snapshot.snapshot_id]


def iceberg_frame(spark, table: TableDef, streaming: bool):
    """The table's physical columns as a DataFrame (a stream: one micro-batch)."""
    from streamsql.spark.dialect import spark_type

    _, _, matched, files = opened(table)
    declared = {c.name: spark_type(c.type) for c in table.physical_columns}
    if streaming:
        return _stream(spark, table, matched, files)
    read = ", ".join(f"`{c.iceberg}` {c.spark_read}" for c in matched)
    if not files:
        frame = spark.createDataFrame([], read)
    else:
        frame = spark.read.schema(read).parquet(*files)
    return frame.selectExpr(*[f"CAST(`{c.iceberg}` AS {declared[c.declared]}) AS `{c.declared}`" for c in matched])


# -- streaming: one micro-batch, read with pyarrow ------------------------------------------


def _stream(spark, table: TableDef, matched, files):
    from streamsql.spark.dialect import spark_type

    spark.dataSource.register(IcebergSource)  # every time: a flag on the Python session object can outlive the JVM's
    spec = {"files": files, "columns": [c.iceberg for c in matched]}
    schema = ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.physical_columns)
    return spark.readStream.format(IcebergSource.name()).schema(schema).option("spec", json.dumps(spec)).load()


@dataclass
class File(InputPartition):
    path: str


class IcebergSource(DataSource):
    @classmethod
    def name(cls):
        return "streamsql_iceberg"

    def streamReader(self, schema):
        return _OnceStream(json.loads(self.options["spec"]), schema)


class _OnceStream(OneMicroBatch):
    """The snapshot as one micro-batch, a task per data file."""

    def __init__(self, spec: dict, schema):
        self.spec, self.schema = spec, schema

    def parts(self):
        return [File(path) for path in self.spec["files"]]

    def read(self, partition: File):
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow = to_arrow_schema(self.schema, timezone="UTC")
        data = pq.read_table(partition.path.removeprefix("file://"))
        arrays = []
        for name, field in zip(self.spec["columns"], arrow):
            if name in data.column_names:
                array = data.column(name).combine_chunks()
                if pa.types.is_timestamp(array.type) and array.type.tz is None and field.type.tz is not None:
                    array = array.cast(pa.timestamp(array.type.unit, tz="UTC"))  # a UTC wall-clock time
                arrays.append(array.cast(field.type))
            else:  # a column added after this file was written
                arrays.append(pa.nulls(data.num_rows, field.type))
        yield from pa.Table.from_arrays(arrays, schema=arrow).to_batches(max_chunksize=65_536)
