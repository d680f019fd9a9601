"""The REPL driven as a person would: a pseudo-terminal, keystrokes, what the screen shows."""

from __future__ import annotations

import os
import sys

import pytest

from tests.conftest import ROOT, write

pexpect = pytest.importorskip("pexpect")
pytestmark = pytest.mark.spark

PROMPT = "Flink SQL>"


@pytest.fixture
def shell(tmp_path):
    env = dict(os.environ, STREAMSQL_CATALOG=str(ROOT / "catalog"), TERM="xterm", COLUMNS="160", LINES="50",
               HOME=str(tmp_path))
    child = pexpect.spawn(sys.executable, [str(ROOT / "cli.py"), "--conf", "spark.sql.shuffle.partitions=2"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=120, dimensions=(50, 160))
    child.expect_exact(PROMPT)
    yield child
    child.terminate(force=True)


def submit(child, *lines: str) -> None:
    for line in lines[:-1]:
        child.send(line + "\r")
    child.send(lines[-1] + "\r")


def test_a_session(shell, tmp_path):
    # A multi-line statement: Enter before the ';' continues it.
    submit(shell, "SELECT channel, COUNT(*) AS n", "FROM demo.bid", "WHERE price > 1000000 GROUP BY channel", "ORDER BY n DESC;")
    shell.expect(r"6 rows in set")
    shell.expect_exact(PROMPT)

    # Completion: Tab after a prefix of a table name.
    shell.send("DESCRIBE demo.auc")
    shell.send("\t")
    shell.expect("demo.auction")
    shell.send(";\r")
    shell.expect(r"initialBid")
    shell.expect(r"13 rows in set")  # 10 columns, 3 options
    shell.expect_exact(PROMPT)

    # An error is one message with the position; the shell goes on.
    submit(shell, "SELECT nosuch FROM demo.bid;")
    shell.expect(r"Column 'nosuch' could not be resolved \(line 1, column 8\)")
    shell.expect_exact(PROMPT)

    submit(shell, "SHOW DATABASES;")
    shell.expect("demo")
    shell.expect_exact(PROMPT)
    submit(shell, "EXPLAIN SELECT auction FROM demo.bid WHERE price > 10;")
    shell.expect("== Spark plan ==")
    shell.expect_exact(PROMPT)

    # A streaming query over a watched directory shows rows live until Ctrl-C cancels it.
    source = write(tmp_path / "live" / "1.csv", "1,first\n2,second\n")
    submit(shell, f"CREATE TEMPORARY TABLE live (id BIGINT, s STRING) WITH ('connector' = 'filesystem', "
                  f"'path' = '{source.parent}', 'format' = 'csv', 'source.monitor-interval' = '1 second');")
    shell.expect_exact(PROMPT)
    submit(shell, "SET 'sql-client.execution.result-mode' = 'tableau';")
    shell.expect_exact(PROMPT)
    submit(shell, "SELECT id, UPPER(s) FROM live;")
    shell.expect("SECOND")
    write(tmp_path / "live" / "2.csv", "3,third\n")
    shell.expect("THIRD")
    shell.sendintr()
    shell.expect("Query cancelled.")
    shell.expect_exact(PROMPT)
    submit(shell, "SELECT 1 + 1;")
    shell.expect(r"2")
    shell.expect_exact(PROMPT)

    submit(shell, "QUIT;")
    shell.expect("Goodbye.")
    shell.expect(pexpect.EOF)
    assert (tmp_path / ".streamsql_history").exists()


def test_a_live_group_by_in_each_result_mode(shell, tmp_path):
    """An updating GROUP BY over a watched directory: the table mode updates rows in place,
    changelog and tableau show the row kinds."""
    source = tmp_path / "clicks"
    write(source / "1.csv", "a\nb\na\n")
    submit(shell, f"CREATE TEMPORARY TABLE clicks (k STRING) WITH ('connector' = 'filesystem', "
                  f"'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');")
    shell.expect_exact(PROMPT)
    query = "SELECT k, COUNT(*) AS clicks_of_k FROM clicks GROUP BY k;"

    submit(shell, query)  # table mode (the default)
    shell.expect(r"a\s*│\s*2")
    write(source / "2.csv", "a\n")
    shell.expect(r"a\s*│\s*3")
    shell.sendintr()
    shell.expect("Query cancelled.")
    shell.expect_exact(PROMPT)

    for mode, count in (("changelog", 4), ("tableau", 6)):
        submit(shell, f"SET 'sql-client.execution.result-mode' = '{mode}';")
        shell.expect_exact(PROMPT)
        write(source / f"{mode}.csv", "a\n")
        submit(shell, query)
        shell.expect(rf"\+I \| a \| {count}")
        write(source / f"{mode}-more.csv", "a\n")  # an update: the old row retracted, the new one added
        shell.expect(rf"-U \| a \| {count}")
        shell.expect(rf"\+U \| a \| {count + 1}")
        shell.sendintr()
        shell.expect("Query cancelled.")
        shell.expect_exact(PROMPT)
