"""Flink SQL dialect: parsing Flink SQL text into sqlglot expressions."""

from streamsql.dialect.flink import Flink

__all__ = ["Flink"]
