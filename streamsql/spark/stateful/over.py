"""OVER aggregation on ``transformWithStateInPandas``: Flink's rowtime and proctime OVER (#10).

Spark has no streaming window function. Flink's OverAggregate emits each row once, with
its aggregates, when the watermark passes the row (processing time: when it arrives);
the output is insert-only. Many partition keys per call, as the other stateful operators:
keys are hashed into buckets. A bucket keeps two things in Spark's state store,
checkpointed with the query:

- its *pending* rows (waiting for the watermark) and arrival counter, one ValueState (Arrow
  IPC): the watermark bounds them, and a micro-batch's rows only join them;
- the *history* later frames need (a partition's last N rows, its rows within the RANGE, or
  one summary row), in ``generations`` by the partition's hash: it grows with the
  partitions, so a firing reads and rewrites only the partitions whose rows it emits.

An event-time timer per bucket at its earliest pending row fires the bucket once the
watermark passes that row (``over_frames.fire`` computes every ready frame at once).
"""

from __future__ import annotations

import sys
import time

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import INSERT, ROWKIND_COLUMN
from streamsql.spark.stateful import (accumulate, default_buckets, generations, over_frames, python_aggregates,
                                      range_kernels, state_layouts, transport)
from streamsql.spark.stateful.specs import PYTHON, AggSpec, int_bits, result_type, value_kind

BUCKET = "__bucket"


def over(frame: DataFrame, partition: list[str], time: str, rowtime: bool, unit: str, preceding: int | None,
         calls: list[tuple], buckets: int | None = None,
         ttl_ms: int | None = None, ties: list[tuple[str, bool, bool]] = ()) -> DataFrame:
    """Every row of ``frame`` (insert-only; with a watermark on ``time`` for event time)
    with ``function(column) OVER (PARTITION BY partition ORDER BY time {unit} BETWEEN
    preceding PRECEDING AND CURRENT ROW)`` appended per call (function, column or None for
    COUNT(*), output name; for LAG a fourth item, ``{"offset": n, "default": column or
    None}``; for a Python aggregate function, PYTHON with ``{"python": its PythonFunction,
    "columns": its argument columns}``): ``__rowkind`` (always +I) first, then the input columns.
    With ``ttl_ms`` ('table.exec.state.ttl') a partition idle that long forgets its rows
    (``over_frames.expire``). ``ties`` (column, descending, NULLs first) order rows of equal
    time before their arrival does (a TemporalSort's further ORDER BY keys)."""
    if unit not in ("ROWS", "RANGE"):
        raise ValueError(f"an OVER frame is ROWS or RANGE, not {unit!r}")
    if preceding is not None and any(call[0] == "LAG" for call in calls):
        raise ValueError("LAG's frame is every row up to the current one: UNBOUNDED PRECEDING")
    if buckets is None:
        buckets = default_buckets(frame)
    for function, column, name, *extra in calls:
        default = dict(*extra).get("default")
        if default:  # LAG's default takes the value's type (Flink asks for that cast)
            frame = frame.withColumn(default, F.col(f"`{default}`").cast(frame.schema[column].dataType))
    fields = {f.name: f for f in frame.schema.fields}
    columns = list(fields)
    aggs, out = [], [T.StructField(ROWKIND_COLUMN, T.StringType(), False)]
    out += [T.StructField(c, fields[c].dataType, True) for c in columns]
    for function, column, name, *extra in calls:
        in_type = fields[column].dataType if column else None
        if function == PYTHON:  # a Python aggregate function: its arguments' columns, what folds them
            from streamsql.spark.dialect import spark_type

            given = dict(*extra)
            python, columns_in = given["python"], list(given["columns"])
            out_type = T._parse_datatype_string(spark_type(python.result_type))
            options = {"python": python_aggregates.folder(python, len(columns_in), given.get("distinct", False)),
                       "udaf": python.name, "columns": columns_in, "result": out_type.simpleString()}
        elif function in over_frames.VALUE_FUNCTIONS:
            out_type, options = in_type, dict(*extra)
        else:
            out_type, options = result_type(AggSpec(function, column, output_name=name), in_type), {}
        aggs.append({"function": function, "column": column, "name": name,
                     "kind": value_kind(in_type) if in_type is not None else "int",
                     "out_kind": value_kind(out_type), "out_bits": int_bits(out_type),
                     "out_scale": out_type.scale if isinstance(out_type, T.DecimalType) else None, **options})
        out.append(T.StructField(name, out_type, True))
    plan = {"partition": list(partition), "time": time, "rowtime": bool(rowtime), "unit": unit,
            "preceding": preceding, "aggs": aggs, "columns": columns, "buckets": buckets,
            "kinds": {c: value_kind(fields[c].dataType) for c in columns}, "ttl_ms": ttl_ms,
            "ties": [list(t) for t in ties], "hashed": True}
    hashed = F.xxhash64(*([F.col(f"`{c}`") for c in partition] or [F.lit(0)]))
    bucketed = frame.withColumn(over_frames.HASH, hashed).withColumn(
        BUCKET, F.pmod(hashed, F.lit(buckets)).cast("int"))
    _ship_by_value()
    return transport.transform(bucketed, BUCKET, OverProcessor(plan), T.StructType(out), "EventTime" if rowtime else "None")


class OverProcessor(StatefulProcessor):
    """One call per bucket and micro-batch (and per fired timer): every ready row of the bucket."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        # (the ValueState's second table, the whole history, is an earlier layout's: never written)
        self.pending = state_layouts.Tables(handle, self.plan, ["pending", "history"], "OVER")
        self.history = generations.Generations(handle, self.plan, ["history"], "OVER", self.plan["ttl_ms"],
                                               expires=_retiring(self.plan))

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        # names with a leading '_' arrive renamed
        batch.columns = self.plan["columns"] + [over_frames.HASH, BUCKET]
        next_seq, pending = self._pending()
        watermark = timerValues.getCurrentWatermarkInMs() if self.plan["rowtime"] else 0
        pending, next_seq = over_frames.accept(self.plan, pending, batch, watermark, next_seq,
                                               int(time.time() * 1000))
        if self.plan["rowtime"]:  # the rows wait for the watermark: the history is not read
            self._keep(pending, next_seq)
            return
        yield from self._fire(pending, next_seq, None)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        next_seq, pending = self._pending()
        yield from self._fire(pending, next_seq, timerValues.getCurrentWatermarkInMs())

    def _pending(self):
        next_seq, (pending, whole) = self.pending.load()
        if whole is not None or (pending is not None and over_frames.HASH not in pending.columns):
            raise ValueError("This checkpoint's OVER state was written by an earlier streamsql (a bucket's whole"
                             " history in one value, rows without their partition's hash): finish the job with"
                             " it, or start afresh")
        return next_seq, pending

    def _fire(self, pending, next_seq, watermark):
        """Emit the ready rows with the history of their partitions, read from the
        generations that hold it; the rest of the history stays as it is."""
        firing = over_frames.ready(self.plan, pending, watermark)
        if not firing.any():
            self._keep(pending, next_seq)
            return
        now_ms = int(time.time() * 1000)
        hashes = pending[over_frames.HASH].to_numpy(dtype="int64")
        newest = int(pending[over_frames.MS].to_numpy()[firing].max())  # (processing time's RANGE ends there)
        _, (history,) = self.history.load(hashes[firing])
        if self.plan["ttl_ms"]:
            history = over_frames.expire(self.plan, pending, history, now_ms)
        pending, history, out = over_frames.fire(self.plan, pending, history, watermark, now_ms)
        # with a RANGE, rows below the watermark (processing time: now) less the range are
        # in no later frame: their generations go once every row of them is
        floor = None
        if _retiring(self.plan):
            floor = (watermark if self.plan["rowtime"] else newest) - self.plan["preceding"]
        self.history.store(0, [history], now_ms, floor, pinned=hashes[~firing])
        self._keep(pending, next_seq)
        if len(out):
            out.insert(0, ROWKIND_COLUMN, INSERT)
            yield out

    def _keep(self, pending, next_seq) -> None:
        if self.plan["rowtime"] and pending is not None and len(pending):
            self.handle.registerTimer(int(pending[over_frames.MS].min()) + 1)  # Flink's watermark passes it
        # (the counter stays when no row waits: history rows keep their arrival numbers, and
        # processing time orders rows by arrival alone)
        self.pending.store(next_seq, [pending, None], keep_counter=True)

    def close(self) -> None:
        pass


def _retiring(plan: dict) -> str | None:
    """The column by which the watermark retires history rows: their time, with a RANGE of
    a bounded width (a row is in no frame once the watermark is past it by the width)."""
    return over_frames.MS if plan["unit"] == "RANGE" and plan["preceding"] is not None else None


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, generations, state_layouts, over_frames, range_kernels, sys.modules[__name__])
