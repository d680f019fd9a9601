"""Stateful operators streamsql runs on Spark's transformWithStateInPandas (Flink's semantics)."""

from streamsql.spark.stateful.specs import AggSpec

__all__ = ["AggSpec"]
