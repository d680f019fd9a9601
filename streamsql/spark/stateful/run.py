"""Running a query's stages (spark.stateful.chain) on Spark: each stage's input views first,
then its input SQL, its stateful operator and its output SQL."""

from __future__ import annotations

import itertools

from sqlglot import exp

from streamsql.spark.stateful.stages import (

    OVERED, RANKED, AggregateStage, CalcStage, JoinStage, OverStage, RankStage, SourceStage, Stage, WindowAggregateStage,

)
from streamsql.spark.stateful.split import AGGREGATED, AggregateSplit

_NAMES = itertools.count(1)


def stage_frame(spark, stage: Stage, to_sql):
    """The changelog DataFrame of a stage: ``__rowkind`` first, then its columns."""
    from streamsql.spark.stateful.rank import rank

    for view, child in stage.inputs:
        if not isinstance(child, SourceStage):  # a changelog source is its table's own view
            stage_frame(spark, child, to_sql).createOrReplaceTempView(view)
    if isinstance(stage, AggregateStage):
        return aggregate_frame(spark, stage.split, to_sql, stage.ttl_ms, stage.update_before)
    if isinstance(stage, WindowAggregateStage):
        return window_frame(spark, stage, to_sql)
    if isinstance(stage, RankStage):
        source = spark.sql(to_sql(stage.input_query))
        ranked = rank(source, stage.data, stage.partition, stage.order, stage.limit, stage.rank_column,
                      stage.later_wins, ttl_ms=stage.ttl_ms, per_batch=stage.per_window, window_end=stage.window_end,
                      rank_type=stage.rank_type, update_before=stage.update_before)
        return _read_through(spark, ranked, RANKED, stage.output_query, to_sql)
    if isinstance(stage, OverStage):
        from streamsql.spark.stateful.over import over

        source = spark.sql(to_sql(stage.input_query))
        overed = over(source, stage.partition, stage.time, stage.rowtime, stage.unit, stage.preceding, stage.calls,
                      ttl_ms=stage.ttl_ms, ties=stage.ties)
        return _read_through(spark, overed, OVERED, stage.output_query, to_sql)
    if isinstance(stage, JoinStage):
        from streamsql.spark.stateful.join import regular_join
        from streamsql.spark.stateful.temporal_join import temporal_join

        left, right = spark.sql(to_sql(stage.left_query)), spark.sql(to_sql(stage.right_query))
        if left.isStreaming != right.isStreaming:  # a stream joined with VALUES or a constant subquery
            from streamsql.spark.stateful.constants import streamed

            left, right = streamed(spark, left), streamed(spark, right)
        if stage.temporal:
            return temporal_join(left, right, stage.keys, stage.join_type)
        if stage.window:
            from streamsql.spark.stateful.window_join import window_join

            return window_join(left, right, stage.keys, stage.join_type, residual=stage.residual,
                               per_batch=stage.per_batch, null_aware=stage.null_aware, fired=stage.fired)
        return regular_join(left, right, stage.keys, stage.join_type, residual=stage.residual,
                            ttl_ms=stage.side_ttls(), null_aware=stage.null_aware, expires=stage.expires)
    if isinstance(stage, CalcStage):
        return spark.sql(to_sql(stage.query))
    raise TypeError(f"not a stage: {stage!r}")


def aggregate_frame(spark, split: AggregateSplit, to_sql, ttl_ms: int | None = None, update_before: bool = True):
    """The changelog DataFrame of a split GROUP BY: ``__rowkind`` first, then its columns."""
    from streamsql.spark.stateful.group_aggregate import group_aggregate

    source = spark.sql(to_sql(split.input_query))
    aggregated = group_aggregate(source, split.keys, _specs(split), ttl_ms=ttl_ms, update_before=update_before)
    return _read_through(spark, aggregated, AGGREGATED, split.output_query, to_sql)


def window_frame(spark, stage: WindowAggregateStage, to_sql):
    """The rows of a window aggregate (insert-only, ``__rowkind`` first)."""
    from streamsql.spark.stateful.window_aggregate import slice_end, sliced_window_aggregate, window_aggregate
    from streamsql.spark.windows import window_sql

    split = stage.split
    for name, window, view in stage.window_views:  # windows over another stage's rows
        spark.sql(window_sql(window, view)).createOrReplaceTempView(name)
    source = spark.sql(to_sql(split.input_query))
    late = not stage.cascaded  # a window operator's rows are never late for the window over them
    if stage.bounds:
        window = {"kind": stage.kind, **stage.parameters}
        keys = [k for k in split.keys if k not in stage.bounds]
        aggregated = sliced_window_aggregate(source, keys, _specs(split), window, stage.time, stage.bounds, split.keys,
                                             proctime=stage.proctime, late=late)
    else:
        ends = slice_end(stage.kind, stage.parameters, stage.time, stage.start_key, stage.end_key)
        aggregated = window_aggregate(source, split.keys, _specs(split), stage.end_key, ends, proctime=stage.proctime,
                                      late=late)
    return _read_through(spark, aggregated, AGGREGATED, split.output_query, to_sql)


def _specs(split: AggregateSplit) -> list:
    from streamsql.spark.stateful.specs import AggSpec

    from streamsql.spark.dialect import spark_type

    return [AggSpec(call.function, f"__v{i}" if call.argument is not None else None, call.distinct,
                    f"__f{i}" if call.condition is not None else None, f"__a{i}", separator=call.separator,
                    ignore_nulls=call.ignore_nulls, columns=tuple(f"__v{i}_{j}" for j in range(len(call.arguments))),
                    python=call.python, output_type=spark_type(call.python.result_type) if call.python else None)
            for i, call in enumerate(split.calls)]


def _read_through(spark, frame, alias: str, output: exp.Select, to_sql):
    """``output`` (which reads ``alias``) over ``frame``, registered under a name of its own
    (statement sets run several queries in one session)."""
    view = f"{alias}_{next(_NAMES)}"
    frame.createOrReplaceTempView(view)
    output = output.copy()
    source = output.args["from_"].this
    output.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(
        this=exp.to_identifier(source.alias_or_name)))))
    return spark.sql(to_sql(output))
