"""Stateful operators streamsql runs on Spark's transformWithStateInPandas (Flink's semantics)."""

from streamsql.spark.stateful.specs import AggSpec


def group_aggregate(*args, **kwargs):
    """``group_aggregate.group_aggregate``: a streaming GROUP BY as Flink's changelog."""
    from streamsql.spark.stateful.group_aggregate import group_aggregate as build

    return build(*args, **kwargs)


__all__ = ["AggSpec", "group_aggregate"]
