"""Writing a changelog into a Delta table: Flink's ``'connector' = 'delta'`` sink, exactly once.

**What a batch does to the table.** A table without a key takes an insert-only query as an
append: the rows become new data files (runtime.delta.files), written from the executors,
and the driver commits their add actions in one Delta commit
(``DeltaTable.create_write_transaction``, mode ``append``; ``overwrite`` for a batch-mode
INSERT OVERWRITE). Rows never pass through the driver. A table with ``PRIMARY KEY (k) NOT
ENFORCED`` takes an updating query in upsert mode: the batch is reduced to the last change
of each key in batch order (a ``monotonically_increasing_id`` taken before the shuffle,
``-U`` dropped first, as runtime.jdbc does), and one delta-rs MERGE on the key applies it:
``-D`` deletes a matched row, ``+I``/``+U`` update it or insert it. delta-rs runs its MERGE
in the driver process, so that reduced batch (one row per changed key) is collected there
as Arrow; the table's files are rewritten by delta-rs.

**Exactly once per micro-batch.** Each commit carries a Delta app transaction
(``CommitProperties(app_transactions=[Transaction(app_id, batch)])``): the ``txn`` action is
in the same commit as the data, so either both are in the log or neither. Before writing,
the sink reads the table's recorded version for its app id
(``DeltaTable.transaction_version``); a batch at or below it was committed before — Spark
replays the last micro-batch after a crash — and is only computed (its stateful operators
must commit their state), not written again. The app id is the job's identity as
runtime.jdbc builds it: the job's state directory name and its Spark checkpoint's query id,
so a job started afresh (its checkpoint deleted) is a new app and writes everything again.
A bounded job's runs (runtime.inserts.commit_result) are numbered batches of an app id that
its state directory keeps. Batch-mode INSERTs carry no app transaction: as in Flink's batch
mode, each run writes again.

The table is opened (or created) and the query's columns checked against it on the driver
before a stream starts (``DeltaMicroBatch.checked``) and before a batch is written.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from streamsql.changelog import DELETE, INSERT, ROWKIND_COLUMN, UPDATE_BEFORE
from streamsql.plan.objects import TableDef
from streamsql.runtime.delta import table as delta_table
from streamsql.runtime.delta.files import ACTION_SCHEMA, FileWriter, now_ms

SEQUENCE_COLUMN = "__streamsql_seq"
APP_ID_FILE = "delta-app-id"


@dataclass(frozen=True)
class Target:
    """The sink's table as found on the driver: the DeltaTable and the matched columns."""

    delta: object
    columns: list  # runtime.delta.table.Column, in DDL order
    partitions: list


def resolve(table: TableDef, schema) -> Target:
    """The sink's Delta table (created when missing) with the query's columns checked against
    it; ``schema`` is the query's StructType (its columns conformed to the declared types)."""
    from pyspark.sql.types import StructType

    fields = [f for f in schema.fields if f.name != ROWKIND_COLUMN]
    if not delta_table.exists(table):
        delta_table.create(table, StructType(fields).jsonValue())
    delta = delta_table.open_snapshot(table, time_travel=False)
    columns = delta_table.columns(table, delta, reading=False)
    return Target(delta, columns, list(delta.metadata().partition_columns))


def write_delta_batch(frame, table: TableDef, app_id: str | None = None, batch_id: int | None = None,
                      overwrite: bool = False) -> dict:
    """Write one batch of a changelog (or an insert-only frame) into the Delta table.

    With ``app_id`` and ``batch_id`` the write is exactly once (see the module docstring).
    Returns counts: rows written, and whether the batch was skipped (committed before)."""
    from streamsql.runtime.sinks import compute_only

    target = resolve(table, frame.schema)
    if app_id is not None:
        done = target.delta.transaction_version(app_id)
        if done is not None and done >= batch_id:
            compute_only(frame)
            return {"rows": 0, "skipped": True}
    properties = _commit_properties(app_id, batch_id)
    if table.primary_key and not overwrite:
        rows = _merge(frame, table, target, properties)
    else:
        rows = _append(frame, table, target, properties, batch_id, overwrite)
    return {"rows": rows, "skipped": False}


def _commit_properties(app_id: str | None, batch_id: int | None):
    from deltalake import CommitProperties, Transaction

    if app_id is None:
        return None
    return CommitProperties(app_transactions=[Transaction(app_id, batch_id)])


def _append(frame, table: TableDef, target: Target, properties, batch_id: int | None, overwrite: bool) -> int:
    """Data files from the executors, their add actions committed once here."""
    import pyarrow as pa
    from deltalake.transaction import AddAction

    delta = target.delta
    arrow = pa.schema(delta.schema().to_arrow())
    schema = pa.schema([arrow.field(c.delta) for c in target.columns])
    kinds = [f"`{ROWKIND_COLUMN}`"] if ROWKIND_COLUMN in frame.columns else []
    frame = frame.selectExpr(*kinds, *[f"`{c.declared}`" for c in target.columns])
    prefix = f"part-{batch_id if batch_id is not None else 'b'}-{uuid.uuid4().hex[:8]}"
    writer = FileWriter(delta.table_uri, schema, tuple(target.partitions), prefix, f"Table '{table.name.name}'")
    written = frame.mapInArrow(writer, ACTION_SCHEMA).collect()
    if not written and not overwrite:
        return 0
    actions = [AddAction(r.path, r.size, json.loads(r.partition_values), now_ms(), True, r.stats) for r in written]
    delta.create_write_transaction(actions, "overwrite" if overwrite else "append", delta.schema(),
                                   partition_by=target.partitions or None, commit_properties=properties)
    return sum(r.rows for r in written)


def _merge(frame, table: TableDef, target: Target, properties) -> int:
    """The batch reduced to the last change per key, applied by one MERGE on the key."""
    import pyarrow as pa

    rows = _last_changes(frame, table, target).toArrow()
    if rows.num_rows == 0:
        return 0
    arrow = pa.schema(target.delta.schema().to_arrow())
    schema = pa.schema([pa.field(ROWKIND_COLUMN, pa.string()), *[arrow.field(c.delta) for c in target.columns]])
    source = rows.rename_columns(schema.names).cast(schema)
    declared = {c.declared.lower(): c.delta for c in target.columns}
    key = [declared[k.lower()] for k in table.primary_key]
    on = " AND ".join(f"t.{_quoted(k)} = s.{_quoted(k)}" for k in key)
    values = {_quoted(c.delta): f"s.{_quoted(c.delta)}" for c in target.columns}
    kind = f"s.{_quoted(ROWKIND_COLUMN)}"
    (target.delta.merge(source, on, source_alias="s", target_alias="t", commit_properties=properties)
     .when_matched_delete(predicate=f"{kind} = '{DELETE}'")
     .when_matched_update(updates=values, predicate=f"{kind} <> '{DELETE}'")
     .when_not_matched_insert(updates=values, predicate=f"{kind} <> '{DELETE}'")
     .execute())
    return rows.num_rows


def _last_changes(frame, table: TableDef, target: Target):
    """Kind and columns, one row per key: its last change in batch order, -U dropped."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    kind = F.col(ROWKIND_COLUMN) if ROWKIND_COLUMN in frame.columns else F.lit(INSERT)
    if ROWKIND_COLUMN in frame.columns:
        frame = frame.where(F.col(ROWKIND_COLUMN) != F.lit(UPDATE_BEFORE))
    values = [F.col(f"`{c.declared}`") for c in target.columns]
    key = [F.col(f"`{k}`") for k in table.primary_key]
    sequence = F.monotonically_increasing_id().alias(SEQUENCE_COLUMN)  # batch order, taken before the shuffle
    latest = Window.partitionBy(*key).orderBy(F.col(SEQUENCE_COLUMN).desc())
    return (frame.select(kind.alias(ROWKIND_COLUMN), *values, sequence)
            .withColumn("__streamsql_last", F.row_number().over(latest))
            .where(F.col("__streamsql_last") == 1)
            .drop("__streamsql_last", SEQUENCE_COLUMN))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def bounded_app_id(state_directory: Path, key: str) -> str:
    """A bounded job's app id: its key and a token its state directory keeps (a job whose state
    is deleted starts numbering its runs afresh, so it must be another app)."""
    token = Path(state_directory) / APP_ID_FILE
    if not token.exists():
        token.parent.mkdir(parents=True, exist_ok=True)
        token.write_text(uuid.uuid4().hex)
    return f"streamsql:{key}/{token.read_text().strip()}"


# -- streaming ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeltaMicroBatch:
    """foreachBatch for a Delta sink: each micro-batch exactly once (picklable)."""

    table: TableDef
    checkpoint: str  # the job's Spark checkpoint directory, inside its state directory
    query: str = ""  # the streaming query's name, under which its rows are counted

    def checked(self, frame) -> DeltaMicroBatch:
        """This, once the Delta table is found (or created) and fits the query's columns,
        before the stream starts."""
        resolve(self.table, frame.schema)
        return self

    def __call__(self, frame, batch_id: int) -> None:
        from streamsql.runtime.sink_counts import committed

        counts = write_delta_batch(frame, self.table, self.app_id(), batch_id)
        if not counts["skipped"]:
            committed(self.query, counts["rows"])

    def app_id(self) -> str:
        """The job's key as runtime.jdbc's JdbcMicroBatch builds it (state directory name and
        the checkpoint's query id)."""
        from streamsql.runtime.jdbc import JdbcMicroBatch

        return f"streamsql:{JdbcMicroBatch(self.table, self.checkpoint).job_key()}"
