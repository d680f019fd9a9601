"""UNNEST as Flink runs it (plan.unnest, spark.unnest): ordinality from 1, an ARRAY of
ROWs expanded into its fields, a MAP's key and value, LEFT JOIN .. ON TRUE keeping a row
whose collection is empty or NULL, aliases in any case resolved as written; batch and
streamed. Expected rows are Flink 2.3's output for the same queries."""

from __future__ import annotations

import pytest

from streamsql.errors import ValidationError
from streamsql.spark.dialect import to_spark_sql
from tests.conftest import write
from tests.operator_plans import steps

TABLE = ("CREATE TEMPORARY TABLE r (k INT, arr ARRAY<ROW<a INT, b STRING>>, m MAP<STRING, INT>, xs ARRAY<INT>,"
         " ms MULTISET<STRING>) WITH ('connector' = 'filesystem', 'path' = 'bid.csv', 'format' = 'csv');")


def _plan(sql: str):
    return steps(TABLE + sql)[-1].plan


def test_columns_are_typed_as_flink_types_them():
    plan = _plan("SELECT T.x, T.y, T.p FROM r CROSS JOIN UNNEST(r.arr) WITH ORDINALITY AS T(x, y, p);")
    assert [(c.name, c.type.sql()) for c in plan.columns] == [("x", "INT"), ("y", "TEXT"), ("p", "INT")]
    plan = _plan("SELECT T.x, T.y FROM r CROSS JOIN UNNEST(r.m) AS T(x, y);")
    assert [c.type.sql() for c in plan.columns] == ["TEXT", "INT"]
    plan = _plan("SELECT T.s, T.o FROM r CROSS JOIN UNNEST(r.ms) WITH ORDINALITY AS T(s, o);")
    assert [c.type.sql() for c in plan.columns] == ["TEXT", "INT"]


def test_spark_sql_numbers_from_one_and_keeps_the_alias_as_written():
    sql = to_spark_sql(_plan("SELECT W.word, W.pos FROM r CROSS JOIN UNNEST(r.xs) WITH ORDINALITY AS W(word, pos);"
                             ).query)
    assert "`__i` + 1" in sql and "POSEXPLODE" not in sql and "`W`" not in sql
    sql = to_spark_sql(_plan("SELECT T.x FROM r LEFT JOIN UNNEST(r.xs) AS T(x) ON TRUE;").query)
    assert "LATERAL VIEW OUTER" in sql


@pytest.mark.parametrize("sql, message", [
    ("SELECT * FROM r CROSS JOIN UNNEST(r.xs);", "UNNEST needs the names of its columns"),
    ("SELECT * FROM r CROSS JOIN UNNEST(r.xs) AS t;", "UNNEST needs the names of its columns"),
    ("SELECT * FROM r CROSS JOIN UNNEST(r.xs, r.ms) AS t(a, b);", "UNNEST takes one ARRAY, MULTISET or MAP"),
    ("SELECT * FROM r CROSS JOIN UNNEST(r.k) AS t(a);", "Cannot apply 'UNNEST' to arguments of type"),
    ("SELECT * FROM r CROSS JOIN UNNEST(r.arr) AS t(a);", "List of column aliases must have same degree as table;"
                                                          " table has 2 columns ('a', 'b'), whereas alias list has 1"),
    ("SELECT * FROM r CROSS JOIN UNNEST(r.xs) AS t(a, b);", "table has 1 columns"),
    ("SELECT * FROM r LEFT JOIN UNNEST(r.xs) AS t(a) ON t.a > 1;", "a LEFT JOIN .. ON TRUE"),
    ("SELECT * FROM r RIGHT JOIN UNNEST(r.xs) AS t(a) ON TRUE;", "a LEFT JOIN .. ON TRUE"),
    ("SELECT * FROM r CROSS JOIN UNNEST(r.xs) AS t(a) JOIN r s ON s.k = t.a;", "a join after a join with UNNEST"),
    # Flink's names are case-sensitive: an alias resolves only as written
    ("SELECT w.a FROM r CROSS JOIN UNNEST(r.xs) AS W(a);", "could not be resolved"),
    ("SELECT W.A FROM r CROSS JOIN UNNEST(r.xs) AS W(a);", "Unknown column: A"),
])
def test_refused_at_plan_time(sql, message):
    with pytest.raises(ValidationError) as caught:
        _plan(sql)
    assert message in caught.value.message


FLINK = {  # query: Flink 2.3's rows (batch), in order
    "SELECT x, pos FROM (VALUES (1)) AS v(k) CROSS JOIN UNNEST(ARRAY['a','b','c']) WITH ORDINALITY AS t(x, pos)":
        [["a", "1"], ["b", "2"], ["c", "3"]],
    "SELECT * FROM (VALUES (1)) AS v(k) CROSS JOIN UNNEST(MAP['a', 1, 'b', 2]) AS t(k2, v)":
        [["1", "a", "1"], ["1", "b", "2"]],
    "SELECT * FROM (VALUES (1)) AS v(k) CROSS JOIN UNNEST(MAP['a', 1, 'b', 2]) WITH ORDINALITY AS t(k2, v, p)":
        [["1", "a", "1", "1"], ["1", "b", "2", "2"]],
    "SELECT * FROM (VALUES (1)) AS v(k) CROSS JOIN UNNEST(ARRAY[ROW(1, 'x'), ROW(2, 'y')]) AS t(a, b)":
        [["1", "1", "x"], ["1", "2", "y"]],
    "SELECT * FROM (VALUES (1)) AS v(k) CROSS JOIN UNNEST(ARRAY[ROW(1, 'x'), ROW(2, 'y')]) WITH ORDINALITY"
    " AS t(a, b, p)": [["1", "1", "x", "1"], ["1", "2", "y", "2"]],
    "SELECT * FROM (VALUES (1), (2)) AS v(k) LEFT JOIN UNNEST(CASE WHEN k = 1 THEN ARRAY[5] ELSE CAST(NULL AS"
    " ARRAY<INT>) END) WITH ORDINALITY AS t(x, p) ON TRUE": [["1", "5", "1"], ["2", "", ""]],
    "SELECT * FROM (VALUES (1), (2)) AS v(k) LEFT JOIN UNNEST(CASE WHEN k = 1 THEN MAP['a', 1] ELSE CAST(NULL AS"
    " MAP<STRING, INT>) END) AS t(x, y) ON TRUE": [["1", "a", "1"], ["2", "", ""]],
    "SELECT * FROM (VALUES (1), (2)) AS v(k) LEFT JOIN UNNEST(CASE WHEN k = 1 THEN CAST(ARRAY[ROW(1, 'x')] AS"
    " ARRAY<ROW<a INT, b STRING>>) END) WITH ORDINALITY AS t(x, y, p) ON TRUE": [["1", "1", "x", "1"],
                                                                                     ["2", "", "", ""]],
    "SELECT * FROM (VALUES (1)) AS v(k) JOIN UNNEST(ARRAY[3, 4]) AS t(x) ON t.x > 3": [["1", "4"]],
    "SELECT * FROM (VALUES (1)) AS v(k), UNNEST(ARRAY[3, 4]) AS t(x)": [["1", "3"], ["1", "4"]],
    "SELECT * FROM UNNEST(ARRAY[3, 4]) WITH ORDINALITY AS t(x, p)": [["3", "1"], ["4", "2"]],
    "SELECT * FROM (VALUES (1)) AS v(k) CROSS JOIN UNNEST(ARRAY[1, CAST(NULL AS INT), 3]) WITH ORDINALITY AS t(x, p)":
        [["1", "1", "1"], ["1", "", "2"], ["1", "3", "3"]],
    # aliases in upper and mixed case, of UNNEST, VALUES and derived tables
    "SELECT W.word, W.pos FROM (VALUES (ARRAY['x', 'y'])) AS V(arr) CROSS JOIN UNNEST(V.arr) WITH ORDINALITY"
    " AS W(word, pos)": [["x", "1"], ["y", "2"]],
    "SELECT W.Word, W.POS FROM (VALUES (ARRAY['x', 'y'])) AS V(Arr) CROSS JOIN UNNEST(V.Arr) WITH ORDINALITY"
    " AS W(Word, POS)": [["x", "1"], ["y", "2"]],
    "SELECT V.A, V.b FROM (VALUES (1, 2)) AS V(A, b)": [["1", "2"]],
    "SELECT D.X, d.x FROM (SELECT 1 AS X) AS D, (SELECT 2 AS x) AS d": [["1", "2"]],
    "SELECT w.x, W.x FROM (VALUES (ARRAY[1])) AS v(arr) CROSS JOIN UNNEST(v.arr) AS W(x) CROSS JOIN"
    " UNNEST(ARRAY[7]) AS w(x)": [["7", "1"]],
    "SELECT a.y FROM (VALUES (ARRAY[ARRAY[1, 2]])) AS v(arr) CROSS JOIN UNNEST(v.arr) AS A(x) CROSS JOIN"
    " UNNEST(A.x) WITH ORDINALITY AS a(y, p)": [["1"], ["2"]],
}


@pytest.mark.spark
def test_batch_rows_are_flink_s(run):
    for query, rows in FLINK.items():
        assert run.rows("SET 'execution.runtime-mode' = 'batch';" + query + ";") == rows, query


@pytest.mark.spark
def test_streamed_over_a_watched_directory(run, tmp_path):
    from tests.streamed import streamed_and_batch

    write(tmp_path / "in" / "a.json",
          '{"k":1,"xs":[3,4],"m":{"a":1},"rs":[{"a":1,"b":"p"},{"a":2,"b":"q"}]}\n'
          '{"k":2,"xs":[],"m":{},"rs":[]}\n{"k":3,"xs":null,"m":null,"rs":null}\n')
    run.output(f"CREATE TEMPORARY TABLE j (k INT, xs ARRAY<INT>, m MAP<STRING, INT>, rs ARRAY<ROW<a INT, b STRING>>)"
               f" WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'in'}', 'format' = 'json');")
    final, ops, expected = streamed_and_batch(run, "SELECT j.k, T.x, T.p, M.mk, M.mv FROM j LEFT JOIN UNNEST(j.xs)"
                                                   " WITH ORDINALITY AS T(x, p) ON TRUE LEFT JOIN UNNEST(j.m)"
                                                   " AS M(mk, mv) ON TRUE")
    assert final == expected == [("1", "3", "1", "a", "1"), ("1", "4", "2", "a", "1"), ("2", "", "", "", ""),
                                 ("3", "", "", "", "")]
    final, ops, expected = streamed_and_batch(run, "SELECT j.k, R.a, R.b, R.o FROM j CROSS JOIN UNNEST(j.rs)"
                                                   " WITH ORDINALITY AS R(a, b, o)")
    assert final == expected == [("1", "1", "p", "1"), ("1", "2", "q", "2")]
    final, ops, expected = streamed_and_batch(run, "SELECT T.p, COUNT(*) AS n, SUM(T.x) AS s FROM j CROSS JOIN"
                                                   " UNNEST(j.xs) WITH ORDINALITY AS T(x, p) GROUP BY T.p")
    assert final == expected == [("1", "1", "3"), ("2", "1", "4")]
