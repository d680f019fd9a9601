"""Flink functions whose semantics no generic sqlglot node captures.

Each is its own expression node so that the Spark translation must handle it
explicitly: sqlglot would otherwise map it to a same-named Spark function with
different behaviour (Spark's REGEXP_EXTRACT returns '' where Flink returns NULL).
"""

from __future__ import annotations

from sqlglot import exp


class RegexpExtractGroup(exp.Expression, exp.Func):
    """REGEXP_EXTRACT(str, regex [, group]): NULL when nothing matches (Flink)."""

    arg_types = {"this": True, "expression": True, "group": False}
    _sql_names = ["FLINK_REGEXP_EXTRACT"]


class SplitIndex(exp.Expression, exp.Func):
    """SPLIT_INDEX(str, separator, index): the index-th (0-based) token or NULL."""

    arg_types = {"this": True, "expression": True, "index": True}
    _sql_names = ["SPLIT_INDEX"]


class FlinkDateFormat(exp.Expression, exp.Func):
    """DATE_FORMAT(timestamp|string, java_pattern): formats with a Java pattern."""

    arg_types = {"this": True, "expression": False}
    _sql_names = ["FLINK_DATE_FORMAT"]


class Proctime(exp.Expression, exp.Func):
    """PROCTIME(): the processing-time attribute (wall clock, TIMESTAMP_LTZ(3))."""

    arg_types = {}
    _sql_names = ["PROCTIME"]


class FlinkCall(exp.Expression, exp.Func):
    """A Flink built-in that Spark has no same-meaning function for: ``this`` is its name
    (upper case), ``expressions`` its arguments. streamsql.spark.functions translates it
    by name; the clauses some JSON functions take (RETURNING, ON EMPTY, ...) are kept as
    ``options`` (a Var list, Flink's words) and ``returning``/``default`` expressions."""

    arg_types = {"this": True, "expressions": False, "options": False, "returning": False, "default": False}

    @property
    def name(self) -> str:
        return self.this


class FlinkAggCall(FlinkCall, exp.AggFunc):
    """A Flink aggregate function translated by name (LISTAGG, COLLECT, ...)."""


class PythonAggregate(exp.Expression, exp.AggFunc):
    """A call of a Python aggregate function (PyFlink's ``udaf``): ``this`` is its name,
    ``expressions`` its arguments; plan.planner binds it (its result type in ``meta``)."""

    arg_types = {"this": True, "expressions": False}

    @property
    def name(self) -> str:
        return self.this

    @property
    def distinct(self) -> bool:
        """``f(DISTINCT a, b)``: the arguments parse as one DISTINCT of them."""
        return len(self.expressions) == 1 and isinstance(self.expressions[0], exp.Distinct)

    @property
    def arguments(self) -> list[exp.Expression]:
        """The call's arguments, DISTINCT or not."""
        return self.expressions[0].expressions if self.distinct else self.expressions
