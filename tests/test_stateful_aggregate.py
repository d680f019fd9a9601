"""The stateful GroupAggregate (#10): a streaming GROUP BY emitted as Flink's changelog.

Pure-pandas tests of the fold first (no Spark), then real streaming queries: a directory
of CSV files read one file per micro-batch, the operator's changelog collected with
foreachBatch, applied, and compared with a batch GROUP BY over the same input.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import types as T

from streamsql.changelog import ROWKIND_COLUMN
from streamsql.spark.stateful import AggSpec
from streamsql.spark.stateful import accumulate
from streamsql.spark.stateful.group_aggregate import build_plan, group_aggregate
from tests import depth

# -- the fold, without Spark -----------------------------------------------------------------


def _fold_all(schema, keys, specs, batches):
    plan, _ = build_plan(schema, keys, specs)
    state, outs = None, []
    for rows in batches:
        frame = pd.DataFrame(rows, columns=[f.name for f in schema.fields])
        state, out = accumulate.fold(plan, state, frame)
        if state is not None:
            state = accumulate.decode(accumulate.encode(state))  # as it goes through the state store
        outs.append([tuple(_plain(x) for x in r) for r in out.itertuples(index=False)])
    return outs


def _plain(value):
    """A result as Python: None for NULL, numpy scalars unwrapped, arrays as lists."""
    if isinstance(value, list):
        return [_plain(x) for x in value]
    return None if pd.isna(value) else getattr(value, "item", lambda: value)()


def _fold_and_apply(plan, state, frame, table: dict):
    """Fold a micro-batch (its state through the blob and back, as the store keeps it) and apply
    its changelog to ``table`` (key -> values), each retraction checked; the new state."""
    state, out = accumulate.fold(plan, state, frame)
    for kind, key, *values in out.itertuples(index=False):
        if kind in ("+I", "+U"):
            table[key] = [_plain(x) for x in values]
        else:
            assert table.pop(key) == [_plain(x) for x in values], (kind, key)
    return accumulate.decode(accumulate.encode(state)) if state is not None else None


def test_int_results_keep_type_and_wrap_and_avg_truncates():
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.IntegerType())])
    specs = [AggSpec("SUM", "v", output_name="s"), AggSpec("AVG", "v", output_name="a")]
    big = 2**31 - 1
    outs = _fold_all(schema, ["k"], specs, [[("x", big), ("x", 1), ("y", -7), ("y", 0)]])
    assert sorted(outs[0]) == [("+I", "x", -(2**31), 2**30), ("+I", "y", -7, -3)]


def test_filter_and_null_keys():
    schema = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType()),
                           T.StructField("f", T.BooleanType())])
    specs = [AggSpec("COUNT", output_name="n"), AggSpec("COUNT", filter_column="f", output_name="nf"),
             AggSpec("MAX", "v", filter_column="f", output_name="mf")]
    outs = _fold_all(schema, ["k"], specs, [[(None, 1, True), (None, 5, False), (2, 3, None)],
                                            [(None, 7, None), (2, 4, True)]])
    assert sorted(outs[0], key=str) == sorted([("+I", None, 2, 1, 1), ("+I", 2, 1, 0, None)], key=str)
    # per key, -U right before its +U
    pairs = {outs[1][i][1]: (outs[1][i], outs[1][i + 1]) for i in (0, 2)}
    assert pairs == {None: (("-U", None, 2, 1, 1), ("+U", None, 3, 1, 1)),
                     2: (("-U", 2, 1, 0, None), ("+U", 2, 2, 1, 4))}


def test_min_max_of_strings_over_insert_only_input():
    schema = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("s", T.StringType())])
    specs = [AggSpec("MIN", "s", output_name="lo"), AggSpec("MAX", "s", output_name="hi")]
    outs = _fold_all(schema, ["k"], specs, [[(1, None), (2, "m")], [(1, "b"), (2, "a"), (2, "z")], [(1, "c"), (2, None)]])
    assert sorted(outs[0]) == [("+I", 1, None, None), ("+I", 2, "m", "m")]
    assert outs[1] == [("-U", 1, None, None), ("+U", 1, "b", "b"), ("-U", 2, "m", "m"), ("+U", 2, "a", "z")]
    assert outs[2] == [("-U", 1, "b", "b"), ("+U", 1, "b", "c")]


def test_first_and_last_value_skip_nulls_and_keep_arrival_order():
    """Flink's FIRST_VALUE / LAST_VALUE over insert-only input: the first (last) value that
    is not NULL, in the order rows come, within a micro-batch and across them."""
    schema = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("v", T.LongType()),
                           T.StructField("s", T.StringType())])
    specs = [AggSpec("FIRST_VALUE", "v", output_name="f"), AggSpec("LAST_VALUE", "v", output_name="l"),
             AggSpec("LAST_VALUE", "s", output_name="ls")]
    outs = _fold_all(schema, ["k"], specs, [[(1, None, None), (1, 5, "a"), (1, 3, None), (2, 9, "x")],
                                            [(1, None, "b"), (2, 8, None), (1, 4, None)], [(2, None, None)]])
    assert sorted(outs[0]) == [("+I", 1, 5, 3, "a"), ("+I", 2, 9, 9, "x")]
    assert outs[1] == [("-U", 1, 5, 3, "a"), ("+U", 1, 5, 4, "b"), ("-U", 2, 9, 9, "x"), ("+U", 2, 9, 8, "x")]
    assert outs[2] == []  # a NULL changes nothing


@pytest.mark.parametrize("seed", depth.seeds(2, 6))
def test_ordered_aggregates_over_retractions_are_flinks_lists(seed):
    """LISTAGG, ARRAY_AGG, FIRST_VALUE and LAST_VALUE over a changelog, as Flink's versions
    with retraction keep them: each call's own list of the values in arrival order, an
    addition appended, a retraction removing the earliest equal value (not necessarily the
    retracted row's own place). Checked after every micro-batch against those lists kept
    one row at a time."""
    rng = random.Random(seed)
    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("k", T.IntegerType()),
                           T.StructField("v", T.StringType()), T.StructField("n", T.LongType()),
                           T.StructField("ok", T.BooleanType())])
    specs = [AggSpec("LISTAGG", "v", output_name="l"), AggSpec("LISTAGG", "v", output_name="l2", separator=";"),
             AggSpec("ARRAY_AGG", "n", output_name="a"), AggSpec("ARRAY_AGG", "n", output_name="ai", ignore_nulls=True),
             AggSpec("FIRST_VALUE", "v", output_name="f"), AggSpec("LAST_VALUE", "n", output_name="ln"),
             AggSpec("LISTAGG", "v", output_name="lf", filter_column="ok")]
    plan, _ = build_plan(schema, ["k"], specs)
    state, table, live = None, {}, {}  # live: key -> rows in, in order
    lists: dict = {}  # key -> one list per call

    def take(key, row, add):
        v, n, ok = row
        own = lists.setdefault(key, [[] for _ in specs])
        for values, value in zip(own, (v, v, n, n, v, n, v if ok else None)):
            if value is None and values is not own[2]:
                continue  # (ARRAY_AGG without IGNORE NULLS keeps NULLs; the others skip them)
            if add:
                values.append(value)
            else:
                values.remove(value)

    for _ in range(12):
        rows = []
        for _ in range(rng.randint(0, 9)):
            key = rng.randint(0, 3)
            mine = live.setdefault(key, [])
            row = (rng.choice([None, "a", "b", "c"]), rng.choice([None, 1, 2]), rng.random() < 0.7)
            if mine and rng.random() < 0.45:
                old = mine.pop(rng.randrange(len(mine)))
                take(key, old, False)
                if rng.random() < 0.5:
                    rows.append(("-D", key, *old))
                else:
                    rows += [("-U", key, *old), ("+U", key, *row)]
                    mine.append(row)
                    take(key, row, True)
            else:
                rows.append(("+I", key, *row))
                mine.append(row)
                take(key, row, True)
        state = _fold_and_apply(plan, state, pd.DataFrame(rows, columns=[f.name for f in schema.fields]), table)
        expected = {}
        for key, own in lists.items():
            if live.get(key):
                l, l2, a, ai, f, ln, lf = own
                expected[key] = [",".join(l) or None, ";".join(l2) or None, a or None, ai or None,
                                 f[0] if f else None, ln[-1] if ln else None, ",".join(lf) or None]
        assert table == expected


@pytest.mark.parametrize("seed", depth.seeds(2, 6))
@pytest.mark.parametrize("retracting", [True, False])
def test_distinct_listagg_and_array_agg_are_flinks_lists(seed, retracting):
    """LISTAGG(DISTINCT) and ARRAY_AGG(DISTINCT) as Flink's DISTINCT feeds its list: a value
    is appended when its count rises from zero and removed when it falls to zero (ARRAY_AGG
    counts NULL as a value unless IGNORE NULLS). Checked after every micro-batch against
    those lists kept one row at a time, over a changelog and over inserts."""
    rng = random.Random(seed)
    fields = [T.StructField("k", T.IntegerType()), T.StructField("v", T.StringType()), T.StructField("n", T.LongType()),
              T.StructField("ok", T.BooleanType())]
    schema = T.StructType(([T.StructField(ROWKIND_COLUMN, T.StringType())] if retracting else []) + fields)
    specs = [AggSpec("LISTAGG", "v", distinct=True, output_name="l", separator="|"),
             AggSpec("ARRAY_AGG", "n", distinct=True, output_name="a"),
             AggSpec("ARRAY_AGG", "n", distinct=True, output_name="ai", ignore_nulls=True),
             AggSpec("LISTAGG", "v", distinct=True, output_name="lf", filter_column="ok"),
             AggSpec("LISTAGG", "v", output_name="all")]
    plan, _ = build_plan(schema, ["k"], specs)
    state, table, live = None, {}, {}
    counts: dict = {}  # (key, call) -> value -> rows holding it
    lists: dict = {}  # (key, call) -> the list Flink's DISTINCT fed

    def take(key, row, add):
        v, n, ok = row
        for call, value in enumerate((v, n, n, v if ok else None, v)):
            if value is None and call != 1:
                continue  # (only ARRAY_AGG without IGNORE NULLS counts NULL)
            held, values = counts.setdefault((key, call), Counter()), lists.setdefault((key, call), [])
            if call == 4:  # LISTAGG without DISTINCT: every value, the earliest equal one removed
                values.append(value) if add else values.remove(value)
                continue
            held[value] += 1 if add else -1
            if add and held[value] == 1:
                values.append(value)
            elif not add and held[value] == 0:
                values.remove(value)

    for _ in range(12):
        rows = []
        for _ in range(rng.randint(0, 12)):
            key = rng.randint(0, 2)
            mine = live.setdefault(key, [])
            row = (rng.choice([None, "a", "b", "c"]), rng.choice([None, 1, 2]), rng.random() < 0.7)
            if retracting and mine and rng.random() < 0.45:
                old = mine.pop(rng.randrange(len(mine)))
                take(key, old, False)
                rows.append((rng.choice(["-D", "-U"]), key, *old))
            else:
                rows.append(("+I", key, *row))
                mine.append(row)
                take(key, row, True)
        frame = pd.DataFrame([r if retracting else r[1:] for r in rows], columns=[f.name for f in schema.fields])
        state = _fold_and_apply(plan, state, frame, table)
        expected = {key: ["|".join(lists.get((key, 0), [])) or None, lists.get((key, 1)) or None,
                          lists.get((key, 2)) or None, ",".join(lists.get((key, 3), [])) or None,
                          ",".join(lists.get((key, 4), [])) or None]
                    for key in live if live[key]}
        assert table == expected
        # an ARRAY_AGG(DISTINCT) of integers holds integers, also beside a NULL
        assert all(type(x) is int for row in table.values() for array in row[1:3] for x in array or () if x is not None)


@pytest.mark.parametrize("seed", depth.seeds(2, 6))
def test_distinct_first_and_last_value_follow_flinks_distinct(seed):
    """FIRST_VALUE(DISTINCT v) / LAST_VALUE(DISTINCT v) over a changelog, as the planner folds
    them (``split._distinct_first_last``): a value joins the list when its count rises from
    zero and leaves it when it falls to zero; the first or the last of the list (NULLs never
    in it). Checked after every micro-batch against that list kept one row at a time."""
    from streamsql.spark.stateful.split import _distinct_first_last

    rng = random.Random(seed)
    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("k", T.IntegerType()),
                           T.StructField("v", T.StringType())])
    calls = [_distinct_first_last(name, None, None, None) for name in ("FIRST_VALUE", "LAST_VALUE")]
    specs = [AggSpec("PYTHON", None, output_name=name, output_type=T.StringType(), columns=("v",), distinct=True,
                     python=call.python) for name, call in zip(("f", "l"), calls)]
    plan, _ = build_plan(schema, ["k"], specs)
    state, table, live, counts, lists = None, {}, {}, {}, {}
    for _ in range(12):
        rows = []
        for _ in range(rng.randint(0, 12)):
            key = rng.randint(0, 2)
            mine, held, values = live.setdefault(key, []), counts.setdefault(key, Counter()), lists.setdefault(key, [])
            if mine and rng.random() < 0.45:
                value, kind, step = mine.pop(rng.randrange(len(mine))), rng.choice(["-D", "-U"]), -1
            else:
                value, kind, step = rng.choice([None, "a", "b", "c", "d"]), "+I", 1
                mine.append(value)
            rows.append((kind, key, value))
            if value is not None:
                held[value] += step
                if step == 1 and held[value] == 1:
                    values.append(value)
                elif step == -1 and held[value] == 0:
                    values.remove(value)
        state = _fold_and_apply(plan, state, pd.DataFrame(rows, columns=schema.names), table)
        expected = {key: [lists[key][0] if lists[key] else None, lists[key][-1] if lists[key] else None]
                    for key in live if live[key]}
        assert table == expected


def test_ordered_aggregates_over_retractions_keep_null_keys_and_exact_values():
    """A NULL group key (pandas hands an all-NULL key column back as float64), and a BIGINT
    past 2^53 beside a NULL through the state store (Arrow hands that column back as
    float64): kept exactly, and retracted by its own value."""
    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("k", T.StringType()),
                           T.StructField("s", T.StringType()), T.StructField("v", T.LongType())])
    specs = [AggSpec("LISTAGG", "s", output_name="l"), AggSpec("ARRAY_AGG", "v", output_name="a")]
    big = 2**53 + 1
    # (a batch's BIGINT column with a NULL comes from Spark as float64: the NULL comes alone)
    outs = _fold_all(schema, ["k"], specs, [[("+I", None, "x", big)], [("+I", None, "y", None)],
                                            [("+I", None, "z", 3)], [("-D", None, "x", big)]])
    assert outs[0] == [("+I", None, "x", [big])]
    assert outs[3] == [("-U", None, "x,y,z", [big, None, 3]), ("+U", None, "y,z", [None, 3])]


def test_a_float_result_compares_as_the_float_it_is_stored_as():
    """SUM/AVG of a FLOAT are FLOATs: rounded to one as they are emitted and kept, so a batch
    that changes nothing (a NULL) emits nothing, whichever state layout stored them."""
    schema = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("x", T.FloatType())])
    specs = [AggSpec("SUM", "x", output_name="s"), AggSpec("AVG", "x", output_name="a")]
    outs = _fold_all(schema, ["k"], specs, [[(1, 0.1), (1, 0.2)], [(1, None)]])
    assert outs[0] == [("+I", 1, float(np.float32(0.1 + 0.2)), float(np.float32(0.15)))] and outs[1] == []


def test_decimal_sum_and_avg():
    from decimal import Decimal

    schema = T.StructType([T.StructField("k", T.IntegerType()), T.StructField("p", T.DecimalType(10, 2))])
    specs = [AggSpec("SUM", "p", output_name="s"), AggSpec("AVG", "p", output_name="a")]
    outs = _fold_all(schema, ["k"], specs, [[(1, Decimal("1.00")), (1, Decimal("2.00")), (1, Decimal("2.00")), (1, None)]])
    assert outs[0] == [("+I", 1, Decimal("5.00"), Decimal("1.666667"))]
    plan, output = build_plan(schema, ["k"], specs)
    assert output["s"].dataType == T.DecimalType(38, 2) and output["a"].dataType == T.DecimalType(38, 6)


def _spread(values: list, function: str):
    """Flink's STDDEV/VAR of some values (NULLs skipped), in exact arithmetic then as a float."""
    from fractions import Fraction

    xs = [Fraction(x) for x in values if x is not None]
    sample = function.endswith("_SAMP")
    if len(xs) <= (1 if sample else 0):
        return None
    mean = sum(xs) / len(xs)
    variance = float(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1 if sample else len(xs)))
    return variance ** 0.5 if function.startswith("STDDEV") else variance


def test_listagg_joins_values_in_arrival_order_across_batches():
    """Flink's LISTAGG over insert-only input: the values not NULL, in the order rows come,
    joined by the separator (',' by default); NULL while a key has none."""
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("s", T.StringType())])
    specs = [AggSpec("LISTAGG", "s", output_name="l"), AggSpec("LISTAGG", "s", output_name="m", separator="; ")]
    outs = _fold_all(schema, ["k"], specs, [[("a", "x"), ("a", None), ("b", None), ("a", "y")],
                                            [("b", "z"), ("a", ""), ("c", None)], [("b", "q"), ("c", None)]])
    assert sorted(outs[0], key=str) == [("+I", "a", "x,y", "x; y"), ("+I", "b", None, None)]
    assert outs[1] == [("-U", "a", "x,y", "x; y"), ("+U", "a", "x,y,", "x; y; "), ("-U", "b", None, None),
                       ("+U", "b", "z", "z"), ("+I", "c", None, None)]
    assert outs[2] == [("-U", "b", "z", "z"), ("+U", "b", "z,q", "z; q")]
    _, output = build_plan(schema, ["k"], specs)
    assert output["l"].dataType == T.StringType()


def test_json_objectagg_keeps_live_members_ordered_by_key_and_fails_on_a_repeated_key():
    """JSON_OBJECTAGG's members (the split hands each row's key, NUL, ``"key":value``; an
    empty member is a NULL value under ABSENT ON NULL) over inserts and retractions: the live
    members ordered by key, as Flink 2.3 prints them, ``{}`` when all are absent; a key held
    twice at once fails the query in Flink's words, as Flink's fails on accumulating it."""
    from streamsql.spark.stateful.sequences import DUPLICATE_KEY

    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("g", T.IntegerType()),
                           T.StructField("m", T.StringType())])
    member = {key: f'{key}\0"{key}":{value}' for key, value in (("b", 2), ("a", "null"), ("B", 3), ("a b", 1))}
    member["z"] = "z\0"  # absent: a NULL value under ABSENT ON NULL
    member["x\0y"] = 'x\0y\0"x\\u0000y":5'  # a key holding a NUL itself: the member follows the last one
    outs = _fold_all(schema, ["g"], [AggSpec("JSON_OBJECTAGG", "m", output_name="o")], [
        [("+I", 1, member["b"]), ("+I", 1, member["a"]), ("+I", 2, member["z"]), ("+I", 1, None)],
        [("+I", 1, member["B"]), ("-D", 1, member["a"]), ("+I", 1, member["a b"]), ("+I", 1, member["x\0y"])],
        [("-U", 1, member["b"]), ("+U", 1, member["a"])]])
    assert sorted(outs[0]) == [("+I", 1, '{"a":null,"b":2}'), ("+I", 2, "{}")]
    assert outs[1] == [("-U", 1, '{"a":null,"b":2}'), ("+U", 1, '{"B":3,"a b":1,"b":2,"x\\u0000y":5}')]
    assert outs[2] == [("-U", 1, '{"B":3,"a b":1,"b":2,"x\\u0000y":5}'), ("+U", 1, '{"B":3,"a":null,"a b":1,"x\\u0000y":5}')]
    with pytest.raises(ValueError, match="^Key 'b'" + DUPLICATE_KEY.replace(".", r"\.") + "$"):
        _fold_all(schema, ["g"], [AggSpec("JSON_OBJECTAGG", "m", output_name="o")],
                  [[("+I", 1, member["b"])], [("+I", 1, 'b\0"b":7')]])


def test_array_agg_keeps_values_in_arrival_order_and_nulls_unless_ignored():
    """Flink's ARRAY_AGG over insert-only input: every value in the order rows come, NULLs
    too (RESPECT NULLS) or not (IGNORE NULLS); NULL while a key has no row it takes (FILTER)."""
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.IntegerType()),
                           T.StructField("f", T.BooleanType())])
    specs = [AggSpec("ARRAY_AGG", "v", output_name="a"), AggSpec("ARRAY_AGG", "v", output_name="b", ignore_nulls=True),
             AggSpec("ARRAY_AGG", "v", filter_column="f", output_name="c")]
    outs = _fold_all(schema, ["k"], specs, [[("a", 1, True), ("a", None, True), ("b", None, False), ("a", 3, False)],
                                            [("b", 2, True), ("a", 4, None), ("c", None, None)], [("b", 2, True)]])
    assert sorted(outs[0]) == [("+I", "a", [1, None, 3], [1, 3], [1, None]), ("+I", "b", [None], None, None)]
    assert outs[1] == [("-U", "a", [1, None, 3], [1, 3], [1, None]), ("+U", "a", [1, None, 3, 4], [1, 3, 4], [1, None]),
                       ("-U", "b", [None], None, None), ("+U", "b", [None, 2], [2], [2]), ("+I", "c", [None], None, None)]
    assert outs[2] == [("-U", "b", [None, 2], [2], [2]), ("+U", "b", [None, 2, 2], [2, 2], [2, 2])]
    _, output = build_plan(schema, ["k"], specs)
    assert output["a"].dataType == T.ArrayType(T.IntegerType(), True)


def test_stddev_and_variance_are_typed_as_flink_types_them():
    """An integer argument gives an integer (truncated), DECIMAL(p, s) DECIMAL(38, max(6, s))
    (rounded half up), from the DOUBLE computation; the sample forms of one value are NULL."""
    from decimal import Decimal

    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType()),
                           T.StructField("p", T.DecimalType(10, 2))])
    specs = [AggSpec("STDDEV_POP", "v", output_name="sp"), AggSpec("VAR_SAMP", "v", output_name="vs"),
             AggSpec("STDDEV_SAMP", "p", output_name="ssp"), AggSpec("VAR_POP", "p", output_name="vpp")]
    outs = _fold_all(schema, ["k"], specs, [[("a", 1, Decimal("1.50")), ("a", 2, Decimal("2.25")),
                                             ("a", 4, Decimal("3.00")), ("b", 9, Decimal("1.00"))]])
    assert sorted(outs[0]) == [("+I", "a", 1, 2, Decimal("0.750000"), Decimal("0.375000")),
                               ("+I", "b", 0, None, None, Decimal("0.000000"))]
    _, output = build_plan(schema, ["k"], specs)
    assert [f.dataType for f in output.fields[2:]] == [T.LongType(), T.LongType()] + [T.DecimalType(38, 6)] * 2
    with pytest.raises(ValueError, match="DISTINCT"):
        AggSpec("FIRST_VALUE", "v", distinct=True)
    # beyond the type, as Java converts a double: (long) saturates; (byte) keeps the low bits of (int)
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType()),
                           T.StructField("b", T.ByteType())])
    specs = [AggSpec("VAR_POP", "v", output_name="vp"), AggSpec("VAR_POP", "b", output_name="vb"),
             AggSpec("STDDEV_SAMP", "b", output_name="sb")]
    outs = _fold_all(schema, ["k"], specs, [[("a", 0, -128), ("a", 2 * 10**10, 127)]])
    # VAR_POP(b) = 16256.25 -> (int) 16256 -> (byte) -128; STDDEV_SAMP(b) = 180.31 -> (byte) -76
    assert outs[0] == [("+I", "a", 2**63 - 1, -128, -76)]


def _slack(rows: list, position: int, function: str) -> float:
    """How far a double's variance of a key may be off: the rounding of sums of squares of
    the widest spread its values ever had, retractions having cancelled the rest."""
    values = [float(r[position]) for r in rows if r[position] is not None]
    error = 1e-13 * len(values) * (max(values) - min(values)) ** 2 + 1e-9
    return error ** 0.5 if function.startswith("STDDEV") else error


def test_stddev_and_variance_under_random_retractions():
    """STDDEV_POP/SAMP and VAR_POP/SAMP over a changelog: after every micro-batch the
    changelog applied so far holds, per key, the statistics of the rows still there, typed as
    Flink types them (an integer truncates, DECIMAL(38, 6) rounds), NULLs and FILTERed rows
    skipped, one value giving NULL for the sample forms."""
    from decimal import Decimal

    rng = random.Random(11)
    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("k", T.StringType()),
                           T.StructField("i", T.IntegerType()), T.StructField("x", T.DoubleType()),
                           T.StructField("p", T.DecimalType(10, 2)), T.StructField("f", T.BooleanType())])
    functions = ["STDDEV_POP", "STDDEV_SAMP", "VAR_POP", "VAR_SAMP"]
    specs = [AggSpec(fn, column, output_name=f"{fn}_{column}") for fn in functions for column in "ixp"]
    specs.append(AggSpec("VAR_SAMP", "x", filter_column="f", output_name="filtered"))
    # DISTINCT: over the key's distinct values (Flink feeds each to the function once while
    # its count is above zero), kept in the multisets
    specs += [AggSpec(fn, column, distinct=True, output_name=f"distinct_{fn}_{column}") for fn in functions for column in "ix"]
    specs.append(AggSpec("STDDEV_SAMP", "i", distinct=True, filter_column="f", output_name="distinct_filtered"))
    plan, output = build_plan(schema, ["k"], specs)
    assert [output[s.name].dataType for s in specs[:3]] == [T.IntegerType(), T.DoubleType(), T.DecimalType(38, 6)]
    state, table, live, ever = None, {}, [], {}
    for _ in range(12):
        rows = []
        for _ in range(rng.randint(1, 25)):
            if live and rng.random() < 0.35:
                row = live.pop(rng.randrange(len(live)))
                rows.append((rng.choice(["-U", "-D"]), *row))
            else:
                i = rng.choice([None, rng.randint(-50, 50), rng.randint(10**6, 10**6 + 9)])
                row = (rng.choice("abcd"), i, None if i is None else i / 4 + 1e6, None if i is None else Decimal(i) / 100,
                       rng.choice([True, False, None]))
                live.append(row)
                ever.setdefault(row[0], []).append(row)
                rows.append((rng.choice(["+I", "+U"]), *row))
        state, out = accumulate.fold(plan, state, pd.DataFrame(rows, columns=schema.names))
        state = accumulate.decode(accumulate.encode(state)) if state is not None else None
        for kind, key, *values in out.itertuples(index=False):
            values = [None if pd.isna(x) else x for x in values]
            if kind in ("+I", "+U"):
                table[key] = values
            else:
                assert table.pop(key) == values
        for key in sorted({row[0] for row in live}):
            mine = [row for row in live if row[0] == key]
            got = dict(zip([s.name for s in specs], table[key]))
            for fn in functions:
                exact = _spread([r[1] for r in mine], fn)  # integers: exact, truncated, saturated
                assert got[f"{fn}_i"] == (None if exact is None else min(int(exact), 2**31 - 1))
                for column, position in (("x", 2), ("p", 3)):  # in DOUBLE: as near as a double gets
                    exact, value = _spread([r[position] for r in mine], fn), got[f"{fn}_{column}"]
                    assert (exact is None) == (value is None), (fn, column)
                    if exact is not None:
                        rounding = 5e-7 if column == "p" else 0  # (DECIMAL(38, 6))
                        assert float(value) == pytest.approx(exact, rel=1e-9, abs=_slack(ever[key], position, fn) + rounding)
            exact = _spread([r[2] for r in mine if r[4]], "VAR_SAMP")
            assert (exact is None) == (got["filtered"] is None)
            distinct = sorted({r[1] for r in mine if r[1] is not None})
            for fn in functions:
                exact = _spread(distinct, fn)
                assert got[f"distinct_{fn}_i"] == (None if exact is None else min(int(exact), 2**31 - 1)), fn
                value = got[f"distinct_{fn}_x"]
                exact = _spread([d / 4 + 1e6 for d in distinct], fn)
                assert (exact is None) == (value is None), fn
                if exact is not None:
                    assert value == pytest.approx(exact, rel=1e-9, abs=_slack(ever[key], 2, fn))
            exact = _spread(sorted({r[1] for r in mine if r[4] and r[1] is not None}), "STDDEV_SAMP")
            assert got["distinct_filtered"] == (None if exact is None else int(exact))
        assert set(table) == {row[0] for row in live}


def test_a_batch_whose_keys_are_all_null_meets_the_state():
    """Keys all NULL come from pandas as float64; they still merge with the state's keys and
    multisets (a DISTINCT call, MIN/MAX over a changelog)."""
    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("s", T.StringType()),
                           T.StructField("v", T.IntegerType())])
    specs = [AggSpec("COUNT", "v", distinct=True, output_name="d"), AggSpec("MAX", "v", output_name="m")]
    outs = _fold_all(schema, ["s"], specs, [[("+I", None, 1)], [("+I", "x", 2), ("+I", None, 3)], [("-D", None, 3)]])
    assert outs[0] == [("+I", None, 1, 1)] and outs[2] == [("-U", None, 2, 3), ("+U", None, 1, 1)]
    assert sorted(outs[1], key=lambda r: str(r[1])) == [("-U", None, 1, 1), ("+U", None, 2, 3), ("+I", "x", 1, 2)]


def test_a_null_decimal_key_is_a_key():
    from decimal import Decimal

    schema = T.StructType([T.StructField("k", T.DecimalType(10, 2)), T.StructField("v", T.IntegerType())])
    outs = _fold_all(schema, ["k"], [AggSpec("SUM", "v", output_name="s")],
                     [[(Decimal("1.00"), 1), (None, 2)], [(None, 5)]])
    assert sorted(outs[0], key=str) == [("+I", Decimal("1.00"), 1), ("+I", None, 2)]
    assert outs[1] == [("-U", None, 2), ("+U", None, 7)]


def test_state_ttl_forgets_keys_untouched_for_longer():
    """'table.exec.state.ttl': a key's accumulators expire that long after its last change
    (processing time), without output; its next row starts afresh with +I, as in Flink."""
    schema = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType())])
    plan, _ = build_plan(schema, ["k"], [AggSpec("SUM", "v", output_name="s"), AggSpec("MAX", "v", output_name="m")])
    plan["ttl_ms"] = 1000

    def fold(state, rows, now):
        state, out = accumulate.fold(plan, state, pd.DataFrame(rows, columns=["k", "v"]), now_ms=now)
        return state, sorted(tuple(getattr(x, "item", lambda: x)() for x in r) for r in out.itertuples(index=False))

    state, out = fold(None, [("a", 5), ("b", 1)], 0)
    state, out = fold(state, [("b", 2)], 900)
    assert out == [("+U", "b", 3, 2), ("-U", "b", 1, 1)]
    state, out = fold(state, [("a", 7), ("b", 4)], 1500)  # a (last changed at 0) expired; b (at 900) not
    assert out == [("+I", "a", 7, 7), ("+U", "b", 7, 4), ("-U", "b", 3, 2)]


def test_retracting_a_row_never_added_is_ignored():
    schema = T.StructType([T.StructField(ROWKIND_COLUMN, T.StringType()), T.StructField("k", T.StringType()),
                           T.StructField("v", T.IntegerType())])
    outs = _fold_all(schema, ["k"], [AggSpec("MIN", "v", output_name="m")], [[("-D", "a", 1)], [("+I", "a", 2)]])
    assert outs == [[], [("+I", "a", 2)]]


# -- streaming queries -----------------------------------------------------------------------

CSV_SCHEMA = "k STRING, g INT, v INT, d DOUBLE"


def _write_files(directory: Path, files: list[list[tuple]], start: int = 0) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(files, start):
        path = directory / f"part-{n:04d}.csv"
        path.write_text("".join(",".join("" if x is None else str(x) for x in row) + "\n" for row in rows))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # the source takes the oldest file first


def _run(spark, directory, schema, keys, specs, checkpoint, prepare=None, buckets=3, layout="generations"):
    frame = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).csv(str(directory))
    if prepare:
        frame = prepare(frame)
    out = group_aggregate(frame, keys, specs, buckets=buckets, layout=layout)
    batches = []
    query = (out.writeStream.foreachBatch(lambda df, i: batches.append([tuple(r) for r in df.collect()]))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return [b for b in batches if b]


def _apply(batches) -> Counter:
    table = Counter()
    for batch in batches:
        for kind, *row in batch:
            if kind in ("+I", "+U"):
                table[tuple(row)] += 1
            else:
                assert table[tuple(row)] > 0, f"{kind} of a row not in the table: {row}"
                table[tuple(row)] -= 1
    return +table


def _key_sequences(batches) -> dict:
    seqs: dict = {}
    for batch in batches:
        for kind, key, *values in batch:
            seqs.setdefault(key, []).append((kind, *values))
    return seqs


@pytest.mark.spark
def test_changelog_sequence(spark, tmp_path):
    files = [[("a", 1), ("a", 5), ("b", 2)],
             [("a", None), ("b", 3)],
             [("c", 7), ("a", 0)]]
    _write_files(tmp_path / "in", files)
    specs = [AggSpec("COUNT", "v", output_name="cv"), AggSpec("SUM", "v", output_name="s"),
             AggSpec("MAX", "v", output_name="mx")]
    batches = _run(spark, tmp_path / "in", "k STRING, v INT", ["k"], specs, tmp_path / "ck")
    assert _key_sequences(batches) == {
        "a": [("+I", 2, 6, 5), ("-U", 2, 6, 5), ("+U", 3, 6, 5)],  # a NULL changes nothing: no output
        "b": [("+I", 1, 2, 2), ("-U", 1, 2, 2), ("+U", 2, 5, 3)],
        "c": [("+I", 1, 7, 7)],
    }
    assert len(batches) == 3


ALL_SPECS = [
    AggSpec("COUNT", output_name="n"), AggSpec("COUNT", "v", output_name="nv"),
    AggSpec("SUM", "v", output_name="s"), AggSpec("MIN", "v", output_name="mn"),
    AggSpec("MAX", "v", output_name="mx"), AggSpec("AVG", "v", output_name="av"),
    AggSpec("COUNT", "v", distinct=True, output_name="nd"), AggSpec("SUM", "d", output_name="sd"),
    AggSpec("AVG", "d", output_name="ad"), AggSpec("MAX", "v", filter_column="big", output_name="mxbig"),
]
BATCH_SQL = """SELECT k, g, COUNT(*), COUNT(v), CAST(SUM(v) AS INT), MIN(v), MAX(v),
                      CAST(SUM(v) DIV COUNT(v) AS INT), COUNT(DISTINCT v), SUM(d), AVG(d),
                      MAX(v) FILTER (WHERE v > 50)
               FROM input GROUP BY k, g"""


def _with_big(frame):
    from pyspark.sql import functions as F

    return frame.withColumn("big", F.col("v") > 50)


def _random_files(seed: int, files: int, rows: int) -> list[list[tuple]]:
    rng = random.Random(seed)
    keys = ["p", "q", "r", "s", None]

    def row():
        v = None if rng.random() < 0.15 else rng.randint(-100, 100)
        d = None if rng.random() < 0.1 else rng.randint(-20, 20) / 2
        return (rng.choice(keys), rng.choice([1, 2, None]), v, d)

    return [[row() for _ in range(rows)] for _ in range(files)]


def _expected(spark, files) -> Counter:
    rows = [r for f in files for r in f]
    spark.createDataFrame(rows, CSV_SCHEMA).createOrReplaceTempView("input")
    return Counter(tuple(r) for r in spark.sql(BATCH_SQL).collect())


@pytest.mark.spark
def test_changelog_applies_to_batch_group_by(spark, tmp_path):
    files = _random_files(1, 3, 60)
    _write_files(tmp_path / "in", files)
    batches = _run(spark, tmp_path / "in", CSV_SCHEMA, ["k", "g"], ALL_SPECS, tmp_path / "ck", prepare=_with_big)
    assert _apply(batches) == _expected(spark, files)
    kinds = Counter(r[0] for b in batches for r in b)
    assert set(kinds) == {"+I", "-U", "+U"} and kinds["-U"] == kinds["+U"]


@pytest.mark.spark
@pytest.mark.parametrize("layout", ["generations", "rows"])
def test_retraction_input(spark, tmp_path, layout):
    schema = "__rowkind STRING, k STRING, v INT"
    files = [[("+I", "a", 3), ("+I", "a", 9), ("+I", "a", 5), ("+I", "b", 1)],
             [("-D", "a", 9), ("-U", "b", 1), ("+U", "b", 4)],
             [("-D", "a", 3), ("-D", "a", 5), ("+I", "b", None)]]
    _write_files(tmp_path / "in", files)
    specs = [AggSpec("COUNT", output_name="n"), AggSpec("MIN", "v", output_name="mn"),
             AggSpec("MAX", "v", output_name="mx"), AggSpec("VAR_POP", "v", output_name="vp")]
    batches = _run(spark, tmp_path / "in", schema, ["k"], specs, tmp_path / "ck", layout=layout)
    assert _key_sequences(batches) == {  # MAX moves to 5, then all gone; VAR_POP of 3, 9, 5 (56/9), then 3, 5
        "a": [("+I", 3, 3, 9, 6), ("-U", 3, 3, 9, 6), ("+U", 2, 3, 5, 1), ("-D", 2, 3, 5, 1)],
        "b": [("+I", 1, 1, 1, 0), ("-U", 1, 1, 1, 0), ("+U", 1, 4, 4, 0), ("-U", 1, 4, 4, 0), ("+U", 2, 4, 4, 0)],
    }
    assert _apply(batches) == Counter({("b", 2, 4, 4, 0): 1})


@pytest.mark.spark
@pytest.mark.parametrize("layout", ["generations", "rows"])
def test_bigints_past_2_53_beside_nulls_through_either_state_layout(spark, tmp_path, layout):
    """A BIGINT key and MIN/MAX values past 2^53 in columns with NULLs: the input, the state
    store (either layout) and a retraction of a stored value keep every digit."""
    big = 2 ** 60
    files = [[("+I", big + 1, big + 3), ("+I", None, big + 5), ("+I", big + 1, big + 7), ("+I", big + 1, None)],
             [("-D", big + 1, big + 7), ("-D", None, big + 5)]]
    _write_files(tmp_path / "in", files)
    specs = [AggSpec("MIN", "v", output_name="mn"), AggSpec("MAX", "v", output_name="mx")]
    batches = _run(spark, tmp_path / "in", "__rowkind STRING, k BIGINT, v BIGINT", ["k"], specs, tmp_path / "ck",
                   layout=layout, buckets=1)
    assert _key_sequences(batches)[big + 1][-2:] == [("-U", big + 3, big + 7), ("+U", big + 3, big + 3)]
    assert _apply(batches) == Counter({(big + 1, big + 3, big + 3): 1})


@pytest.mark.spark
@pytest.mark.parametrize("layout", ["generations", "rows"])
def test_arrays_and_lists_through_the_state_store(spark, tmp_path, layout):
    """ARRAY_AGG's arrays (NULL items too) and LISTAGG's strings survive either state layout."""
    _write_files(tmp_path / "in", [[("a", 3), ("a", None), ("b", 1)], [("a", 5), ("b", None)], [("b", 2)]])
    specs = [AggSpec("ARRAY_AGG", "v", output_name="arr"), AggSpec("LISTAGG", "s", output_name="l")]
    batches = _run(spark, tmp_path / "in", "k STRING, v INT", ["k"], specs, tmp_path / "ck", layout=layout,
                   prepare=lambda frame: frame.selectExpr("k", "v", "CAST(v AS STRING) AS s"))
    final = {row[0]: (tuple(row[1]), row[2]) for row in _apply([[(kind, k, tuple(a), l) for kind, k, a, l in batch]
                                                                  for batch in batches])}
    assert final == {"a": ((3, None, 5), "3,5"), "b": ((1, None, 2), "1,2")}


@pytest.mark.spark
@pytest.mark.parametrize("layout", ["generations", "rows"])
def test_ordered_aggregates_over_retractions_through_the_state_store(spark, tmp_path, layout):
    """LISTAGG, ARRAY_AGG, FIRST_VALUE and LAST_VALUE over a changelog, one file per micro-batch
    through either state layout, and again after a restart from the checkpoint."""
    files = [[("+I", "a", "x", 1), ("+I", "a", "y", None), ("+I", "a", "x", 3), ("+I", "b", "z", 4)],
             [("-U", "a", "x", 1), ("+U", "a", "w", 5), ("-D", "b", "z", 4)],
             [("-D", "a", "y", None), ("+I", "b", "v", 6)]]
    _write_files(tmp_path / "in", files[:2])
    specs = [AggSpec("LISTAGG", "s", output_name="l"), AggSpec("ARRAY_AGG", "v", output_name="arr"),
             AggSpec("FIRST_VALUE", "s", output_name="f"), AggSpec("LAST_VALUE", "v", output_name="lv"),
             AggSpec("LISTAGG", "s", distinct=True, output_name="ld"), AggSpec("ARRAY_AGG", "v", distinct=True,
                                                                                output_name="ad")]
    schema = "__rowkind STRING, k STRING, s STRING, v INT"
    batches = _run(spark, tmp_path / "in", schema, ["k"], specs, tmp_path / "ck", layout=layout)
    _write_files(tmp_path / "in", files[2:], start=2)
    batches += _run(spark, tmp_path / "in", schema, ["k"], specs, tmp_path / "ck", layout=layout)
    final = _apply([[(kind, k, l, tuple(a), f, lv, ld, tuple(ad)) for kind, k, l, a, f, lv, ld, ad in batch]
                    for batch in batches])
    # a: x, y, x, then the first x out and w in (x, y's NULL kept by ARRAY_AGG), then y out;
    # DISTINCT: x stays where it first came (one x is still in)
    assert final == Counter({("a", "x,w", (3, 5), "x", 5, "x,w", (3, 5)): 1, ("b", "v", (6,), "v", 6, "v", (6,)): 1})
    assert ("-D", "b", "z", (4,), "z", 4, "z", (4,)) in [
        (kind, k, l, tuple(a), f, lv, ld, tuple(ad)) for batch in batches for kind, k, l, a, f, lv, ld, ad in batch]


@pytest.mark.spark
def test_random_retractions_apply_to_group_by_of_what_remains(spark, tmp_path):
    rng = random.Random(7)
    live: list[tuple] = []
    files = []
    for _ in range(3):
        rows = []
        for _ in range(50):
            if live and rng.random() < 0.4:
                k, v = live.pop(rng.randrange(len(live)))
                rows.append((rng.choice(["-U", "-D"]), k, v))
            else:
                k, v = rng.choice("wxyz"), (None if rng.random() < 0.1 else rng.randint(0, 9))
                live.append((k, v))
                rows.append((rng.choice(["+I", "+U"]), k, v))
        files.append(rows)
    _write_files(tmp_path / "in", files)
    specs = [AggSpec("COUNT", output_name="n"), AggSpec("SUM", "v", output_name="s"),
             AggSpec("MIN", "v", output_name="mn"), AggSpec("MAX", "v", output_name="mx"),
             AggSpec("COUNT", "v", distinct=True, output_name="nd")]
    batches = _run(spark, tmp_path / "in", "__rowkind STRING, k STRING, v INT", ["k"], specs, tmp_path / "ck")
    spark.createDataFrame(live, "k STRING, v INT").createOrReplaceTempView("live")
    expected = spark.sql("SELECT k, COUNT(*), CAST(SUM(v) AS INT), MIN(v), MAX(v), COUNT(DISTINCT v) "
                         "FROM live GROUP BY k").collect()
    assert _apply(batches) == Counter(tuple(r) for r in expected)


@pytest.mark.spark
@pytest.mark.parametrize("layout", ["generations", "rows"])
def test_restart_from_checkpoint(spark, tmp_path, layout):
    files = _random_files(2, 4, 40)
    _write_files(tmp_path / "in", files[:2])
    first = _run(spark, tmp_path / "in", CSV_SCHEMA, ["k", "g"], ALL_SPECS, tmp_path / "ck", prepare=_with_big,
                 layout=layout)
    assert len(first) == 2
    _write_files(tmp_path / "in", files[2:], start=2)
    second = _run(spark, tmp_path / "in", CSV_SCHEMA, ["k", "g"], ALL_SPECS, tmp_path / "ck", prepare=_with_big,
                  layout=layout)
    assert len(second) == 2
    assert second[0][0][0] != "+I" or any(r[0] == "-U" for r in second[0])  # the state came back
    assert _apply(first + second) == _expected(spark, files)


@pytest.mark.spark
def test_restart_with_another_bucket_count_is_refused(spark, tmp_path):
    keys = [(k, 1) for k in "abcdefghij"]  # with 2 buckets some land in bucket 0, where the state is
    _write_files(tmp_path / "in", [keys])
    specs = [AggSpec("COUNT", output_name="n")]
    _run(spark, tmp_path / "in", "k STRING, v INT", ["k"], specs, tmp_path / "ck", buckets=1)
    _write_files(tmp_path / "in", [keys], start=1)
    with pytest.raises(Exception, match="restart with the same count"):
        _run(spark, tmp_path / "in", "k STRING, v INT", ["k"], specs, tmp_path / "ck", buckets=2)


@pytest.mark.spark
def test_global_aggregate_decimal_and_timestamp(spark, tmp_path):
    import datetime as dt
    from decimal import Decimal

    files = [[(Decimal("1.50"), "2024-01-02 10:00:00")], [(Decimal("2.25"), "2024-01-01 09:00:00")]]
    _write_files(tmp_path / "in", files)
    specs = [AggSpec("COUNT", output_name="n"), AggSpec("SUM", "p", output_name="s"),
             AggSpec("AVG", "p", output_name="a"), AggSpec("MIN", "ts", output_name="first")]
    batches = _run(spark, tmp_path / "in", "p DECIMAL(10, 2), ts TIMESTAMP", [], specs, tmp_path / "ck")
    assert batches == [
        [("+I", 1, Decimal("1.50"), Decimal("1.500000"), dt.datetime(2024, 1, 2, 10))],
        [("-U", 1, Decimal("1.50"), Decimal("1.500000"), dt.datetime(2024, 1, 2, 10)),
         ("+U", 2, Decimal("3.75"), Decimal("1.875000"), dt.datetime(2024, 1, 1, 9))],
    ]


def test_distinct_first_and_last_value_streamed(run, tmp_path):
    """FIRST_VALUE(DISTINCT) / LAST_VALUE(DISTINCT) over unbounded input (they were refused):
    the first value, and the last value that was new to its key, as Flink 2.3 streams them
    (LAST_VALUE(x) is the last row's value). Also under FILTER, beside a plain LAST_VALUE; over
    bounded input the same."""
    rng = random.Random(11)
    rows = [(i, rng.choice("abc"), rng.choice([None, "p", "q", "r", "s", "t"])) for i in range(200)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("".join(f"{i},{k},{'' if v is None else v}\n" for i, k, v in rows))
    ddl = (f"CREATE TEMPORARY TABLE f (id INT, k STRING, x STRING, ts AS TIMESTAMP '2026-01-01 00:00:00' + id *"
           f" INTERVAL '1' SECOND, WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' ="
           f" '{tmp_path / 'in'}', 'format' = 'csv');")
    query = ("SELECT k, FIRST_VALUE(DISTINCT x), LAST_VALUE(DISTINCT x), LAST_VALUE(x),"
             " LAST_VALUE(DISTINCT x) FILTER (WHERE MOD(id, 3) = 0) FROM f GROUP BY k;")
    got = run.rows("SET 'execution.bounded-input' = 'stream';" + ddl + query + "RESET 'execution.bounded-input';")
    bounded = run.rows(ddl + query)  # Spark's batch aggregate over the rows' read order
    expected = {}
    for key in "abc":
        values = [(i, v) for i, k, v in rows if k == key and v is not None]
        new = [v for n, (_, v) in enumerate(values) if v not in [w for _, w in values[:n]]]
        thirds = [v for i, v in values if i % 3 == 0]
        new_thirds = [v for n, v in enumerate(thirds) if v not in thirds[:n]]
        expected[key] = [new[0], new[-1], values[-1][1], new_thirds[-1]]
    final = {}
    for op, k, *rest in got:  # (the changelog: the last +I/+U of each key is its result)
        if op in ("+I", "+U"):
            final[k] = rest
        else:
            final.pop(k)
    assert final == expected
    assert {k: rest for k, *rest in bounded} == expected


def test_filter_on_aggregates_that_combine_several_spark_aggregates(run, tmp_path):
    """LISTAGG, ARRAY_AGG, JSON_ARRAYAGG and COLLECT translate to a count and a collect (or a
    collect taken apart): a FILTER goes on each of them (Spark refused it around the whole,
    ``The function `if` does not support FILTER CLAUSE``); bounded and streamed alike."""
    rng = random.Random(4)
    rows = [(i, rng.choice("ab"), rng.choice(["p", "q", "r", None])) for i in range(60)]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("".join(f"{i},{k},{'' if v is None else v}\n" for i, k, v in rows))
    ddl = (f"CREATE TEMPORARY TABLE f (id INT, k STRING, x STRING, ts AS TIMESTAMP '2026-01-01 00:00:00' + id *"
           f" INTERVAL '1' SECOND, WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', 'path' ="
           f" '{tmp_path / 'in'}', 'format' = 'csv');")
    query = ("SELECT k, LISTAGG(x) FILTER (WHERE MOD(id, 2) = 0), ARRAY_AGG(x) FILTER (WHERE id > 50),"
             " JSON_ARRAYAGG(x) FILTER (WHERE MOD(id, 5) = 0), LISTAGG(x) FILTER (WHERE id < 0) FROM f GROUP BY k;")
    expected = {}
    for key in "ab":
        mine = [(i, v) for i, k, v in rows if k == key]
        even = [v for i, v in mine if i % 2 == 0 and v is not None]
        late = [v for i, v in mine if i > 50]
        fifths = [v for i, v in mine if i % 5 == 0 and v is not None]
        expected[key] = [",".join(even) or "", "[" + ", ".join("NULL" if v is None else v for v in late) + "]" if late else "",
                         "[" + ",".join(f'"{v}"' for v in fifths) + "]", ""]
    assert {k: rest for k, *rest in run.rows(ddl + query)} == expected
    streamed = run.rows("SET 'execution.bounded-input' = 'stream';" + ddl + query + "RESET 'execution.bounded-input';")
    final = {}
    for op, k, *rest in streamed:
        if op in ("+I", "+U"):
            final[k] = rest
        else:
            final.pop(k)
    assert final == expected
