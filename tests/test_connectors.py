"""Connectors and formats end to end on a real SparkSession: SQL in, rows out."""

from __future__ import annotations

import json

import pytest

from streamsql.errors import ConnectorError, DataError
from tests.conftest import write

pytestmark = pytest.mark.spark

ROWS = "1,alpha,10,2026-01-01 00:00:01.500\n2,beta,20,2026-01-01 00:00:02\n3,,30,2026-01-01 00:00:03.250\n"
SCHEMA = "id BIGINT, name STRING, amount INT, ts TIMESTAMP(3)"


def source(name: str, path, fmt: str = "csv", extra: str = "") -> str:
    return (f"CREATE TEMPORARY TABLE {name} ({SCHEMA}) WITH ('connector' = 'filesystem', "
            f"'path' = '{path}', 'format' = '{fmt}'{extra});\n")


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_csv_file_source(run, tmp_path, mode):
    path = write(tmp_path / "in.csv", ROWS)
    rows = run.rows(f"SET 'execution.runtime-mode' = '{mode}';" + source("t", path) + "SELECT id, name, amount * 2, ts FROM t")
    assert sorted(rows) == [
        ["1", "alpha", "20", "2026-01-01 00:00:01.500"],
        ["2", "beta", "40", "2026-01-01 00:00:02.000"],
        ["3", "", "60", "2026-01-01 00:00:03.250"],
    ]


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_filesystem_sink_round_trip(run, tmp_path, fmt, mode):
    path = write(tmp_path / "in.csv", ROWS)
    out = tmp_path / f"out_{fmt}_{mode}"
    script = (
        f"SET 'execution.runtime-mode' = '{mode}';" + source("src", path) + source("dst", out, fmt)
        + "INSERT INTO dst SELECT id, UPPER(name), amount, ts FROM src WHERE amount > 10;"
        + "SELECT * FROM dst"
    )
    assert sorted(run.rows(script)) == [
        ["2", "BETA", "20", "2026-01-01 00:00:02.000"],
        ["3", "", "30", "2026-01-01 00:00:03.250"],
    ]


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_insert_values_writes_its_rows(run, tmp_path, mode):
    """INSERT INTO t VALUES (...), ...: the rows cast to the table's columns (a column list
    too); the query used to produce no columns at all."""
    rows = run.rows(f"SET 'execution.runtime-mode' = '{mode}';" + source("dst", tmp_path / "all")
                    + source("partial", tmp_path / "partial")
                    + "INSERT INTO dst VALUES (1, 'a', 10, TIMESTAMP '2026-01-01 00:00:01'), (2, NULL, 20, NULL);"
                    + "INSERT INTO partial (id, amount) VALUES (3, 30);"
                    + "SELECT * FROM dst UNION ALL SELECT * FROM partial")
    assert sorted(rows) == [["1", "a", "10", "2026-01-01 00:00:01.000"], ["2", "", "20", ""], ["3", "", "30", ""]]


def test_json_source(run, tmp_path):
    lines = [{"id": 1, "name": "a", "amount": 5, "ts": "2026-01-01 10:00:00.123"}, {"id": 2, "name": None, "amount": 7, "ts": "2026-01-01 10:00:01"}]
    path = write(tmp_path / "in.json", "\n".join(json.dumps(x) for x in lines) + "\n")
    rows = run.rows(source("t", path, "json") + "SELECT id, name, amount, ts FROM t")
    assert sorted(rows) == [["1", "a", "5", "2026-01-01 10:00:00.123"], ["2", "", "7", "2026-01-01 10:00:01.000"]]


def test_directory_source_reads_every_file(run, tmp_path):
    write(tmp_path / "dir" / "a.csv", "1,a,1,2026-01-01 00:00:00\n")
    write(tmp_path / "dir" / "b.csv", "2,b,2,2026-01-01 00:00:00\n")
    assert sorted(run.rows(source("t", tmp_path / "dir") + "SELECT id FROM t")) == [["1"], ["2"]]


def test_csv_options(run, tmp_path):
    path = write(tmp_path / "in.csv", "1;x|y;3;2026-01-01 00:00:00\n2;NULL;4;2026-01-01 00:00:00\n")
    extra = ", 'csv.field-delimiter' = ';', 'csv.null-literal' = 'NULL'"
    assert sorted(run.rows(source("t", path, extra=extra) + "SELECT id, name FROM t")) == [["1", "x|y"], ["2", ""]]


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_csv_quoting_is_flink_s_both_ways(run, tmp_path, mode):
    """Flink's CSV format (RFC 4180): inside a quoted field a quote is doubled and a backslash
    is an ordinary character, read and written; Python's csv module is the reference."""
    import csv
    import io

    names = ['say "hi"', "back\\slash\\", 'comma, "and" quote', 'end"', "plain"]
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows([i, name, i, "2026-01-01 00:00:00"] for i, name in enumerate(names))
    path = write(tmp_path / "in.csv", text.getvalue())
    out = tmp_path / f"out_{mode}"
    script = (f"SET 'execution.runtime-mode' = '{mode}';" + source("src", path) + source("dst", out)
              + "INSERT INTO dst SELECT * FROM src;")
    assert sorted(run.rows(script + "SELECT id, name FROM src")) == [[str(i), name] for i, name in enumerate(names)]
    written = "".join(p.read_text() for p in sorted(out.rglob("*.csv")))
    assert sorted((int(r[0]), r[1]) for r in csv.reader(io.StringIO(written))) == list(enumerate(names))
    assert '\\"' not in written  # a quote is doubled, never escaped by a backslash
    # 'csv.escape-character' still names another escape
    path = write(tmp_path / "escaped.csv", '1,"a\\"b",1,2026-01-01 00:00:00\n')
    assert run.rows(source("e", path, extra=", 'csv.escape-character' = '\\'") + "SELECT name FROM e") == [['a"b']]


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_malformed_row_is_an_error_naming_file_and_line(run, tmp_path, mode):
    path = write(tmp_path / "in.csv", ROWS + "4,delta,not-a-number,2026-01-01 00:00:04\n5,eps,50,2026-01-01 00:00:05\n")
    with pytest.raises(DataError) as caught:
        run.rows(f"SET 'execution.runtime-mode' = '{mode}';" + source("t", path) + "SELECT id FROM t")
    assert f"Malformed row in {path}, line 4: '4,delta,not-a-number,2026-01-01 00:00:04'" in caught.value.message
    assert "ignore-parse-errors" in caught.value.message


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_malformed_rows_skipped_and_counted(run, tmp_path, mode):
    path = write(tmp_path / "in.csv", ROWS + "4,delta,oops,2026-01-01 00:00:04\nshort,row\n5,eps,50,2026-01-01 00:00:05\n")
    script = f"SET 'execution.runtime-mode' = '{mode}';" + source("t", path, extra=", 'csv.ignore-parse-errors' = 'true'") + "SELECT id FROM t"
    assert sorted(run.rows(script)) == [["1"], ["2"], ["3"], ["5"]]
    assert any("Skipped 2 malformed row(s) in table 't'" in line for line in run.log)


def test_malformed_json_skipped(run, tmp_path):
    path = write(tmp_path / "in.json", '{"id": 1, "amount": 2}\n{"id": oops\n{"id": 3}\n')
    script = source("t", path, "json", ", 'json.ignore-parse-errors' = 'true'") + "SELECT id, amount FROM t"
    assert sorted(run.rows(script)) == [["1", "2"], ["3", ""]]


def test_missing_file(run, tmp_path):
    with pytest.raises(ConnectorError, match="path '.*nope.csv' does not exist"):
        run.rows(source("t", tmp_path / "nope.csv") + "SELECT id FROM t")


def test_print_sink(run, tmp_path, capsys):
    path = write(tmp_path / "in.csv", ROWS)
    run.rows(source("t", path) + "CREATE TEMPORARY TABLE p (id BIGINT, name STRING) WITH ('connector' = 'print', 'print-identifier' = 'out');"
             "INSERT INTO p SELECT id, name FROM t WHERE id < 3")
    assert sorted(capsys.readouterr().out.splitlines()) == ["out> +I[1, alpha]", "out> +I[2, beta]"]


def test_blackhole_sink(run, tmp_path):
    path = write(tmp_path / "in.csv", ROWS)
    run.rows(source("t", path) + "CREATE TEMPORARY TABLE b (id BIGINT) WITH ('connector' = 'blackhole'); INSERT INTO b SELECT id FROM t")


def test_streaming_insert_is_exactly_once_across_reruns(run, tmp_path):
    write(tmp_path / "in" / "a.csv", ROWS)
    script = ("SET 'execution.runtime-mode' = 'streaming';" + source("src", tmp_path / "in")
              + source("dst", tmp_path / "out") + "INSERT INTO dst SELECT * FROM src;")
    run.rows(script)
    run.rows(script)  # same job again: its checkpoint says the input was already written
    assert len(run.rows("SET 'execution.runtime-mode' = 'batch';" + source("r", tmp_path / "out") + "SELECT id FROM r")) == 3
    write(tmp_path / "in" / "b.csv", "9,new,90,2026-01-01 00:00:09\n")
    run.rows(script)  # only the new file is read
    assert sorted(run.rows("SELECT id FROM r")) == [["1"], ["2"], ["3"], ["9"]]
    # A batch-mode INSERT into the job's sink appends (Flink's batch semantics), visible to readers.
    run.rows("SET 'execution.runtime-mode' = 'batch'; INSERT INTO dst SELECT * FROM src")
    assert sorted(run.rows("SELECT id FROM r")) == sorted([["1"], ["2"], ["3"], ["9"]] * 2)


def test_computed_columns(run, tmp_path):
    path = write(tmp_path / "in.csv", ROWS)
    script = (f"CREATE TEMPORARY TABLE t ({SCHEMA}, doubled AS amount * 2, day AS DATE_FORMAT(ts, 'yyyy-MM-dd')) "
              f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv'); SELECT id, doubled, day FROM t WHERE id = 1")
    assert run.rows(script) == [["1", "20", "2026-01-01"]]


def test_persistent_table_visible_in_next_session(spark, tmp_path):
    from tests.conftest import Runner

    path = write(tmp_path / "in.csv", ROWS)
    first = Runner(spark, tmp_path / "catalog", tmp_path)
    first.rows(source("t", path).replace("TEMPORARY ", ""))
    second = Runner(spark, tmp_path / "catalog", tmp_path)
    assert len(second.rows("SELECT * FROM t")) == 3


def test_create_table_as_select_and_statement_set(run, tmp_path):
    path = write(tmp_path / "in.csv", ROWS)
    rows = run.rows(source("t", path) + f"CREATE TABLE big WITH ('connector' = 'filesystem', 'path' = '{tmp_path / 'big'}', "
                    "'format' = 'json') AS SELECT id, amount * 2 AS twice FROM t WHERE amount > 10;"
                    + source("a", tmp_path / "a") + source("b", tmp_path / "b") +
                    "EXECUTE STATEMENT SET BEGIN INSERT INTO a SELECT * FROM t WHERE id = 1; "
                    "INSERT INTO b SELECT * FROM t WHERE id > 1; END;"
                    "SET 'execution.runtime-mode' = 'batch';"
                    "SELECT 'big', COUNT(*), SUM(twice) FROM big UNION ALL SELECT 'a', COUNT(*), SUM(id) FROM a "
                    "UNION ALL SELECT 'b', COUNT(*), SUM(id) FROM b")
    assert sorted(rows) == [["a", "1", "1"], ["b", "2", "5"], ["big", "2", "100"]]


def test_bounded_select_with_limit_runs_as_one_computation(run, tmp_path):
    path = write(tmp_path / "in.csv", ROWS)
    plan = run.output(source("t", path) + "EXPLAIN SELECT id FROM t LIMIT 2")
    assert "execution: bounded input, run to its end as one computation" in plan
    assert len(run.rows(source("u", path) + "SELECT id FROM u LIMIT 2")) == 2


def test_bounded_insert_into_blackhole_runs_as_one_computation(run, tmp_path):
    path = write(tmp_path / "in.csv", ROWS)
    sink = "CREATE TEMPORARY TABLE nothing (id BIGINT) WITH ('connector' = 'blackhole');"
    plan = run.output(source("t", path) + sink + "EXPLAIN INSERT INTO nothing SELECT id FROM t")
    assert "execution: bounded input, run to its end as one computation" in plan
