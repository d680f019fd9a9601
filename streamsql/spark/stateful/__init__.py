"""Stateful operators streamsql runs on Spark's transformWithStateInPandas (Flink's semantics)."""

from streamsql.spark.stateful.specs import AggSpec


def group_aggregate(*args, **kwargs):
    """``group_aggregate.group_aggregate``: a streaming GROUP BY as Flink's changelog."""
    from streamsql.spark.stateful.group_aggregate import group_aggregate as build

    return build(*args, **kwargs)


def ship_by_value(*modules) -> None:
    """Python workers may import another copy of streamsql (or none, on a cluster): an
    operator's processor and its pandas core travel pickled by value."""
    from pyspark import cloudpickle

    for module in modules:
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass


__all__ = ["AggSpec", "group_aggregate", "ship_by_value"]
