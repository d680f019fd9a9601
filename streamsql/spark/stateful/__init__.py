"""Stateful operators streamsql runs on Spark's transformWithStateInPandas (Flink's semantics)."""

from streamsql.spark.stateful.specs import AggSpec


def group_aggregate(*args, **kwargs):
    """``group_aggregate.group_aggregate``: a streaming GROUP BY as Flink's changelog."""
    from streamsql.spark.stateful.group_aggregate import group_aggregate as build

    return build(*args, **kwargs)


BUCKETS_PER_PARTITION = 1


def default_buckets(frame) -> int:
    """How many buckets an operator hashes its keys into: one per shuffle partition. Each
    bucket is shuffled to a partition of its own (``transport.aligned``), so every task folds
    all of its keys in one call per micro-batch: a call's fixed cost (reading and writing its
    state, the pandas fold) is paid once per task, not once per bucket."""
    return BUCKETS_PER_PARTITION * shuffle_partitions(frame)


def shuffle_partitions(frame) -> int:
    """The shuffle partitions a stateful operator's keys are grouped into (its tasks)."""
    return int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions") or 2)


def ship_by_value(*modules) -> None:
    """Python workers may import another copy of streamsql (or none, on a cluster): an
    operator's processor and its pandas core travel pickled by value."""
    from pyspark import cloudpickle

    from streamsql.spark import udf_calls
    from streamsql.spark.stateful import (agg_values, distinct_pairs, python_aggregates, sequences, spreads,
                                          state_bytes)  # accumulate's

    for module in (*modules, agg_values, spreads, sequences, distinct_pairs, state_bytes, python_aggregates,
                   udf_calls):
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            pass


__all__ = ["AggSpec", "default_buckets", "group_aggregate", "ship_by_value", "shuffle_partitions"]
