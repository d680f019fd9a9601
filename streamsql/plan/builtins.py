"""Flink's built-in functions: what streamsql supports, from ``functions.csv``.

``functions.csv`` lists every function on Flink's "System (Built-in) Functions" page with
its category, status (supported / differs / not supported), an example call, how it
differs or why it is not supported, and the test that covers it. The planner uses it to
name an unsupported built-in at plan time, instead of letting Spark fail later.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from sqlglot import exp

from streamsql.dialect import functions as F
from streamsql.dialect.functions import FlinkCall
from streamsql.errors import StreamsqlError, ValidationError
from streamsql.plan.function_types import check_function_types
from streamsql.plan.positions import start_position

COVERAGE = Path(__file__).with_name("functions.csv")
STATUSES = ("supported", "differs", "not supported")
# Nodes whose translation refuses some forms (an unsupported unit, clause or pattern): the
# planner translates each once, so the refusal comes at plan time, with its position.
_CHECKED_NODES = (FlinkCall, exp.Bracket, exp.SimilarTo, exp.Overlaps, exp.Extract, exp.CurrentTime, F.FlinkDateFormat)
# Aggregates of one argument that sqlglot also reads with none (COUNT()) or several (MAX(a, b)).
_ONE_ARGUMENT = (exp.Count, exp.Max, exp.Min, exp.Sum, exp.Avg)


@dataclass(frozen=True)
class Builtin:
    name: str
    category: str
    status: str
    example: str
    notes: str
    test: str


@cache
def coverage() -> dict[str, Builtin]:
    """The coverage list by (upper-case) name."""
    with COVERAGE.open(newline="") as handle:
        return {row["name"].upper(): Builtin(**row) for row in csv.DictReader(handle)}


def unknown_function(call: exp.Anonymous) -> ValidationError:
    """The error for a call that is neither translated nor a registered function."""
    if call.name.upper() == "TABLE" and isinstance(call.parent, exp.Lateral):  # Flink's table function call
        inner = call.expressions[0] if call.expressions else None
        name = inner.name if isinstance(inner, exp.Anonymous) else inner.sql_name() if isinstance(inner, exp.Func) else None
        shown = f"LATERAL TABLE({name}(...))" if name else "LATERAL TABLE(...)"
        return ValidationError(f"{shown}: no table function named '{name}' (register one written with PyFlink's "
                               "@udtf by CREATE FUNCTION ... LANGUAGE PYTHON; to expand an ARRAY or MAP column into "
                               "rows, use CROSS JOIN UNNEST(column) AS t(...))", start_position(call))
    builtin = coverage().get(call.name.upper())
    if builtin is not None and builtin.status == "not supported":
        return ValidationError(f"Built-in function {builtin.name} is not supported: {builtin.notes}", start_position(call))
    return ValidationError(f"No function named '{call.name}' (neither a built-in nor a registered function)",
                           start_position(call))


_SPREADS = {exp.StddevPop: "STDDEV_POP", exp.StddevSamp: "STDDEV_SAMP", exp.Stddev: "STDDEV", exp.VariancePop: "VAR_POP",
            exp.Variance: "VAR_SAMP"}


def _check_over_call(window: exp.Window) -> None:
    """Aggregates an OVER cannot take: the JSON aggregates (Flink's parser refuses OVER after
    them), STDDEV/VAR with DISTINCT of a DECIMAL (Spark has no DISTINCT window aggregate to
    build them on; of other numbers: ``spark.over_spreads``)."""
    call = window.this.this if isinstance(window.this, exp.Filter) else window.this
    if isinstance(call, exp.JSONObjectAgg) or isinstance(call, F.FlinkAggCall) and call.name.upper() == "JSON_ARRAYAGG":
        name = "JSON_OBJECTAGG" if isinstance(call, exp.JSONObjectAgg) else "JSON_ARRAYAGG"
        raise ValidationError(f"{name} cannot be used with OVER (Flink's parser refuses it: \"Incorrect syntax near the"
                              " keyword 'OVER'\"); aggregate it in a GROUP BY", start_position(window))
    if type(call) in _SPREADS and isinstance(call.this, exp.Distinct) and not _spread_distinct(call.this):
        raise ValidationError(f"{_SPREADS[type(call)]}(DISTINCT ..) OVER takes one integer, FLOAT or DOUBLE argument"
                              " (Spark has no DISTINCT window aggregate to compute it of a DECIMAL on)",
                              start_position(window))


def _spread_distinct(distinct: exp.Distinct) -> bool:
    """Whether STDDEV/VAR(DISTINCT x) OVER is one ``spark.over_spreads`` computes: x an integer or
    a FLOAT/DOUBLE (a type not yet known passes: the typed query is checked again)."""
    from streamsql.plan.types import INTEGER_TYPES

    if len(distinct.expressions) != 1:
        return False
    kind = getattr(distinct.expressions[0], "type", None)
    return kind is None or kind.this in (*INTEGER_TYPES, exp.DType.DOUBLE, exp.DType.FLOAT, exp.DType.UNKNOWN)


def check_functions(query: exp.Expression, database: str = "default_database") -> None:
    """Refuse, with the SQL position, built-in calls Flink refuses (argument types) and those
    (or forms of them) Spark cannot run as Flink does. CURRENT_DATABASE() learns ``database``."""
    from streamsql.spark.dialect import to_spark_sql  # sqlglot only: no Spark session is involved

    check_function_types(query)
    for node in query.walk():
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Star):  # row_column.* (t.* is expanded)
            raise ValidationError(f"{node.this.name}.* is not supported: {coverage()['COMPOSITETYPE.*'].notes}",
                                  start_position(node))
        if isinstance(node, _ONE_ARGUMENT) and (node.this is None or node.expressions and not isinstance(node, exp.Count)):
            raise ValidationError(f"Invalid number of arguments to function '{node.sql_name()}'."
                                  " Was expecting 1 arguments", start_position(node))
        if isinstance(node, exp.Filter) and any(isinstance(a, (exp.IgnoreNulls, exp.RespectNulls))
                                                for a in node.this.iter_expressions()):
            raise ValidationError("FILTER must be applied to aggregate function (not one with IGNORE NULLS or"
                                  " RESPECT NULLS)", start_position(node))
        if isinstance(node, exp.Window):
            _check_over_call(node)
        if isinstance(node, FlinkCall) and node.name == "CURRENT_DATABASE":
            node.meta["database"] = database
        if isinstance(node, _CHECKED_NODES) or (isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("to") is not None):
            try:
                to_spark_sql(node)
            except StreamsqlError as error:
                error.position = error.position or start_position(node)
                raise
