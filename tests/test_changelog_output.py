"""Row kinds in results: the changelog result mode prints an `op` column first."""

from __future__ import annotations

import csv
import io
import os
import time

import pytest

from tests.conftest import write

pytestmark = pytest.mark.spark


def test_changelog_mode_prints_op_first(run, tmp_path):
    data = write(tmp_path / "in" / "part-0.csv", "1,a\n2,b\n")
    table = (f"CREATE TEMPORARY TABLE t (id BIGINT, s STRING) WITH ('connector' = 'filesystem',"
             f" 'path' = '{data.parent}', 'format' = 'csv');")
    out = run.output(table + "SET 'sql-client.execution.result-mode' = 'changelog'; SELECT id, s FROM t")
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["op", "id", "s"]
    assert sorted(rows[1:]) == [["+I", "1", "a"], ["+I", "2", "b"]]
    # The default (table) mode has no op column.
    out = run.output("RESET 'sql-client.execution.result-mode'; SELECT id FROM t")
    assert out.splitlines()[0] == "id"


def test_group_by_streams_incrementally_with_retractions(run, tmp_path):
    """Bounded input run as a stream: one micro-batch per file, the GROUP BY on the stateful
    operator; its changelog updates keys as files arrive and ends with the batch result."""
    from collections import Counter

    folder = tmp_path / "parts"
    files = ["a,1\nb,5\n", "a,7\nc,2\n", "a,3\nb,1\n"]
    for i, text in enumerate(files):  # Spark's file stream reads files by modification time
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    table = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
             f" 'path' = '{folder}', 'format' = 'csv', 'source.max-files-per-batch' = '1');")
    query = "SELECT k, COUNT(*) AS n, MAX(v) AS top, SUM(v) AS total FROM t GROUP BY k"
    out = run.output(table + "SET 'execution.bounded-input' = 'stream';"
                     "SET 'sql-client.execution.result-mode' = 'changelog';" + query)
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["op", "k", "n", "top", "total"]
    changes = rows[1:]
    assert ["-U", "a", "1", "1", "1"] in changes and ["+U", "a", "2", "7", "8"] in changes
    table_now = Counter()
    for op, *row in changes:
        table_now[tuple(row)] += 1 if op in ("+I", "+U") else -1
    final = sorted(row for row, count in table_now.items() for _ in range(count))
    assert final == [("a", "3", "7", "11"), ("b", "2", "5", "6"), ("c", "1", "2", "2")]


def test_listagg_over_a_group_by_s_changelog_ends_with_the_batch_result(run, tmp_path):
    """LISTAGG and LAST_VALUE over another GROUP BY's updates, file by file: the values an
    update retracts leave the list (Flink's versions with retraction), so the changelog ends
    with the batch result (LISTAGG's order is arrival order: compared as sets)."""
    from collections import Counter

    folder = tmp_path / "parts"
    files = ["a,1\nb,5\nc,1\n", "a,7\nd,2\n", "b,1\na,3\nd,9\n"]
    for i, text in enumerate(files):
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    table = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
             f" 'path' = '{folder}', 'format' = 'csv', 'source.max-files-per-batch' = '1');")
    query = ("SELECT n, LISTAGG(k) AS ks, MAX(top) AS mx FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top FROM t"
             " GROUP BY k) GROUP BY n")

    def rows_of(text: str) -> list:
        return [(n, frozenset(ks.split(",")), mx) for n, ks, mx in text]

    batch = list(csv.reader(io.StringIO(run.output(table + query))))[1:]
    out = run.output(table + "SET 'execution.bounded-input' = 'stream';"
                     "SET 'sql-client.execution.result-mode' = 'changelog';" + query)
    changes = list(csv.reader(io.StringIO(out)))[1:]
    assert any(op == "-U" for op, *_ in changes)  # k moves from one count to the next
    table_now = Counter()
    for op, *row in changes:
        table_now[tuple(row)] += 1 if op in ("+I", "+U") else -1
    final = [row for row, count in table_now.items() for _ in range(count)]
    assert sorted(rows_of(final), key=str) == sorted(rows_of(batch), key=str)
    assert sorted(rows_of(batch), key=str) == sorted([("1", frozenset("c"), "1"), ("2", frozenset("bd"), "9"),
                                                      ("3", frozenset("a"), "7")], key=str)


def test_print_sink_prints_row_kinds(run, tmp_path, capsys):
    folder = tmp_path / "parts"
    for i, text in enumerate(["a,1\n", "a,2\n"]):
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    run.rows(f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem', 'path' = '{folder}',"
             " 'format' = 'csv');"
             "CREATE TEMPORARY TABLE p (k STRING, total BIGINT) WITH ('connector' = 'print');"
             "SET 'execution.bounded-input' = 'stream';"
             "INSERT INTO p SELECT k, SUM(v) FROM t GROUP BY k;")
    printed = capsys.readouterr().out.splitlines()
    assert printed == ["+I[a, 1]", "-U[a, 1]", "+U[a, 3]"]


def test_state_ttl_expires_keys_between_micro_batches(run, tmp_path):
    """'table.exec.state.ttl' reaches the stateful operators: with 1 ms, a key's state has
    expired by the next micro-batch, so each file's rows start afresh (+I again, no -U),
    as Flink's expired state does."""
    folder = tmp_path / "parts"
    for i, text in enumerate(["a,1\nb,5\n", "a,7\n"]):
        os.utime(write(folder / f"part-{i}.csv", text), (time.time() - 100 + i,) * 2)
    table = (f"CREATE TEMPORARY TABLE t (k STRING, v BIGINT) WITH ('connector' = 'filesystem',"
             f" 'path' = '{folder}', 'format' = 'csv');")
    out = run.output(table + "SET 'execution.bounded-input' = 'stream'; SET 'table.exec.state.ttl' = '1 ms';"
                     "SET 'sql-client.execution.result-mode' = 'changelog';"
                     "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM t GROUP BY k")
    changes = list(csv.reader(io.StringIO(out)))[1:]
    assert sorted(changes) == [["+I", "a", "1", "1"], ["+I", "a", "1", "7"], ["+I", "b", "1", "5"]]
