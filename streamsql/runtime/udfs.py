"""Registering Python UDFs with Spark, Arrow-batched."""

from __future__ import annotations

import sys

from streamsql.plan.udfs import PythonFunction
from streamsql.spark.dialect import spark_type


def register_udf(spark, function: PythonFunction) -> None:
    """Register under the function's SQL name; the module travels by value to the workers,
    so it need not be importable there (a cluster, or a script's folder, works alike)."""
    from pyspark import cloudpickle
    from pyspark.sql.functions import pandas_udf, udf

    module = sys.modules.get(function.function.__module__)
    if module is not None and function.function.__module__ != "__main__":
        cloudpickle.register_pickle_by_value(module)
    return_type = spark_type(function.result_type)
    if function.vectorized:
        wrapped = pandas_udf(function.function, return_type)
    else:
        wrapped = udf(function.function, return_type, useArrow=True)
    spark.udf.register(function.name, wrapped)
