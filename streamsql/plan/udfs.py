"""Finding Python UDFs and their result types, before Spark starts.

`CREATE FUNCTION f AS 'module.function' LANGUAGE PYTHON` names a function in a module
found next to the script or on PYTHONPATH. A scalar function's result type comes from
``@streamsql.plan.udfs.udf(result_type='INT')``, from the return annotation, or from
PyFlink's ``@udf(result_type=DataTypes.INT())``; a table function is PyFlink's
``@udtf(result_types=[...])`` (its rows: an ARRAY of ROWs here, which LATERAL TABLE
unnests); an aggregate function is PyFlink's ``udaf``: an ``AggregateFunction`` object
(``create_accumulator``, ``accumulate``, ``retract``, ``get_value``) or, with
``func_type='pandas'``, a function of pandas Series returning one value. A module written for PyFlink loads unchanged without PyFlink (streamsql.pyflink).
"""

from __future__ import annotations

import datetime
import decimal
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.objects import FunctionDef
from streamsql.plan.types import build_type
from streamsql.plan.udf_types import row_fields, type_sql

_ANNOTATION_TYPES = {
    int: "BIGINT",
    float: "DOUBLE",
    str: "STRING",
    bool: "BOOLEAN",
    bytes: "BYTES",
    decimal.Decimal: "DECIMAL(38, 18)",
    datetime.datetime: "TIMESTAMP(6)",
    datetime.date: "DATE",
}


@dataclass
class PythonFunction:
    """A loaded UDF: the callable, its Flink result type and whether it takes pandas Series.
    A table function (``table``) returns an ARRAY of ROWs, one per row it yields; ``instance``
    is the ScalarFunction or TableFunction object whose ``eval`` is ``function`` (its ``open``
    runs once per worker). An aggregate function (``aggregate``): ``instance`` is its
    AggregateFunction object and ``function`` its ``accumulate``; vectorised, ``function``
    takes a pandas Series per argument and returns the value."""

    name: str
    function: Callable
    result_type: exp.DataType
    vectorized: bool
    table: bool = False
    instance: object = None
    aggregate: bool = False

    def __deepcopy__(self, memo) -> "PythonFunction":
        return self  # one loaded function, however often the calls naming it are copied

    @property
    def retracts(self) -> bool:
        """Whether an aggregate function takes rows back (its class defines ``retract``; a
        pandas one's rows are kept, and taken out)."""
        return self.vectorized or self._defines("retract")

    @property
    def merges(self) -> bool:
        """Whether an aggregate function's accumulators combine (``merge``; a pandas one's do)."""
        return self.vectorized or self._defines("merge")

    def _defines(self, method: str) -> bool:
        """Whether the instance's class, not PyFlink's base classes, defines ``method``."""
        owner = next((c for c in type(self.instance).__mro__ if method in vars(c)), None)
        return owner is not None and not owner.__module__.startswith(("pyflink.", "streamsql.pyflink."))


def udf(result_type: str | None = None, vectorized: bool = False) -> Callable:
    """Decorator declaring a UDF's Flink result type; vectorized UDFs take and return pandas Series."""

    def mark(function: Callable) -> Callable:
        function.__streamsql_result_type__ = result_type
        function.__streamsql_vectorized__ = vectorized
        return function

    return mark


def argument_error(function: PythonFunction, count: int) -> str | None:
    """Why ``function`` cannot be called with ``count`` arguments (from its Python signature),
    or None (it can, or its signature cannot be read)."""
    import inspect

    try:
        signature = inspect.signature(function.function)
    except (TypeError, ValueError):
        return None
    accumulator = 1 if function.aggregate and not function.vectorized else 0  # accumulate(acc, *args)
    try:
        signature.bind(*range(count + accumulator))
    except TypeError:
        return (f"Function {function.name} cannot take {count} argument{'s' if count != 1 else ''}: its Python"
                f" function is {getattr(function.function, '__name__', function.name)}{signature}")
    return None


NO_ARGUMENTS = "__none"  # the one field of each row an aggregate function of no arguments folds (spark.dialect)


def udf_spark_name(name: str) -> str:
    """The name a UDF is registered under in Spark beside its own (spark.dialect calls it by
    this one: a Spark built-in of the same name would win)."""
    return f"streamsql_udf_{name}"


def add_search_path(directory: str | Path) -> None:
    """Let UDF modules next to a script be found (the script's folder goes first)."""
    directory = str(Path(directory).resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)


def load_function(definition: FunctionDef) -> PythonFunction:
    from streamsql.pyflink import install

    install()  # a module written for PyFlink imports pyflink.table.udf
    module_name, _, attribute = definition.identifier.rpartition(".")
    name = definition.name.name
    if not module_name:
        raise ValidationError(f"Function {name}: '{definition.identifier}' must be 'module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValidationError(
            f"Function {name}: cannot import module '{module_name}' ({error}); put it next to the"
            " script or on PYTHONPATH"
        ) from None
    function = getattr(module, attribute, None)
    if hasattr(function, "_func") and hasattr(function, "_func_type"):  # PyFlink's udf/udtf/udaf (or ours)
        return _pyflink_function(name, function)
    if not callable(function):
        raise ValidationError(f"Function {name}: module '{module_name}' has no function '{attribute}'")
    return PythonFunction(name, function, _result_type(name, function), getattr(function, "__streamsql_vectorized__", False))


def _pyflink_function(name: str, wrapper) -> PythonFunction:
    """A function PyFlink's decorators made: scalar (``_result_type``), table
    (``_result_types``), aggregate (``_accumulator_type``)."""
    func = wrapper._func
    if hasattr(wrapper, "_accumulator_type"):
        return _aggregate_function(name, wrapper)
    instance = func if hasattr(func, "eval") else None  # a ScalarFunction or TableFunction object
    call = instance.eval if instance is not None else func
    try:
        if hasattr(wrapper, "_result_types"):
            return PythonFunction(name, call, _rows_type(name, wrapper._result_types), False, True, instance)
        if getattr(wrapper, "_result_type", None) is None:
            raise ValidationError(f"Function {name}: its @udf declares no result_type")
        result = build_type(type_sql(wrapper._result_type))
    except (TypeError, ValueError) as error:
        raise ValidationError(f"Function {name}: {error}") from None
    return PythonFunction(name, call, result, wrapper._func_type == "pandas", False, instance)


def _aggregate_function(name: str, wrapper) -> PythonFunction:
    """A udaf: an AggregateFunction object with its methods (general), or a function of
    pandas Series (``func_type='pandas'``); its result type declared or ``get_result_type()``."""
    func, vectorized = wrapper._func, wrapper._func_type == "pandas"
    if vectorized:
        instance, call = None, func
    else:
        missing = [m for m in ("create_accumulator", "accumulate", "get_value") if not callable(getattr(func, m, None))]
        if missing:
            raise ValidationError(f"Function {name}: a Python aggregate function (udaf) is an AggregateFunction with"
                                  f" {', '.join(missing)} (or func_type='pandas')")
        instance, call = func, func.accumulate
    declared = wrapper._result_type
    if declared is None and callable(getattr(func, "get_result_type", None)):
        declared = func.get_result_type()
    if declared is None:
        raise ValidationError(f"Function {name}: its @udaf declares no result_type")
    try:
        result = build_type(type_sql(declared))
    except (TypeError, ValueError) as error:
        raise ValidationError(f"Function {name}: {error}") from None
    return PythonFunction(name, call, result, vectorized, False, instance, aggregate=True)


def _rows_type(name: str, declared) -> exp.DataType:
    """A table function's rows as an ARRAY of ROWs: its result types as columns f0, f1, ...
    (PyFlink's names: a DataTypes.ROW's too, whose field names PyFlink drops), or the fields of
    a ROW written as text ('ROW<a INT, b STRING>')."""
    if declared is None:
        raise ValidationError(f"Function {name}: its @udtf declares no result_types")
    row = row_fields(declared)
    if row is not None:
        declared = [t for _, t in row]
    fields = None
    if isinstance(declared, str):  # a ROW written out keeps its names
        row = build_type(declared)
        if row.is_type(exp.DType.STRUCT):
            fields = [(f.name, f.args["kind"].sql(dialect="flink")) for f in row.expressions]
    if fields is None:
        types = list(declared) if isinstance(declared, (list, tuple)) else [declared]
        fields = [(f"f{i}", type_sql(t)) for i, t in enumerate(types)]
    return build_type("ARRAY<ROW<" + ", ".join(f"`{n}` {t}" for n, t in fields) + ">>")


def _result_type(name: str, function: Callable) -> exp.DataType:
    declared = getattr(function, "__streamsql_result_type__", None)
    if declared:
        return build_type(declared)
    annotation = getattr(function, "__annotations__", {}).get("return")
    if isinstance(annotation, str):
        annotation = {t.__name__: t for t in _ANNOTATION_TYPES}.get(annotation, annotation)
    if annotation in _ANNOTATION_TYPES:
        return build_type(_ANNOTATION_TYPES[annotation])
    raise ValidationError(
        f"Function {name}: cannot tell its result type; annotate the return type (-> int) or"
        " decorate it with @streamsql.udf(result_type='BIGINT')"
    )
