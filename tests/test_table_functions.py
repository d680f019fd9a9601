"""Python table functions as PyFlink writes them (@udtf), called by LATERAL TABLE: their
columns and types at plan time, the forms refused, and their rows over bounded and
streamed input on data generated here, expected rows computed in Python. The module is
written for PyFlink (`from pyflink.table.udf import udtf`) and loads without PyFlink
(streamsql.pyflink); its queries were run on Flink 2.3 with the same module too."""

from __future__ import annotations

import random
import sys

import pytest

from streamsql.errors import ValidationError
from streamsql.spark.dialect import to_spark_sql
from tests.conftest import write
from tests.operator_plans import steps

MODULE = '''
from pyflink.common import Row
from pyflink.table import DataTypes
from pyflink.table.udf import ScalarFunction, TableFunction, udaf, udf, udtf


@udtf(result_types=[DataTypes.STRING(), DataTypes.INT()])
def split_words(s):
    if s is None:
        return
    for w in s.split(" "):
        if w:
            yield w, len(w)


class Repeat(TableFunction):
    def open(self, function_context):
        self.times = int(function_context.get_job_parameter("times", "2"))

    def eval(self, n):
        for i in range(n * self.times):
            yield Row(i)


repeat_n = udtf(Repeat(), result_types=DataTypes.BIGINT())


@udtf(result_types=DataTypes.ROW([DataTypes.FIELD("a", DataTypes.STRING()), DataTypes.FIELD("b", DataTypes.STRING())]))
def head(s):
    if s:
        yield s[0], s[1:]


@udtf(result_types="ROW<letter STRING, tail STRING>")
def head_named(s):
    if s:
        yield s[0], s[1:]


@udtf(result_types=[DataTypes.INT(), DataTypes.INT()])
def broken(n):
    yield n  # one value for two columns


@udf(result_type=DataTypes.STRING())
def shout(s):
    return None if s is None else s.upper() + "!"


class Plus(ScalarFunction):
    def eval(self, a, b):
        return a + b


plus_n = udf(Plus(), result_type="BIGINT")


@udaf(result_type=DataTypes.BIGINT(), func_type="pandas")
def total(v):
    return v.sum()
'''

FUNCTIONS = "".join(f"CREATE TEMPORARY FUNCTION {name} AS 'flink_style_udfs.{name}' LANGUAGE PYTHON;"
                    for name in ("split_words", "repeat_n", "head", "head_named", "broken", "shout", "plus_n"))
TABLE = ("CREATE TEMPORARY TABLE t (id INT, s STRING) WITH ('connector' = 'filesystem', 'path' = 'bid.csv',"
         " 'format' = 'csv');")


@pytest.fixture
def module(python_module):
    python_module("flink_style_udfs", MODULE)


def _plan(sql: str):
    return steps(TABLE + FUNCTIONS + sql)[-1].plan


def _columns(plan):
    return [(c.name, c.type.sql("flink")) for c in plan.columns]


def test_the_pyflink_module_loads_without_pyflink(module):
    import importlib.util

    assert importlib.util.find_spec("pyflink") is None or "pyflink" in sys.modules
    plan = _plan("SELECT id, word, length FROM t, LATERAL TABLE(split_words(s)) AS T(word, length)")
    assert _columns(plan) == [("id", "INT"), ("word", "STRING"), ("length", "INT")]


@pytest.mark.parametrize("query, columns", [
    ("SELECT * FROM t, LATERAL TABLE(split_words(s))", [("id", "INT"), ("s", "STRING"), ("f0", "STRING"),
                                                        ("f1", "INT")]),
    ("SELECT id, f0 FROM t JOIN LATERAL TABLE(repeat_n(id)) ON TRUE", [("id", "INT"), ("f0", "BIGINT")]),
    # PyFlink keeps a DataTypes.ROW's types, not its names; a ROW written as text keeps both
    ("SELECT f0, f1 FROM t, LATERAL TABLE(head(s))", [("f0", "STRING"), ("f1", "STRING")]),
    ("SELECT letter, tail FROM t LEFT JOIN LATERAL TABLE(head_named(s)) ON TRUE", [("letter", "STRING"),
                                                                                  ("tail", "STRING")]),
    ("SELECT h.x, shout(h.y), plus_n(id, 1) AS p FROM t, LATERAL TABLE(head_named(s)) AS h(x, y)",
     [("x", "STRING"), ("EXPR$1", "STRING"), ("p", "BIGINT")]),
])
def test_columns_and_types_are_the_function_s(module, query, columns):
    assert _columns(_plan(query)) == columns


def test_spark_calls_the_function_by_its_registered_name(module):
    sql = to_spark_sql(_plan("SELECT w FROM t LEFT JOIN LATERAL TABLE(split_words(s)) AS T(w, n) ON TRUE").query)
    assert "LATERAL VIEW OUTER" in sql and "streamsql_udf_split_words(" in sql.lower()


@pytest.mark.parametrize("query, message", [
    ("SELECT * FROM t, LATERAL TABLE(shout(s))", "Function shout is a scalar function: LATERAL TABLE calls a table"
                                                 " function"),
    ("SELECT split_words(s) FROM t", "Function split_words is a table function: call it in FROM as"
                                     " LATERAL TABLE(split_words(...))"),
    ("SELECT * FROM t, LATERAL TABLE(split(s, ' '))", "Function 'split' cannot be used as a table function"),
    ("SELECT * FROM t, LATERAL TABLE(split_words(s)) AS T(w)", "List of column aliases must have same degree as"
                                                               " table; table has 2 columns"),
    ("SELECT * FROM t LEFT JOIN LATERAL TABLE(split_words(s)) AS T(w, n) ON T.n > 1", "a LEFT JOIN .. ON TRUE"),
    ("SELECT * FROM t, LATERAL TABLE(nothing(s))", "LATERAL TABLE(nothing(...)): no table function named 'nothing'"),
    ("SELECT * FROM t, LATERAL TABLE(split_words(s, id))", "Function split_words cannot take 2 arguments: its Python"
                                                           " function is split_words(s)"),
    ("SELECT plus_n(id) FROM t", "Function plus_n cannot take 1 argument: its Python function is eval(a, b)"),
])
def test_refused_at_plan_time(module, query, message):
    with pytest.raises(ValidationError) as caught:
        _plan(query)
    assert message in caught.value.message


def test_pyflink_data_types_are_flink_s_sql_types():
    from streamsql.plan.udf_types import type_sql
    from streamsql.pyflink.table import DataTypes as D

    assert [type_sql(t) for t in (D.STRING(), D.VARCHAR(5), D.DECIMAL(10, 2), D.TIMESTAMP(3), D.ARRAY(D.INT()),
                                  D.MAP(D.STRING(), D.DOUBLE()), D.ROW([D.FIELD("a", D.BIGINT())]))] == [
        "STRING", "VARCHAR(5)", "DECIMAL(10, 2)", "TIMESTAMP(3)", "ARRAY<INT>", "MAP<STRING, DOUBLE>",
        "ROW<`a` BIGINT>"]


# -- run on Spark ---------------------------------------------------------------------


def _data(seed: int = 7) -> list[tuple[int, str | None]]:
    rng = random.Random(seed)
    words = ["ab", "c", "defg", "hi", "jkl"]
    return [(i, None if rng.random() < 0.15 else " ".join(rng.choice(words) for _ in range(rng.randrange(0, 4))))
            for i in range(1, 41)]


def _table(tmp_path, rows, files: int = 1) -> str:
    """The rows in ``files`` CSV files, read one file a micro-batch when streamed."""
    for f in range(files):
        text = "".join(f"{i},{'' if s is None else s}\n" for i, s in rows[f::files])
        write(tmp_path / "in" / f"part-{f}.csv", text)
    return (f"CREATE TEMPORARY TABLE t (id INT, s STRING) WITH ('connector' = 'filesystem',"
            f" 'path' = '{tmp_path / 'in'}', 'format' = 'csv', 'source.max-files-per-batch' = '1');" + FUNCTIONS)


def _words(s):
    return [w for w in (s or "").split(" ") if w]


@pytest.mark.spark
def test_rows_bounded(run, tmp_path, module):
    rows = _data()
    ddl = _table(tmp_path, rows)
    s_of = {i: (s or None) for i, s in rows}  # an empty CSV field reads as NULL
    got = run.rows(ddl + "SELECT id, word, length FROM t, LATERAL TABLE(split_words(s)) AS T(word, length)")
    assert sorted(got) == sorted([str(i), w, str(len(w))] for i, s in s_of.items() for w in _words(s))
    got = run.rows(ddl + "SELECT id, word FROM t LEFT JOIN LATERAL TABLE(split_words(s)) AS T(word, n) ON TRUE")
    assert sorted(got) == sorted([[str(i), w] for i, s in s_of.items() for w in _words(s)]
                                 + [[str(i), ""] for i, s in s_of.items() if not _words(s)])
    got = run.rows(ddl + "SELECT id, COUNT(*) FROM t JOIN LATERAL TABLE(repeat_n(id)) ON TRUE WHERE id <= 5"
                         " GROUP BY id")
    assert sorted(got) == sorted([str(i), str(2 * i)] for i in range(1, 6))  # open() ran: twice each
    got = run.rows(ddl + "SELECT id, letter, shout(tail), plus_n(id, 100) FROM t, LATERAL TABLE(head_named(s))")
    assert sorted(got) == sorted([str(i), s[0], s[1:].upper() + "!", str(i + 100)] for i, s in s_of.items() if s)


@pytest.mark.spark
def test_streamed_equals_bounded(run, tmp_path, module):
    from tests.streamed import streamed_and_batch

    ddl = _table(tmp_path, _data(11), files=3)
    run.output(ddl)
    final, ops, expected = streamed_and_batch(run, "SELECT id, word, length FROM t, LATERAL TABLE(split_words(s))"
                                                   " AS T(word, length)")
    assert final == expected and len(expected) > 20 and set(ops) == {"+I"}
    final, ops, expected = streamed_and_batch(run, "SELECT word, COUNT(*) AS n, SUM(length) AS total FROM t"
                                                   " LEFT JOIN LATERAL TABLE(split_words(s)) AS T(word, length)"
                                                   " ON TRUE GROUP BY word")
    assert final == expected and "-U" in ops


@pytest.mark.spark
def test_a_failing_table_function_is_one_message_naming_it(run, tmp_path, module):
    from streamsql.errors import ExecutionError

    with pytest.raises(ExecutionError) as caught:
        run.rows(_table(tmp_path, [(1, "x")]) + "SELECT * FROM t, LATERAL TABLE(broken(id))")
    assert caught.value.message.startswith("Python function 'broken' raised TypeError: a row of 2 values expected,"
                                           " got 1 (arguments: 1)"), caught.value.message
