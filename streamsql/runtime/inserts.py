"""Running an INSERT: as a streaming query, or as one bounded computation, exactly once.

Both ways write a filesystem table through runtime.commits (stage, record, publish):

- **Streaming** (Spark Structured Streaming): each micro-batch is staged and committed
  under its batch id, with Spark's checkpoint (what was read, operator state) in the
  job's state directory; a replayed micro-batch finds its commit record and is skipped.
- **Bounded** (windows or an updating result over bounded input, computed as one batch
  with Flink's end-of-input semantics): the commit record keeps what was consumed (each
  input file's name, size and modification time) and the result committed. A rerun over
  the same input writes nothing; a rerun over more input computes the result again and
  writes only the rows not written before. A row written before that the new input
  changes (a window that fired at the end of the previous input gets more rows) cannot
  be taken back from an append-only file: that is an error, and nothing is written.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from streamsql.errors import ExecutionError, JobStateError, ValidationError
from streamsql.plan.objects import TableDef
from streamsql.plan.planner import InsertStep
from streamsql.runtime.jobstate import BOUNDED, STREAMING, JobState
from streamsql.spark.dialect import spark_type
from streamsql.runtime.execution import streams, trigger


def insert_name(step: InsertStep) -> str:
    """The default name of an INSERT's job (and of its streaming query)."""
    return f"insert-into-{step.table.name.name}"


def job_names(steps: list[InsertStep], pipeline: str | None) -> list[str]:
    """Each INSERT's job name: pipeline.name or insert-into-<table>; repeats get '#2', '#3'."""
    names, seen = [], {}
    for step in steps:
        base = pipeline or insert_name(step)
        target = (base, str(step.table.name))
        seen[target] = seen.get(target, 0) + 1
        names.append(base if seen[target] == 1 else f"{base}#{seen[target]}")
    return names


def state_root(engine) -> Path:
    root = engine.settings.get("execution.checkpointing.dir")
    if root is None:
        base = engine.catalog.directory or Path(tempfile.gettempdir()) / "streamsql"
        return Path(base) / "_checkpoints"
    return Path(root)


def start_insert(engine, step: InsertStep, name: str) -> tuple:
    """Start the INSERT as a streaming query, or run it to its end as a bounded one."""
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.runtime.sinks import start_stream, write_batch

    table = step.table
    if step.overwrite and engine.settings.streaming:
        raise ValidationError(f"INSERT OVERWRITE {table.name.name}: overwriting needs batch mode, as in Flink"
                              " (SET 'execution.runtime-mode' = 'batch')")
    if streams(engine, step):
        state = JobState.of(state_root(engine), name, table, step.fingerprint, STREAMING, read_tables(step))
        root = operator_plan(step, engine.settings, check=False).root  # (planned once: the concerns read it)
        concerns = layout_concerns(engine, step, root)
        state.check(*concerns)
        state.clear_unplanned_checkpoint()
        committer = state.committer() if state.is_file_sink else None
        if committer is not None:
            committer.recover()
        update = concerns[-2]  # its GroupAggregate on Spark's own aggregation, in update mode
        materialize = root.materialize
        with shuffle_partitions(engine.spark, state.started_partitions()):
            query, observed = engine._start_streaming(
                step.plan,
                lambda frame: start_stream(materialized(conform(upserts(frame) if update else frame, step), materialize),
                                           table,
                                           state.checkpoint, trigger(engine.settings, step.plan), name, committer,
                                           "update" if update else "append"),
            )
        state.save()
        return query, observed
    if table.options["connector"] in ("filesystem", "jdbc", "delta", "iceberg") and engine.settings.streaming:
        return None, run_bounded(engine, step, name)
    frame, observed = engine._frame(step.plan, streaming=False)
    materialize = sink_materializer(engine, step) if engine.settings.streaming else None
    write_batch(resolved(conform(frame, step), materialize), table, step.overwrite)
    return None, observed


def sink_materializer(engine, step: InsertStep):
    """The sink upsert materializer the INSERT runs before its sink (plan.sink_materialize), or None."""
    from streamsql.runtime.operator_plan import operator_plan

    return operator_plan(step, engine.settings, check=False).root.materialize


def materialized(frame, materialize):
    """The conformed changes through the sink upsert materializer, when there is one."""
    from streamsql.changelog import ROWKIND_COLUMN
    from streamsql.spark.stateful.sink_materializer import materialize as run

    if materialize is None or ROWKIND_COLUMN not in frame.columns:
        return frame
    return run(frame, materialize)


def resolved(frame, materialize):
    """A bounded query's final rows with one per primary key, as the materializer leaves
    them at the end of input: DO ERROR fails on a key with two rows, DO NOTHING keeps the
    first row of a key, DO DEDUPLICATE the last (in the order the query produced them)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from streamsql.spark.stateful.sink_materializer import CONFLICT

    if materialize is None:
        return frame
    key = [F.col(f"`{c}`") for c in materialize.primary_key]
    if materialize.strategy == "ERROR":
        clash = frame.groupBy(*key).count().where(F.col("count") > 1).limit(1).collect()
        if clash:
            shown = ", ".join(f"{c} = {clash[0][i]!r}" for i, c in enumerate(materialize.primary_key))
            raise ExecutionError(f"{CONFLICT} (INSERT ... ON CONFLICT DO ERROR: two rows with {shown})")
        return frame
    order = F.col("__seq").asc() if materialize.strategy == "NOTHING" else F.col("__seq").desc()
    numbered = frame.withColumn("__seq", F.monotonically_increasing_id()).withColumn(
        "__n", F.row_number().over(Window.partitionBy(*key).orderBy(order)))
    return numbered.where(F.col("__n") == 1).drop("__seq", "__n")


def upserts(frame):
    """Spark's update-mode rows as the changelog an upsert sink takes: each a ``+U`` (the new
    row of its key; a sink keyed by it inserts a key it does not hold)."""
    from pyspark.sql import functions as F

    from streamsql.changelog import ROWKIND_COLUMN, UPDATE_AFTER

    return frame.select(F.lit(UPDATE_AFTER).alias(ROWKIND_COLUMN), "*")


def read_tables(step: InsertStep) -> list[TableDef]:
    """The tables whose rows the job's offsets and state follow: all it reads but the ones
    only looked up (a lookup join's right side is read afresh, and keeps no state)."""
    return step.plan.streamed_tables


def layout_concerns(engine, step: InsertStep, root=None) -> tuple[bool, bool, bool, bool, bool, bool, bool]:
    """What of the INSERT's query an earlier state layout cannot resume (JobState.check):
    whether it has a regular join whose side the watermark retires (the operator reading it
    runs in event time: plan.join_retiring), whether it runs the OVER operator (an OVER
    aggregate, or an ORDER BY a rowtime without LIMIT: Flink's TemporalSort, run as one),
    whether a join with a window aggregate's maximum was ranked instead (plan.argmax_join),
    whether it has an event-time temporal join, and whether a window aggregate of it
    collects LISTAGG, ARRAY_AGG, FIRST_VALUE or LAST_VALUE in read order, and whether its
    GroupAggregate runs on Spark's own aggregation (spark.physical.native_update_aggregate), and
    whether a sink upsert materializer runs before its sink (plan.sink_materialize). ``root``:
    the step's operator plan (runtime.operator_plan), when the caller has it."""
    from streamsql.plan.argmax_join import rewritten
    from streamsql.plan.aggregate_operators import OverAggregate, WindowAggregate
    from streamsql.plan.join_operators import Join, TemporalJoin
    from streamsql.plan.operators import Sort, walk
    from streamsql.runtime.operator_plan import operator_plan
    from streamsql.spark.arrival_order import reads_in_order
    from streamsql.spark.physical import native_update_aggregate

    root = root or operator_plan(step, engine.settings, check=False).root
    nodes = list(walk(root))
    return (any(isinstance(n, Join) and any(n.retires()) for n in nodes),
            any(isinstance(n, OverAggregate) or (isinstance(n, Sort) and n.temporal) for n in nodes),
            rewritten(step.plan.query),
            any(isinstance(n, TemporalJoin) and n.rowtime for n in nodes),
            any(isinstance(n, WindowAggregate) for n in nodes) and reads_in_order(step.plan.query),
            native_update_aggregate(root) is not None,
            root.materialize is not None)


@contextmanager
def shuffle_partitions(spark, partitions: str | None):
    """The session's shuffle partitions set to ``partitions`` (a resumed job's, see
    JobState.started_partitions) while its query is planned and started, then restored."""
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key, None)
    if partitions is None or partitions == before:
        yield
        return
    spark.conf.set(key, partitions)
    try:
        yield
    finally:
        spark.conf.set(key, before) if before is not None else spark.conf.unset(key)


def run_bounded(engine, step: InsertStep, name: str) -> dict:
    """A bounded INSERT into files, exactly once across reruns (see the module docstring)."""
    state = JobState.of(state_root(engine), name, step.table, step.fingerprint, BOUNDED, read_tables(step))
    state.check()
    committer = state.committer()
    committer.recover()
    inputs = consumed_inputs(step.plan.tables)
    last = committer.last()
    if last is not None and last.get("inputs") == inputs:
        engine.log(f"INSERT INTO {step.table.name.name}: no new input since job '{name}' last ran; nothing to write.")
        return {}
    late_writes: list = []
    frame, observed = engine._frame(step.plan, streaming=False, late_writes=late_writes)
    state.save()
    n = last["n"] + 1 if last else 0
    commit_result(engine.spark, resolved(conform(frame, step), sink_materializer(engine, step)), step.table,
                  committer, state.results, n, last, inputs=inputs)
    for rows, late_table in late_writes:
        late = state.committer_for(late_table, "-late")
        late.recover()
        commit_result(engine.spark, rows, late_table, late, state.results, n, late.last(), inputs=inputs)
    return observed


def commit_result(spark, frame, table: TableDef, committer, results: Path, n: int, last: dict | None, **extra) -> None:
    """Commit the difference between the result in ``frame`` and the one the previous commit
    (``last``) recorded: new rows are written; rows that are gone are deleted where the
    table can delete (a jdbc table with a primary key), and an error everywhere else."""
    from pyspark.sql import functions as F

    from streamsql.changelog import DELETE, INSERT, ROWKIND_COLUMN, UPDATE_AFTER
    from streamsql.plan.changelog_checks import accepted_kinds
    from streamsql.runtime.sinks import write_files

    snapshot = results / f"{committer.key}-{n}"
    frame.write.mode("overwrite").parquet(str(snapshot))
    result = spark.read.parquet(str(snapshot))
    added, removed = result, None
    if last is not None and last.get("snapshot"):
        before = spark.read.parquet(last["snapshot"])
        added, removed = result.exceptAll(before), before.exceptAll(result)
    deletes = UPDATE_AFTER in accepted_kinds(table) and table.options["connector"] in ("jdbc", "delta", "iceberg")
    if removed is not None and not deletes:
        changed = removed.limit(3).collect()
        if changed:
            shutil.rmtree(snapshot, ignore_errors=True)
            shown = "; ".join(str(tuple(row)) for row in changed)
            raise JobStateError(
                f"INSERT INTO {table.name.name}: the new input changes rows this job already wrote (e.g. {shown}):"
                " windows that fired at the end of the previous input got more rows, or the result updates."
                " An append-only table cannot take rows back, so nothing was written. Run the job continuously"
                " ('source.monitor-interval'), where a window is written once the watermark passes it, write"
                " into a table that takes updates (jdbc with a PRIMARY KEY), or start afresh (a new sink, or"
                " delete the job's state and output)."
            )
    if table.options["connector"] in ("jdbc", "delta"):
        from streamsql.runtime.jdbc import write_changelog_batch

        changes = added.select(F.lit(INSERT).alias(ROWKIND_COLUMN), "*")
        if removed is not None and deletes:  # deletes first: a key's last change in the batch wins
            changes = removed.select(F.lit(DELETE).alias(ROWKIND_COLUMN), "*").unionByName(changes)
        if table.options["connector"] == "delta":
            from streamsql.runtime.delta.sink import bounded_app_id, write_delta_batch

            write_delta_batch(changes, table, bounded_app_id(results.parent, committer.key), n)
        else:
            write_changelog_batch(changes, table, job_key=committer.key, batch_id=n)
    elif table.options["connector"] == "iceberg":  # keyed: the changes upserted; else appends (removals refused above)
        from streamsql.runtime.iceberg.sink import bounded_job_id, write_iceberg_batch

        changes = added
        if deletes:
            changes = added.select(F.lit(INSERT).alias(ROWKIND_COLUMN), "*")
            if removed is not None:  # deletes first: a key's last change in the batch wins
                changes = removed.select(F.lit(DELETE).alias(ROWKIND_COLUMN), "*").unionByName(changes)
        write_iceberg_batch(changes, table, bounded_job_id(results.parent, committer.key), n)
    else:
        write_files(added, table, committer.stage(n))
    committer.commit(n, snapshot=str(snapshot), **extra)
    if last is not None and last.get("snapshot") and last["snapshot"] != str(snapshot):
        shutil.rmtree(last["snapshot"], ignore_errors=True)


def consumed_inputs(tables: list[TableDef]) -> dict:
    """What a bounded run reads: each file's name, size and modification time; a generated
    table's options (its rows follow from them)."""
    inputs = {}
    for table in tables:
        if table.options["connector"] == "delta":  # the snapshot it reads
            from streamsql.runtime.delta.table import snapshot_identity

            inputs[str(table.name)] = snapshot_identity(table)
            continue
        if table.options["connector"] == "iceberg":  # the snapshot it reads
            from streamsql.runtime.iceberg.source import snapshot_identity as iceberg_snapshot

            inputs[str(table.name)] = iceberg_snapshot(table)
            continue
        if "path" not in table.options:
            inputs[str(table.name)] = sorted(table.options.items())
            continue
        root = Path(table.options["path"])
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*") if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
        ) if root.exists() else []
        inputs[str(table.name)] = [[str(p), *_size_and_time(p)] for p in files]
    return inputs


def _size_and_time(path: Path) -> list[int]:
    status = os.stat(path)
    return [status.st_size, status.st_mtime_ns]


def conform(frame, step: InsertStep):
    """The query's columns cast to the target's types and named as its columns (a changelog
    keeps its row kinds first)."""
    from streamsql.changelog import ROWKIND_COLUMN

    kinds = [f"`{ROWKIND_COLUMN}`"] if ROWKIND_COLUMN in frame.columns else []
    return frame.selectExpr(*kinds, *[
        (f"CAST(`{source}` AS {spark_type(target.type)})" if source is not None
         else f"CAST(NULL AS {spark_type(target.type)})") + f" AS `{target.name}`"
        for source, target in zip(step.sources, step.table.physical_columns)
    ])
