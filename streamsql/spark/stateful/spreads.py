"""STDDEV_POP/SAMP and VAR_POP/SAMP in the GroupAggregate's fold (``accumulate``), and in
the OverAggregate's frames (``over_spread``).

Per key the fold keeps the count of values, a centre (the key's first value) and the sums of
the values' deviations from the centre and of their squares. The sums are additive, so a
retraction takes back exactly what its row added; the centre keeps a plain sum of squares
from cancelling catastrophically. Shipped by value with ``accumulate``: pandas and numpy only.
"""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd

SPREADS = ("STDDEV_POP", "STDDEV_SAMP", "VAR_POP", "VAR_SAMP")


def centres(plan, state, batch, keys) -> dict:
    """Per STDDEV/VAR call, each batch row's centre: its key's in the state, else the first
    value the batch has for the key (NaN while the key has none)."""
    calls = [i for i, agg in enumerate(plan["aggs"]) if agg["function"] in SPREADS and agg["ms"] is None]
    if not calls:
        return {}
    columns = [f"__z{i}" for i in calls]
    if state is not None and len(state.acc):
        known = batch[keys].merge(state.acc[keys + columns], on=keys, how="left")
    else:
        known = pd.DataFrame({c: np.full(len(batch), np.nan) for c in columns})
    grouping = [batch[k] for k in keys]
    centres = {}
    for i, column in zip(calls, columns):
        agg = plan["aggs"][i]
        values = floats(batch[agg["column"]])
        if agg["filter"] is not None:
            values = values.where(batch[agg["filter"]].astype("boolean").fillna(False).to_numpy(dtype=bool))
        first = values.groupby(grouping, dropna=False, sort=False).transform("first")
        stored = known[column].to_numpy(dtype="float64", na_value=np.nan)
        centres[i] = np.where(np.isnan(stored), first.to_numpy(dtype="float64", na_value=np.nan), stored)
    return centres


def distinct_sums(i: int, values: pd.DataFrame, keys: list[str]) -> dict:
    """A DISTINCT call's count and centred sums per key (``__n``, ``__p``, ``__q`` for
    ``spread``) from the key's distinct values (rows of keys and ``__v``, one per value), as
    Flink's DISTINCT feeds each value to the function once while its count is above zero."""
    v = floats(values["__v"])
    grouping = [values[k] for k in keys]
    deviation = v - v.groupby(grouping, dropna=False, sort=False).transform("first")
    grouped = pd.DataFrame({"n": v.notna().astype("int64"), "p": deviation, "q": deviation * deviation}).groupby(
        grouping, dropna=False, sort=False)
    return {f"__n{i}": grouped["n"].sum(), f"__p{i}": grouped["p"].sum(), f"__q{i}": grouped["q"].sum()}


def floats(values: pd.Series) -> pd.Series:
    """A numeric column as float64 (DECIMALs as Flink's doubleValue), NULL as NaN."""
    if values.dtype == object:
        return pd.Series([np.nan if x is None or x is pd.NA else float(x) for x in values],
                         dtype="float64", index=values.index)
    return values.astype("float64")


def spread(agg, i, t) -> pd.Series:
    """STDDEV_POP/SAMP, VAR_POP/SAMP from a key's count and centred sums, as Flink computes
    them: in DOUBLE (M2 / n, or / (n - 1): NULL for one value; STDDEV its square root), then
    cast to the result type (an integer truncates; a DECIMAL rounds half up)."""
    fn = agg["function"]
    n = t[f"__n{i}"].to_numpy(dtype="float64", na_value=0.0)
    s1 = t[f"__p{i}"].to_numpy(dtype="float64", na_value=0.0)
    s2 = t[f"__q{i}"].to_numpy(dtype="float64", na_value=0.0)
    sample = fn.endswith("_SAMP")
    defined = n > (1 if sample else 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if agg["kind"] == "int":  # integer sums (exact up to 2**53): n * M2 exactly, one rounding
            n, s1, s2 = (a.astype(np.longdouble) for a in (n, s1, s2))
            result = np.maximum(n * s2 - s1 * s1, 0) / (n * (n - 1 if sample else n))
            result = result.astype("float64")
        else:
            result = np.maximum(s2 - s1 * s1 / n, 0.0) / (n - 1 if sample else n)
    if fn.startswith("STDDEV"):
        result = np.sqrt(result)
    if agg["out_kind"] == "int":  # Java's (int)/(long) of a double: saturates (then _shape wraps a byte or short)
        bits = 64 if agg["out_bits"] in (0, 64) else 32
        big = np.nan_to_num(result, nan=0.0) >= 2.0 ** (bits - 1)
        ints = np.where(big, 0.0, np.nan_to_num(result, nan=0.0)).astype("int64")
        ints = np.where(big, 2 ** (bits - 1) - 1, ints)
        return pd.Series(ints, dtype="Int64", index=t.index).mask(~defined)
    result = pd.Series(np.where(defined, result, np.nan), index=t.index)
    if agg["out_kind"] != "object":
        return result
    quantum = decimal.Decimal(1).scaleb(-(agg.get("out_scale") or 0))
    return pd.Series([decimal.Decimal(repr(float(x))).quantize(quantum, rounding=decimal.ROUND_HALF_UP) if ok else None
                      for x, ok in zip(result.to_numpy(), defined)], dtype=object, index=t.index)


def exact():
    """A decimal context that keeps every digit of a DECIMAL(38, s)'s square and their sums."""
    return decimal.localcontext(decimal.Context(prec=120))


def over_terms(values: pd.Series, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Each row's x and x * x for an OVER frame's sums (NULL adds 0): int64 for an integer
    (wrapping as Java's long does), Decimal for a DECIMAL, else float."""
    if kind == "int":
        numbers = values.to_numpy(dtype="int64", na_value=0)
    elif kind == "object":
        numbers = np.array([decimal.Decimal(0) if v is None or v is pd.NA else decimal.Decimal(v) for v in values],
                           dtype=object)
        with exact():
            return numbers, numbers * numbers
    else:
        numbers = floats(values).fillna(0.0).to_numpy()
    with np.errstate(over="ignore"):
        return numbers, numbers * numbers


def over_spread(agg, n: np.ndarray, s1: np.ndarray, s2: np.ndarray, clip: bool = False) -> pd.Series:
    """STDDEV/VAR over OVER frames from their count, SUM(x) and SUM(x * x), as Flink expands
    the call over a window (``spark.over_spreads`` has the formula and the batch form): in
    the argument's type, so for an integer the sums wrap at its width and the divisions
    truncate, a DECIMAL's are exact; then cast to the result type. ``clip``: a bounded
    frame's sums are differences of running sums, so an exact 0 may come out a hair below
    it; it is 0 then (a variance is never negative)."""
    fn = agg["function"]
    sample = fn.endswith("_SAMP")
    defined = n > (1 if sample else 0)
    safe = np.where(n > 0, n, 1).astype("int64")
    denominator = np.where(defined, safe - 1 if sample else safe, 1)
    if agg["kind"] == "int":
        bits = 64 if agg["out_bits"] in (0, 64) else agg["out_bits"]
        with np.errstate(over="ignore"):
            total = wrap(s1.astype("int64"), bits)
            average = _java_div(wrap(total * total, bits), safe)
            variance = _java_div(wrap(s2.astype("int64"), bits) - average, denominator)
        if fn.startswith("VAR"):
            result = wrap(variance, bits)
        else:  # POWER(long, 0.5), Java's (int): NaN (a wrapped negative) is 0
            result = wrap(np.nan_to_num(np.sqrt(np.where(variance < 0, np.nan, variance.astype("float64"))),
                                         nan=0.0).astype("int64"), bits)
        return pd.Series(result, dtype="Int64").mask(~defined)
    if agg["kind"] == "object":
        return _decimal_spread(agg, n, s1, s2, denominator, defined)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = (s2 - s1 * s1 / n.astype("float64")) / denominator
        if clip:
            result = np.maximum(result, 0.0)
        if fn.startswith("STDDEV"):
            result = np.sqrt(result)
    return pd.Series(np.where(defined, result, np.nan))


def _decimal_spread(agg, n, s1, s2, denominator, defined) -> pd.Series:
    """A DECIMAL's STDDEV/VAR, exactly, rounded half up to the result's scale."""
    quantum = decimal.Decimal(1).scaleb(-(agg.get("out_scale") or 0))
    out = []
    with exact():
        for count, total, squares, d, ok in zip(n, s1, s2, denominator, defined):
            if not ok:
                out.append(None)
                continue
            variance = max((squares - total * total / int(count)) / int(d), decimal.Decimal(0))
            value = variance.sqrt() if agg["function"].startswith("STDDEV") else variance
            out.append(value.quantize(quantum, rounding=decimal.ROUND_HALF_UP))
    return pd.Series(out, dtype=object)


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """Java's arithmetic in a ``bits``-wide integer: the low bits, two's complement."""
    if bits >= 64:
        return values
    half = 1 << (bits - 1)
    return (values + half) % (1 << bits) - half


def _java_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Java's long division by a positive count: truncated toward zero (floor division
    moved up by one for a negative dividend that does not divide evenly)."""
    return a // b + ((a % b != 0) & (a < 0))
