"""Type errors Flink's validator reports, found in the planner's typed tree.

Conservative by design: only what Flink refuses in every case is refused here, because
sqlglot's inferred types are not always Flink's, and a false error is worse than none.
- Arithmetic (+ - * / %) on a character string or a BOOLEAN: Flink has no implicit
  coercion from strings to numbers ("Cannot apply '+' to arguments of type ...").
- Comparing values of families that Calcite never compares: a datetime or TIME with a
  number or a BOOLEAN, a BOOLEAN with a number, an INTERVAL with anything but an
  INTERVAL or a string. A character string compares with
  any scalar (Calcite casts it, e.g. `ts > '2024-01-01 00:00:00'`, literal or column), so
  string comparisons with scalars pass.
- Comparing a row, an ARRAY or a MAP with anything but its own kind: a row constructor
  `(auction, 123)` or `ROW(...)` with a scalar or a row of another arity, in any comparison,
  IN list or BETWEEN (Calcite compares rows field by field, so the fields are checked
  too). Spark would fail on them at run time, in its words (`named_struct(...) = 0`).
- Arithmetic on a row, an ARRAY or a MAP, and a row as a condition.
- A condition that is not a BOOLEAN: WHERE, HAVING, a join's ON, CASE's WHEN, and the
  operands of AND, OR and NOT ("WHERE clause must be a condition"); Flink has no truthiness
  of numbers or strings.
- A VARIANT where Flink needs an orderable type (GROUP BY, ORDER BY, DISTINCT, PARTITION BY,
  MIN/MAX, < and >), and a CAST to or from one (Flink: "Cast function cannot convert value
  of type VARIANT to type INTEGER"; read a field with v['key'] and JSON_STRING instead).
- INTERVAL literals whose leading field has more digits than its precision allows
  (Flink: "Interval field value ... exceeds precision of SECOND(p) field"): an explicit
  precision, e.g. SECOND(3), or at most 10 digits, Flink's maximum. (Flink's default
  precision is 2, so it also refuses INTERVAL '100' SECOND; streamsql accepts that one.)
"""

from __future__ import annotations

import re

from sqlglot import exp

from streamsql.errors import ValidationError
from streamsql.plan.positions import start_position
from streamsql.plan.composites import comparable, flink_type_name, kind_of, type_of

ARITHMETIC = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
COMPARISON = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_NOT_ARITHMETIC = {"character string", "boolean", "row", "array", "map"}
MAX_INTERVAL_PRECISION = 10
_LEADING = re.compile(r"^\s*[+-]?\s*(\d+)")


def check_types(query: exp.Expression) -> None:
    """Raise ValidationError, with the SQL position, for the first type error found."""
    for node in query.walk():
        if type(node) in ARITHMETIC:
            _check_arithmetic(node)
        elif type(node) in COMPARISON:
            _check_comparison(node)
        elif isinstance(node, exp.In):
            _check_in(node)
        elif isinstance(node, exp.Between):
            _check_between(node)
        elif isinstance(node, exp.Interval):
            _check_interval(node)
        _check_variant(node)
        for clause, condition in _conditions(node):
            _check_condition(clause, condition)


# Where a condition goes, by the node that holds it; the operators' operands are checked by
# their operator.
_CLAUSES = {exp.Where: "WHERE clause", exp.Having: "HAVING clause"}
_CONNECTIVES = {exp.And: "AND", exp.Or: "OR"}


def _conditions(node: exp.Expression):
    """(what holds it, condition) for each condition ``node`` holds."""
    if type(node) in _CLAUSES:
        yield _CLAUSES[type(node)], node.this
    elif isinstance(node, exp.Join) and node.args.get("on") is not None:
        yield "ON clause", node.args["on"]
    elif isinstance(node, exp.Case) and node.this is None:  # CASE x WHEN value: values, not conditions
        for branch in node.args.get("ifs") or []:
            yield "CASE's WHEN", branch.this
    elif type(node) in _CONNECTIVES:
        yield _CONNECTIVES[type(node)], node.left
        yield _CONNECTIVES[type(node)], node.right
    elif isinstance(node, exp.Not):
        yield "NOT", node.this


def _check_condition(holder: str, condition: exp.Expression) -> None:
    found = kind_of(type_of(condition))
    if found is None or found == "boolean":
        return
    kind = _flink_type(condition)
    if holder == "NOT":
        message = f"Cannot apply 'NOT' to arguments of type 'NOT<{kind}>'. Supported form(s): 'NOT<BOOLEAN>'"
    elif holder in _CONNECTIVES.values():
        message = (f"Cannot apply '{holder}' to an argument of type '<{kind}>'."
                   f" Supported form(s): '<BOOLEAN> {holder} <BOOLEAN>'")
    else:
        message = f"{holder} must be a condition (a BOOLEAN expression), found {kind}"
    raise ValidationError(message, start_position(condition))


def _check_arithmetic(node: exp.Binary) -> None:
    families = {kind_of(type_of(node.left)), kind_of(type_of(node.right))}
    if families & _NOT_ARITHMETIC:
        symbol = ARITHMETIC[type(node)]
        hint = "; CAST a character string to a number first" if "character string" in families else ""
        raise ValidationError(
            f"Cannot apply '{symbol}' to arguments of type '<{_flink_type(node.left)}> {symbol} <{_flink_type(node.right)}>'."
            f" Supported form(s): '<NUMERIC> {symbol} <NUMERIC>' (and datetime/interval arithmetic){hint}",
            start_position(node),
        )


def _check_comparison(node: exp.Binary) -> None:
    if not comparable(type_of(node.left), type_of(node.right)):
        symbol = COMPARISON[type(node)]
        raise ValidationError(
            f"Cannot apply '{symbol}' to arguments of type '<{_flink_type(node.left)}> {symbol} <{_flink_type(node.right)}>'."
            f" Supported form(s): '<COMPARABLE_TYPE> {symbol} <COMPARABLE_TYPE>'",
            start_position(node),
        )


def _check_in(node: exp.In) -> None:
    """Calcite checks the list's values against each other, then the left side against them."""
    values = node.expressions
    name = "NOT IN" if isinstance(node.parent, exp.Not) else "IN"
    for value in values[1:]:
        if not comparable(type_of(values[0]), type_of(value)):
            raise ValidationError(f"Values in expression list must have compatible types: <{_flink_type(values[0])}>"
                                  f" and <{_flink_type(value)}>", start_position(value) or start_position(node))
    for value in values:
        if not comparable(type_of(node.this), type_of(value)):
            raise ValidationError(f"Values passed to {name} operator must have compatible types:"
                                  f" <{_flink_type(node.this)}> {name} <{_flink_type(value)}>", start_position(node))


def _check_between(node: exp.Between) -> None:
    value, low, high = node.this, node.args.get("low"), node.args.get("high")
    if all(comparable(type_of(value), type_of(bound)) for bound in (low, high) if bound is not None):
        return
    name = ("NOT " if isinstance(node.parent, exp.Not) else "") + "BETWEEN " + \
        ("SYMMETRIC" if node.args.get("symmetric") else "ASYMMETRIC")
    raise ValidationError(
        f"Cannot apply '{name}' to arguments of type '<{_flink_type(value)}> {name} <{_flink_type(low)}>"
        f" AND <{_flink_type(high)}>'. Supported form(s):"
        " '<COMPARABLE_TYPE> BETWEEN <COMPARABLE_TYPE> AND <COMPARABLE_TYPE>'",
        start_position(node),
    )


_ORDERING = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Max, exp.Min)


def _is_variant(node: exp.Expression | None) -> bool:
    return kind_of(type_of(node)) == "variant"


def _check_variant(node: exp.Expression) -> None:
    """Flink's VARIANT is not orderable, and no CAST makes one or reads one."""
    if isinstance(node, exp.Cast) and _is_variant(node.this) != (kind_of(node.to) == "variant") \
            and type_of(node.this) is not None and not isinstance(node.this, exp.Null):
        raise ValidationError(f"Cast function cannot convert value of type {_flink_type(node.this)} to type"
                              f" {flink_type_name(node.to)} (a VARIANT is made by PARSE_JSON and read by"
                              " v['key'], v[index] and JSON_STRING(v))", start_position(node))
    where = None
    if isinstance(node, _ORDERING) and any(_is_variant(v) for v in (node.this, node.expression)):
        where = COMPARISON.get(type(node)) or type(node).__name__.upper() + "(...)"
    elif isinstance(node, exp.Group) and any(_is_variant(v) for v in node.expressions):
        where, node = "GROUP BY", next(v for v in node.expressions if _is_variant(v))
    elif isinstance(node, exp.Ordered) and _is_variant(node.this):
        where = "ORDER BY"
    elif isinstance(node, exp.Window) and any(_is_variant(v) for v in node.args.get("partition_by") or []):
        where = "PARTITION BY"
    elif isinstance(node, exp.Distinct) and any(_is_variant(v) for v in node.expressions):
        where = "DISTINCT"
    elif isinstance(node, exp.Select) and node.args.get("distinct") and any(_is_variant(v) for v in node.selects):
        where, node = "SELECT DISTINCT", next(v for v in node.selects if _is_variant(v))
    if where is not None:
        raise ValidationError(f"Type VARIANT is not an orderable data type: it is not supported in {where}"
                              " (compare or group by a field's text instead: JSON_STRING(v['key']))",
                              start_position(node))


def _check_interval(node: exp.Interval) -> None:
    value, unit = node.this, node.args.get("unit")
    if not isinstance(value, exp.Literal) or not value.is_string or unit is None:
        return
    leading = _LEADING.match(value.this)
    if leading is None:
        return
    if isinstance(unit, exp.IntervalSpan):
        unit = unit.this
    name = (unit.name if isinstance(unit, exp.Var) else unit.key).upper()
    precision = MAX_INTERVAL_PRECISION
    if not isinstance(unit, exp.Var) and isinstance(unit.this, exp.Literal) and unit.this.is_int:
        precision = int(unit.this.this)
    digits = leading.group(1).lstrip("0")
    if len(digits) > precision:
        raise ValidationError(
            f"Interval field value {int(digits):,} exceeds precision of {name}({precision}) field"
            f" (at most {precision} digits; use a larger unit)",
            start_position(value),
        )


def _flink_type(node: exp.Expression) -> str:
    """A type as Flink's messages show it: a string literal is CHAR(n), INT is INTEGER,
    a row constructor RecordType(BIGINT EXPR$0, INTEGER EXPR$1)."""
    if isinstance(node, exp.Literal) and node.is_string:
        return f"CHAR({len(node.this)})"
    if isinstance(node, exp.Tuple):
        return f"RecordType({', '.join(f'{_flink_type(e)} EXPR${i}' for i, e in enumerate(node.expressions))})"
    return flink_type_name(type_of(node))
