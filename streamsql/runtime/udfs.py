"""Registering Python UDFs with Spark, Arrow-batched, their failures reported by name (udf_calls)."""

from __future__ import annotations

import site
import sys
from pathlib import Path

from streamsql.plan.udfs import NO_ARGUMENTS, PythonFunction, udf_spark_name
from streamsql.spark.dialect import spark_type


def register_udf(spark, function: PythonFunction) -> None:
    """Register under the function's SQL name; the module travels by value to the workers,
    so it need not be importable there (a cluster, or a script's folder, works alike)."""
    from pyspark import cloudpickle
    from pyspark.sql.functions import pandas_udf, udf

    from streamsql.spark import udf_calls

    module = sys.modules.get(function.function.__module__)
    if module is not None and function.function.__module__ != "__main__":
        for local in _modules_beside(module):
            cloudpickle.register_pickle_by_value(local)
    cloudpickle.register_pickle_by_value(udf_calls)
    call = function.function
    if function.instance is not None and hasattr(function.instance, "open") and not function.aggregate:
        call = udf_calls.opened(function.instance, call, _context())
    if function.table:
        call = udf_calls.as_rows(call, len(function.result_type.expressions[0].expressions))
    if function.aggregate:  # over the list of a group's (or frame's) rows: spark.dialect
        call = udf_calls.aggregated(function.instance, function.function, function.vectorized, NO_ARGUMENTS,
                                    function.name, udf_calls.result_check(spark_type(function.result_type)))
        if function.instance is not None and hasattr(function.instance, "open"):
            call = udf_calls.opened(function.instance, call, _context())
    call = udf_calls.reporting_failures(call, function.name, function.vectorized and not function.aggregate)
    return_type = spark_type(function.result_type)
    if function.vectorized and not function.aggregate:
        wrapped = pandas_udf(call, return_type)
    else:
        wrapped = udf(call, return_type, useArrow=True)
    spark.udf.register(function.name, wrapped)
    spark.udf.register(udf_spark_name(function.name), wrapped)


def _context():
    from streamsql.pyflink.table.udf import FunctionContext  # (streamsql travels to the workers)

    return FunctionContext()


def _modules_beside(module) -> list:
    """The UDF's module and the loaded modules from its own folder (a helper module it
    imports, its package): they travel by value too, as a cluster's workers have no such
    files on their path. Installed packages and streamsql itself never do."""
    if not getattr(module, "__file__", None):
        return [module]
    root = Path(module.__file__).resolve().parent
    for _ in range(module.__name__.count(".") + (Path(module.__file__).name == "__init__.py")):
        root = root.parent  # the folder the top-level package or module was found in
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, *site.getsitepackages())}
    installed.add(Path(__file__).resolve().parent.parent)  # streamsql: shipped as a package (runtime.shipping)
    found = [module]
    for other in list(sys.modules.values()):
        path = getattr(other, "__file__", None)
        if other is module or not path:
            continue
        path = Path(path).resolve()
        if path.is_relative_to(root) and not any(path.is_relative_to(p) for p in installed):
            found.append(other)
    return found
