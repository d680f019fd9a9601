"""Splitting a GROUP BY query around streamsql's stateful GroupAggregate.

``SELECT <exprs over keys and aggregates> FROM ... WHERE ... GROUP BY <keys> HAVING ...``
becomes three parts:

1. the **input**: ``SELECT key AS __k0, ..., argument AS __v0, filter AS __f0, ... FROM ...
   WHERE ...`` — Spark SQL, run natively on the stream;
2. the **aggregate**: ``group_aggregate`` over the input (``spark.stateful.group_aggregate``),
   a changelog of ``__rowkind, __k0.., __a0..``;
3. the **output**: the original projections and HAVING over that changelog, each message
   projected and filtered on its own, as Flink's Calc does over a retract stream (a -U
   whose old row passed HAVING retracts it; a +U whose new row fails it adds nothing).

Only the top-level SELECT is split; the operator plan decides that the rest is native.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.dialect.flink import PYTHON_FUNCTION, Flink
from streamsql.dialect.functions import FlinkAggCall, PythonAggregate
from streamsql.spark.stateful.specs import DISTINCT_ORDERED, INSERT_ONLY, ORDERED, PYTHON

AGGREGATES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Min: "MIN", exp.Max: "MAX", exp.Avg: "AVG",
              exp.StddevPop: "STDDEV_POP", exp.StddevSamp: "STDDEV_SAMP", exp.Stddev: "STDDEV_SAMP",
              exp.VariancePop: "VAR_POP", exp.Variance: "VAR_SAMP"}
AGGREGATED = "__aggregated"  # the temp view the output part reads
STREAMED = (*AGGREGATES.values(), *ORDERED, PYTHON)


@dataclass
class AggregateCall:
    function: str
    argument: exp.Expression | None  # None: COUNT(*)
    distinct: bool
    condition: exp.Expression | None  # FILTER (WHERE ...)
    type: exp.DataType | None
    separator: str = ","  # LISTAGG's (a string literal)
    ignore_nulls: bool = False  # ARRAY_AGG(..) IGNORE NULLS
    json_array: bool = False  # a JSON_ARRAYAGG: LISTAGG of its values' JSON, then in brackets
    collect: bool = False  # a COLLECT: ARRAY_AGG(x) IGNORE NULLS, an empty array for no values
    python: object = None  # a Python aggregate function's (plan.udfs.PythonFunction): function PYTHON
    arguments: tuple = ()  # its arguments (input columns __v{i}_{j})


@dataclass
class AggregateSplit:
    input_query: exp.Select
    keys: list[str]
    calls: list[AggregateCall]
    output_query: exp.Select  # reads AGGREGATED: __rowkind, the keys, the aggregates

    @property
    def aggregate_names(self) -> list[str]:
        return [f"__a{i}" for i in range(len(self.calls))]


def split_group_aggregate(query: exp.Expression) -> AggregateSplit | None:
    """The three parts of a top-level GROUP BY (or global aggregate); None when the shape is
    not one this split handles (the caller then reports the operator as unsupported)."""
    if not isinstance(query, exp.Select) or query.args.get("distinct"):
        return None
    if any(query.args.get(k) for k in ("order", "limit", "offset", "qualify", "windows")):
        return None
    group = query.args.get("group")
    if group is not None and any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup")):
        return None
    keys = list(group.expressions) if group is not None else []
    calls: list[AggregateCall] = []
    call_names: dict[str, str] = {}
    key_names = {key.sql(dialect=Flink): f"__k{i}" for i, key in enumerate(keys)}

    def replace(node: exp.Expression) -> exp.Expression | None:
        aggregate = _aggregate_call(node)
        if aggregate is not None:
            text = node.sql(dialect=Flink)
            if text not in call_names:
                call_names[text] = f"__a{len(calls)}"
                calls.append(aggregate)
            column = _typed(exp.column(call_names[text], AGGREGATED), node)
            if aggregate.collect:  # COLLECT of no values: an empty one, as the bounded COLLECT_LIST
                return _typed(exp.func("COALESCE", column, exp.Array(expressions=[])), node)
            if aggregate.json_array:  # '[' .. ']' around the values' JSON joined, '[]' for none
                return _typed(exp.func("CONCAT", exp.Literal.string("["), exp.func(
                    "COALESCE", column, exp.Literal.string("")), exp.Literal.string("]")), node)
            return column
        if isinstance(node, exp.AggFunc) or isinstance(node, exp.Window):
            raise _Unsupported()
        name = key_names.get(node.sql(dialect=Flink))
        if name is not None:
            return _typed(exp.column(name, AGGREGATED), node)
        return None

    try:
        projections = [_rewrite(p, replace) for p in query.expressions]
        having = query.args.get("having")
        having = _rewrite(having.this, replace) if having is not None else None
    except _Unsupported:
        return None
    if not (calls or keys) or any(c.function not in STREAMED for c in calls):
        return None  # (a GROUP BY without aggregates, SELECT DISTINCT's, keeps its keys' row counts)
    for projection in projections:  # a column left over references the input: not computable after
        if any(c.table != AGGREGATED for c in projection.find_all(exp.Column)):
            return None

    input_query = query.copy()
    for arg in ("group", "having"):
        input_query.set(arg, None)
    selects = [exp.alias_(key.copy(), f"__k{i}") for i, key in enumerate(keys)]
    for i, call in enumerate(calls):
        if call.argument is not None:
            selects.append(exp.alias_(call.argument.copy(), f"__v{i}"))
        for j, argument in enumerate(call.arguments):
            selects.append(exp.alias_(argument.copy(), f"__v{i}_{j}"))
        if call.condition is not None:
            selects.append(exp.alias_(call.condition.copy(), f"__f{i}"))
    if not selects:
        selects = [exp.alias_(exp.Literal.number(0), "__one")]
    input_query.set("expressions", selects)

    output = exp.select(exp.column(ROWKIND_COLUMN, AGGREGATED), *projections).from_(AGGREGATED)
    if having is not None:
        output = output.where(having)
    return AggregateSplit(input_query, [f"__k{i}" for i in range(len(keys))], calls, output)


def unstreamed_call(query: exp.Select) -> str | None:
    """What the GroupAggregate does not compute among a SELECT's aggregate calls (not its
    subqueries', not an OVER's), said by the function's name; None when there is none."""
    for node in query.find_all(exp.AggFunc):
        if isinstance(node.parent, exp.Window) or node.find_ancestor(exp.Select) is not query:
            continue
        try:
            call = _aggregate_call(node.parent if isinstance(node.parent, (exp.IgnoreNulls, exp.RespectNulls))
                                   else node)
        except _Unsupported:
            call = None
        if call is None or call.function not in STREAMED:
            name = node.sql(dialect=Flink).split("(")[0].strip().upper()
            known = name in (*AGGREGATES.values(), *INSERT_ONLY, "JSON_ARRAYAGG", "STDDEV", "VARIANCE")
            return (f"{name} in this form (DISTINCT, or arguments other than a value and a literal) is not"
                    if known else f"{name} is not an aggregate") + " streamsql's GroupAggregate computes over a stream yet"
    return None


def _collect(node: FlinkAggCall, condition: exp.Expression | None) -> AggregateCall:
    """``COLLECT([DISTINCT] x)`` (an ARRAY here where Flink has a MULTISET, as the bounded
    COLLECT_LIST gives it) is ``ARRAY_AGG([DISTINCT] x) IGNORE NULLS``: its values in arrival
    order, retracted ones taken out; an empty array when there are none."""
    arguments = node.expressions
    distinct = len(arguments) == 1 and isinstance(arguments[0], exp.Distinct)
    if distinct:
        arguments = arguments[0].expressions
    if len(arguments) != 1 or isinstance(arguments[0], exp.Distinct):
        raise _Unsupported()
    return AggregateCall("ARRAY_AGG", arguments[0], distinct, condition, node.type, ",", True, collect=True)


def _json_array(node: FlinkAggCall, condition: exp.Expression | None) -> AggregateCall:
    """``JSON_ARRAYAGG(x)`` over inserts is ``LISTAGG(JSON_STRING(x), ',')`` in brackets: its
    values' JSON in arrival order, NULLs left out (ABSENT ON NULL) or written ``null``."""
    from streamsql.dialect.builtins import options
    from streamsql.dialect.functions import FlinkCall

    if len(node.expressions) != 1 or isinstance(node.expressions[0], exp.Distinct):
        raise _Unsupported()
    text = FlinkCall(this="JSON_STRING", expressions=[node.expressions[0].copy()])
    text.type = exp.DataType.build("STRING")
    on_null = options(node).get("null")
    if on_null is not None and on_null.name == "NULL":
        text = exp.func("COALESCE", text, exp.Literal.string("null"))
    return AggregateCall("LISTAGG", text, False, condition, exp.DataType.build("STRING"), ",", json_array=True)


def _json_object(node: exp.JSONObjectAgg, condition: exp.Expression | None) -> AggregateCall:
    """``JSON_OBJECTAGG(KEY k VALUE v)`` keeps each row's key and member, ``k``, NUL, then
    ``"k":v`` as JSON (empty for a NULL value under ABSENT ON NULL): JSON text never holds a
    raw NUL, so the member is what follows the last one (``sequences.json_object``)."""
    from streamsql.dialect.functions import FlinkCall

    if len(node.expressions) != 1 or not isinstance(node.expressions[0], exp.JSONKeyValue):
        raise _Unsupported()
    key, value = node.expressions[0].this, node.expressions[0].expression
    string = exp.DataType.build("STRING")

    def json(x: exp.Expression) -> exp.Expression:
        text = FlinkCall(this="JSON_STRING", expressions=[x.copy()])
        text.type = string
        return text

    absent = (node.args.get("null_handling") or "").upper().startswith("ABSENT")
    value_text = json(value) if absent else exp.func("COALESCE", json(value), exp.Literal.string("null"))
    member = exp.func("CONCAT", json(key), exp.Literal.string(":"), value_text)
    if absent:
        member = exp.func("COALESCE", member, exp.Literal.string(""))
    argument = exp.func("CONCAT", exp.cast(key.copy(), "STRING"), exp.Literal.string("\0"), member)
    argument.type = string
    return AggregateCall("JSON_OBJECTAGG", argument, False, condition, string)


def _typed(column: exp.Expression, original: exp.Expression) -> exp.Expression:
    """The reference keeps the replaced expression's type (integer division needs it)."""
    column.type = original.type
    return column


class _Unsupported(Exception):
    pass


def _rewrite(node: exp.Expression, replace) -> exp.Expression:
    """A copy of ``node`` with aggregates and grouping keys replaced, outermost first."""
    def visit(inner: exp.Expression) -> exp.Expression:
        replaced = replace(inner)
        return replaced if replaced is not None else inner

    return node.copy().transform(visit)


FIRST_LAST = ("FIRST_VALUE", "LAST_VALUE")


def _distinct_first_last(name: str, argument: exp.Expression, condition, data_type) -> AggregateCall:
    """FIRST_VALUE(DISTINCT x) / LAST_VALUE(DISTINCT x): folded as a Python aggregate function
    is (``python_aggregates.FirstLast`` in a ``DistinctAggregate``), each value taken when it
    first appears and given back when its last row is retracted, as Flink's DISTINCT keeps it."""
    from streamsql.spark.stateful.python_aggregates import first_last_function

    return AggregateCall(PYTHON, None, True, condition, data_type, python=first_last_function(name, data_type),
                         arguments=(argument,))


def _aggregate_call(node: exp.Expression) -> AggregateCall | None:
    condition = None
    if isinstance(node, exp.Filter):
        condition = node.expression.this if isinstance(node.expression, exp.Where) else node.expression
        node = node.this
    ignore_nulls = isinstance(node, exp.IgnoreNulls)
    if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)):
        if not (isinstance(node.this, FlinkAggCall) and node.this.name.upper() == "ARRAY_AGG"):
            raise _Unsupported()
        node = node.this
    function = next((name for kind, name in AGGREGATES.items() if type(node) is kind), None)
    if isinstance(node, PythonAggregate):
        return AggregateCall(PYTHON, None, node.distinct, condition, node.type, python=node.meta[PYTHON_FUNCTION],
                             arguments=tuple(node.arguments))
    if isinstance(node, exp.JSONObjectAgg):
        return _json_object(node, condition)
    if function is None and isinstance(node, FlinkAggCall) and node.name.upper() == "COLLECT":
        return _collect(node, condition)
    if function is None and isinstance(node, FlinkAggCall) and node.name.upper() == "JSON_ARRAYAGG":
        return _json_array(node, condition)
    if function is None and isinstance(node, FlinkAggCall) and node.name.upper() in INSERT_ONLY:
        name, arguments = node.name.upper(), node.expressions
        distinct = len(arguments) == 1 and isinstance(arguments[0], exp.Distinct) and name in DISTINCT_ORDERED
        if distinct:  # (LISTAGG(DISTINCT x, ',') parses as one DISTINCT of both)
            arguments = arguments[0].expressions
        separator = arguments[1] if name == "LISTAGG" and len(arguments) == 2 else None
        if separator is not None and not (isinstance(separator, exp.Literal) and separator.is_string):
            raise _Unsupported()
        if name in FIRST_LAST and len(arguments) == 1 and isinstance(arguments[0], exp.Distinct) \
                and len(arguments[0].expressions) == 1:
            return _distinct_first_last(name, arguments[0].expressions[0], condition, node.type)
        if len(arguments) != (1 if separator is None else 2) or isinstance(arguments[0], exp.Distinct):
            raise _Unsupported()
        return AggregateCall(name, arguments[0], distinct, condition, node.type,
                             separator.this if separator is not None else ",", ignore_nulls)
    if function is None:
        if condition is not None:
            raise _Unsupported()
        return None
    argument = node.this
    distinct = isinstance(argument, exp.Distinct)
    if distinct:
        if len(argument.expressions) != 1:
            raise _Unsupported()
        argument = argument.expressions[0]
    if isinstance(argument, exp.Star):
        argument = None
    return AggregateCall(function, argument, distinct, condition, node.type)
