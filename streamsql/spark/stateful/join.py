"""Regular joins of changelogs on ``transformWithStateInPandas``: Flink's streaming join (#10).

Spark's stream-stream joins take insert-only input, and their outer joins need time bounds
and emit null-padded rows only once the watermark passes, never retracting them. Flink's
regular join keeps both sides in state and retracts: an outer join's null-padded row goes
(``-D``) when its first partner arrives. Both sides travel in one stream (``__side`` 0 or
1, each row with its kind, the join keys ``__k<i>`` on both), hashed by the keys into
buckets; one call joins a bucket's whole micro-batch (``joining.fold``). Each side's rows
live in Spark's state store, checkpointed with the query, in a store of generations of its
own (``generations``, by the hash of the keys the bucket is chosen by, kept as one more join
key): a micro-batch reads and writes the rows of the keys it brings, not the whole bucket,
and an insert-only side that keeps no partner counts (an inner join's, an outer join's inner
side) is only looked up, by the other side's keys (``looked_up``): its rows are read where
they are and never rewritten.
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
from streamsql.spark.stateful import accumulate, default_buckets, generations, joining, predicates, transport
from streamsql.spark.stateful.specs import value_kind

BUCKET = "__bucket"
JOIN_TYPES = ("InnerJoin", "LeftOuterJoin", "RightOuterJoin", "FullOuterJoin", "LeftSemiJoin", "LeftAntiJoin")
SEMI = joining.SEMI  # their output is the left side's columns


def regular_join(left: DataFrame, right: DataFrame, keys: int, join_type: str, buckets: int | None = None,
                 residual: tuple | None = None, ttl_ms: tuple | None = None, null_aware: bool = False,
                 expires: tuple = (None, None)) -> DataFrame:
    """The changelog of ``left JOIN right`` on their first ``keys`` columns (pairwise equal,
    NULL never matching) and the ``residual`` condition (``predicates``, over the two sides'
    other columns): ``__rowkind``, then every other column of ``left``, then of ``right``.
    Either side may carry ``__rowkind`` first (a changelog) or not (inserts). ``ttl_ms``:
    (left, right), how long a side's row lives after its last write (None: for ever).
    ``null_aware``: a LeftAntiJoin whose first key is NOT IN's value (``joining.null_aware_matches``):
    with no other key every row in one bucket, as Flink runs it on one task; a correlated
    NOT IN's other keys (its equalities) choose the bucket. ``expires``: per side, the column
    (one of its own) of epoch ms below which the watermark retires the side's row, which then
    matches nothing still to come (``join_expiry``; an insert-only side, only looked up)."""
    if join_type not in JOIN_TYPES:
        raise ValueError(f"a regular join is one of {', '.join(JOIN_TYPES)}, not {join_type!r}")
    if null_aware and (join_type != "LeftAntiJoin" or residual is not None):
        raise ValueError("a NULL-aware join is an anti join on its keys (NOT IN), with no other condition")
    bucketed, plan, out = both_sides(left, right, keys, join_type, 1 if null_aware and keys == 1 else buckets,
                                     hashed_from=1 if null_aware else 0, hash_key=True)
    plan.update(residual=joining.NULL_AWARE if null_aware else residual, ttl_ms=ttl_ms, expires=list(expires))
    if any(column is not None and not lookup for column, lookup in zip(expires, looked_up(plan))):
        raise ValueError("only an insert-only side that is looked up leaves the join's state by the watermark")
    _ship_by_value()
    return transport.transform(bucketed, BUCKET, JoinProcessor(plan), out, "EventTime" if any(expires) else "None")


def both_sides(left: DataFrame, right: DataFrame, keys: int, join_type: str, buckets: int | None = None,
               hashed_from: int = 0, hash_key: bool = False):
    """(both sides in one frame, hashed into buckets by their keys from the ``hashed_from``th;
    the plan for the pandas core; the output schema): the rows of a join operator's input,
    as ``regular_join`` says. ``hash_key``: that hash is a column too, the last join key."""
    if buckets is None:
        buckets = default_buckets(left)
    sides = []
    for frame in (left, right):
        fields = [f for f in frame.schema.fields if f.name != ROWKIND_COLUMN]
        sides.append((frame, fields[:keys], fields[keys:]))
    key_names = [f"__k{i}" for i in range(keys)]
    left_names = [f.name for f in sides[0][2]]
    right_names = [f.name for f in sides[1][2]]
    if set(left_names) & set(right_names) or set(key_names) & set(left_names + right_names):
        raise ValueError("the two sides' columns must have names of their own")
    selected = []
    for index, (frame, key_fields, own) in enumerate(sides):
        kind = F.col(ROWKIND_COLUMN) if ROWKIND_COLUMN in frame.columns else F.lit(INSERT)
        columns = [F.lit(index).alias(joining.SIDE), kind.alias(ROWKIND_COLUMN)]
        columns += [F.col(f"`{f.name}`").alias(k) for f, k in zip(key_fields, key_names)]
        for other_index, (_, _, fields) in enumerate(sides):
            for f in fields:
                columns.append(F.col(f"`{f.name}`") if other_index == index
                               else F.lit(None).cast(f.dataType).alias(f.name))
        selected.append(frame.select(*columns))
    union = selected[0].unionByName(selected[1])  # Spark widens the key types to one
    types = {f.name: f.dataType for f in union.schema.fields}
    output = left_names if join_type in SEMI else left_names + right_names
    plan = {"keys": key_names, "left": left_names, "right": right_names, "join_type": join_type, "output": output,
            "kinds": {name: _kind(types[name]) for name in key_names + left_names + right_names},
            "columns": list(union.columns), "buckets": buckets,
            "retracts": [ROWKIND_COLUMN in frame.columns for frame in (left, right)]}
    hashed = F.xxhash64(*([F.col(k) for k in key_names[hashed_from:]] or [F.lit(0)]))
    if hash_key:  # (a function of the other keys: the same pairs match)
        union = union.withColumn(generations.HASH, hashed)
        plan.update(keys=key_names + [generations.HASH], columns=list(union.columns))
        plan["kinds"][generations.HASH] = "int"
    bucketed = union.withColumn(BUCKET, F.pmod(hashed, F.lit(buckets)).cast("int"))
    out = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType(), False)]
                       + [T.StructField(n, types[n], True) for n in output])
    return bucketed, plan, out


def _kind(data_type: T.DataType) -> str:
    """How joining holds a column in pandas (value_kind, and 'time' for timestamps)."""
    return "time" if isinstance(data_type, (T.TimestampType, T.TimestampNTZType)) else value_kind(data_type)


class JoinProcessor(StatefulProcessor):
    """One call per bucket and micro-batch: join all of the bucket's changes at once."""

    def __init__(self, plan: dict):
        self.plan = plan

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.stores = side_stores(handle, self.plan)

    def handleInputRows(self, key, rows, timerValues):
        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = self.plan["columns"] + [BUCKET]  # names with a leading '_' arrive renamed
        watermark = timerValues.getCurrentWatermarkInMs() if any(self.plan.get("expires") or ()) else None
        out = fold_stored(self.plan, self.stores, batch, int(time.time() * 1000), watermark)
        if len(out):
            yield out

    def close(self) -> None:
        pass


def side_stores(handle, plan: dict) -> list[generations.Generations]:
    """A store of generations per side, so a side is read by the keys that need its rows."""
    ttl = plan.get("ttl_ms") or (None, None)
    expires = plan.get("expires") or (None, None)
    return [generations.Generations(handle, plan, [name], "join", ttl[index], store=f"_{name}", expires=expires[index])
            for index, name in enumerate(("left", "right"))]


def looked_up(plan: dict) -> list[bool]:
    """Per side, whether the join only looks its rows up: an insert-only side that keeps no
    partner counts (either side of an inner join, the inner side of an outer join, a semi or
    anti join's right side). A micro-batch then reads the side's rows by the other side's
    keys alone, leaves them where they are, and adds its own rows as they come; a side that
    retracts, or keeps its rows' partner counts (an outer side, a semi or anti join's left),
    reads and rewrites its keys' rows."""
    counted = joining.counted_sides(plan["join_type"])
    return [not retracts and not counts for retracts, counts in zip(plan.get("retracts", (True, True)), counted)]


def fold_stored(plan: dict, stores: list, batch: pd.DataFrame, now_ms: int, watermark: int | None = None) -> pd.DataFrame:
    """Join a bucket's micro-batch with the rows its keys have in the sides' ``stores``; the
    changes. ``watermark``: a side with ``expires`` then drops the rows it retires."""
    hashes = batch[generations.HASH].to_numpy(dtype="int64")
    side = batch[joining.SIDE].to_numpy()
    lookup = looked_up(plan)
    sides = []
    for index, store in enumerate(stores):
        wanted = hashes[side != index] if lookup[index] else hashes
        _, (rows,) = store.load(wanted, peek=lookup[index])
        if rows is not None and len(rows) and lookup[index]:
            rows = _folded(plan, rows, plan["keys"] + plan[("left", "right")[index]])
        sides.append(rows if rows is not None and len(rows) else None)
    left, right, out = joining.fold(plan, *sides, batch, now_ms)
    for index, (store, rows) in enumerate(zip(stores, (left, right))):
        if lookup[index]:
            rows = _added(rows)
        store.store(0, [rows], now_ms, watermark)
    return out


LOADED = "__loaded"  # a looked-up side's row as it was loaded: its count


def _folded(plan: dict, rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """A looked-up side's loaded rows, identical ones (from two generations) folded into one,
    each with its count as loaded (``LOADED``)."""
    if rows.duplicated(subset=columns).any():
        how = {joining.COUNT: "sum", **({joining.TOUCHED: "max"} if joining.TOUCHED in rows.columns else {})}
        rows = joining.canonical_batch({"kinds": {c: plan["kinds"][c] for c in columns}},
                                       rows.groupby(columns, dropna=False, sort=False).agg(how).reset_index())
    return rows.assign(**{LOADED: rows[joining.COUNT].to_numpy(dtype="int64")})


def _added(rows: pd.DataFrame | None) -> pd.DataFrame | None:
    """A looked-up side's rows to write: those the micro-batch added (identical rows may
    then live in two generations, each with its count: an inner join adds them up)."""
    if rows is None or LOADED not in rows.columns:
        return rows
    loaded = rows[LOADED].to_numpy(dtype="float64", na_value=0)
    count = rows[joining.COUNT].to_numpy(dtype="int64") - loaded.astype("int64")
    added = rows.loc[count > 0].drop(columns=[LOADED])
    added[joining.COUNT] = count[count > 0]
    return added.reset_index(drop=True) if len(added) else None


def _ship_by_value() -> None:
    from streamsql.spark.stateful import ship_by_value

    ship_by_value(accumulate, generations, joining, predicates, sys.modules[__name__])
