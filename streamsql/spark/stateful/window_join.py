"""Window joins over unbounded input on ``transformWithStateInPandas``: Flink's WindowJoin (#10).

``L [LEFT | RIGHT | FULL] JOIN R ON L.k = R.k AND L.window_start = R.window_start AND
L.window_end = R.window_end``, each side a window TVF's rows: Flink joins a window's rows
once, when the watermark passes the window's end, and emits inserts only (an outer join's
row without a partner padded with NULLs, never retracted). Spark's stream-stream join has
inner window joins (which run there) but its outer joins need time bounds and an interval,
not a window. This operator, like Flink's WindowJoinOperator:

- takes both sides in one stream hashed into buckets by the join keys, window_start and
  window_end among them (``join.both_sides``; each side's window end in epoch ms is its
  first column after the keys, ``__lt`` / ``__rt``, as ``join_cut`` writes them);
- drops a row whose window the watermark has passed (late, as Flink drops it) and keeps the
  others per bucket (``state_layouts.Tables``);
- fires an event-time timer per bucket at its earliest pending window end: the rows of every
  window that ended are joined at once (keys equal and not NULL, then the residual ON
  condition, ``predicates``), padded where the join type keeps a row without a partner,
  emitted (``+I``) and dropped.

A window join of two window aggregates needs no state: both aggregates emit a window in the
micro-batch whose watermark passed its end, so each batch is joined by itself (``per_batch``).
One window aggregate joined with a TVF's rows: the aggregate's rows are never late
(``fired``) and join at the timer of the micro-batch that emitted them. A semi (anti) join
emits the left rows with (without) a partner; NOT IN's is NULL-aware within a window
(``not_in``).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import INSERT, ROWKIND_COLUMN as ROWKIND
from streamsql.spark.stateful import accumulate, joining, predicates, state_layouts, transport
from streamsql.spark.stateful.join import BUCKET, JOIN_TYPES, SEMI, both_sides

_ORDER = ("__lo", "__ro")  # a due row's place on its side


def window_join(left: DataFrame, right: DataFrame, keys: int, join_type: str, residual: tuple | None = None,
                buckets: int | None = None, per_batch: bool = False, null_aware: bool = False,
                fired: tuple = (False, False)) -> DataFrame:
    """The window join of ``left`` and ``right`` on their first ``keys`` columns (the window's
    start and end among them), each side's window end (epoch ms) the column after them:
    ``__rowkind`` (+I), then every other column of ``left``, then of ``right``. Both sides
    are insert-only. ``per_batch``: each side is a window aggregate's rows, every window's
    rows of both sides arriving in the micro-batch whose watermark passed its end (one
    watermark fires them all): each batch is joined by itself, and nothing is kept.
    ``fired``: per side, whether it is a window aggregate's rows (emitted as the watermark
    passes their window's end, so never late: they wait for the timer of the same micro-batch).
    A semi (anti) join emits the left rows with (without) a partner; ``null_aware``: an anti
    join that is NOT IN's (``not_in``), the first key its value, hashed by the others."""
    if join_type not in JOIN_TYPES:
        raise ValueError(f"a window join is one of {', '.join(JOIN_TYPES)}, not {join_type!r}")
    if null_aware and (join_type != "LeftAntiJoin" or keys < 2 or residual is not None):
        raise ValueError("a NULL-aware window join is an anti join on a value and the window's keys, nothing else")
    bucketed, plan, out = both_sides(left, right, keys, join_type, buckets, hashed_from=1 if null_aware else 0)
    plan.update(left_time=plan["left"][0], right_time=plan["right"][0], residual=residual, null_aware=null_aware,
                fired=[bool(f) for f in fired])
    ship()
    processor = BatchWindowJoinProcessor(plan) if per_batch else WindowJoinProcessor(plan)
    return transport.transform(bucketed, BUCKET, processor, out, "None" if per_batch else "EventTime")


def accept(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None, batch: pd.DataFrame,
           watermark: int):
    """(each side's waiting rows with the batch's on-time rows added)."""
    batch = joining.canonical_batch(plan, batch)
    side = batch[joining.SIDE].to_numpy()
    sides = []
    fired = plan.get("fired") or (False, False)
    for index, (state, own, time) in enumerate(((left, plan["left"], plan["left_time"]),
                                                (right, plan["right"], plan["right_time"]))):
        rows = batch.loc[side == index, plan["keys"] + own]
        ends = rows[time].to_numpy(dtype="float64", na_value=np.nan)
        # late: its window fired (no window: never joined), as Flink drops it; a window
        # aggregate's rows arrive as their window fires, never late
        rows = rows.loc[ends > (-np.inf if fired[index] else watermark)]
        sides.append(joining.appended(state, rows))
    return tuple(sides)


def fire(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None, watermark: int):
    """(left rows waiting, right rows waiting, the joined rows of every window the watermark
    passed)."""
    due, waiting = [], []
    for state, time in ((left, plan["left_time"]), (right, plan["right_time"])):
        if state is None:
            due.append(None)
            waiting.append(None)
            continue
        ready = state[time].to_numpy(dtype="float64") <= watermark
        due.append(state.loc[ready].reset_index(drop=True) if ready.any() else None)
        rest = state.loc[~ready].reset_index(drop=True)
        waiting.append(rest if len(rest) else None)
    return waiting[0], waiting[1], match(plan, due[0], due[1])


def next_end(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None) -> int | None:
    """The earliest window end a bucket waits for (its timer)."""
    ends = [int(s[t].min()) for s, t in ((left, plan["left_time"]), (right, plan["right_time"])) if s is not None]
    return min(ends) if ends else None


def match(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None) -> pd.DataFrame:
    """The join of ended windows' rows: pairs with equal, non-NULL keys for which the
    residual holds, and the rows an outer join keeps without a partner, padded (a semi join:
    the left rows with a partner; an anti join: those without)."""
    join_type = plan["join_type"]
    if join_type in SEMI:
        return _semi(plan, left, right)
    parts = []
    pairs = _pairs(plan, left, right)
    if pairs is not None:
        parts.append(pairs)
    for index, (rows, other) in enumerate(((left, plan["right"]), (right, plan["left"]))):
        if joining.padded_sides(join_type)[index] and rows is not None:
            alone = np.ones(len(rows), dtype=bool)
            if pairs is not None:
                alone[pairs[_ORDER[index]].to_numpy(dtype="int64")] = False
            if alone.any():
                kinds = plan["kinds"]
                parts.append(rows.loc[alone].assign(**{c: joining.nulls(kinds[c], int(alone.sum())) for c in other}))
    names = plan["left"] + plan["right"]
    if not parts:
        return pd.DataFrame({c: [] for c in [ROWKIND] + names})
    with warnings.catch_warnings():  # all-NULL padding: its dtype is set just below
        warnings.simplefilter("ignore", FutureWarning)
        out = pd.concat([p[names] for p in parts], ignore_index=True)
    return _emitted(plan, out, names)


def _emitted(plan: dict, out: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    for name in names:  # NULL padding leaves floats and NaN behind
        out[name] = joining._canonical(out[name], plan["kinds"][name])
    out.insert(0, ROWKIND, INSERT)
    return out


def _pairs(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None) -> pd.DataFrame | None:
    """The pairs of rows with equal, non-NULL keys for which the residual holds, each with
    its rows' places on their sides (``__lo``, ``__ro``); None for none."""
    if left is None or right is None:
        return None
    keys = plan["keys"]
    a = joining._matching(left.assign(**{_ORDER[0]: np.arange(len(left))}), keys)
    b = joining._matching(right.assign(**{_ORDER[1]: np.arange(len(right))}), keys)
    if a.empty or b.empty:
        return None
    joining.shared_dtypes(a, b, keys)
    pairs = a.merge(b, on=keys)
    if plan["residual"] is not None and len(pairs):
        pairs = pairs.loc[predicates.holds(plan["residual"], pairs)]
    return pairs if len(pairs) else None


def _semi(plan: dict, left: pd.DataFrame | None, right: pd.DataFrame | None) -> pd.DataFrame:
    """A window semi (anti) join's output: the left rows that have a partner (have none)."""
    names = plan["output"]
    if left is None or left.empty:
        return pd.DataFrame({c: [] for c in [ROWKIND] + names})
    if plan.get("null_aware"):
        kept = not_in(plan, left, right)
    else:
        matched = np.zeros(len(left), dtype=bool)
        pairs = _pairs(plan, left, right)
        if pairs is not None:
            matched[pairs[_ORDER[0]].to_numpy(dtype="int64")] = True
        kept = matched if plan["join_type"] == "LeftSemiJoin" else ~matched
    return _emitted(plan, left.loc[kept, names].reset_index(drop=True), names)


def not_in(plan: dict, left: pd.DataFrame, right: pd.DataFrame | None) -> np.ndarray:
    """Per left row, whether ``value NOT IN (the right values of its window)`` is TRUE: the
    first key is the value, the others (the window's bounds, other correlated keys) choose
    the right rows it is compared with. TRUE when there are none; else only when the value
    is not NULL and no right value equals it or is NULL (NULL makes it UNKNOWN)."""
    if right is None:
        return np.ones(len(left), dtype=bool)
    # the regular join's rule: a row has no partner exactly when NOT IN is TRUE for it
    return joining.null_aware_matches(left, right.assign(**{joining.COUNT: 1}), plan["keys"]) == 0


class WindowJoinProcessor(StatefulProcessor):
    """One call per bucket and micro-batch, and per fired timer."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = state_layouts.Tables(handle, self.plan, ["left", "right"], "window join")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"] + [BUCKET]  # names with a leading '_' arrive renamed
        next_seq, (left, right) = self.state.load()
        before = next_end(self.plan, left, right)
        left, right = accept(self.plan, left, right, batch, timerValues.getCurrentWatermarkInMs())
        upcoming = next_end(self.plan, left, right)
        if upcoming is not None and (before is None or upcoming < before):
            self.handle.registerTimer(upcoming)
        self.state.store(next_seq, [left, right])
        return iter(())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        next_seq, (left, right) = self.state.load()
        left, right, out = fire(self.plan, left, right, timerValues.getCurrentWatermarkInMs())
        upcoming = next_end(self.plan, left, right)
        if upcoming is not None:
            self.handle.registerTimer(upcoming)
        self.state.store(next_seq, [left, right])
        if len(out):
            yield out

    def close(self) -> None:
        pass


class BatchWindowJoinProcessor(StatefulProcessor):
    """One call per bucket and micro-batch: the batch's windows are whole (``per_batch``)."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"] + [BUCKET]  # names with a leading '_' arrive renamed
        left, right = accept(self.plan, None, None, batch, watermark=-(2 ** 63))
        out = match(self.plan, left, right)
        if len(out):
            yield out

    def close(self) -> None:
        pass


def ship() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, state_layouts, joining, predicates, sys.modules[__name__])
