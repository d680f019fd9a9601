"""Vectorised kernels over each row's frame ``[lo, hi]`` of a sorted column (the OVER
operator's, spark.stateful.over_frames): sums from prefix sums (per partition, exactly for
DECIMALs), MIN/MAX from a sparse table. numpy and pandas only; shipped by value with the
OVER operator."""

from __future__ import annotations

import numpy as np
import pandas as pd

from streamsql.spark.stateful import spreads


def range_sum(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """sum(values[lo:hi + 1]) per row, from prefix sums (integers wrap as Java's do)."""
    prefix = np.concatenate([np.zeros(1, dtype=values.dtype) if values.dtype != object else
                             np.array([0], dtype=object), np.cumsum(values)])
    return prefix[hi + 1] - prefix[lo]


def partition_range_sum(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, group: np.ndarray) -> np.ndarray:
    """sum(values[lo:hi + 1]) per row, from running sums that restart at each partition: a
    frame from the partition's start (UNBOUNDED PRECEDING) is its running sum, added in the
    order Flink's accumulator adds, with no other partition's sums subtracted from it."""
    if values.dtype == object:  # DECIMALs, exactly: a difference of prefix sums loses nothing
        with spreads.exact():
            return range_sum(values, lo, hi)
    running = pd.Series(values).groupby(group, sort=False).cumsum().to_numpy()
    at_start = (lo == 0) | (group[np.maximum(lo - 1, 0)] != group[lo])
    return running[hi] - np.where(at_start, 0, running[np.maximum(lo - 1, 0)])


def range_extreme(values: pd.Series, lo: np.ndarray, hi: np.ndarray, function: str, kind: str) -> pd.Series:
    """MIN or MAX of values[lo:hi + 1] per row, NULLs skipped (a sparse table for numbers)."""
    if kind not in ("int", "float"):
        items = values.to_numpy(dtype=object)
        pick = min if function == "MIN" else max
        out = []
        for a, b in zip(lo, hi):
            present = [v for v in items[a:b + 1] if v is not None and v is not pd.NaT and v == v]
            out.append(pick(present) if present else None)
        return pd.Series(out, dtype=object)
    if kind == "int":
        fill = np.iinfo("int64").max if function == "MIN" else np.iinfo("int64").min
        array = values.to_numpy(dtype="float64" if values.dtype == "float64" else "int64", na_value=fill)
        array = array.astype("int64")
    else:
        fill = np.inf if function == "MIN" else -np.inf
        array = values.to_numpy(dtype="float64", na_value=np.nan)
        array = np.where(np.isnan(array), fill, array)
    out = sparse_extreme(array, lo, hi, np.minimum if function == "MIN" else np.maximum)
    return pd.Series(out, dtype="Int64" if kind == "int" else "float64")


def sparse_extreme(array: np.ndarray, lo: np.ndarray, hi: np.ndarray, combine) -> np.ndarray:
    """combine (np.minimum or np.maximum) over array[lo:hi + 1] per row, from a sparse table."""
    levels = [array]
    width = 1
    while width * 2 <= len(array):
        previous = levels[-1]
        levels.append(combine(previous[:-width], previous[width:]))
        width *= 2
    length = hi - lo + 1
    level = np.floor(np.log2(np.maximum(length, 1))).astype("int64")
    out = np.empty(len(lo), dtype=array.dtype)
    for k in np.unique(level):
        rows = level == k
        table = levels[k]
        out[rows] = combine(table[lo[rows]], table[hi[rows] - (1 << k) + 1])
    return out
