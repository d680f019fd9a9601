"""An updating query into an Iceberg table with a ``PRIMARY KEY``: upserts by key, copy-on-write, exactly once.

**What a batch does to the table.** As Flink's Iceberg sink with a primary key applies a
changelog, each key ends up as its last change: the batch is reduced to the last change of
each key in batch order (a ``monotonically_increasing_id`` taken before the shuffle, ``-U``
rows dropped first, as runtime.delta does), and then, in ONE snapshot:

- the table's rows whose key is among the batch's keys are deleted, copy-on-write (pyiceberg
  writes no delete files, and neither does this): each data file that holds such a row is
  replaced by a file of its other rows (or by nothing);
- the batch's ``+I``/``+U`` rows are added as new data files. A key whose last change is
  ``-D`` is deleted only.

**Where the rows go.** The executors write the new rows' files (``ChangeWriter``, a
``mapInArrow`` function, with pyiceberg's writer as the append path does) and hand back
the data files' entries and the batch's **key columns** (Arrow IPC): the keys are collected
on the driver, nothing else of the rows. The driver finds the data files that may hold the
keys (pyiceberg's scan planning: partitions and column bounds, by a range of each key
column and, for up to 200 keys, their set), and the executors rewrite those files
(``Rewriter``: each file read with pyiceberg's ArrowScan, the rows of the batch's keys
left out, the rest written as new files); a file with none of the keys is left alone. The
driver commits one snapshot: an overwrite (the rewritten files replaced, the new ones
added), or a fast append when no file held a key. Rows never pass through the driver.
pyiceberg's own ``Table.upsert`` is not used: it takes the rows as one Arrow table in the
process that commits, compares every matched row, has no deletes, and makes one snapshot for
its updates and another for its inserts.

**Exactly once.** The snapshot carries the job and the batch in its summary
(``streamsql.job-id``, ``streamsql.batch-id``), as the append path's does (runtime.iceberg.
sink), so a micro-batch Spark replays after a crash is found and skipped. A commit that loses
a race with another writer is checked again, the files to rewrite planned again on the new
metadata, and retried. A NULL in a key column is refused (Flink: a primary key's columns are
NOT NULL).
"""

from __future__ import annotations

import pickle
import uuid
from dataclasses import dataclass

from streamsql.changelog import DELETE, INSERT, ROWKIND_COLUMN, UPDATE_BEFORE
from streamsql.plan.objects import TableDef
from streamsql.runtime.iceberg import catalog

SEQUENCE_COLUMN = "__streamsql_seq"
CHANGES_SCHEMA = "file BINARY, rows BIGINT, keys BINARY"
REWRITTEN_SCHEMA = "original BINARY, files BINARY, removed BIGINT"
REWRITE_TASKS = 16  # at most, for the files to rewrite
IN_LIMIT = 200  # pyiceberg's metrics evaluators ignore an IN of more values (IN_PREDICATE_LIMIT)


def key_columns(table: TableDef, matched) -> list[str]:
    """The PRIMARY KEY's columns by their Iceberg names."""
    names = {c.declared.lower(): c.iceberg for c in matched}
    return [names[k.lower()] for k in table.primary_key]


def last_changes(frame, table: TableDef, matched):
    """Kind and the columns under their Iceberg names, one row per key: its last change in batch order, -U dropped."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    kinds = ROWKIND_COLUMN in frame.columns
    if kinds:
        frame = frame.where(F.col(ROWKIND_COLUMN) != F.lit(UPDATE_BEFORE))
    kind = F.col(ROWKIND_COLUMN) if kinds else F.lit(INSERT)
    values = [F.col(f"`{c.declared}`").alias(c.iceberg) for c in matched]
    sequence = F.monotonically_increasing_id().alias(SEQUENCE_COLUMN)  # batch order, taken before the shuffle
    latest = Window.partitionBy(*[F.col(f"`{k}`") for k in key_columns(table, matched)]).orderBy(F.col(SEQUENCE_COLUMN).desc())
    return (frame.select(kind.alias(ROWKIND_COLUMN), *values, sequence)
            .withColumn("__streamsql_last", F.row_number().over(latest))
            .where(F.col("__streamsql_last") == 1)
            .drop("__streamsql_last", SEQUENCE_COLUMN))


def upsert_batch(frame, table: TableDef, iceberg, matched, properties: dict, job, batch_id) -> dict:
    """Apply one batch of a changelog by key (see the module docstring); the counts as the append path's."""
    import pyarrow as pa

    from streamsql.errors import ConnectorError
    from streamsql.runtime.iceberg.sink import _io_properties, _writer_metadata

    label = f"Table '{table.name.name}'"
    key = key_columns(table, matched)
    writer = ChangeWriter(_writer_metadata(iceberg), _io_properties(iceberg), label, tuple(key))
    written = last_changes(frame, table, matched).mapInArrow(writer, CHANGES_SCHEMA).collect()
    files = [pickle.loads(r["file"]) for r in written if r["file"] is not None]
    keys = [pa.ipc.open_stream(r["keys"]).read_all() for r in written if r["keys"] is not None]
    keys = pa.concat_tables(keys) if keys else None
    if keys is None or keys.num_rows == 0:
        return {"rows": 0, "skipped": False}
    nulls = [k for k in key if keys.column(k).null_count]
    if nulls:
        raise ConnectorError(null_key(label, nulls[0]))
    if not _commit(frame.sparkSession, table, iceberg, keys, files, properties, job, batch_id):
        return {"rows": 0, "skipped": True}
    return {"rows": keys.num_rows, "skipped": False}


def null_key(label: str, column: str) -> str:
    return f"{label}: the query produced a NULL in PRIMARY KEY column '{column}' (a primary key's columns are NOT NULL)"


def _commit(spark, table: TableDef, iceberg, keys, files: list, properties: dict, job, batch_id) -> bool:
    """Plan the files holding the keys, rewrite them, commit one snapshot; planned again on a
    lost race (``sink.committed``)."""
    from streamsql.runtime.iceberg.sink import committed

    def commit(iceberg) -> None:
        replaced, added = _rewrite(spark, table, iceberg, keys)
        with iceberg.transaction() as transaction:
            update = transaction.update_snapshot(snapshot_properties=properties)
            with (update.overwrite() if replaced else update.fast_append()) as snapshot:
                for data_file in replaced:
                    snapshot.delete_data_file(data_file)
                for data_file in [*added, *files]:
                    snapshot.append_data_file(data_file)

    return committed(table, iceberg, job, batch_id, commit)


def _rewrite(spark, table: TableDef, iceberg, keys) -> tuple[list, list]:
    """(the data files that held some of the keys, the files of their other rows), rewritten by the executors."""
    from streamsql.errors import ConnectorError
    from streamsql.runtime.iceberg.sink import _io_properties, _writer_metadata

    if iceberg.current_snapshot() is None:
        return [], []
    try:
        tasks = list(iceberg.scan(row_filter=_candidates(keys)).plan_files())
    except Exception:  # the filter does not bind to the key's Iceberg type: every file is a candidate
        tasks = list(iceberg.scan().plan_files())
    if not tasks:
        return [], []
    rewriter = Rewriter(_writer_metadata(iceberg), _io_properties(iceberg), _ipc(keys))
    plan = spark.createDataFrame([(pickle.dumps(t),) for t in tasks], "task BINARY").repartition(min(len(tasks), REWRITE_TASKS))
    try:
        rewritten = plan.mapInArrow(rewriter, REWRITTEN_SCHEMA).collect()
    except Exception as error:
        raise ConnectorError(f"Table '{table.name.name}': rewriting the data files that hold the batch's keys failed:"
                             f" {catalog.first_line(error)}") from None
    changed = [r for r in rewritten if r.removed]
    return ([pickle.loads(r.original) for r in changed],
            [f for r in changed for f in pickle.loads(r.files)])


def _candidates(keys):
    """A filter every row of the keys passes (a superset): each key column's range, and its
    values while pyiceberg's evaluators take them; AlwaysTrue for types it cannot bound."""
    import pyarrow.compute as pc
    from pyiceberg.expressions import AlwaysTrue, And, GreaterThanOrEqual, In, LessThanOrEqual

    parts = []
    try:
        for name in keys.column_names:
            column = keys.column(name)
            bounds = pc.min_max(column).as_py()
            parts += [GreaterThanOrEqual(name, bounds["min"]), LessThanOrEqual(name, bounds["max"])]
            values = pc.unique(column).to_pylist()
            if len(values) <= IN_LIMIT:
                parts.append(In(name, values))
    except Exception:  # a type without literals or order in pyiceberg's expressions: every file
        return AlwaysTrue()
    return And(*parts) if len(parts) > 1 else parts[0]


def _ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return sink.getvalue().to_pybytes()


def _without_keys(rows, keys):
    """The rows whose key is not among the keys (an anti-join; the keys cast to the rows' types)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = keys.column_names
    keys = pa.table({n: keys.column(n).cast(rows.schema.field(n).type) for n in names})
    if len(names) == 1:
        return rows.filter(pc.invert(pc.is_in(rows.column(names[0]), value_set=keys.column(names[0]).combine_chunks())))
    return rows.join(keys, keys=names, join_type="left anti").select(rows.column_names)


@dataclass(frozen=True)
class ChangeWriter:
    """mapInArrow function over a batch's last changes: the +I/+U rows as data files (a
    pickled DataFile a row) and the task's keys, deletes' too (one Arrow IPC row)."""

    metadata: str
    io_properties: dict
    label: str
    key: tuple

    def __call__(self, batches):
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
        from pyiceberg.table.metadata import TableMetadataUtil

        from streamsql.runtime.iceberg.sink import _cast

        out = pa.schema([("file", pa.binary()), ("rows", pa.int64()), ("keys", pa.binary())])
        batches = [b for b in batches if b.num_rows]
        if not batches:
            yield pa.RecordBatch.from_pylist([], schema=out)
            return
        metadata = TableMetadataUtil.parse_raw(self.metadata)
        target = schema_to_pyarrow(metadata.schema(), include_field_ids=False)
        changes = pa.Table.from_batches(batches)
        kinds = changes.column(ROWKIND_COLUMN)
        rows = pa.Table.from_arrays([_cast(changes.column(f.name), f.type) for f in target], schema=target)
        keys = rows.select(list(self.key))
        nulls = [k for k in self.key if keys.column(k).null_count]
        if nulls:  # before a required column's file fails on it
            raise RuntimeError(null_key(self.label, nulls[0]))
        rows = rows.filter(pc.not_equal(kinds, DELETE))
        entries = []
        if rows.num_rows:
            io = load_file_io(self.io_properties, metadata.location)
            entries = [{"file": pickle.dumps(f), "rows": f.record_count, "keys": None}
                       for f in _dataframe_to_data_files(metadata, rows, io, uuid.uuid4())]
        entries.append({"file": None, "rows": 0, "keys": _ipc(keys)})
        yield pa.RecordBatch.from_pylist(entries, schema=out)


@dataclass(frozen=True)
class Rewriter:
    """mapInArrow function over pickled FileScanTasks: each file's rows without the batch's
    keys, written as new files; (the original DataFile, its replacements, rows removed)."""

    metadata: str
    io_properties: dict
    keys: bytes  # Arrow IPC of the batch's key columns

    def __call__(self, batches):
        import pyarrow as pa
        from pyiceberg.expressions import AlwaysTrue
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import ArrowScan, _dataframe_to_data_files
        from pyiceberg.table.metadata import TableMetadataUtil

        out = pa.schema([("original", pa.binary()), ("files", pa.binary()), ("removed", pa.int64())])
        metadata = TableMetadataUtil.parse_raw(self.metadata)
        io = load_file_io(self.io_properties, metadata.location)
        keys = pa.ipc.open_stream(self.keys).read_all()
        results = []
        for batch in batches:
            for task in batch.column("task").to_pylist():
                task = pickle.loads(task)
                rows = ArrowScan(metadata, io, metadata.schema(), AlwaysTrue()).to_table([task])
                kept = _without_keys(rows, keys)
                removed = rows.num_rows - kept.num_rows
                files = list(_dataframe_to_data_files(metadata, kept, io, uuid.uuid4())) if removed and kept.num_rows else []
                results.append({"original": pickle.dumps(task.file), "files": pickle.dumps(files), "removed": removed})
        yield pa.RecordBatch.from_pylist(results, schema=out)
