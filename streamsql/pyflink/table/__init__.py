"""``pyflink.table``: DataTypes and the UDF decorators."""

from streamsql.pyflink.table.types import DataType, DataTypes
from streamsql.pyflink.table.udf import (AggregateFunction, FunctionContext, ScalarFunction, TableFunction, udaf,
                                         udf, udtf)

__all__ = ["AggregateFunction", "DataType", "DataTypes", "FunctionContext", "ScalarFunction", "TableFunction",
           "udaf", "udf", "udtf"]
