"""Registering Python UDFs with Spark, Arrow-batched, their failures reported by name (udf_calls)."""

from __future__ import annotations

import sys

from streamsql.plan.udfs import PythonFunction
from streamsql.spark.dialect import spark_type


def register_udf(spark, function: PythonFunction) -> None:
    """Register under the function's SQL name; the module travels by value to the workers,
    so it need not be importable there (a cluster, or a script's folder, works alike)."""
    from pyspark import cloudpickle
    from pyspark.sql.functions import pandas_udf, udf

    from streamsql.runtime import udf_calls

    module = sys.modules.get(function.function.__module__)
    if module is not None and function.function.__module__ != "__main__":
        cloudpickle.register_pickle_by_value(module)
    cloudpickle.register_pickle_by_value(udf_calls)
    call = udf_calls.reporting_failures(function.function, function.name, function.vectorized)
    return_type = spark_type(function.result_type)
    if function.vectorized:
        wrapped = pandas_udf(call, return_type)
    else:
        wrapped = udf(call, return_type, useArrow=True)
    spark.udf.register(function.name, wrapped)
