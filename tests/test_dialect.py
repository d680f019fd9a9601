"""The Flink dialect: what parses, how it prints back, and how parse errors read."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from streamsql.dialect import Flink
from streamsql.dialect import functions as F
from streamsql.dialect.script import is_complete, parse_script
from streamsql.errors import Position, SqlSyntaxError

IDENTITY = [
    "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    "SELECT `dateTime`, DATE_FORMAT(`dateTime`, 'yyyy-MM-dd') FROM bid",
    "SELECT SPLIT_INDEX(url, '/', 3) FROM bid",
    "SELECT REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2) FROM bid",
    "SELECT 'it''s', 'a\\d' FROM t",
    "SELECT CAST(x AS TIMESTAMP(3)), CAST(y AS TIMESTAMP_LTZ(3)), CAST(z AS STRING) FROM t",
    "CREATE TEMPORARY VIEW v AS SELECT a FROM t",
    "DROP TABLE IF EXISTS t",
    "INSERT INTO t SELECT * FROM s",
    "SELECT Price FROM Bid",
]


@pytest.mark.parametrize("sql", IDENTITY)
def test_identity(sql):
    assert sqlglot.parse_one(sql, read=Flink).sql(dialect=Flink) == sql


def test_create_table_round_trip():
    sql = """CREATE TABLE t (
  a ROW<x INT, y STRING>,
  b ARRAY<INT>,
  c MAP<STRING, BIGINT>,
  d DECIMAL(10, 2),
  ts TIMESTAMP(3),
  lt TIMESTAMP_LTZ(3),
  e AS a + 1,
  p AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND,
  PRIMARY KEY (d) NOT ENFORCED
)
PARTITIONED BY (
  d
)
WITH (
  'connector' = 'filesystem',
  'path' = 'a''b'
)"""
    parsed = sqlglot.parse_one(sql, read=Flink)
    assert parsed.sql(dialect=Flink, pretty=True) == sql
    assert parsed.find(exp.WatermarkColumnConstraint).this.name == "ts"


def test_local_time_zone_spelling_is_ltz():
    parsed = sqlglot.parse_one("CAST(x AS TIMESTAMP(3) WITH LOCAL TIME ZONE)", read=Flink)
    assert parsed.to.this == exp.DType.TIMESTAMPLTZ


def test_flink_functions_parse_into_their_own_nodes():
    parsed = sqlglot.parse_one("SELECT REGEXP_EXTRACT(a, 'x'), SPLIT_INDEX(a, ',', 0), PROCTIME() FROM t", read=Flink)
    assert [type(s) for s in parsed.selects] == [F.RegexpExtractGroup, F.SplitIndex, F.Proctime]


def test_identifiers_are_case_sensitive():
    parsed = sqlglot.parse_one("SELECT Price FROM Bid", read=Flink)
    assert parsed.selects[0].name == "Price"


def test_split_ignores_semicolons_in_strings_comments_and_identifiers():
    script = """-- a comment; with a semicolon
CREATE TABLE t (a INT) WITH ('x' = ';'); /* ; */ SELECT 'a;b' AS `x;y` FROM t;

SELECT 1;"""
    statements = parse_script(script)
    assert [s.sql for s in statements] == [
        "CREATE TABLE t (a INT) WITH ('x' = ';')",
        "SELECT 'a;b' AS `x;y` FROM t",
        "SELECT 1",
    ]
    assert [s.position for s in statements] == [Position(2, 1), Position(2, 50), Position(4, 1)]


def test_parse_error_has_line_column_and_caret():
    script = "SELECT 1;\nSELECT a FROM t\nWHERE (a = 1;"
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script(script)
    error = caught.value
    assert error.position == Position(3, 13)  # where the ')' is missing: just after the last token
    assert error.render().splitlines() == [
        "SQL parse error: Expecting ) at the end of the statement (line 3, column 13)",
        "  WHERE (a = 1;",
        "              ^",
    ]


def test_unterminated_string_points_at_its_quote():
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script("SELECT 1;\nSELECT 'abc FROM t")
    assert caught.value.position == Position(2, 8)
    assert "unterminated" in caught.value.message


def test_error_in_second_statement_of_a_line():
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script("SELECT 1; SELEC 2")
    assert caught.value.position.line == 1
    assert caught.value.position.col >= 11


@pytest.mark.parametrize(
    "text, complete",
    [("SELECT 1;", True), ("SELECT ';'", False), ("SELECT 1 -- ;", False), ("SELECT 1; -- done", True), ("", False)],
)
def test_is_complete(text, complete):
    assert is_complete(text) is complete
