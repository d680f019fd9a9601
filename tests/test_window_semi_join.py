"""Window semi and anti joins (IN, EXISTS, NOT EXISTS and NOT IN subqueries that equate
their window's bounds with the outer row's, Flink's WindowJoin with LeftSemiJoin or
LeftAntiJoin) on streamsql's window join operator: the plan and the cut without Spark, the
pandas core against a row-by-row reference, then bounded input streamed file by file
against batch mode."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from streamsql.plan.logical import build_operator_plan
from streamsql.runtime.sources import is_bounded
from streamsql.spark.physical import stateful_operators
from streamsql.spark.stateful import window_join as wj
from streamsql.spark.stateful.chain import compile_query
from streamsql.spark.stateful.stages import JoinStage, inserts_only
from tests.streamed import streamed_and_batch
from tests.test_window_join_stream import _plan, _sides, declare_sides

TVF = "(SELECT * FROM TABLE({kind}(TABLE {t}, DESCRIPTOR(ts), {size})))"
TUMBLE = "TUMBLE", "INTERVAL '10' SECOND"
HOP = "HOP", "INTERVAL '5' SECOND, INTERVAL '10' SECOND"
CUMULATE = "CUMULATE", "INTERVAL '4' SECOND, INTERVAL '12' SECOND"
BOUNDS = "L.window_start = R.window_start AND L.window_end = R.window_end"


def _query(condition: str, window=TUMBLE, select: str = "L.k, L.v, L.window_start, L.window_end") -> str:
    """``condition`` reads the subquery ``{R}`` (R's window rows); L is the outer row."""
    left, right = (TVF.format(kind=window[0], t=t, size=window[1]) for t in ("l", "r"))
    return f"SELECT {select} FROM {left} L WHERE {condition.format(R=right)}"


SHAPES = {
    "in": ("LeftSemiJoin", False, _query(f"L.k IN (SELECT R.k FROM {{R}} R WHERE {BOUNDS})")),
    "exists": ("LeftSemiJoin", False, _query(f"EXISTS (SELECT * FROM {{R}} R WHERE L.k = R.k AND {BOUNDS})")),
    "not_exists": ("LeftAntiJoin", False, _query(f"NOT EXISTS (SELECT * FROM {{R}} R WHERE L.k = R.k AND {BOUNDS})")),
    "not_in": ("LeftAntiJoin", True, _query(f"L.k NOT IN (SELECT R.k FROM {{R}} R WHERE {BOUNDS})")),
}


# -- the plan and the cut, without Spark ---------------------------------------------------------


@pytest.mark.parametrize("name", SHAPES)
def test_a_subquery_on_the_same_window_is_a_window_semi_or_anti_join(name):
    join_type, null_aware, sql = SHAPES[name]
    plan = _plan(sql + ";")
    (node,) = stateful_operators(build_operator_plan(plan, is_bounded))
    assert (node.kind, node.join_type, node.mode.insert_only) == ("WindowJoin", join_type, True)
    assert "window=[TUMBLE(time_col=[ts], size=[10 s])]" in node.describe()
    stage = compile_query(plan, is_bounded)
    join = stage.inputs[0][1]
    assert isinstance(join, JoinStage) and join.window and join.join_type == join_type
    assert join.null_aware == null_aware and join.keys == 3 and inserts_only(stage)
    right = join.right_query.sql()
    assert "UNIX_MILLIS(" in right and "AS __rt" in right  # the window's end, for the timer


def test_a_subquery_on_another_window_or_without_the_bounds_stays_a_regular_join():
    hop = TVF.format(kind=HOP[0], t="r", size=HOP[1])
    for sql in (_query(f"L.k IN (SELECT R.k FROM {hop} R WHERE {BOUNDS})"),  # windows differ
                _query("L.k IN (SELECT R.k FROM {R} R WHERE L.window_start = R.window_start)")):
        (node,) = stateful_operators(build_operator_plan(_plan(sql + ";"), is_bounded))
        assert node.kind == "Join", sql


@pytest.mark.parametrize("condition", [
    # NOT IN also correlated by a condition that is not an equality: NULL-aware per row
    f"L.k NOT IN (SELECT R.k FROM {{R}} R WHERE {BOUNDS} AND R.w > L.v)",
    # an aggregate's window
    f"L.k IN (SELECT R.k FROM {{R}} R WHERE {BOUNDS} GROUP BY R.k)",
])
def test_window_subqueries_not_cut(condition):
    assert compile_query(_plan(_query(condition) + ";"), is_bounded) is None


# -- the pandas core, without Spark ------------------------------------------------------------------


def _core(join_type: str, null_aware: bool = False) -> dict:
    plan = {"keys": ["__k0", "__k1"], "left": ["__lt", "__l0"], "right": ["__rt"], "join_type": join_type,
            "output": ["__lt", "__l0"], "kinds": {"__k0": "object", "__k1": "int", "__lt": "int", "__l0": "int",
                                                  "__rt": "int"},
            "left_time": "__lt", "right_time": "__rt", "residual": None, "null_aware": null_aware}
    plan["columns"] = ["__side", "__rowkind", *plan["keys"], *plan["left"], *plan["right"]]
    return plan


def _reference(join_type: str, null_aware: bool, left: list, right: list) -> list:
    """The left rows (key, window end, id) a subquery keeps, row by row as SQL says."""
    kept = []
    for key, end, row in left:
        values = [k for k, e in right if e == end]
        if null_aware:  # key NOT IN (values): UNKNOWN (dropped) on any NULL unless values is empty
            keep = not values or (key is not None and None not in values and key not in values)
        else:
            found = key is not None and key in values
            keep = found if join_type == "LeftSemiJoin" else not found
        if keep:
            kept.append(row)
    return sorted(kept)


@pytest.mark.parametrize("join_type, null_aware", [("LeftSemiJoin", False), ("LeftAntiJoin", False),
                                                   ("LeftAntiJoin", True)])
@pytest.mark.parametrize("seed", range(4))
def test_each_ended_window_keeps_the_left_rows_its_subquery_says(join_type, null_aware, seed):
    rng = random.Random(seed)
    plan = _core(join_type, null_aware)
    left = [(rng.choice(["a", "b", "c", None]), rng.choice([10, 20, 30]), i) for i in range(rng.randint(5, 30))]
    right = [(rng.choice(["a", "b", "d"] + [None] * (seed % 2)), rng.choice([10, 20])) for _ in range(rng.randint(0, 12))]
    rows = [[0, "+I", k, e, e, i, None] for k, e, i in left] + [[1, "+I", k, e, None, None, e] for k, e in right]
    batch = pd.DataFrame(rows, columns=plan["columns"])
    left_state, right_state = wj.accept(plan, None, None, batch, watermark=5)
    out = []
    for watermark in (10, 20, 30):
        left_state, right_state, fired = wj.fire(plan, left_state, right_state, watermark)
        out += [int(v) for v in fired["__l0"]]
        assert list(fired.columns) == ["__rowkind", "__lt", "__l0"] and set(fired["__rowkind"]) <= {"+I"}
    assert sorted(out) == _reference(join_type, null_aware, left, right)
    assert left_state is None and right_state is None


def test_not_in_compares_a_row_only_with_its_own_window():
    """A NULL in one window's subquery rows empties only that window; a window without
    subquery rows keeps every row, a NULL value included."""
    plan = _core("LeftAntiJoin", null_aware=True)
    rows = [[0, "+I", "a", 10, 10, 1, None], [0, "+I", None, 10, 10, 2, None], [0, "+I", "a", 20, 20, 3, None],
            [0, "+I", "b", 20, 20, 4, None], [0, "+I", None, 30, 30, 5, None],
            [1, "+I", None, 10, None, None, 10], [1, "+I", "a", 20, None, None, 20]]
    left, right = wj.accept(plan, None, None, pd.DataFrame(rows, columns=plan["columns"]), watermark=5)
    _, _, out = wj.fire(plan, left, right, watermark=30)
    assert sorted(int(v) for v in out["__l0"]) == [4, 5]


# -- on Spark ----------------------------------------------------------------------------------------


NULLABLE = "CASE WHEN R.w = 0 THEN NULL ELSE R.k END"  # a NULL in some windows' subquery rows
STREAMED = {
    "in": SHAPES["in"][2],
    "exists_filtered": _query(f"EXISTS (SELECT * FROM {{R}} R WHERE L.k = R.k AND {BOUNDS} AND R.w > 3)"),
    "not_exists_hop": _query(f"NOT EXISTS (SELECT * FROM {{R}} R WHERE L.k = R.k AND {BOUNDS})", HOP),
    "not_in_nulls": _query(f"NULLIF(L.k, 'k4') NOT IN (SELECT {NULLABLE} FROM {{R}} R WHERE {BOUNDS})"),
    "in_cumulate": _query(f"L.k IN (SELECT R.k FROM {{R}} R WHERE {BOUNDS})", CUMULATE),
    "not_in_cumulate": _query(f"L.k NOT IN (SELECT R.k FROM {{R}} R WHERE {BOUNDS} AND R.w > 6)", CUMULATE),
}


@pytest.mark.spark
def test_streamed_window_semi_and_anti_joins_end_with_the_batch_result(run, tmp_path):
    _sides(tmp_path, random.Random(11), keys=5)
    declare_sides(run, tmp_path)
    sizes = {}
    for name, query in STREAMED.items():
        final, ops, expected = streamed_and_batch(run, query)
        assert final == expected, name
        assert set(ops) == {"+I"}, f"{name}: a window semi (anti) join emits each window's rows once"
        sizes[name] = len(expected)
    assert all(sizes.values()), sizes  # every shape keeps some rows and (below) drops some
    assert sizes["in"] < 32 and sizes["not_in_nulls"] < 32 - sizes["in"], sizes  # NULLs make rows UNKNOWN
