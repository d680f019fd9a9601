"""STDDEV_* and VAR_* in an OVER window, in Spark SQL, as Flink computes them.

Flink expands these calls over a window (Calcite's ``AvgVarianceConvertlet``) into sums in
the argument's type, measured on Flink 2.3 (batch and streaming alike):

    VAR_POP(x)  = (SUM(x * x) - SUM(x) * SUM(x) / COUNT(x)) / COUNT(x)
    VAR_SAMP(x) = (SUM(x * x) - SUM(x) * SUM(x) / COUNT(x)) / (COUNT(x) - 1), NULL for one value
    STDDEV_*(x) = POWER(VAR_*(x), 0.5)

then cast to the result type. With DISTINCT each of those calls is DISTINCT over its own
argument, as Flink's expansion keeps the quantifier: ``SUM(DISTINCT x * x)`` sums the
distinct squares, so the values 2 and -2 give one square (measured on Flink 2.3). For an
integer argument every step is integer arithmetic: the squares and sums wrap at the
argument's width (Java's int), the divisions truncate, so ``VAR_SAMP`` of 1 and 2 is 1 (not 0.5 truncated). For a DOUBLE it is that formula in
DOUBLE, with the cancellation it has for values far from zero; a FLOAT's likewise, then
rounded to a FLOAT (Flink rounds every step, its sums too, so the last digit may differ;
the streaming operator computes as this does). (A GROUP BY's STDDEV/VAR in
Flink is computed otherwise, and so is it here: ``dialect._cast_average``.) A DECIMAL keeps
Spark's function, cast to Flink's type; the results agree to its scale (not with DISTINCT:
refused at plan time, ``plan.builtins``).

``stateful.spreads.over_spread`` computes the same from an OVER frame's sums in the
streaming operator.
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.types import INTEGER_TYPES

SPREAD_CALLS = {exp.StddevPop: ("STDDEV", False), exp.StddevSamp: ("STDDEV", True), exp.Stddev: ("STDDEV", True),
                exp.VariancePop: ("VAR", False), exp.Variance: ("VAR", True)}
BITS = {exp.DType.TINYINT: 8, exp.DType.SMALLINT: 16, exp.DType.INT: 32, exp.DType.BIGINT: 64}
FLOATS = (exp.DType.DOUBLE, exp.DType.FLOAT)


def over_spread_sql(gen, window: exp.Window, call: exp.Expression) -> str | None:
    """Flink's expansion of a STDDEV/VAR ``call`` over ``window`` as Spark SQL, or None when
    the call is no such call or its argument is neither an integer nor a DOUBLE/FLOAT."""
    shape = SPREAD_CALLS.get(type(call))
    distinct = isinstance(call.this, exp.Distinct)
    if distinct and len(call.this.expressions) != 1:
        return None
    argument = call.this.expressions[0] if distinct else call.this
    arg_type = getattr(argument, "type", None)
    if shape is None or arg_type is None:
        return None
    kind, sample = shape

    def over(function: exp.Expression) -> str:
        copy = window.copy()
        if not distinct:
            copy.set("this", function)
            return gen.sql(copy)
        # DISTINCT, which Spark's window functions refuse: each call over the frame's set of
        # its own argument's values (COLLECT_SET skips NULLs as DISTINCT does)
        copy.set("this", exp.Anonymous(this="COLLECT_SET", expressions=[function.this.copy()]))
        values = gen.sql(copy)
        if isinstance(function, exp.Count):
            return f"CAST(SIZE({values}) AS BIGINT)"
        wide = "DOUBLE" if arg_type.this in FLOATS else "DECIMAL(38, 0)"
        return f"AGGREGATE({values}, CAST(NULL AS {wide}), (a, v) -> COALESCE(a, 0) + v)"

    count = over(exp.Count(this=argument.copy()))
    if arg_type.this in FLOATS:
        value = exp.Cast(this=argument.copy(), to=exp.DataType.build("DOUBLE"))
        squares, total = over(exp.Sum(this=exp.Mul(this=value, expression=value.copy()))), over(exp.Sum(this=value.copy()))
        denominator = f"NULLIF({count} - 1, 0)" if sample else count
        variance = f"(({squares} - {total} * {total} / {count}) / {denominator})"
        result = f"SQRT({variance})" if kind == "STDDEV" else variance
        return f"CAST({result} AS FLOAT)" if arg_type.this == exp.DType.FLOAT else result
    if arg_type.this not in INTEGER_TYPES:
        return None
    bits = BITS[arg_type.this]
    # In DECIMAL(38, 0), each step wrapped to the argument's width as Java wraps it: a square
    # of a BIGINT fits (< 2**126), and so does a sum of squares wrapped one by one, where
    # Spark's BIGINT arithmetic would stop the query with an overflow error (ANSI mode).
    exact = exp.DataType.build("DECIMAL(38, 0)")
    value = exp.Cast(this=argument.copy(), to=exact)
    squares = wrap_sql(over(exp.Sum(this=_wrapped(exp.Mul(this=value, expression=value.copy()), bits))), bits)
    total = wrap_sql(over(exp.Sum(this=value.copy())), bits)
    average = f"({wrap_sql(f'{total} * {total}', bits)} DIV NULLIF({count}, 0))"
    denominator = f"NULLIF({count} - 1, 0)" if sample else f"NULLIF({count}, 0)"
    variance = f"({wrap_sql(f'{squares} - {average}', 64)} DIV {denominator})"  # a long
    type_sql = gen.sql(arg_type)
    if kind == "VAR":  # Java's narrowing of a long keeps its low bits
        return f"CAST({wrap_sql(variance, bits) if bits < 64 else variance} AS {type_sql})"
    # POWER(long, 0.5), then Java's (int): a negative (wrapped) variance's NaN gives 0. The
    # root stays within the type's range for INT and BIGINT (the variance of wrapped INT
    # sums is below 2**33); a TINYINT or SMALLINT keeps its low bits.
    converted = f"CAST(nanvl(SQRT(CAST({variance} AS DOUBLE)), 0D) AS BIGINT)"
    return f"CAST({wrap_sql(converted, bits) if bits < 32 else converted} AS {type_sql})"


def _wrapped(e: exp.Expression, bits: int) -> exp.Expression:
    """``wrap_sql`` as an expression, to sum."""
    half, full = exp.Literal.number(2 ** (bits - 1)), exp.Literal.number(2 ** bits)
    pmod = exp.Anonymous(this="PMOD", expressions=[exp.Add(this=e, expression=half), full])
    return exp.Paren(this=exp.Sub(this=pmod, expression=half.copy()))


def wrap_sql(sql: str, bits: int) -> str:
    """An integer expression (DECIMAL(38, 0) or BIGINT) wrapped to a ``bits``-wide two's
    complement integer, as Java's arithmetic in that type wraps."""
    half = 2 ** (bits - 1)
    return f"(PMOD({sql} + {half}, {2 * half}) - {half})"
