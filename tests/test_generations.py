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
from tests import depth


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
        self.entries, self.reads, self.writes = {}, [], []

    def getValue(self, key):
        self.reads.append(key[0])
        return self.entries.get(key)

    def updateValue(self, key, value):
        self.writes.append(key[0])
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
    for step in range(depth.pick(12, 30)):
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
    writes = store.generations.writes
    writes.clear()
    store.store(seq, [rows])
    assert writes == [21]  # the new generation only: 19 and 20 keep the two keys' old rows, stale
    assert len(store.generations.entries) == 21
    assert sum(r for r, _ in store.info.rows.values()) == 20 * 600 + 2
    assert len(store.hashes) == 20 * 600


def test_a_generation_left_with_few_rows_is_folded_into_the_new_one():
    both = Both(limit=1, rank=None)
    both.fold(frame([(k, k, "x") for k in range(100)]))
    both.fold(frame([(1000 + k, k, "x") for k in range(2000)]))
    assert len(both.generations.entries) == 2
    # a batch touching one key of the first generation folds its other 99 rows in
    both.fold(frame([(0, 500, "y")]))
    assert len(both.generations.entries) == 2
    assert sorted(both.store.info.rows) == [2, 3]


@pytest.mark.parametrize("rowkind", [False, True])
def test_changes_equal_a_fold_when_keys_come_back_from_every_generation(rowkind):
    """Micro-batches of 700 rows over 6,000 keys anywhere (and retractions): a micro-batch
    takes a few keys out of every generation, which then holds stale rows; the changes stay
    a whole-state fold's while generations are left as they are, rewritten or folded."""
    rng = random.Random(11 + rowkind)
    both = Both(limit=2, rowkind=rowkind)
    live: list[tuple] = []
    kept = rewritten = 0
    for step in range(depth.pick(10, 25)):
        rows = []
        for _ in range(700):
            if rowkind and live and rng.random() < 0.2:
                rows.append(("-D", *live.pop(rng.randrange(len(live)))))
                continue
            row = (rng.randint(0, 6000), rng.choice([None, *range(50)]), f"n{rng.randint(0, 3)}")
            live.append(row)
            rows.append(("+I", *row) if rowkind else row)
        before = {g: v for (g,), v in both.generations.entries.items()}
        both.generations.writes.clear()
        both.fold(frame(rows, (["__rowkind"] if rowkind else []) + COLUMNS))
        read = set(both.generations.reads)
        both.generations.reads.clear()
        kept += sum(1 for g in read if g in before and both.generations.entries.get((g,)) is before[g])
        rewritten += sum(1 for g in read if g in before and g in both.generations.writes)
        # the index files each hash under one generation, whose rows of it are all there
        assert len(np.unique(both.store.hashes)) == len(both.store.hashes)
    assert kept > 0 and rewritten > 0, (kept, rewritten)


def test_a_generation_mostly_stale_is_rewritten_with_its_live_rows():
    """A generation of 2,000 keys: micro-batches taking keys out of it leave it as it is
    while half or more are still filed under it, then rewrite it with only those."""
    both = Both(limit=1, rank=None)
    both.fold(frame([(k, k, "x") for k in range(2000)]))
    sizes = []
    for step in range(6):
        both.fold(frame([(k, 5000, "y") for k in range(step * 200, step * 200 + 200)] +
                        [(10_000 + step * 1000 + k, 1, "z") for k in range(600)]))
        sizes.append(both.store.info.rows[1][0])
    assert sizes == [2000] * 5 + [800]  # 1,200 keys out of 2,000: 800 live rows left
    assert both.store.info.keys[1] == 800


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

AGG_COLUMNS = ["__rowkind", "k", "v", "s", "w", "d", "f"]


def _aggregate_plan(hashed: bool, ttl_ms=None):
    from pyspark.sql import types as T

    from streamsql.spark.stateful import AggSpec, distinct_pairs
    from streamsql.spark.stateful.group_aggregate import build_plan

    fields = [T.StructField("__rowkind", T.StringType()), T.StructField("k", T.LongType()),
              T.StructField("v", T.LongType()), T.StructField("s", T.StringType()),
              T.StructField("w", T.LongType()), T.StructField("d", T.DecimalType(10, 2)),
              T.StructField("f", T.BooleanType())]
    if hashed:
        fields.append(T.StructField(generations.HASH, T.LongType()))
    specs = [AggSpec("COUNT", None, output_name="n"), AggSpec("SUM", "v", output_name="total"),
             AggSpec("MIN", "v", output_name="low"), AggSpec("COUNT", "v", distinct=True, output_name="kinds"),
             AggSpec("LISTAGG", "s", output_name="names"), AggSpec("ARRAY_AGG", "v", output_name="values"),
             # paired (distinct_pairs): every call over the multiset is COUNT, SUM or AVG
             AggSpec("COUNT", "s", distinct=True, filter_column="f", output_name="fs"),
             AggSpec("COUNT", "w", distinct=True, output_name="ws"),
             AggSpec("SUM", "w", distinct=True, output_name="w_sum"),
             AggSpec("AVG", "w", distinct=True, output_name="w_avg"),
             AggSpec("SUM", "d", distinct=True, output_name="d_sum")]
    plan, _ = build_plan(T.StructType(fields), [generations.HASH, "k"] if hashed else ["k"], specs)
    plan.update(buckets=1, ttl_ms=ttl_ms, paired=distinct_pairs.paired(plan["aggs"], plan["multisets"]) if hashed else [])
    return plan


def _aggregate_batch(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=AGG_COLUMNS).astype({"k": "int64", "v": "Int64", "w": "Int64", "f": "boolean"})


class BothAggregates:
    """The same batches through ``group_aggregate.fold_stored`` and through a fold over the
    whole state with every multiset whole (no pairs)."""

    def __init__(self, poor=False, ttl_ms=None):
        from streamsql.spark.stateful.group_aggregate import fold_stored, store

        self.poor, self.fold_stored = poor, fold_stored
        self.hashed, self.whole_plan = _aggregate_plan(True, ttl_ms), _aggregate_plan(False, ttl_ms)
        assert len(self.hashed["paired"]) == 3, self.hashed["multisets"]  # s with f, w, d
        self.handle = Handle()
        self.store = store(self.handle, self.hashed)
        self.whole = None

    def fold(self, batch: pd.DataFrame, now_ms=0):
        from streamsql.spark.stateful import accumulate

        hashed = with_hash(batch.rename(columns={"k": "auction"}), self.poor).rename(columns={"auction": "k"})
        got = self.fold_stored(self.hashed, self.store, hashed, now_ms)
        self.whole, want = accumulate.fold(self.whole_plan, self.whole, batch, now_ms)
        if self.whole is not None:
            self.whole = accumulate.decode(accumulate.encode(self.whole))  # as the whole-bucket blob stored it
        assert changes(got) == changes(want)
        return got


@pytest.mark.parametrize("poor", [False, True])
def test_group_aggregate_changes_equal_a_fold_over_the_whole_state(poor):
    from decimal import Decimal

    rng = random.Random(3 + poor)
    both = BothAggregates(poor)
    live: list[tuple] = []
    for step in range(depth.pick(10, 40)):
        rows = []
        for _ in range(rng.randint(1, 25)):
            if live and rng.random() < 0.3:
                rows.append(("-D", *live.pop(rng.randrange(len(live)))))
                continue
            row = (step // 2 + rng.randint(0, 4) if rng.random() < 0.8 else rng.randint(0, 40),
                   rng.choice([None, *range(6)]), f"s{rng.randint(0, 3)}", rng.choice([None, *range(-3, 30)]),
                   rng.choice([None, Decimal(rng.randint(-500, 500)).scaleb(-2)]), rng.choice([None, True, False]))
            live.append(row)
            rows.append(("+I", *row))
        both.fold(_aggregate_batch(rows))


def test_a_micro_batch_reads_only_the_distinct_pairs_it_brings():
    """One key with 8 (--thorough: 20) micro-batches of 600 new values each, then a
    micro-batch bringing two of the old values and a new one: it reads the generations of
    the key and of the two values, not all of them, and COUNT(DISTINCT) moves by one."""
    both = BothAggregates()
    batches = depth.pick(8, 20)
    for step in range(batches):
        both.fold(_aggregate_batch([("+I", 1, None, "a", step * 1000 + j, None, None) for j in range(600)]))
    reads = both.store.generations.reads
    reads.clear()
    loaded = []
    load = both.store.load
    both.store.load = lambda hashes: loaded.append(load(hashes)) or loaded[-1]
    out = both.fold(_aggregate_batch([("+I", 1, None, "a", w, None, None) for w in (3, 5003, 99_999)]))
    assert len(set(reads)) <= 3, reads  # the key's (the newest), and the two old values' (first and sixth)
    _, (acc, *multisets) = loaded[0]
    w = both.hashed["multisets"].index(("w", None, "int"))
    assert len(acc) == 1 and sorted(multisets[w]["__v"]) == [3, 5003]  # not all of the key's values
    assert list(out["ws"]) == [batches * 600, batches * 600 + 1]


def test_a_key_dropped_by_the_ttl_comes_back_with_its_distinct_values_forgotten():
    both = BothAggregates(ttl_ms=1000)
    both.fold(_aggregate_batch([("+I", 1, 1, "a", w, None, True) for w in (1, 2, 3)]), now_ms=0)
    both.fold(_aggregate_batch([("+I", 2, 1, "a", 7, None, True)]), now_ms=900)
    out = both.fold(_aggregate_batch([("+I", 1, 1, "a", w, None, True) for w in (2, 3, 4)]), now_ms=1500)
    assert list(out["__rowkind"]) == ["+I"] and list(out["ws"]) == [3] and list(out["w_sum"]) == [9]


# -- the regular join: a store per side ---------------------------------------------------------

JOIN_KINDS = {"__k0": "int", "__l0": "int", "__l1": "object", "__r0": "int"}


def _join_plan(join_type, retracts, hashed: bool, ttl_ms=None):
    plan = {"keys": ["__k0"], "left": ["__l0", "__l1"], "right": ["__r0"], "kinds": dict(JOIN_KINDS),
            "join_type": join_type, "residual": None, "retracts": list(retracts), "ttl_ms": ttl_ms, "buckets": 1,
            "output": ["__l0", "__l1"] if join_type in ("LeftSemiJoin", "LeftAntiJoin") else ["__l0", "__l1", "__r0"]}
    if hashed:
        plan["keys"] = ["__k0", generations.HASH]
        plan["kinds"][generations.HASH] = "int"
    return plan


def _join_batch(rows) -> pd.DataFrame:
    """(side, kind, key, value): a left row's values (l0, l1) are (value, key's name), a right row's r0 is value."""
    frame = pd.DataFrame([{"__side": side, "__rowkind": kind, "__k0": key, "__l0": value if side == 0 else None,
                           "__l1": f"k{key}" if side == 0 else None, "__r0": value if side == 1 else None}
                          for side, kind, key, value in rows], columns=["__side", "__rowkind", "__k0", "__l0", "__l1", "__r0"])
    return frame.astype({"__k0": "Int64", "__l0": "Int64", "__r0": "Int64"})


LOOKED_UP = {  # (join type, (left retracts, right retracts)): the sides only looked up
    ("InnerJoin", (False, False)): [True, True], ("InnerJoin", (True, False)): [False, True],
    ("LeftOuterJoin", (False, False)): [False, True], ("LeftOuterJoin", (True, False)): [False, True],
    ("LeftOuterJoin", (False, True)): [False, False], ("RightOuterJoin", (False, False)): [True, False],
    ("FullOuterJoin", (False, False)): [False, False], ("LeftSemiJoin", (False, False)): [False, True],
    ("LeftAntiJoin", (True, False)): [False, True]}


@pytest.mark.parametrize("join_type,retracts", list(LOOKED_UP))
def test_join_changes_equal_a_fold_over_the_whole_state(join_type, retracts, monkeypatch):
    """Keys close in time and anywhere, identical rows, with a side's retractions; an
    insert-only side that keeps no partner counts (an inner join's, an outer join's inner
    side, a semi join's right) is only looked up (join.looked_up), its rows added to its
    newest generation until that holds ``APPEND_ROWS`` (here 12)."""
    from streamsql.spark.stateful import joining
    from streamsql.spark.stateful.join import fold_stored, looked_up, side_stores

    monkeypatch.setattr(generations, "APPEND_ROWS", 12)
    rng = random.Random(11 + retracts[0])
    hashed, whole = _join_plan(join_type, retracts, True), _join_plan(join_type, retracts, False)
    assert looked_up(hashed) == LOOKED_UP[join_type, retracts]
    handle = Handle()
    stores = side_stores(handle, hashed)
    left = right = None
    live: tuple[list, list] = ([], [])
    steps = depth.pick(16, 40)
    for step in range(steps):
        rows = []
        for _ in range(rng.randint(1, 20)):
            retracting = [index for index in (0, 1) if retracts[index] and live[index]]
            if retracting and rng.random() < 0.3:
                side = rng.choice(retracting)
                rows.append((side, "-D", *live[side].pop(rng.randrange(len(live[side])))))
                continue
            side = int(rng.random() < 0.3)
            key = step // 2 + rng.randint(0, 3) if rng.random() < 0.7 else rng.randint(0, 30)
            row = (key, rng.randint(0, 2))  # (few values: identical rows)
            live[side].append(row)
            rows.append((side, "+I", *row))
        batch = _join_batch(rows)
        got = fold_stored(hashed, stores, with_hash(batch.rename(columns={"__k0": "auction"}))
                          .rename(columns={"auction": "__k0"}), 0)
        left, right, want = joining.fold(whole, left, right, batch, 0)
        assert changes(got) == changes(want), step
    for index, name in enumerate(("left", "right")):
        if LOOKED_UP[join_type, retracts][index]:  # looked up: its generations are never rewritten
            kept = [g for (g,) in sorted(handle.states[f"generations_{name}"].entries)]
            fewest = (steps // 4, steps // 8)[index]  # (the right side brings about 30 % of the rows)
            assert kept == list(range(1, len(kept) + 1)) and fewest < len(kept) < steps - 5, kept  # none dropped, some added to
            sizes = [rows for rows, _ in stores[index].info.rows.values()]
            assert all(size >= 12 for size in sizes[:-1]), sizes


def test_distinct_pairs_of_a_null_group_key_and_decimal_values():
    """A NULL group key and DECIMAL sums through the pairs, against the whole multisets."""
    from decimal import Decimal

    from pyspark.sql import types as T

    from streamsql.spark.stateful import AggSpec, accumulate, distinct_pairs
    from streamsql.spark.stateful.group_aggregate import build_plan, fold_stored, store

    def plan(hashed):
        fields = [T.StructField("g", T.StringType()), T.StructField("x", T.LongType()),
                  T.StructField("d", T.DecimalType(10, 2))] + ([T.StructField(generations.HASH, T.LongType())] if hashed else [])
        specs = [AggSpec("COUNT", "x", distinct=True, output_name="c"), AggSpec("SUM", "d", distinct=True, output_name="s"),
                 AggSpec("AVG", "x", distinct=True, output_name="a")]
        made, _ = build_plan(T.StructType(fields), ([generations.HASH] if hashed else []) + ["g"], specs)
        made.update(buckets=1, ttl_ms=None, paired=distinct_pairs.paired(made["aggs"], made["multisets"]) if hashed else [])
        return made

    hashed, whole_plan = plan(True), plan(False)
    assert hashed["paired"] == [0, 1]
    state, whole = store(Handle(), hashed), None
    rng = random.Random(5)
    for step in range(depth.pick(12, 30)):
        rows = [(rng.choice([None, "a", "bb"]), rng.choice([None, 1, 2, 3]), rng.choice([None, Decimal("1.50"), Decimal("2.25")]))
                for _ in range(rng.randint(1, 8))]
        batch = pd.DataFrame(rows, columns=["g", "x", "d"]).astype({"x": "Int64"})
        keyed = batch.assign(**{generations.HASH: batch["g"].map(lambda g: 7 if g is None else len(g) * 2654435761)})
        got = fold_stored(hashed, state, keyed, 0)
        whole, want = accumulate.fold(whole_plan, whole, batch, 0)
        assert changes(got) == changes(want), step
