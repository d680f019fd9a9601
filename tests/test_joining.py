"""The regular join's pandas core (spark.stateful.joining), without Spark: random changes to
both sides in micro-batches; after every batch, the emitted changelog applied so far must
equal the join of the two sides as they then are, computed here row by row (SQL's inner
and outer join: NULL keys never match, a row without a partner is null-padded)."""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import pytest

from streamsql.spark.stateful import joining

KINDS = {"__k0": "object", "__l0": "int", "__l1": "object", "__r0": "int"}


def _plan(join_type):
    return {"keys": ["__k0"], "left": ["__l0", "__l1"], "right": ["__r0"], "kinds": KINDS, "join_type": join_type}


def _reference(left: Counter, right: Counter, join_type: str) -> Counter:
    out: Counter = Counter()
    for (lk, l0, l1), ln in left.items():
        partners = [(rk, r0, rn) for (rk, r0), rn in right.items() if lk is not None and rk == lk]
        for _, r0, rn in partners:
            out[(l0, l1, r0)] += ln * rn
        if not partners and join_type in ("LeftOuterJoin", "FullOuterJoin"):
            out[(l0, l1, None)] += ln
    if join_type in ("RightOuterJoin", "FullOuterJoin"):
        for (rk, r0), rn in right.items():
            if not any(lk == rk and rk is not None for (lk, _, _) in left):
                out[(None, None, r0)] += rn
    return +out


def _plain(value):
    return None if value is None or value is pd.NA or (isinstance(value, float) and value != value) else (
        value.item() if hasattr(value, "item") else value)


@pytest.mark.parametrize("join_type", ["InnerJoin", "LeftOuterJoin", "RightOuterJoin", "FullOuterJoin"])
@pytest.mark.parametrize("seed", range(4))
def test_changelog_applied_equals_the_join_after_every_batch(join_type, seed):
    rng = random.Random(seed)
    plan = _plan(join_type)
    left_state = right_state = None
    left, right, applied = Counter(), Counter(), Counter()
    for _ in range(8):
        rows = []
        for _ in range(rng.randint(0, 8)):
            side = rng.randint(0, 1)
            key = rng.choice(["a", "b", "c", None])
            live = list((left if side == 0 else right).elements())
            if live and rng.random() < 0.35:  # retract a row the side holds (sometimes as -U)
                row = rng.choice(live)
                kind = rng.choice(["-D", "-U"])
            else:
                row = (key, rng.randint(0, 3), rng.choice(["x", None])) if side == 0 else (key, rng.randint(0, 3))
                kind = rng.choice(["+I", "+U"])
            (left if side == 0 else right)[row] += 1 if kind in ("+I", "+U") else -1
            if rng.random() < 0.1:  # a retraction of a row nobody holds changes nothing
                rows.append({"__side": side, "__rowkind": "-D", "__k0": "zz", "__l0": 9 if side == 0 else None,
                             "__l1": None, "__r0": 9 if side == 1 else None})
            rows.append({"__side": side, "__rowkind": kind, "__k0": row[0],
                         "__l0": row[1] if side == 0 else None, "__l1": row[2] if side == 0 else None,
                         "__r0": row[1] if side == 1 else None})
        left, right = +left, +right
        batch = pd.DataFrame(rows, columns=["__side", "__rowkind", "__k0", "__l0", "__l1", "__r0"])
        left_state, right_state, out = joining.fold(plan, left_state, right_state, batch)
        for kind, *row in out.itertuples(index=False):
            row = tuple(_plain(v) for v in row)
            if kind == "+I":
                applied[row] += 1
            else:
                assert applied[row] > 0, f"{kind} {row} retracts a row not in the result"
                applied[row] -= 1
        applied = +applied
        assert applied == _reference(left, right, join_type)


def test_retractions_come_before_insertions():
    plan = _plan("LeftOuterJoin")
    batch = pd.DataFrame([{"__side": 0, "__rowkind": "+I", "__k0": "a", "__l0": 1, "__l1": "x", "__r0": None}])
    left, right, out = joining.fold(plan, None, None, batch)
    assert out["__rowkind"].tolist() == ["+I"] and out["__r0"].isna().all()
    batch = pd.DataFrame([{"__side": 1, "__rowkind": "+I", "__k0": "a", "__l0": None, "__l1": None, "__r0": 5}])
    left, right, out = joining.fold(plan, left, right, batch)
    assert out["__rowkind"].tolist() == ["-D", "+I"] and out["__r0"].tolist()[1] == 5


def test_timestamps_merge_with_the_state_arrow_gave_back():
    """A timestamp payload column: the state comes back from Arrow IPC as datetime64[us],
    a batch as datetime64[ns] or, all NULL, as None; they still merge (a row retracted)."""
    from streamsql.spark.stateful import accumulate

    plan = {"keys": ["__k0"], "left": ["__l0"], "right": ["__r0"], "join_type": "LeftOuterJoin",
            "kinds": {"__k0": "object", "__l0": "time", "__r0": "int"}}
    at = pd.Timestamp("2026-01-01 00:00:10")
    first = pd.DataFrame({"__side": [0, 0], "__rowkind": ["+I", "+I"], "__k0": ["a", "b"],
                          "__l0": pd.Series([at, None], dtype="datetime64[ns]"), "__r0": [None, None]})
    left, right, out = joining.fold(plan, None, None, first)
    left = accumulate._from_bytes(accumulate._to_bytes(left))
    second = pd.DataFrame({"__side": [0, 0, 1], "__rowkind": ["-D", "-D", "+I"], "__k0": ["a", "b", "a"],
                           "__l0": [at.to_pydatetime(), None, None], "__r0": [None, None, 7]})
    left, right, out = joining.fold(plan, left, right, second)
    assert list(out["__rowkind"]) == ["-D", "-D"] and out["__r0"].isna().all()  # both padded rows go
    assert left is None and len(right) == 1
