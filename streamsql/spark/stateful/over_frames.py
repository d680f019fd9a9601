"""OVER aggregation for one bucket of partition keys, with vectorised pandas and numpy.

This module runs in Spark's Python workers and is shipped to them by value (cloudpickle),
so it imports only pandas and numpy (and ``accumulate``'s result shaping) and takes its
configuration as a plain dict, the *plan* (built by ``over.build_plan``):

    partition:  [column]            the PARTITION BY columns
    time:       column              the ORDER BY time attribute
    rowtime:    bool                event time (rows wait for the watermark) or processing time
    unit:       'ROWS' | 'RANGE'
    preceding:  rows, milliseconds, or None for UNBOUNDED PRECEDING (the frame ends at the
                current row, the only end Flink's streaming OVER has)
    aggs:       [{function, column, kind, out_kind, out_bits, out_scale, name}], LAG's also
                with offset (rows back) and default (a column, or None for NULL)
    columns:    [column]            the input columns, passed through to the output
    kinds:      {column: kind}      how each column is held in pandas
    ttl_ms:     'table.exec.state.ttl' in ms, or None: an idle partition's state expires
    ties:       [(column, descending, nulls first)]: order rows of equal time before arrival
    hashed:     bool                rows carry ``__h``, their partition's hash (the operator
                keeps ``history`` in generations by it: ``over``)

Flink's rowtime OVER operators buffer a row until the watermark passes its time, then
emit it with the aggregates over its frame: rows of equal time in arrival order for ROWS,
and for RANGE every row of that time (its peers) in the frame. A row at or below the
watermark when it arrives is late and dropped. Processing time emits every row as it
arrives, in arrival order.

A bucket's state is two tables: ``pending`` (rows waiting for the watermark, with their
time in ms ``__ms`` and arrival number ``__seq``) and ``history``, what later frames still
need, as *contributions*: per call ``__cs{i}`` (sum of non-NULL values), ``__cn{i}`` (their
count), ``__cm{i}`` (the extreme), ``__cv{i}`` (the value, for LAG, FIRST_VALUE and
LAST_VALUE), ``__cs{i}`` and ``__cq{i}`` (for STDDEV/VAR: the sum of values and of their squares,
which Flink's expansion of these calls over a window takes; ``spreads.over_spread``), and ``__k`` (rows). A raw row contributes its own value; for UNBOUNDED
PRECEDING one summary row per partition holds the totals so far (and its first or last
value that is not NULL), so the state stays one row per partition — plus, with LAG(x, n),
the partition's last n rows, which contribute their values only. A Python aggregate
function's rows carry its arguments (``__ca{i}_{j}``), a summary its accumulator, pickled
(``__cb{i}``): each frame is folded in Python (``python_aggregates``). ``fire`` computes every
frame at once: the rows are sorted by (partition, time, arrival), each row's frame is an
index range [lo, hi], sums and counts come from prefix sums, MIN/MAX and the positions of
the first and last values from a sparse table.

FIRST_VALUE and LAST_VALUE skip NULLs, as Flink's. LAG is Flink's streaming LagAggFunction:
the value ``offset`` rows before the frame's last row (for RANGE, the last of the current
row's peers: peers share one result), else the default of that last row; it keeps no
retraction, so its frame is UNBOUNDED PRECEDING.

With a state TTL, every history row carries ``__t``, when its partition last emitted
(processing time, epoch ms). ``expire`` drops a partition's history once that is longer
ago than the TTL and none of its rows is waiting for the watermark, as Flink's OVER
operators clean a key's state only when it has no rows left to process; a later row of
the partition starts afresh.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from streamsql.spark.stateful import accumulate, agg_values, python_aggregates, range_kernels, spreads

MS, SEQ, COUNT_ROWS, TOUCHED = "__ms", "__seq", "__k", "__t"
ARRIVED = "__a"  # with a state TTL: when a pending row arrived (processing time, epoch ms)
HASH = "__h"  # a row's partition hash (``generations.HASH``), carried when the plan is ``hashed``
VALUE_FUNCTIONS = ("LAG", "FIRST_VALUE", "LAST_VALUE")  # a row's value, not a running total
_FIRST = np.iinfo("int64").min  # a summary row sorts before every row of its partition


def accept(plan: dict, pending: pd.DataFrame | None, batch: pd.DataFrame, watermark_ms: int,
           next_seq: int, now_ms: int | None = None) -> tuple[pd.DataFrame | None, int]:
    """Add a micro-batch's rows to ``pending``, dropping late ones (at or below Flink's
    watermark, Spark's less 1 ms) and rows without a time: (pending, next_seq). With a state
    TTL and ``now_ms``, each row is stamped with its arrival (``expire``)."""
    batch = batch.reset_index(drop=True)
    for name, kind in plan["kinds"].items():
        batch[name] = accumulate.canonical(batch[name], kind)
    ms = to_ms(batch[plan["time"]])
    keep = ~np.isnan(ms)
    if plan["rowtime"]:
        keep &= ms >= watermark_ms
    batch = batch.loc[keep, carried(plan)].reset_index(drop=True)
    batch[MS] = ms[keep].astype("int64")
    batch[SEQ] = np.arange(next_seq, next_seq + len(batch), dtype="int64")
    if plan.get("ttl_ms") and now_ms is not None:
        batch[ARRIVED] = np.int64(now_ms)
    next_seq += len(batch)
    if batch.empty:
        return pending, next_seq
    if pending is None or pending.empty:
        return (batch if len(batch) else None), next_seq
    return pd.concat([pending, batch], ignore_index=True), next_seq


def carried(plan: dict) -> list[str]:
    """The input columns a pending row keeps: the plan's, and its partition hash when hashed."""
    return plan["columns"] + ([HASH] if plan.get("hashed") else [])


def ready(plan: dict, pending: pd.DataFrame | None, watermark_ms: int | None) -> np.ndarray:
    """Which pending rows ``fire`` emits: those the watermark passed (processing time: all)."""
    if pending is None:
        return np.zeros(0, dtype=bool)
    if plan["rowtime"]:
        return pending[MS].to_numpy() < watermark_ms
    return np.ones(len(pending), dtype=bool)


def to_ms(values: pd.Series) -> np.ndarray:
    """Epoch milliseconds as float64 (NaN for NULL) of a timestamp column (UTC, naive)."""
    stamps = values if pd.api.types.is_datetime64_dtype(values.dtype) else pd.to_datetime(values)
    out = np.full(len(stamps), np.nan)
    present = stamps.notna().to_numpy()
    if present.any():
        out[present] = stamps[present].to_numpy(dtype="datetime64[ms]").astype("int64")
    return out


def expire(plan: dict, pending: pd.DataFrame | None, history: pd.DataFrame | None,
           now_ms: int) -> pd.DataFrame | None:
    """``history`` without the partitions that were idle for longer than ``plan["ttl_ms"]``
    with no pending rows: those without pending rows idle that long now, and, where the
    pending rows carry their arrival (``ARRIVED``), those whose first pending row arrived
    that long after the partition last emitted (its state was gone by then)."""
    ttl = plan.get("ttl_ms")
    if not ttl or history is None or history.empty or TOUCHED not in history.columns:
        return history
    touched = history[TOUCHED].to_numpy(dtype="float64", na_value=np.inf)
    stale = touched < now_ms - ttl
    if not stale.any():
        return history
    if pending is not None and len(pending):
        keys = plan["partition"]
        arrived = (pending[ARRIVED].to_numpy(dtype="float64", na_value=-np.inf) if ARRIVED in pending.columns
                   else np.full(len(pending), -np.inf))  # (unknown: as if it never left the partition idle)
        both = pd.concat([history[keys], pending[keys]], ignore_index=True)
        ids = (both.groupby(keys, dropna=False, sort=False).ngroup().to_numpy() if keys
               else np.zeros(len(both), dtype="int64"))  # (no PARTITION BY: one partition)
        first = np.full(ids.max() + 1, np.inf)  # each partition's first pending arrival
        np.minimum.at(first, ids[len(history):], arrived)
        stale &= touched < first[ids[:len(history)]] - ttl
    kept = history[~stale]
    return kept.reset_index(drop=True) if len(kept) else None


def fire(plan: dict, pending: pd.DataFrame | None, history: pd.DataFrame | None,
         watermark_ms: int | None, now_ms: int | None = None
         ) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame]:
    """Emit the pending rows the watermark passed (processing time: all of them):
    (pending, history, output rows: the input columns, then one column per call).
    ``now_ms`` stamps the partitions that emit, with a state TTL."""
    names = plan["columns"] + [a["name"] for a in plan["aggs"]]
    if pending is None or pending.empty:
        return pending, history, pd.DataFrame(columns=names)
    ready_mask = ready(plan, pending, watermark_ms)
    firing, rest = pending[ready_mask], pending[~ready_mask]
    if firing.empty:
        return pending, history, pd.DataFrame(columns=names)
    rows = _contributions(plan, firing.reset_index(drop=True))
    old = history if history is not None and len(history) else None
    if plan.get("ttl_ms"):
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        rows[TOUCHED] = np.int64(now_ms)
        if old is not None and TOUCHED not in old.columns:  # a checkpoint from before the TTL
            old = old.assign(**{TOUCHED: np.int64(now_ms)})
        elif old is not None and old[TOUCHED].isna().any():  # rows from before it, folded in beside others
            old = old.assign(**{TOUCHED: old[TOUCHED].fillna(now_ms).astype("int64")})
    elif old is not None and TOUCHED in old.columns:  # restarted without the TTL
        old = old.drop(columns=[TOUCHED])
    combined = pd.concat([old, rows], ignore_index=True) if old is not None else rows
    new = np.r_[np.zeros(0 if old is None else len(old), dtype=bool), np.ones(len(rows), dtype=bool)]
    combined, new, group = _sorted(plan, combined, new)
    if TOUCHED in combined.columns:  # every row of a partition that emitted is touched now
        starts = np.r_[0, np.flatnonzero(group[1:] != group[:-1]) + 1]
        latest = np.maximum.reduceat(combined[TOUCHED].to_numpy(dtype="int64"), starts)
        combined[TOUCHED] = np.repeat(latest, np.diff(np.r_[starts, len(group)]))
    lo, hi = _frames(plan, combined[MS].to_numpy(), group)
    out = combined.loc[new, plan["columns"]].reset_index(drop=True)
    for i, agg in enumerate(plan["aggs"]):
        out[agg["name"]] = _aggregate(plan, agg, i, combined, lo[new], hi[new], group)
    history = _history(plan, combined, group, watermark_ms)
    rest = rest.reset_index(drop=True) if len(rest) else None
    return rest, history, out


def _contributions(plan, rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with what each contributes to a frame (``__s``, ``__n``, ``__m``, ``__k``)."""
    out = rows.copy()
    out[COUNT_ROWS] = np.ones(len(rows), dtype="int64")
    for i, agg in enumerate(plan["aggs"]):
        if agg.get("python") is not None:  # its arguments; a summary's accumulator (python_aggregates)
            for j, column in enumerate(agg["columns"]):
                out[f"__ca{i}_{j}"] = rows[column]
            out[f"__cb{i}"] = pd.Series([None] * len(rows), dtype=object)
            continue
        if agg["column"] is None:
            continue
        values = rows[agg["column"]]
        if agg["function"] in VALUE_FUNCTIONS:
            out[f"__cv{i}"] = values
            continue
        valid = values.notna().to_numpy()
        out[f"__cn{i}"] = valid.astype("int64")
        if agg["function"] in ("SUM", "AVG"):
            out[f"__cs{i}"] = agg_values.zero_nulls(values)
        if agg["function"] in ("MIN", "MAX"):
            out[f"__cm{i}"] = values
        if agg["function"] in spreads.SPREADS:  # SUM(x) and SUM(x * x), as Flink expands them
            out[f"__cs{i}"], out[f"__cq{i}"] = spreads.over_terms(values, agg["kind"])
    return out


def _sorted(plan, combined: pd.DataFrame, new: np.ndarray):
    """Rows in (partition, time, arrival) order — arrival alone for processing time — and
    each row's partition number."""
    keys = plan["partition"]
    group = (combined.groupby(keys, dropna=False, sort=False).ngroup().to_numpy() if keys
             else np.zeros(len(combined), dtype="int64"))
    # a summary row (time and arrival number below any row's) sorts first in its partition
    ties = [_tie_rank(combined[column], desc, nulls_first) for column, desc, nulls_first in plan.get("ties", [])]
    within = [combined[SEQ].to_numpy(), *reversed(ties)] + ([combined[MS].to_numpy()] if plan["rowtime"] else [])
    order = np.lexsort(within + [group])
    return combined.iloc[order].reset_index(drop=True), new[order], group[order]


def _tie_rank(values: pd.Series, desc: bool, nulls_first: bool) -> np.ndarray:
    """Ranks that sort ``values`` ascending as the key orders them (NULLs first or last)."""
    ranks = values.rank(method="dense", ascending=not desc, na_option="top" if nulls_first else "bottom")
    return ranks.to_numpy(dtype="float64")


def _frames(plan, ms: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's frame as positions [lo, hi] in the sorted rows."""
    n = len(ms)
    index = np.arange(n)
    starts = np.r_[0, np.flatnonzero(group[1:] != group[:-1]) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    if plan["unit"] == "RANGE":  # peers: every row of the same time ends the frame with it
        change = np.r_[np.flatnonzero((group[1:] != group[:-1]) | (ms[1:] != ms[:-1])), n - 1]
        hi = np.repeat(change, np.diff(np.r_[-1, change]))
    else:
        hi = index
    preceding = plan["preceding"]
    if preceding is None:
        return group_start, hi
    if plan["unit"] == "ROWS":
        return np.maximum(group_start, index - preceding), hi
    lo = np.empty(n, dtype="int64")
    for start, end in zip(starts, np.r_[starts[1:], n]):  # per partition: one binary search for all its rows
        times = ms[start:end]
        lo[start:end] = start + np.searchsorted(times, times - preceding, side="left")
    return lo, hi


def _aggregate(plan, agg, i, combined: pd.DataFrame, lo: np.ndarray, hi: np.ndarray, group: np.ndarray) -> pd.Series:
    """One call's result for the rows whose frames are [lo, hi]."""
    if agg["function"] in VALUE_FUNCTIONS:
        return _value(plan, agg, i, combined, lo, hi)
    if agg.get("python") is not None:
        return agg_values.shape(python_aggregates.over_values(agg, i, combined, lo, hi), agg)
    t = pd.DataFrame(index=range(len(lo)))
    function = agg["function"]
    rows = range_kernels.range_sum(combined[COUNT_ROWS].to_numpy(dtype="int64"), lo, hi)
    if agg["column"] is None:  # COUNT(*)
        t[f"__c{i}"] = pd.Series(rows, dtype="int64")
    else:
        count = range_kernels.range_sum(combined[f"__cn{i}"].to_numpy(dtype="int64"), lo, hi)
        if function == "COUNT":
            t[f"__c{i}"] = pd.Series(count, dtype="int64")
        elif function in ("SUM", "AVG"):
            t[f"__s{i}"] = pd.Series(range_kernels.range_sum(_sums(combined[f"__cs{i}"], agg), lo, hi))
            t[f"__n{i}"] = pd.Series(count, dtype="int64")
        elif function in spreads.SPREADS:
            sums = [range_kernels.partition_range_sum(combined[f"{c}{i}"].to_numpy(), lo, hi, group) for c in ("__cs", "__cq")]
            return spreads.over_spread(agg, count, *sums, clip=plan["preceding"] is not None)
        else:
            extreme = range_kernels.range_extreme(combined[f"__cm{i}"], lo, hi, function, agg["kind"])
            t[f"__m{i}"] = extreme.where(pd.Series(count > 0)) if agg["kind"] != "object" else pd.Series(
                [v if c > 0 else None for v, c in zip(extreme, count)], dtype=object)
    result = agg_values.result(dict(agg, ms=None), i, t)
    return agg_values.shape(result, agg)


def _value(plan, agg, i, combined: pd.DataFrame, lo: np.ndarray, hi: np.ndarray) -> pd.Series:
    """LAG, FIRST_VALUE or LAST_VALUE for the rows whose frames are [lo, hi]."""
    values = combined[f"__cv{i}"]
    if agg["function"] == "LAG":  # the frame is the partition's rows so far (lo: its first)
        first_row = lo + (combined[SEQ].to_numpy()[lo] < 0)  # past the summary row
        at = hi - agg["offset"]
        found = at >= first_row
        default = combined[agg["default"]].take(hi).reset_index(drop=True) if agg.get("default") else None
        return agg_values.shape(_taken(values, at, found, default), agg)
    n = len(values)
    valid = values.notna().to_numpy()
    if agg["function"] == "FIRST_VALUE":
        at = range_kernels.sparse_extreme(np.where(valid, np.arange(n), n), lo, hi, np.minimum)
    else:
        at = range_kernels.sparse_extreme(np.where(valid, np.arange(n), -1), lo, hi, np.maximum)
    return agg_values.shape(_taken(values, at, (at >= 0) & (at < n)), agg)


def _taken(values: pd.Series, at: np.ndarray, found: np.ndarray, otherwise: pd.Series | None = None) -> pd.Series:
    """values[at] where ``found``, else ``otherwise`` (NULL without it)."""
    picked = values.take(np.where(found, at, 0)).reset_index(drop=True)
    return picked.where(pd.Series(found), otherwise) if otherwise is not None else picked.where(pd.Series(found))


def _history(plan, combined: pd.DataFrame, group: np.ndarray, watermark_ms: int | None) -> pd.DataFrame | None:
    """What frames of later rows still need: the last N rows per partition (ROWS N), the
    rows within the range of the watermark (RANGE), or one summary row per partition."""
    keep_columns = plan["partition"] + [MS, SEQ, COUNT_ROWS] + contribution_columns(plan) + (
        [TOUCHED] if TOUCHED in combined.columns else []) + ([HASH] if plan.get("hashed") else [])
    preceding = plan["preceding"]
    if preceding is None:
        summaries = _summaries(plan, combined, group)[keep_columns]
        back = max((agg["offset"] for agg in plan["aggs"] if agg["function"] == "LAG"), default=0)
        if not back:
            return summaries
        raw = combined[SEQ].to_numpy() >= 0  # LAG's rows back, not the summaries: their values only
        last = combined[raw].groupby(group[raw], sort=False).tail(back)
        return pd.concat([summaries, _values_only(plan, last[keep_columns])], ignore_index=True)
    if plan["unit"] == "ROWS":
        if preceding == 0:
            return None
        kept = combined.groupby(group, sort=False).tail(preceding)
    else:
        ms = combined[MS].to_numpy()
        floor = watermark_ms if plan["rowtime"] and watermark_ms is not None else ms.max()
        kept = combined[ms >= floor - preceding]
    return kept[keep_columns].reset_index(drop=True) if len(kept) else None


def _values_only(plan, rows: pd.DataFrame) -> pd.DataFrame:
    """Rows kept for LAG, contributing their values and nothing to the totals."""
    rows = rows.copy()
    nothing = np.zeros(len(rows), dtype=bool)
    rows[COUNT_ROWS] = 0
    for i, agg in enumerate(plan["aggs"]):
        if agg["column"] is None or agg["function"] in VALUE_FUNCTIONS:
            continue
        rows[f"__cn{i}"] = 0
        if agg["function"] in spreads.SPREADS:
            rows[f"__cs{i}"] = rows[f"__cs{i}"] * 0
            rows[f"__cq{i}"] = rows[f"__cq{i}"] * 0
        elif agg["function"] in ("SUM", "AVG"):
            rows[f"__cs{i}"] = rows[f"__cs{i}"].where(nothing, 0)
        else:
            rows[f"__cm{i}"] = rows[f"__cm{i}"].where(nothing)  # NULL, in the column's dtype
    return rows


def _summaries(plan, combined: pd.DataFrame, group: np.ndarray) -> pd.DataFrame:
    """One row per partition holding the totals of all its rows so far."""
    last = np.r_[np.flatnonzero(group[1:] != group[:-1]), len(group) - 1]
    starts = np.r_[0, last[:-1] + 1]
    out = combined.iloc[last].reset_index(drop=True)
    out[MS] = _FIRST
    out[SEQ] = -1
    out[COUNT_ROWS] = range_kernels.range_sum(combined[COUNT_ROWS].to_numpy(dtype="int64"), starts, last)
    for i, agg in enumerate(plan["aggs"]):
        if agg.get("python") is not None:
            out[f"__cb{i}"] = python_aggregates.over_summaries(agg, i, combined, starts, last)
            for j in range(len(agg["columns"])):
                out[f"__ca{i}_{j}"] = out[f"__ca{i}_{j}"].where(np.zeros(len(out), dtype=bool))
            continue
        if agg["column"] is None:
            continue
        if agg["function"] == "LAG":  # LAG reads the rows kept after the summary, never it
            out[f"__cv{i}"] = out[f"__cv{i}"].where(np.zeros(len(out), dtype=bool))
            continue
        if agg["function"] in VALUE_FUNCTIONS:  # the first or last value that is not NULL
            out[f"__cv{i}"] = _value(plan, agg, i, combined, starts, last).values
            continue
        out[f"__cn{i}"] = range_kernels.range_sum(combined[f"__cn{i}"].to_numpy(dtype="int64"), starts, last)
        if agg["function"] in spreads.SPREADS:
            for c in ("__cs", "__cq"):
                out[f"{c}{i}"] = range_kernels.partition_range_sum(combined[f"{c}{i}"].to_numpy(), starts, last, group)
        if agg["function"] in ("SUM", "AVG"):
            out[f"__cs{i}"] = range_kernels.range_sum(_sums(combined[f"__cs{i}"], agg), starts, last)
        if agg["function"] in ("MIN", "MAX"):
            out[f"__cm{i}"] = range_kernels.range_extreme(combined[f"__cm{i}"], starts, last, agg["function"], agg["kind"]).values
    return out


def contribution_columns(plan) -> list[str]:
    """The per-call contribution columns a row of ``history`` carries."""
    names = []
    for i, agg in enumerate(plan["aggs"]):
        if agg.get("python") is not None:
            names += [f"__cb{i}", *[f"__ca{i}_{j}" for j in range(len(agg["columns"]))]]
            continue
        if agg["column"] is None:
            continue
        if agg["function"] in VALUE_FUNCTIONS:
            names.append(f"__cv{i}")
            continue
        names.append(f"__cn{i}")
        if agg["function"] in spreads.SPREADS:
            names += [f"__cs{i}", f"__cq{i}"]
        else:
            names.append(f"__cs{i}" if agg["function"] in ("SUM", "AVG") else f"__cm{i}" if agg["function"] in ("MIN", "MAX") else None)
    return [n for n in names if n]


def _sums(values: pd.Series, agg) -> np.ndarray:
    if agg["kind"] == "int":
        return values.to_numpy(dtype="int64", na_value=0)
    if agg["kind"] == "float":
        return values.to_numpy(dtype="float64", na_value=0.0)
    return values.to_numpy(dtype=object)
