"""Flink's built-in functions without Spark: the coverage list, the generated Spark SQL of
the translated ones, and plan-time errors for the unsupported ones."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.builtins import RESULT_TYPES
from streamsql.dialect.script import parse_script
from streamsql.errors import Position, ValidationError
from streamsql.plan.builtins import STATUSES, coverage
from streamsql.plan.planner import Planner
from streamsql.spark.dialect import to_spark_sql
from streamsql.spark.functions import TEMPLATES
from tests.statements import last_step

DDL = ("CREATE TEMPORARY TABLE t (i INT, b BIGINT, d DOUBLE, m DECIMAL(10, 3), s STRING, ts TIMESTAMP(3), dt DATE,"
       " arr ARRAY<INT>, mp MAP<STRING, INT>, r ROW<f INT>) WITH ('connector' = 'filesystem', 'path' = 't.csv', 'format' = 'csv');\n")


@pytest.fixture(autouse=True)
def source_file(tmp_path, monkeypatch):
    (tmp_path / "t.csv").write_text("")
    monkeypatch.chdir(tmp_path)


def plan(select: str):
    return last_step(DDL + select).plan


def spark_sql(expression: str) -> str:
    """The Spark SQL of one Flink expression (its alias dropped)."""
    return to_spark_sql(plan(f"SELECT {expression} FROM t").query.selects[0].unalias())


BUILTINS = list(coverage().values())


def test_coverage_list_is_complete_and_consistent():
    tests = {node.name for path in Path(__file__).parent.glob("test_*functions*.py")
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}
    assert len(BUILTINS) >= 240 and {b.status for b in BUILTINS} == set(STATUSES)
    assert [b.name for b in BUILTINS if b.test and b.test not in tests] == []
    assert [b.name for b in BUILTINS if b.status != "supported" and not b.notes] == []
    assert sorted(set(RESULT_TYPES) - set(TEMPLATES)) == []
    counts = {status: sum(b.status == status for b in BUILTINS) for status in STATUSES}
    readme = (Path(__file__).parent.parent / "docs" / "reference" / "functions.md").read_text()
    assert (f"**{len(BUILTINS)} entries: {counts['supported']} supported, {counts['differs']} differ,"
            f" {counts['not supported']} not supported.**") in readme.replace("\n", " ")


@pytest.mark.parametrize("builtin", [b for b in BUILTINS if b.status != "not supported" and b.test], ids=lambda b: b.name)
def test_builtin_coverage(builtin):
    """Every supported built-in plans and translates to Spark SQL (its value is checked end to
    end in test_builtin_functions_spark for a sample)."""
    assert spark_sql(builtin.example)


@pytest.mark.parametrize("builtin", [b for b in BUILTINS if b.status == "not supported" and b.test], ids=lambda b: b.name)
def test_unsupported_builtins_fail_at_plan_time(builtin):
    with pytest.raises(ValidationError, match="is not supported: " + re.escape(builtin.notes)):
        plan(f"SELECT {builtin.example} FROM t")


def test_unsupported_builtin_is_named_with_its_position():
    with pytest.raises(ValidationError) as caught:
        plan("SELECT i,\n  CURRENT_WATERMARK(ts) FROM t")
    assert caught.value.message == "Built-in function CURRENT_WATERMARK is not supported: Spark does not expose the watermark to expressions"
    assert caught.value.position == Position(3, 3)  # the function's name


@pytest.mark.parametrize("join", [", LATERAL TABLE(split_words(s)) AS w(word)",
                                  " LEFT JOIN LATERAL TABLE(split_words(s)) AS w(word) ON TRUE"])
def test_an_unregistered_table_function_is_refused_naming_it_and_unnest(join):
    """LATERAL TABLE(f(..)) of no registered function: one message at TABLE, naming the call
    and UNNEST, not a missing function 'TABLE'."""
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT s, word\n  FROM t{join}")
    assert caught.value.message.startswith("LATERAL TABLE(split_words(...)): no table function named 'split_words'")
    assert "CROSS JOIN UNNEST(column)" in caught.value.message
    column = len("  FROM t") + join.index("TABLE") + 1
    assert caught.value.position == Position(3, column)


def test_unsupported_form_is_refused_at_plan_time():
    with pytest.raises(ValidationError, match="FLOOR\\(... TO WEEK\\) is not supported"):
        plan("SELECT FLOOR(ts TO WEEK) FROM t")
    with pytest.raises(ValidationError, match="ERROR ON EMPTY is not supported"):
        plan("SELECT JSON_VALUE(s, '$.a' ERROR ON EMPTY) FROM t")
    with pytest.raises(ValidationError, match="unit MILLENNIUM is not supported"):
        plan("SELECT TIMESTAMPDIFF(MILLENNIUM, ts, ts) FROM t")
    with pytest.raises(ValidationError, match=r"EXTRACT\(NANOSECOND FROM ...\) is not supported"):
        plan("SELECT EXTRACT(NANOSECOND FROM ts) FROM t")
    with pytest.raises(ValidationError, match=r"pattern letter\(s\) Y, w \(week-based"):
        plan("SELECT DATE_FORMAT(ts, 'YYYY-ww ''u''') FROM t")
    with pytest.raises(ValidationError, match=r"TO_TIMESTAMP: pattern letter\(s\) u"):
        plan("SELECT TO_TIMESTAMP(s, 'yyyy-MM-dd u') FROM t")
    with pytest.raises(ValidationError, match=r"JSON_QUERY: RETURNING ARRAY<STRING> is not supported"):
        plan("SELECT JSON_QUERY(s, '$.a' RETURNING ARRAY<STRING>) FROM t")
    with pytest.raises(ValidationError, match=r"JSON_EXISTS: TRUE ON ERROR is not supported"):
        plan("SELECT JSON_EXISTS(s, 'strict $.a' TRUE ON ERROR) FROM t")
    with pytest.raises(ValidationError, match="precision must be the literal 0"):
        plan("SELECT TO_TIMESTAMP_LTZ(b, 6) FROM t")


@pytest.mark.parametrize("flink, spark", [
    ("TIMESTAMPDIFF(SECOND, ts, ts)", "CAST(TIMESTAMPDIFF(SECOND, `t`.`ts`, `t`.`ts`) AS INT)"),
    ("TIMESTAMPADD(DAY, 1, dt)", "CAST(TIMESTAMPADD(DAY, 1, `t`.`dt`) AS DATE)"),
    ("TIMESTAMPADD(HOUR, 1, dt)", "TIMESTAMPADD(HOUR, 1, `t`.`dt`)"),
    ("TO_TIMESTAMP(s, 'dd/MM/yyyy')", "TRY_TO_TIMESTAMP(`t`.`s`, 'dd/MM/yyyy')"),
    ("UNIX_TIMESTAMP(s)", "CASE WHEN `t`.`s` IS NULL THEN NULL ELSE COALESCE(UNIX_SECONDS(TRY_TO_TIMESTAMP(`t`.`s`)), -9223372036854775808) END"),
    ("FROM_UNIXTIME(b)", "FROM_UNIXTIME(`t`.`b`, 'yyyy-MM-dd HH:mm:ss')"),
    ("GREATEST(i, 2)", "CASE WHEN `t`.`i` IS NULL OR 2 IS NULL THEN NULL ELSE GREATEST(`t`.`i`, 2) END"),
    ("LPAD(s, i, 'x')", "CASE WHEN `t`.`i` < 0 OR 'x' = '' THEN NULL ELSE LPAD(`t`.`s`, `t`.`i`, 'x') END"),
    ("CONCAT_WS('~', s, 'x')", "CONCAT_WS('~', `t`.`s`, 'x')"),
    ("arr[1]", "TRY_ELEMENT_AT(`t`.`arr`, 1)"),
    ("EXTRACT(SECOND FROM ts)", "CAST(SECOND(`t`.`ts`) AS BIGINT)"),
    ("FLOOR(ts TO HOUR)", "DATE_TRUNC('HOUR', `t`.`ts`)"),
    ("FLOOR(dt TO MONTH)", "CAST(DATE_TRUNC('MONTH', `t`.`dt`) AS DATE)"),
    ("CEIL(d)", "CAST(CEIL(`t`.`d`) AS DOUBLE)"),
    ("FIRST_VALUE(s)", "FIRST_VALUE(`t`.`s`, TRUE)"),
    ("LISTAGG(s)", "IF(COUNT(`t`.`s`) = 0, NULL, ARRAY_JOIN(COLLECT_LIST(`t`.`s`), ','))"),
    ("TYPEOF(m)", "'DECIMAL(10, 3)'"),
    ("SHA512(s)", "SHA2(`t`.`s`, 512)"),
    ("JSON_ARRAY()", "'[]'"),
    ("JSON_OBJECT()", "'{}'"),
    ("SUBSTRING(s FROM 2 FOR 3)", "SUBSTRING(`t`.`s`, 2, 3)"),  # as Spark's: no case to add
    ("SUBSTRING(s FROM i)", "CASE WHEN `t`.`i` < -LENGTH(`t`.`s`) THEN SUBSTRING(`t`.`s`, 1, 0) ELSE SUBSTRING(`t`.`s`, `t`.`i`) END"),
    ("SUBSTR(s, 1, i)", "CASE WHEN `t`.`i` < 0 THEN NULL ELSE SUBSTRING(`t`.`s`, 1, `t`.`i`) END"),
])
def test_generated_spark_sql(flink, spark):
    assert spark_sql(flink) == spark


def test_result_types_follow_flink():
    columns = plan("SELECT TIMESTAMPDIFF(DAY, ts, ts) AS a, TIMESTAMPADD(HOUR, 1, dt) AS b, TIMESTAMPADD(DAY, 1, dt) AS c,"
                   " TO_TIMESTAMP(s) AS d, JSON_VALUE(s, '$.x' RETURNING DOUBLE) AS e, EXTRACT(DAY FROM ts) AS f,"
                   " FLOOR(ts TO DAY) AS g, ELEMENT(arr) AS h FROM t").columns + plan("SELECT LISTAGG(s) AS k FROM t").columns
    assert [c.type.sql(dialect="flink") if False else c.type.this.name for c in columns] == [
        "INT", "TIMESTAMP", "DATE", "TIMESTAMP", "DOUBLE", "BIGINT", "TIMESTAMP", "INT", "TEXT"]


def test_functions_are_written_back_as_flink_sql():
    """A view keeps its Flink SQL: the clauses of JSON_VALUE and the unit of TIMESTAMPDIFF survive."""
    from streamsql.dialect.flink import Flink
    from sqlglot import parse_one

    for sql in ["SELECT JSON_VALUE(s, '$.a' RETURNING INT DEFAULT 0 ON EMPTY NULL ON ERROR) FROM t",
                "SELECT JSON_QUERY(s, '$.a' WITH CONDITIONAL ARRAY WRAPPER EMPTY ARRAY ON ERROR) FROM t",
                "SELECT JSON_ARRAY(1, s NULL ON NULL), TIMESTAMPDIFF(SECOND, ts, ts), LOCALTIMESTAMP FROM t",
                "SELECT JSON_OBJECT(KEY s || 'x' VALUE i, KEY 'b' VALUE MAP['k', 1] ABSENT ON NULL) FROM t"]:
        assert parse_one(sql, read=Flink).sql(dialect=Flink) == sql


@pytest.mark.parametrize("expression, message", [
    ("UPPER(i)", "Cannot apply 'UPPER' to arguments of type 'UPPER(<INTEGER>)': the argument INTEGER is not CHARACTER"),
    ("ABS(s)", "Cannot apply 'ABS' to arguments of type 'ABS(<STRING>)': the argument STRING is not NUMERIC"),
    ("ABS('1')", "Cannot apply 'ABS' to arguments of type 'ABS(<CHAR(1)>)'"),
    ("YEAR(i)", "Cannot apply 'YEAR' to arguments of type 'YEAR(<INTEGER>)': the argument INTEGER is not DATETIME"),
    ("TIMESTAMPDIFF(DAY, i, ts)", "Cannot apply 'TIMESTAMPDIFF' to arguments of type 'TIMESTAMPDIFF(<INTEGER>, <TIMESTAMP(3)>)'"),
    ("LPAD(s, 'x', 'y')", "Cannot apply 'LPAD' to arguments of type 'LPAD(<STRING>, <CHAR(1)>, <CHAR(1)>)'"),
    ("IF(i, 1, 2)", "Cannot apply 'IF' to arguments of type 'IF(<INTEGER>, <INTEGER>, <INTEGER>)': the argument INTEGER is not BOOLEAN"),
    ("FLOOR(s TO DAY)", "Cannot apply 'FLOOR'"),
    ("CASE WHEN i > 0 THEN 1 ELSE 'a' END", "Illegal mixing of types in CASE: INTEGER, CHAR(1) have no common type"),
    ("COALESCE(i, s)", "Illegal mixing of types in COALESCE: INTEGER, STRING have no common type"),
    ("IF(i > 0, ts, 1)", "Illegal mixing of types in IF"),
    ("GREATEST(i, s)", "Illegal mixing of types in GREATEST"),
])
def test_argument_types_are_checked_as_flink_does(expression, message):
    with pytest.raises(ValidationError) as caught:
        plan(f"SELECT {expression} FROM t")
    assert caught.value.message.startswith(message)
    assert caught.value.position is not None and caught.value.position.line == 2


@pytest.mark.parametrize("expression", [
    "UPPER(CAST(i AS STRING))", "ABS(b) + ABS(m) + ABS(d)", "COALESCE(i, b, 0)", "COALESCE(s, 'x', NULL)",
    "CASE i WHEN 1 THEN 'a' ELSE s END", "IF(i > 0, i, NULL)", "YEAR(dt) + HOUR(ts)", "DATE_FORMAT(s, 'yyyy')",
    "TIMESTAMPDIFF(DAY, dt, ts)", "NULLIF(m, 0)", "GREATEST(i, b, 3)",
])
def test_argument_types_flink_accepts(expression):
    assert plan(f"SELECT {expression} FROM t").columns


def test_current_database_is_the_planned_one():
    planner = Planner(Catalog(None))
    steps = [planner.plan(s) for s in parse_script("CREATE DATABASE IF NOT EXISTS shop; USE shop;\n" + DDL + "SELECT CURRENT_DATABASE() FROM t")]
    assert to_spark_sql(steps[-1].plan.query.selects[0].unalias()) == "'shop'"


@pytest.mark.parametrize("sql, marked", [
    ("SELECT k, LISTAGG(v), FIRST_VALUE(v) FROM t GROUP BY k", ["`t`.`__streamsql_seq`"] * 2),
    ("SELECT x.k, LAST_VALUE(x.v) FROM t AS x GROUP BY x.k", ["`x`.`__streamsql_seq`"]),
    ("SELECT k, (SELECT LISTAGG(v) FROM t) FROM u", ["`t`.`__streamsql_seq`"]),
    ("WITH t AS (SELECT k, v FROM t) SELECT k, LISTAGG(v) FROM t GROUP BY k", [None]),  # a CTE has no read order
    ("SELECT a.k, LISTAGG(a.v) FROM t AS a JOIN t AS b ON a.k = b.k GROUP BY a.k", [None]),  # nor a join
    ("SELECT k, LAST_VALUE(v) OVER (PARTITION BY k ORDER BY ts) FROM t", [None]),  # an OVER orders itself
    ("SELECT k, LISTAGG(v) FROM u GROUP BY k", [None]),  # u: read without its order
])
def test_order_sensitive_aggregates_over_a_table_read_in_order_are_marked_with_its_order(sql, marked):
    from sqlglot import parse_one

    from streamsql.dialect.flink import Flink
    from streamsql.dialect.functions import FlinkAggCall
    from streamsql.spark.arrival_order import META, in_arrival_order

    query = in_arrival_order(parse_one(sql, read=Flink), lambda name: name == "t")
    assert [call.meta.get(META) for call in query.find_all(FlinkAggCall)] == marked


@pytest.mark.parametrize("sql, ordered", [
    ("SELECT k, LISTAGG(v) FROM t GROUP BY k", True),
    ("SELECT k, CARDINALITY(ARRAY_AGG(v)) FROM t GROUP BY k", True),
    ("SELECT k, (SELECT FIRST_VALUE(v) FROM t) FROM u", True),
    ("SELECT k, COUNT(v), MAX(v) FROM t GROUP BY k", False),
    ("SELECT k, UPPER(v) FROM t", False),
])
def test_a_stream_carries_its_read_order_only_for_an_order_sensitive_aggregate(sql, ordered):
    """A streamed source numbers its rows (a Python pass over them) only when the query calls
    LISTAGG, ARRAY_AGG, FIRST_VALUE or LAST_VALUE."""
    from sqlglot import parse_one

    from streamsql.dialect.flink import Flink
    from streamsql.spark.arrival_order import reads_in_order

    assert reads_in_order(parse_one(sql, read=Flink)) is ordered


@pytest.mark.parametrize("kind, parameters", [("TUMBLE", {"SIZE": 10_000}), ("HOP", {"SIZE": 10_000, "SLIDE": 5_000}),
                                              ("SESSION", {"GAP": 5_000}), ("CUMULATE", {"SIZE": 10_000, "STEP": 5_000})])
def test_a_streamed_window_keeps_its_inputs_read_order_when_asked(kind, parameters):
    from streamsql.plan.objects import Column
    from streamsql.plan.types import build_type
    from streamsql.plan.windows import WindowRelation
    from streamsql.spark.windows import SEQ_COLUMN, streaming_window_sql

    window = WindowRelation("w", kind, "t", [Column("v", build_type("INT")), Column("ts", build_type("TIMESTAMP(3)"))],
                            "ts", parameters)
    assert f"`{SEQ_COLUMN}`" in streaming_window_sql(window, "t", keep_order=True)
    assert SEQ_COLUMN not in streaming_window_sql(window, "t")


def test_a_row_column_star_is_its_fields_and_headers_follow_the_expansion():
    """``r.*`` is the ROW's fields, named as the fields (Flink expands it the same way); the
    headers of unnamed expressions stay with them after ``*`` and ``r.*`` are expanded."""
    planned = plan("SELECT i, r.*, UPPER(s), * FROM t")
    names = [c.name for c in planned.columns]
    assert names[:4] == ["i", "f", "EXPR$2", "i0"] and len(names) == 3 + 10  # t has 10 columns
    assert planned.labels[:3] == ["i", "f", "UPPER(s)"] and planned.labels[3:] == names[3:]
    assert [c.type.sql("flink") for c in planned.columns][:2] == ["INT", "INT"]
    assert "`t`.`r`.`f` AS `f`" in to_spark_sql(planned.query)


def test_group_id_is_zero_without_repeated_grouping_sets():
    """Flink 2.3 gives GROUP_ID() 0 for every row of sets that do not repeat (ROLLUP, CUBE,
    GROUPING SETS, a plain GROUP BY), checked with PyFlink; a repeated set is refused."""
    for group in ("GROUPING SETS ((s), (i), ())", "ROLLUP (s, i)", "s, i"):
        planned = plan(f"SELECT s, GROUP_ID() AS g FROM t GROUP BY {group}")
        assert planned.columns[1].type.sql("flink") == "BIGINT"
        assert "CAST(0 AS BIGINT) AS `g`" in to_spark_sql(planned.query)
    with pytest.raises(ValidationError, match="GROUP_ID\\(\\) is not supported with a grouping set written twice"):
        plan("SELECT s, GROUP_ID() FROM t GROUP BY GROUPING SETS ((s), (i), (s))")
    with pytest.raises(ValidationError, match="GROUP_ID\\(\\) is only allowed in an aggregate query"):
        plan("SELECT GROUP_ID() FROM t")


@pytest.mark.parametrize("select", ["SELECT ARRAY_AGG(i) IGNORE NULLS FILTER (WHERE i > 1) FROM t",
                                    "SELECT ARRAY_AGG(i IGNORE NULLS) FILTER (WHERE i > 1) FROM t",
                                    "SELECT ARRAY_AGG(i RESPECT NULLS) FILTER (WHERE i > 1) FROM t"])
def test_a_filter_on_an_aggregate_that_treats_nulls_is_refused_as_flink_does(select):
    """Flink 2.3: "FILTER must be applied to aggregate function" (before: a parse error at the
    FILTER's '(', or Spark's "Syntax error at or near 'IGNORE'" when the query ran)."""
    from streamsql.errors import StreamsqlError

    with pytest.raises(StreamsqlError, match="FILTER must be applied to aggregate function") as raised:
        plan(select + ";")
    assert raised.value.position is not None
    assert to_spark_sql(plan("SELECT ARRAY_AGG(i IGNORE NULLS) FROM t;").query.selects[0].unalias())
