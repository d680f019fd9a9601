"""Window joins Spark cannot stream (LEFT, RIGHT and FULL, or with a condition beyond the
keys) on streamsql's window join operator (spark.stateful.window_join): the cut and the
pandas core without Spark, then bounded input streamed file by file against batch mode,
and a continuous job over watched directories that emits each window's join as the
watermark passes it, survives a kill -9 and drains."""

from __future__ import annotations

import os
import random
import time

import pandas as pd
import pytest

from streamsql.plan.logical import build_operator_plan
from streamsql.runtime.sources import is_bounded
from streamsql.spark.physical import runs_on_stateful_operators, stateful_operators
from streamsql.spark.stateful import window_join as wj
from streamsql.spark.stateful.chain import compile_query
from streamsql.spark.stateful.stages import CalcStage, JoinStage, inserts_only
from streamsql.spark.stateful.join_cut import residual_tree
from tests.conftest import write
from tests.operator_plans import steps
from tests.streamed import streamed_and_batch

DDL = """
CREATE TEMPORARY TABLE l (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE r (k STRING, w BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = 'auction', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE lp (k STRING, v BIGINT, p AS PROCTIME())
  WITH ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE rp (k STRING, w BIGINT, p AS PROCTIME())
  WITH ('connector' = 'filesystem', 'path' = 'auction', 'format' = 'csv', 'source.monitor-interval' = '1 s');
"""
TUMBLE = "TABLE(TUMBLE(TABLE {t}, DESCRIPTOR(ts), INTERVAL '10' SECOND))"
ON = "L.k = R.k AND L.window_start = R.window_start AND L.window_end = R.window_end"


def _join(kind: str, on: str = ON, window: str = TUMBLE, select: str = "L.k, L.v, R.w, L.window_start") -> str:
    return (f"SELECT {select} FROM (SELECT * FROM {window.format(t='l')}) L {kind} JOIN "
            f"(SELECT * FROM {window.format(t='r')}) R ON {on};")


def _plan(sql: str):
    return steps(sql, ddl=DDL)[-1].plan


# -- the cut, without Spark ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["LEFT", "RIGHT", "FULL"])
def test_an_outer_window_join_is_cut_for_the_window_join_operator(kind):
    plan = _plan(_join(kind, ON + " AND L.v < R.w"))
    root = build_operator_plan(plan, is_bounded)
    assert [n.kind for n in stateful_operators(root)] == ["WindowJoin"] and runs_on_stateful_operators(root)
    stage = compile_query(plan, is_bounded)
    assert isinstance(stage, CalcStage) and inserts_only(stage)  # a window join pads once, never retracts
    join = stage.inputs[0][1]
    assert isinstance(join, JoinStage) and join.window and not join.temporal and join.keys == 3
    assert join.join_type == f"{kind.title()}OuterJoin" if kind != "FULL" else join.join_type == "FullOuterJoin"
    left = join.left_query.sql()
    # the keys (k, the window's bounds), then the window's end in epoch ms, then the columns used
    assert left.startswith("SELECT L.k AS __lk0, L.window_start AS __lk1, L.window_end AS __lk2,"
                           " UNIX_MILLIS(L.window_end) AS __lt, ")
    assert join.residual == ("cmp", "<", ("col", "__l1"), ("col", "__r0"))


def test_an_inner_window_join_of_inserts_stays_spark_s():
    assert compile_query(_plan(_join("")), is_bounded) is None


AGGREGATED = ("(SELECT k, window_start, window_end, COUNT(*) AS n, MAX({c}) AS top FROM {window}"
              " GROUP BY k, window_start, window_end)")


def _aggregates_joined(kind: str, window: str = TUMBLE, right: str | None = None,
                       select: str = "L.k, R.k AS rk, L.window_start, L.n, R.top") -> str:
    right = right or AGGREGATED.format(c="w", window=window.format(t="r"))
    return (f"SELECT {select} FROM {AGGREGATED.format(c='v', window=window.format(t='l'))}"
            f" L {kind} JOIN {right} R ON {ON};")


@pytest.mark.parametrize("kind", ["", "FULL"])
def test_a_window_join_of_two_window_aggregates_joins_each_micro_batch_by_itself(kind):
    """Both aggregates emit a window in the micro-batch whose watermark passed its end: the
    join needs no state of its own."""
    stage = compile_query(_plan(_aggregates_joined(kind)), is_bounded)
    join = stage.inputs[0][1]
    assert isinstance(join, JoinStage) and join.window and join.per_batch and len(join.inputs) == 2


def test_a_window_aggregate_joined_with_a_tvf_s_rows_waits_for_the_window_s_timer():
    """The aggregate's rows arrive as their window fires, in the micro-batch whose watermark
    passed its end: that side is never late, and the TVF's rows wait for the same timer."""
    stage = compile_query(_plan(_aggregates_joined("LEFT", right=f"(SELECT * FROM {TUMBLE.format(t='r')})",
                                                   select="L.k, L.n, R.w")), is_bounded)
    join = stage.inputs[0][1]
    assert join.window and not join.per_batch and join.fired == (True, False) and inserts_only(stage)
    plan = dict(_core("LeftOuterJoin"), fired=[True, False])
    left, right = wj.accept(plan, None, None, _batch(plan, [(0, "a", 10, 1), (1, "a", 10, 10), (1, "a", 20, 11)]),
                            watermark=15)
    assert len(left) == 1 and len(right) == 1  # the TVF's row of window 10 is late, the aggregate's is not
    _, _, out = wj.fire(plan, left, right, watermark=15)
    assert _rows(out) == [(1, None)]


@pytest.mark.parametrize("sql", [
    # a window aggregate's rows joined with an OVER aggregate's
    _aggregates_joined("LEFT", right="(SELECT k, ts, window_start, window_end, COUNT(*) OVER (PARTITION BY k ORDER BY"
                                     " ts) AS c FROM " + TUMBLE.format(t="r") + ")", select="L.k, L.n, R.c"),
    # windows of processing time
    _join("LEFT", window="TABLE(TUMBLE(TABLE {t}p, DESCRIPTOR(p), INTERVAL '10' SECOND))"),
])
def test_window_join_shapes_not_cut(sql):
    assert compile_query(_plan(sql), is_bounded) is None


# -- the pandas core, without Spark ------------------------------------------------------------------


def _core(join_type: str, residual=None) -> dict:
    plan = {"keys": ["__k0", "__k1"], "left": ["__lt", "__l0"], "right": ["__rt", "__r0"], "join_type": join_type,
            "kinds": {"__k0": "object", "__k1": "int", "__lt": "int", "__l0": "int", "__rt": "int", "__r0": "int"},
            "left_time": "__lt", "right_time": "__rt", "residual": residual}
    plan["columns"] = ["__side", "__rowkind", *plan["keys"], *plan["left"], *plan["right"]]
    return plan


def _batch(plan: dict, rows: list[tuple]) -> pd.DataFrame:
    """Rows of (side, key, window end, value) as join.both_sides lays them out."""
    data = []
    for side, key, end, value in rows:
        own = [end, value]
        data.append([side, "+I", key, end, *(own if side == 0 else [None, None]), *(own if side == 1 else [None, None])])
    return pd.DataFrame(data, columns=plan["columns"])


def _rows(out: pd.DataFrame) -> list[tuple]:
    rows = [tuple(None if pd.isna(v) else int(v) for v in row) for row in out[["__l0", "__r0"]].itertuples(index=False)]
    return sorted(rows, key=lambda row: tuple((v is None, v or 0) for v in row))


@pytest.mark.parametrize("join_type, expected", [
    ("InnerJoin", [(1, 10), (1, 11)]),
    ("LeftOuterJoin", [(1, 10), (1, 11), (2, None), (3, None)]),
    ("RightOuterJoin", [(1, 10), (1, 11), (None, 12), (None, 13)]),
    ("FullOuterJoin", [(1, 10), (1, 11), (2, None), (3, None), (None, 12), (None, 13)]),
])
def test_an_ended_window_joins_once_padding_what_the_join_keeps(join_type, expected):
    plan = _core(join_type)
    batch = _batch(plan, [(0, "a", 10, 1), (0, "b", 10, 2), (0, None, 10, 3), (0, "a", 20, 4),
                          (1, "a", 10, 10), (1, "a", 10, 11), (1, "c", 10, 12), (1, None, 10, 13), (1, "a", 20, 14)])
    left, right = wj.accept(plan, None, None, batch, watermark=5)
    assert wj.next_end(plan, left, right) == 10
    left, right, out = wj.fire(plan, left, right, watermark=9)  # window [0, 10) still open
    assert out.empty and len(left) == 4 and len(right) == 5
    left, right, out = wj.fire(plan, left, right, watermark=10)
    assert _rows(out) == expected and set(out["__rowkind"]) == {"+I"}  # a NULL key never matches
    assert wj.next_end(plan, left, right) == 20 and len(left) == len(right) == 1  # [10, 20) waits
    left, right, out = wj.fire(plan, left, right, watermark=25)
    assert _rows(out) == [(4, 14)] and left is None and right is None


def test_the_residual_condition_decides_partners_and_late_rows_are_dropped():
    plan = _core("LeftOuterJoin", residual_tree_of("__l0 < __r0"))
    batch = _batch(plan, [(0, "a", 10, 1), (0, "a", 10, 50), (1, "a", 10, 20), (0, "a", 5, 7), (1, "a", 5, 8)])
    left, right = wj.accept(plan, None, None, batch, watermark=5)  # window end 5: fired already, late
    assert len(left) == 2 and len(right) == 1
    _, _, out = wj.fire(plan, left, right, watermark=10)
    assert _rows(out) == [(1, 20), (50, None)]  # 50 < 20 fails: the row is padded


def residual_tree_of(condition: str):
    from sqlglot import exp, parse_one

    tree = parse_one(condition)
    names = {(c.table, c.name): c.name for c in tree.find_all(exp.Column)}
    return residual_tree(tree, names)


# -- on Spark ----------------------------------------------------------------------------------------


def _sides(folder, rng, keys: int = 4):
    """Each side in four files, event times rising across files."""
    for i in range(4):
        for side in ("l", "r"):
            rows = [f"k{rng.randint(0, keys - 1)},{rng.randint(0, 9)},"
                    f"2026-01-01 00:00:{i * 12 + j + rng.randint(0, 1):02d}.{j}00" for j in range(8)]
            os.utime(write(folder / side / f"part-{i}.csv", "\n".join(rows) + "\n"), (time.time() - 100 + i,) * 2)


QUERIES = {
    "left": _join("LEFT"),
    "right_residual": _join("RIGHT", ON + " AND L.v <= R.w", select="R.k, L.v, R.w, R.window_end"),
    "full_hop": _join("FULL", ON, "TABLE(HOP(TABLE {t}, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))",
                      "COALESCE(L.window_start, R.window_start) AS ws, L.k, R.k AS rk, L.v, R.w"),
    "left_cumulate_filtered": _join("LEFT", ON + " AND R.w > 3", "TABLE(CUMULATE(TABLE {t}, DESCRIPTOR(ts),"
                                    " INTERVAL '4' SECOND, INTERVAL '12' SECOND))", "L.k, L.v, R.w, L.window_end"),
    "full_of_aggregates": _aggregates_joined("FULL"),
    "aggregate_left_tvf": _aggregates_joined("LEFT", right=f"(SELECT * FROM {TUMBLE.format(t='r')})",
                                             select="L.k, L.window_start, L.n, R.w"),
    "tvf_full_aggregate": f"SELECT L.k, R.k AS rk, L.v, R.top FROM (SELECT * FROM {TUMBLE.format(t='l')}) L FULL"
                          f" JOIN {AGGREGATED.format(c='w', window=TUMBLE.format(t='r'))} R ON {ON};",
    "inner_of_hop_aggregates": _aggregates_joined("", "TABLE(HOP(TABLE {t}, DESCRIPTOR(ts), INTERVAL '5' SECOND,"
                                                      " INTERVAL '10' SECOND))"),
}


def declare_sides(run, folder) -> None:
    """Tables l (k, v, ts) and r (k, w, ts) over ``_sides``' files, bounded."""
    for side, other in (("l", "v"), ("r", "w")):
        run.output(f"CREATE TEMPORARY TABLE {side} (k STRING, {other} BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS"
                   f" ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder / side}',"
                   f" 'format' = 'csv');")


@pytest.mark.spark
def test_streamed_window_joins_end_with_the_batch_result(run, tmp_path):
    _sides(tmp_path, random.Random(5))
    declare_sides(run, tmp_path)
    for name, query in QUERIES.items():
        final, ops, expected = streamed_and_batch(run, query.rstrip(";"))
        assert final == expected, name
        assert set(ops) == {"+I"}, f"{name}: a window join emits each window's rows once"
        assert name.startswith("inner") or any("" in row for row in expected), f"{name}: the data pads some rows"
        assert final, name


@pytest.mark.spark
def test_an_unbounded_left_window_join_emits_as_the_watermark_passes_survives_kill_9_and_drains(run, tmp_path):
    """A continuous INSERT over two watched directories: windows are joined while the job
    runs, a kill -9 and a restart resume from the checkpoint (a window's rows span the
    restart), and a drain joins the rest; together, the batch result, each row once."""
    from tests.jobs import killed_then_drained

    lefts, rights, sink = tmp_path / "l", tmp_path / "r", tmp_path / "out"

    def part(n: int) -> None:
        for folder, step in ((lefts, 1), (rights, 3)):
            rows = "".join(f"{'abcd'[i * 7 % 4]},{i},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                           for i in range(n * 40, n * 40 + 40, step))
            os.utime(write(folder / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = _watched_sides(lefts, rights, sink, "k STRING, v INT, w INT, ws TIMESTAMP(3)")
    query = "INSERT INTO out " + _join("LEFT", select="L.k, L.v, R.w, L.window_start").rstrip(";")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=40, resumed=45, more=80)
    assert len(streamed) == len(set(streamed)) == len(batch) and streamed == batch
    assert any(",," in line for line in streamed)  # left rows without a partner, padded


@pytest.mark.spark
def test_an_unbounded_window_aggregate_joined_with_a_tvf_s_rows_survives_kill_9_and_drains(run, tmp_path):
    """A window aggregate LEFT JOINed with the rows of another source's TVF, continuously:
    each window's counts arrive as the watermark fires them and join the rows that waited
    for the same timer; a kill -9, a restart and a drain give the batch result, each once."""
    from tests.jobs import killed_then_drained

    lefts, rights, sink = tmp_path / "l", tmp_path / "r", tmp_path / "out"

    def part(n: int) -> None:  # 3 windows of 10 s a part: 6 joined or padded rows a window
        for folder, step, keys in ((lefts, 1, lambda i: "abc"[i % 3]), (rights, 2, lambda i: "ab"[i // 2 % 2])):
            rows = "".join(f"{keys(i)},{i},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                           for i in range(n * 30, n * 30 + 30, step))
            os.utime(write(folder / f"part-{n}.csv", rows), (time.time() - 100 + n,) * 2)

    ddl = _watched_sides(lefts, rights, sink, "k STRING, ws TIMESTAMP(3), n BIGINT, w INT")
    query = "INSERT INTO out " + _aggregates_joined("LEFT", right=f"(SELECT * FROM {TUMBLE.format(t='r')})",
                                                    select="L.k, L.window_start, L.n, R.w").rstrip(";")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=18, resumed=24, more=42)
    assert len(streamed) == len(set(streamed)) == len(batch) == 54 and streamed == batch
    assert sum(line.endswith(",") for line in streamed) == 9  # 'c' has no partner in any window: padded


def _watched_sides(lefts, rights, sink, out_columns: str) -> str:
    """DDL of l (k, v, ts) and r (k, w, ts) over watched directories, and the sink ``out``."""
    return f"""
CREATE TABLE l (k STRING, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{lefts}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE r (k STRING, w INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{rights}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out ({out_columns})
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
