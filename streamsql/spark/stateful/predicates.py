"""A join's residual ON condition, evaluated on joined pairs with SQL's three-valued logic.

This module runs in Spark's Python workers and is shipped to them by value, so it imports
only numpy and pandas; the condition comes as plain data (built by ``join_cut.residual``):

    ("col", name) | ("lit", value) | ("cmp", op, a, b) | ("arith", op, a, b) | ("neg", a)
    | ("and", a, b) | ("or", a, b) | ("not", a) | ("isnull", a)
    | ("abs", a) | ("coalesce", a, b, ...) | ("case", ((when, then), ...), else) | ("like", a, pattern)
    | ("same", a, b) | ("concat", a, b, ...) | ("upper", a) | ("lower", a)
    | ("greatest", a, b, ...) | ("least", a, b, ...) | ("tsdiff", unit_ms, a, b)

``op`` is one of = <> < <= > >= (cmp) or + - * (arith). A comparison with a NULL operand is
UNKNOWN, and only TRUE selects a pair (an outer join's row whose condition is UNKNOWN for
every partner is null-padded, as in SQL). ``same`` is IS NOT DISTINCT FROM (NULL equals
NULL); CONCAT, GREATEST and LEAST are NULL when an argument is, as Flink's are; ``tsdiff`` is
TIMESTAMPDIFF in units of ``unit_ms`` (SECOND to DAY), truncated toward zero. The functions
are those of values from both sides; a part of the condition that reads one side only
comes computed, as a column.
"""

from __future__ import annotations

import operator
import re

import numpy as np
import pandas as pd

_COMPARE = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
            ">=": operator.ge}
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def holds(condition, frame: pd.DataFrame) -> np.ndarray:
    """Per row of ``frame``: whether ``condition`` is TRUE."""
    values, null = _eval(condition, frame, len(frame))
    return np.asarray(values, dtype=bool) & ~null


def _eval(node, frame: pd.DataFrame, n: int):
    """(values, null mask): values are an object array (or a scalar for a literal)."""
    tag = node[0]
    if tag == "col":
        series = frame[node[1]]
        null = series.isna().to_numpy()
        return series.to_numpy(dtype=object), null
    if tag == "lit":
        return node[1], np.full(n, node[1] is None)
    if tag in ("cmp", "arith"):
        a, a_null = _eval(node[2], frame, n)
        b, b_null = _eval(node[3], frame, n)
        null = a_null | b_null
        function = _COMPARE[node[1]] if tag == "cmp" else _ARITH[node[1]]
        out = np.zeros(n, dtype=bool) if tag == "cmp" else np.full(n, None, dtype=object)
        present = ~null
        if present.any():
            result = function(_at(a, present), _at(b, present))
            out[present] = np.asarray(result, dtype=bool if tag == "cmp" else object)
        return out, null
    if tag == "neg":
        a, null = _eval(node[1], frame, n)
        out = np.full(n, None, dtype=object)
        out[~null] = -_at(a, ~null)
        return out, null
    if tag == "isnull":
        _, null = _eval(node[1], frame, n)
        return null.copy(), np.zeros(n, dtype=bool)
    if tag == "not":
        a, null = _eval(node[1], frame, n)
        return ~np.asarray(a, dtype=bool), null
    if tag in ("and", "or"):
        a, a_null = _eval(node[1], frame, n)
        b, b_null = _eval(node[2], frame, n)
        a, b = np.asarray(a, dtype=bool) & ~a_null, np.asarray(b, dtype=bool) & ~b_null
        if tag == "and":  # FALSE wins over UNKNOWN
            false = (~a & ~a_null) | (~b & ~b_null)
            return a & b, ~false & (a_null | b_null)
        return a | b, ~(a | b) & (a_null | b_null)  # TRUE wins over UNKNOWN
    if tag == "abs":
        a, null = _eval(node[1], frame, n)
        out = np.full(n, None, dtype=object)
        if (~null).any():
            out[~null] = np.abs(_at(a, ~null))
        return out, null
    if tag == "coalesce":
        out, null = np.full(n, None, dtype=object), np.ones(n, dtype=bool)
        for argument in node[1:]:  # the first value that is not NULL
            value, value_null = _eval(argument, frame, n)
            take = null & ~value_null
            out[take] = _at(value, take)
            null &= value_null
        return out, null
    if tag == "case":
        out, null, open_ = np.full(n, None, dtype=object), np.ones(n, dtype=bool), np.ones(n, dtype=bool)
        for when, then in node[1]:  # the first WHEN that is TRUE; UNKNOWN goes on
            picked = open_ & holds(when, frame)
            if picked.any():
                value, value_null = _eval(then, frame, n)
                out[picked], null[picked] = _at(value, picked), _at(value_null, picked)
            open_ &= ~picked
        value, value_null = _eval(node[2], frame, n)
        out[open_], null[open_] = _at(value, open_), _at(value_null, open_)
        return out, null
    if tag == "like":
        a, a_null = _eval(node[1], frame, n)
        pattern, pattern_null = _eval(node[2], frame, n)
        null = a_null | pattern_null
        out = np.zeros(n, dtype=bool)
        patterns = pd.Series(pattern if isinstance(pattern, np.ndarray) else np.full(n, pattern, dtype=object))
        values = pd.Series(a if isinstance(a, np.ndarray) else np.full(n, a, dtype=object))
        for text, rows in patterns[~null].groupby(patterns[~null], sort=False).groups.items():
            regex = _like_regex(text if isinstance(text, str) else str(text))
            out[rows] = [regex.fullmatch(v if isinstance(v, str) else str(v)) is not None for v in values[rows]]
        return out, null
    if tag == "same":
        a, a_null = _eval(node[1], frame, n)
        b, b_null = _eval(node[2], frame, n)
        out = a_null & b_null
        both = ~a_null & ~b_null
        if both.any():
            out[both] = np.asarray(_at(a, both) == _at(b, both), dtype=bool)
        return out, np.zeros(n, dtype=bool)
    if tag in _NARY:
        parts = [_eval(argument, frame, n) for argument in node[1:]]
        null = np.logical_or.reduce([part_null for _, part_null in parts])
        out = np.full(n, None, dtype=object)
        present = ~null
        if present.any():
            columns = [_at(values, present) for values, _ in parts]
            columns = [c if isinstance(c, np.ndarray) else np.full(int(present.sum()), c, dtype=object)
                       for c in columns]
            out[present] = [_NARY[tag](row) for row in zip(*columns)]
        return out, null
    if tag == "tsdiff":
        a, a_null = _eval(node[2], frame, n)
        b, b_null = _eval(node[3], frame, n)
        null = a_null | b_null
        out = np.full(n, None, dtype=object)
        present = ~null
        if present.any():
            since = _nanos(_at(a, present), int(present.sum()))
            until = _nanos(_at(b, present), int(present.sum()))
            delta, unit = until - since, node[1] * 1_000_000
            out[present] = np.sign(delta) * (np.abs(delta) // unit)  # Java's division truncates toward zero
        return out, null
    raise ValueError(f"not a condition node: {tag!r}")


def _text(value) -> str:
    return value if isinstance(value, str) else str(value)


# functions of values, row by row: NULL when an argument is
_NARY = {"concat": lambda row: "".join(_text(v) for v in row), "greatest": max, "least": min,
         "upper": lambda row: _text(row[0]).upper(), "lower": lambda row: _text(row[0]).lower()}


def _nanos(values, n: int) -> np.ndarray:
    """Timestamps (an array of them, or one literal) as epoch nanoseconds."""
    stamps = pd.to_datetime(pd.Series(values if isinstance(values, np.ndarray) else [values] * n))
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    return stamps.astype("int64").to_numpy()


def _like_regex(pattern: str) -> re.Pattern:
    """SQL LIKE as a regular expression: % any characters, _ one, a backslash escapes the
    next character (as Spark reads LIKE, which computes the one-side parts)."""
    parts, escaped = [], False
    for char in pattern:
        if escaped:
            parts.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        else:
            parts.append(".*" if char == "%" else "." if char == "_" else re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def _at(values, mask: np.ndarray):
    """The values where ``mask`` holds (a literal stays a scalar)."""
    return values[mask] if isinstance(values, np.ndarray) else values
