"""Spark SQL as streamsql writes it: sqlglot's Spark dialect plus Flink's semantics.

Flink's TIMESTAMP and TIMESTAMP_LTZ both become Spark's TIMESTAMP in a session whose
time zone is UTC (see runtime.session): wall-clock values are stored as UTC instants.

Flink-only nodes are rewritten here into Spark expressions that behave as Flink's
functions do (NULL where Flink returns NULL, Flink's timestamp types, Flink's integer
arithmetic), so the generated SQL means what the Flink SQL meant.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ErrorLevel

from streamsql.dialect import builtins as B
from streamsql.dialect import functions as F
from streamsql.spark import functions as SF
from streamsql.spark import json_functions as JF
from streamsql.spark import local_time
from streamsql.spark import native_functions as NF
from streamsql.spark import variants
from streamsql.spark.function_support import filters_inside
from streamsql.spark.unnest import lateral_views
from streamsql.spark.over_spreads import BITS, over_spread_sql, wrap_sql
from streamsql.dialect.decimals import exact, precision_scale
from streamsql.dialect.flink import UDF_TYPE
from streamsql.plan.udfs import NO_ARGUMENTS, udf_spark_name
from streamsql.plan.types import INTEGER_TYPES

_TIMESTAMP_TYPES = {exp.DType.TIMESTAMP, exp.DType.TIMESTAMPNTZ, exp.DType.TIMESTAMPLTZ}
_STRING_TYPES = {exp.DType.VARCHAR, exp.DType.CHAR, exp.DType.TEXT, exp.DType.NVARCHAR, exp.DType.NCHAR}


def _regexp_extract(self, e: F.RegexpExtractGroup) -> str:
    group = e.args.get("group") or exp.Literal.number(0)
    extract = exp.Anonymous(this="REGEXP_EXTRACT", expressions=[e.this, e.expression, group])
    matches = exp.RegexpLike(this=e.this, expression=e.expression)
    return self.sql(exp.Case(ifs=[exp.If(this=matches, true=extract)]))


REGEX_SPECIAL = set(".$|()[]{}^?*+\\")


def _split_index(self, e: F.SplitIndex) -> str:
    separator = e.expression
    if isinstance(separator, exp.Literal) and len(separator.this) == 1:
        # One (escaped) character: Java's String.split takes it without compiling a regex.
        char = separator.this
        pattern = exp.Literal.string("\\" + char if char in REGEX_SPECIAL else char)
    elif isinstance(separator, exp.Literal):
        pattern = exp.Literal.string(f"\\Q{separator.this}\\E")
    else:
        pattern = exp.func("CONCAT", exp.Literal.string("\\Q"), separator, exp.Literal.string("\\E"))
    index = e.args["index"]
    parts = exp.Anonymous(this="SPLIT", expressions=[e.this, pattern, exp.Literal.number(-1)])
    element = exp.Anonymous(this="TRY_ELEMENT_AT", expressions=[parts, exp.Add(this=index, expression=exp.Literal.number(1))])
    empty = exp.or_(exp.EQ(this=e.this, expression=exp.Literal.string("")), exp.LT(this=index, expression=exp.Literal.number(0)))
    return self.sql(exp.Case(ifs=[exp.If(this=empty, true=exp.null())], default=element))


_NARROW = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT)  # Spark sums them as BIGINT


def _average_type(e: exp.Expression) -> exp.DataType | None:
    """The type Flink gives AVG, STDDEV_*, VAR_* or SUM when Spark's differs, so the call is
    cast to it: an average of an integer is that integer, truncated; of a FLOAT a FLOAT
    (Spark's is a DOUBLE); of a DECIMAL DECIMAL(38, max(6, s)). A SUM of a TINYINT, SMALLINT
    or INT is that type, wrapped (Spark's is a BIGINT); of a FLOAT a FLOAT."""
    if not isinstance(e, (*B.AVERAGES, exp.Sum)):
        return None
    data_type = e.type
    if data_type is None or data_type.this == exp.DType.UNKNOWN:  # not annotated: the argument's
        arg_type = e.this.type if not isinstance(e.this, exp.Distinct) else None
        data_type = arg_type if arg_type is not None and arg_type.this in INTEGER_TYPES else None
    if isinstance(e, exp.Sum):
        return data_type if data_type is not None and data_type.this in (*_NARROW, exp.DType.FLOAT) else None
    if data_type is None or data_type.this not in (*INTEGER_TYPES, exp.DType.DECIMAL, exp.DType.FLOAT):
        return None
    if isinstance(e, exp.Avg) and data_type.this == exp.DType.DECIMAL:
        return None  # (computed as Flink's by _decimal_average instead: a cast would round twice)
    return data_type


def _decimal_average(self, outer: exp.Expression, e: exp.Expression) -> str | None:
    """An AVG of a DECIMAL(p, s) as Flink computes it: its SUM (DECIMAL(38, s)) divided by its
    COUNT, rounded half up once, to DECIMAL(38, max(6, s)). Spark's own AVG rounds to scale
    s + 4 (four digits where Flink has six for s = 0); Spark types this division
    DECIMAL(38, max(6, s)) and rounds it half up. ``outer`` is the call with its FILTER and
    OVER, each kept on both the SUM and the COUNT. None for any other call, and for an
    argument whose DECIMAL type is not Flink's for sure (``decimals.exact``: columns, CASTs,
    literals and their DECIMAL arithmetic are), left to Spark's AVG."""
    if not isinstance(e, exp.Avg):
        return None
    distinct = isinstance(e.this, exp.Distinct)
    if distinct and len(e.this.expressions) != 1:
        return None
    argument = B.average_argument(e)
    arg_type = getattr(argument, "type", None)
    if arg_type is None or arg_type.this != exp.DType.DECIMAL or not exact(argument):
        return None
    sum_type = exp.DataType.build(f"DECIMAL(38, {B.decimal_scale(arg_type)})")  # Flink's SUM of it
    wide = exp.Cast(this=argument.copy(), to=sum_type)
    total = exp.Sum(this=exp.Distinct(expressions=[wide]) if distinct else wide)
    parts = [self.sql(_in_place_of(outer, e, call)) for call in (total, exp.Count(this=e.this.copy()))]
    return f"({parts[0]} / {parts[1]})"


def _in_place_of(outer: exp.Expression, call: exp.Expression, other: exp.Expression) -> exp.Expression:
    """A copy of ``outer`` (``call``, or its FILTER, or its OVER of either) with ``other`` in
    place of ``call``."""
    if outer is call:
        return other
    copy = outer.copy()
    inner = copy.this if isinstance(outer.this, exp.Filter) and outer.this.this is call else copy
    inner.set("this", other)
    return copy


def _cast_average(self, sql: str, e: exp.Expression) -> str:
    """An average's Spark SQL cast to Flink's type. A STDDEV or VAR (a DOUBLE) is converted
    as Java converts a double: beyond INT's (BIGINT's) range it saturates, and a TINYINT or
    SMALLINT then keeps the low bits of that INT."""
    cast_to = _average_type(e)
    if cast_to is None:
        return sql
    if isinstance(e, exp.Sum) and cast_to.this in _NARROW:  # Java's int arithmetic wraps
        return f"CAST({wrap_sql(sql, BITS[cast_to.this])} AS {self.sql(cast_to)})"
    if not isinstance(e, exp.Avg) and cast_to.this in INTEGER_TYPES:
        bits = BITS[cast_to.this]
        bound = 2 ** (63 if bits == 64 else 31)
        sql = f"CASE WHEN {sql} >= {bound} THEN {bound - 1} ELSE {sql} END"
        if bits < 32:
            sql = wrap_sql(f"CAST({sql} AS INT)", bits)
    return f"CAST({sql} AS {self.sql(cast_to)})"


def _average(name: str):
    def sql(self, e: exp.Expression) -> str:
        if isinstance(e.parent, (exp.Window, exp.Filter)):
            return self.func(name, e.this)
        return _decimal_average(self, e, e) or _cast_average(self, self.func(name, e.this), e)
    return sql


def _sum(self, e: exp.Sum) -> str:
    """SUM as Flink computes it: a DECIMAL(p, s)'s in DECIMAL(38, s) (Spark's would be
    DECIMAL(p + 10, s), and stop the query with an overflow error past it); an integer's or
    a FLOAT's cast back to its type (``_cast_average``)."""
    argument = B.average_argument(e)
    arg_type = getattr(argument, "type", None)
    precision, scale = precision_scale(arg_type) or (None, None)
    if arg_type is not None and arg_type.this == exp.DType.DECIMAL and precision != 38 and exact(argument) \
            and not (isinstance(e.this, exp.Distinct) and len(e.this.expressions) != 1):
        wide = exp.Cast(this=argument.copy(), to=exp.DataType.build(f"DECIMAL(38, {scale})"))
        return self.func("SUM", exp.Distinct(expressions=[wide]) if isinstance(e.this, exp.Distinct) else wide)
    return _average("SUM")(self, e)


def _python_aggregate(self, e: F.PythonAggregate) -> str:
    """A Python aggregate function: Spark collects its rows (a struct of the call's arguments
    per row; DISTINCT: each distinct one once), the function folds them (spark.udf_calls).
    Around a FILTER or OVER the call is applied outside them (``_filter``, ``_window``)."""
    arguments, distinct = e.arguments, e.distinct
    # fields named by position: an argument given twice (f(n, n)) is two fields
    fields = ", ".join(f"'a{j}', {self.sql(a)}" for j, a in enumerate(arguments)) or f"'{NO_ARGUMENTS}', NULL"
    collected = f"{'COLLECT_SET' if distinct else 'COLLECT_LIST'}(NAMED_STRUCT({fields}))"
    if isinstance(e.parent, (exp.Window, exp.Filter)):
        return collected
    return f"{udf_spark_name(e.name)}({collected})"


def _filter(self, e: exp.Filter) -> str:
    """``AGG(..) FILTER (WHERE ..)``: an average's cast goes around the FILTER clause."""
    if isinstance(e.parent, exp.Window):
        return self.filter_sql(e)
    if isinstance(e.this, F.PythonAggregate):
        return f"{udf_spark_name(e.this.name)}({self.filter_sql(e)})"
    if filters_inside(e.this):  # each Spark aggregate of its translation gets the FILTER
        return self.sql(e.this)
    return _decimal_average(self, e, e.this) or _cast_average(self, self.filter_sql(e), e.this)


_DISTINCT_OVER = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)


def _distinct_over(self, e: exp.Window, call: exp.Expression) -> str | None:
    """``COUNT/SUM/AVG/MIN/MAX(DISTINCT x) OVER (..)``, which Spark refuses ("Distinct window
    functions are not supported"), over the frame's set of values (``COLLECT_SET``, which
    skips NULLs as a DISTINCT aggregate does): its size, its sum, their quotient in Flink's
    type (an integer average truncated), or MIN/MAX of the frame (DISTINCT changes nothing)."""
    if not isinstance(call, _DISTINCT_OVER) or not isinstance(call.this, exp.Distinct) \
            or len(call.this.expressions) != 1:
        return None
    argument = call.this.expressions[0]
    if isinstance(call, (exp.Min, exp.Max)):
        return self.sql(_in_place_of(e, call, type(call)(this=argument.copy())))
    values = Spark.Generator.window_sql(self, _in_place_of(e, call, exp.Anonymous(
        this="COLLECT_SET", expressions=[argument.copy()])))
    if isinstance(call, exp.Count):
        return f"CAST(SIZE({values}) AS BIGINT)"
    result_type = call.type if call.type is not None and call.type.this != exp.DType.UNKNOWN else argument.type
    if result_type is None or result_type.this == exp.DType.UNKNOWN:
        return None
    integer = result_type.this in INTEGER_TYPES
    wide = "BIGINT" if integer else ("DOUBLE" if result_type.this in (exp.DType.FLOAT, exp.DType.DOUBLE)
                                     else self.sql(exp.DataType.build(f"DECIMAL(38, {B.decimal_scale(result_type)})"))
                                     if result_type.this == exp.DType.DECIMAL else None)
    if wide is None:
        return None
    total = f"AGGREGATE({values}, CAST(NULL AS {wide}), (a, v) -> COALESCE(a, 0) + CAST(v AS {wide}))"
    if isinstance(call, exp.Avg):
        total = f"({total} DIV SIZE({values}))" if integer else f"({total} / SIZE({values}))"
    if isinstance(call, exp.Sum) and integer and result_type.this in _NARROW:
        total = wrap_sql(total, BITS[result_type.this])
    return f"CAST({total} AS {self.sql(result_type)})"


def _window(self, e: exp.Window) -> str:
    call = e.this.this if isinstance(e.this, exp.Filter) else e.this
    if isinstance(call, F.PythonAggregate):
        return f"{udf_spark_name(call.name)}({Spark.Generator.window_sql(self, e)})"
    collected = SF.over_collected(self, e)
    if collected is not None:
        return collected
    distinct = _distinct_over(self, e, call) if call is e.this else None
    if distinct is not None:
        return distinct
    spread = over_spread_sql(self, e, call) if call is e.this else None
    return spread or _decimal_average(self, e, call) or _cast_average(self, Spark.Generator.window_sql(self, e), call)


def _div(self, e: exp.Div) -> str:
    """Flink divides integers as integers (5 / 2 = 2), Spark as doubles; a FLOAT quotient
    stays a FLOAT (``_float_arithmetic``)."""
    left, right = e.this.type, e.expression.type
    if left is not None and right is not None and left.this in INTEGER_TYPES and right.this in INTEGER_TYPES:
        wider = left if _rank(left) >= _rank(right) else right
        return f"CAST(({self.sql(e, 'this')} DIV {self.sql(e, 'expression')}) AS {self.sql(wider)})"
    dividend, divisor = self.sql(e, "this"), self.sql(e, "expression")
    constant = e.expression.is_number and e.expression.to_py() != 0
    if e.type is not None and e.type.this in (exp.DType.DOUBLE, exp.DType.FLOAT) and not constant:
        return _as_float(e, NF.java_divide(dividend, divisor))  # Flink divides DOUBLE and FLOAT as Java does
    return _as_float(e, f"{dividend} / {divisor}")


_OPERATORS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_NARROW = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT)


def _arithmetic(generate):
    """``+``, ``-`` and ``*``: an INT (SMALLINT, TINYINT) result wraps past its range as Java's
    arithmetic does in Flink's generated code, where Spark's ANSI arithmetic fails the query
    (computed in BIGINT, where it cannot overflow, then wrapped); a FLOAT one stays a FLOAT
    (``_float_arithmetic``). (A BIGINT past 2^63 is still Spark's overflow error.)"""
    floating = _float_arithmetic(generate)

    def sql(self, e: exp.Binary) -> str:
        sides = (e.this.type, e.expression.type)
        if e.type is None or e.type.this not in _NARROW or any(t is None or t.this not in INTEGER_TYPES for t in sides):
            return floating(self, e)
        wide = f"CAST({self.sql(e, 'this')} AS BIGINT) {_OPERATORS[type(e)]} CAST({self.sql(e, 'expression')} AS BIGINT)"
        return f"CAST({wrap_sql(wide, BITS[e.type.this])} AS {self.sql(e.type)})"
    return sql


def _float_arithmetic(generate):
    """``+``, ``-`` and ``*`` typed FLOAT (a FLOAT with an integer), as Flink computes them in
    FLOAT: Spark's ANSI rules widen a FLOAT with an INT to DOUBLE, so the result is cast back
    (computed in DOUBLE from two values a FLOAT holds, it rounds to the FLOAT Java's own
    arithmetic gives)."""
    def sql(self, e: exp.Binary) -> str:
        return _as_float(e, generate(self, e))
    return sql


def _as_float(e: exp.Binary, sql: str) -> str:
    data_type = e.type
    if data_type is None or data_type.this != exp.DType.FLOAT:
        return sql
    if not isinstance(e, exp.Div) and all(getattr(side.type, "this", None) == exp.DType.FLOAT
                                          for side in (e.this, e.expression)):
        return sql  # Spark keeps FLOAT op FLOAT a FLOAT
    return f"CAST(({sql}) AS FLOAT)"


def _rank(data_type: exp.DataType) -> int:
    order = [exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT]
    return order.index(data_type.this)


def _select(self, e: exp.Select) -> str:
    """A SELECT; its UNNESTs as LATERAL VIEWs with Flink's semantics first (``spark.unnest``)."""
    return Spark.Generator.TRANSFORMS[exp.Select](self, lateral_views(e))


def _call_sql(self, e: exp.Anonymous) -> str:
    """A Python UDF's call by the name it is registered under in Spark (its own name would
    lose to a Spark built-in of that name, e.g. SPLIT); another call as written."""
    if e.meta.get(UDF_TYPE) is not None:
        return self.func(udf_spark_name(e.name), *e.expressions)
    return Spark.Generator.anonymous_sql(self, e)


class SparkTarget(Spark):
    """The Spark dialect streamsql generates."""

    class Generator(Spark.Generator):
        TYPE_MAPPING = {
            **Spark.Generator.TYPE_MAPPING,
            # Spark watermarks need TIMESTAMP; with the session time zone pinned to UTC
            # it keeps Flink's wall-clock TIMESTAMP semantics exactly (UTC has no DST).
            exp.DType.TIMESTAMP: "TIMESTAMP",
            exp.DType.TIMESTAMPNTZ: "TIMESTAMP",
            exp.DType.TIMESTAMPLTZ: "TIMESTAMP",
        }
        TRANSFORMS = {
            **Spark.Generator.TRANSFORMS,
            F.RegexpExtractGroup: _regexp_extract,
            F.SplitIndex: _split_index,
            F.FlinkDateFormat: NF.date_format_sql,
            F.Proctime: lambda self, e: "CURRENT_TIMESTAMP()",
            F.FlinkCall: SF.flink_call_sql,
            F.FlinkAggCall: SF.flink_call_sql,
            exp.Anonymous: _call_sql,
            F.PythonAggregate: _python_aggregate,
            exp.Select: _select,
            exp.JSONObject: JF.json_object,
            exp.Extract: NF.extract_sql,
            exp.Substring: NF.substring_sql,
            exp.Floor: NF.rounding_sql("FLOOR"),
            exp.Ceil: NF.rounding_sql("CEIL"),
            exp.Bracket: NF.bracket_sql,
            exp.EQ: lambda self, e: variants.comparison_sql(self, e, Spark.Generator.eq_sql),
            exp.NEQ: lambda self, e: variants.comparison_sql(self, e, Spark.Generator.neq_sql),
            exp.Is: JF.is_sql,
            exp.IgnoreNulls: SF.nulls_sql(ignore=True),
            exp.RespectNulls: SF.nulls_sql(ignore=False),
            exp.Week: NF.week_sql,
            exp.Ln: NF.log_sql,
            exp.Log: NF.log_sql,
            exp.CurrentTime: lambda self, e: SF.no_time(e),
            exp.Interval: NF.interval_sql,
            exp.SimilarTo: NF.similar_to_sql,
            exp.Overlaps: NF.overlaps_sql,
            exp.JSONObjectAgg: JF.json_objectagg_sql,
            exp.Avg: _average("AVG"),
            exp.Sum: _sum,
            exp.StddevPop: _average("STDDEV_POP"),
            exp.StddevSamp: _average("STDDEV_SAMP"),
            exp.Stddev: _average("STDDEV_SAMP"),
            exp.VariancePop: _average("VAR_POP"),
            exp.Variance: _average("VAR_SAMP"),
            exp.Filter: _filter,
            exp.Window: _window,
            exp.Div: _div,
            exp.Add: _arithmetic(Spark.Generator.add_sql),
            exp.Sub: _arithmetic(Spark.Generator.sub_sql),
            exp.Mul: _arithmetic(Spark.Generator.mul_sql),
        }

        def preprocess(self, expression: exp.Expression) -> exp.Expression:
            return super().preprocess(local_time.localize(expression))  # a copy (generate copies it)

        def cast_sql(self, expression: exp.Cast, safe_prefix: str | None = None) -> str:
            return NF.numeric_cast(self, expression) or super().cast_sql(expression, safe_prefix=safe_prefix)

        def values_sql(self, expression: exp.Values, values_as_table: bool = True) -> str:
            return super().values_sql(_rows_cast_alike(expression), values_as_table=values_as_table)

        def datatype_sql(self, expression: exp.DataType) -> str:
            """Spark types carry no timestamp precision and no string length."""
            if expression.this in _TIMESTAMP_TYPES | _STRING_TYPES:
                expression = exp.DataType(this=expression.this)
                if expression.this in _STRING_TYPES:
                    return "STRING"
            return super().datatype_sql(expression)


def _rows_cast_alike(values: exp.Values) -> exp.Values:
    """VALUES whose column holds a CAST to a type with a ROW in it in one row (``CAST(NULL AS
    ROW<x INT, y STRING>)``) and a ROW constructor in another (``ROW(7, 'y')``): every row's
    value cast to that type. Spark names a constructor's fields col1, col2, ... and refuses
    an inline table whose rows' structs differ in their names; Flink's rows share one type."""
    rows = values.expressions
    if len(rows) < 2 or not all(isinstance(r, exp.Tuple) for r in rows):
        return values
    width = len(rows[0].expressions)
    copied = None
    for j in range(width):
        casts = [r.expressions[j].to for r in rows if j < len(r.expressions) and isinstance(r.expressions[j], exp.Cast)
                 and any(d.this == exp.DType.STRUCT for d in r.expressions[j].to.find_all(exp.DataType))]
        if not casts:
            continue
        copied = copied or values.copy()
        for row in copied.expressions:
            value = row.expressions[j] if j < len(row.expressions) else None
            if value is not None and not isinstance(value, exp.Cast):
                value.replace(exp.Cast(this=value.copy(), to=casts[0].copy()))
    return copied or values


def to_spark_sql(node: exp.Expression) -> str:
    """Spark SQL for a planned (qualified, typed) Flink expression. An event-time temporal
    join reads its versions as validity intervals (spark.temporal_joins): a stream never
    gets here with one, it runs on streamsql's temporal join operator."""
    from streamsql.spark.temporal_joins import has_temporal_join, versions_as_intervals

    if isinstance(node, exp.Query) and has_temporal_join(node):
        node = versions_as_intervals(node)
    return node.sql(dialect=SparkTarget, identify=True, unsupported_level=ErrorLevel.RAISE)


def spark_type(data_type: exp.DataType) -> str:
    return to_spark_sql(data_type)


def spark_string(text: str) -> str:
    """``text`` as a Spark SQL string literal (Spark reads a backslash in one as an escape)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
