"""The update kinds a consumer needs, pushed down the plan (plan.update_kinds), the operators
that then emit UPDATE_AFTER only, and the GroupAggregate Spark then runs itself in update
mode (spark.physical.native_update_aggregate). No Spark.

The expected modes are the ones Flink 2.3's EXPLAIN CHANGELOG_MODE printed for the same
shapes (probed with PyFlink: a GroupAggregate into a blackhole is [I,UA], into print
[I,UB,UA]; a HAVING keeps both images; a Top-N into a blackhole is [I,UA,D])."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from pyspark.sql import types as T

from streamsql.plan import aggregate_operators, operators
from streamsql.plan.update_kinds import BEFORE_AND_AFTER, ONLY_UPDATE_AFTER, sink_requirement
from streamsql.runtime.operator_plan import operator_plan
from streamsql.runtime.settings import Settings
from streamsql.spark.physical import native_update_aggregate, stateful_operators
from streamsql.spark.stateful import AggSpec, accumulate, ranking
from streamsql.spark.stateful.group_aggregate import build_plan
from tests import depth
from tests.operator_plans import steps

SINKS = """
CREATE TEMPORARY TABLE hole (a BIGINT, c BIGINT) WITH ('connector' = 'blackhole');
CREATE TEMPORARY TABLE hole3 (a BIGINT, b BIGINT, c BIGINT) WITH ('connector' = 'blackhole');
CREATE TEMPORARY TABLE by_a (a BIGINT, c BIGINT, PRIMARY KEY (a) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
  'topic' = 't', 'properties.bootstrap.servers' = 'localhost:9', 'key.format' = 'json', 'value.format' = 'json');
CREATE TEMPORARY TABLE by_c (a BIGINT, c BIGINT, PRIMARY KEY (c) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
  'topic' = 't', 'properties.bootstrap.servers' = 'localhost:9', 'key.format' = 'json', 'value.format' = 'json');
CREATE TEMPORARY TABLE renamed (n BIGINT, key_col BIGINT, PRIMARY KEY (key_col) NOT ENFORCED)
  WITH ('connector' = 'delta', 'table-path' = 'renamed');
"""
COUNTS = "SELECT auction, COUNT(*) FROM bid GROUP BY auction"


def plan_of(sql: str, batch: bool = False):
    settings = Settings()
    if batch:
        settings.set("execution.runtime-mode", "batch")
    step = steps(SINKS + sql)[-1]
    return step, operator_plan(step, settings).root


def modes(root) -> list[tuple[str, str]]:
    return [(node.kind, operators.short_mode(node.mode)) for node in operators.walk(root)
            if node.kind not in ("TableSourceScan",)]


@pytest.mark.parametrize("sql, expected", [
    (f"INSERT INTO hole {COUNTS}", [("Sink", "I,UA"), ("GroupAggregate", "I,UA")]),
    (f"INSERT INTO print_out {COUNTS}", [("Sink", "I,UB,UA"), ("GroupAggregate", "I,UB,UA")]),
    (f"INSERT INTO hole {COUNTS} HAVING COUNT(*) > 2",
     [("Sink", "I,UB,UA"), ("Calc", "I,UB,UA"), ("GroupAggregate", "I,UB,UA")]),
    (f"INSERT INTO by_a {COUNTS}", [("Sink", "I,UA"), ("GroupAggregate", "I,UA")]),
    (f"INSERT INTO by_c {COUNTS} ON CONFLICT DO DEDUPLICATE", [("Sink", "I,UB,UA"), ("GroupAggregate", "I,UB,UA")]),
    ("INSERT INTO hole SELECT c, COUNT(*) FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) GROUP BY c",
     [("Sink", "I,UA,D"), ("GroupAggregate", "I,UA,D"), ("GroupAggregate", "I,UB,UA")]),
    ("INSERT INTO hole3 SELECT auction, bidder, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction"
     " ORDER BY price DESC) AS rn FROM bid) WHERE rn <= 3", [("Sink", "I,UA,D"), ("Calc", "I,UA,D"), ("Rank", "I,UA,D")]),
    ("INSERT INTO hole SELECT auction + 1, c * 2 FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction)",
     [("Sink", "I,UA"), ("Calc", "I,UA"), ("GroupAggregate", "I,UA")]),
    (f"INSERT INTO hole {COUNTS} UNION ALL SELECT bidder, COUNT(*) FROM bid GROUP BY bidder",
     [("Sink", "I,UA"), ("Union", "I,UA"), ("GroupAggregate", "I,UA"), ("GroupAggregate", "I,UA")]),
])
def test_modes_as_flink_infers_them_from_the_sink(sql, expected):
    _, root = plan_of(sql)
    assert modes(root) == expected


def test_a_select_and_a_batch_insert_keep_both_images():
    assert modes(plan_of(COUNTS)[1]) == [("GroupAggregate", "I,UB,UA")]
    assert modes(plan_of(f"INSERT INTO hole {COUNTS}", batch=True)[1]) == [("Sink", "I,UB,UA"),
                                                                           ("GroupAggregate", "I,UB,UA")]


def test_the_sink_key_is_matched_by_position_not_by_name():
    step, root = plan_of("INSERT INTO renamed SELECT COUNT(*) AS n, auction AS whatever FROM bid GROUP BY auction")
    required, why = sink_requirement(step.table, step.sources, root.inputs[0])
    assert required == ONLY_UPDATE_AFTER and "key_col" in why
    step, root = plan_of("INSERT INTO renamed SELECT auction, COUNT(*) FROM bid GROUP BY auction ON CONFLICT DO DEDUPLICATE")
    assert sink_requirement(step.table, step.sources, root.inputs[0])[0] == BEFORE_AND_AFTER


@pytest.mark.parametrize("select, native", [
    ("auction, COUNT(*) FILTER (WHERE price > 10) FROM bid GROUP BY auction", True),
    ("auction, SUM(price) * 2 + MIN(price) - MAX(price) + CAST(AVG(price) AS BIGINT) FROM bid GROUP BY auction", True),
    ("auction, COUNT(DISTINCT bidder) FROM bid GROUP BY auction", False),
    ("auction, COUNT(*) FROM bid GROUP BY auction HAVING COUNT(*) > 1", False),
    ("auction, CAST(FIRST_VALUE(price) AS BIGINT) FROM bid GROUP BY auction", False),
    ("auction, CAST(CHAR_LENGTH(LISTAGG(channel)) AS BIGINT) FROM bid GROUP BY auction", False),
    ("auction, SUM(price) FROM bid GROUP BY GROUPING SETS ((auction), ())", False),
    ("COUNT(*), SUM(price) FROM bid", False),  # a global aggregate: an upsert key of nothing
    ("x.auction, COUNT(*) FROM bid x JOIN auction y ON x.auction = y.id GROUP BY x.auction", False),
    ("c, COUNT(*) FROM (SELECT auction, COUNT(*) AS c FROM bid GROUP BY auction) GROUP BY c", False),
])
def test_which_group_aggregates_spark_runs_in_update_mode(select, native):
    _, root = plan_of(f"INSERT INTO hole SELECT {select}")
    chosen = native_update_aggregate(root)
    assert (chosen is not None) == native
    if native:  # then nothing is left for streamsql's operators
        assert isinstance(chosen, aggregate_operators.GroupAggregate) and stateful_operators(root) == []
    else:
        assert stateful_operators(root)


def test_an_aggregate_into_print_or_a_select_is_never_native():
    assert native_update_aggregate(plan_of(f"INSERT INTO print_out {COUNTS}")[1]) is None
    assert native_update_aggregate(plan_of(COUNTS)[1]) is None


# -- the operators, told to emit UPDATE_AFTER only ----------------------------------------


def _apply_upserts(table: dict, changes: pd.DataFrame, key_width: int) -> None:
    for row in changes.astype(object).itertuples(index=False, name=None):
        kind, key, values = row[0], row[1:1 + key_width], list(row[1 + key_width:])
        assert kind != "-U"
        if kind == "-D":
            table.pop(key)
        else:
            table[key] = values


def test_a_group_aggregate_without_before_images_upserts_to_its_result():
    rng = random.Random(11)
    schema = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])
    specs = [AggSpec("COUNT", None, output_name="c"), AggSpec("SUM", "v", output_name="s"),
             AggSpec("MAX", "v", output_name="m")]
    both, _ = build_plan(schema, ["k"], specs)
    after = {**both, "update_before": False}
    states, tables, seen, pairs = [None, None], [{}, {}], [], 0
    for _ in range(depth.pick(8, 25)):
        rows = [(rng.randint(1, 6), rng.randint(0, 100)) for _ in range(rng.randint(1, 20))]
        seen += rows
        frame = pd.DataFrame(rows, columns=["k", "v"])
        for i, plan in enumerate((both, after)):
            states[i], out = accumulate.fold(plan, states[i], frame)
            states[i] = accumulate.decode(accumulate.encode(states[i]))
            if i == 0:
                pairs += int((out["__rowkind"] == "-U").sum())
                out = out[out["__rowkind"] != "-U"]  # what an upsert consumer reads of both images
            _apply_upserts(tables[i], out, 1)
    truth = pd.DataFrame(seen, columns=["k", "v"]).groupby("k")["v"].agg(["size", "sum", "max"])
    assert tables[1] == tables[0] == {(k,): [int(r["size"]), int(r["sum"]), int(r["max"])] for k, r in truth.iterrows()}
    assert pairs > 0  # the reference did update keys


def test_a_top_n_without_before_images_upserts_by_partition_and_position():
    rng = random.Random(5)
    plan = {"partition": ["auction"], "order": [["price", True]], "limit": 3, "rank": "rn",
            "data": ["auction", "price", "name"], "rowkind": False, "later_wins": False, "update_before": False}
    state, seq, table, live = None, 0, {}, []
    for _ in range(depth.pick(10, 30)):
        rows = [(rng.randint(1, 4), rng.randint(0, 50), f"n{len(live) + i}") for i in range(rng.randint(1, 6))]
        live += rows
        state, seq, changes = ranking.fold(plan, state, seq, pd.DataFrame(rows, columns=plan["data"]))
        for row in changes.astype(object).itertuples(index=False, name=None):
            kind, (auction, price, name, rn) = row[0], row[1:]
            assert kind != "-U"
            if kind == "-D":
                table.pop((auction, rn))
            else:
                table[(auction, rn)] = (price, name)
    expected = {}
    for auction in {r[0] for r in live}:
        ranked = sorted((r for r in live if r[0] == auction), key=lambda r: -r[1])  # stable: ties by arrival
        expected.update({(auction, i): (r[1], r[2]) for i, r in enumerate(ranked[:3], 1)})
    assert table == expected


def test_the_last_stage_of_a_streamed_query_is_told_to_drop_before_images():
    from streamsql.runtime.sources import is_bounded
    from streamsql.spark.stateful.chain import compile_query
    from streamsql.spark.stateful.stages import AggregateStage, without_update_before

    for sink, told in (("hole", True), ("print_out", False)):
        step, root = plan_of(f"INSERT INTO {sink} SELECT auction, COUNT(DISTINCT bidder) FROM bid GROUP BY auction")
        stages = compile_query(step.plan, is_bounded, None)
        top = stages
        while not isinstance(top, AggregateStage):
            top = top.inputs[0][1]
        assert without_update_before(stages, root) is told and top.update_before is not told
