"""Flink's functions and types, checked on Spark against hand-computed results."""

from __future__ import annotations

import re

import pytest

from tests.conftest import write

pytestmark = pytest.mark.spark

DATA = (
    "1,https://www.nexmark.com/a/b/c/item.htm?query=1&channel_id=77,7,2026-01-01 08:30:00.123,Apple\n"
    "2,https://www.nexmark.com/x/item.htm?query=1,-7,2026-01-01 19:05:00,google\n"
    "3,,5,2026-01-02 23:59:59.999,Other\n"
)


@pytest.fixture
def table(tmp_path):
    path = write(tmp_path / "t.csv", DATA)
    return (f"CREATE TEMPORARY TABLE t (id BIGINT, url STRING, n BIGINT, ts TIMESTAMP(3), channel STRING) "
            f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');\n")


def by_id(run, table, expressions: str) -> list[list[str]]:
    return sorted(run.rows(table + f"SELECT id, {expressions} FROM t"))


def test_regexp_extract_is_null_without_a_match(run, table):
    rows = by_id(run, table, "REGEXP_EXTRACT(url, '(&|^|\\?)channel_id=([^&]*)', 2), REGEXP_EXTRACT(url, 'query=\\d')")
    assert rows == [["1", "77", "query=1"], ["2", "", "query=1"], ["3", "", ""]]
    nulls = run.rows(table + "SELECT COUNT(*) FROM t WHERE REGEXP_EXTRACT(url, 'channel_id=([^&]*)', 1) IS NULL")
    assert nulls == [["2"]]


def test_split_index(run, table):
    rows = by_id(run, table, "SPLIT_INDEX(url, '/', 3), SPLIT_INDEX(url, '/', 9), SPLIT_INDEX('a.b.c', '.', 1)")
    assert rows == [["1", "a", "", "b"], ["2", "x", "", "b"], ["3", "", "", "b"]]


def test_date_format_hour_and_case(run, table):
    rows = by_id(run, table, "DATE_FORMAT(ts, 'yyyy-MM-dd'), DATE_FORMAT(ts, 'HH:mm'), HOUR(ts), "
                             "CASE WHEN HOUR(ts) >= 8 AND HOUR(ts) <= 18 THEN 'day' ELSE 'night' END")
    assert rows == [["1", "2026-01-01", "08:30", "8", "day"], ["2", "2026-01-01", "19:05", "19", "night"],
                    ["3", "2026-01-02", "23:59", "23", "night"]]


def test_integer_arithmetic_follows_flink(run, table):
    # MOD keeps the dividend's sign; integer division truncates; 0.908 * BIGINT is an exact DECIMAL.
    rows = by_id(run, table, "MOD(n, 3), n / 2, 0.908 * n, LOWER(channel)")
    assert rows == [["1", "1", "3", "6.356", "apple"], ["2", "-1", "-3", "-6.356", "google"], ["3", "2", "2", "4.540", "other"]]


def test_avg_of_bigint_is_bigint(run, table):
    assert run.rows(table + "SELECT AVG(n), SUM(n), COUNT(*) FROM t") == [["1", "5", "3"]]


def test_sum_of_an_int_wraps_and_float_results_are_floats_in_batch_and_streaming(run, tmp_path):
    """As Flink 2.3 prints them: an INT's SUM wraps past 2^31 (its AVG does not); a FLOAT's
    SUM, AVG, STDDEV and VAR are FLOATs, and so is a FLOAT with an integer, in both modes."""
    write(tmp_path / "n.csv", "2000000000,0.1,1\n2000000000,0.2,1\n7,0.3,1\n5,0.7,2\n")
    ddl = (f"CREATE TEMPORARY TABLE n (i INT, x FLOAT, k INT) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'n.csv'}', 'format' = 'csv');")
    # (not AVG(i) beside a STDDEV: Flink then rewrites the AVG as SUM / COUNT, and its INT SUM wraps)
    queries = {"SELECT k, SUM(i), AVG(i), SUM(x), AVG(x), SUM(x) + 1, MAX(x) * 2 FROM n GROUP BY k":
               [["1", "-294967289", "1333333335", "0.6", "0.2", "1.6", "0.6"], ["2", "5", "5", "0.7", "0.7", "1.7", "1.4"]],
               "SELECT k, STDDEV_POP(x), VAR_SAMP(x) FROM n GROUP BY k": [["1", "0.08164966", "0.010000001"],
                                                                             ["2", "0.0", ""]]}
    for query, expected in queries.items():
        assert sorted(run.rows(ddl + "RESET 'execution.bounded-input';" + query)) == expected
        streamed = run.rows(ddl + "SET 'execution.bounded-input' = 'stream';" + query)
        assert sorted(row[1:] for row in streamed if row[0] == "+I") == expected
    assert sorted(run.rows(ddl + "RESET 'execution.bounded-input'; SELECT x + 1, x / 3 FROM n")) == [["1.1", "0.033333335"], ["1.2", "0.06666667"],
                                                                  ["1.3", "0.1"], ["1.7", "0.23333333"]]


def test_avg_of_a_decimal_is_rounded_once_to_flink_s_scale(run, tmp_path):
    """DECIMAL(38, max(6, s)), half up: 5/3 is 1.666667 (Spark's own AVG: 1.6667), also with
    FILTER, DISTINCT and OVER; a group of NULLs averages to NULL."""
    write(tmp_path / "m.csv", "a,1,1.00000005\na,2,\na,2,2.00000001\nb,,\n")
    ddl = (f"CREATE TEMPORARY TABLE m (k STRING, d DECIMAL(10, 0), e DECIMAL(20, 8)) WITH ('connector' ="
           f" 'filesystem', 'path' = '{tmp_path / 'm.csv'}', 'format' = 'csv');")
    rows = run.rows(ddl + "SELECT k, AVG(d), AVG(e), AVG(d) FILTER (WHERE e IS NOT NULL), AVG(DISTINCT d) FROM m"
                    " GROUP BY k ORDER BY k")
    assert rows == [["a", "1.666667", "1.50000003", "1.500000", "1.500000"], ["b", "", "", "", ""]]
    over = run.rows(ddl + "SELECT d, AVG(d) OVER (PARTITION BY k ORDER BY d ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)"
                    " FROM m WHERE k = 'a'")
    assert sorted(over) == [["1", "1.000000"], ["2", "1.500000"], ["2", "2.000000"]]


def test_avg_of_decimal_arithmetic_is_flinks(run, tmp_path):
    """AVG of DECIMAL arithmetic, as Flink 2.3 prints it: DECIMAL(38, max(6, s)) of the
    arithmetic's own type (a * b is DECIMAL(16, 3), a / b DECIMAL(17, 8)), rounded once."""
    write(tmp_path / "d.csv", "12.34,5.6\n1.00,3.0\n")
    ddl = (f"CREATE TEMPORARY TABLE d (a DECIMAL(10, 2), b DECIMAL(5, 1)) WITH ('connector' = 'filesystem',"
           f" 'path' = '{tmp_path / 'd.csv'}', 'format' = 'csv');")
    assert run.rows(ddl + "SELECT AVG(a * b), AVG(a / b), SUM(a * b), AVG(a + 0.5) FROM d") == [
        ["36.052000", "1.26845238", "72.104", "7.170000"]]


def test_cast_and_timestamp_output(run, table):
    rows = by_id(run, table, "CAST(n AS STRING), CAST(ts AS STRING), CAST('2026-03-04 05:06:07' AS TIMESTAMP(3))")
    assert rows[0] == ["1", "7", "2026-01-01 08:30:00.123", "2026-03-04 05:06:07.000"]


def test_python_udf_next_to_the_script(run, table, tmp_path, monkeypatch):
    write(tmp_path / "my_text_udfs.py", "def count_char(s: str, c: str) -> int:\n    return None if s is None else s.count(c)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = sorted(run.rows(table + "CREATE TEMPORARY FUNCTION count_char AS 'my_text_udfs.count_char' LANGUAGE PYTHON;"
                           "SELECT id, count_char(url, '/') FROM t"))
    assert rows == [["1", "6"], ["2", "4"], ["3", ""]]


def test_vectorized_udf(run, table, tmp_path, monkeypatch):
    write(tmp_path / "vec_udfs.py", "import streamsql.plan.udfs as u\n\n@u.udf(result_type='BIGINT', vectorized=True)\n"
                                    "def plus_one(s):\n    return s + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rows = sorted(run.rows(table + "CREATE TEMPORARY FUNCTION plus_one AS 'vec_udfs.plus_one';SELECT id, plus_one(n) FROM t"))
    assert rows == [["1", "8"], ["2", "-6"], ["3", "6"]]


def test_views(run, table):
    rows = run.rows(table + "CREATE TEMPORARY VIEW v AS SELECT id, n * 10 AS tens FROM t WHERE n > 0;"
                    "CREATE TEMPORARY VIEW w AS SELECT id, tens + 1 AS x FROM v; SELECT * FROM w")
    assert sorted(rows) == [["1", "71"], ["3", "51"]]


def test_udf_failure_is_one_clear_message(run, table, tmp_path, monkeypatch):
    from streamsql.errors import ExecutionError

    write(tmp_path / "bad_udfs.py", "def boom(x: int) -> int:\n    return 1 // 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ExecutionError) as caught:
        run.rows(table + "CREATE TEMPORARY FUNCTION boom AS 'bad_udfs.boom'; SELECT boom(n) FROM t")
    assert re.fullmatch(r"Python function 'boom' raised ZeroDivisionError: integer division or modulo by zero "
                        r"\(arguments: (7|-7|5)\)", caught.value.message), caught.value.message


def test_vectorized_udf_failure_names_the_function_and_the_batch(run, table, tmp_path, monkeypatch):
    from streamsql.errors import ExecutionError

    write(tmp_path / "bad_vec_udfs.py", "import streamsql.plan.udfs as u\n\n@u.udf(result_type='BIGINT', vectorized=True)\n"
                                        "def blow_up(s):\n    raise ValueError(f'no good:\\n{len(s)}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ExecutionError) as caught:
        run.rows(table + "CREATE TEMPORARY FUNCTION blow_up AS 'bad_vec_udfs.blow_up'; SELECT blow_up(n) FROM t")
    assert re.fullmatch(r"Python function 'blow_up' raised ValueError: no good:\n(\d) \(in a batch of \1 rows\)",
                        caught.value.message), caught.value.message
