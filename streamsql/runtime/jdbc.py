"""Writing a changelog into PostgreSQL: Flink's ``'connector' = 'jdbc'`` sink, exactly once.

**What a batch does to the table.** A table with ``PRIMARY KEY (k) NOT ENFORCED`` is written
in upsert mode, keyed by ``k``: ``+I`` and ``+U`` rows are upserted (``INSERT ... ON
CONFLICT (k) DO UPDATE``), ``-D`` rows delete by key, ``-U`` rows are ignored (the ``+U``
that follows carries the new row). A table without a key takes an insert-only stream as
plain INSERTs; any other row kind is an error (Flink refuses such a plan at planning time:
``plan.changelog_checks.accepted_kinds``). A frame without the ``__rowkind`` column
(streamsql.changelog) is insert-only. The PostgreSQL table must exist, as in Flink, with a
primary key or unique index on the key's columns; its name is resolved as PostgreSQL
resolves an unquoted name (``to_regclass``), columns are matched by name, exactly or else
case-insensitively (PostgreSQL folds unquoted names). All of that is checked on the
driver before a stream starts, so a missing table, column or index is one clear error.

**From the executors.** The driver only looks up the target and the commit records; rows go
from each task straight to PostgreSQL (``mapInArrow``, psycopg 3, one connection per task):
Arrow batches are written as CSV by pyarrow and sent with ``COPY`` — straight into the
table for inserts, or into a temporary table that one ``INSERT ... SELECT ... ON CONFLICT``
and one ``DELETE ... USING`` merge into the table. Columns CSV cannot carry (arrays,
bytes) go through ``executemany`` instead. ``sink.buffer-flush.max-rows`` is the number of
rows converted per chunk (per ``executemany`` round on that path).

**Exactly once per micro-batch.** Spark replays a micro-batch (same id, same rows) when
the job dies before the batch's end is in its checkpoint; the write must then change
nothing that was already applied — batch 1 ``+I k=1``, batch 2 ``-D k=1``, and a replay of
batch 1 must not bring ``k=1`` back. So:

1. *One final action per key.* The batch is reduced to the last change of each key, in
   batch order (a ``monotonically_increasing_id`` taken before any shuffle: partition, then
   position in it), ``-U`` dropped first. Keys are then distinct, so the order of the
   statements within a batch no longer matters.
2. *Parts by key, deterministically.* Each row gets a part, ``pmod(hash(key), N)``
   (Spark's Murmur3: the same on every run), ``N`` being ``sink.parallelism`` or else
   Spark's shuffle partitions; the frame is repartitioned by the part, so a task holds
   whole parts (Spark may coalesce several into one task, never split one). ``N`` is
   recorded with the batch and a replay uses the recorded ``N``: a key falls into the same
   part again. Without a key, the part is a hash of all the columns.
3. *One transaction per part, with its commit row.* A task writes each of its parts in one
   transaction that first inserts ``(job, batch, part, parts)`` into ``streamsql_commits``
   (created next to the target table) ``ON CONFLICT DO NOTHING``: when the row was already
   there, the part was applied and the transaction ends having done nothing; a concurrent
   attempt (a retried or speculative task) waits on that row's lock, then finds it. So each
   part of each batch is applied exactly once, and a replay applies only the parts a crash
   left unapplied (later batches only start once a batch is complete, so per key the
   changes are applied once each, in order).
4. When every task has succeeded, the driver records the parts that had no rows (so a
   replay of a complete batch writes nothing: it is computed only for its stateful
   operators to commit their state, which Spark requires) and prunes
   the job's records older than ``KEEP_BATCHES`` batches (Spark replays only the last).

The job in a record is the job's state directory name, its Spark checkpoint's query id and
the target table, so a job started afresh (its checkpoint deleted) does not take the old
job's records for its own. Batch-mode writes (``write_changelog_batch`` without a batch id)
keep no records: as in Flink's batch mode, each run writes again.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

from streamsql.changelog import DELETE, INSERT, ROWKIND_COLUMN, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.errors import ValidationError
from streamsql.plan.objects import TableDef
from streamsql.runtime.jdbc_target import Target, connect, resolve_target, statements

KEEP_BATCHES = 100
SEQUENCE_COLUMN = "__streamsql_seq"
PART_COLUMN = "__streamsql_part"
COPY_BUFFER_BYTES = 4 << 20



# -- the driver side ------------------------------------------------------------------------


def write_changelog_batch(frame, table: TableDef, job_key: str | None = None, batch_id: int | None = None,
                          overwrite: bool = False) -> dict:
    """Write one batch of a changelog (or an insert-only frame) into the jdbc table.

    With ``job_key`` and ``batch_id`` (a streaming micro-batch) the write is exactly once:
    a batch id applied before is not applied again (see the module docstring). Returns
    counts: rows written, parts written, parts skipped (applied before).
    """
    if overwrite:
        raise ValidationError(f"INSERT OVERWRITE {table.name.name}: the jdbc connector does not support overwriting, as in Flink")
    columns = [c for c in frame.columns if c != ROWKIND_COLUMN]
    target = resolve_target(table, columns)
    target = replace(target, statements=statements(target))
    exactly_once = job_key is not None and batch_id is not None
    parts = _partitions(frame, table)
    if exactly_once:
        job_key = f"{job_key} -> {target.relation}"  # a job's records per target table
        recorded = _recorded(target, job_key, batch_id)
        if recorded is not None:
            parts, done = recorded
            if done == parts:
                from streamsql.runtime.sinks import compute_only

                compute_only(frame)  # its stateful operators still commit the batch's state
                return {"rows": 0, "written": 0, "skipped": parts}
    frame = _parts(frame, table, columns, parts)
    job = (job_key, batch_id, parts) if exactly_once else None
    results = frame.mapInArrow(PartitionWriter(target, job), "part INT, rows BIGINT, skipped BOOLEAN").collect()
    if exactly_once:
        _finish(target, job_key, batch_id, parts)
    return {"rows": sum(r.rows for r in results), "written": sum(not r.skipped for r in results),
            "skipped": sum(r.skipped for r in results)}


def _parts(frame, table: TableDef, columns: list[str], parts: int):
    """The rows to write: part, kind, columns; repartitioned by part and, with a key, reduced
    to the last change per key (one shuffle: the reduction runs within the parts)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    has_kinds = ROWKIND_COLUMN in frame.columns
    kind = F.col(ROWKIND_COLUMN) if has_kinds else F.lit(INSERT)
    key = [F.col(f"`{c}`") for c in (table.primary_key or columns)]
    part = F.pmod(F.hash(*key), F.lit(parts)).cast("int").alias(PART_COLUMN)
    values = [F.col(f"`{c}`") for c in columns]
    if not table.primary_key:
        return frame.select(part, kind.alias(ROWKIND_COLUMN), *values).repartition(parts, PART_COLUMN)
    if has_kinds:
        frame = frame.where(F.col(ROWKIND_COLUMN) != F.lit(UPDATE_BEFORE))
    sequence = F.monotonically_increasing_id().alias(SEQUENCE_COLUMN)  # batch order, taken before the shuffle
    latest = Window.partitionBy(F.col(PART_COLUMN), *key).orderBy(F.col(SEQUENCE_COLUMN).desc())
    return (frame.select(part, kind.alias(ROWKIND_COLUMN), *values, sequence)
            .repartition(parts, PART_COLUMN)
            .withColumn("__streamsql_last", F.row_number().over(latest))
            .where(F.col("__streamsql_last") == 1)
            .drop("__streamsql_last", SEQUENCE_COLUMN))


def _partitions(frame, table: TableDef) -> int:
    if "sink.parallelism" in table.options:
        return int(table.options["sink.parallelism"])
    return int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def _recorded(target: Target, job: str, batch: int) -> tuple[int, int] | None:
    """(partitions, how many of them are recorded) for a batch written before, else None."""
    with connect(target.params) as connection:
        row = connection.execute(
            f"SELECT max(parts), count(*) FROM {target.commits} WHERE job = %s AND batch = %s", (job, batch)
        ).fetchone()
    return (row[0], row[1]) if row and row[1] else None


def _finish(target: Target, job: str, batch: int, parts: int) -> None:
    """After every task succeeded: record the parts that had no rows (so the batch counts as
    done), and prune the job's old records."""
    with connect(target.params) as connection:
        with connection.cursor() as cursor:
            cursor.executemany(
                target.statements["claim"], [(job, batch, part, parts) for part in range(parts)],
            )
            cursor.execute(f"DELETE FROM {target.commits} WHERE job = %s AND batch < %s", (job, batch - KEEP_BATCHES))


# -- the executor side ----------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionWriter:
    """mapInArrow function: a task's rows, each part in one transaction with its commit row.

    Rows arrive with their part (``PART_COLUMN``, a hash of the key modulo the batch's
    partitions); a task holds whole parts (Spark may give it several, never a piece of one).
    A part whose commit row exists was applied before and is skipped."""

    target: Target
    job: tuple | None  # (job key, batch id, partitions) for an exactly-once write

    def __call__(self, batches):
        import pyarrow as pa

        batches = list(batches)
        table = pa.Table.from_batches(batches) if batches else None
        results = self._write_with_retries(table)
        yield pa.RecordBatch.from_pydict(
            {"part": [r[0] for r in results], "rows": [r[1] for r in results], "skipped": [r[2] for r in results]},
            schema=pa.schema([("part", pa.int32()), ("rows", pa.int64()), ("skipped", pa.bool_())]),
        )

    def _write_with_retries(self, table) -> list[tuple]:
        import psycopg

        attempt = 0
        while True:
            try:
                return self._write(table)
            except (psycopg.OperationalError, psycopg.errors.SerializationFailure,
                    psycopg.errors.DeadlockDetected) as error:
                if attempt >= self.target.max_retries:
                    raise RuntimeError(f"{self.target.label}: writing failed after {attempt + 1} attempt(s): {error}") from None
                attempt += 1
                time.sleep(min(0.2 * 2 ** attempt, 5))
            except psycopg.Error as error:
                raise RuntimeError(f"{self.target.label}: {str(error).strip()}") from None

    def _write(self, table) -> list[tuple]:
        if table is None or table.num_rows == 0:
            return []
        import pyarrow.compute as pc

        target = self.target
        parts = sorted(pc.unique(table.column(PART_COLUMN)).to_pylist())
        results = []
        with connect(target.params) as connection, connection.cursor() as cursor:
            for part in parts:
                with connection.transaction():
                    if self.job is not None:
                        job, batch, count = self.job
                        cursor.execute(target.statements["claim"], (job, batch, part, count))
                        if not cursor.rowcount:  # applied before: skip
                            results.append((part, 0, True))
                            continue
                    rows = table.filter(pc.equal(table.column(PART_COLUMN), part)) if len(parts) > 1 else table
                    rows = rows.drop_columns([PART_COLUMN])
                    if _copyable(rows.schema):
                        _copy(cursor, target, rows)
                    else:
                        _execute(cursor, target, rows)
                    results.append((part, rows.num_rows, False))
        return results


def _copyable(schema) -> bool:
    """Whether every column writes as CSV that PostgreSQL reads back as the same value."""
    import pyarrow as pa

    return all(pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_string(t)
               or pa.types.is_large_string(t) or pa.types.is_decimal(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)
               for t in schema.types)


def _copy(cursor, target: Target, rows) -> None:
    """COPY the rows in as CSV, sink.buffer-flush.max-rows rows a chunk: straight into the
    table (insert-only), or into a temporary table that one upsert and one delete read."""
    import io

    import pyarrow.compute as pc
    import pyarrow.csv as csv

    kinds = rows.column(0)
    if not target.key:
        _check_insert_only(target, kinds)
        rows = rows.drop_columns([rows.column_names[0]])
        copy = target.statements["copy"]
    else:
        cursor.execute(target.statements["stage"])
        copy = target.statements["copy_stage"]
    options = csv.WriteOptions(include_header=False, quoting_style="all_valid")
    buffer = io.BytesIO()
    with cursor.copy(copy) as sink:
        for chunk in rows.to_batches(max_chunksize=target.max_rows):
            csv.write_csv(chunk, buffer, options)
            if buffer.tell() >= COPY_BUFFER_BYTES:  # one message per few MB: far fewer round trips than a chunk's
                sink.write(buffer.getvalue())
                buffer = io.BytesIO()
        if buffer.tell():
            sink.write(buffer.getvalue())
    if target.key:
        cursor.execute(target.statements["merge_upserts"])
        if pc.any(pc.equal(kinds, DELETE)).as_py():
            cursor.execute(target.statements["merge_deletes"])


def _execute(cursor, target: Target, rows) -> None:
    """Columns CSV cannot carry (arrays, bytes): executemany, sink.buffer-flush.max-rows rows a round."""
    for chunk in rows.to_batches(max_chunksize=target.max_rows):
        for statement, values in zip(("upsert", "delete", "insert"), _split(target, chunk)):
            if values:
                cursor.executemany(target.statements[statement], values)


def _check_insert_only(target: Target, kinds) -> None:
    import pyarrow.compute as pc

    others = pc.unique(pc.filter(kinds, pc.not_equal(kinds, INSERT))).to_pylist()
    if others:
        raise RuntimeError(
            f"{target.label}: the table has no PRIMARY KEY, so it takes inserts only, but the query"
            f" produced '{others[0]}' rows; declare PRIMARY KEY (...) NOT ENFORCED to upsert and delete by it"
        )


def _split(target: Target, table) -> tuple[list, list, list]:
    """The partition's rows as parameter tuples: (upserts, deletes by key, plain inserts)."""
    if table is None or table.num_rows == 0:
        return [], [], []
    kinds = table.column(0).to_pylist()
    values = [_python_values(table.column(i)) for i in range(1, table.num_columns)]
    rows = list(zip(*values))
    upserts, deletes, inserts = [], [], []
    if not target.key:
        _check_insert_only(target, table.column(0))
    for kind, row in zip(kinds, rows):
        if not target.key:
            inserts.append(row)
        elif kind in (INSERT, UPDATE_AFTER):
            upserts.append(row)
        elif kind == DELETE:
            deletes.append(tuple(row[i] for i in target.key_positions))
    return upserts, deletes, inserts


def _python_values(column) -> list:
    """A column's values for psycopg: timestamps as naive UTC wall-clock times."""
    import pyarrow as pa

    values = column.to_pylist()
    if pa.types.is_timestamp(column.type) and column.type.tz is not None:
        return [v.replace(tzinfo=None) if v is not None else None for v in values]
    return values


# -- streaming ------------------------------------------------------------------------------


@dataclass(frozen=True)
class JdbcMicroBatch:
    """foreachBatch for a jdbc sink: each micro-batch exactly once (picklable)."""

    table: TableDef
    checkpoint: str  # the job's Spark checkpoint directory, inside its state directory
    query: str = ""  # the streaming query's name, under which its rows are counted

    def checked(self, columns: list[str]) -> JdbcMicroBatch:
        """This, once the PostgreSQL table is found fit (before the stream starts, so that a
        missing table, column or key index is one clear error)."""
        resolve_target(self.table, [c for c in columns if c != ROWKIND_COLUMN])
        return self

    def __call__(self, frame, batch_id: int) -> None:
        from streamsql.runtime.sink_counts import committed

        counts = write_changelog_batch(frame, self.table, self.job_key(), batch_id)
        if counts["written"]:
            committed(self.query, counts["rows"])

    def job_key(self) -> str:
        """The job's state directory name, and its checkpoint's query id (kept across restarts,
        new when the checkpoint is deleted and the job starts afresh)."""
        key = Path(self.checkpoint).parent.name
        try:
            query_id = json.loads((Path(self.checkpoint) / "metadata").read_text().splitlines()[0])["id"]
        except (OSError, ValueError, KeyError, IndexError):
            return key
        return f"{key}/{query_id}"
