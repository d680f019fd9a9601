"""A query as a DataFrame: its sources registered as Spark views (streamed, bounded, looked
up), its UDFs, its window TVFs with their late rows dropped, counted and routed, its other
derived relations, then the query's own Spark SQL, or its stateful stages
(spark.stateful.run). The metrics observed on the way go back with it."""

from __future__ import annotations

from streamsql.plan.changelog_functions import ChangelogRelation
from streamsql.plan.match_recognize import MatchRelation
from streamsql.plan.planner import QueryPlan, spark_name
from streamsql.plan.windows import WindowRelation
from streamsql.runtime.drain import DrainSources
from streamsql.spark import real_time
from streamsql.spark.dialect import to_spark_sql


def query_frame(engine, plan: QueryPlan, streaming: bool, late_writes: list | None = None):
    """The query as a DataFrame over its sources (and the metrics observed on the way).

    Late rows routed to a 'late-rows.table' are written at once, or, when
    ``late_writes`` is given, appended to it as (rows, table) for the caller to commit."""
    from streamsql.runtime.sources import is_bounded, lookup_frame, source_frame
    from streamsql.runtime.udfs import register_udf
    from streamsql.spark.arrival_order import in_arrival_order, reads_in_order
    from streamsql.spark.regular_joins import hide_join_times

    from streamsql.runtime.end_of_input import END_OF_INPUT, ends_input

    spark = engine.spark
    observed: dict = {}
    ends = DrainSources() if streaming and ends_input(engine.settings, plan) else None
    # LISTAGG, FIRST_VALUE, ... streamed on Spark's own aggregate: the files' read order too
    in_order = streaming and engine.stages_of(plan) is None and reads_in_order(plan.query)
    for table in plan.tables:
        if streaming and spark_name(table.name) in plan.lookups:
            lookup_frame(spark, table).createOrReplaceTempView(spark_name(table.name))
            continue
        # Bounded input run as a stream ('execution.bounded-input' = 'stream'): a file a micro-batch,
        # and the end of input as a sentinel (runtime.end_of_input).
        stream_bounded = engine.settings.get("execution.bounded-input") == "stream" and is_bounded(table)
        files = 1 if stream_bounded else 100
        drain = ends if is_bounded(table) else engine.drain
        source_frame(spark, table, streaming, observed, drain, files, in_order,
                     real_time=streaming and real_time.wanted(engine.settings),
                     idle_timeout=engine.settings.get("table.exec.source.idle-timeout")).createOrReplaceTempView(
            spark_name(table.name))
    if ends is not None:
        observed[END_OF_INPUT] = ends
    for function in plan.functions:
        register_udf(spark, function)
    sql_of = to_spark_sql
    if streaming:  # lookup joins into database tables: keyed lookups (runtime.jdbc_lookup)
        from streamsql.runtime.jdbc_lookup import with_lookups

        sql_of = with_lookups(spark, plan, to_spark_sql)
    windows: dict[tuple, str] = {}
    for name, derived in plan.derived.items():
        if isinstance(derived, WindowRelation):
            # The same TVF twice (Nexmark q5) is one relation: its input is read, and its
            # late rows counted and routed, once.
            same = windows.setdefault(_window_identity(derived), name)
            if same != name:
                spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS SELECT * FROM `{same}`")
            else:
                register_window(spark, derived, streaming, observed, late_writes)
        elif isinstance(derived, ChangelogRelation):
            from streamsql.spark.changelog_functions import relation_sql

            spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS {relation_sql(derived, streaming)}")
        elif isinstance(derived, MatchRelation):
            from streamsql.spark.match_recognize import match_frame

            match_frame(spark, derived, streaming).createOrReplaceTempView(name)
        else:
            if streaming:  # Flink's regular joins drop nothing for being late (spark.regular_joins)
                derived = hide_join_times(derived, plan, is_bounded)
            spark.sql(f"CREATE OR REPLACE TEMP VIEW `{name}` AS {sql_of(derived)}")
    query = hide_join_times(plan.query, plan, is_bounded) if streaming else plan.query
    if streaming and plan.windows:
        from streamsql.spark.windows import group_by_window_struct

        query = group_by_window_struct(query, {w.name for w in plan.windows},
                                       {w.name for w in plan.windows if w.kind == "SESSION"})
    stages = engine.stages_of(plan) if streaming else None
    if stages is not None:  # runs on streamsql's stateful operators
        from streamsql.changelog import ROWKIND_COLUMN
        from streamsql.spark.stateful.stages import inserts_only
        from streamsql.spark.stateful.run import stage_frame

        frame = stage_frame(spark, stages, sql_of).toDF(ROWKIND_COLUMN, *[c.name for c in plan.columns])
        if inserts_only(stages):  # an OVER: rows as any append-only query's
            frame = frame.drop(ROWKIND_COLUMN)
        return frame, observed
    if not streaming or in_order:  # LISTAGG, FIRST_VALUE, ... in the rows' read order
        from streamsql.spark.windows import SEQ_COLUMN

        views = {spark_name(t.name) for t in plan.tables} | set(plan.derived)
        query = in_arrival_order(query, lambda name: name in views and SEQ_COLUMN in spark.table(f"`{name}`").columns)
    frame = spark.sql(sql_of(query))
    return frame.toDF(*[c.name for c in plan.columns]), observed


def register_window(spark, window: WindowRelation, streaming: bool, observed: dict, late_writes: list | None) -> None:
    """Register a window TVF's output; drop (and count, and route) late rows first.

    Telling late rows apart needs the source's read order, which a batch read of a
    bounded table has; Spark streaming drops late rows itself.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    from streamsql.plan.windows import watermark_delay_ms
    from streamsql.runtime.sinks import write_batch
    from streamsql.spark.windows import (LATE_COLUMN, SEQ_COLUMN, SPLIT_COLUMN, late_flag_sql, streaming_window_sql,
                                         window_sql)

    source = window.input_name
    input_columns = spark.table(f"`{source}`").columns
    keep_order = SEQ_COLUMN in input_columns
    if streaming:
        spark.sql(streaming_window_sql(window, source, keep_order)).createOrReplaceTempView(window.name)
        return
    if window.late_source is not None:
        delay = watermark_delay_ms(window.late_source)
        flagged = spark.sql(late_flag_sql(window, source, delay, SPLIT_COLUMN in input_columns))
        late = F.col(LATE_COLUMN)
        if window.late_table is not None:
            rows = flagged.filter(late).select(*[F.col(f"`{c.name}`") for c in window.late_source.physical_columns])
            if late_writes is None:
                write_batch(rows, window.late_table, overwrite=False)
            else:
                late_writes.append((rows, window.late_table))
        observation = Observation(f"late_{window.name}")
        flagged = flagged.observe(observation, F.count(F.when(late, 1)).alias("rows"))
        observed[f"late_{window.name}"] = (window, observation)
        source = f"{window.name}_on_time"
        flagged.filter(~late).createOrReplaceTempView(source)
    spark.sql(window_sql(window, source, keep_order)).createOrReplaceTempView(window.name)


def _window_identity(window: WindowRelation) -> tuple:
    """What makes two window TVF applications produce the same rows."""
    return (window.kind, window.input_name, window.time_column, tuple(sorted(window.parameters.items())),
            tuple(window.partition_by), window.proctime, tuple(c.name for c in window.input_columns))
