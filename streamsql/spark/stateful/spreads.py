"""STDDEV_POP/SAMP and VAR_POP/SAMP in the GroupAggregate's fold (``accumulate``).

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
    calls = [i for i, agg in enumerate(plan["aggs"]) if agg["function"] in SPREADS]
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
