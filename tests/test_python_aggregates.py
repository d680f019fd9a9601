"""Python aggregate functions as PyFlink writes them (@udaf: an AggregateFunction, or a
pandas function with func_type='pandas'), without a JVM: how they bind (an aggregate call,
its declared type, its arguments checked), the Spark SQL a bounded query runs, and the
pandas cores that keep their accumulators over a stream (GroupAggregate with retractions,
window slices merged, OVER frames), each against the same function applied directly to
the rows of each group, window or frame in plain Python, on data generated here."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from streamsql.errors import ValidationError
from streamsql.spark.dialect import to_spark_sql
from tests.operator_plans import steps
from tests.udaf_module import SOURCE


FUNCTIONS = "".join(f"CREATE TEMPORARY FUNCTION {name} AS 'flink_style_udafs.{name}' LANGUAGE PYTHON;"
                    for name in ("weighted_avg", "words", "spread"))
TABLE = ("CREATE TEMPORARY TABLE t (k STRING, v BIGINT, w INT, s STRING) WITH ('connector' = 'filesystem',"
         " 'path' = 'bid.csv', 'format' = 'csv');")


@pytest.fixture
def module(python_module):
    python_module("flink_style_udafs", SOURCE)


def _plan(sql: str):
    return steps(TABLE + FUNCTIONS + sql)[-1].plan


def test_a_call_is_an_aggregate_typed_as_declared(module):
    plan = _plan("SELECT k, weighted_avg(v, w) AS a, words(s), spread(v) AS d FROM t GROUP BY k")
    assert [(c.name, c.type.sql("flink")) for c in plan.columns] == [
        ("k", "STRING"), ("a", "DOUBLE"), ("EXPR$2", "STRING"), ("d", "BIGINT")]
    assert sorted(f.name for f in plan.functions) == ["spread", "weighted_avg", "words"]


@pytest.mark.parametrize("query, message", [
    ("SELECT k, weighted_avg(v, w) FROM t", "Expression 'k' is not being grouped"),
    ("SELECT weighted_avg(v) FROM t", "Function weighted_avg cannot take 1 argument: its Python function is"
                                      " accumulate(accumulator, value, weight)"),
    ("SELECT * FROM t, LATERAL TABLE(words(s))", "Function words is an aggregate function: LATERAL TABLE calls a"
                                                 " table function"),
])
def test_refused_at_plan_time(module, query, message):
    with pytest.raises(ValidationError) as caught:
        _plan(query)
    assert message in caught.value.message


def test_an_aggregate_function_without_its_methods_is_refused_when_it_is_created(module):
    with pytest.raises(ValidationError, match="Function incomplete: a Python aggregate function \\(udaf\\) is an"
                       " AggregateFunction with create_accumulator, accumulate, get_value"):
        steps(TABLE + "CREATE TEMPORARY FUNCTION incomplete AS 'flink_style_udafs.incomplete' LANGUAGE PYTHON;"
                      "SELECT incomplete(v) FROM t")


@pytest.mark.parametrize("query, expected", [
    ("SELECT k, weighted_avg(v, w) FROM t GROUP BY k",
     "streamsql_udf_weighted_avg(COLLECT_LIST(NAMED_STRUCT('a0', `t`.`v`, 'a1', `t`.`w`)))"),
    ("SELECT words(DISTINCT s) FROM t", "streamsql_udf_words(COLLECT_SET(NAMED_STRUCT('a0', `t`.`s`)))"),
    ("SELECT spread(v) FILTER (WHERE w > 1) FROM t",
     "streamsql_udf_spread(COLLECT_LIST(NAMED_STRUCT('a0', `t`.`v`)) FILTER(WHERE `t`.`w` > 1))"),
    ("SELECT k, words(s) OVER (PARTITION BY k ORDER BY v ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t",
     "streamsql_udf_words(COLLECT_LIST(NAMED_STRUCT('a0', `t`.`s`)) OVER (PARTITION BY `t`.`k` ORDER BY `t`.`v`"
     " ROWS BETWEEN 2 PRECEDING AND CURRENT ROW))"),
])
def test_spark_collects_each_group_s_rows_for_the_function(module, query, expected):
    assert expected in to_spark_sql(_plan(query).query)


# -- the function as Spark calls it over a group's rows (spark.udf_calls) ---------------------


def test_a_group_s_rows_are_folded_into_a_fresh_accumulator(module):
    from streamsql.pyflink.common import Row
    from streamsql.spark.udf_calls import aggregated

    functions = {f.name: f for f in _plan("SELECT weighted_avg(v, w), spread(v) FROM t").functions}
    weighted, spread = functions["weighted_avg"], functions["spread"]
    call = aggregated(weighted.instance, weighted.function, False, "__none")
    assert call([Row(3, 1), Row(None, 4), Row(5, 3)]) == (3 * 1 + 5 * 3) / 4
    assert call([]) is None  # no rows: the value of a fresh accumulator
    vectorized = aggregated(None, spread.function, True, "__none")
    assert vectorized([Row(3), Row(None), Row(9)]) == 6.0


# -- the pandas cores of the stateful operators ----------------------------------------------


def _changes(rng: random.Random, keys: int, n: int, retracting: bool) -> list[tuple]:
    """(row kind, key, value, weight) rows; a retraction takes back a live row of its key."""
    live: list[tuple] = []
    rows = []
    for _ in range(n):
        if retracting and live and rng.random() < 0.35:
            row = live.pop(rng.randrange(len(live)))
            rows.append(("-D" if rng.random() < 0.5 else "-U", *row))
            continue
        row = (f"k{rng.randrange(keys)}", rng.choice([None, *range(-5, 20)]), rng.randrange(1, 4))
        live.append(row)
        rows.append(("+I", *row))
    return rows


def _group_plan(python, retracting: bool):
    from pyspark.sql import types as T

    from streamsql.spark.stateful.group_aggregate import build_plan
    from streamsql.spark.stateful.specs import AggSpec

    fields = ([T.StructField("__rowkind", T.StringType())] if retracting else []) + [
        T.StructField("k", T.StringType()), T.StructField("v", T.LongType()), T.StructField("w", T.LongType())]
    spec = AggSpec("PYTHON", None, output_name="a", output_type=T.DoubleType(), columns=("v", "w"), python=python)
    plan, _ = build_plan(T.StructType(fields), ["k"], [spec, AggSpec("COUNT", None, output_name="n")])
    plan["columns"] = [f.name for f in fields]
    return plan


def _weighted(rows) -> float | None:
    rows = [(v, w) for v, w in rows if v is not None]
    return sum(v * w for v, w in rows) / sum(w for _, w in rows) if rows and sum(w for _, w in rows) else None


@pytest.mark.parametrize("retracting", [False, True], ids=["inserts", "retractions"])
def test_group_aggregate_keeps_each_key_s_accumulator_across_batches(module, retracting):
    from streamsql.spark.stateful import accumulate

    function = _plan("SELECT weighted_avg(v, w) FROM t").functions[0]
    plan = _group_plan(function, retracting)
    rng = random.Random(5)
    changes = _changes(rng, 6, 400, retracting)
    state, emitted = None, {}
    for start in range(0, len(changes), 37):  # micro-batches
        part = changes[start:start + 37]
        frame = pd.DataFrame(part, columns=["__rowkind", "k", "v", "w"])
        if not retracting:
            frame = frame.drop(columns=["__rowkind"])
        frame["v"], frame["w"] = frame["v"].astype("Int64"), frame["w"].astype("Int64")
        state, out = accumulate.fold(plan, state, frame)
        for row in out.itertuples(index=False):
            if row[0] in ("+I", "+U"):
                emitted[row.k] = (row.a, row.n)
            else:
                assert emitted.pop(row.k) == (row.a, row.n)  # a retraction carries the row it takes back
    live: dict[str, list] = {}
    for kind, k, v, w in changes:
        rows = live.setdefault(k, [])
        rows.append((v, w)) if kind == "+I" else rows.remove((v, w))
    expected = {k: (_weighted(rows), len(rows)) for k, rows in live.items() if rows}
    assert emitted.keys() == expected.keys()
    for k, (value, n) in expected.items():
        assert emitted[k][1] == n
        assert emitted[k][0] == pytest.approx(value) if value is not None else emitted[k][0] is None


def test_a_function_without_retract_is_refused_over_updating_input(module):
    function = _plan("SELECT words(s) FROM t").functions[0]
    with pytest.raises(ValidationError, match="Function words cannot take rows back: its input is an updating one,"
                       " and its AggregateFunction defines no retract"):
        _group_plan(function, True)


def test_a_pandas_function_keeps_its_rows_and_takes_retracted_ones_out(module):
    from streamsql.spark.stateful.python_aggregates import PandasAggregate

    spread = _plan("SELECT spread(v) FROM t").functions[0]
    assert spread.retracts and spread.merges
    folder = PandasAggregate(spread.function, 1)
    rng = random.Random(3)
    accumulator, live = folder.create_accumulator(), []
    for _ in range(200):
        if live and rng.random() < 0.4:
            value = live.pop(rng.randrange(len(live)))
            folder.retract(accumulator, value)
        else:
            value = rng.randrange(100)
            live.append(value)
            folder.accumulate(accumulator, value)
    assert folder.get_value(accumulator) == float(max(live) - min(live))


def test_a_distinct_call_takes_each_argument_once_and_gives_it_back_with_its_last_row(module):
    from streamsql.spark.stateful.python_aggregates import DistinctAggregate, folder

    weighted = _plan("SELECT weighted_avg(v, w) FROM t").functions[0]
    distinct = folder(weighted, 2, distinct=True)
    assert isinstance(distinct, DistinctAggregate)
    rng = random.Random(4)
    accumulator, live = distinct.create_accumulator(), []
    halves = [distinct.create_accumulator(), distinct.create_accumulator()]
    for n in range(300):
        if live and rng.random() < 0.4:
            row = live.pop(rng.randrange(len(live)))
            distinct.retract(accumulator, *row)
            continue
        row = (rng.randrange(6), rng.randrange(1, 3))
        live.append(row)
        distinct.accumulate(accumulator, *row)
        distinct.accumulate(halves[n % 2], *row)
    assert distinct.get_value(accumulator) == pytest.approx(_weighted(sorted(set(live))))
    merged = distinct.create_accumulator()
    distinct.merge(merged, halves)  # two slices: a pair in both counts once
    assert distinct.get_value(merged) == pytest.approx(_weighted(sorted(set(r for h in halves for r in h[1]))))


def test_window_slices_merge_into_each_window(module):
    from pyspark import cloudpickle

    from streamsql.spark.stateful.python_aggregates import values

    weighted = _plan("SELECT weighted_avg(v, w) FROM t").functions[0]
    rng = random.Random(9)
    slices = [[(rng.randrange(10), rng.randrange(1, 4)) for _ in range(rng.randrange(1, 6))] for _ in range(8)]
    blobs = []
    for rows in slices:
        accumulator = weighted.instance.create_accumulator()
        for row in rows:
            weighted.instance.accumulate(accumulator, *row)
        blobs.append(cloudpickle.dumps(accumulator))
    windows = pd.Series([blobs[i:i + 3] for i in range(6)])  # HOP: each window three slices
    got = values({"python": weighted.instance, "udaf": "weighted_avg"}, windows)
    for i, value in enumerate(got):
        assert value == pytest.approx(_weighted([r for rows in slices[i:i + 3] for r in rows]))


@pytest.mark.parametrize("preceding", [None, 2], ids=["unbounded", "2 rows"])
def test_over_frames_fold_each_frame_across_firings(module, preceding):
    from streamsql.spark.stateful import over_frames
    from streamsql.spark.stateful.python_aggregates import folder

    weighted = _plan("SELECT weighted_avg(v, w) FROM t").functions[0]
    agg = {"function": "PYTHON", "column": None, "name": "a", "kind": "int", "out_kind": "float", "out_bits": 0,
           "out_scale": None, "python": folder(weighted, 2), "udaf": "weighted_avg", "columns": ["v", "w"]}
    plan = {"partition": ["k"], "time": "ts", "rowtime": True, "unit": "ROWS", "preceding": preceding,
            "aggs": [agg], "columns": ["k", "v", "w", "ts"], "buckets": 1, "ttl_ms": None, "ties": [],
            "kinds": {"k": "object", "v": "int", "w": "int", "ts": "object"}, "hashed": False}
    rng = random.Random(2)
    rows = [(f"k{rng.randrange(3)}", rng.randrange(10), rng.randrange(1, 3), i) for i in range(60)]
    pending, history, seq, out = None, None, 0, []
    for start in range(0, 60, 13):
        part = pd.DataFrame(rows[start:start + 13], columns=["k", "v", "w", "ms"])
        part["v"], part["w"] = part["v"].astype("Int64"), part["w"].astype("Int64")
        part["ts"] = pd.to_datetime(part.pop("ms"), unit="s")
        pending, seq = over_frames.accept(plan, pending, part, 0, seq)
        pending, history, fired = over_frames.fire(plan, pending, history, (start + 13) * 1000)
        out += [(r.k, r.v, r.w, r.a) for r in fired.itertuples(index=False)]
    seen: dict[str, list] = {}
    for k, v, w, a in out:
        frame = seen.setdefault(k, [])
        frame.append((v, w))
        assert a == pytest.approx(_weighted(frame if preceding is None else frame[-preceding - 1:]))
    assert len(out) == 60


def test_a_failure_names_the_function_and_the_row_it_failed_on_or_the_value_that_does_not_fit(module):
    import json

    from streamsql.pyflink.common import Row
    from streamsql.spark.udf_calls import MARK, aggregated, result_check

    weighted = {f.name: f for f in _plan("SELECT weighted_avg(v, w) FROM t").functions}["weighted_avg"]
    call = aggregated(weighted.instance, weighted.function, False, "__none", "weighted_avg", result_check("DOUBLE"))
    with pytest.raises(RuntimeError) as caught:
        call([Row(1, 2), Row("x", 3)])
    details = json.loads(str(caught.value).split(MARK)[1].splitlines()[0])
    assert (details["function"], details["type"], details["args"]) == ("weighted_avg", "TypeError", "'x', 3")
    from streamsql.runtime.failures import _udf_message

    call = aggregated(weighted.instance, weighted.function, False, "__none", "weighted_avg", result_check("BIGINT"))
    with pytest.raises(RuntimeError) as caught:
        call([Row(1, 2), Row(4, 3)])
    assert _udf_message(json.loads(str(caught.value).split(MARK)[1].splitlines()[0])) == (
        "Python function 'weighted_avg' raised TypeError: it returned 2.8 (float) for its BIGINT result (in its value over"
        " 2 rows)")
    assert result_check("BIGINT")(7) == 7 and result_check("DOUBLE")(7) == 7 and result_check("STRING")(None) is None
    for type_sql, value in (("DOUBLE", "not a number"), ("BIGINT", 1.5), ("BIGINT", True), ("STRING", 3)):
        with pytest.raises(TypeError, match=f"it returned {value!r} \\({type(value).__name__}\\) for its {type_sql}"):
            result_check(type_sql)(value)
