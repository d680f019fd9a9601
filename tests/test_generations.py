"""A bucket's rows in generations (spark.stateful.generations), under the Rank core: pandas
and pyarrow only, no JVM. The state handle is an in-memory one with the calls the store
makes (Spark's ValueState and MapState semantics); the Spark tests run the real one.

Each case is checked against the same batches folded over the bucket's whole state, the way
the store must be invisible: the changes equal, batch by batch."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from streamsql.spark.stateful import generations, ranking


class Value:
    def __init__(self):
        self.value = None

    def get(self):
        return self.value

    def update(self, value):
        self.value = tuple(value)

    def clear(self):
        self.value = None


class Map:
    def __init__(self):
        self.entries, self.reads = {}, []

    def getValue(self, key):
        self.reads.append(key[0])
        return self.entries.get(key)

    def updateValue(self, key, value):
        self.entries[key] = tuple(value)

    def removeKey(self, key):
        self.entries.pop(key, None)


class Handle:
    def __init__(self):
        self.states = {}

    def getValueState(self, name, schema):
        return self.states.setdefault(name, Value())

    def getMapState(self, name, key_schema, value_schema):
        return self.states.setdefault(name, Map())


COLUMNS = ["auction", "price", "name"]


def plan(limit=2, rank="rn", rowkind=False, ttl_ms=None, hashed=True):
    return {"partition": ["auction"], "order": [["price", True]], "limit": limit, "rank": rank,
            "data": list(COLUMNS), "rowkind": rowkind, "later_wins": False, "buckets": 1, "ttl_ms": ttl_ms,
            "hashed": hashed}


def frame(rows, columns=COLUMNS) -> pd.DataFrame:
    """Rows typed as a micro-batch reaches the operator: BIGINTs with NULLs as Int64."""
    batch = pd.DataFrame(rows, columns=columns)
    return batch.astype({"auction": "int64", "price": "Int64"})


def with_hash(batch: pd.DataFrame, poor=False) -> pd.DataFrame:
    """A hash that spreads keys, as Spark's xxhash64 does, or a deliberately poor one
    (auction modulo 5: distinct partitions share one)."""
    auction = batch["auction"].to_numpy()
    return batch.assign(**{generations.HASH: auction % 5 if poor else auction * 2654435761})


def changes(frame) -> Counter:
    return Counter(tuple(_plain(v) for v in row) for row in frame.astype(object).itertuples(index=False, name=None))


def _plain(value):
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(_plain(v) for v in value)
    return None if pd.isna(value) else value


class Both:
    """The same batches through the store and through a fold over the whole state."""

    def __init__(self, poor=False, **kwargs):
        self.poor = poor
        self.hashed, self.whole = plan(**kwargs), plan(**{**kwargs, "hashed": False})
        self.handle = Handle()
        self.store = generations.Generations(self.handle, self.hashed, ["rows"], "Rank", kwargs.get("ttl_ms"))
        self.state, self.seq = None, 0

    def fold(self, batch: pd.DataFrame, now_ms=0):
        hashed = with_hash(batch, self.poor)
        seq, (rows,) = self.store.load(hashed[generations.HASH].to_numpy())
        rows, seq, got = ranking.fold(self.hashed, rows, seq, hashed, now_ms)
        self.store.store(seq, [rows], now_ms)
        self.state, self.seq, want = ranking.fold(self.whole, self.state, self.seq, batch, now_ms)
        assert changes(got) == changes(want)
        return got

    @property
    def generations(self):
        return self.handle.states["generations"]


@pytest.mark.parametrize("rowkind", [False, True])
@pytest.mark.parametrize("local", [True, False])
@pytest.mark.parametrize("poor", [False, True])
def test_changes_equal_a_fold_over_the_whole_state(rowkind, local, poor):
    """Keys arriving close in time (``local``, as auctions take bids) or anywhere; with
    retractions; with partitions sharing a hash (``poor``)."""
    rng = random.Random(7 + rowkind + 2 * local + 4 * poor)
    both = Both(poor=poor, limit=2, rowkind=rowkind)
    live: list[tuple] = []
    for step in range(30):
        rows = []
        for _ in range(rng.randint(1, 30)):
            if rowkind and live and rng.random() < 0.25:
                rows.append(("-D", *live.pop(rng.randrange(len(live)))))
                continue
            auction = step + rng.randint(0, 3) if local else rng.randint(0, 80)
            row = (auction, rng.choice([None, *range(20)]), f"n{rng.randint(0, 3)}")
            live.append(row)
            rows.append(("+I", *row) if rowkind else row)
        both.fold(frame(rows, (["__rowkind"] if rowkind else []) + COLUMNS))


def test_a_micro_batch_reads_only_the_generations_its_keys_live_in():
    """20 micro-batches of 600 new partitions each, then one touching two partitions: it
    reads their two generations and loads their two rows (with a hash that spreads keys,
    as Spark's xxhash64 does)."""
    store = generations.Generations(Handle(), plan(limit=1, rank=None), ["rows"], "Rank")
    seq = 0
    for step in range(20):  # none left small enough to fold into the next
        batch = with_hash(frame([(step * 1000 + k, k, "x") for k in range(600)]))
        seq, (rows,) = store.load(batch[generations.HASH].to_numpy())
        rows, seq, _ = ranking.fold(store.plan, rows, seq, batch)
        store.store(seq, [rows])
    reads = store.generations.reads
    reads.clear()
    batch = with_hash(frame([(19_003, 999, "y"), (18_005, 999, "z")]))
    seq, (rows,) = store.load(batch[generations.HASH].to_numpy())
    assert sorted(reads) == [19, 20] and len(rows) == 2  # the two generations, the two keys' rows
    rows, seq, out = ranking.fold(store.plan, rows, seq, batch)
    assert sorted(out["__rowkind"]) == ["+U", "+U", "-U", "-U"]
    store.store(seq, [rows])
    assert len(store.generations.entries) == 21
    assert sum(r for r, _ in store.info.rows.values()) == 20 * 600


def test_a_generation_left_with_few_rows_is_folded_into_the_new_one():
    both = Both(limit=1, rank=None)
    both.fold(frame([(k, k, "x") for k in range(100)]))
    both.fold(frame([(1000 + k, k, "x") for k in range(2000)]))
    assert len(both.generations.entries) == 2
    # a batch touching one key of the first generation folds its other 99 rows in
    both.fold(frame([(0, 500, "y")]))
    assert len(both.generations.entries) == 2
    assert sorted(both.store.info.rows) == [2, 3]


def test_a_generation_older_than_the_ttl_is_dropped_unread():
    both = Both(limit=1, rank=None, ttl_ms=1000)
    both.fold(frame([(k, k, "x") for k in range(1000)]), now_ms=0)
    both.fold(frame([(5000 + k, k, "x") for k in range(1000)]), now_ms=900)
    both.generations.reads.clear()
    both.fold(frame([(9000, 1, "x")]), now_ms=1500)
    assert sorted(both.store.info.rows) == [2, 3]  # the first generation (newest row at 0) is gone
    assert both.generations.reads == []
    # a key of it comes back new (+I), as in a fold over the whole state with the TTL
    out = both.fold(frame([(3, 1, "y")]), now_ms=1600)
    assert list(out["__rowkind"]) == ["+I"]


def test_a_checkpoint_with_another_bucket_count_is_refused():
    handle = Handle()
    store = generations.Generations(handle, plan(), ["rows"], "Rank")
    store.load(np.array([1]))
    batch = with_hash(frame([(1, 1, "a")]))
    rows, seq, _ = ranking.fold(plan(), None, 0, batch)
    store.store(seq, [rows])
    other = generations.Generations(handle, {**plan(), "buckets": 4}, ["rows"], "Rank")
    with pytest.raises(ValueError, match="Rank state has 1 buckets, the query asks for 4"):
        other.load(np.array([1]))


# -- GroupAggregate ----------------------------------------------------------------------------

def _aggregate_plan(hashed: bool):
    from pyspark.sql import types as T

    from streamsql.spark.stateful import AggSpec
    from streamsql.spark.stateful.group_aggregate import build_plan

    fields = [T.StructField("__rowkind", T.StringType()), T.StructField("k", T.LongType()),
              T.StructField("v", T.LongType()), T.StructField("s", T.StringType())]
    if hashed:
        fields.append(T.StructField(generations.HASH, T.LongType()))
    specs = [AggSpec("COUNT", None, output_name="n"), AggSpec("SUM", "v", output_name="total"),
             AggSpec("MIN", "v", output_name="low"), AggSpec("COUNT", "v", distinct=True, output_name="kinds"),
             AggSpec("LISTAGG", "s", output_name="names"), AggSpec("ARRAY_AGG", "v", output_name="values")]
    plan, _ = build_plan(T.StructType(fields), [generations.HASH, "k"] if hashed else ["k"], specs)
    plan.update(buckets=1, ttl_ms=None)
    return plan


@pytest.mark.parametrize("poor", [False, True])
def test_group_aggregate_changes_equal_a_fold_over_the_whole_state(poor):
    from streamsql.spark.stateful import accumulate

    rng = random.Random(3 + poor)
    hashed_plan, whole_plan = _aggregate_plan(True), _aggregate_plan(False)
    names = ["acc", *[f"ms{j}" for j in range(len(hashed_plan["multisets"]) + len(hashed_plan["sequences"]))]]
    store = generations.Generations(Handle(), hashed_plan, names, "GroupAggregate")
    whole = None
    live: list[tuple] = []
    for step in range(40):
        rows = []
        for _ in range(rng.randint(1, 25)):
            if live and rng.random() < 0.3:
                rows.append(("-D", *live.pop(rng.randrange(len(live)))))
                continue
            row = (step // 2 + rng.randint(0, 4) if rng.random() < 0.8 else rng.randint(0, 40),
                   rng.choice([None, *range(6)]), f"s{rng.randint(0, 3)}")
            live.append(row)
            rows.append(("+I", *row))
        batch = pd.DataFrame(rows, columns=["__rowkind", "k", "v", "s"]).astype({"k": "int64", "v": "Int64"})
        hashed = with_hash(batch.rename(columns={"k": "auction"}), poor).rename(columns={"auction": "k"})
        _, (acc, *multisets) = store.load(hashed[generations.HASH].to_numpy())
        state = accumulate.BucketState(acc, multisets) if acc is not None else None
        state, got = accumulate.fold(hashed_plan, state, hashed)
        store.store(0, [state.acc, *state.multisets] if state else [None] * len(names))
        whole, want = accumulate.fold(whole_plan, whole, batch)
        if whole is not None:
            whole = accumulate.decode(accumulate.encode(whole))  # as the whole-bucket blob stored it
        assert changes(got.drop(columns=[generations.HASH])) == changes(want), step
