"""Window Top-N and window deduplication over a window TVF's rows, on
``transformWithStateInPandas`` (#10).

Flink's WindowRank ranks the rows of each window (``PARTITION BY window_start,
window_end, ...``) once, when the watermark passes the window's end, and emits its top N
(insert-only); a window deduplication is the same with N = 1, ordered by the time
attribute. Spark has no streaming ROW_NUMBER. This operator (``rank.rank`` with a
``window_end`` builds it):

- hashes the partition keys into buckets (many partitions per call, as every stateful
  operator here does); a bucket's state is one table of candidate rows, each with its
  window's end in epoch ms and its arrival number (``ranking.SEQ``, the tie-breaker);
- drops a row whose window's end the watermark has passed (late, as Flink's WindowRank
  drops it), and keeps only each partition's top N of the rest (``ranking._ranked``: a
  row below them can never rise, the input being insert-only);
- fires an event-time timer per bucket at its earliest pending window end: every window
  of the bucket that ended is numbered and emitted (``+I``) and its rows dropped.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import INSERT, ROWKIND_COLUMN
from streamsql.spark.stateful import accumulate, ranking, state_layouts


def local_top(plan: dict):
    """A ``mapInPandas`` function: each batch of rows less those below their partition's top N
    within the batch (the input being insert-only, they can never rise into the window's)."""
    def top(batches):
        for batch in batches:
            batch.columns = plan["columns"]  # names with a leading '_' arrive renamed
            ranked = ranking._ranked(plan, batch.assign(**{ranking.SEQ: np.arange(len(batch), dtype="int64")}))
            yield ranked.sort_values(ranking.SEQ, kind="stable")[plan["columns"]]

    return top


def accept(plan: dict, state: pd.DataFrame | None, next_seq: int, batch: pd.DataFrame, watermark: int):
    """(the bucket's candidates with the batch's on-time rows among them, next_seq)."""
    ends = batch[plan["window_end"]].to_numpy(dtype="float64", na_value=np.nan)
    batch = batch.loc[ends > watermark]  # late: its window fired (NULL time: dropped, as Flink drops it)
    if batch.empty:
        return state, next_seq
    adds = batch[plan["columns"][:-1]].copy()
    adds[ranking.SEQ] = np.arange(next_seq, next_seq + len(adds), dtype="int64")
    candidates = adds if state is None else pd.concat([state, adds], ignore_index=True)
    return ranking._ranked(plan, candidates).drop(columns=[ranking.RANK]).reset_index(drop=True), next_seq + len(adds)


def fire(plan: dict, state: pd.DataFrame | None, watermark: int):
    """(the candidates left, the windows that ended by ``watermark``: their top N as +I rows)."""
    names = list(plan["data"]) + ([plan["rank"]] if plan["rank"] is not None else [])
    if state is None:
        return None, pd.DataFrame({c: [] for c in [ROWKIND_COLUMN] + names})
    ready = state[plan["window_end"]].to_numpy(dtype="float64") <= watermark
    ranked = ranking._ranked(plan, state.loc[ready])
    out = ranked[list(plan["data"])].reset_index(drop=True)
    if plan["rank"] is not None:
        out[plan["rank"]] = ranked[ranking.RANK].to_numpy(dtype="int64")
    out.insert(0, ROWKIND_COLUMN, INSERT)
    left = state.loc[~ready].reset_index(drop=True)
    return (left if len(left) else None), out


def next_end(state: pd.DataFrame | None, plan: dict) -> int | None:
    return None if state is None else int(state[plan["window_end"]].min())


class WindowRankProcessor(StatefulProcessor):
    """One call per bucket and micro-batch, and per fired timer."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = state_layouts.Tables(handle, self.plan, ["rows"], "WindowRank")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"]  # names with a leading '_' arrive renamed
        next_seq, (before,) = self.state.load()
        state, next_seq = accept(self.plan, before, next_seq, batch, timerValues.getCurrentWatermarkInMs())
        if state is not None and (before is None or next_end(state, self.plan) < next_end(before, self.plan)):
            self.handle.registerTimer(next_end(state, self.plan))
        self.state.store(next_seq, [state])
        return iter(())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        next_seq, (state,) = self.state.load()
        state, out = fire(self.plan, state, timerValues.getCurrentWatermarkInMs())
        if state is not None:
            self.handle.registerTimer(next_end(state, self.plan))
        self.state.store(next_seq, [state])
        if len(out):
            yield out

    def close(self) -> None:
        pass


def ship() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, state_layouts, ranking, sys.modules[__name__])
