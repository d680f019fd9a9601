"""ChangelogNormalize's pandas core (spark.stateful.normalize), without Spark: random upserts
and tombstones in micro-batches; after every batch the emitted changelog applied so far must
be the topic's final table (each key's latest value, tombstoned keys gone), every -U/-D must
take back a row that is there, and a record equal to the key's row emits nothing."""

from __future__ import annotations

import random
from collections import Counter

import pandas as pd
import pytest

from streamsql.spark.stateful.normalize import normalize
from tests import depth

PLAN = {"columns": ["id", "v"]}


def _batch(records, offset: int) -> pd.DataFrame:
    return pd.DataFrame({"__ukey": [str(k) for k, _ in records], "__tomb": [v is None for _, v in records],
                         "__off": range(offset, offset + len(records)),
                         "id": [None if v is None else str(k) for k, v in records], "v": list(v for _, v in records)})


@pytest.mark.parametrize("seed", depth.seeds(2, 5))
def test_the_changelog_applied_is_the_final_table_after_every_batch(seed):
    rng = random.Random(seed)
    state, applied, final, offset = None, Counter(), {}, 0
    for _ in range(10):
        records = [(rng.randint(0, 5), rng.choice([None, "a", "b", "c"])) for _ in range(rng.randint(0, 8))]
        for key, value in records:
            if value is None:
                final.pop(key, None)
            else:
                final[key] = value
        state, out = normalize(PLAN, state, _batch(records, offset))
        offset += len(records)
        for kind, key, value in out.itertuples(index=False):
            row = (int(key), value)
            if kind in ("+I", "+U"):
                applied[row] += 1
            else:
                assert applied[row] > 0, f"{kind} {row} takes back a row that is not there"
                applied[row] -= 1
        applied = +applied
        assert applied == Counter((k, v) for k, v in final.items())


def test_an_unchanged_value_and_a_tombstone_of_nothing_emit_nothing():
    state, out = normalize(PLAN, None, _batch([(1, "a")], 0))
    assert out["__rowkind"].tolist() == ["+I"]
    state, out = normalize(PLAN, state, _batch([(1, "a"), (2, None)], 1))
    assert out.empty
    state, out = normalize(PLAN, state, _batch([(1, "b"), (1, None)], 3))  # every version, not only the last
    assert out.values.tolist() == [["-U", "1", "a"], ["+U", "1", "b"], ["-D", "1", "b"]] and state is None


@pytest.mark.parametrize("seed", depth.seeds(2, 5))
def test_each_record_is_compared_with_the_one_before_it_as_flink_does_one_by_one(seed):
    """Flink's ChangelogNormalize (no mini-batch) takes one record at a time: the batch's
    changelog must be what a record-by-record fold emits, in each key's offset order."""
    rng = random.Random(seed)
    state, rows, offset = None, {}, 0
    for _ in range(8):
        records = [(rng.randint(0, 4), rng.choice([None, "a", "b"])) for _ in range(rng.randint(0, 10))]
        expected = {}
        for key, value in records:  # one record at a time
            changes, old = expected.setdefault(key, []), rows.get(key)
            if value is None:
                changes += [("-D", key, old)] if old is not None else []
                rows.pop(key, None)
            elif old is None:
                changes.append(("+I", key, value))
                rows[key] = value
            elif old != value:
                changes += [("-U", key, old), ("+U", key, value)]
                rows[key] = value
        state, out = normalize(PLAN, state, _batch(records, offset))
        offset += len(records)
        got = {}
        for kind, key, value in out.itertuples(index=False):
            got.setdefault(int(key), []).append((kind, int(key), value))
        assert got == {k: v for k, v in expected.items() if v}


def test_a_bigint_past_2_53_keeps_every_digit():
    """An update compares with and retracts the row before it exactly: no float on the way
    (a shift or an unmatched merge would make an integer column float64)."""
    plan = {"columns": ["id", "v"]}
    big = 2**53 + 1

    def batch(records, offset):
        return pd.DataFrame({"__ukey": [str(k) for k, _ in records], "__tomb": [v is None for _, v in records],
                             "__off": range(offset, offset + len(records)),
                             "id": pd.Series([k for k, _ in records], dtype="int64"),
                             "v": pd.Series([0 if v is None else v for _, v in records], dtype="int64")})

    state, out = normalize(plan, None, batch([(7, big)], 0))
    state, out = normalize(plan, state, batch([(7, big + 2), (8, 1)], 1))
    assert [(kind, int(i), int(v)) for kind, i, v in out.itertuples(index=False)] == [
        ("-U", 7, big), ("+U", 7, big + 2), ("+I", 8, 1)]


def test_integer_columns_with_nulls_arrive_as_int64_and_compare_exactly():
    """Packed input (spark.stateful.transport) gives an integer column with a NULL as Int64:
    a NULL compares equal to a NULL, a BIGINT past 2^53 to itself, and nothing fails on NA."""
    big = 2 ** 60 + 1

    def batch(records, offset):
        return pd.DataFrame({"__ukey": [str(k) for k, _ in records], "__tomb": [v == "tomb" for _, v in records],
                             "__off": range(offset, offset + len(records)),
                             "id": [None if v == "tomb" else str(k) for k, v in records],
                             "v": pd.array([None if v == "tomb" else v for _, v in records], dtype="Int64")})

    state, out = normalize(PLAN, None, batch([(1, big), (1, "tomb"), (1, None), (2, None)], 0))
    assert out.astype(object).where(out.notna(), None).values.tolist() == [
        ["+I", "1", big], ["-D", "1", big], ["+I", "1", None], ["+I", "2", None]]
    state, out = normalize(PLAN, state, batch([(1, None), (2, big)], 4))  # 1 unchanged (NULL), 2 updated
    assert out.astype(object).where(out.notna(), None).values.tolist() == [["-U", "2", None], ["+U", "2", big]]
