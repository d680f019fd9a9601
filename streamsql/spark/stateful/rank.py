"""Rank (Top-N) and Deduplicate on ``transformWithStateInPandas``: a changelog out (#10).

Spark has no streaming ROW_NUMBER; Flink's Rank keeps each partition's top N and emits
the changes as rows enter, move and leave it. Many partition keys per call, as the
GroupAggregate does: keys are hashed into buckets, one call ranks every partition of a
bucket a micro-batch touches (``ranking.fold``). A bucket's rows live in Spark's state
store, checkpointed with the query, in generations (``generations``): a micro-batch reads
and writes the rows of the partitions it brings, not the whole bucket.
"""

from __future__ import annotations

import sys
import time

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.spark.stateful import accumulate, default_buckets, generations, ranking, transport

BUCKET = "__bucket"


def rank(frame: DataFrame, data: list[str], partition: list[str], order: list[tuple[str, bool]], limit: int,
         rank_column: str | None, later_wins: bool = False, buckets: int | None = None,
         ttl_ms: int | None = None, per_batch: bool = False, window_end: str | None = None,
         rank_type: str = "ROW_NUMBER", update_before: bool = True) -> DataFrame:
    """The changelog of ``SELECT data[, ROW_NUMBER() OVER (PARTITION BY partition ORDER BY
    order) AS rank_column] ... WHERE rank_column <= limit`` over ``frame`` (insert-only, or a
    changelog with ``__rowkind``): ``__rowkind``, the ``data`` columns, then the rank number
    (a BIGINT) when ``rank_column`` is given. ``order`` is (column, descending) pairs; with
    ``ttl_ms`` a partition's rows expire that long after it last changed (ranking.fold).
    ``per_batch``: every partition's rows arrive in one micro-batch (a window Top-N over a
    window aggregate's output: all of a window's rows fire with the same watermark), so each
    batch is ranked on its own, its top N emitted once (+I) and nothing kept. ``window_end``:
    a window Top-N over a window TVF's rows (insert-only), each window ranked once the
    watermark passes its end, this column in epoch ms (``window_rank``). ``rank_type`` RANK or
    DENSE_RANK numbers rows equal in ``order`` alike and keeps them all (a window Top-N
    only: its windows are ranked once, so no tied row moves). ``update_before`` False: no ``-U``
    rows (the consumer takes UPDATE_AFTER only, plan.update_kinds)."""
    if limit < 1:
        raise ValueError("a Top-N needs N >= 1")
    if rank_type != "ROW_NUMBER" and not (per_batch or window_end is not None):
        raise ValueError(f"{rank_type}: only a window Top-N ranks ties")
    if buckets is None:
        buckets = default_buckets(frame)
    fields = {f.name: f for f in frame.schema.fields}
    plan = {"partition": list(partition), "order": [(c, bool(d)) for c, d in order], "limit": int(limit),
            "rank": rank_column, "data": list(data), "rowkind": ROWKIND_COLUMN in fields,
            "later_wins": bool(later_wins), "rank_type": rank_type, "buckets": buckets, "ttl_ms": ttl_ms, "per_batch": bool(per_batch),
            "hashed": window_end is None and not per_batch, "update_before": bool(update_before)}  # rows kept in generations, by partition hash
    stored = ranking._stored_columns({**plan, "hashed": False})  # (the hash is computed below)
    columns = ([ROWKIND_COLUMN] if plan["rowkind"] else []) + stored
    if window_end is not None:
        plan["window_end"] = window_end
        columns += [] if window_end in columns else [window_end]
    missing = [c for c in columns if c not in fields]
    if missing:
        raise ValueError(f"Columns {missing} are not in the input ({', '.join(fields)})")
    plan["columns"] = columns + ([generations.HASH] if plan["hashed"] else []) + [BUCKET]
    out = [T.StructField(ROWKIND_COLUMN, T.StringType(), False)] + [
        T.StructField(c, fields[c].dataType, True) for c in data]
    if rank_column is not None:
        out.append(T.StructField(rank_column, T.LongType(), True))
    hashed = F.xxhash64(*([F.col(f"`{c}`") for c in partition] or [F.lit(0)]))
    selected = frame.select(*[F.col(f"`{c}`") for c in columns])
    if plan["hashed"]:
        selected = selected.withColumn(generations.HASH, hashed)
    bucketed = selected.withColumn(BUCKET, F.pmod(hashed, F.lit(buckets)).cast("int"))
    _ship_by_value()
    if window_end is not None:
        from streamsql.spark.stateful.window_rank import WindowRankProcessor, local_top, ship

        ship()
        # Each Arrow batch's own top N per partition first, where the rows are read: only
        # those can be in a window's top N, and few rows then travel to the window operator.
        bucketed = bucketed.mapInPandas(local_top(plan), schema=bucketed.schema)
        return transport.transform(bucketed, BUCKET, WindowRankProcessor(plan), T.StructType(out), "EventTime")
    return transport.transform(bucketed, BUCKET, RankProcessor(plan), T.StructType(out), "None")


class RankProcessor(StatefulProcessor):
    """One call per bucket and micro-batch: rank all of the bucket's touched partitions."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        if self.plan.get("hashed"):
            self.state = generations.Generations(handle, self.plan, ["rows"], "Rank", self.plan["ttl_ms"])

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"]  # names with a leading '_' arrive renamed
        if self.plan["per_batch"]:
            out = ranking.fold(self.plan, None, 0, batch)[2]
            if len(out):
                yield out
            return
        now_ms = int(time.time() * 1000)
        next_seq, (state,) = self.state.load(batch[generations.HASH].to_numpy(dtype="int64"))
        state, next_seq, out = ranking.fold(self.plan, state, next_seq, batch, now_ms)
        self.state.store(next_seq, [state], now_ms)
        if len(out):
            yield out

    def close(self) -> None:
        pass


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, generations, ranking, sys.modules[__name__])
