"""A GroupAggregate call's values: its result from a key's accumulators (``result``), as it
is emitted and stored (``shape``: integers wrapped at their type's width), two partial values
combined (``extreme``: MIN/MAX, FIRST_VALUE/LAST_VALUE, LISTAGG/ARRAY_AGG), a batch's values
combined (``joined``, ``concatenated``), and equality where NULL equals NULL (``equal``).
Shipped by value with ``accumulate`` (pandas, numpy and ``spreads`` only)."""

from __future__ import annotations

import decimal

import numpy as np
import pandas as pd

from streamsql.spark.stateful import spreads

# the calls a key keeps one value for over insert-only input, and how pandas picks it (NULLs skipped)
PICK = {"MIN": "min", "MAX": "max", "FIRST_VALUE": "first", "LAST_VALUE": "last", "LISTAGG": "listagg",
        "ARRAY_AGG": "array_agg"}


def result(agg, i, t) -> pd.Series:
    fn, kind = agg["function"], agg["kind"]
    if agg.get("python") is not None:  # (python_aggregates)
        return t[f"__w{i}"]
    if agg["ms"] is not None and fn in spreads.SPREADS:  # DISTINCT
        return spreads.spread(agg, i, t)
    if agg["ms"] is not None:
        x = t[f"__x{i}"]
        if fn == "COUNT":  # (object when the key's multiset came back empty)
            return pd.to_numeric(x).fillna(0).astype("int64")
        if fn in ("MIN", "MAX"):
            return x
        total, n = x, t[f"__y{i}"].fillna(0)
    elif fn == "COUNT":
        return t[f"__c{i}"]
    elif fn in PICK or agg.get("seq") is not None:
        return t[f"__m{i}"]
    elif fn in spreads.SPREADS:
        return spreads.spread(agg, i, t)
    else:
        total, n = t[f"__s{i}"], t[f"__n{i}"]
    n = n.astype("Int64")
    some = (n > 0).to_numpy(dtype=bool, na_value=False)
    if fn == "SUM":
        return total.where(some, None) if kind == "object" else total.where(some)
    if kind == "int":  # AVG of an integer: Java's division truncates toward zero
        s = total.astype("Int64").where(some)
        q = s.abs() // n.where(some)
        return q.where((s >= 0).fillna(True), -q)
    if kind == "float":
        return (total.astype("float64") / n.astype("float64")).where(some)
    quantum = decimal.Decimal(1).scaleb(-(agg.get("out_scale") or 0))  # DECIMAL AVG: rounded half up
    return pd.Series([(s / c).quantize(quantum, rounding=decimal.ROUND_HALF_UP) if ok else None
                      for s, c, ok in zip(total, n, some)], dtype=object, index=t.index)


def zero_nulls(values: pd.Series) -> pd.Series:
    if values.dtype == object:  # DECIMAL sums
        return pd.Series(np.where(values.isna().to_numpy(), 0, values.to_numpy()), dtype=object, index=values.index)
    return values.fillna(0)


def joined(separator: str):
    """LISTAGG of a key's values in a batch: the values not NULL, in arrival order, joined."""
    def join(values: pd.Series):
        present = values.dropna()
        return separator.join(present) if len(present) else None
    return join


def concatenated(arrays: pd.Series):
    """ARRAY_AGG of a key's rows in a batch: their one-value arrays, in arrival order."""
    taken = [list(a) for a in arrays if a is not None and not (isinstance(a, float) and np.isnan(a))]
    return [x for a in taken for x in a] if taken else None


def extreme(old: pd.Series, new: pd.Series, agg: dict) -> pd.Series:
    """MIN/MAX of two columns (FIRST_VALUE: the old one, LAST_VALUE: the new one; LISTAGG:
    both, joined), NULL where both are."""
    function = agg["function"]
    o_na, n_na = old.isna().to_numpy(), new.isna().to_numpy()
    take = o_na & ~n_na
    both = ~o_na & ~n_na
    if function in ("LISTAGG", "ARRAY_AGG") and both.any():
        joined = old.astype(object).copy()
        if function == "LISTAGG":
            joined[both] = old[both] + agg["separator"] + new[both]
        else:  # (an array may come as a numpy array: list() takes either)
            joined[both] = pd.Series([list(o) + list(n) for o, n in zip(old[both], new[both])],
                                     dtype=object, index=old.index[both])
        return joined.mask(take, new) if take.any() else joined
    if function == "LAST_VALUE":
        take |= both
    elif function != "FIRST_VALUE" and both.any():
        better = (new < old) if function == "MIN" else (new > old)
        take |= both & better.fillna(False).to_numpy(dtype=bool)
    return old.mask(take, new) if take.any() else old


def shape(values: pd.Series, agg) -> pd.Series:
    """A result as it is emitted and stored: integers wrap at their type's width (Java)."""
    kind, bits = agg["out_kind"], agg["out_bits"]
    if kind == "int":
        missing = values.isna().to_numpy()
        ints = values.to_numpy(dtype="float64" if values.dtype == "float64" else "int64", na_value=0).astype("int64")
        if bits:
            ints = spreads.wrap(ints, bits)
        result = pd.Series(ints, dtype="Int64", index=values.index)
        return result.mask(missing) if missing.any() else result
    if kind == "float":  # a FLOAT's as Spark will store it, so an unchanged one compares equal
        return values.astype("float32").astype("float64") if agg.get("out_single") else values.astype("float64")
    if kind == "bool":
        return values.astype("boolean")
    return values.astype(object).where(values.notna(), None)


def equal(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Element-wise equality where NULL equals NULL."""
    na_a, na_b = a.isna().to_numpy(), b.isna().to_numpy()
    both = ~na_a & ~na_b
    eq = na_a & na_b
    if both.any() and a.dtype != object and b.dtype != object:  # numbers: vectorised
        return eq | (both & (a == b).fillna(False).to_numpy(dtype=bool))
    if both.any():
        av = a.to_numpy(dtype=object)[both]
        bv = b.to_numpy(dtype=object)[both]
        eq[both] = np.fromiter((same(x, y) for x, y in zip(av, bv)), dtype=bool, count=len(av))
    return eq


def same(x, y) -> bool:
    if isinstance(x, (list, np.ndarray)) or isinstance(y, (list, np.ndarray)):  # ARRAY_AGG's arrays
        return list(x) == list(y)
    return x == y
