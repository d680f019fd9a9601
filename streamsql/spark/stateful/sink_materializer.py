"""Flink's sink upsert materializers on ``transformWithStateInPandas`` (plan.sink_materialize
says when one runs): the changes of a query whose upsert key differs from the sink's
PRIMARY KEY, made into the changes of the sink's key.

- ``deduplicate`` (ON CONFLICT DO DEDUPLICATE, Flink's SinkUpsertMaterializer): a key's
  live rows in arrival order. A row added (``+I``/``+U``) replaces the live row of its upsert
  key, or joins the end, and is written (``+I`` for a key with none, else ``+U``); a row
  retracted (``-U``/``-D``) leaves, and when it was the latest the one before it is written
  again (``+U``), or the key is deleted (``-D``) when none is left.
- ``compact`` (ON CONFLICT DO NOTHING / DO ERROR, Flink's WatermarkCompactingSinkMaterializer):
  a key's changes wait, tagged with the watermark they arrived under, until the watermark
  passes it; then they are applied to the key's written row as above, and one live row is
  written (``+I``, ``+U`` if it differs, ``-D`` when none is left). Two or more: NOTHING
  keeps the written row (or writes the first, when there is none), ERROR fails the job.

Rows are told apart by their upsert key (``__uk``, as JSON), else whole (``__row``); keys
(``__pk``) are hashed into buckets, a bucket's micro-batch is one call, its state one value
(state_layouts.Tables): the live rows (DEDUPLICATE), or the written rows and the waiting
changes (NOTHING, ERROR). Within a key, changes apply in the order the query emitted them
(``__seq``, taken before the shuffle): one upsert key's changes come from one task, in order.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamsql.changelog import ADDS, DELETE, INSERT, ROWKIND_COLUMN as ROWKIND, UPDATE_AFTER
from streamsql.spark.stateful import state_layouts, transport

PK, UK, ROW, SEQ, TAG, BUCKET = "__pk", "__uk", "__row", "__seq", "__tag", "__bucket"
CONFLICT = ("Primary key constraint violation: multiple distinct records with the same primary key detected."
            " Use ON CONFLICT DO NOTHING to keep the first record.")


class ConflictError(Exception):
    """ON CONFLICT DO ERROR: two live rows under one primary key."""


def _rows(plan: dict, stored: pd.DataFrame | None, batch: pd.DataFrame, order: list[str]):
    """The stored rows then the batch's (sorted by ``order``) as one frame, with the arrays
    the loops read: key, identity (upsert key, else the whole row), whole row and kind."""
    keep = [PK, UK, ROW] + plan["columns"]
    # a key's changes together, in order: the key as a code (sorting the JSON text costs more)
    codes = pd.factorize(batch[order[0]])[0]
    batch = batch.iloc[np.lexsort([batch[c].to_numpy() for c in reversed(order[1:])] + [codes])]
    parts = [part[keep + [ROWKIND]] for part in (stored.assign(**{ROWKIND: INSERT}) if stored is not None else None,
                                                 batch) if part is not None and len(part)]
    rows = pd.concat(parts, ignore_index=True) if parts else batch[keep + [ROWKIND]].reset_index(drop=True)
    same = rows[UK if plan["upsert_key"] else ROW].to_numpy(dtype=object)
    held = 0 if stored is None else len(stored)
    return rows, rows[PK].to_numpy(dtype=object), same, rows[ROW].to_numpy(dtype=object), \
        rows[ROWKIND].to_numpy(dtype=object), held


def _find(at: list, same, target) -> int:
    for i, index in enumerate(at):
        if same[index] == target:
            return i
    return -1


def _one_identity(plan: dict, pk, same) -> np.ndarray:
    """Each row's key has a single upsert key among its stored rows and changes: its live
    rows are at most one, and its changes are computed column-wise (no key conflicts, the
    usual case). Without an upsert key a key may hold the same row twice: never."""
    if not plan["upsert_key"] or not len(pk):
        return np.zeros(len(pk), dtype=bool)
    grouped = pd.Series(pd.factorize(same)[0]).groupby(pd.factorize(pk)[0])
    return (grouped.transform("min") == grouped.transform("max")).to_numpy()


def _deduplicate_one(pk, kind, held: int, fast: np.ndarray):
    """The keys with one upsert key, column-wise: a key has a row before a change when its
    change before added one (its first: when a row is stored); an add writes +I or +U, a
    retraction of a held row -D. (changes as (trigger, kind, row) arrays; the kept rows)."""
    changed = np.flatnonzero(fast[held:]) + held
    stored = np.flatnonzero(fast[:held])
    if not len(changed):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object), stored.tolist()
    keys, adds = pk[changed], np.isin(kind[changed], ADDS)
    first = np.r_[True, keys[1:] != keys[:-1]]
    had = np.where(first, pd.Series(keys).isin(set(pk[stored])).to_numpy(), np.r_[False, adds[:-1]])
    written = adds | had
    kinds = np.where(adds, np.where(had, UPDATE_AFTER, INSERT), DELETE)[written].astype(object)
    last = np.r_[keys[1:] != keys[:-1], True]
    untouched = stored[~pd.Series(pk[stored]).isin(set(keys)).to_numpy()]
    return changed[written], kinds, untouched.tolist() + changed[last & adds].tolist()


def deduplicate(plan: dict, live: pd.DataFrame | None, batch: pd.DataFrame):
    """(the live rows after the batch, or None; the changes to write)."""
    rows, pk, same, _, kind, held = _rows(plan, live, batch, [PK, SEQ])
    by_key = plan["upsert_key"]
    fast = _one_identity(plan, pk, same)
    fast_at, fast_kinds, kept = _deduplicate_one(pk, kind, held, fast)
    lists: dict = {}
    for i in range(held):
        if not fast[i]:
            lists.setdefault(pk[i], []).append(i)
    out_kinds, out_rows, triggers = [], [], []
    for i in range(held, len(rows)):
        if fast[i]:
            continue
        triggers.append(i)
        at = lists.setdefault(pk[i], [])
        if kind[i] in ADDS:
            out_kinds.append(INSERT if not at else UPDATE_AFTER)
            out_rows.append(i)
            found = _find(at, same, same[i]) if by_key else -1
            if found == -1:
                at.append(i)
            else:
                at[found] = i
            continue
        found = _find(at, same, same[i])
        if found == -1:
            triggers.pop()
            continue  # (Flink: state cleared by its TTL)
        last = found == len(at) - 1
        del at[found]
        if not at:
            out_kinds.append(DELETE)
            out_rows.append(i)
        elif last:
            out_kinds.append(UPDATE_AFTER)
            out_rows.append(at[-1])
        else:
            triggers.pop()
    kept += [i for at in lists.values() for i in at]
    # both paths' changes in the order of the changes that made them
    order = np.argsort(np.r_[fast_at, np.asarray(triggers, dtype=np.int64)], kind="stable")
    kinds = np.r_[fast_kinds, np.asarray(out_kinds, dtype=object)][order]
    at = np.r_[fast_at, np.asarray(out_rows, dtype=np.int64)][order]
    return _kept(rows, kept, plan), _changes(rows, kinds.tolist(), at.tolist(), plan)


def compact(plan: dict, written: pd.DataFrame | None, waiting: pd.DataFrame | None, watermark: int):
    """Apply the changes that arrived under a watermark below ``watermark`` to the written
    rows: (the written rows, the changes still waiting, each or None; the changes to write).
    Raises ConflictError for DO ERROR."""
    due = waiting[TAG].to_numpy() < watermark if waiting is not None else None
    if due is None or not due.any():
        return written, waiting, _changes(None, [], [], plan)
    rows, pk, same, whole, kind, held = _rows(plan, written, waiting.loc[due], [PK, TAG, SEQ])
    by_key = plan["upsert_key"]
    fast = _one_identity(plan, pk, same)
    out_kinds, out_rows, current = _compact_one(pk, whole, kind, held, fast)
    current.update({pk[i]: i for i in range(held) if not fast[i]})
    pending: dict = {}
    for i in range(held, len(rows)):
        if not fast[i]:
            pending.setdefault(pk[i], []).append(i)
    for key, changes in pending.items():
        previous = current.get(key)
        at = [previous] if previous is not None else []
        for i in changes:
            if kind[i] in ADDS:
                found = _find(at, same, same[i]) if by_key else -1
                if found == -1:
                    at.append(i)
                else:
                    at[found] = i
            else:
                found = _find(at, same, same[i])
                if found != -1:
                    del at[found]
        if len(at) > 1:
            if plan["strategy"] == "ERROR":
                raise ConflictError(CONFLICT)
            if previous is None:
                out_kinds.append(INSERT)
                out_rows.append(at[0])
                current[key] = at[0]
        elif not at:
            if previous is not None:
                out_kinds.append(DELETE)
                out_rows.append(previous)
                del current[key]
        elif previous is None or whole[at[0]] != whole[previous]:
            out_kinds.append(INSERT if previous is None else UPDATE_AFTER)
            out_rows.append(at[0])
            current[key] = at[0]
    rest = waiting.loc[~due]
    return (_kept(rows, list(current.values()), plan), (rest.reset_index(drop=True) if len(rest) else None),
            _changes(rows, out_kinds, out_rows, plan))


def _compact_one(pk, whole, kind, held: int, fast: np.ndarray):
    """The keys with one upsert key, column-wise: after its changes a key holds the row of
    its last change if that added one, else none; then as below (+I, +U if it differs, -D).
    (the changes' kinds and rows; the written row of each such key)."""
    changed = np.flatnonzero(fast[held:]) + held
    written = {pk[i]: i for i in np.flatnonzero(fast[:held])}
    if not len(changed):
        return [], [], written
    keys = pk[changed]
    last = changed[np.r_[keys[1:] != keys[:-1], True]]
    kinds, at = [], []
    for i, adds in zip(last, np.isin(kind[last], ADDS)):
        previous = written.get(pk[i])
        if adds and (previous is None or whole[i] != whole[previous]):
            kinds.append(INSERT if previous is None else UPDATE_AFTER)
            at.append(i)
            written[pk[i]] = i
        elif not adds and previous is not None:
            kinds.append(DELETE)
            at.append(previous)
            del written[pk[i]]
    return kinds, at, written


def _kept(rows: pd.DataFrame, kept: list, plan: dict) -> pd.DataFrame | None:
    if not kept:
        return None
    return rows.iloc[kept][[PK, UK, ROW] + plan["columns"]].reset_index(drop=True)  # (a key's rows in list order)


def _changes(rows: pd.DataFrame | None, kinds: list, at: list, plan: dict) -> pd.DataFrame:
    if not at:
        return pd.DataFrame({ROWKIND: pd.Series([], dtype=object),
                             **{c: pd.Series([], dtype=object) for c in plan["columns"]}})
    out = rows.iloc[at][plan["columns"]].reset_index(drop=True)
    out.insert(0, ROWKIND, kinds)
    return out


def materialize(frame, spec, buckets: int | None = None):
    """The sink's changelog of ``frame`` (``__rowkind`` then the table's columns) through the
    materializer ``spec`` (plan.sink_materialize.Materialization)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from streamsql.plan.sink_materialize import WAITS_FOR_WATERMARK
    from streamsql.spark.stateful import default_buckets, ship_by_value

    columns = [c for c in frame.columns if c != ROWKIND]
    buckets = buckets or default_buckets(frame)
    plan = {"columns": columns, "buckets": buckets, "strategy": spec.strategy,
            "upsert_key": list(spec.upsert_key or [])}
    keyed = frame.select(
        "*", F.to_json(F.struct(*[F.col(f"`{c}`") for c in spec.primary_key])).alias(PK),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in (spec.upsert_key or columns)])).alias(UK),
        F.to_json(F.struct(*[F.col(f"`{c}`") for c in columns])).alias(ROW))
    keyed = keyed.mapInArrow(_sequence, T.StructType([*keyed.schema.fields, T.StructField(SEQ, T.LongType(), False)]))
    bucketed = keyed.withColumn(BUCKET, F.pmod(F.xxhash64(F.col(PK)), F.lit(buckets)).cast("int"))
    plan["all"] = list(bucketed.columns)
    out = T.StructType([T.StructField(ROWKIND, T.StringType(), False)]
                       + [f for f in frame.schema.fields if f.name in columns])
    ship_by_value(state_layouts, sys.modules[__name__])
    timed = spec.strategy in WAITS_FOR_WATERMARK
    return transport.transform(bucketed, BUCKET, MaterializeProcessor(plan), out, "EventTime" if timed else "None")


def _sequence(batches):
    """Each row's place in the query's output, before the shuffle: its task's partition, then
    its position there (``monotonically_increasing_id``, which a stream cannot call)."""
    import pyarrow as pa
    from pyspark import TaskContext

    at = TaskContext.get().partitionId() << 33
    for batch in batches:
        yield batch.append_column(SEQ, pa.array(range(at, at + batch.num_rows), type=pa.int64()))
        at += batch.num_rows


class MaterializeProcessor(StatefulProcessor):
    """One call per bucket and micro-batch (and, for NOTHING and ERROR, per fired timer)."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = state_layouts.Tables(handle, self.plan, ["rows", "waiting"], "SinkMaterializer")

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["all"]  # names with a leading '_' arrive renamed
        _, (stored, waiting) = self.state.load()
        if self.plan["strategy"] == "DEDUPLICATE":
            live, out = deduplicate(self.plan, stored, batch)
            self.state.store(0, [live, None])
            if len(out):
                yield out
            return
        watermark = timerValues.getCurrentWatermarkInMs()
        written, waiting, out = compact(self.plan, stored, waiting, watermark)
        arrived = batch.drop(columns=[BUCKET]).assign(**{TAG: watermark})
        waiting = arrived if waiting is None else pd.concat([waiting, arrived], ignore_index=True)
        self.handle.registerTimer(int(watermark) + 1)  # compacted once the watermark passes it
        self.state.store(0, [written, waiting])
        if len(out):
            yield out

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        _, (stored, waiting) = self.state.load()
        written, waiting, out = compact(self.plan, stored, waiting, timerValues.getCurrentWatermarkInMs())
        if waiting is not None and len(waiting):
            self.handle.registerTimer(int(waiting[TAG].max()) + 1)
        self.state.store(0, [written, waiting])
        if len(out):
            yield out

    def close(self) -> None:
        pass
