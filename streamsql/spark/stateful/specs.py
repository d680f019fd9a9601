"""What a GroupAggregate computes: one ``AggSpec`` per aggregate call, and their result types.

Result types follow Flink: ``COUNT`` is BIGINT; ``SUM``, ``MIN``, ``MAX`` and ``AVG`` of an
integer, FLOAT or DOUBLE column keep its type (``AVG`` of an integer truncates, as Java's
integer division does; a FLOAT's is computed in DOUBLE, then rounded); ``SUM`` of DECIMAL(p, s) is
DECIMAL(38, s), ``AVG`` of it DECIMAL(38, max(6, s)). ``STDDEV_*`` and ``VAR_*`` are typed
as ``AVG`` (computed in DOUBLE, then cast: an integer result truncates). A caller may
override the type.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import types as T

from streamsql.spark.stateful.spreads import SPREADS  # typed as AVG is

VALUE_FUNCTIONS = ("FIRST_VALUE", "LAST_VALUE")
INSERT_ONLY = (*VALUE_FUNCTIONS, "LISTAGG", "ARRAY_AGG")  # over insert-only input only: in arrival order
# kept as a key's live values (``sequences``) over any input: JSON_OBJECTAGG's members, each
# with its key (a repeated key fails the query, as in Flink)
SEQUENCED = ("JSON_OBJECTAGG",)
ORDERED = (*INSERT_ONLY, *SEQUENCED)  # what a window operator cannot take (its rows come in no order)
DISTINCT_ORDERED = ("LISTAGG", "ARRAY_AGG")  # with DISTINCT: each distinct value once, kept in a sequence
PYTHON = "PYTHON"  # a Python aggregate function (``python``): its accumulator pickled per key
FUNCTIONS = ("COUNT", "SUM", "MIN", "MAX", "AVG", *ORDERED, *SPREADS, PYTHON)
INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class AggSpec:
    """One aggregate call: ``function(column)`` (``column`` None: ``COUNT(*)``), optionally
    ``DISTINCT``, optionally ``FILTER (WHERE filter_column)`` — a boolean column the caller
    computed (NULL counts as false). ``output_type`` is a Spark DDL type (or a Spark DataType),
    None: Flink's."""

    function: str
    column: str | None = None
    distinct: bool = False
    filter_column: str | None = None
    output_name: str | None = None
    output_type: str | None = None
    separator: str = ","  # LISTAGG's
    ignore_nulls: bool = False  # ARRAY_AGG's (it keeps NULLs by default)
    columns: tuple = ()  # a Python aggregate function's argument columns
    python: object = None  # its plan.udfs.PythonFunction (output_type: its result type)

    def __post_init__(self):
        function = self.function.upper()
        object.__setattr__(self, "function", function)
        if function not in FUNCTIONS:
            raise ValueError(f"Unsupported aggregate function {self.function!r} (one of {', '.join(FUNCTIONS)})")
        if (function == PYTHON) != (self.python is not None):
            raise ValueError("a Python aggregate function's call is PYTHON with its function")
        if self.column is None and function != PYTHON and (function != "COUNT" or self.distinct):
            raise ValueError(f"{function}({'DISTINCT ' if self.distinct else ''}*) is not an aggregate call")
        if self.distinct and function in ORDERED and function not in DISTINCT_ORDERED:
            raise ValueError(f"{function}(DISTINCT ..) is not supported")

    @property
    def name(self) -> str:
        if self.output_name:
            return self.output_name
        inner = "*" if self.column is None else ("DISTINCT " if self.distinct else "") + self.column
        return f"{self.function}({inner})"

    def uses_multiset(self, retracting: bool) -> bool:
        """DISTINCT calls, and MIN/MAX over an input that retracts (retracting the current
        extreme needs the next one), keep value → count per key; the others keep running
        sums, counts or (MIN/MAX over insert-only input, as Flink's MaxAggFunction) the extreme."""
        return (self.distinct and self.function not in (*ORDERED, PYTHON)) or \
            (retracting and self.function in ("MIN", "MAX"))


def result_type(spec: AggSpec, input_type: T.DataType | None) -> T.DataType:
    """The Spark type of an aggregate's result."""
    if isinstance(spec.output_type, T.DataType):
        return spec.output_type
    if spec.output_type:
        return T._parse_datatype_string(spec.output_type)
    if spec.function == "COUNT":
        return T.LongType()
    if spec.function in ("LISTAGG", *SEQUENCED):
        return T.StringType()
    if spec.function == "ARRAY_AGG":
        return T.ArrayType(input_type, True)
    assert input_type is not None
    if spec.function in ("MIN", "MAX", *VALUE_FUNCTIONS):
        return input_type
    if isinstance(input_type, INTEGRAL):
        return input_type
    if isinstance(input_type, (T.FloatType, T.DoubleType)):
        return input_type
    if isinstance(input_type, T.DecimalType):
        scale = input_type.scale if spec.function == "SUM" else max(6, input_type.scale)
        return T.DecimalType(38, scale)
    raise ValueError(f"{spec.function} over {input_type.simpleString()} is not supported")


def value_kind(data_type: T.DataType) -> str:
    """How a column is held in pandas: 'int' (nullable Int64), 'float', 'bool', 'object'."""
    if isinstance(data_type, INTEGRAL):
        return "int"
    if isinstance(data_type, (T.FloatType, T.DoubleType)):
        return "float"
    if isinstance(data_type, T.BooleanType):
        return "bool"
    return "object"


def int_bits(data_type: T.DataType) -> int:
    """Width of an integral Spark type (results wrap around at it, as Java's arithmetic does)."""
    return {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}.get(type(data_type), 0)
