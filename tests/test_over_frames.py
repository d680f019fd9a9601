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
from tests import depth

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


def _frame(rows, row, unit, preceding):
    """The rows of ``row``'s frame: its partition's, by time then arrival."""
    same = sorted((r for r in rows if r["k"] == row["k"]), key=lambda r: (r["ms"], r["seq"]))
    if unit == "ROWS":
        p = same.index(row)
        return same[max(0, p - preceding) if preceding is not None else 0:p + 1]
    low = row["ms"] - preceding if preceding is not None else -10**18
    return [r for r in same if low <= r["ms"] <= row["ms"]]


def _reference(rows, unit, preceding):
    """Each accepted row with its aggregates, computed row by row."""
    out = []
    for row in rows:
        frame = _frame(rows, row, unit, preceding)
        xs = [r["x"] for r in frame if r["x"] is not None]
        fs = [r["f"] for r in frame if r["f"] is not None]
        avg = None
        if xs:
            q = abs(sum(xs)) // len(xs)
            avg = q if sum(xs) >= 0 else -q
        out.append((row["k"], row["x"], row["ms"], len(frame), len(xs), sum(xs) if xs else None, avg,
                    min(xs) if xs else None, max(xs) if xs else None, max(fs) if fs else None))
    return sorted(out, key=repr)


def _run(plan, batches, delay, columns=("k", "x", "f", "ts")):
    pending, history, seq, seen, outputs = None, None, 0, -10**15, []
    for batch in batches:
        watermark = seen - delay  # Spark's watermark when the batch arrives
        frame = pd.DataFrame(batch, columns=list(columns))
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
    return sorted(rows, key=repr), history


def _plain(value):
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return value.item() if isinstance(value, (np.integer, np.floating)) else value


def _accepted(batches, delay, third="f"):
    rows, seen, seq = [], -10**15, 0
    for batch in batches:
        for k, x, other, ts in batch:
            ms = int(pd.Timestamp(ts).value // 10**6)
            if ms >= seen - delay:
                rows.append({"k": k, "x": x, third: other, "ms": ms, "seq": seq})
                seq += 1
        seen = max([seen] + [int(pd.Timestamp(r[3]).value // 10**6) for r in batch])
    return rows


def _random_batches(rng, count: int, rows: int, step: int, spread: tuple[int, int], keys, third) -> list[list]:
    """Micro-batches of (k, x, third(), ts): times rise batch by batch but go out of order
    within ``spread`` seconds, so some rows are late; x and k are often NULL."""
    base = pd.Timestamp("2026-01-01")
    batches = []
    for b in range(count):
        batch = []
        for _ in range(rng.randint(0, rows)):
            ms = (b * step + rng.randint(*spread)) * 1000
            batch.append((rng.choice(keys), rng.choice([None, rng.randint(-50, 50)]), third(),
                          base + pd.Timedelta(milliseconds=max(ms, 0))))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("unit, preceding", [("ROWS", 2), ("ROWS", 0), ("ROWS", None), ("RANGE", 3000),
                                             ("RANGE", None), ("RANGE", 0)])
@pytest.mark.parametrize("seed", depth.seeds(1, 3, first=1))
def test_frames_match_a_row_by_row_reference(unit, preceding, seed):
    rng = random.Random(seed)
    batches = _random_batches(rng, 6, 12, 4, (-6, 4), ["a", "b", "c", None], lambda: rng.choice([None, rng.random()]))
    delay = 2000
    plan = _plan(unit, preceding)
    expected = _reference(_accepted(batches, delay), unit, preceding)
    got, _ = _run(plan, batches, delay)
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


def _feed(plan, pending, history, seq, rows, watermark, now):
    """One call of the operator at processing time ``now``: expire, accept (no row is late
    here), fire up to ``watermark`` (ms after 2026-01-01)."""
    watermark += int(pd.Timestamp("2026-01-01").value // 10**6)
    history = over_frames.expire(plan, pending, history, now)
    if rows:
        pending, seq = over_frames.accept(plan, pending, pd.DataFrame(rows, columns=["k", "x", "f", "ts"]), 0, seq)
    pending, history, out = over_frames.fire(plan, pending, history, watermark, now_ms=now)
    return pending, history, seq, out


@pytest.mark.parametrize("unit, preceding", [("ROWS", None), ("ROWS", 3), ("RANGE", None)])
def test_state_ttl_forgets_an_idle_partition_and_it_starts_afresh(unit, preceding):
    """'table.exec.state.ttl': a partition whose last output is older than the TTL loses its
    history (a later row's frame holds only rows after it); one that emitted within the TTL
    keeps it; without a TTL nothing is forgotten."""
    at = lambda s: pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=s)  # noqa: E731
    first = [("a", 1, None, at(1)), ("b", 10, None, at(2)), ("a", 2, None, at(3))]
    later = [("a", 4, None, at(20)), ("b", 20, None, at(21))]
    sums = {}
    for ttl in (None, 5_000):
        plan = dict(_plan(unit, preceding), ttl_ms=ttl)
        pending, history, seq, _ = _feed(plan, None, None, 0, first, 10_000, now=1_000)
        pending, history, seq, _ = _feed(plan, pending, history, seq, [("a", 3, None, at(11))], 15_000, now=4_000)
        pending, history, seq, out = _feed(plan, pending, history, seq, later, 30_000, now=8_000)
        sums[ttl] = dict(zip(out["k"], out["w2"]))
    assert sums[None] == {"a": 10, "b": 30}
    assert sums[5_000] == {"a": 10, "b": 20}  # 'a' emitted at 4 s, 'b' last at 1 s: 8 s is past its TTL


def test_state_ttl_keeps_a_partition_with_rows_waiting_for_the_watermark():
    """Flink's OVER operators clean a key's state only when none of its rows waits for the
    watermark: an idle partition with a pending row keeps its history."""
    at = lambda s: pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=s)  # noqa: E731
    plan = dict(_plan("ROWS", None), ttl_ms=1_000)
    pending, history, seq, _ = _feed(plan, None, None, 0, [("a", 1, None, at(1)), (None, 2, None, at(1))],
                                     5_000, now=0)
    pending, history, seq, _ = _feed(plan, pending, history, seq, [("a", 5, None, at(9)), (None, 7, None, at(9))],
                                     5_000, now=100)  # both wait for the watermark
    pending, history, seq, out = _feed(plan, pending, history, seq, [], 10_000, now=60_000)
    assert sorted(zip(out["x"], out["w2"])) == [(5, 6), (7, 9)]
    _, history, _, out = _feed(plan, pending, history, seq, [("a", 3, None, at(20))], 30_000, now=120_000)
    assert out["w2"].tolist() == [3] and len(history) == 1


def test_history_from_before_the_state_ttl_is_touched_when_it_next_emits():
    at = lambda s: pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=s)  # noqa: E731
    plain, timed = _plan("ROWS", None), dict(_plan("ROWS", None), ttl_ms=1_000)
    pending, history, seq, _ = _feed(plain, None, None, 0, [("a", 1, None, at(1))], 5_000, now=0)
    assert over_frames.TOUCHED not in history.columns
    assert over_frames.expire(timed, pending, history, 10**9) is history  # no change time: kept
    pending, history, seq, out = _feed(timed, pending, history, seq, [("a", 2, None, at(6))], 10_000, now=50)
    assert out["w2"].tolist() == [3] and history[over_frames.TOUCHED].tolist() == [50]
    pending, history, seq, out = _feed(plain, pending, history, seq, [("a", 4, None, at(11))], 15_000, now=10**9)
    assert out["w2"].tolist() == [7] and over_frames.TOUCHED not in history.columns


VALUE_CALLS = [("LAG", {"offset": 1, "default": None}), ("LAG", {"offset": 2, "default": "d"}),
               ("LAG", {"offset": 0, "default": None}), ("FIRST_VALUE", {}), ("LAST_VALUE", {}), ("SUM", {}),
               ("MIN", {})]


def _value_plan(unit, preceding, rowtime=True):
    calls = [c for c in VALUE_CALLS if preceding is None or c[0] != "LAG"]  # LAG: unbounded frames only
    aggs = [{"function": f, "column": "x", "kind": "int", "out_kind": "int", "out_bits": 64, "out_scale": None,
             "name": f"v{i}", **options} for i, (f, options) in enumerate(calls)]
    return {"partition": ["k"], "time": "ts", "rowtime": rowtime, "unit": unit, "preceding": preceding,
            "aggs": aggs, "columns": ["k", "x", "d", "ts"], "kinds": {"k": "object", "x": "int", "d": "int"}}


def _value_reference(rows, plan):
    """Flink's streaming semantics row by row: LagAggFunction's buffer after the frame's last
    row (for RANGE, the last peer: peers are accumulated, then emitted), FIRST_VALUE and
    LAST_VALUE skipping NULLs."""
    out = []
    for row in rows:
        same = sorted((r for r in rows if r["k"] == row["k"]), key=lambda r: (r["ms"], r["seq"]))
        p = same.index(row)
        hi = max(i for i, r in enumerate(same) if r["ms"] == row["ms"]) if plan["unit"] == "RANGE" else p
        preceding = plan["preceding"]
        if plan["unit"] == "ROWS":
            lo = max(0, p - preceding) if preceding is not None else 0
        else:
            low = row["ms"] - (preceding if preceding is not None else 10**18)
            lo = min(i for i, r in enumerate(same) if r["ms"] >= low)
        xs = [r["x"] for r in same[lo:hi + 1] if r["x"] is not None]
        values = []
        for agg in plan["aggs"]:
            if agg["function"] == "LAG":
                at = hi - agg["offset"]
                values.append(same[at]["x"] if at >= 0 else same[hi]["d"] if agg["default"] else None)
            else:
                values.append({"FIRST_VALUE": xs[0] if xs else None, "LAST_VALUE": xs[-1] if xs else None,
                               "SUM": sum(xs) if xs else None, "MIN": min(xs) if xs else None}[agg["function"]])
        out.append((row["k"], row["x"], row["ms"], *values))
    return sorted(out, key=repr)


@pytest.mark.parametrize("unit, preceding", [("ROWS", None), ("RANGE", None), ("ROWS", 2), ("RANGE", 3000)])
@pytest.mark.parametrize("seed", depth.seeds(2, 4, first=1))
def test_lag_first_and_last_value_match_flinks_row_by_row_semantics(unit, preceding, seed):
    """Equal times (peers) and NULL values are frequent, rows come in several micro-batches (the
    rows LAG reaches back to are in the state), some late."""
    rng = random.Random(seed)
    batches = _random_batches(rng, 7, 10, 3, (-4, 3), ["a", "b", None], lambda: rng.randint(100, 200))
    delay, plan = 2000, _value_plan(unit, preceding)
    got, history = _run(plan, batches, delay, columns=("k", "x", "d", "ts"))
    assert got == _value_reference(_accepted(batches, delay, third="d"), plan)
    if preceding is None:  # the state: a summary per partition, and LAG's last two rows
        assert len(history) <= 3 * history["k"].nunique(dropna=False)


def test_rows_of_equal_time_are_ordered_by_the_further_keys():
    """A TemporalSort's further ORDER BY keys: equal times by the keys (NULLs where the key
    puts them), then by arrival; times first."""
    at = lambda s: pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=s)  # noqa: E731
    plan = {"partition": [], "time": "ts", "rowtime": True, "unit": "ROWS", "preceding": 0, "aggs": [],
            "columns": ["k", "x", "ts"], "kinds": {"k": "object", "x": "int"},
            "ties": [["x", True, False], ["k", False, True]]}
    rows = [("b", 1, at(2)), ("a", 5, at(2)), (None, 5, at(2)), ("c", None, at(2)), ("z", 0, at(1)), ("a", 1, at(2))]
    pending, _ = over_frames.accept(plan, None, pd.DataFrame(rows, columns=["k", "x", "ts"]), 0, 0)
    _, _, out = over_frames.fire(plan, pending, None, np.iinfo("int64").max)
    assert [(_plain(k), _plain(x)) for k, x in zip(out["k"], out["x"])] == [
        ("z", 0), (None, 5), ("a", 5), ("a", 1), ("b", 1), ("c", None)]


SPREAD_CALLS = [("STDDEV_POP", "x", 32), ("VAR_SAMP", "x", 64), ("VAR_POP", "x", 32), ("STDDEV_SAMP", "x", 64),
                ("VAR_SAMP", "f", 0), ("STDDEV_POP", "f", 0)]


def _spread_plan(unit, preceding):
    aggs = [{"function": function, "column": column, "kind": "int" if bits else "float",
             "out_kind": "int" if bits else "float", "out_bits": bits, "out_scale": None, "name": f"w{i}"}
            for i, (function, column, bits) in enumerate(SPREAD_CALLS)]
    return dict(_plan(unit, preceding), aggs=aggs)


def _flinks_spread(values, function, bits):
    """Flink's expansion over a window (measured on Flink 2.3): (SUM(x * x) - SUM(x) *
    SUM(x) / COUNT(x)) / COUNT(x) (or COUNT(x) - 1), its square root for STDDEV; for an
    integer in Java's arithmetic of that width (wrapping, truncating), else in DOUBLE."""
    import math

    n = len(values)
    sample = function.endswith("SAMP")
    if n < (2 if sample else 1):
        return None
    if not bits:
        s1, s2 = sum(values), sum(v * v for v in values)
        variance = (s2 - s1 * s1 / n) / (n - 1 if sample else n)
        return math.sqrt(variance) if function.startswith("STDDEV") else variance

    def wrap(v, width=bits):
        half = 1 << (width - 1)
        return (v + half) % (1 << width) - half

    def java_div(a, b):
        q = abs(a) // abs(b)
        return -q if (a < 0) != (b < 0) else q

    s1, s2 = wrap(sum(values)), wrap(sum(v * v for v in values))
    variance = java_div(wrap(s2 - java_div(wrap(s1 * s1), n), 64), n - 1 if sample else n)
    if function.startswith("VAR"):
        return wrap(variance)
    return wrap(int(math.sqrt(variance)) if variance >= 0 else 0)


def _spread_reference(rows, unit, preceding):
    out = []
    for row in rows:
        frame = _frame(rows, row, unit, preceding)
        results = [_flinks_spread([r[column] for r in frame if r[column] is not None], function, bits)
                   for function, column, bits in SPREAD_CALLS]
        out.append((row["k"], row["x"], row["ms"], *results))
    return sorted(out, key=repr)


def test_flinks_spread_reference_is_what_flink_printed():
    """Values Flink 2.3 printed for VAR_SAMP/VAR_POP/STDDEV_SAMP OVER an INT (1, 4, 6 running):
    5, 2, 2 at the second row and 6, 4, 2 at the third; VAR_SAMP of 1 and 2 is 1."""
    assert [_flinks_spread([1, 4], f, 32) for f in ("VAR_SAMP", "VAR_POP", "STDDEV_SAMP")] == [5, 2, 2]
    assert [_flinks_spread([1, 4, 6], f, 32) for f in ("VAR_SAMP", "VAR_POP", "STDDEV_SAMP")] == [6, 4, 2]
    assert _flinks_spread([1, 2], "VAR_SAMP", 32) == 1 and _flinks_spread([1], "VAR_SAMP", 32) is None
    # an INT's square wrapping: 46341 ** 2 > 2 ** 31 (Flink: 9266, 4633, 96, 68; then 25251, 18938, 158, 137)
    calls = ("VAR_SAMP", "VAR_POP", "STDDEV_SAMP", "STDDEV_POP")
    assert [_flinks_spread([46341, -46341], f, 32) for f in calls] == [9266, 4633, 96, 68]
    assert [_flinks_spread([46341, -46341, 7, 300], f, 32) for f in calls] == [25251, 18938, 158, 137]
    assert _flinks_spread([(v + 128) % 256 - 128 for v in (46341, -46341, 7, 300)], "VAR_SAMP", 8) == -7  # TINYINT


@pytest.mark.parametrize("unit, preceding", [("ROWS", 2), ("ROWS", None), ("RANGE", 3000), ("RANGE", None)])
@pytest.mark.parametrize("seed", depth.seeds(1, 3, first=1))
@pytest.mark.parametrize("offset", [0, 10**9])
def test_stddev_and_variance_over_frames_are_flinks_expansion(unit, preceding, seed, offset):
    """Integers near 10**9 overflow an INT's square and a BIGINT's sum of squares: Flink's
    sums wrap, and so do these (the unbounded frames carry them from batch to batch)."""
    rng = random.Random(seed)
    batches = _random_batches(rng, 6, 12, 4, (-6, 4), ["a", "b", None],
                              lambda: rng.choice([None, rng.uniform(-20, 20)]))
    batches = [[(k, None if x is None else x + offset, f, ts) for k, x, f, ts in batch] for batch in batches]
    delay = 2000
    expected = _spread_reference(_accepted(batches, delay), unit, preceding)
    got, _ = _run(_spread_plan(unit, preceding), batches, delay)
    assert len(got) == len(expected) > 0
    for g, e in zip(got, expected):
        assert g[:7] == e[:7], (g, e)  # the integer results, exactly
        for a, b in zip(g[7:], e[7:]):
            # a bounded frame's sums are differences (Flink's add and retract): rounding
            # noise, which a square root makes about 1e-7
            tolerance = 1e-9 if preceding is None else 1e-6
            assert (a is None and b is None) or a == pytest.approx(b, rel=1e-9, abs=tolerance), (g, e)


def test_stddev_and_variance_of_a_decimal_over_frames_keep_every_digit():
    """A DECIMAL's sums are exact (Flink's DECIMAL arithmetic): values far from zero lose
    nothing to cancellation, and the result rounds half up to DECIMAL(38, 6)."""
    from decimal import Decimal

    plan = dict(_plan("ROWS", None), aggs=[{"function": "VAR_POP", "column": "x", "kind": "object",
                                            "out_kind": "object", "out_bits": 0, "out_scale": 6, "name": "w0"}],
                kinds={"k": "object", "x": "object", "f": "float"})
    base = pd.Timestamp("2026-01-01")
    values = ["12345678.01", "12345678.02", "12345678.03"]
    outputs, pending, history, seq = [], None, None, 0
    for i, value in enumerate(values):  # one row a micro-batch: the summary carries the sums
        frame = pd.DataFrame([("a", Decimal(value), 0.0, base + pd.Timedelta(seconds=i))], columns=["k", "x", "f", "ts"])
        pending, seq = over_frames.accept(plan, pending, frame, -1, seq)
        pending, history, out = over_frames.fire(plan, pending, history, np.iinfo("int64").max)
        outputs += list(out["w0"])
    assert outputs == [Decimal("0.000000"), Decimal("0.000025"), Decimal("0.000067")]


def test_java_long_division_truncates_toward_zero():
    from streamsql.spark.stateful import spreads

    low = np.iinfo("int64").min
    got = spreads._java_div(np.array([low, -7, 7, -6], dtype="int64"), np.array([2, 2, 2, 3], dtype="int64"))
    assert got.tolist() == [low // 2, -3, 3, -2]
