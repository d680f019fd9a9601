"""Flink's types for numeric literals and DECIMAL arithmetic (LogicalTypeMerging), for the
type inference (sqlglot's annotate_types), measured on Flink 2.3.

- A literal with a decimal point is DECIMAL(p, s), its digits and scale, the precision at
  least s + 1 (``0.908`` is DECIMAL(4, 3), ``10.25`` DECIMAL(4, 2)), as an operand of
  DECIMAL arithmetic; an integer literal is an INT, a BIGINT past INT's range, a
  DECIMAL(p, 0) past BIGINT's; one with an exponent a DOUBLE.
- ``+``, ``-``, ``*``, ``/`` and ``%`` of two DECIMALs, or a DECIMAL and an integer (an INT
  as DECIMAL(10, 0), a BIGINT as DECIMAL(19, 0)): ``+``/``-`` keep the larger scale and one
  more digit than the larger integer part; ``*`` adds precisions (plus one) and scales;
  ``/`` has scale max(6, s1 + p2 + 1) and precision p1 - s1 + s2 + that scale; ``%`` the
  smaller integer part and the larger scale. Past 38 digits the precision is 38 and the
  scale gives way down to 6 (or less, if it was less), keeping the integer digits. A FLOAT
  or DOUBLE with a DECIMAL is a DOUBLE.
  (Spark's own rules are the same, so the values it computes already have these types.)
"""

from __future__ import annotations

from sqlglot import exp

from streamsql.dialect.builtins import decimal_scale

MAX = 38
APPROXIMATE = (exp.DType.FLOAT, exp.DType.DOUBLE)
_AS_DECIMAL = {exp.DType.TINYINT: 3, exp.DType.SMALLINT: 5, exp.DType.INT: 10, exp.DType.BIGINT: 19}


def literal(default):
    """The annotator for a Literal: an integer past INT's range is a BIGINT (past BIGINT's a
    DECIMAL(p, 0)); the rest as ``default`` types them. (A literal with a decimal point stays
    a DOUBLE for the inference at large, whose other rules would let a DECIMAL(2, 1) win over
    a DOUBLE; as an operand of DECIMAL arithmetic it is its DECIMAL: ``literal_decimal``.)"""
    def annotate(self, e: exp.Literal) -> exp.Literal:
        e = default(self, e)
        text = e.name.lstrip("+-")
        if not e.is_string and text.isdigit() and int(text) > 2**31 - 1:
            value = int(text)
            self._set_type(e, exp.DataType.build("BIGINT") if value <= 2**63 - 1
                           else _decimal(min(len(text.lstrip("0")) or 1, MAX), 0))
        return e
    return annotate


def literal_decimal(e: exp.Expression) -> tuple[int, int] | None:
    """A numeric literal with a decimal point (no exponent) as Flink types it: (p, s), its
    digits and scale, the precision at least s + 1 (``0.908``: (4, 3)); else None."""
    if isinstance(e, exp.Neg):
        e = e.this
    if not isinstance(e, exp.Literal) or e.is_string:
        return None
    text = e.name.lstrip("+-")
    if "." not in text or not text.replace(".", "", 1).isdigit():
        return None
    whole, fraction = text.split(".")
    digits = (whole + fraction).lstrip("0") or "0"
    return _adjusted(max(len(digits), len(fraction) + 1), len(fraction))


def arithmetic(default):
    """The annotator for + - * / %: Flink's DECIMAL type when a DECIMAL (or a literal with a
    decimal point) meets a DECIMAL or an integer, else ``default``'s."""
    def annotate(self, e: exp.Binary) -> exp.Binary:
        e = default(self, e)
        sides = (e.this, e.expression)
        if any(getattr(side.type, "this", None) in APPROXIMATE and not literal_decimal(side) for side in sides) and \
                any(getattr(side.type, "this", None) == exp.DType.DECIMAL for side in sides):
            self._set_type(e, exp.DataType.build("DOUBLE"))  # a FLOAT or DOUBLE with a DECIMAL
            return e
        types = [literal_decimal(side) or precision_scale(side.type) for side in sides]
        if None in types or not any(literal_decimal(side) or getattr(side.type, "this", None) == exp.DType.DECIMAL
                                    for side in sides):
            return e
        (p1, s1), (p2, s2) = types
        if isinstance(e, (exp.Add, exp.Sub)):
            scale = max(s1, s2)
            precision, scale = max(p1 - s1, p2 - s2) + scale + 1, scale
        elif isinstance(e, exp.Mul):
            precision, scale = p1 + p2 + 1, s1 + s2
        elif isinstance(e, exp.Div):
            scale = max(6, s1 + p2 + 1)
            precision = p1 - s1 + s2 + scale
        elif isinstance(e, exp.Mod):
            scale = max(s1, s2)
            precision = min(p1 - s1, p2 - s2) + scale
        else:
            return e
        self._set_type(e, _decimal(*_adjusted(precision, scale)))
        return e
    return annotate


def exact(e: exp.Expression) -> bool:
    """Whether a DECIMAL-typed expression's type is Flink's for sure: columns, CASTs,
    literals and DECIMAL arithmetic of them (not a COALESCE or CASE, whose DECIMAL the
    inference may have picked over a DOUBLE)."""
    if isinstance(e, (exp.Column, exp.Cast, exp.Literal)):
        return True
    if isinstance(e, (exp.Paren, exp.Neg)):
        return exact(e.this)
    if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
        return all(exact(side) and (literal_decimal(side) or precision_scale(side.type))
                   for side in (e.this, e.expression))
    return False


def precision_scale(data_type: exp.DataType | None) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL (DECIMAL alone is DECIMAL(10, 0)) or an integer type;
    None for any other."""
    if data_type is None:
        return None
    if data_type.this in _AS_DECIMAL:
        return _AS_DECIMAL[data_type.this], 0
    if data_type.this != exp.DType.DECIMAL:
        return None
    params = data_type.expressions
    return (int(params[0].name) if params else 10), decimal_scale(data_type)


def _adjusted(precision: int, scale: int) -> tuple[int, int]:
    """Past 38 digits: 38, the integer digits kept and the scale cut, down to min(scale, 6)."""
    if precision <= MAX:
        return precision, scale
    integer_digits = precision - scale
    return MAX, max(MAX - integer_digits, min(scale, 6))


def _decimal(precision: int, scale: int) -> exp.DataType:
    return exp.DataType.build(f"DECIMAL({precision}, {scale})")
