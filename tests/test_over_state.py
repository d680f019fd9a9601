"""The OVER operator's state (spark.stateful.over) without Spark: its processor driven
through an in-memory state handle (test_generations' ValueState and MapState, plus timers),
micro-batch by micro-batch under a moving watermark, each timer fired as Spark fires it.

The history later frames need lives in generations by partition hash: whatever the hash
(a spreading one, or a poor one that files distinct partitions together), the rows emitted
must be Flink's, checked against test_over_frames' row-by-row reference; a micro-batch's
rows only wait (no history read), and a firing reads only its partitions' generations."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamsql.spark.stateful import over, over_frames
from tests import depth
from tests.test_generations import Handle as StateHandle
from tests.test_over_frames import _accepted, _plain, _plan, _random_batches, _reference

END = np.iinfo("int64").max


class Handle(StateHandle):
    def __init__(self):
        super().__init__()
        self.timers: set[int] = set()

    def registerTimer(self, ms):
        self.timers.add(int(ms))


class Times:
    def __init__(self, watermark):
        self.watermark = watermark

    def getCurrentWatermarkInMs(self):
        return self.watermark


class Operator:
    """One bucket of the OVER operator: rows in, timers fired as the watermark passes them."""

    def __init__(self, plan, poor=False):
        self.plan = {**plan, "buckets": 1, "ttl_ms": plan.get("ttl_ms"), "ties": [], "hashed": True}
        self.poor, self.handle = poor, Handle()
        self.processor = over.OverProcessor(self.plan)
        self.processor.init(self.handle)
        self.out: list[pd.DataFrame] = []

    def rows(self, rows, watermark):
        batch = pd.DataFrame(rows, columns=self.plan["columns"])
        names = batch["k"].map(lambda k: "\0" if k is None else k)
        hashed = names.map(lambda k: len(k) % 2) if self.poor else names.map(lambda k: hash(k) % 10**12)
        batch[over_frames.HASH] = hashed.astype("int64")
        batch[over.BUCKET] = 0
        self.out += list(self.processor.handleInputRows((0,), iter([batch]), Times(watermark)))

    def advance(self, watermark):
        """Fire the timers the watermark reached (Spark: a timer at or below it), once each."""
        due = sorted(t for t in self.handle.timers if t <= watermark)
        if due:
            self.handle.timers -= set(due)
            self.out += list(self.processor.handleExpiredTimer((0,), Times(watermark), None))

    def emitted(self):
        result = pd.concat([o for o in self.out if len(o)], ignore_index=True)
        assert (result[over.ROWKIND_COLUMN] == "+I").all()
        rows = [(r.k, _plain(r.x), int(pd.Timestamp(r.ts).value // 10**6), *[_plain(v) for v in r[5:]])
                for r in result.itertuples(index=False)]
        return sorted(rows, key=repr)

    @property
    def generations(self):
        return self.handle.states["generations"]


def _fed(operator, batches, delay):
    seen = -10**15
    for batch in batches:
        operator.rows(batch, seen - delay)  # Spark's watermark when the batch arrives
        seen = max([seen] + [int(pd.Timestamp(r[3]).value // 10**6) for r in batch])
        operator.advance(seen - delay)
    operator.advance(END)
    return operator.emitted()


@pytest.mark.parametrize("unit, preceding", [("ROWS", 2), ("ROWS", 0), ("ROWS", None), ("RANGE", 3000),
                                             ("RANGE", None)])
@pytest.mark.parametrize("poor", [False, True])
@pytest.mark.parametrize("seed", depth.seeds(1, 2, first=1))
def test_rows_emitted_from_generations_match_a_row_by_row_reference(unit, preceding, poor, seed):
    rng = random.Random(seed)
    keys = [f"p{i}" for i in range(12)] + [None]
    batches = _random_batches(rng, 10, 25, 4, (-6, 4), keys, lambda: rng.choice([None, rng.random()]))
    delay = 2000
    expected = _reference(_accepted(batches, delay), unit, preceding)
    got = _fed(Operator(_plan(unit, preceding), poor), batches, delay)
    assert len(got) == len(expected) > 50
    for g, e in zip(got, expected):
        assert g[:9] == e[:9], (g, e)
        assert (g[9] is None and e[9] is None) or g[9] == pytest.approx(e[9])


def _at(seconds):
    return pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=seconds)


def _ms(seconds):
    return int(_at(seconds).value // 10**6)


def test_rows_wait_without_reading_the_history_and_a_firing_reads_its_partitions_only():
    operator = Operator(_plan("ROWS", None))
    for i, key in enumerate(["a", "b", "c"]):  # each partition's history written by a firing of its own
        operator.rows([(key, 1, None, _at(10 * i + 1))], _ms(10 * i))
        operator.advance(_ms(10 * i + 5))
    assert len(operator.generations.entries) == 3
    operator.generations.reads.clear()
    operator.rows([("a", 2, None, _at(40)), ("c", 3, None, _at(41))], _ms(35))
    assert operator.generations.reads == []  # the rows wait for the watermark
    operator.advance(_ms(40) + 1)  # a's row only
    assert len(operator.generations.reads) == 1
    operator.advance(END)
    sums = {(k, x): w for k, x, _, _, _, w, *_ in operator.emitted()}
    assert sums[("a", 2)] == 3 and sums[("c", 3)] == 4


def test_a_range_s_history_goes_once_the_watermark_has_passed_it_by_the_range():
    operator = Operator(_plan("RANGE", 3000))
    operator.rows([("a", 1, None, _at(1))], _ms(0))
    operator.advance(_ms(1) + 1)  # a's history: a generation of its own
    operator.rows([("b", 1, None, _at(2))], _ms(1))
    operator.advance(_ms(2) + 1)  # b's
    assert len(operator.generations.entries) == 2
    operator.rows([("b", 5, None, _at(100))], _ms(90))
    operator.advance(_ms(100) + 1)  # b fires again; a's rows are in no frame after 4 s: unread, they go
    assert len(operator.generations.entries) == 1
    assert operator.generations.reads == [2]
    operator.rows([("a", 7, None, _at(101))], _ms(100) + 1)
    operator.advance(END)
    assert [(k, x, count) for k, x, _, count, *_ in operator.emitted()] == [
        ("a", 1, 1), ("a", 7, 1), ("b", 1, 1), ("b", 5, 1)]


def test_state_ttl_forgets_a_partition_whose_next_row_came_after_it_was_idle_that_long(monkeypatch):
    """A partition's history expires once it was idle for the TTL with no row waiting (as
    Flink's OVER operators clean a key's state): by its next row's arrival, not by when that
    row fires; a generation past the TTL stays while a row of one of its partitions waits."""
    now = [0.0]
    monkeypatch.setattr(over.time, "time", lambda: now[0])
    operator = Operator({**_plan("ROWS", None), "ttl_ms": 1_000})
    operator.rows([("a", 1, None, _at(1)), ("b", 10, None, _at(1))], _ms(0))
    now[0] = 0.5
    operator.advance(_ms(1) + 1)  # both emit at 0.5 s, their history one generation
    now[0] = 1.0
    operator.rows([("a", 2, None, _at(5))], _ms(1) + 1)  # 0.5 s after a emitted: within the TTL
    now[0] = 3.0
    operator.rows([("b", 20, None, _at(5)), ("c", 100, None, _at(3))], _ms(1) + 1)  # b idle for 2.5 s
    operator.advance(_ms(3) + 1)  # c alone, at 3 s: the generation is past the TTL, but a and b wait
    now[0] = 60.0
    operator.advance(END)
    sums = {k: w for k, x, _, _, _, w, *_ in operator.emitted() if x in (2, 20, 100)}
    assert sums == {"a": 3, "b": 20, "c": 100}


@pytest.mark.parametrize("unit, preceding", [("ROWS", 2), ("ROWS", None), ("RANGE", 3000)])
def test_processing_time_frames_reach_back_into_earlier_micro_batches(unit, preceding):
    """Processing time orders rows by arrival alone: the arrival counter must survive a
    micro-batch that leaves no row waiting, or a later row sorts before the history."""
    rng = random.Random(5)
    batches = [[(rng.choice(["a", "b", None]), rng.choice([None, rng.randint(-50, 50)]), None,
                 _at(10 * b) + pd.Timedelta(milliseconds=i)) for i in range(rng.randint(1, 6))] for b in range(8)]
    operator = Operator(_plan(unit, preceding, rowtime=False))
    for batch in batches:
        operator.rows(batch, 0)
    assert operator.handle.timers == set()
    expected = _reference(_accepted(batches, 10**15), unit, preceding)
    got = operator.emitted()
    assert [g[:9] for g in got] == [e[:9] for e in expected]


def test_a_state_ttl_set_at_a_restart_stamps_the_history_written_before_it(monkeypatch):
    """Generations fold rows of partitions written without a TTL beside rows written with
    one: the former get their change time when they are next read, as a whole bucket's did."""
    now = [0.0]
    monkeypatch.setattr(over.time, "time", lambda: now[0])
    plain = Operator(_plan("ROWS", None))
    plain.rows([("a", 1, None, _at(1)), ("b", 10, None, _at(1)), ("c", 100, None, _at(1))], _ms(0))
    plain.advance(_ms(1) + 1)
    timed = Operator({**_plan("ROWS", None), "ttl_ms": 60_000})
    timed.handle = plain.handle  # the restart: the same state, the operator with a TTL now
    timed.processor.init(timed.handle)
    timed.rows([("a", 2, None, _at(5))], _ms(1) + 1)
    timed.advance(_ms(5) + 1)  # a's history read and written back stamped; b's and c's folded in beside it
    timed.rows([("b", 20, None, _at(6)), ("c", 200, None, _at(7))], _ms(5) + 1)
    timed.advance(_ms(6) + 1)
    timed.advance(END)
    sums = {k: w for k, x, _, _, _, w, *_ in timed.emitted()}
    assert sums == {"a": 3, "b": 30, "c": 300}


def test_a_fold_leaves_behind_the_range_rows_the_watermark_retired():
    """A bounded RANGE's rows of an idle partition, folded into a new generation beside a busy
    one's, would be carried on forever: the fold drops those the watermark has passed by the
    width, and their partition's index entry with them."""
    operator = Operator(_plan("RANGE", 3000))
    operator.rows([("a", i, None, _at(1) + pd.Timedelta(milliseconds=i)) for i in range(50)]
                  + [("b", 1, None, _at(1))], _ms(0))
    operator.advance(_ms(2))  # one generation: 50 rows of a's, one of b's
    for second in (10, 20, 30):
        operator.rows([("b", second, None, _at(second))], _ms(second - 1))
        operator.advance(_ms(second) + 1)
    stored = sum(pa_rows(value) for value in operator.generations.entries.values())
    assert stored == 1  # b's last row
    assert len(operator.processor.history.hashes) == 1
    operator.rows([("a", 999, None, _at(40))], _ms(39))
    operator.advance(END)
    assert [row[:4] for row in operator.emitted() if row[1] == 999] == [("a", 999, _ms(40), 1)]


def pa_rows(value) -> int:
    from streamsql.spark.stateful import state_bytes

    return sum(state_bytes.ipc_table(blob).num_rows for blob in value if blob is not None)
