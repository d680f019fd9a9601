"""``pyflink.table.udf``: the decorators and base classes of PyFlink's Python UDFs.

Each decorator returns a wrapper carrying what PyFlink's wrappers carry (``_func``,
``_result_type`` or ``_result_types``, ``_func_type``), read by plan.udfs.
"""

from __future__ import annotations

import functools


class FunctionContext:
    """What ``open`` receives: the job's parameters (none are set here)."""

    def get_job_parameter(self, key: str, default_value: str) -> str:
        return default_value


class UserDefinedFunction:
    def open(self, function_context: FunctionContext) -> None:
        pass

    def close(self) -> None:
        pass

    def is_deterministic(self) -> bool:
        return True


class ScalarFunction(UserDefinedFunction):
    """A scalar function as a class: ``eval(self, *args)`` returns the value."""


class TableFunction(UserDefinedFunction):
    """A table function as a class: ``eval(self, *args)`` yields (or returns) its rows."""


class AggregateFunction(UserDefinedFunction):
    """An aggregate function: create_accumulator, accumulate, retract, merge, get_value."""


class _Wrapper:
    def __init__(self, func, input_types, func_type: str, name: str | None):
        if isinstance(func, type):
            raise TypeError(f"Invalid function: a class, not an instance of it: {func.__name__}")
        self._func = func
        self._input_types = input_types
        self._func_type = func_type
        self._name = name or getattr(func, "__name__", type(func).__name__)

    def __call__(self, *args):
        call = self._func.eval if isinstance(self._func, UserDefinedFunction) else self._func
        return call(*args)


class UserDefinedScalarFunctionWrapper(_Wrapper):
    def __init__(self, func, input_types, result_type, func_type="general", name=None):
        if func_type not in ("general", "pandas"):
            raise ValueError(f"The func_type must be one of 'general, pandas', got {func_type}.")
        super().__init__(func, input_types, func_type, name)
        self._result_type = result_type


class UserDefinedTableFunctionWrapper(_Wrapper):
    def __init__(self, func, input_types, result_types, name=None):
        super().__init__(func, input_types, "general", name)
        self._result_types = result_types


class UserDefinedAggregateFunctionWrapper(_Wrapper):
    def __init__(self, func, input_types, result_type, accumulator_type, func_type="general", name=None):
        super().__init__(func, input_types, func_type, name)
        self._result_type = result_type
        self._accumulator_type = accumulator_type


def udf(f=None, input_types=None, result_type=None, deterministic=None, name=None, func_type="general"):
    """A scalar function (``func_type='pandas'``: vectorised, pandas Series in and out)."""
    make = functools.partial(UserDefinedScalarFunctionWrapper, input_types=input_types, result_type=result_type,
                             func_type=func_type, name=name)
    return make if f is None else make(f)


def udtf(f=None, input_types=None, result_types=None, deterministic=None, name=None):
    """A table function: yields rows (a value, a tuple or a Row per row)."""
    make = functools.partial(UserDefinedTableFunctionWrapper, input_types=input_types, result_types=result_types,
                             name=name)
    return make if f is None else make(f)


def udaf(f=None, input_types=None, result_type=None, accumulator_type=None, deterministic=None, name=None,
         func_type="general"):
    """An aggregate function (recorded; plan.udfs says it cannot be run yet)."""
    make = functools.partial(UserDefinedAggregateFunctionWrapper, input_types=input_types, result_type=result_type,
                             accumulator_type=accumulator_type, func_type=func_type, name=name)
    return make if f is None else make(f)
