"""Writing an insert-only query into an Iceberg table: Flink's ``'connector' = 'iceberg'`` sink, exactly once.

**What a batch does to the table.** An append: the rows become new Parquet data files,
written from the executors, and the driver commits them in one Iceberg snapshot (a fast
append: a new manifest of the batch's files, the old manifests kept). Rows never pass
through the driver: each task (``FileWriter``, a ``mapInArrow`` function) casts its Arrow
batches to the table's schema and writes them with pyiceberg's own writer
(``_dataframe_to_data_files``: files of the table's target size under its data location,
split by its partition spec, Parquet with field ids and column statistics) and hands back
the pickled ``DataFile`` entries, a few hundred bytes each, which the driver appends.
A batch-mode ``INSERT OVERWRITE`` deletes the table's rows in the same transaction. A
table with ``PRIMARY KEY (k) NOT ENFORCED`` takes an updating query in upsert mode
(runtime.iceberg.upsert): each key's last change of the batch, applied copy-on-write in one
snapshot (the rows of the batch's keys deleted, the +I/+U rows added); only the key columns
are collected on the driver. Without a key an updating query is refused at plan time, as
Flink refuses it (plan.changelog_checks.SINK_CHANGES). A table the sink creates has the key
as its identifier fields (required columns), as Flink's Iceberg catalog creates it.

**Exactly once per micro-batch.** Each commit's snapshot summary carries the job's identity
(``streamsql.job-id``: the job key as runtime.jdbc builds it, the job's state directory
name and its Spark checkpoint's query id) and the batch id (``streamsql.batch-id``),
in the same atomic commit as the data. Before committing, the writer walks the table's
snapshots back from the current one to the job's latest (as Flink's Iceberg committer
finds its ``flink.max-committed-checkpoint-id``) and skips a batch at or below its batch
id: a micro-batch Spark replays after a crash is computed (its stateful operators must
commit their state) but not appended again. A commit that loses a race with another
writer (pyiceberg's CommitFailedException) is checked again and retried on the new
metadata. A bounded job's runs (runtime.inserts.commit_result) are numbered batches of a
job id its state directory keeps. Batch-mode INSERTs carry no job: each run appends, as in
Flink's batch mode. Files a killed task wrote but no snapshot took are in the data
directory, invisible to readers, until Iceberg's orphan-file removal deletes them.

The table is loaded (or created from the declared columns, database too, as Flink's
connector creates it) and its schema checked against the declared columns on the driver
before a stream starts (``IcebergMicroBatch.checked``) and before a batch is written.
"""

from __future__ import annotations

import pickle
import uuid
from dataclasses import dataclass
from pathlib import Path

from streamsql.changelog import INSERT, ROWKIND_COLUMN
from streamsql.plan.objects import TableDef
from streamsql.runtime.iceberg import catalog
from streamsql.runtime.iceberg.schema import columns, creating_schema

JOB_PROPERTY = "streamsql.job-id"
BATCH_PROPERTY = "streamsql.batch-id"
JOB_ID_FILE = "iceberg-job-id"
COMMIT_ATTEMPTS = 4
WRITTEN_SCHEMA = "file BINARY, rows BIGINT"


def resolve(table: TableDef):
    """(the sink's pyiceberg table, created when missing, and its matched columns)."""
    iceberg = catalog.load(table, creating_schema=creating_schema(table))
    return iceberg, columns(table, iceberg.schema(), reading=False)


def committed_batch(iceberg, job: str) -> int | None:
    """The last batch id the job committed into the table (its newest snapshot among the
    current one's ancestors that carries the job), or None."""
    from pyiceberg.table.snapshots import ancestors_of

    for snapshot in ancestors_of(iceberg.current_snapshot(), iceberg.metadata):
        summary = snapshot.summary
        if summary is not None and summary.get(JOB_PROPERTY) == job:
            return int(summary.get(BATCH_PROPERTY, "-1"))
    return None


def write_iceberg_batch(frame, table: TableDef, job: str | None = None, batch_id: int | None = None,
                        overwrite: bool = False) -> dict:
    """Append one batch of an insert-only frame to the Iceberg table; with ``job`` and
    ``batch_id`` exactly once (see the module docstring). Returns the rows written and
    whether the batch was skipped (committed before)."""
    from streamsql.runtime.sinks import compute_only

    iceberg, matched = resolve(table)
    if job is not None and _done(iceberg, job, batch_id):
        compute_only(frame)
        return {"rows": 0, "skipped": True}
    properties = {JOB_PROPERTY: job, BATCH_PROPERTY: str(batch_id)} if job is not None else {}
    if table.primary_key and not overwrite:
        from streamsql.runtime.iceberg.upsert import upsert_batch

        return upsert_batch(frame, table, iceberg, matched, properties, job, batch_id)
    kinds = [f"`{ROWKIND_COLUMN}`"] if ROWKIND_COLUMN in frame.columns else []
    frame = frame.selectExpr(*kinds, *[f"`{c.declared}` AS `{c.iceberg}`" for c in matched])
    writer = FileWriter(_writer_metadata(iceberg), _io_properties(iceberg), f"Table '{table.name.name}'")
    written = frame.mapInArrow(writer, WRITTEN_SCHEMA).collect()
    files = [pickle.loads(row.file) for row in written]
    if not files and not overwrite:
        return {"rows": 0, "skipped": False}
    if not _commit(table, iceberg, files, properties, overwrite, job, batch_id):
        return {"rows": 0, "skipped": True}
    return {"rows": sum(row.rows for row in written), "skipped": False}


def _done(iceberg, job: str, batch_id: int) -> bool:
    done = committed_batch(iceberg, job)
    return done is not None and done >= batch_id


def _commit(table: TableDef, iceberg, files: list, properties: dict, overwrite: bool, job, batch_id) -> bool:
    """One snapshot with the files (after deleting every row, to overwrite); see ``committed``."""
    from pyiceberg.expressions import AlwaysTrue

    def commit(iceberg) -> None:
        with iceberg.transaction() as transaction:
            if overwrite:
                transaction.delete(AlwaysTrue(), snapshot_properties=properties)
            with transaction.update_snapshot(snapshot_properties=properties).fast_append() as append:
                for data_file in files:
                    append.append_data_file(data_file)

    return committed(table, iceberg, job, batch_id, commit)


def committed(table: TableDef, iceberg, job, batch_id, commit) -> bool:
    """``commit(iceberg)``, one atomic Iceberg commit, retried on a lost race with another writer
    (on the new metadata, after checking again that the batch is not in). False: it was."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    from streamsql.errors import ConnectorError

    for attempt in range(COMMIT_ATTEMPTS):
        try:
            commit(iceberg)
            return True
        except (CommitFailedException, ValidationException) as error:
            if attempt == COMMIT_ATTEMPTS - 1:
                raise ConnectorError(f"Table '{table.name.name}': committing to the {catalog.described(table)} failed"
                                     f" {COMMIT_ATTEMPTS} times (other writers): {catalog.first_line(error)}") from None
            iceberg = iceberg.refresh()
            if job is not None and _done(iceberg, job, batch_id):
                return False
    return False


def _writer_metadata(iceberg) -> str:
    """The table's metadata as JSON for the executors' writers: schema, spec, properties and
    location, without the snapshots (which grow with every micro-batch committed)."""
    trimmed = iceberg.metadata.model_copy(update={"snapshots": [], "snapshot_log": [], "metadata_log": [], "refs": {},
                                                  "current_snapshot_id": None, "statistics": [],
                                                  "partition_statistics": []})
    return trimmed.model_dump_json()


def _io_properties(iceberg) -> dict:
    """The file IO's properties for the executors, without the catalog's connection and secrets."""
    return {k: v for k, v in iceberg.io.properties.items() if k != "uri" and "password" not in k and "secret" not in k}


@dataclass(frozen=True)
class FileWriter:
    """mapInArrow function: the task's rows as the table's data files; one pickled DataFile a row."""

    metadata: str  # the table's metadata (JSON) at the time the batch started
    io_properties: dict
    label: str  # "Table 'name'", for errors

    def __call__(self, batches):
        import pyarrow as pa
        from pyiceberg.io import load_file_io
        from pyiceberg.io.pyarrow import _dataframe_to_data_files, schema_to_pyarrow
        from pyiceberg.table.metadata import TableMetadataUtil

        batches = [b for b in batches if b.num_rows]
        out = pa.schema([("file", pa.binary()), ("rows", pa.int64())])
        if not batches:
            yield pa.RecordBatch.from_pylist([], schema=out)
            return
        rows = pa.Table.from_batches(batches)
        if ROWKIND_COLUMN in rows.column_names:
            _check_insert_only(self.label, rows.column(ROWKIND_COLUMN))
            rows = rows.drop_columns([ROWKIND_COLUMN])
        metadata = TableMetadataUtil.parse_raw(self.metadata)
        target = schema_to_pyarrow(metadata.schema(), include_field_ids=False)
        rows = pa.Table.from_arrays([_cast(rows.column(f.name), f.type) for f in target], schema=target)
        io = load_file_io(self.io_properties, metadata.location)
        files = list(_dataframe_to_data_files(metadata, rows, io, uuid.uuid4()))
        yield pa.RecordBatch.from_pylist([{"file": pickle.dumps(f), "rows": f.record_count} for f in files], schema=out)


def _cast(column, kind):
    """Spark's Arrow column as the table's type (a TIMESTAMP's UTC instant as its wall-clock time)."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return column.cast(kind)


def _check_insert_only(label: str, kinds) -> None:
    import pyarrow.compute as pc

    others = pc.unique(pc.filter(kinds, pc.not_equal(kinds, INSERT))).to_pylist()
    if others:
        raise RuntimeError(f"{label}: an iceberg table takes inserts only, but the query produced '{others[0]}' rows")


def bounded_job_id(state_directory: Path, key: str) -> str:
    """A bounded job's id: its key and a token its state directory keeps (a job whose state is
    deleted numbers its runs afresh, so it must be another job)."""
    token = Path(state_directory) / JOB_ID_FILE
    if not token.exists():
        token.parent.mkdir(parents=True, exist_ok=True)
        token.write_text(uuid.uuid4().hex)
    return f"streamsql:{key}/{token.read_text().strip()}"


# -- streaming ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IcebergMicroBatch:
    """foreachBatch for an iceberg sink: each micro-batch exactly once (picklable)."""

    table: TableDef
    checkpoint: str  # the job's Spark checkpoint directory, inside its state directory
    query: str = ""  # the streaming query's name, under which its rows are counted

    def checked(self) -> IcebergMicroBatch:
        """This, once the table is found (or created) and fits the declared columns, before the stream starts."""
        resolve(self.table)
        return self

    def __call__(self, frame, batch_id: int) -> None:
        from streamsql.runtime.sink_counts import committed

        counts = write_iceberg_batch(frame, self.table, self.job_id(), batch_id)
        if not counts["skipped"]:
            committed(self.query, counts["rows"])

    def job_id(self) -> str:
        """The job's key as runtime.jdbc's JdbcMicroBatch builds it (state directory name and
        the checkpoint's query id)."""
        from streamsql.runtime.jdbc import JdbcMicroBatch

        return f"streamsql:{JdbcMicroBatch(self.table, self.checkpoint).job_key()}"
