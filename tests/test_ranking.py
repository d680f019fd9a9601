"""The Rank / Deduplicate core (spark.stateful.ranking): pandas only, no JVM.

Hand-computed changes for small cases, and, over random batches, the changelog applied
against a plain Python Top-N of every row seen so far (sorted(), ties by arrival)."""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import pytest

from streamsql.spark.stateful import ranking
from tests import depth


def plan(limit=2, rank="rn", order=(("price", True),), partition=("auction",), rowkind=False, later_wins=False):
    return {"partition": list(partition), "order": [list(o) for o in order], "limit": limit, "rank": rank,
            "data": ["auction", "price", "name"], "rowkind": rowkind, "later_wins": later_wins}


def run(p, batches):
    state, seq, out = None, 0, []
    for rows in batches:
        columns = (["__rowkind"] if p["rowkind"] else []) + ["auction", "price", "name"]
        state, seq, changes = ranking.fold(p, state, seq, pd.DataFrame(rows, columns=columns))
        out.append([tuple(r) for r in changes.astype(object).itertuples(index=False, name=None)])
    return out, state


def test_top_2_with_rank_numbers_updates_positions():
    out, state = run(plan(), [[(1, 10, "a"), (1, 30, "b")], [(1, 20, "c")], [(2, 5, "d"), (1, 5, "e")]])
    assert out[0] == [("+I", 1, 30, "b", 1), ("+I", 1, 10, "a", 2)]
    # c (20) takes position 2 from a (10)
    assert out[1] == [("-U", 1, 10, "a", 2), ("+U", 1, 20, "c", 2)]
    # e (5) is below the top 2 of auction 1: nothing; d is auction 2's first row
    assert out[2] == [("+I", 2, 5, "d", 1)]
    assert sorted(state["name"]) == ["b", "c", "d"]  # insert-only input: only the top rows are kept


def test_top_2_without_rank_numbers_enters_and_leaves():
    out, _ = run(plan(rank=None), [[(1, 10, "a"), (1, 30, "b")], [(1, 40, "c")]])
    assert out[1] == [("-D", 1, 10, "a"), ("+I", 1, 40, "c")]


def test_ties_go_to_the_earlier_row_unless_later_wins():
    out, _ = run(plan(limit=1, rank=None), [[(1, 10, "a")], [(1, 10, "b")]])
    assert out[1] == []
    out, _ = run(plan(limit=1, rank=None, later_wins=True), [[(1, 10, "a")], [(1, 10, "b")]])
    assert out[1] == [("-U", 1, 10, "a"), ("+U", 1, 10, "b")]  # keep-last deduplication


def test_nulls_sort_first_ascending_and_last_descending():
    out, _ = run(plan(limit=1, rank=None, order=(("price", False),)), [[(1, 3, "a"), (1, None, "b")]])
    assert [r[3] for r in out[0]] == ["b"]
    out, _ = run(plan(limit=1, rank=None, order=(("price", True),)), [[(1, None, "b"), (1, 3, "a")]])
    assert [r[3] for r in out[0]] == ["a"]


def test_retracting_a_top_row_lifts_the_next_one():
    p = plan(limit=1, rank=None, rowkind=True)
    out, state = run(p, [[("+I", 1, 10, "a"), ("+I", 1, 30, "b")], [("-D", 1, 30, "b")], [("-U", 1, 10, "a"), ("+U", 1, 12, "a")]])
    assert out[0] == [("+I", 1, 30, "b")]
    assert out[1] == [("-U", 1, 30, "b"), ("+U", 1, 10, "a")]
    assert out[2] == [("-U", 1, 10, "a"), ("+U", 1, 12, "a")]
    assert len(state) == 1


def test_retracting_the_last_row_deletes():
    out, state = run(plan(limit=3, rank="rn", rowkind=True), [[("+I", 7, 1, "x")], [("-D", 7, 1, "x")]])
    assert out[1] == [("-D", 7, 1, "x", 1)]
    assert state is None


def test_global_top_n_without_partition():
    out, _ = run(plan(limit=2, rank="rn", partition=()), [[(1, 5, "a"), (2, 9, "b"), (3, 7, "c")]])
    assert out[0] == [("+I", 2, 9, "b", 1), ("+I", 3, 7, "c", 2)]


@pytest.mark.parametrize("rank", ["rn", None])
@pytest.mark.parametrize("limit", [1, 3])
@pytest.mark.parametrize("rowkind", [False, True])
def test_changelog_applied_equals_a_plain_top_n(rank, limit, rowkind):
    rng = random.Random(limit * 7 + (rank is None) + 10 * rowkind)
    p = plan(limit=limit, rank=rank, rowkind=rowkind)
    live: list[tuple] = []  # (arrival, auction, price, name): what the input holds
    table: Counter = Counter()
    state, seq, arrival = None, 0, 0
    for _ in range(depth.pick(12, 30)):
        rows = []
        for _ in range(rng.randint(1, 8)):
            if rowkind and live and rng.random() < 0.3:
                values = live[rng.randrange(len(live))][1:]
                latest = max(i for i, r in enumerate(live) if r[1:] == values)  # Flink retracts the latest equal row
                live.pop(latest)
                rows.append(("-D", *values))
            else:
                row = (rng.randint(1, 4), rng.choice([None, *range(10)]), f"n{rng.randint(0, 3)}")
                live.append((arrival, *row))
                arrival += 1
                rows.append(("+I", *row) if rowkind else row)
        columns = (["__rowkind"] if rowkind else []) + ["auction", "price", "name"]
        state, seq, changes = ranking.fold(p, state, seq, pd.DataFrame(rows, columns=columns))
        for change in changes.astype(object).itertuples(index=False, name=None):
            kind, row = change[0], tuple(None if pd.isna(v) else v for v in change[1:])
            if kind in ("+I", "+U"):
                table[row] += 1
            else:
                assert table[row] > 0, f"{kind} retracts {row}, not in the result"
                table[row] -= 1
        assert +table == Counter(_plain_top_n(live, limit, rank is not None))


def _plain_top_n(live, limit, with_rank):
    """Top-N per auction by price DESC (NULL last), ties by arrival."""
    result = []
    for auction in {r[1] for r in live}:
        rows = sorted((r for r in live if r[1] == auction),
                      key=lambda r: (r[2] is None, -(r[2] or 0), r[0]))
        for i, r in enumerate(rows[:limit], 1):
            result.append((r[1], r[2], r[3], i) if with_rank else (r[1], r[2], r[3]))
    return result


def test_state_ttl_forgets_a_partition_untouched_for_longer():
    """'table.exec.state.ttl': a partition's rows expire that long after it last changed
    (processing time), without output; a later row of it is ranked afresh."""
    p = {**plan(limit=1, rank=None), "ttl_ms": 1000}
    columns = ["auction", "price", "name"]
    state, seq, out = ranking.fold(p, None, 0, pd.DataFrame([(1, 50, "a"), (2, 10, "b")], columns=columns), now_ms=0)
    state, seq, out = ranking.fold(p, state, seq, pd.DataFrame([(2, 20, "c")], columns=columns), now_ms=900)
    assert [tuple(r) for r in out.itertuples(index=False)] == [("-U", 2, 10, "b"), ("+U", 2, 20, "c")]
    # at 1500 auction 1 (last changed at 0) has expired, auction 2 (at 900) has not
    state, seq, out = ranking.fold(p, state, seq, pd.DataFrame([(1, 5, "d"), (2, 15, "e")], columns=columns),
                                   now_ms=1500)
    assert [tuple(r) for r in out.itertuples(index=False)] == [("+I", 1, 5, "d")]
    assert sorted(state["name"]) == ["c", "d"]
