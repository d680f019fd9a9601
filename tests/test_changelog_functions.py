"""TO_CHANGELOG and FROM_CHANGELOG (Flink 2.3), without a JVM: parsing, Flink's checks with
their positions, the operator plan's changelog modes, and the stage each becomes over
unbounded input (spark.changelog_functions). Running them: test_changelog_functions_spark."""

from __future__ import annotations

import pytest

from streamsql.changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from streamsql.errors import SqlSyntaxError, ValidationError
from streamsql.plan.changelog_functions import ChangelogRelation, ProcessTableFunction
from streamsql.plan.logical import build_operator_plan
from streamsql.plan.operators import short_mode, walk
from streamsql.runtime.sources import is_bounded
from streamsql.spark.changelog_functions import relation_sql
from streamsql.spark.dialect import to_spark_sql
from streamsql.spark.stateful.chain import compile_query
from streamsql.spark.stateful.stages import AggregateStage, CalcStage, inserts_only
from tests.operator_plans import DDL, steps

MORE = DDL + """
CREATE TEMPORARY TABLE cdc (op STRING, id BIGINT, name STRING, amount BIGINT)
  WITH ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY TABLE events (kind STRING, id BIGINT, amount BIGINT)
  WITH ('connector' = 'filesystem', 'path' = 'clicks', 'format' = 'csv', 'source.monitor-interval' = '1 s');
CREATE TEMPORARY VIEW totals AS SELECT id, SUM(amount) AS total FROM events GROUP BY id;
"""


def plan(sql: str):
    return steps(sql, MORE)[-1].plan


def relation(sql: str) -> ChangelogRelation:
    found = [d for d in plan(sql).derived.values() if isinstance(d, ChangelogRelation)]
    assert len(found) == 1
    return found[0]


def function_node(sql: str) -> ProcessTableFunction:
    root = build_operator_plan(plan(sql), is_bounded)
    return next(n for n in walk(root) if isinstance(n, ProcessTableFunction))


def test_to_changelog_adds_the_op_column_first_and_emits_inserts():
    ours = relation("SELECT * FROM TO_CHANGELOG(input => TABLE totals);")
    assert [c.name for c in ours.columns] == ["op", "id", "total"]
    assert ours.mapping == {INSERT: "INSERT", UPDATE_BEFORE: "UPDATE_BEFORE", UPDATE_AFTER: "UPDATE_AFTER",
                            DELETE: "DELETE"}
    node = function_node("SELECT * FROM TO_CHANGELOG(input => TABLE totals);")
    assert short_mode(node.mode) == "I" and short_mode(node.inputs[0].mode) == "I,UB,UA"
    # positional, under TABLE(...), a DESCRIPTOR naming the column, codes for some kinds only
    ours = relation("SELECT * FROM TABLE(TO_CHANGELOG(TABLE totals, DESCRIPTOR(change),"
                    " MAP['INSERT, UPDATE_AFTER', 'upsert', 'DELETE', 'd'])) AS c;")
    assert ours.op_column == "change" and [c.name for c in ours.columns][0] == "change"
    assert ours.mapping == {INSERT: "upsert", UPDATE_AFTER: "upsert", DELETE: "d"}
    # a later entry for a kind wins, as a MAP literal's later key does; column aliases rename
    assert relation("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op_mapping => MAP['INSERT', 'i', 'INSERT',"
                    " 'j']);").mapping == {INSERT: "j"}
    renamed = plan("SELECT o, a FROM TO_CHANGELOG(input => TABLE totals) AS x(o, a, t);")
    assert [c.name for c in renamed.columns] == ["o", "a"]


def test_a_time_attribute_stays_one_through_either_function():
    """As in Flink 2.3: a window TVF over TO_CHANGELOG's rows (or FROM_CHANGELOG's)."""
    ours = relation("SELECT * FROM TO_CHANGELOG(input => TABLE bid);")
    assert [c.time_attribute for c in ours.columns] == [None] * 5 + ["rowtime"]
    windowed = plan("CREATE TEMPORARY VIEW c AS SELECT * FROM TO_CHANGELOG(input => TABLE bid);"
                    " SELECT window_start, op, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE c, DESCRIPTOR(ts),"
                    " INTERVAL '1' SECOND)) GROUP BY window_start, window_end, op;")
    assert [w.input_name for w in windowed.windows] == ["c"]


def test_from_changelog_reads_the_op_column_into_a_retract_changelog():
    ours = relation("SELECT * FROM FROM_CHANGELOG(input => TABLE cdc);")
    assert [c.name for c in ours.columns] == ["id", "name", "amount"]
    assert ours.mapping == {"INSERT": INSERT, "UPDATE_BEFORE": UPDATE_BEFORE, "UPDATE_AFTER": UPDATE_AFTER,
                            "DELETE": DELETE}
    node = function_node("SELECT name, SUM(amount) FROM FROM_CHANGELOG(input => TABLE cdc) GROUP BY name;")
    assert short_mode(node.mode) == "I,UB,UA,D"
    custom = relation("SELECT * FROM FROM_CHANGELOG(input => TABLE events, op => DESCRIPTOR(kind), op_mapping =>"
                      " MAP['c, r', 'INSERT', 'ub', 'UPDATE_BEFORE', 'ua', 'UPDATE_AFTER']);")
    assert custom.mapping == {"c": INSERT, "r": INSERT, "ub": UPDATE_BEFORE, "ua": UPDATE_AFTER}
    assert [c.name for c in custom.columns] == ["id", "amount"]
    assert short_mode(function_node("SELECT * FROM FROM_CHANGELOG(input => TABLE events, op => DESCRIPTOR(kind),"
                                    " op_mapping => MAP['c', 'INSERT', 'ub', 'UPDATE_BEFORE']);").mode) == "I,UB"


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM FROM_CHANGELOG(input => TABLE bid);", "The op column 'op' does not exist in the input schema"),
    ("SELECT * FROM FROM_CHANGELOG(input => TABLE cdc, op => DESCRIPTOR(id));",
     "The op column 'id' must be of STRING type, but was 'BIGINT'"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE cdc);", r"Found duplicates: \[op\]"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid PARTITION BY auction);",
     "Only tables with set semantics may be partitioned"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op_mapping => MAP['insert', 'i']);",
     "Unknown change operation: 'insert'"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op_mapping => MAP['INSERT, INSERT', 'i']);",
     "Duplicate change operation: 'INSERT'"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op_mapping => MAP['INSERT', 1]);",
     "must be a constant MAP literal of strings"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op => DESCRIPTOR(a, b));", "exactly one column name"),
    ("SELECT * FROM FROM_CHANGELOG(input => TABLE cdc, op_mapping => MAP['c', 'INSERT', 'd', 'DELETE']);",
     "must include UPDATE_BEFORE for retract mode"),
    ("SELECT * FROM FROM_CHANGELOG(input => TABLE cdc, op_mapping => MAP['c', 'INSERT', 'r', 'INSERT', 'b',"
     " 'UPDATE_BEFORE']);", "Duplicate change operation: 'INSERT'. Use comma-separated keys"),
    ("SELECT * FROM FROM_CHANGELOG(input => TABLE cdc, op_mapping => MAP['c, b', 'INSERT', 'b', 'UPDATE_BEFORE']);",
     "the op code 'b' is mapped twice"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE totals) AS x(a, b);", "the alias names 2 columns; the function has 3"),
])
def test_flink_s_checks_are_made_at_plan_time_with_a_position(sql, message):
    with pytest.raises(ValidationError, match=message) as raised:
        plan(sql)
    assert raised.value.position is not None


def test_from_changelog_reads_inserts_only():
    """Flink: "... doesn't support consuming update changes which is produced by node
    GroupAggregate" — bounded or not (a changelog is no changelog written as data)."""
    from streamsql.plan.changelog_checks import check_consumption

    root = build_operator_plan(plan("CREATE TEMPORARY VIEW v AS SELECT channel AS op, COUNT(*) AS n FROM bid GROUP BY"
                                    " channel; SELECT * FROM FROM_CHANGELOG(input => TABLE v);"), is_bounded)
    assert root.bounded
    with pytest.raises(ValidationError, match="doesn't support consuming update changes which is produced by node"
                                              " GroupAggregate"):
        check_consumption(root)


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM TO_CHANGELOG(bid);", "takes its input as `input => TABLE name`"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid, size => 1);", "TO_CHANGELOG has no parameter size"),
    ("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op => DESCRIPTOR(o), op => DESCRIPTOR(p));", "given twice"),
])
def test_malformed_calls_are_parse_errors(sql, message):
    with pytest.raises(SqlSyntaxError, match=message):
        plan(sql)


def test_over_unbounded_input_each_is_a_projection_stage_that_reads_or_writes_row_kinds():
    stage = compile_query(plan("SELECT * FROM TO_CHANGELOG(input => TABLE totals, op_mapping => MAP['INSERT', 'i',"
                               " 'UPDATE_AFTER', 'u']);"), is_bounded)
    (_, inner), = stage.inputs
    assert isinstance(inner, CalcStage) and inner.rowkinds == "insert" and inserts_only(stage)
    assert isinstance(inner.inputs[0][1], AggregateStage)
    sql = to_spark_sql(inner.query)
    assert sql.startswith("SELECT '+I' AS `__rowkind`, CASE `__in`.`__rowkind` WHEN '+I' THEN 'i' WHEN '+U' THEN 'u'"
                          " END AS `op`")
    assert sql.endswith("WHERE `__in`.`__rowkind` IN ('+I', '+U')")
    stage = compile_query(plan("SELECT name, SUM(amount) AS s FROM FROM_CHANGELOG(input => TABLE cdc) GROUP BY name;"),
                          is_bounded)
    (_, inner), = stage.inputs
    assert isinstance(stage, AggregateStage) and inner.rowkinds == "changes" and not inserts_only(inner)
    assert "CASE `__in`.`op` WHEN 'INSERT' THEN '+I' WHEN 'UPDATE_BEFORE' THEN '-U'" in to_spark_sql(inner.query)
    assert "RAISE_ERROR" in to_spark_sql(inner.query)
    # TO_CHANGELOG of a plain stream of inserts: Spark streams it itself
    assert compile_query(plan("SELECT * FROM TO_CHANGELOG(input => TABLE cdc);".replace("cdc", "bid")),
                         is_bounded) is None


def test_as_one_bounded_computation_from_changelog_counts_each_row_in_and_out():
    sql = relation_sql(relation("SELECT * FROM FROM_CHANGELOG(input => TABLE cdc);"))
    assert "SUM(CASE WHEN CASE `op` WHEN 'INSERT' THEN '+I'" in sql and "GROUP BY `id`, `name`, `amount`" in sql
    assert "explode(sequence(1, __n))" in sql and "WHERE __n > 0" in sql
    assert relation_sql(relation("SELECT * FROM TO_CHANGELOG(input => TABLE bid, op_mapping => MAP['DELETE', 'd']);")
                        ).endswith("WHERE FALSE")
