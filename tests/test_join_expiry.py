"""A regular join's side whose rows no window still to come can match leaves state by the
watermark (spark.stateful.join_expiry): which conditions and inputs allow it, found without
a JVM; the operator's changes against a fold over the whole state that keeps every row; and
Nexmark q7's shape streamed for real against batch mode."""

from __future__ import annotations

import os
import random
import time
from collections import Counter

import pandas as pd
import pytest

from streamsql.spark.dialect import to_spark_sql
from streamsql.spark.stateful import generations, joining
from streamsql.spark.stateful.stages import JoinStage
from tests import depth
from tests.conftest import write
from tests.test_generations import Handle, _plain
from tests.operator_plans import stages
from tests.streamed import streamed_and_batch

WINDOW_MAX = ("SELECT MAX(price) AS maxprice, window_end AS wend FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), "
              "INTERVAL '10' SECOND)) GROUP BY window_start, window_end")


def _join(sql: str) -> JoinStage:
    stage = stages(sql)
    while not isinstance(stage, JoinStage):
        (_, stage), = stage.inputs
    return stage


@pytest.mark.parametrize("condition,side,offset", [
    ("B.ts BETWEEN W.wend - INTERVAL '10' SECOND AND W.wend", 0, 10000),  # Nexmark q7
    ("B.ts >= W.wend - INTERVAL '2' SECOND", 0, 2000),
    ("W.wend - INTERVAL '2' SECOND < B.ts", 0, 2000),
    ("W.wend <= B.ts + INTERVAL '1' MINUTE", 0, 60000),
    ("(W.wend) <= (B.ts)", 0, 0),
])
def test_a_side_bounded_below_a_window_aggregate_s_end_expires(condition, side, offset):
    stage = _join(f"SELECT B.auction, B.price FROM bid B JOIN ({WINDOW_MAX}) W ON B.price = W.maxprice "
                  f"WHERE {condition};")
    assert stage.expires == ("__lx", None)
    assert to_spark_sql(stage.left_query).endswith(f"UNIX_MILLIS(`B`.`ts`) + {offset} AS `__lx` FROM "
                                                   "(SELECT `auction`, `bidder`, `price`, `channel`, "
                                                   "TIMESTAMP_MICROS(UNIX_MICROS(`ts`)) AS `ts` FROM `bid`) AS `B`")
    # the window aggregate on the left: the right side expires
    flipped = _join(f"SELECT B.auction FROM ({WINDOW_MAX}) W JOIN bid B ON W.maxprice = B.price WHERE {condition};")
    assert flipped.expires == (None, "__rx")


def test_the_operator_plan_says_which_side_the_watermark_bounds():
    from streamsql.plan.join_operators import Join
    from streamsql.plan.operator_explain import explain_operators
    from tests.operator_plans import below, build

    q7 = (f"SELECT B.auction FROM bid B JOIN ({WINDOW_MAX}) W ON B.price = W.maxprice"
          " WHERE B.ts BETWEEN W.wend - INTERVAL '10' SECOND AND W.wend")
    assert below(build(q7), Join).retired == (("B", "ts", 10000, "wend"), None)
    assert any("Join(" in line and "state=[left watermark, right unbounded]" in line
               for line in explain_operators(build(q7)))
    # a STATE_TTL hint on the other side stays beside it; an outer join keeps every row
    hinted = below(build(q7.replace("SELECT B.auction", "SELECT /*+ STATE_TTL('W' = '1 h') */ B.auction")), Join)
    assert hinted.state == "left watermark, right TTL 1 h"
    outer = q7.replace(" JOIN (", " LEFT JOIN (").replace(" WHERE ", " AND ")
    assert below(build(outer), Join).state == "unbounded"


@pytest.mark.parametrize("sql", [
    # an upper bound only: a bid matches every later window
    f"SELECT B.auction FROM bid B JOIN ({WINDOW_MAX}) W ON B.price = W.maxprice WHERE B.ts <= W.wend;",
    # window_start is no bound on the windows still to come here
    "SELECT B.auction FROM bid B JOIN (SELECT MAX(price) AS maxprice, window_start AS ws FROM TABLE(TUMBLE(TABLE bid,"
    " DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) W ON B.price = W.maxprice"
    " WHERE B.ts >= W.ws;",
    # the other side no window aggregate: a GROUP BY's rows come at any time
    "SELECT B.auction FROM bid B JOIN (SELECT MAX(ts) AS latest, auction FROM bid GROUP BY auction) M"
    " ON B.auction = M.auction WHERE B.ts >= M.latest;",
    # an outer join keeps its rows' partner counts
    f"SELECT B.auction FROM bid B LEFT JOIN ({WINDOW_MAX}) W ON B.price = W.maxprice"
    " AND B.ts >= W.wend - INTERVAL '10' SECOND;",
    # the side with the bound a changelog: its rows may be taken back
    f"SELECT M.auction FROM (SELECT auction, MAX(ts) AS ts FROM bid GROUP BY auction) M JOIN ({WINDOW_MAX}) W"
    " ON M.auction = W.maxprice WHERE M.ts >= W.wend - INTERVAL '10' SECOND;",
])
def test_rows_stay_where_no_bound_holds(sql):
    assert _join(sql).expires == (None, None)


# -- the operator, no JVM ------------------------------------------------------------------------

KINDS = {"__k0": "int", "__l0": "int", "__lx": "int", "__r0": "int"}


def _plan(expires: bool) -> dict:
    """The stored join's plan (hashed, ``expires``), or, without, the whole-state fold's."""
    return {"keys": ["__k0", generations.HASH] if expires else ["__k0"], "left": ["__l0", "__lx"], "right": ["__r0"],
            "kinds": {**KINDS, generations.HASH: "int"} if expires else dict(KINDS),
            "join_type": "InnerJoin", "residual": None, "retracts": [False, True], "ttl_ms": None, "buckets": 1,
            "output": ["__l0", "__lx", "__r0"], "expires": ["__lx" if expires else None, None]}


def _batch(rows) -> pd.DataFrame:
    """(side, key, value): a left row's value is its time (ms), a right row's its window end."""
    frame = pd.DataFrame([{"__side": side, "__rowkind": "+I", "__k0": key,
                           "__l0": value if side == 0 else None, "__lx": value + 100 if side == 0 else None,
                           "__r0": value if side == 1 else None} for side, key, value in rows])
    frame = frame.astype({"__k0": "Int64", "__l0": "Int64", "__lx": "Int64", "__r0": "Int64"})
    return frame.assign(**{generations.HASH: frame["__k0"].astype("int64") * 2654435761})


def _matches(out: pd.DataFrame) -> Counter:
    """The joined rows the query's condition keeps: window end <= time + 100 (and >= time)."""
    kept = out[(out["__r0"] <= out["__lx"]) & (out["__r0"] >= out["__l0"])]
    return Counter(tuple(_plain(v) for v in row) for row in kept[["__rowkind", "__l0", "__r0"]].astype(object)
                   .itertuples(index=False, name=None))


def test_rows_the_watermark_passed_go_and_the_matches_stay_the_same(monkeypatch):
    """Rows in time order with some late ones, windows fired as the watermark passes their
    ends: the pairs the condition keeps equal those of a join that keeps every row, while
    the left side's generations behind the watermark are dropped unread."""
    from streamsql.spark.stateful.join import fold_stored, side_stores

    monkeypatch.setattr(generations, "APPEND_ROWS", 12)
    rng = random.Random(7)
    plan = _plan(True)
    handle = Handle()
    stores = side_stores(handle, plan)
    left = right = None
    total = 0
    watermark = 0
    for step in range(depth.pick(25, 60)):
        fired_from, watermark = watermark, watermark + rng.choice((0, 50, 100))
        rows = [(0, rng.randint(0, 3), watermark + rng.randint(-80, 150)) for _ in range(rng.randint(5, 25))]
        rows += [(1, rng.randint(0, 3), end) for end in range(fired_from + 10, watermark + 1, 10)]  # fired windows
        total += sum(1 for side, _, _ in rows if side == 0)
        batch = _batch(rows)
        got = fold_stored(plan, stores, batch, 0, watermark)
        left, right, want = joining.fold(_plan(False), left, right, batch.drop(columns=[generations.HASH]), 0)
        assert _matches(got) == _matches(want), step
        kept = sum(n for n, _ in stores[0].info.rows.values())
        assert not stores[0].info.below(watermark)
    assert kept < total / 4, (kept, total)
    # what is left lies at most a generation or two behind the watermark
    assert min(stores[0].info.bounds.values()) >= watermark - 400


def test_a_row_without_a_bound_keeps_its_generation():
    """A row with a NULL time (no bound) is never dropped, nor are the rows beside it."""
    from streamsql.spark.stateful.join import fold_stored, side_stores

    plan = _plan(True)
    stores = side_stores(Handle(), plan)
    batch = _batch([(0, 1, 10), (0, 2, 20)])
    batch.loc[1, "__lx"] = None
    fold_stored(plan, stores, batch, 0, 0)
    fold_stored(plan, stores, _batch([(1, 1, 1000)]), 0, 10_000)
    assert sum(n for n, _ in stores[0].info.rows.values()) == 2
    assert stores[0].info.bounds == {1: generations.NEVER}


# -- streamed for real ---------------------------------------------------------------------------


@pytest.mark.spark
def test_each_row_joined_with_its_window_s_maximum_ends_with_the_batch_result(run, tmp_path):
    """Nexmark q7's shape over six part files (a micro-batch each): rows on window boundaries,
    rows behind the watermark whose window is still open, values repeated across windows;
    the rows the watermark retires match no window still to come, so the streamed result is
    batch mode's."""
    rng = random.Random(5)
    folder = tmp_path / "parts"
    for part in range(6):
        base = part * 20_000
        # first rows behind the watermark (the last file's time less 1 s) in a window not yet
        # fired, then rows in time order (the watermark follows each row in batch mode)
        times = sorted(base - rng.randint(1_500, 9_000) for _ in range(5 if part else 0))
        times += sorted([base + rng.randint(0, 19_999) for _ in range(30)] + [base, base + 10_000])
        rows = "".join(f"k{rng.randint(0, 3)},{rng.randint(0, 12)},1970-01-01 00:{ms // 60_000:02d}:"
                       f"{ms % 60_000 / 1000:06.3f}\n" for ms in times)
        os.utime(write(folder / f"part-{part}.csv", rows), (time.time() - 100 + part,) * 2)
    run.output(f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL"
               f" '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{folder}', 'format' = 'csv');")
    query = ("SELECT B.k, B.v, B.ts, W.wend FROM t B JOIN (SELECT MAX(v) AS top, window_end AS wend FROM TABLE("
             "TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end) W"
             " ON B.v = W.top WHERE B.ts BETWEEN W.wend - INTERVAL '10' SECOND AND W.wend")
    final, ops, expected = streamed_and_batch(run, query)
    assert final == expected and len(expected) > 10 and ops["-D"] + ops["-U"] == 0
