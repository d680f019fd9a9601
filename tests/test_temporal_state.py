"""The event-time temporal join's state (spark.stateful.temporal_join) without Spark: its
processor driven through an in-memory state handle (test_over_state's, with timers),
micro-batch by micro-batch under a moving watermark, each timer fired as Spark fires it.

Its versions live in generations by key hash and are pruned when read: whatever the hash
(a spreading one, or a poor one that files distinct keys together), the joined rows must
be those of the join over the whole bucket pruned at every call (``accept``/``fire``), and a
call must read only the generations of the keys it brings."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamsql.spark.stateful import generations
from streamsql.spark.stateful import temporal_join as tj
from tests.test_over_state import END, Handle, Times
from tests.test_over_state import Operator as OverOperator
from tests import depth

COLUMNS = ["__side", "__rowkind", "__k0", "__lt", "__l0", "__rt", "__r0"]


def _plan(join_type):
    return {"keys": ["__k0", generations.HASH], "left": ["__lt", "__l0"], "right": ["__rt", "__r0"],
            "join_type": join_type, "buckets": 1, "left_time": "__lt", "right_time": "__rt",
            "kinds": {"__k0": "object", generations.HASH: "int", "__lt": "int", "__l0": "int", "__rt": "int",
                      "__r0": "int"},
            "columns": COLUMNS + [generations.HASH]}


def _batch(rows, poor):
    """('L' or 'R', kind, key, time ms, value) as the operator's input, hashed."""
    out = pd.DataFrame([{"__side": 0 if side == "L" else 1, "__rowkind": kind, "__k0": key,
                         "__lt": t if side == "L" else None, "__l0": value if side == "L" else None,
                         "__rt": None if side == "L" else t, "__r0": None if side == "L" else value}
                        for side, kind, key, t, value in rows], columns=COLUMNS)
    names = out["__k0"].map(lambda k: "\0" if k is None else k)
    out[generations.HASH] = (names.map(len) % 2 if poor else names.map(lambda k: hash(k) % 10**12)).astype("int64")
    return out


class Operator(OverOperator):
    """One bucket of the temporal join: batches in, timers fired as the watermark passes them
    (``advance``, as for OVER)."""

    def __init__(self, join_type, poor=False):
        self.plan, self.poor, self.handle = _plan(join_type), poor, Handle()
        self.processor = tj.TemporalJoinProcessor(self.plan)
        self.processor.init(self.handle)
        self.out: list[pd.DataFrame] = []

    def rows(self, rows, watermark):
        batch = _batch(rows, self.poor).assign(__bucket=0)
        self.out += list(self.processor.handleInputRows((0,), iter([batch]), Times(watermark)))

    @property
    def generations(self):
        return self.handle.states["generations_versions"]


class Whole:
    """The reference: the bucket's whole state, every key pruned at every call."""

    def __init__(self, join_type):
        self.plan, self.rows_, self.versions, self.seq, self.out = _plan(join_type), None, None, 0, []
        self.timer = None

    def rows(self, rows, watermark):
        self.rows_, self.versions, self.seq = tj.accept(self.plan, self.rows_, self.versions, self.seq,
                                                        _batch(rows, False))
        self._fire(watermark)

    def advance(self, watermark):
        if self.timer is not None and self.timer <= watermark:
            self._fire(watermark)

    def _fire(self, watermark):
        self.rows_, self.versions, out = tj.fire(self.plan, self.rows_, self.versions, watermark)
        self.timer = tj.next_time(self.plan, self.rows_)
        self.out.append(out)


def _joined(outs):
    frames = [o for o in outs if len(o)]
    if not frames:
        return []
    result = pd.concat(frames, ignore_index=True)
    return sorted((tuple(None if pd.isna(v) else int(v) if not isinstance(v, str) else v for v in row)
                   for row in result[["__rowkind", "__lt", "__l0", "__r0"]].itertuples(index=False, name=None)),
                  key=repr)


def _random_batches(rng, count, size, keys):
    batches, now = [], 0
    for _ in range(count):
        batch = []
        for _ in range(size):
            side = rng.choice("LR")
            kind = rng.choice(["+I", "+I", "+I", "-U", "+U", "-D"]) if side == "R" else "+I"
            batch.append((side, kind, rng.choice(keys), now + rng.randint(-3000, 2000), rng.randint(0, 99)))
        now += 1500
        batches.append(batch)
    return batches


@pytest.mark.parametrize("join_type", ["InnerJoin", "LeftOuterJoin"])
@pytest.mark.parametrize("poor", [False, True])
@pytest.mark.parametrize("seed", depth.seeds(1, 2, first=1))
def test_rows_joined_from_generations_match_the_join_over_the_whole_state(join_type, poor, seed):
    rng = random.Random(seed)
    keys = [f"k{i}" for i in range(15)] + [None]
    operator, whole = Operator(join_type, poor), Whole(join_type)
    seen, delay = -10**12, 1000
    for batch in _random_batches(rng, 12, 30, keys):
        for side in (operator, whole):
            side.rows(batch, seen - delay)  # Spark's watermark when the batch arrives
        seen = max([seen] + [t for *_, t, _ in batch])
        for side in (operator, whole):
            side.advance(seen - delay)
    for side in (operator, whole):
        side.advance(END)
    got, want = _joined(operator.out), _joined(whole.out)
    assert got == want and len(want) > 60
    # the versions kept are the reference's: each key's latest the watermark passed
    _, (kept,) = operator.processor.versions.load(np.unique(_batch([("R", "+I", k, 0, 0) for k in keys], poor)
                                                             [generations.HASH].to_numpy()))
    kept = tj._prune(operator.plan, kept, END)
    assert sorted(kept["__r0"].tolist()) == sorted(whole.versions["__r0"].tolist())


def test_a_call_reads_the_versions_of_the_keys_it_brings_only():
    operator = Operator("InnerJoin")
    for i in range(20):  # each key's version written by a call of its own: a generation each
        operator.rows([("R", "+I", f"k{i}", 1000 * i, i)], 1000 * i - 1)
    assert len(operator.generations.entries) >= 10
    operator.generations.reads.clear()
    operator.rows([("L", "+I", "k3", 30_000, 1), ("L", "+I", "k7", 31_000, 2)], 25_000)
    assert operator.generations.reads == []  # the rows wait for the watermark; no version came
    operator.advance(30_001)  # k3's row is due: its key's versions only
    assert len(operator.generations.reads) == 1
    operator.advance(END)
    assert _joined(operator.out) == [("+I", 30_000, 1, 3), ("+I", 31_000, 2, 7)]
