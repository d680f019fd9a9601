"""OVER aggregation's pandas core (spark.stateful.over_frames), without Spark: random rows fed
in micro-batches under a moving watermark, checked against a row-by-row reference of
Flink's rowtime OVER semantics written here (late rows dropped, ROWS in arrival order
among equal times, RANGE with every peer of the current row)."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

from streamsql.spark.stateful import over_frames

CALLS = [("COUNT", None), ("COUNT", "x"), ("SUM", "x"), ("AVG", "x"), ("MIN", "x"), ("MAX", "x"), ("MAX", "f")]


def _plan(unit, preceding, rowtime=True):
    aggs = []
    for i, (function, column) in enumerate(CALLS):
        kind = "float" if column == "f" else "int"
        out_kind = "int" if function == "COUNT" or kind == "int" else "float"
        aggs.append({"function": function, "column": column, "kind": kind, "out_kind": out_kind,
                     "out_bits": 64 if out_kind == "int" else 0, "out_scale": None, "name": f"w{i}"})
    return {"partition": ["k"], "time": "ts", "rowtime": rowtime, "unit": unit, "preceding": preceding,
            "aggs": aggs, "columns": ["k", "x", "f", "ts"], "kinds": {"k": "object", "x": "int", "f": "float"}}


def _reference(rows, unit, preceding):
    """Each accepted row with its aggregates, computed row by row."""
    out = []
    for row in rows:
        same = sorted((r for r in rows if r["k"] == row["k"]), key=lambda r: (r["ms"], r["seq"]))
        if unit == "ROWS":
            p = same.index(row)
            frame = same[max(0, p - preceding) if preceding is not None else 0:p + 1]
        else:
            low = row["ms"] - preceding if preceding is not None else -10**18
            frame = [r for r in same if low <= r["ms"] <= row["ms"]]
        xs = [r["x"] for r in frame if r["x"] is not None]
        fs = [r["f"] for r in frame if r["f"] is not None]
        avg = None
        if xs:
            q = abs(sum(xs)) // len(xs)
            avg = q if sum(xs) >= 0 else -q
        out.append((row["k"], row["x"], row["ms"], len(frame), len(xs), sum(xs) if xs else None, avg,
                    min(xs) if xs else None, max(xs) if xs else None, max(fs) if fs else None))
    return sorted(out, key=repr)


def _run(plan, batches, delay):
    pending, history, seq, seen, outputs = None, None, 0, -10**15, []
    for batch in batches:
        watermark = seen - delay  # Spark's watermark when the batch arrives
        frame = pd.DataFrame(batch, columns=["k", "x", "f", "ts"])
        pending, seq = over_frames.accept(plan, pending, frame, watermark, seq)
        seen = max([seen] + [int(pd.Timestamp(r[3]).value // 10**6) for r in batch])
        pending, history, out = over_frames.fire(plan, pending, history, seen - delay)
        outputs.append(out)
    pending, history, out = over_frames.fire(plan, pending, history, np.iinfo("int64").max)
    outputs.append(out)
    assert pending is None
    result = pd.concat([o for o in outputs if len(o)], ignore_index=True)
    rows = [(r.k, _plain(r.x), int(pd.Timestamp(r.ts).value // 10**6), *[_plain(v) for v in r[4:]])
            for r in result.itertuples(index=False)]
    return sorted(rows, key=repr)


def _plain(value):
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def _accepted(batches, delay):
    rows, seen, seq = [], -10**15, 0
    for batch in batches:
        for k, x, f, ts in batch:
            ms = int(pd.Timestamp(ts).value // 10**6)
            if ms >= seen - delay:
                rows.append({"k": k, "x": x, "f": f, "ms": ms, "seq": seq})
                seq += 1
        seen = max([seen] + [int(pd.Timestamp(r[3]).value // 10**6) for r in batch])
    return rows


@pytest.mark.parametrize("unit, preceding", [("ROWS", 2), ("ROWS", 0), ("ROWS", None), ("RANGE", 3000),
                                             ("RANGE", None), ("RANGE", 0)])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_frames_match_a_row_by_row_reference(unit, preceding, seed):
    rng = random.Random(seed)
    base = pd.Timestamp("2026-01-01")
    batches = []
    for b in range(6):
        batch = []
        for _ in range(rng.randint(0, 12)):
            ms = (b * 4 + rng.randint(-6, 4)) * 1000  # out of order, some late
            batch.append((rng.choice(["a", "b", "c", None]), rng.choice([None, rng.randint(-50, 50)]),
                          rng.choice([None, rng.random()]), base + pd.Timedelta(milliseconds=max(ms, 0))))
        batches.append(batch)
    delay = 2000
    plan = _plan(unit, preceding)
    expected = _reference(_accepted(batches, delay), unit, preceding)
    got = _run(plan, batches, delay)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g[:9] == e[:9], (g, e)
        assert (g[9] is None and e[9] is None) or g[9] == pytest.approx(e[9])


def test_unbounded_state_is_one_row_per_partition():
    plan = _plan("ROWS", None)
    base = pd.Timestamp("2026-01-01")
    frame = pd.DataFrame([("a", i, 0.5, base + pd.Timedelta(seconds=i)) for i in range(100)],
                         columns=["k", "x", "f", "ts"])
    pending, _ = over_frames.accept(plan, None, frame, -1, 0)
    pending, history, out = over_frames.fire(plan, pending, None, np.iinfo("int64").max)
    assert len(out) == 100 and len(history) == 1
    assert out["w2"].tolist()[-1] == sum(range(100))


def test_processing_time_emits_every_row_at_once_in_arrival_order():
    plan = _plan("ROWS", 1, rowtime=False)
    base = pd.Timestamp("2026-01-01")
    frame = pd.DataFrame([("a", 5, None, base), ("a", 7, None, base), ("a", 1, None, base)],
                         columns=["k", "x", "f", "ts"])
    pending, _ = over_frames.accept(plan, None, frame, 0, 0)
    pending, history, out = over_frames.fire(plan, pending, None, None)
    assert pending is None and out["w2"].tolist() == [5, 12, 8]
