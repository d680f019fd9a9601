"""Window aggregation by slices, as Flink's slicing window operator does it (pandas only).

A HOP window of SIZE every SLIDE holds SIZE / SLIDE slices of SLIDE; a CUMULATE window of
SIZE every STEP, 1 to SIZE / STEP slices of STEP; a TUMBLE window, one slice. A row is
folded into the one slice holding it (``accumulate.fold``, keyed by the group keys and the
slice's end), not into every window holding it: a HOP or CUMULATE row costs one row of
work where the windows would cost SIZE / SLIDE. When the watermark passes window ends,
each window's result is combined from its slices' accumulators (sums, counts, extremes)
and its slices' multisets (DISTINCT), and slices no window still needs are dropped.

A Python aggregate function's window merges its slices' accumulators (``python_aggregates``).

Shipped to Python workers by value (imports pandas, numpy and ``accumulate`` only); the
window is ``plan["window"]``: kind, SIZE, SLIDE or STEP, OFFSET (ms).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from streamsql.changelog import INSERT
from streamsql.spark.stateful import accumulate, agg_values, python_aggregates

SLICE = "__sem"  # a group key: the slice's end (epoch ms)
START, END = "__wstart", "__wend"  # a fired window's bounds (epoch ms)
NEVER = -(1 << 62)  # no window fired yet


def width(window: dict) -> int:
    """A slice's width: the step between two window ends."""
    return {"TUMBLE": window["SIZE"], "HOP": window.get("SLIDE", 0), "CUMULATE": window.get("STEP", 0)}[window["kind"]]


def sliceable(window: dict) -> bool:
    """Whether every window is a whole number of slices (Flink requires it of CUMULATE)."""
    step = width(window)
    return window["kind"] == "TUMBLE" or (step > 0 and window["SIZE"] % step == 0)


def _base(window: dict, ends: np.ndarray) -> np.ndarray:
    """The SIZE-aligned start holding the slice that ends at ``ends`` (a CUMULATE window's start)."""
    before = ends - 1 - window.get("OFFSET", 0)
    return ends - 1 - np.mod(before, window["SIZE"])


def _last_end(window: dict, ends: np.ndarray) -> np.ndarray:
    """The end of the last window holding each slice: when the slice can go."""
    if window["kind"] == "TUMBLE":
        return ends
    if window["kind"] == "HOP":
        return ends + window["SIZE"] - window["SLIDE"]
    return _base(window, ends) + window["SIZE"]


def _first_after(window: dict, ends: np.ndarray, fired: int) -> np.ndarray:
    """The first end after ``fired`` of a window holding each slice (ends step by the width)."""
    step = width(window)
    return ends + np.maximum(0, -((ends - fired - 1) // step)) * step


def next_end(plan: dict, state, fired: int) -> int | None:
    """When the bucket's next window ends (its timer), or None."""
    if state is None:
        return None
    ends = state.acc[SLICE].to_numpy(dtype="int64")
    return int(_first_after(plan["window"], ends, fired).min())


def _windows(window: dict, frame: pd.DataFrame, fired: int, watermark: int) -> pd.DataFrame:
    """``frame``'s rows once per window that holds their slice and ends in (fired, watermark]."""
    ends = frame[SLICE].to_numpy(dtype="int64")
    step = width(window)
    first = _first_after(window, ends, fired)
    last = np.minimum(_last_end(window, ends), watermark)
    count = np.where(first <= last, (last - first) // step + 1, 0)
    rows = np.repeat(np.arange(len(frame)), count)
    within = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
    window_ends = first[rows] + within * step
    out = frame.iloc[rows].reset_index(drop=True)
    out[END] = window_ends
    out[START] = _base(window, ends)[rows] if window["kind"] == "CUMULATE" else window_ends - window["SIZE"]
    return out


def fire(plan: dict, state, fired: int, watermark: int):
    """(the state left, the results of the windows that ended in (fired, watermark]):
    ``__rowkind`` (+I), the group keys, START and END, then the aggregates."""
    keys = [name for name, _ in plan["keys"] if name != SLICE]
    names = [a["name"] for a in plan["aggs"]]
    window = plan["window"]
    if state is None:
        return None, _empty(keys, names)
    wkeys = keys + [START, END]
    spread = _windows(window, state.acc, fired, watermark)
    if spread.empty:
        out = _empty(keys, names)
    else:
        how = {accumulate.CNT: "sum"}
        for column in spread.columns:
            if column.startswith(("__c", "__n", "__s")) and column[3:].isdigit():
                how[column] = "sum"
            elif column.startswith("__m") and column[3:].isdigit():
                how[column] = plan["aggs"][int(column[3:])]["function"].lower()
            elif column.startswith("__u") and column[3:].isdigit():  # a Python aggregate's: merged
                how[column] = list
        t = spread.groupby(wkeys, dropna=False, sort=False).agg(how).reset_index()
        for i, agg in enumerate(plan["aggs"]):
            if agg.get("python") is not None:
                t[f"__w{i}"] = python_aggregates.values(agg, t[f"__u{i}"])
        multisets = []
        for ms in state.multisets:
            m = _windows(window, ms, fired, watermark)
            m = m.groupby(wkeys + [accumulate.VAL], dropna=False, sort=False)[accumulate.MULT].sum().reset_index()
            multisets.append(m[m[accumulate.MULT] > 0])
        t = accumulate._multiset_stats(plan, t, multisets, wkeys)
        out = t[wkeys].copy()
        for i, (agg, name) in enumerate(zip(plan["aggs"], names)):
            out[name] = agg_values.shape(agg_values.result(agg, i, t), agg).to_numpy()
        out.insert(0, accumulate.ROWKIND, INSERT)
    return _drop_done(window, state, watermark), out


def _drop_done(window: dict, state, watermark: int):
    """The state without the slices whose last window has fired."""
    keep = _last_end(window, state.acc[SLICE].to_numpy(dtype="int64")) > watermark
    if keep.all():
        return state
    acc = state.acc.loc[keep].reset_index(drop=True)
    if acc.empty:
        return None
    multisets = [ms.loc[_last_end(window, ms[SLICE].to_numpy(dtype="int64")) > watermark].reset_index(drop=True)
                 for ms in state.multisets]
    return accumulate.BucketState(acc, multisets)


def _empty(keys: list[str], names: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: [] for c in [accumulate.ROWKIND] + keys + [START, END] + names})
