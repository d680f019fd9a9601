"""VALUES whose rows build a ROW column differently (a constructor in one, a CAST in another):
one row type, as in Flink, where Spark would name a constructor's fields col1, col2, ..."""

from __future__ import annotations

import pytest


@pytest.mark.spark
def test_rows_of_values_share_one_row_type(run):
    rows = run.rows("SELECT r.x, r.y, CARDINALITY(a) FROM (VALUES (ROW(7, 'y'), ARRAY[ROW(1, 'p')]),"
                    " (CAST(NULL AS ROW<x INT, y STRING>), CAST(NULL AS ARRAY<ROW<p INT, q STRING>>)),"
                    " (ROW(8, 'z'), ARRAY[ROW(2, 'q'), ROW(3, 'r')])) AS t(r, a)")
    assert rows == [["7", "y", "1"], ["", "", ""], ["8", "z", "2"]]


def test_the_spark_sql_casts_each_row_alike():
    from sqlglot import parse_one

    from streamsql.dialect.flink import Flink
    from streamsql.spark.dialect import to_spark_sql

    values = parse_one("SELECT * FROM (VALUES (ROW(7, 'y')), (CAST(NULL AS ROW<x INT, y STRING>))) AS t(r)", read=Flink)
    sql = to_spark_sql(values)
    assert sql == ("SELECT * FROM VALUES (CAST(NAMED_STRUCT('EXPR$0', 7, 'EXPR$1', 'y') AS STRUCT<`x`: INT, `y`: STRING>)),"
                   " (CAST(NULL AS STRUCT<`x`: INT, `y`: STRING>)) AS `t`(`r`)")
