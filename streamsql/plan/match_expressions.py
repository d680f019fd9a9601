"""DEFINE conditions and MEASURES of MATCH_RECOGNIZE as Python callables.

The subset: column references (`A.price`, or `price` for the current row / the match's
last row), literals, intervals, arithmetic, comparisons, AND/OR/NOT (SQL's three-valued
logic), IS [NOT] NULL, BETWEEN, IN, CASE, COALESCE, ABS, CAST to numbers and strings, the
navigation functions `PREV`, `FIRST`, `LAST`, the aggregates `SUM`, `AVG`, `MIN`, `MAX`,
`COUNT` over one pattern variable, and `MATCH_ROWTIME()`, `MATCH_PROCTIME()` in MEASURES.
Anything else is a plan-time error naming it. A compiled expression is `f(ctx)`; the
matcher's context (`spark.matcher.Context`) answers which rows each variable holds.

Semantics (running, as the DEFINE of the row being tested sees them; in MEASURES the
whole match): `A.x` is the current row when A is the variable being defined, else the
last row mapped to A; `FIRST(A.x, n)`/`LAST(A.x, n)` the n-th row of A from the start /
end; `PREV(A.x, n)` the row n rows before the last row of A, counted over the rows of the
match so far; aggregates over the rows of A (an unqualified column: all rows).
"""

from __future__ import annotations

import datetime
import decimal
import operator
from typing import Any, Callable

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position

Compiled = Callable[[Any], Any]
RowFunction = Callable[[dict], Any]

_COMPARE = {exp.EQ: operator.eq, exp.NEQ: operator.ne, exp.LT: operator.lt, exp.LTE: operator.le,
            exp.GT: operator.gt, exp.GTE: operator.ge}
_ARITHMETIC = {exp.Add: operator.add, exp.Sub: operator.sub, exp.Mul: operator.mul}
_UNITS_MS = {"MILLISECOND": 1, "SECOND": 1000, "MINUTE": 60_000, "HOUR": 3_600_000, "DAY": 86_400_000}
_AGGREGATES = (exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Count)


class Compiler:
    """Compiles expressions against the input's columns and the pattern's variables."""

    def __init__(self, columns: list[str], variables: list[str], clause: str, time_column: str | None = None):
        self.columns = set(columns)
        self.variables = list(variables)
        self.clause = clause  # 'DEFINE' | 'MEASURES'
        self.time_column = time_column

    def compile(self, node: exp.Expression) -> Compiled:
        return self._scalar(node)

    # -- the whole-match level: navigation and aggregates pick rows -----------------------
    def _scalar(self, node: exp.Expression) -> Compiled:
        if isinstance(node, exp.Column):
            variable, name = self._reference(node)
            return lambda ctx: _get(ctx.reference(variable), name)
        if isinstance(node, (exp.First, exp.Last)):
            return self._first_last(node)
        if isinstance(node, exp.Anonymous):
            return self._function(node)
        if isinstance(node, _AGGREGATES):
            return self._aggregate(node)
        return _combine(node, self._scalar, self)

    def _first_last(self, node: exp.Expression) -> Compiled:
        argument, variable = self._row_argument(node.this, type(node).__name__.upper())
        offset = self._offset(node.expression, 0)
        first = isinstance(node, exp.First)

        def pick(ctx):
            row = ctx.nth(variable, offset, not first)
            return None if row is None else argument(row)

        return pick

    def _function(self, node: exp.Anonymous) -> Compiled:
        name = node.name.upper()
        if name == "PREV":
            if not node.expressions:
                raise self.error("PREV needs an argument, e.g. PREV(A.price)", node)
            argument, variable = self._row_argument(node.expressions[0], "PREV")
            offset = self._offset(node.expressions[1] if len(node.expressions) > 1 else None, 1)

            def previous(ctx):
                row = ctx.previous(variable, offset)
                return None if row is None else argument(row)

            return previous
        if name in ("MATCH_ROWTIME", "MATCH_PROCTIME") and self.clause == "DEFINE":
            raise self.error(f"{name}() is only allowed in MEASURES", node)
        if name == "MATCH_ROWTIME":
            if node.expressions:
                raise self.error("MATCH_ROWTIME() takes no arguments here", node)
            column = self.time_column
            return lambda ctx: _get(ctx.reference(None), column)
        if name == "MATCH_PROCTIME":
            return lambda ctx: datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        if name in ("NEXT", "CLASSIFIER", "MATCH_NUMBER"):
            raise self.error(f"{name} is not supported by Flink's MATCH_RECOGNIZE", node)
        raise self.error(f"function {node.name} is not supported in MATCH_RECOGNIZE's {self.clause}", node)

    def _aggregate(self, node: exp.Expression) -> Compiled:
        kind = type(node).__name__.upper()
        this = node.this
        if isinstance(this, exp.Distinct):
            raise self.error(f"{kind}(DISTINCT ...) is not supported in MATCH_RECOGNIZE (Flink rejects it)", node)
        if isinstance(node, exp.Count) and (isinstance(this, exp.Star) or
                                            (isinstance(this, exp.Column) and isinstance(this.this, exp.Star))):
            variable = None
            if isinstance(this, exp.Column):
                variable = self._variable(this)
            return lambda ctx: len(ctx.rows(variable))
        argument, variable = self._row_argument(this, kind)
        reduce = _REDUCERS[kind]
        return lambda ctx: reduce([argument(row) for row in ctx.rows(variable)])

    # -- the row level: the argument of a navigation function or aggregate ---------------
    def _row_argument(self, node: exp.Expression | None, what: str) -> tuple[RowFunction, str | None]:
        if node is None:
            raise ValidationError(f"{what} needs an argument")
        variables = {self._variable(c) for c in node.find_all(exp.Column)}
        if len(variables) > 1:
            raise self.error(f"{what}: its argument must refer to one pattern variable (it refers to"
                              f" {', '.join(sorted(v or '(none)' for v in variables))})", node)
        return self._row(node), (variables.pop() if variables else None)

    def _row(self, node: exp.Expression) -> RowFunction:
        if isinstance(node, exp.Column):
            self._variable(node)
            name = self._column_name(node)
            return lambda row: row.get(name)
        if isinstance(node, (exp.First, exp.Last, exp.Anonymous) + _AGGREGATES):
            raise self.error("navigation functions and aggregates cannot be nested in MATCH_RECOGNIZE", node)
        return _combine(node, self._row, self)

    # -- names ---------------------------------------------------------------------------
    def _reference(self, column: exp.Column) -> tuple[str | None, str]:
        return self._variable(column), self._column_name(column)

    def _variable(self, column: exp.Column) -> str | None:
        if column.args.get("db") or column.args.get("catalog"):
            raise self.error(f"'{column.sql()}': refer to columns as <pattern variable>.<column>", column)
        if not column.table:
            return None
        if column.table not in self.variables:
            raise self.error(
                f"{self.clause}: unknown pattern variable '{column.table}' in {column.sql()} (the pattern's"
                f" variables: {', '.join(self.variables)})", column)
        return column.table

    def _column_name(self, column: exp.Column) -> str:
        if column.name not in self.columns:
            raise self.error(f"{self.clause}: column '{column.name}' is not in the input (its columns:"
                              f" {', '.join(sorted(self.columns))})", column)
        return column.name

    def _offset(self, node: exp.Expression | None, default: int) -> int:
        if node is None:
            return default
        if not (isinstance(node, exp.Literal) and node.is_int) or int(node.this) < 0:
            raise self.error("the offset of PREV, FIRST and LAST must be a non-negative integer literal", node)
        return int(node.this)

    def error(self, message: str, node: exp.Expression) -> ValidationError:
        return ValidationError(message, start_position(node))


def _get(row: dict | None, name: str) -> Any:
    return None if row is None else row.get(name)


def _combine(node: exp.Expression, sub: Callable[[exp.Expression], Callable], compiler: Compiler) -> Callable:
    """Operators and plain functions: the same at both levels, over compiled operands."""
    if isinstance(node, exp.Paren):
        return sub(node.this)
    if isinstance(node, exp.Literal):
        value = _literal(node)
        return lambda *_: value
    if isinstance(node, exp.Boolean):
        value = bool(node.this)
        return lambda *_: value
    if isinstance(node, exp.Null):
        return lambda *_: None
    if isinstance(node, exp.Interval):
        value = interval_value(node, compiler)
        return lambda *_: value
    if type(node) in _COMPARE:
        return _binary(sub(node.this), sub(node.expression), _COMPARE[type(node)])
    if type(node) in _ARITHMETIC:
        return _binary(sub(node.this), sub(node.expression), _ARITHMETIC[type(node)])
    if isinstance(node, exp.Div):
        return _binary(sub(node.this), sub(node.expression), _divide)
    if isinstance(node, exp.Mod):
        return _binary(sub(node.this), sub(node.expression), _modulo)
    if isinstance(node, exp.Neg):
        f = sub(node.this)
        return lambda *a: None if (v := f(*a)) is None else -v
    if isinstance(node, exp.And):
        return _and(sub(node.this), sub(node.expression))
    if isinstance(node, exp.Or):
        return _or(sub(node.this), sub(node.expression))
    if isinstance(node, exp.Not):
        f = sub(node.this)
        return lambda *a: None if (v := f(*a)) is None else not v
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        f = sub(node.this)
        return lambda *a: f(*a) is None
    if isinstance(node, exp.Between):
        return _and(_binary(sub(node.this), sub(node.args["low"]), operator.ge),
                    _binary(sub(node.this), sub(node.args["high"]), operator.le))
    if isinstance(node, exp.In) and not node.args.get("query"):
        return _in(sub(node.this), [sub(e) for e in node.expressions])
    if isinstance(node, exp.Case):
        return _case(node, sub)
    if isinstance(node, exp.Coalesce):
        parts = [sub(node.this), *[sub(e) for e in node.expressions]]
        return lambda *a: next((v for v in (p(*a) for p in parts) if v is not None), None)
    if isinstance(node, exp.Abs):
        f = sub(node.this)
        return lambda *a: None if (v := f(*a)) is None else abs(v)
    if isinstance(node, exp.Cast):
        return _cast(sub(node.this), node, compiler)
    raise compiler.error(f"{node.sql()} is not supported in MATCH_RECOGNIZE's {compiler.clause} (supported: columns,"
                          " literals, arithmetic, comparisons, AND/OR/NOT, IS NULL, BETWEEN, IN, CASE, COALESCE,"
                          " ABS, CAST, PREV/FIRST/LAST, SUM/AVG/MIN/MAX/COUNT)", node)


def _literal(node: exp.Literal) -> Any:
    if node.is_string:
        return node.this
    if node.is_int:
        return int(node.this)
    return float(node.this)


def interval_value(node: exp.Interval, compiler: Compiler) -> datetime.timedelta:
    unit = node.unit.name.upper() if node.unit else "SECOND"
    unit = unit[:-1] if unit.endswith("S") else unit
    if unit not in _UNITS_MS or not isinstance(node.this, exp.Literal):
        raise compiler.error(f"interval {node.sql()} is not supported in MATCH_RECOGNIZE", node)
    return datetime.timedelta(milliseconds=float(node.this.this) * _UNITS_MS[unit])


def _binary(left: Callable, right: Callable, op: Callable) -> Callable:
    def apply(*a):
        x, y = left(*a), right(*a)
        if x is None or y is None:
            return None
        if isinstance(x, decimal.Decimal) and isinstance(y, float):  # DECIMAL with DOUBLE is DOUBLE
            x = float(x)
        elif isinstance(y, decimal.Decimal) and isinstance(x, float):
            y = float(y)
        return op(x, y)

    return apply


def _divide(x, y):
    if isinstance(x, int) and isinstance(y, int):
        if y == 0:
            raise ZeroDivisionError("division by zero in MATCH_RECOGNIZE")
        quotient = abs(x) // abs(y)  # Flink: integer division truncates toward zero
        return quotient if (x >= 0) == (y >= 0) else -quotient
    return x / y


def _modulo(x, y):
    result = abs(x) % abs(y)
    return result if x >= 0 else -result


def _and(left: Callable, right: Callable) -> Callable:
    def apply(*a):
        x = left(*a)
        if x is False:
            return False
        y = right(*a)
        if y is False:
            return False
        return None if x is None or y is None else True

    return apply


def _or(left: Callable, right: Callable) -> Callable:
    def apply(*a):
        x = left(*a)
        if x is True:
            return True
        y = right(*a)
        if y is True:
            return True
        return None if x is None or y is None else False

    return apply


def _in(value: Callable, options: list[Callable]) -> Callable:
    def apply(*a):
        v = value(*a)
        if v is None:
            return None
        found = [o(*a) for o in options]
        return True if v in found else (None if None in found else False)

    return apply


def _case(node: exp.Case, sub: Callable) -> Callable:
    subject = sub(node.this) if node.this is not None else None
    branches = [(sub(i.this), sub(i.args["true"])) for i in node.args.get("ifs") or []]
    default = sub(node.args["default"]) if node.args.get("default") is not None else (lambda *a: None)

    def apply(*a):
        value = subject(*a) if subject is not None else None
        for condition, result in branches:
            test = condition(*a)
            if (subject is None and test is True) or (subject is not None and value is not None and test == value):
                return result(*a)
        return default(*a)

    return apply


def _cast(f: Callable, node: exp.Cast, compiler: Compiler) -> Callable:
    to = node.to
    if to.is_type(*exp.DataType.INTEGER_TYPES):
        convert = lambda v: int(v)  # noqa: E731
    elif to.is_type(*exp.DataType.REAL_TYPES):
        convert = lambda v: float(v)  # noqa: E731
    elif to.is_type(*exp.DataType.TEXT_TYPES):
        convert = lambda v: str(v)  # noqa: E731
    else:
        raise compiler.error(f"CAST to {to.sql()} is not supported in MATCH_RECOGNIZE", node)
    return lambda *a: None if (v := f(*a)) is None else convert(v)


def _sum(values: list) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _avg(values: list) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    if all(isinstance(v, int) for v in present):  # Flink: AVG of integers is an integer (truncated)
        return _divide(sum(present), len(present))
    if any(isinstance(v, decimal.Decimal) for v in present):
        return sum(decimal.Decimal(str(v)) for v in present) / len(present)
    return sum(present) / len(present)


_REDUCERS = {
    "SUM": _sum,
    "AVG": _avg,
    "MIN": lambda vs: min((v for v in vs if v is not None), default=None),
    "MAX": lambda vs: max((v for v in vs if v is not None), default=None),
    "COUNT": lambda vs: sum(1 for v in vs if v is not None),
}
