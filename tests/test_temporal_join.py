"""Event-time temporal joins (FOR SYSTEM_TIME AS OF a rowtime): the plan's checks, the
batch form (versions as validity intervals) and the cut, without Spark; the operator's
pandas core, without Spark; then bounded input streamed file by file against batch mode
and against the versions worked out by hand, and a continuous job that survives a kill -9."""

from __future__ import annotations

import os
import time

import pandas as pd
import pytest

from streamsql.errors import ValidationError
from streamsql.spark.dialect import to_spark_sql
from streamsql.spark.physical import runs_on_stateful_operators
from streamsql.spark.stateful import temporal_join as tj
from streamsql.spark.stateful.stages import JoinStage, inserts_only
from tests.conftest import write
from streamsql.plan.logical import build_operator_plan
from streamsql.runtime.sources import is_bounded
from tests.operator_plans import DDL, steps

RATES = """
CREATE TEMPORARY TABLE rates (cur BIGINT, rate BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND,
  PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');
CREATE TEMPORARY TABLE keyless (cur BIGINT, rate BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');
"""
JOIN = "SELECT b.auction, b.price * r.rate AS v, r.ts FROM bid b {} JOIN rates FOR SYSTEM_TIME AS OF b.ts AS r ON {};"


def _plan(sql: str):
    return steps(sql, DDL + RATES)[-1].plan


# -- the plan, the batch form and the cut, without Spark -------------------------------------------


def test_an_event_time_temporal_join_reads_versions_valid_at_the_row_s_time_in_batch():
    plan = _plan(JOIN.format("LEFT", "b.bidder = r.cur"))
    root = build_operator_plan(plan, is_bounded, None)
    assert "TemporalJoin(joinType=[LeftOuterJoin]" in "\n".join(root.explain())
    assert runs_on_stateful_operators(root)
    sql = to_spark_sql(plan.query)
    assert ("LEFT JOIN (SELECT *, LEAD(`ts`) OVER (PARTITION BY `cur` ORDER BY `ts` NULLS LAST) AS `__valid_to`"
            " FROM `rates`) AS `r` ON `b`.`bidder` = `r`.`cur` AND (`r`.`ts` <= `b`.`ts` AND (`r`.`__valid_to` IS"
            " NULL OR `b`.`ts` < `r`.`__valid_to`))") in sql


@pytest.mark.parametrize("sql, message", [
    (JOIN.format("", "b.bidder = r.rate"), "Temporal table's primary key [cur] must be included in the equivalence"),
    (JOIN.format("RIGHT", "b.bidder = r.cur"), "Temporal joins support INNER and LEFT joins, not RIGHT JOIN"),
    (JOIN.format("", "b.bidder = r.cur").replace("rates", "keyless"), "requires primary key in versioned table 'keyless'"),
    ("SELECT * FROM bid b JOIN users FOR SYSTEM_TIME AS OF b.ts AS u ON u.id = b.bidder;",
     "requires both primary key and row time attribute in versioned table 'users'"),
])
def test_a_temporal_join_flink_would_refuse_is_refused_with_its_position(sql, message):
    with pytest.raises(ValidationError) as caught:
        _plan(sql)
    assert message in caught.value.message and caught.value.position is not None


VERSIONED = ("CREATE TEMPORARY VIEW latest AS SELECT cur, rate, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY"
             " cur ORDER BY ts DESC) AS rn FROM keyless) WHERE rn = 1;")


def test_a_versioned_view_s_versions_are_the_rows_it_deduplicates():
    from streamsql.spark.stateful.chain import compile_query

    plan = steps(VERSIONED + "SELECT b.auction, r.rate FROM bid b JOIN latest FOR SYSTEM_TIME AS OF b.ts AS r"
                             " ON b.bidder = r.cur;", DDL + RATES)[-1].plan
    sql = to_spark_sql(plan.query)
    assert "JOIN (SELECT *, LEAD(`ts`) OVER (PARTITION BY `cur` ORDER BY `ts` NULLS LAST) AS `__valid_to` FROM" in sql
    assert "FROM `keyless`" in sql and "ROW_NUMBER" not in sql  # every row a version, none filtered out
    stage = compile_query(plan, is_bounded)
    (_, join), = stage.inputs
    right = to_spark_sql(join.right_query)
    assert join.temporal and "FROM `keyless`" in right and "ROW_NUMBER" not in right and "__valid_to" not in right


@pytest.mark.parametrize("view", [
    VERSIONED.replace("ts DESC", "ts"),  # keeps the first row: not a version history
    VERSIONED.replace("rn = 1", "rn <= 2"),
    "CREATE TEMPORARY VIEW latest AS SELECT * FROM keyless WHERE rate > 0;",
])
def test_a_view_that_is_not_versioned_is_refused(view):
    with pytest.raises(ValidationError) as caught:
        steps(view + "SELECT b.auction FROM bid b JOIN latest FOR SYSTEM_TIME AS OF b.ts AS r ON b.bidder = r.cur;",
              DDL + RATES)
    assert "requires primary key in versioned table 'latest'" in caught.value.message


def test_versions_are_kept_per_on_key_and_a_where_equality_filters_the_version_picked():
    from streamsql.spark.stateful.chain import compile_query

    plan = _plan(JOIN.format("", "b.bidder = r.cur AND b.auction = r.rate").replace(";", " WHERE b.price = r.rate;"))
    assert "LEAD(`ts`) OVER (PARTITION BY `cur`, `rate` ORDER BY" in to_spark_sql(plan.query)
    stage = compile_query(plan, is_bounded)
    (_, join), = stage.inputs
    assert join.keys == 2 and "`__joined`.`__r" in to_spark_sql(stage.query).split("WHERE")[1]


def test_a_key_declared_beside_like_over_a_nullable_column_is_refused_as_flink_refuses_it():
    with pytest.raises(ValidationError) as caught:
        steps("CREATE TEMPORARY TABLE versions (PRIMARY KEY (id) NOT ENFORCED) LIKE auction;", DDL)
    assert caught.value.message.startswith("Invalid primary key 'PK_id'. Column 'id' is nullable")
    assert caught.value.position is not None
    table = steps("CREATE TEMPORARY TABLE v2 (pk BIGINT, PRIMARY KEY (pk) NOT ENFORCED) LIKE auction;", DDL)[-1]
    assert table is not None  # a key over a column the table declares itself is NOT NULL


def test_a_stream_cuts_the_temporal_join_with_each_side_s_time():
    from streamsql.spark.stateful.chain import compile_query

    plan = _plan(JOIN.format("", "b.bidder = r.cur AND r.rate > 2"))
    stage = compile_query(plan, is_bounded)
    (_, join), = stage.inputs
    assert isinstance(join, JoinStage) and join.temporal and inserts_only(stage)
    assert "`b`.`bidder` AS `__lk0`, UNIX_MILLIS(`b`.`ts`) AS `__lt`" in to_spark_sql(join.left_query)
    right = to_spark_sql(join.right_query)
    assert "`r`.`cur` AS `__rk0`, UNIX_MILLIS(`r`.`ts`) AS `__rt`" in right and "LEAD" not in right
    assert "`__joined`.`__r" in to_spark_sql(stage.query) and "> 2" in to_spark_sql(stage.query)


def test_an_upsert_kafka_table_s_changes_are_cut_as_the_versions():
    from streamsql.spark.stateful.chain import compile_query
    from streamsql.spark.stateful.stages import SourceStage

    upsert = ("CREATE TEMPORARY TABLE rates (cur BIGINT, rate BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts,"
              " PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'upsert-kafka', 'topic' = 'r',"
              " 'properties.bootstrap.servers' = 'localhost:9092', 'key.format' = 'json', 'value.format' = 'json');")
    plan = steps(JOIN.format("LEFT", "b.bidder = r.cur"), DDL + upsert)[-1].plan
    stage = compile_query(plan, lambda table: False)
    (_, join), = stage.inputs
    assert isinstance(join, JoinStage) and join.temporal
    assert [type(s) for _, s in join.inputs] == [SourceStage] and join.inputs[0][1].upsert
    assert to_spark_sql(join.right_query).startswith("SELECT `r`.`__rowkind`")


# -- the pandas core, without Spark ----------------------------------------------------------------


def _core(join_type="InnerJoin"):
    return {"keys": ["__k0"], "left": ["__lt", "__l0"], "right": ["__rt", "__r0"], "join_type": join_type,
            "kinds": {"__k0": "object", "__lt": "int", "__l0": "int", "__rt": "int", "__r0": "int"},
            "columns": ["__side", "__rowkind", "__k0", "__lt", "__l0", "__rt", "__r0"], "buckets": 1,
            "left_time": "__lt", "right_time": "__rt"}


def _batch(*rows):
    """('L', key, time s, value) or ('R', key, time s, value)."""
    out = []
    for side, key, t, value in rows:
        left = side == "L"
        out.append({"__side": 0 if left else 1, "__rowkind": "+I", "__k0": key, "__lt": t * 1000 if left else None,
                    "__l0": value if left else None, "__rt": None if left else t * 1000,
                    "__r0": None if left else value})
    return pd.DataFrame(out)


def _pairs(out):
    return [(left, None if pd.isna(right) else right) for left, right in out[["__l0", "__r0"]].values.tolist()]


def test_each_row_joins_the_version_valid_at_its_time_once_the_watermark_passes_it():
    plan = _core("LeftOuterJoin")
    rows, versions, seq = tj.accept(plan, None, None, 0, _batch(
        ("R", "eur", 0, 10), ("R", "eur", 5, 11), ("L", "eur", 4, 1), ("L", "eur", 5, 2), ("L", "usd", 3, 3),
        ("L", "eur", 9, 4), ("R", "eur", 5, 12), ("L", None, 1, 5)))
    assert tj.next_time(plan, rows) == 1001
    rows, versions, out = tj.fire(plan, rows, versions, 5_000)  # 5 s is due once Spark's watermark passes it
    assert _pairs(out) == [(1, 10), (3, None), (5, None)]
    rows, versions, out = tj.fire(plan, rows, versions, 9_001)
    # the later of two versions with one time wins; the version at 0 s can match nothing to come
    assert _pairs(out) == [(2, 12), (4, 12)] and rows is None
    assert sorted(versions["__r0"]) == [12]


def test_an_inner_join_drops_rows_with_no_version_yet():
    plan = _core()
    rows, versions, seq = tj.accept(plan, None, None, 0, _batch(("L", "eur", 1, 1), ("R", "eur", 2, 10)))
    rows, versions, out = tj.fire(plan, rows, versions, 3_000)
    assert out.empty and rows is None and len(versions) == 1


def test_a_changelog_s_rows_join_with_their_own_kinds():
    """The left side may be a changelog (a debezium topic): Flink forwards its kinds, so an
    update retracts the joined row it made and adds the new one."""
    plan = _core("LeftOuterJoin")
    batch = _batch(("R", "eur", 0, 10), ("R", "eur", 6, 11), ("L", "eur", 5, 1), ("L", "eur", 5, 1),
                   ("L", "eur", 7, 2), ("L", "usd", 2, 3))
    batch["__rowkind"] = ["+I", "+I", "+I", "-U", "+U", "-D"]
    rows, versions, _ = tj.accept(plan, None, None, 0, batch)
    rows, versions, out = tj.fire(plan, rows, versions, 8_000)
    # in arrival order: a retraction follows what it retracts
    assert list(zip(out["__rowkind"], _pairs(out))) == [("+I", (1, 10)), ("-U", (1, 10)), ("+U", (2, 11)),
                                                        ("-D", (3, None))]


def test_a_left_side_of_another_operator_s_inserts_keeps_the_join_insert_only():
    from streamsql.spark.stateful.chain import compile_query
    from streamsql.spark.stateful.stages import OverStage

    plan = _plan("SELECT b.auction, b.s * r.rate FROM (SELECT auction, bidder, ts, SUM(price) OVER (PARTITION BY"
                 " auction ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM bid) b JOIN rates FOR"
                 " SYSTEM_TIME AS OF b.ts AS r ON b.bidder = r.cur;")
    stage = compile_query(plan, is_bounded)
    (_, join), = stage.inputs
    assert isinstance(join.inputs[0][1], OverStage) and not join.left_changelog and inserts_only(stage)


@pytest.mark.parametrize("join_type", ["InnerJoin", "LeftOuterJoin"])
def test_versions_from_a_changelog_end_where_their_key_is_deleted(join_type):
    """Versions from a debezium topic: +I and +U are versions from their time on, an
    update's before-image (-U) is none, and a -D ends the key's versions from its time
    until the next version; of two changes with one time the later wins."""
    plan = _core(join_type)
    batch = _batch(("R", "eur", 0, 10), ("R", "eur", 0, 10), ("R", "eur", 5, 11), ("R", "eur", 8, 11),
                   ("R", "eur", 12, 13), ("R", "usd", 2, 20), ("R", "usd", 2, 21),
                   ("L", "eur", 3, 1), ("L", "eur", 6, 2), ("L", "eur", 9, 3), ("L", "eur", 12, 4), ("L", "usd", 4, 5))
    batch["__rowkind"] = ["+I", "-U", "+U", "-D", "+I", "-D", "+I"] + ["+I"] * 5
    rows, versions, _ = tj.accept(plan, None, None, 0, batch)
    assert len(versions) == 6  # the -U is no version
    rows, versions, out = tj.fire(plan, rows, versions, 13_000)
    padded = [(3, None)] if join_type == "LeftOuterJoin" else []
    # usd: a delete and an insert at 2 s, the insert later: 21 is the version
    assert sorted(_pairs(out), key=str) == sorted([(1, 10), (2, 11), (4, 13), (5, 21)] + padded, key=str)
    assert set(out["__rowkind"]) == {"+I"}


def test_a_debezium_left_side_is_cut_with_its_kinds():
    from streamsql.spark.stateful.chain import compile_query
    from tests.test_kafka_options import BASE

    cdc = (f"CREATE TEMPORARY TABLE orders (id BIGINT, cur STRING, amount BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts"
           f" AS ts - INTERVAL '1' SECOND) WITH ({BASE}, 'format' = 'debezium-json',"
           " 'scan.startup.mode' = 'earliest-offset');")
    sql = "SELECT o.id, o.amount * r.rate AS v FROM orders o {} JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;"
    for kind in ("", "LEFT"):
        stage = compile_query(steps(sql.format(kind), DDL + RATES + cdc)[-1].plan, is_bounded)
        (_, join), = stage.inputs
        assert join.temporal and not inserts_only(stage)  # the changelog's kinds go on
        assert to_spark_sql(join.left_query).startswith("SELECT `o`.`__rowkind`, `o`.`cur` AS `__lk0`")
    versions = cdc.replace("TABLE orders", "TABLE cdc_rates").replace("id BIGINT, cur STRING, amount BIGINT",
                                                                       "cur STRING NOT NULL, rate BIGINT")
    versions = versions.replace("ts - INTERVAL '1' SECOND)", "ts - INTERVAL '1' SECOND, PRIMARY KEY (cur) NOT ENFORCED)")
    join = "SELECT b.price * r.rate FROM bid b JOIN {} FOR SYSTEM_TIME AS OF b.ts AS r ON b.bidder = r.cur;"
    stage = compile_query(steps(join.format("cdc_rates"), DDL + versions)[-1].plan, is_bounded)
    (_, joined), = stage.inputs
    # The versions keep their kinds (a deletion ends a key's versions); the output has the
    # left side's kinds: inserts.
    assert to_spark_sql(joined.right_query).startswith("SELECT `r`.`__rowkind`, `r`.`cur` AS `__rk0`")
    assert joined.temporal and inserts_only(stage)
    upserts = ("CREATE TEMPORARY TABLE up_rates (cur STRING NOT NULL, rate BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts"
               " AS ts - INTERVAL '1' SECOND, PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',"
               " 'topic' = 'u', 'properties.bootstrap.servers' = 'h:1', 'key.format' = 'json', 'value.format' = 'json');")
    plan = steps(join.format("up_rates"), DDL + upserts)[-1].plan
    (_, joined), = compile_query(plan, is_bounded).inputs  # an upsert-kafka table's versions too
    assert joined.temporal and to_spark_sql(joined.right_query).startswith("SELECT `r`.`__rowkind`")


# -- streamed for real -----------------------------------------------------------------------------


def _rates_and_orders(tmp_path, rng):
    """Rates: versions of three currencies (one before any order, some at an order's own
    time, one currency with no version); orders: ~40 rows; both in four files in time order."""
    rates, orders = tmp_path / "rates", tmp_path / "orders"
    versions = [(c, rng.randint(1, 99), s) for s in range(3, 40, 3) for c in ("1", "2") if rng.random() < 0.7]
    versions += [("1", 7, 0), ("2", 8, 0)]
    rows = [(i, rng.choice("1233"), rng.randint(1, 9), rng.choice([s, s + 0.5])) for i, s in enumerate(range(1, 41))]
    stamp = time.time() - 100
    for part in range(4):
        low, high = part * 10, part * 10 + 10
        text = "".join(f"{c},{r},2026-01-01 00:00:{s:02d}\n" for c, r, s in sorted(versions, key=lambda v: v[2])
                       if low <= s < high)
        os.utime(write(rates / f"part-{part}.csv", text), (stamp + part,) * 2)
        text = "".join(f"{i},{c},{a},2026-01-01 00:00:{int(s):02d}.{int(s % 1 * 10)}00\n" for i, c, a, s in rows
                       if min(int(s) // 10, 3) == part)
        os.utime(write(orders / f"part-{part}.csv", text), (stamp + part,) * 2)
    ddl = (f"CREATE TEMPORARY TABLE rates (cur STRING, rate BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts -"
           f" INTERVAL '1' SECOND, PRIMARY KEY (cur) NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' ="
           f" '{rates}', 'format' = 'csv');"
           f"CREATE TEMPORARY TABLE orders (id BIGINT, cur STRING, amount BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts"
           f" AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'filesystem', 'path' = '{orders}', 'format' = 'csv');")
    return ddl, versions, rows


def _by_hand(versions, rows, left: bool):
    """Each order with its currency's version of the latest time not after the order's."""
    out = []
    for i, c, a, s in rows:
        valid = [v for v in versions if v[0] == c and v[2] <= s]
        if valid:
            rate = max(valid, key=lambda v: v[2])[1]  # one version per currency and time here
            out.append((str(i), str(a * rate)))
        elif left:
            out.append((str(i), ""))
    return sorted(out)


@pytest.mark.spark
@pytest.mark.parametrize("join, versioned", [("", "rates"), ("LEFT", "rates"), ("LEFT", "latest")])
def test_streamed_temporal_join_joins_each_order_with_the_rate_of_its_time(run, tmp_path, join, versioned):
    import random

    from tests.streamed import streamed_and_batch

    ddl, versions, rows = _rates_and_orders(tmp_path, random.Random(5))
    run.output(ddl + "CREATE TEMPORARY VIEW latest AS SELECT cur, rate, ts FROM (SELECT *, ROW_NUMBER() OVER"
                     " (PARTITION BY cur ORDER BY ts DESC) AS rn FROM rates) WHERE rn = 1;")
    final, ops, expected = streamed_and_batch(
        run, f"SELECT o.id, o.amount * r.rate AS total FROM orders o {join} JOIN {versioned} FOR SYSTEM_TIME AS OF"
             f" o.ts AS r ON o.cur = r.cur")
    assert [tuple(r) for r in final] == [tuple(r) for r in expected] == _by_hand(versions, rows, left=join == "LEFT")
    assert set(ops) == {"+I"}


@pytest.mark.spark
def test_a_continuous_temporal_join_survives_kill_9_and_drains(run, tmp_path):
    """A continuous INSERT: orders wait for the watermark, a kill -9 and a restart resume
    from the checkpoint (rows and versions waiting in state), and a drain joins the rest."""
    from tests.jobs import killed_then_drained

    source, rates, sink = tmp_path / "in", tmp_path / "rates", tmp_path / "out"

    def part(n: int) -> None:
        text = "".join(f"{i},{'xy'[i % 2]},{i % 5},2026-01-01 00:{i // 60:02d}:{i % 60:02d}\n"
                       for i in range(n * 30, n * 30 + 30))
        os.utime(write(source / f"part-{n}.csv", text), (time.time() - 100 + n,) * 2)
        text = "".join(f"{c},{n * 10 + j},2026-01-01 00:{(n * 30 + j * 7) // 60:02d}:{(n * 30 + j * 7) % 60:02d}\n"
                       for j in range(4) for c in "xy")
        os.utime(write(rates / f"part-{n}.csv", text), (time.time() - 100 + n,) * 2)

    ddl = f"""
CREATE TABLE src (id BIGINT, cur STRING, amount INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE rates (cur STRING, rate INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND,
  PRIMARY KEY (cur) NOT ENFORCED)
  WITH ('connector' = 'filesystem', 'path' = '{rates}', 'format' = 'csv', 'source.monitor-interval' = '1s');
CREATE TABLE out (id BIGINT, total INT, rate_ts TIMESTAMP(3))
  WITH ('connector' = 'filesystem', 'path' = '{sink}', 'format' = 'csv');
"""
    query = ("INSERT INTO out SELECT s.id, s.amount * r.rate, r.ts FROM src s LEFT JOIN rates FOR SYSTEM_TIME AS OF"
             " s.ts AS r ON s.cur = r.cur")
    streamed, batch = killed_then_drained(run, tmp_path, ddl, query, sink, part, waiting=24, resumed=18, more=30)
    assert len(streamed) == len(set(streamed)) == 90 and streamed == batch


def test_keys_in_a_parenthesised_on_condition_are_found():
    """ON (a = b AND c) is split into its conjuncts as ON a = b AND c is (one helper for
    the plan's check and the cut)."""
    from streamsql.spark.stateful.chain import compile_query

    plan = _plan(JOIN.format("LEFT", "(b.bidder = r.cur AND b.price > 0)"))
    stage = compile_query(plan, is_bounded)
    assert stage is not None and isinstance(stage.inputs[0][1], JoinStage) and stage.inputs[0][1].keys == 1


def test_a_left_temporal_join_with_a_condition_on_the_versions_is_not_cut():
    """Flink tests it on the version it picked; filtering the versions first would pick
    another one, so it is refused over unbounded input rather than answered differently (a
    condition on the row alone pads the row, as the parenthesised test above shows)."""
    from streamsql.spark.stateful.chain import compile_query

    assert compile_query(_plan(JOIN.format("LEFT", "b.bidder = r.cur AND r.rate > 1")), is_bounded) is None
    assert compile_query(_plan(JOIN.format("LEFT", "b.bidder = r.cur AND r.rate > b.price")), is_bounded) is None
