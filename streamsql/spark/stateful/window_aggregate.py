"""Window aggregation on ``transformWithStateInPandas``: the windows Spark cannot stream (#10).

Spark streams TUMBLE and HOP aggregates of plain aggregates natively. It has no CUMULATE
window, no DISTINCT aggregate in a streaming aggregation, and no window aggregate over
the output of a stateful operator. This operator runs Flink's WindowAggregate for those:

- rows arrive assigned to their windows (``spark.windows.window_sql``: one row per window
  the row belongs to), with the window end and the row's *slice end* in epoch ms;
- a row whose slice end (the end of the earliest window it belongs to) the watermark has
  passed is late and dropped, as Flink's slicing window operator drops it;
- each window's accumulators are GroupAggregate's (``accumulate.fold``: COUNT, SUM, AVG,
  MIN, MAX, DISTINCT, FILTER, and FIRST_VALUE, LAST_VALUE, LISTAGG, ARRAY_AGG and
  JSON_OBJECTAGG, which take the window's rows in the order they come) keyed by the group
  keys and the window;
- an event-time timer per bucket at its earliest pending window end fires, once the
  watermark reaches it, every window of the bucket that ended: each is emitted once
  (``+I``, insert-only, as Flink's) and its state dropped.

Spark's watermark is Flink's plus 1 ms (Flink's trails the largest event time by the delay
and 1 ms), and Flink fires a window when its watermark reaches ``window_end - 1``: both
say a window fires when Spark's watermark reaches its end.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import INSERT, ROWKIND_COLUMN
from streamsql.spark.stateful import accumulate, default_buckets, state_layouts, window_slices, transport
from streamsql.spark.stateful.group_aggregate import BUCKET, bucketed_input, build_plan
from streamsql.spark.stateful.specs import AggSpec

WINDOW_END_MS = "__wem"  # a group key: the window's end in epoch ms (when it fires)
SLICE_END_MS = "__sem"  # the end of the earliest window the row belongs to (when it is late)


def window_aggregate(frame: DataFrame, keys: list[str], aggregates: list[AggSpec], end_key: str,
                     slice_end: "F.Column", buckets: int | None = None, proctime: bool = False,
                     late: bool = True) -> DataFrame:
    """``SELECT keys, aggregates FROM frame GROUP BY keys``, one row per window once the
    watermark passes its end: ``__rowkind`` (+I), the keys, the aggregates. ``frame`` holds
    insert-only rows assigned to windows; ``keys`` include the window's bounds, ``end_key``
    its end; ``slice_end`` is the row's slice end in epoch ms (a Column over ``frame``).
    ``late``: whether rows can be late (not when another window operator fired them)."""
    buckets = default_buckets(frame) if buckets is None else buckets
    keyed = frame.withColumn(WINDOW_END_MS, F.unix_millis(F.col(f"`{end_key}`"))).withColumn(SLICE_END_MS, slice_end)
    all_keys = list(keys) + [WINDOW_END_MS]
    plan, output = build_plan(keyed.schema, all_keys, aggregates)
    plan.update(buckets=buckets, layout="blob", ttl_ms=None, out_keys=list(keys), proctime=proctime, late=late)
    bucketed, plan["columns"] = bucketed_input(keyed, all_keys, aggregates, all_keys, buckets, [SLICE_END_MS])
    schema = T.StructType([f for f in output.fields if f.name != WINDOW_END_MS])
    _ship_by_value()
    return transport.transform(bucketed, BUCKET, WindowAggregateProcessor(plan), schema, time_mode(plan))


def time_mode(plan: dict) -> str:
    """Event-time windows fire as the watermark passes their end; processing-time windows
    as the clock does (Spark runs a micro-batch every trigger interval to fire the timers)."""
    return "ProcessingTime" if plan.get("proctime") else "EventTime"


def clock(plan: dict, timer_values) -> int:
    """The time windows are measured against: the watermark, or the micro-batch's clock."""
    if plan.get("proctime"):
        return timer_values.getCurrentProcessingTimeInMs()
    return timer_values.getCurrentWatermarkInMs()


def lateness_clock(plan: dict, timer_values) -> float:
    """What a row's slice end must exceed to be on time. A window over another window
    operator's rows takes them all: that operator fired them in this micro-batch, as the
    watermark passed their windows, and Flink forwards the watermark after them."""
    return clock(plan, timer_values) if plan.get("late", True) else -np.inf


def sliced_window_aggregate(frame: DataFrame, keys: list[str], aggregates: list[AggSpec], window: dict,
                            time: str, bounds: dict[str, str], key_order: list[str],
                            buckets: int | None = None, proctime: bool = False, late: bool = True) -> DataFrame:
    """The same rows as ``window_aggregate``, from the window's input rows folded into slices
    (``window_slices``): ``frame`` holds each input row once, with its event time in epoch ms
    (``time``); ``keys`` are the group keys besides the window's; ``bounds`` names the key
    columns that hold the window's start, end or time (``key_order``: all keys, in order)."""
    buckets = default_buckets(frame) if buckets is None else buckets
    ts, step = F.col(f"`{time}`"), F.lit(window_slices.width(window))
    keyed = frame.withColumn(window_slices.SLICE, ts - F.pmod(ts - F.lit(window.get("OFFSET", 0)), step) + step)
    all_keys = list(keys) + [window_slices.SLICE]
    plan, output = build_plan(keyed.schema, all_keys, aggregates)
    plan.update(buckets=buckets, layout="blob", ttl_ms=None, window=dict(window), proctime=proctime, late=late)
    bucketed, plan["columns"] = bucketed_input(keyed, all_keys, aggregates, keys, buckets)
    fields = {f.name: f for f in output.fields}
    schema = T.StructType([fields[ROWKIND_COLUMN]] + [fields[k] for k in keys]
                          + [T.StructField(window_slices.START, T.LongType()), T.StructField(window_slices.END, T.LongType())]
                          + [fields[a.name] for a in aggregates])
    _ship_by_value()
    fired = transport.transform(bucketed, BUCKET, SlicedWindowProcessor(plan), schema, time_mode(plan))
    millis = {"start": F.col(window_slices.START), "end": F.col(window_slices.END),
              "time": F.col(window_slices.END) - F.lit(1)}
    return fired.select(F.col(ROWKIND_COLUMN), *[
        F.timestamp_millis(millis[bounds[k]]).alias(k) if k in bounds else F.col(f"`{k}`") for k in key_order],
        *[F.col(f"`{a.name}`") for a in aggregates])


class SlicedWindowProcessor(StatefulProcessor):
    """One call per bucket and micro-batch, and per fired timer: slices in, windows out."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        fields = [T.StructField("buckets", T.IntegerType(), False), T.StructField("fired", T.LongType(), False),
                  T.StructField("acc", T.BinaryType(), False)]
        fields += [T.StructField(f"ms{j}", T.BinaryType(), False) for j in range(len(self.plan["multisets"]))]
        self.state = handle.getValueState("bucket", T.StructType(fields))

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"]  # names with a leading '_' arrive renamed
        before, fired = self._load()
        watermark = lateness_clock(self.plan, timerValues)
        ends = batch[window_slices.SLICE].to_numpy(dtype="float64", na_value=np.nan)
        batch = batch.loc[ends > watermark]  # late: the slice's first window fired (NULL time: dropped)
        if batch.empty:
            return iter(())
        state, _ = accumulate.fold(self.plan, before, batch)
        upcoming = window_slices.next_end(self.plan, state, fired)
        if before is None or upcoming < window_slices.next_end(self.plan, before, fired):
            self.handle.registerTimer(upcoming)
        self._store(state, fired)
        return iter(())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        state, fired = self._load()
        watermark = clock(self.plan, timerValues)
        state, out = window_slices.fire(self.plan, state, fired, watermark)
        if state is not None:
            self.handle.registerTimer(window_slices.next_end(self.plan, state, watermark))
        self._store(state, watermark)
        if len(out):
            yield out

    def _load(self):
        stored = self.state.get()
        if stored is None:
            return None, window_slices.NEVER
        state_layouts._check_buckets(stored[0], self.plan)
        return accumulate.decode(stored[2:]), stored[1]

    def _store(self, state, fired: int) -> None:
        if state is None:
            self.state.clear()
        else:
            self.state.update((self.plan["buckets"], int(fired), *accumulate.encode(state)))

    def close(self) -> None:
        pass


def slice_end(kind: str, parameters: dict, time: str, start: str, end: str) -> "F.Column":
    """A row's slice end in epoch ms, over the window relation's row (its event time in ms
    ``time``, its window's ``start`` and ``end``): the end of the earliest window holding it."""
    ts = F.col(f"`{time}`")
    if kind == "TUMBLE":
        return F.unix_millis(F.col(f"`{end}`"))
    if kind == "HOP":
        slide = F.lit(parameters["SLIDE"])
        return ts - F.pmod(ts - F.lit(parameters.get("OFFSET", 0)), slide) + slide
    if kind == "CUMULATE":
        step, base = parameters["STEP"], F.unix_millis(F.col(f"`{start}`"))
        return base + (F.floor((ts - base) / F.lit(step)) + 1).cast("long") * F.lit(step)
    raise ValueError(f"no window operator for {kind} windows")


def accept(plan: dict, state, batch: pd.DataFrame, watermark: int):
    """The bucket's state with the batch's on-time rows folded in (pure pandas)."""
    slice_end = batch[SLICE_END_MS].to_numpy(dtype="float64", na_value=np.nan)
    on_time = slice_end > watermark  # NaN (no event time) compares False: dropped, as Flink drops it
    if not on_time.all():
        batch = batch.loc[on_time]
    if batch.empty:
        return state
    state, _ = accumulate.fold(plan, state, batch)
    return state


def fire(plan: dict, state, watermark: int):
    """(the state left, the windows that ended by ``watermark`` as +I rows)."""
    names = [a["name"] for a in plan["aggs"]]
    empty = pd.DataFrame({c: [] for c in [ROWKIND_COLUMN] + plan["out_keys"] + names})
    if state is None:
        return None, empty
    ends = state.acc[WINDOW_END_MS].to_numpy(dtype="float64", na_value=np.inf)
    ready = ends <= watermark
    if not ready.any():
        return state, empty
    done = state.acc.loc[ready]
    out = done[plan["out_keys"]].reset_index(drop=True)
    for i, name in enumerate(names):
        out[name] = done[f"__o{i}"].to_numpy()
    out.insert(0, ROWKIND_COLUMN, INSERT)
    acc = state.acc.loc[~ready].reset_index(drop=True)
    if acc.empty:
        return None, out
    multisets = [ms.loc[ms[WINDOW_END_MS].to_numpy(dtype="float64", na_value=np.inf) > watermark]
                 .reset_index(drop=True) for ms in state.multisets]
    return accumulate.BucketState(acc, multisets), out


def next_end(state) -> int | None:
    """The earliest window end pending in the bucket (its timer), or None."""
    if state is None:
        return None
    return int(state.acc[WINDOW_END_MS].min())


class WindowAggregateProcessor(StatefulProcessor):
    """One call per bucket and micro-batch, and per fired timer."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = state_layouts.make(handle, self.plan)

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"]  # names with a leading '_' arrive renamed
        before = self.state.load()
        state = accept(self.plan, before, batch, lateness_clock(self.plan, timerValues))
        if state is not None and (before is None or next_end(state) < next_end(before)):
            self.handle.registerTimer(next_end(state))
        self.state.store(state)
        return iter(())

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        state, out = fire(self.plan, self.state.load(), clock(self.plan, timerValues))
        if state is not None:
            self.handle.registerTimer(next_end(state))
        self.state.store(state)
        if len(out):
            yield out

    def close(self) -> None:
        pass


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, state_layouts, window_slices, sys.modules[__name__])
