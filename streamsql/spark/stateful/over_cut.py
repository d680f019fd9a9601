"""Cutting an OVER out of a query (spark.stateful.chain): ``OverStage``'s input SQL (the
columns the projections use, the partition keys and the calls' arguments), the
OverAggregate (``over``), and output SQL (the projections, each call read from its column).
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.dialect.flink import PYTHON_FUNCTION
from streamsql.dialect.functions import PythonAggregate
from streamsql.spark.stateful.specs import PYTHON
from streamsql.spark.stateful.stages import OVERED, OverStage, Unsupported, same_form

TEMPORAL_SORT = "temporal_sort"  # meta of the OVER window limit_cut.sorted_by_time writes
OVER_FUNCTIONS = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX",
                  exp.StddevPop: "STDDEV_POP", exp.StddevSamp: "STDDEV_SAMP", exp.Stddev: "STDDEV_SAMP",
                  exp.VariancePop: "VAR_POP", exp.Variance: "VAR_SAMP"}


def cut_over(compiler, query: exp.Select, inputs: list) -> OverStage:
    """Flink's streaming OVER: insert-only input (``inputs``: the stages the SELECT reads,
    none), one window per SELECT, ordered by one time attribute ascending, a frame ending at
    the current row."""
    from streamsql.plan.aggregate_operators import OverAggregate
    from streamsql.plan.operators import walk

    node = next((n for n in walk(compiler.builder.select(query)) if isinstance(n, OverAggregate)), None)
    if node is None or any(query.args.get(k) for k in ("distinct", "order", "limit", "offset", "qualify")):
        raise Unsupported()
    if inputs:
        raise Unsupported()  # Flink's OverAggregate takes insert-only input
    named = {w.this.name: w for w in query.args.get("windows") or []}
    calls = [w for w in query.find_all(exp.Window) if w.args.get("over") and w.find_ancestor(exp.Select) is query]
    in_projections = {id(n) for p in query.expressions for n in p.walk()}
    if not calls or any(id(c) not in in_projections for c in calls):
        raise Unsupported()  # an OVER call outside the SELECT list
    windows = [_definition(c, named) for c in calls]
    if len({_window_key(w) for w in windows}) != 1:
        raise Unsupported()  # Flink: all aggregates must be computed on the same window
    window = windows[0]
    order = window.args.get("order")
    if order is None or order.expressions[0].args.get("desc"):
        raise Unsupported()
    time_column = order.expressions[0].this
    attribute = _time_attribute(node, time_column)
    if attribute is None:
        raise Unsupported()
    unit, preceding = _frame(window.args.get("spec"))
    if len(order.expressions) > 1 and not window.meta.get(TEMPORAL_SORT):
        raise Unsupported()  # further keys only order a TemporalSort's rows of equal time

    names: dict[str, str] = {}
    selects: list[exp.Expression] = []

    def column_of(expression: exp.Expression, prefix: str) -> str:
        key = same_form(expression)
        if key not in names:
            names[key] = f"{prefix}{len(selects)}"
            selects.append(exp.alias_(expression.copy(), names[key]))
        return names[key]

    functions = []
    for j, call in enumerate(calls):
        function, argument, options = _function(call.this, preceding)
        column = None if isinstance(argument, exp.Star) or (function == "COUNT" and argument is None) \
            or function == PYTHON else column_of(argument, "__v")
        if function == PYTHON:
            options["columns"] = [column_of(a, "__v") for a in options.pop("arguments")]
        if options.get("default") is not None:  # a column of its own: the operator casts it
            selects.append(exp.alias_(options["default"].copy(), f"__d{j}"))
            options["default"] = f"__d{j}"
        functions.append((function, column, f"__w{j}", options))
    time_name = column_of(time_column, "__c")
    ties = [(column_of(o.this, "__c"), bool(o.args.get("desc")), _nulls_first(o)) for o in order.expressions[1:]]
    partition = [column_of(p, "__p") for p in window.args.get("partition_by") or []]
    placeholders = set()
    for j, call in enumerate(calls):
        placeholder = exp.column(f"__w{j}", OVERED)
        placeholders.add(id(placeholder))
        call.replace(placeholder)
    for projection in query.expressions:
        for column in list(projection.find_all(exp.Column)):
            if id(column) not in placeholders:
                column.replace(exp.column(column_of(column, "__c"), OVERED))
    inner = query.copy()
    inner.set("expressions", selects)
    inner.set("windows", None)
    output = exp.select(exp.column(ROWKIND_COLUMN, OVERED), *[p.copy() for p in query.expressions])
    output.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(OVERED),
                                                alias=exp.TableAlias(this=exp.to_identifier(OVERED)))))
    return OverStage(input_query=inner, partition=partition, time=time_name, rowtime=attribute == "rowtime",
                     unit=unit, preceding=preceding, calls=functions, output_query=output, ties=ties)


def _nulls_first(ordered: exp.Ordered) -> bool:
    """Flink's NULL order: first ascending, last descending, unless the key says."""
    given = ordered.args.get("nulls_first")
    return bool(given) if given is not None else not ordered.args.get("desc")

def _function(call: exp.Expression, preceding: int | None) -> tuple[str, exp.Expression | None, dict]:
    """An OVER call the operator computes: (function, argument, LAG's offset and default)."""
    from streamsql.dialect.functions import FlinkAggCall
    from streamsql.spark.stateful.specs import VALUE_FUNCTIONS

    if isinstance(call, exp.Lag):  # Flink's streaming LAG keeps no retraction: unbounded frames only
        offset, default = call.args.get("offset"), call.args.get("default")
        if preceding is not None or (offset is not None and not (isinstance(offset, exp.Literal) and offset.is_int)):
            raise Unsupported()
        if isinstance(default, exp.Null):
            default = None
        return "LAG", call.this, {"offset": int(offset.name) if offset is not None else 1, "default": default}
    if isinstance(call, PythonAggregate):
        return PYTHON, None, {"python": call.meta[PYTHON_FUNCTION], "distinct": call.distinct,
                              "arguments": list(call.arguments)}
    listed = _listed(call)
    if listed is not None:
        return listed
    if isinstance(call, FlinkAggCall) and call.name.upper() in VALUE_FUNCTIONS:
        distinct = call.expressions[0] if len(call.expressions) == 1 else None
        if isinstance(distinct, exp.Distinct) and len(distinct.expressions) == 1 \
                and call.name.upper() in ("FIRST_VALUE", "LAST_VALUE"):
            # DISTINCT: each value where it first appears in the frame (python_aggregates.FirstLast)
            from streamsql.spark.stateful.python_aggregates import first_last_function

            return PYTHON, None, {"python": first_last_function(call.name.upper(), call.type), "distinct": True,
                                  "arguments": [distinct.expressions[0]]}
        if len(call.expressions) != 1 or isinstance(call.expressions[0], exp.Distinct):
            raise Unsupported()
        return call.name.upper(), call.expressions[0], {}
    function = OVER_FUNCTIONS.get(type(call))
    if function is None or call.args.get("expressions"):
        raise Unsupported()
    if isinstance(call.this, exp.Distinct):
        return _distinct(function, call)
    return function, call.this, {}


_BITS = {exp.DType.TINYINT: 8, exp.DType.SMALLINT: 16, exp.DType.INT: 32, exp.DType.BIGINT: 64}


def _distinct(function: str, call: exp.Expression) -> tuple:
    """COUNT/SUM/AVG/MIN/MAX/STDDEV_*/VAR_*(DISTINCT x) in an OVER: each frame's distinct values
    folded as a Python aggregate function's are (``python_aggregates.BuiltinOver`` under its
    ``DistinctAggregate``), in Flink's types."""
    from streamsql.plan.udfs import PythonFunction
    from streamsql.spark.stateful.python_aggregates import BuiltinOver

    (argument, *more) = call.this.expressions
    arg_type, result = getattr(argument, "type", None), call.type
    if more or arg_type is None or result is None or exp.DType.UNKNOWN in (arg_type.this, result.this):
        raise Unsupported()
    kind = "int" if arg_type.this in _BITS else "float" if arg_type.this in (exp.DType.FLOAT, exp.DType.DOUBLE) \
        else "object" if arg_type.this == exp.DType.DECIMAL else None
    if kind is None and function not in ("COUNT", "MIN", "MAX"):
        raise Unsupported()
    scale = result.expressions[1].this.name if result.this == exp.DType.DECIMAL and len(result.expressions) > 1 else 0
    folded = BuiltinOver(function, kind, _BITS.get(result.this, 0), int(scale or 0))
    python = PythonFunction(function, folded.accumulate, result, False, instance=folded, aggregate=True)
    return PYTHON, None, {"python": python, "distinct": True, "arguments": [argument]}


def _listed(call: exp.Expression) -> tuple | None:
    """LISTAGG, ARRAY_AGG (IGNORE NULLS) and COLLECT (ARRAY_AGG IGNORE NULLS, an empty array
    for none), DISTINCT or not, in an OVER: folded frame by frame, as a Python aggregate function's calls are
    (``python_aggregates.ListAgg``, ``ArrayAgg``)."""
    from streamsql.dialect.functions import FlinkAggCall
    from streamsql.plan.udfs import PythonFunction
    from streamsql.spark.stateful.python_aggregates import ArrayAgg, ListAgg

    ignore_nulls = isinstance(call, exp.IgnoreNulls)
    inner = call.this if isinstance(call, (exp.IgnoreNulls, exp.RespectNulls)) else call
    if not isinstance(inner, FlinkAggCall) or inner.name.upper() not in ("LISTAGG", "ARRAY_AGG", "COLLECT"):
        return None
    name, arguments = inner.name.upper(), inner.expressions
    distinct = bool(arguments) and isinstance(arguments[0], exp.Distinct)
    if distinct:  # each value once, where it first appears in the frame (a NULL too, for ARRAY_AGG)
        arguments = [*arguments[0].expressions, *arguments[1:]]
    if any(isinstance(a, exp.Distinct) for a in arguments) or not arguments or inner.type is None:
        raise Unsupported()
    if name == "LISTAGG":
        separator = arguments[1] if len(arguments) == 2 else exp.Literal.string(",")
        if len(arguments) > 2 or not (isinstance(separator, exp.Literal) and separator.is_string):
            raise Unsupported()
        folded = ListAgg(separator.this)
    else:
        if len(arguments) != 1:
            raise Unsupported()
        folded = ArrayAgg(ignore_nulls or name == "COLLECT", collect=name == "COLLECT")
    function = PythonFunction(name, folded.accumulate, inner.type, False, instance=folded, aggregate=True)
    return PYTHON, None, {"python": function, "arguments": [arguments[0]], "distinct": distinct}


def _window_key(window: exp.Window) -> tuple:
    parts = [*(window.args.get("partition_by") or []), window.args.get("order"), window.args.get("spec")]
    return tuple(same_form(p) if p is not None else None for p in parts)


def _definition(call: exp.Window, named: dict) -> exp.Window:
    """The window an OVER call uses: its own, or the WINDOW clause's it names."""
    name = call.args.get("alias")
    if name is None:
        return call
    if any(call.args.get(k) for k in ("partition_by", "order", "spec")) or name.name not in named:
        raise Unsupported()
    return named[name.name]


def _time_attribute(node, column: exp.Expression) -> str | None:
    """'rowtime' or 'proctime' when the OVER's ORDER BY is a time attribute of its input."""
    if not isinstance(column, exp.Column):
        return None
    for source in node.inputs:
        for f in source.fields:
            if f.name == column.name and f.time_attribute:
                return f.time_attribute
    return None


def _frame(spec: exp.WindowSpec | None) -> tuple[str, int | None]:
    """(unit, preceding) of a frame ending at the current row; no frame: RANGE UNBOUNDED."""
    from streamsql.errors import ValidationError
    from streamsql.plan.windows import interval_ms

    if spec is None:
        return "RANGE", None
    unit, start, end = (spec.args.get("kind") or "").upper(), spec.args.get("start"), spec.args.get("end")
    if unit not in ("ROWS", "RANGE") or (end is not None and str(end).upper() != "CURRENT ROW"):
        raise Unsupported()
    if str(start).upper() == "UNBOUNDED":
        return unit, None
    if str(start).upper() == "CURRENT ROW":
        return unit, 0
    if (spec.args.get("start_side") or "").upper() != "PRECEDING":
        raise Unsupported()
    if unit == "ROWS" and isinstance(start, exp.Literal) and not start.is_string:
        return unit, int(start.name)
    if unit == "RANGE":
        try:
            return unit, interval_ms(start, "RANGE")
        except ValidationError:
            raise Unsupported() from None
    raise Unsupported()
