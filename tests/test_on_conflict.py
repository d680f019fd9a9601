"""INSERT ... ON CONFLICT and the sink upsert materializer (plan.sink_materialize,
spark.stateful.sink_materializer). No Spark.

The plan-time rules and messages are the ones Flink 2.3 gave for the same statements
(probed with PyFlink 2.3's EXPLAIN); the materializers' outputs are the changelogs Flink
2.3's print sink wrote for a GROUP BY user_id, category with a WHERE total < 10 into a
table keyed by user_id, fed the same changes."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from streamsql.dialect.flink import Flink
from streamsql.dialect.script import parse_script
from streamsql.errors import StreamsqlError, ValidationError
from streamsql.plan.sink_materialize import Materialization
from streamsql.runtime.operator_plan import operator_plan
from streamsql.runtime.settings import Settings
from streamsql.spark.stateful import sink_materializer as sm
from tests.operator_plans import steps

SINKS = """
CREATE TEMPORARY TABLE by_auction (auction BIGINT, bidder BIGINT, n BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
  WITH ('connector' = 'delta', 'table-path' = 'by_auction');
CREATE TEMPORARY TABLE hole_keyed (auction BIGINT, bidder BIGINT, n BIGINT, PRIMARY KEY (auction) NOT ENFORCED)
  WITH ('connector' = 'blackhole');
CREATE TEMPORARY TABLE appended (auction BIGINT, bidder BIGINT, n BIGINT)
  WITH ('connector' = 'filesystem', 'path' = 'appended', 'format' = 'csv');
CREATE TEMPORARY TABLE unwatermarked (auction BIGINT, bidder BIGINT)
  WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');
"""
PAIRS = "SELECT auction, bidder, COUNT(*) FROM bid GROUP BY auction, bidder"


def sink_of(sql: str, settings: dict | None = None):
    values = Settings()
    for key, value in (settings or {}).items():
        values.set(key, value)
    step = steps(SINKS + sql)[-1]
    return step, operator_plan(step, values).root


def test_the_clause_parses_and_prints_back():
    [statement] = parse_script(f"INSERT INTO by_auction {PAIRS} ON CONFLICT DO DEDUPLICATE")
    assert statement.expression.sql(dialect=Flink).endswith("ON CONFLICT DO DEDUPLICATE")
    for wrong in ("ON CONFLICT DO UPDATE SET n = 1", "ON CONFLICT (auction) DO NOTHING", "ON CONFLICT"):
        with pytest.raises(StreamsqlError, match="Expected DO NOTHING, DO ERROR or DO DEDUPLICATE"):
            parse_script(f"INSERT INTO by_auction {PAIRS} {wrong}")
    with pytest.raises(StreamsqlError, match="no ON DUPLICATE KEY"):
        parse_script(f"INSERT INTO by_auction {PAIRS} ON DUPLICATE KEY UPDATE n = 1")


def test_an_upsert_key_that_differs_from_the_primary_key_asks_for_on_conflict():
    for table in ("by_auction", "hole_keyed"):
        with pytest.raises(ValidationError, match=r"upsert key that differs from the primary key of the sink table"
                           r" '.*\." + table + r"'\. Primary key: \[auction\], upsert key: \[auction, bidder\]"):
            sink_of(f"INSERT INTO {table} {PAIRS}")
    step, root = sink_of(f"INSERT INTO by_auction {PAIRS}", settings={"table.exec.sink.require-on-conflict": "false"})
    assert root.materialize == Materialization("DEDUPLICATE", ("auction",), ("auction", "bidder"))


@pytest.mark.parametrize("strategy", ["NOTHING", "ERROR", "DEDUPLICATE"])
def test_each_strategy_materializes_and_explains_as_flink(strategy):
    step, root = sink_of(f"INSERT INTO by_auction {PAIRS} ON CONFLICT DO {strategy}")
    assert root.materialize == Materialization(strategy, ("auction",), ("auction", "bidder"))
    assert root.describe().endswith(f"upsertMaterialize=[true], conflictStrategy=[{strategy}])")
    assert step.plan.sink_waits == (strategy != "DEDUPLICATE")  # a bounded stream's end-of-input run


def test_no_materializer_where_the_primary_key_holds_an_upsert_key():
    step, root = sink_of("INSERT INTO by_auction SELECT auction, MAX(bidder), COUNT(*) FROM bid GROUP BY auction"
                         " ON CONFLICT DO ERROR")
    assert root.materialize is None and "conflictStrategy=[ERROR]" in root.describe()
    assert "upsertMaterialize" not in root.describe()
    step, root = sink_of("INSERT INTO by_auction SELECT auction, bidder, price FROM bid")  # inserts: no question
    assert root.materialize is None
    step, root = sink_of("INSERT INTO by_auction SELECT auction, bidder, price FROM bid",
                         settings={"table.exec.sink.upsert-materialize": "FORCE"})
    assert root.materialize is None  # FORCE, but nothing to materialize: the query only inserts


def test_on_conflict_is_refused_where_the_sink_takes_inserts_only():
    for sql in ("INSERT INTO by_auction SELECT auction, bidder, price FROM bid ON CONFLICT DO DEDUPLICATE",
                "INSERT INTO appended SELECT auction, bidder, price FROM bid ON CONFLICT DO NOTHING"):
        with pytest.raises(ValidationError, match=r"ON CONFLICT clause is only allowed for upsert sinks\. The sink"
                           r" '.*' is not an upsert sink because it only accepts INSERT \(append-only\) changes"):
            sink_of(sql)


def test_nothing_and_error_need_every_source_watermarked():
    query = "SELECT auction, bidder, COUNT(*) FROM unwatermarked GROUP BY auction, bidder"
    for strategy in ("NOTHING", "ERROR"):
        with pytest.raises(ValidationError, match=f"ON CONFLICT DO {strategy} requires all source tables to define"
                           r" watermarks, but the following source\(s\) do not: .*unwatermarked\. Please add"):
            sink_of(f"INSERT INTO by_auction {query} ON CONFLICT DO {strategy}")
    assert sink_of(f"INSERT INTO by_auction {query} ON CONFLICT DO DEDUPLICATE")[1].materialize is not None


def test_none_turns_the_materializer_off_and_refuses_a_clause_it_would_ignore():
    step, root = sink_of(f"INSERT INTO by_auction {PAIRS}", settings={"table.exec.sink.upsert-materialize": "NONE"})
    assert root.materialize is None
    with pytest.raises(ValidationError, match="has no effect with 'table.exec.sink.upsert-materialize' = 'NONE'"):
        sink_of(f"INSERT INTO by_auction {PAIRS} ON CONFLICT DO NOTHING", settings={"table.exec.sink.upsert-materialize": "none"})


# -- the materializers, on the changes Flink's aggregate and filter emitted ------------------

COLUMNS = ["user_id", "category", "total"]
PLAN = {"columns": COLUMNS, "upsert_key": ["user_id", "category"], "buckets": 1}


def changes(rows: list[tuple]) -> pd.DataFrame:
    """Changes as the materializer's input: kind, the columns, then the keys as JSON."""
    frame = pd.DataFrame(rows, columns=[sm.ROWKIND, *COLUMNS])
    frame[sm.PK] = [json.dumps({"user_id": u}) for u in frame.user_id]
    frame[sm.UK] = [json.dumps({"user_id": u, "category": c}) for u, c in zip(frame.user_id, frame.category)]
    frame[sm.ROW] = [json.dumps(dict(zip(COLUMNS, r))) for r in zip(frame.user_id, frame.category, frame.total)]
    frame[sm.SEQ] = range(len(frame))
    return frame


# (1,A,5) (1,B,7) (2,A,1) (1,A,3) (1,B,5) (3,X,1) (3,X,1) summed per (user, category), total < 10
FILTERED = [("+I", 1, "A", 5), ("+I", 1, "B", 7), ("+I", 2, "A", 1), ("-U", 1, "A", 5), ("+U", 1, "A", 8),
            ("-U", 1, "B", 7), ("+I", 3, "X", 1), ("-U", 3, "X", 1), ("+U", 3, "X", 2)]


def per_key(out: pd.DataFrame) -> dict:
    keyed: dict = {}
    for kind, user, category, total in out[[sm.ROWKIND, *COLUMNS]].itertuples(index=False):
        keyed.setdefault(user, []).append((kind, user, category, total))
    return keyed


def test_deduplicate_writes_what_flinks_sink_upsert_materializer_wrote():
    live, out = sm.deduplicate(PLAN, None, changes(FILTERED))
    assert per_key(out) == {1: [("+I", 1, "A", 5), ("+U", 1, "B", 7), ("+U", 1, "A", 8)],
                            2: [("+I", 2, "A", 1)], 3: [("+I", 3, "X", 1), ("-D", 3, "X", 1), ("+I", 3, "X", 2)]}
    assert sorted(live[["user_id", "category", "total"]].itertuples(index=False)) == [(1, "A", 8), (2, "A", 1),
                                                                                      (3, "X", 2)]


def test_deduplicate_across_calls_goes_back_to_the_earlier_row():
    live, _ = sm.deduplicate(PLAN, None, changes([("+I", 1, "A", 5), ("+I", 1, "B", 7)]))
    live, out = sm.deduplicate(PLAN, live, changes([("-D", 1, "B", 7)]))
    assert per_key(out) == {1: [("+U", 1, "A", 5)]}  # the latest left: the one before it again
    live, out = sm.deduplicate(PLAN, live, changes([("-D", 1, "A", 5)]))
    assert per_key(out) == {1: [("-D", 1, "A", 5)]} and live is None


def test_deduplicate_keeps_a_row_replaced_in_place_where_it_was():
    live, out = sm.deduplicate(PLAN, None, changes([("+I", 1, "A", 5), ("+I", 1, "B", 7), ("+U", 1, "A", 6)]))
    assert per_key(out) == {1: [("+I", 1, "A", 5), ("+U", 1, "B", 7), ("+U", 1, "A", 6)]}
    live, out = sm.deduplicate(PLAN, live, changes([("-D", 1, "B", 7)]))
    assert per_key(out) == {1: [("+U", 1, "A", 6)]}  # B was still the latest: A (updated in place) again


def test_nothing_compacts_on_the_watermark_as_flink_did():
    plan = {**PLAN, "strategy": "NOTHING"}
    waiting = changes(FILTERED).assign(**{sm.TAG: 0})
    written, rest, out = sm.compact(plan, None, waiting, 0)
    assert len(out) == 0 and written is None and len(rest) == len(FILTERED)  # the watermark has not passed them
    written, rest, out = sm.compact(plan, None, waiting, 1)
    assert per_key(out) == {1: [("+I", 1, "A", 8)], 2: [("+I", 2, "A", 1)], 3: [("+I", 3, "X", 2)]}
    assert rest is None
    # A, then B and C live under key 1 (Flink 2.3 kept B: the first left once A's update re-added it)
    clash = changes([("+I", 1, "A", 5), ("+I", 1, "B", 7), ("-U", 1, "A", 5), ("+U", 1, "A", 8), ("+I", 1, "C", 1)])
    _, _, out = sm.compact(plan, None, clash.assign(**{sm.TAG: 0}), 1)
    assert per_key(out) == {1: [("+I", 1, "B", 7)]}
    with pytest.raises(sm.ConflictError, match="Primary key constraint violation"):
        sm.compact({**plan, "strategy": "ERROR"}, None, clash.assign(**{sm.TAG: 0}), 1)


def test_nothing_keeps_the_written_row_against_a_later_one():
    plan = {**PLAN, "strategy": "NOTHING"}
    written, _, out = sm.compact(plan, None, changes([("+I", 1, "A", 5)]).assign(**{sm.TAG: 0}), 1)
    assert per_key(out) == {1: [("+I", 1, "A", 5)]}
    written, _, out = sm.compact(plan, written, changes([("+I", 1, "B", 7)]).assign(**{sm.TAG: 1}), 2)
    assert len(out) == 0  # a conflict: the written row stays
    # the conflicting row is dropped, not kept (Flink keeps a key's written row only): A's
    # deletion deletes the key, and B's later one finds nothing
    written, _, out = sm.compact(plan, written, changes([("-D", 1, "A", 5)]).assign(**{sm.TAG: 2}), 3)
    assert per_key(out) == {1: [("-D", 1, "A", 5)]} and written is None
    written, _, out = sm.compact(plan, written, changes([("-D", 1, "B", 7)]).assign(**{sm.TAG: 3}), 4)
    assert len(out) == 0 and written is None


def _random_changes(rng, keys: int, n: int, held: dict) -> list[tuple]:
    """Changes a GROUP BY (user, category) could emit: an add of a (user, category) it holds
    is an update (-U of its row, then +U; sometimes +U alone, as upserts come), an add of
    one it does not is +I, a retraction -D."""
    out = []
    for _ in range(n):
        user, category = rng.randrange(keys), rng.choice("AB" if rng.random() < 0.3 else "A")
        row = held.get((user, category))
        if row is not None and rng.random() < 0.3:
            out.append(("-D", user, category, row))
            del held[(user, category)]
            continue
        total = rng.randrange(100)
        if row is not None and rng.random() < 0.8:  # (else an upsert: +U alone)
            out.append(("-U", user, category, row))
        out.append(("+I" if row is None else "+U", user, category, total))
        held[(user, category)] = total
    return out


def test_keys_without_conflicts_are_computed_column_wise_as_the_loop_computes_them(monkeypatch):
    """Keys with one upsert key take the column-wise path (sink_materializer._one_identity),
    the others the loop over changes: over random changes in several calls, both together
    write what the loop alone writes, key by key, and keep the same rows."""
    import random

    loop_only = lambda plan, pk, same: pd.Series([False] * len(pk)).to_numpy()  # noqa: E731
    for seed in range(depth_runs := 12):
        rng, held = random.Random(seed), {}
        live = {"mixed": None, "loop": None}
        written = {"mixed": None, "loop": None}
        waiting_plan = {**PLAN, "strategy": "NOTHING"}
        for call in range(4):
            batch = changes(_random_changes(rng, 30, 80, held))
            outs = {}
            for path in ("mixed", "loop"):
                with monkeypatch.context() as patch:
                    if path == "loop":
                        patch.setattr(sm, "_one_identity", loop_only)
                    live[path], out = sm.deduplicate(PLAN, live[path], batch)
                    written[path], _, compacted = sm.compact(waiting_plan, written[path],
                                                             batch.assign(**{sm.TAG: call}), call + 1)
                outs[path] = (per_key(out), per_key(compacted))
            assert outs["mixed"] == outs["loop"], (seed, call)
            for state in (live, written):
                rows = {path: sorted(map(tuple, frame[COLUMNS].itertuples(index=False))) if frame is not None else []
                        for path, frame in state.items()}
                assert rows["mixed"] == rows["loop"]
    assert depth_runs
