"""What a Python UDF's failure says: its name, the exception, and the row it failed on.

This module runs inside Spark's Python workers, shipped there by value (it imports nothing
from streamsql, which a cluster's workers need not have). A UDF is wrapped so that an
exception it raises is re-raised as a ``RuntimeError`` whose message is ``MARK`` followed by
one line of JSON: the function's SQL name, the exception's type and message, and the call's
arguments (a row's values) or, for a vectorized UDF, the batch's size; then the function's
own traceback (for --verbose). Spark carries the text to the driver inside its error,
where ``runtime.failures`` finds the mark.
"""

from __future__ import annotations

import functools
import json
import traceback

MARK = "streamsql-udf-failed:"
_MAX_VALUE_CHARS = 200


def reporting_failures(function, name: str, vectorized: bool):
    """``function``, raising an error that carries ``MARK`` and the call's details."""

    def call(*args):
        try:
            return function(*args)
        except Exception as error:
            if MARK in str(error):  # (reported already, by an aggregate function's row)
                raise
            failed(name, error, None if vectorized else args, len(args[0]) if vectorized and args else 0)

    return functools.update_wrapper(call, function)


def failed(name: str, error: Exception, args, rows: int = 0, group: int | None = None):
    """Raise the error that carries ``MARK``: the function, the exception, the call's
    arguments (None: a vectorised call of ``rows`` rows, or an aggregate function's value
    over ``group`` rows)."""
    details = {"function": name, "type": type(error).__name__, "message": str(error)}
    if group is not None:
        details["group"] = group
    elif args is None:
        details["rows"] = rows
    else:
        details["args"] = ", ".join(_short(repr(value)) for value in args)
    # Spark's worker shows only the last exception of a chain: carry the user's trace along.
    trace = "".join(traceback.format_exception(type(error), error, error.__traceback__.tb_next))
    raise RuntimeError(f"{MARK}{json.dumps(details)}\nThe function's traceback:\n{trace}") from None


def opened(instance, function, context):
    """``function`` (an instance's ``eval``), the instance's ``open(context)`` run before its
    first call in each worker (PyFlink's ScalarFunction/TableFunction life cycle)."""
    state = []

    def call(*args):
        if not state:
            instance.open(context)
            state.append(True)
        return function(*args)

    return functools.update_wrapper(call, function)


def as_rows(function, width: int):
    """A table function as a scalar one: the list of the rows it yields (or returns), each a
    tuple of ``width`` values; a one-column function may yield bare values. None: no rows."""

    def call(*args):
        produced = function(*args)
        if produced is None:
            return []
        if width == 1:
            return [(row[0] if _is_row(row) and len(row) == 1 else row,) for row in produced]
        rows = []
        for row in produced:
            if not (_is_row(row) or isinstance(row, list)) or len(row) != width:
                raise TypeError(f"a row of {width} values expected, got {row!r}")
            rows.append(tuple(row))
        return rows

    return functools.update_wrapper(call, function)


_KINDS = {"BIGINT": "int", "INT": "int", "SMALLINT": "int", "TINYINT": "int", "DOUBLE": "float", "FLOAT": "float",
          "BOOLEAN": "bool", "STRING": "str", "VARCHAR": "str", "CHAR": "str"}


def result_check(type_sql: str):
    """A check of a Python function's value against its declared result type (a Flink or
    Spark type's SQL): a TypeError naming both where Arrow would fail without saying which
    function gave what (numbers, booleans and strings are checked; NULL always passes)."""
    kind = _KINDS.get(type_sql.split("(")[0].strip().upper())

    def check(value):
        if value is None or kind is None:
            return value
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # a numpy scalar
            value = value.item()
        fits = {"int": isinstance(value, int) and not isinstance(value, bool),
                "float": isinstance(value, (int, float)) and not isinstance(value, bool),
                "bool": isinstance(value, bool), "str": isinstance(value, str)}[kind]
        if not fits:
            raise TypeError(f"it returned {value!r} ({type(value).__name__}) for its {type_sql} result")
        return value

    return check


def aggregated(instance, function, vectorized: bool, no_arguments: str, name: str = "", check=None):
    """An aggregate function as a scalar one over the list of its rows (each a struct of the
    call's arguments, as spark.dialect collects them; a call of no arguments: one field named
    ``no_arguments``): an AggregateFunction folds them into a
    fresh accumulator, then gives ``get_value``; a pandas one gets a Series per argument."""

    def call(rows):
        rows = list(rows) if rows is not None else []
        none = bool(rows) and list(getattr(rows[0], "__fields__", None) or ()) == [no_arguments]
        rows = [() if none else tuple(row.values() if isinstance(row, dict) else row) for row in rows]
        if vectorized:
            import pandas as pd

            width = len(rows[0]) if rows else _parameters(function)
            try:
                value = function(*[pd.Series([row[j] for row in rows]) for j in range(width)])
                return check(value) if check else value
            except Exception as error:
                failed(name, error, None, group=len(rows))
        accumulator = instance.create_accumulator()
        for row in rows:
            try:
                instance.accumulate(accumulator, *row)
            except Exception as error:  # the row it failed on, not the group's
                failed(name, error, row)
        try:
            value = instance.get_value(accumulator)
            return check(value) if check else value
        except Exception as error:
            failed(name, error, None, group=len(rows))

    return functools.update_wrapper(call, function)


def _parameters(function) -> int:
    import inspect

    try:
        return len(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return 0


def _is_row(value) -> bool:
    """A tuple, or a Row (pyflink.common's, PyFlink's own or streamsql's: not a tuple)."""
    return isinstance(value, tuple) or type(value).__name__ == "Row"


def _short(text: str) -> str:
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 3] + "..."


def parse(text: str) -> dict | None:
    """The details of the first UDF failure marked in an error text, or None."""
    at = text.find(MARK)
    if at < 0:
        return None
    try:
        details, _ = json.JSONDecoder().raw_decode(text, at + len(MARK))
    except ValueError:
        return None
    return details if isinstance(details, dict) and "function" in details else None
