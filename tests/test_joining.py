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
from tests import depth

KINDS = {"__k0": "object", "__l0": "int", "__l1": "object", "__r0": "int"}


# Residual ON conditions beyond the key, as join_cut compiles them, and the same in Python
# (None where SQL's answer is UNKNOWN: only TRUE makes a pair).
RESIDUALS = {
    "none": (None, lambda l0, l1, r0: True),
    "l0 <= r0": (("cmp", "<=", ("col", "__l0"), ("col", "__r0")),
                 lambda l0, l1, r0: None if None in (l0, r0) else l0 <= r0),
    "l0 + 1 > r0 OR l1 IS NULL": (
        ("or", ("cmp", ">", ("arith", "+", ("col", "__l0"), ("lit", 1)), ("col", "__r0")),
         ("isnull", ("col", "__l1"))),
        lambda l0, l1, r0: True if l1 is None else (None if None in (l0, r0) else l0 + 1 > r0)),
    "NOT (r0 = 2) AND l1 <> 'y'": (
        ("and", ("not", ("cmp", "=", ("col", "__r0"), ("lit", 2))), ("cmp", "<>", ("col", "__l1"), ("lit", "y"))),
        lambda l0, l1, r0: False if (r0 == 2 or l1 == "y") else (None if None in (r0, l1) else True)),
    # functions of values from both sides
    "ABS(l0 - r0) <= 1": (("cmp", "<=", ("abs", ("arith", "-", ("col", "__l0"), ("col", "__r0"))), ("lit", 1)),
                          lambda l0, l1, r0: None if None in (l0, r0) else abs(l0 - r0) <= 1),
    "COALESCE(r0, l0) > CASE WHEN l1 = 'x' THEN 2 ELSE l0 - 1 END": (
        ("cmp", ">", ("coalesce", ("col", "__r0"), ("col", "__l0")),
         ("case", ((("cmp", "=", ("col", "__l1"), ("lit", "x")), ("lit", 2)),),
          ("arith", "-", ("col", "__l0"), ("lit", 1)))),
        lambda l0, l1, r0: (r0 if r0 is not None else l0) > (2 if l1 == "x" else l0 - 1)),
    "l1 LIKE CASE r0 WHEN 3 THEN 'x%' ELSE '_' END": (
        ("like", ("col", "__l1"), ("case", ((("cmp", "=", ("col", "__r0"), ("lit", 3)), ("lit", "x%")),), ("lit", "_"))),
        lambda l0, l1, r0: None if l1 is None else (l1.startswith("x") if r0 == 3 else len(l1) == 1)),
    # NULL-safe equality, CONCAT/UPPER and GREATEST of both sides (NULL when an argument is)
    "l0 IS NOT DISTINCT FROM r0 OR GREATEST(l0, r0) < 2": (
        ("or", ("same", ("col", "__l0"), ("col", "__r0")),
         ("cmp", "<", ("greatest", ("col", "__l0"), ("col", "__r0")), ("lit", 2))),
        lambda l0, l1, r0: True if l0 == r0 else (None if None in (l0, r0) else max(l0, r0) < 2)),
    "UPPER(l1 || r0) IN ('X1', 'Y2') AND LEAST(r0, l0, 3) >= 1": (
        ("and", ("or", ("cmp", "=", ("upper", ("concat", ("col", "__l1"), ("col", "__r0"))), ("lit", "X1")),
                 ("cmp", "=", ("upper", ("concat", ("col", "__l1"), ("col", "__r0"))), ("lit", "Y2"))),
         ("cmp", ">=", ("least", ("col", "__r0"), ("col", "__l0"), ("lit", 3)), ("lit", 1))),
        lambda l0, l1, r0: _and(None if None in (l1, r0) else f"{l1}{r0}".upper() in ("X1", "Y2"),
                                None if None in (l0, r0) else min(r0, l0, 3) >= 1)),
}


def _and(a, b):
    """SQL's AND of TRUE, FALSE and UNKNOWN (None)."""
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _plan(join_type, residual="none"):
    plan = {"keys": ["__k0"], "left": ["__l0", "__l1"], "right": ["__r0"], "kinds": KINDS, "join_type": join_type,
            "residual": RESIDUALS[residual][0]}
    if join_type in ("LeftSemiJoin", "LeftAntiJoin"):
        plan["output"] = ["__l0", "__l1"]
    return plan


def _reference(left: Counter, right: Counter, join_type: str, residual="none") -> Counter:
    holds = RESIDUALS[residual][1]
    out: Counter = Counter()
    matched_right = set()
    for (lk, l0, l1), ln in left.items():
        partners = [(rk, r0, rn) for (rk, r0), rn in right.items()
                    if lk is not None and rk == lk and holds(l0, l1, r0) is True]
        if join_type in ("LeftSemiJoin", "LeftAntiJoin"):
            if bool(partners) == (join_type == "LeftSemiJoin"):
                out[(l0, l1)] += ln
            continue
        for rk, r0, rn in partners:
            out[(l0, l1, r0)] += ln * rn
            matched_right.add((rk, r0))
        if not partners and join_type in ("LeftOuterJoin", "FullOuterJoin"):
            out[(l0, l1, None)] += ln
    if join_type in ("RightOuterJoin", "FullOuterJoin"):
        for (rk, r0), rn in right.items():
            if (rk, r0) not in matched_right:
                out[(None, None, r0)] += rn
    return +out


def _plain(value):
    return None if value is None or value is pd.NA or (isinstance(value, float) and value != value) else (
        value.item() if hasattr(value, "item") else value)


@pytest.mark.parametrize("residual", list(RESIDUALS))
@pytest.mark.parametrize("join_type", ["InnerJoin", "LeftOuterJoin", "RightOuterJoin", "FullOuterJoin",
                                       "LeftSemiJoin", "LeftAntiJoin"])
@pytest.mark.parametrize("seed", depth.seeds(1, 4))
def test_changelog_applied_equals_the_join_after_every_batch(join_type, seed, residual):
    rng = random.Random(seed)
    plan = _plan(join_type, residual)
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
                row = (key, rng.randint(0, 3), rng.choice(["x", "y", None])) if side == 0 else (key, rng.choice([0, 1, 2, 3, None]))
                kind = rng.choice(["+I", "+U"])
            (left if side == 0 else right)[row] += 1 if kind in ("+I", "+U") else -1
            if rng.random() < 0.1:  # a retraction of a row nobody holds changes nothing
                rows.append(_change(side, "-D", ("zz", 9, None)))
            rows.append(_change(side, kind, row))
        left, right = +left, +right
        left_state, right_state, out = joining.fold(plan, left_state, right_state, pd.DataFrame(rows, columns=COLUMNS))
        applied = _applied(out, applied)
        assert applied == _reference(left, right, join_type, residual)


COLUMNS = ["__side", "__rowkind", "__k0", "__l0", "__l1", "__r0"]


def _change(side: int, kind: str, row: tuple) -> dict:
    """A row of the join's input: a left row (key, l0, l1) or a right row (key, r0)."""
    return {"__side": side, "__rowkind": kind, "__k0": row[0], "__l0": row[1] if side == 0 else None,
            "__l1": row[2] if side == 0 else None, "__r0": row[1] if side == 1 else None}


def _applied(out: pd.DataFrame, applied: Counter) -> Counter:
    """The result so far with the join's output changes applied; a retraction must retract
    a row the result holds."""
    for kind, *row in out.itertuples(index=False):
        row = tuple(_plain(v) for v in row)
        if kind == "+I":
            applied[row] += 1
        else:
            assert applied[row] > 0, f"{kind} {row} retracts a row not in the result"
            applied[row] -= 1
    return +applied


def _not_in(left: Counter, right: Counter) -> Counter:
    """``l.k NOT IN (SELECT r.k ..)``, row by row: TRUE only if the subquery is empty, or
    ``l.k`` is not NULL and no ``r.k`` equals it or is NULL."""
    keys = [rk for (rk, _), n in right.items() for _ in range(n)]
    out: Counter = Counter()
    for (lk, l0, l1), n in left.items():
        if not keys or (lk is not None and None not in keys and lk not in keys):
            out[(l0, l1)] += n
    return +out


def _random_changes(rng, left: Counter, right: Counter, new_row) -> list[tuple[int, str, tuple]]:
    """A micro-batch of random (side, kind, row) changes, applied to ``left`` and ``right``:
    a live row deleted, or ``new_row(side)`` inserted."""
    changes = []
    for _ in range(rng.randint(0, 6)):
        side = rng.randint(0, 1)
        live = list((left if side == 0 else right).elements())
        if live and rng.random() < 0.4:
            row, kind = rng.choice(live), "-D"
        else:
            row, kind = new_row(side), "+I"
        (left if side == 0 else right)[row] += 1 if kind == "+I" else -1
        changes.append((side, kind, row))
    return changes


@pytest.mark.parametrize("seed", depth.seeds(2, 6))
def test_not_in_s_null_aware_anti_join_applied_equals_not_in_after_every_batch(seed):
    rng = random.Random(seed)
    plan = dict(_plan("LeftAntiJoin"), residual=joining.NULL_AWARE)
    left_state = right_state = None
    left, right, applied = Counter(), Counter(), Counter()

    def new_row(side):
        key = rng.choice(["a", "b", "c", None] if side == 0 else ["a", "b", "c", "c", "a", None])
        return (key, rng.randint(0, 3), rng.choice(["x", None])) if side == 0 else (key, rng.randint(0, 3))

    for _ in range(10):
        rows = [_change(side, kind, row) for side, kind, row in _random_changes(rng, left, right, new_row)]
        left, right = +left, +right
        left_state, right_state, out = joining.fold(plan, left_state, right_state, pd.DataFrame(rows, columns=COLUMNS))
        applied = _applied(out, applied)
        assert applied == _not_in(left, right)


@pytest.mark.parametrize("seed", depth.seeds(2, 6))
def test_a_correlated_not_in_is_null_aware_among_each_key_s_subquery_rows(seed):
    """``l.k NOT IN (SELECT r.k .. WHERE r.c = l.c)``: the second key ``c`` chooses the
    subquery rows a left row is compared with (none for a NULL ``c``); random changes to
    both sides, the applied changelog checked against NOT IN row by row after every batch."""
    rng = random.Random(seed)
    plan = {"keys": ["__k0", "__k1"], "left": ["__l0"], "right": ["__r0"], "output": ["__l0"],
            "kinds": {"__k0": "object", "__k1": "object", "__l0": "int", "__r0": "int"},
            "join_type": "LeftAntiJoin", "residual": joining.NULL_AWARE}
    columns = ["__side", "__rowkind", "__k0", "__k1", "__l0", "__r0"]
    left_state = right_state = None
    left, right, applied = Counter(), Counter(), Counter()
    for _ in range(12):
        changes = _random_changes(rng, left, right, lambda side: (
            rng.choice(["a", "b", None]), rng.choice(["x", "y", None]), rng.randint(0, 20)))
        rows = [{"__side": side, "__rowkind": kind, "__k0": row[0], "__k1": row[1],
                 "__l0": row[2] if side == 0 else None, "__r0": row[2] if side == 1 else None}
                for side, kind, row in changes]
        left, right = +left, +right
        left_state, right_state, out = joining.fold(plan, left_state, right_state, pd.DataFrame(rows, columns=columns))
        applied = _applied(out, applied)
        expected = Counter()
        for (k, c, v), n in left.items():
            values = [rk for (rk, rc, _), m in right.items() for _ in range(m) if c is not None and rc == c]
            if not values or (k is not None and None not in values and k not in values):
                expected[(v,)] += n
        assert applied == +expected


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
    from streamsql.spark.stateful import state_bytes

    plan = {"keys": ["__k0"], "left": ["__l0"], "right": ["__r0"], "join_type": "LeftOuterJoin",
            "kinds": {"__k0": "object", "__l0": "time", "__r0": "int"}}
    at = pd.Timestamp("2026-01-01 00:00:10")
    first = pd.DataFrame({"__side": [0, 0], "__rowkind": ["+I", "+I"], "__k0": ["a", "b"],
                          "__l0": pd.Series([at, None], dtype="datetime64[ns]"), "__r0": [None, None]})
    left, right, out = joining.fold(plan, None, None, first)
    left = state_bytes.from_bytes(state_bytes.to_bytes(left))
    second = pd.DataFrame({"__side": [0, 0, 1], "__rowkind": ["-D", "-D", "+I"], "__k0": ["a", "b", "a"],
                           "__l0": [at.to_pydatetime(), None, None], "__r0": [None, None, 7]})
    left, right, out = joining.fold(plan, left, right, second)
    assert list(out["__rowkind"]) == ["-D", "-D"] and out["__r0"].isna().all()  # both padded rows go
    assert left is None and len(right) == 1


def _rows(*rows):
    """Batch rows: (side, kind, key, value) with the value in __l0 (left) or __r0 (right)."""
    return pd.DataFrame([{"__side": side, "__rowkind": kind, "__k0": key, "__l0": value if side == 0 else None,
                          "__l1": None, "__r0": value if side == 1 else None} for side, kind, key, value in rows])


def _changes(out):
    return [(kind, _plain(l0), _plain(r0)) for kind, l0, _, r0 in out.itertuples(index=False)]


def test_expired_rows_go_without_output_and_padding_follows_what_was_emitted():
    """'table.exec.state.ttl' per side: a row expires that long after it was last written.
    The right row R expires; the left row it joined keeps its partner count (Flink's
    association count), so R's expiry retracts nothing and a new partner pads nothing
    back; a new left row finds no partner and is padded."""
    plan = {**_plan("LeftOuterJoin"), "ttl_ms": (1000, 100)}
    left, right, out = joining.fold(plan, None, None, _rows((1, "+I", "a", 7)), now_ms=0)
    assert out.empty
    left, right, out = joining.fold(plan, left, right, _rows((0, "+I", "a", 1)), now_ms=10)
    assert _changes(out) == [("+I", 1, 7)]
    left, right, out = joining.fold(plan, left, right, _rows((0, "+I", "a", 2)), now_ms=200)  # R is gone
    assert _changes(out) == [("+I", 2, None)] and right is None
    left, right, out = joining.fold(plan, left, right, _rows((1, "+I", "a", 8)), now_ms=210)
    assert Counter(_changes(out)) == Counter([("+I", 1, 8), ("+I", 2, 8), ("-D", 2, None)])
    # left rows live 1000 ms after their last write: at 1500 both have expired
    left, right, out = joining.fold(plan, left, right, _rows((1, "+I", "a", 9)), now_ms=1500)
    assert out.empty and left is None


def test_a_state_stored_without_partner_counts_gets_them():
    """Checkpoints written before outer sides kept their partner counts resume exactly."""
    plan = _plan("FullOuterJoin")
    first = _rows((0, "+I", "a", 1), (0, "+I", "b", 2), (1, "+I", "a", 5), (1, "+I", "c", 6))
    left, right, _ = joining.fold(plan, None, None, first)
    second = _rows((1, "-D", "a", 5), (0, "+I", "c", 3))
    _, _, expected = joining.fold(plan, left, right, second)
    _, _, out = joining.fold(plan, left.drop(columns=["__a"]), right.drop(columns=["__a"]), second)
    assert Counter(_changes(out)) == Counter(_changes(expected)) == Counter([
        ("+I", 1, None), ("+I", 3, 6), ("-D", 1, 5), ("-D", None, 6)])
