"""Finding Python UDFs and their result types, before Spark starts.

`CREATE FUNCTION f AS 'module.function' LANGUAGE PYTHON` names a function in a module
found next to the script or on PYTHONPATH. Its result type comes from
``@streamsql.udf(result_type='INT')`` or from the return annotation.
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
    """A loaded UDF: the callable, its Flink result type and whether it takes pandas Series."""

    name: str
    function: Callable
    result_type: exp.DataType
    vectorized: bool


def udf(result_type: str | None = None, vectorized: bool = False) -> Callable:
    """Decorator declaring a UDF's Flink result type; vectorized UDFs take and return pandas Series."""

    def mark(function: Callable) -> Callable:
        function.__streamsql_result_type__ = result_type
        function.__streamsql_vectorized__ = vectorized
        return function

    return mark


def add_search_path(directory: str | Path) -> None:
    """Let UDF modules next to a script be found (the script's folder goes first)."""
    directory = str(Path(directory).resolve())
    if directory not in sys.path:
        sys.path.insert(0, directory)


def load_function(definition: FunctionDef) -> PythonFunction:
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
    if not callable(function):
        raise ValidationError(f"Function {name}: module '{module_name}' has no function '{attribute}'")
    return PythonFunction(name, function, _result_type(name, function), getattr(function, "__streamsql_vectorized__", False))


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
