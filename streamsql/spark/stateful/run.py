"""Running a split GROUP BY (spark.stateful.split) on Spark: input, stateful aggregate, output."""

from __future__ import annotations

import itertools

from sqlglot import exp

from streamsql.spark.stateful.split import AGGREGATED, AggregateSplit

_NAMES = itertools.count(1)


def aggregate_frame(spark, split: AggregateSplit, to_sql):
    """The changelog DataFrame of the split query: ``__rowkind`` first, then its columns."""
    from streamsql.spark.stateful.group_aggregate import group_aggregate
    from streamsql.spark.stateful.specs import AggSpec

    source = spark.sql(to_sql(split.input_query))
    specs = [
        AggSpec(call.function, f"__v{i}" if call.argument is not None else None, call.distinct,
                f"__f{i}" if call.condition is not None else None, f"__a{i}")
        for i, call in enumerate(split.calls)
    ]
    view = f"{AGGREGATED}_{next(_NAMES)}"  # one per query: statement sets run several at once
    group_aggregate(source, split.keys, specs).createOrReplaceTempView(view)
    output = split.output_query.copy()
    output.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(view), alias=exp.TableAlias(
        this=exp.to_identifier(AGGREGATED)))))
    return spark.sql(to_sql(output))
