"""LATERAL TABLE: a Python table function's rows joined to each row that calls it.

A table function (PyFlink's ``@udtf``, plan.udfs) runs here as a UDF returning an ARRAY of
ROWs, one per row it yields; ``LATERAL TABLE(f(args)) [AS t(c1, ...)]`` is planned as
``UNNEST(f(args)) AS t(c1, ...)`` (plan.unnest), which already has Flink's semantics for the
forms Flink allows: a comma or CROSS JOIN, ``JOIN .. ON TRUE`` and ``LEFT JOIN .. ON TRUE``
(a row whose call yields nothing kept, NULL-padded). Without an alias the columns are the
function's own names (f0, f1, ... for a list of result types, a ROW's field names).
"""

from __future__ import annotations

from typing import Callable

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position
from streamsql.plan.udfs import PythonFunction

TABLE_CALL = "table_call"  # the meta key marking an UNNEST planned from LATERAL TABLE


def unnest_table_calls(query: exp.Expression, lookup: Callable[[str], PythonFunction | None]) -> None:
    """Each ``LATERAL TABLE(f(..))`` of ``query`` as UNNEST of f's rows; ``lookup`` finds a
    registered function by name (None: not one, reported where functions are bound)."""
    for lateral in list(query.find_all(exp.Lateral)):
        wrapper = lateral.this
        if not (isinstance(wrapper, exp.Anonymous) and wrapper.name.upper() == "TABLE"):
            continue
        if len(wrapper.expressions) != 1 or not isinstance(wrapper.expressions[0], exp.Func):
            raise ValidationError("LATERAL TABLE takes one call of a table function: LATERAL TABLE(f(...))",
                                  start_position(wrapper))
        call = wrapper.expressions[0]
        if not isinstance(call, exp.Anonymous):  # a built-in: Flink resolves it before a catalog function
            raise ValidationError(f"Function '{_written_name(call)}' cannot be used as a table function",
                                  start_position(call))
        function = lookup(call.name)
        if function is None:
            continue
        if not function.table:
            kind = "an aggregate" if function.aggregate else "a scalar"
            raise ValidationError(f"Function {call.name} is {kind} function: LATERAL TABLE calls a table function"
                                  " (PyFlink's @udtf)", start_position(wrapper))
        names = [n for n, _ in _columns(function)]
        alias = lateral.args.get("alias")
        if alias is None:
            alias = exp.TableAlias(this=exp.to_identifier(call.name))
        if not alias.columns:
            alias.set("columns", [exp.to_identifier(n) for n in names])
        unnest = exp.Unnest(expressions=[call], alias=alias.copy())
        unnest.meta[TABLE_CALL] = True
        lateral.replace(unnest)


def check_scalar_use(call: exp.Anonymous, function: PythonFunction) -> None:
    """A table function is called only in LATERAL TABLE."""
    parent = call.parent
    if function.table and not (isinstance(parent, exp.Unnest) and parent.meta.get(TABLE_CALL)):
        raise ValidationError(f"Function {call.name} is a table function: call it in FROM as "
                              f"LATERAL TABLE({call.name}(...))", start_position(call))


def _written_name(call: exp.Func) -> str:
    name = call.args.get("this")
    return (name if isinstance(name, str) else call.sql_name()).lower()


def _columns(function: PythonFunction) -> list[tuple[str, exp.DataType]]:
    element = function.result_type.expressions[0]
    return [(f.name, f.args.get("kind")) for f in element.expressions]
