"""Flink's VARIANT without Spark: types, the generated Spark SQL, plan-time refusals, and
how a VARIANT value prints (pyspark's VariantVal is plain Python)."""

from __future__ import annotations

import re

import pytest
from pyspark.sql.types import VariantVal

from streamsql.errors import ConnectorError, ValidationError
from streamsql.plan.types import type_name
from streamsql.runtime.results import _json, format_value
from streamsql.spark.dialect import to_spark_sql
from tests.statements import last_step

DDL = ("CREATE TEMPORARY TABLE t (i INT, s STRING, v VARIANT, ts TIMESTAMP(3)) WITH ('connector' = 'filesystem',"
       " 'path' = 't.json', 'format' = 'json');\n")


@pytest.fixture(autouse=True)
def source_file(tmp_path, monkeypatch):
    (tmp_path / "t.json").write_text("")
    monkeypatch.chdir(tmp_path)


def plan(sql: str):
    return last_step(DDL + sql)


def select(expression: str):
    return plan(f"SELECT {expression} AS x FROM t").plan.query.selects[0]


def spark_sql(expression: str) -> str:
    """The Spark SQL of one expression over t, its columns unqualified."""
    return to_spark_sql(select(expression).unalias()).replace("`t`.", "")


@pytest.mark.parametrize("expression, expected", [
    ("PARSE_JSON(s)", "VARIANT"), ("TRY_PARSE_JSON(s, FALSE)", "VARIANT"), ("v['a']", "VARIANT"),
    ("v['a'][2]['b']", "VARIANT"), ("JSON_STRING(v)", "STRING"), ("v = PARSE_JSON(s)", "BOOLEAN"),
    ("JSON_VALUE(v, '$.a')", "STRING"), ("TYPEOF(v)", "STRING"), ("COALESCE(TRY_PARSE_JSON(s), v)", "VARIANT"),
])
def test_types(expression, expected):
    assert type_name(select(expression).type) == expected


@pytest.mark.parametrize("expression, expected", [
    ("PARSE_JSON(s)", "PARSE_JSON(`s`)"),
    ("TRY_PARSE_JSON(s)", "TRY_PARSE_JSON(`s`)"),
    ("v['a']", "VARIANT_GET(`v`, '$[\\'a\\']', 'variant')"),
    ("v['it''s']", "VARIANT_GET(`v`, '$[\"it\\'s\"]', 'variant')"),
    ("v[1]", "VARIANT_GET(`v`, '$[0]', 'variant')"),
    ("v[0]", "CAST(NULL AS VARIANT)"),
    ("v[i]", "CASE WHEN `i` >= 1 THEN VARIANT_GET(`v`, CONCAT('$[', CAST(`i` - 1 AS STRING), ']'), 'variant') END"),
    ("JSON_STRING(v)", "TO_JSON(`v`)"),
    ("v = v['a']", "(TO_JSON(`v`) = TO_JSON(VARIANT_GET(`v`, '$[\\'a\\']', 'variant')))"),
    ("v <> v", "(TO_JSON(`v`) <> TO_JSON(`v`))"),
    ("TYPEOF(v)", "'VARIANT'"),
])
def test_generated_spark_sql(expression, expected):
    assert spark_sql(expression) == expected


def test_a_key_from_a_column_is_quoted_by_what_it_holds():
    sql = spark_sql("v[s]")
    assert "INSTR(`s`, '''') = 0 THEN CONCAT('$[''', `s`, ''']')" in sql
    assert "INSTR(`s`, '\"') = 0 THEN CONCAT('$[\"', `s`, '\"]')" in sql


def test_json_functions_read_a_variant_as_its_text():
    assert "TRY_PARSE_JSON(TO_JSON(`v`))" in spark_sql("JSON_VALUE(v, '$.a')")
    assert "TO_JSON(`v`)" in spark_sql("JSON_EXISTS(v, '$.a')")


@pytest.mark.parametrize("sql, message", [
    ("SELECT CAST(v AS INT) FROM t", "Cast function cannot convert value of type VARIANT to type INTEGER"),
    ("SELECT CAST(s AS VARIANT) FROM t", "Cast function cannot convert value of type STRING to type VARIANT"),
    ("SELECT COUNT(*) FROM t GROUP BY v", "Type VARIANT is not an orderable data type: it is not supported in GROUP BY"),
    ("SELECT i FROM t ORDER BY v['a']", "not supported in ORDER BY"),
    ("SELECT DISTINCT v FROM t", "not supported in SELECT DISTINCT"),
    ("SELECT COUNT(DISTINCT v) FROM t", "not supported in DISTINCT"),
    ("SELECT MAX(v) FROM t", "not supported in MAX(...)"),
    ("SELECT v < v FROM t", "not supported in <"),
    ("SELECT ROW_NUMBER() OVER (PARTITION BY v ORDER BY ts) FROM t", "not supported in PARTITION BY"),
    ("SELECT v = 1 FROM t", "Cannot apply '=' to arguments of type '<VARIANT> = <INTEGER>'"),
    ("SELECT PARSE_JSON(i) FROM t", "Cannot apply 'PARSE_JSON' to arguments of type 'PARSE_JSON(<INTEGER>)'"),
    ("SELECT PARSE_JSON(s, TRUE) FROM t", "allowDuplicateKeys = TRUE is not supported"),
    ("SELECT TRY_PARSE_JSON(s, i > 0) FROM t", "allowDuplicateKeys must be the literal TRUE or FALSE"),
    ("SELECT v['a\"b''c'] FROM t", "a VARIANT key holding both ' and \" is not supported"),
])
def test_refused_at_plan_time_with_the_position(sql, message):
    with pytest.raises(ValidationError, match=re.escape(message)) as caught:
        plan(sql)
    assert caught.value.position is not None


@pytest.mark.parametrize("options", ["'connector' = 'filesystem', 'path' = 'o', 'format' = 'csv'",
                                     "'connector' = 'delta', 'table-path' = 'o'",
                                     "'connector' = 'kafka', 'topic' = 'x', 'properties.bootstrap.servers' = 'h:1',"
                                     " 'format' = 'json'"])
def test_a_table_whose_format_cannot_hold_a_variant_is_refused(options):
    with pytest.raises(ConnectorError, match="column 'v' is a VARIANT, which connector"):
        plan(f"CREATE TEMPORARY TABLE o (i INT, v VARIANT) WITH ({options})")


@pytest.mark.parametrize("options", ["'connector' = 'filesystem', 'path' = 'o', 'format' = 'parquet'",
                                     "'connector' = 'print'", "'connector' = 'blackhole'"])
def test_json_parquet_print_and_blackhole_hold_a_variant(options):
    plan(f"CREATE TEMPORARY TABLE o (i INT, v VARIANT) WITH ({options})")


def test_a_variant_prints_as_json_string_writes_it():
    value = VariantVal.parseJson('{"z": [1, 2.50, "é\\n", null, true], "a": {"b": 1e3}}')
    assert format_value(value) == '{"a":{"b":1000.0},"z":[1,2.5,"é\\n",null,true]}'
    assert format_value(VariantVal.parseJson("null")) == "null"
    assert _json(value) == {"a": {"b": 1000.0}, "z": [1, 2.5, "é\n", None, True]}  # JSON lines: nested, not text
