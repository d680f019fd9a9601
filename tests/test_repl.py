"""The REPL driven as a person would: a pseudo-terminal, keystrokes, what the screen shows."""

from __future__ import annotations

import os
import re
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
        cancelled = shell.before  # what Ctrl-C printed: no traceback, no Java frames
        assert "Traceback" not in cancelled and "py4j" not in cancelled and "\tat " not in cancelled, cancelled
        shell.expect_exact(PROMPT)


def test_spark_starts_behind_the_prompt(tmp_path):
    """The prompt comes while Spark is still starting; a query typed at once runs when it
    is ready; DDL and SET need no Spark and answer with Flink's [INFO] lines."""
    import time

    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), TERM="xterm", HOME=str(tmp_path))
    opened = time.monotonic()
    child = pexpect.spawn(sys.executable, [str(ROOT / "cli.py"), "--conf", "spark.sql.shuffle.partitions=2"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=180, dimensions=(50, 160))
    try:
        child.expect_exact("Starting Spark (local[*])…")
        child.expect_exact(PROMPT)
        print(f"open-to-prompt: {time.monotonic() - opened:.2f} s")
        submit(child, "CREATE TEMPORARY VIEW numbers AS SELECT 41 AS n;")
        child.expect_exact("[INFO] Execute statement succeeded.")
        # answered without waiting for Spark (which takes seconds to start, the DDL
        # milliseconds); whether a prompt redrawn later comes before the status line's
        # "Spark ready" is the terminal renderer's business, so that is not asked
        assert "Spark ready" not in child.before, "the DDL was answered only once Spark was ready"
        ready = re.compile(r"Spark ready \(local\[\*\]\) in [\d.]+ s")
        said = ""  # what the shell printed since: Spark may become ready at any point of it
        child.expect_exact(PROMPT)
        said += child.before
        submit(child, "SET 'sql-client.execution.result-mode' = 'tableau';")
        child.expect_exact("[INFO] Session property has been set.")
        said += child.before
        child.expect_exact(PROMPT)
        said += child.before
        typed = time.monotonic()
        submit(child, "SELECT n + 1 AS answer FROM numbers;")
        if not ready.search(said):
            child.expect(ready)  # said once it is, then the result
        child.expect("answer")  # tableau: a header, then the rows
        child.expect(r"-{6}")
        child.expect(r"\b42\b")
        child.expect("1 row in set")
        print(f"prompt-to-first-result: {time.monotonic() - typed:.2f} s")
        output = child.before
        assert "Using incubator modules" not in output and "Setting default log level" not in output
        child.expect_exact(PROMPT)
        submit(child, "RESET;")
        child.expect_exact("[INFO] All session properties have been set to their default values.")
        child.expect_exact(PROMPT)
        submit(child, "SHOW TABLES;")
        child.expect("Empty set")
        child.expect_exact(PROMPT)
        submit(child, "QUIT;")
        child.expect(pexpect.EOF)
    finally:
        child.terminate(force=True)


def on_screen(text: str) -> str:
    """A pattern for text the shell highlights: colour codes may come between its characters."""
    import re

    return r"(?:\x1b\[[0-9;?]*[A-Za-z])*".join(re.escape(c) for c in text)


def test_completion_in_context(shell, tmp_path):
    """Tab after FROM db., after an alias, inside WITH ( and after SET '."""
    shell.send("SELECT b.pri FROM demo.bid b")
    for _ in range(len(" FROM demo.bid b")):
        shell.send("\x1b[D")  # left arrow: the cursor back after 'b.pri'
    shell.send("\t")
    shell.expect("price")
    shell.send("\x03")  # Ctrl-C clears the line
    shell.expect_exact(PROMPT)
    shell.send("SELECT * FROM demo.pe\t")
    shell.expect("demo.person")
    shell.send("\x03")
    shell.expect_exact(PROMPT)
    # Completion runs in a thread: wait for it on screen (highlighted token by token), then
    # finish the statements, which work only with the whole names.
    shell.send("CREATE TEMPORARY TABLE t (a INT) WITH ('connector' = 'filesystem', 'source.mon\t")
    shell.expect(on_screen("-interval"))
    submit(shell, f"' = '1 s', 'path' = '{tmp_path}', 'format' = 'csv');")
    shell.expect_exact("[INFO] Execute statement succeeded.")
    shell.expect_exact(PROMPT)
    shell.send("SET 'sql-client.exec\t")
    shell.expect(on_screen("-mode"))
    submit(shell, "' = 'changelog';")
    shell.expect_exact("[INFO] Session property has been set.")
    shell.expect_exact(PROMPT)
    submit(shell, "SET;")
    shell.expect(r"sql-client\.execution\.result-mode\s*│\s*changelog")
    shell.expect_exact(PROMPT)


def test_a_live_table_shows_its_newest_rows_and_a_status_line(shell, tmp_path):
    source = tmp_path / "many"
    write(source / "1.csv", "".join(f"{i}\n" for i in range(200)))
    submit(shell, f"CREATE TEMPORARY TABLE many (n BIGINT, ts AS TIMESTAMP '2026-01-01 12:00:41',"
                  f" WATERMARK FOR ts AS ts) WITH ('connector' = 'filesystem', "
                  f"'path' = '{source}', 'format' = 'csv', 'source.monitor-interval' = '1 second');")
    shell.expect_exact(PROMPT)
    submit(shell, "SELECT n * 10 AS tenfold FROM many;")
    shell.expect(r"\b1990\b")  # the newest row is on screen, above the status line
    shell.expect(r"rows: \d+-200 of 200 \(newest\) · PgUp/PgDn · changes: 200")
    shell.send("\x1b[5~")  # PgUp: older rows, the status line says which
    shell.expect(r"rows: \d+-\d+ of 200 · PgUp/PgDn")
    shell.send("\x1b[6~")  # PgDn: back to the newest
    shell.expect(r"rows: \d+-200 of 200 \(newest\)")
    write(source / "2.csv", "777\n")
    shell.expect(r"\b7770\b")
    shell.expect(r"rows: \d+-201 of 201 \(newest\) · PgUp/PgDn · changes: 201")
    shell.expect(r"watermark 12:00:41 · updated")  # the query's watermark, once Spark reports it
    shell.sendintr()
    shell.expect("Query cancelled.")
    shell.expect_exact(PROMPT)


@pytest.mark.spark
def test_run_on_a_terminal_says_while_spark_starts(tmp_path):
    """`streamsql run` on a terminal shows a transient line while Spark starts; its results
    are the same as when piped."""
    import pexpect

    env = dict(os.environ, STREAMSQL_CATALOG=str(tmp_path / "catalog"), TERM="xterm")
    child = pexpect.spawn(sys.executable, [str(ROOT / "cli.py"), "run", "--format", "csv", "-e", "SELECT 41 + 1 AS answer"],
                          cwd=str(tmp_path), env=env, encoding="utf-8", timeout=240, dimensions=(24, 100))
    try:
        child.expect("Starting Spark \\(local")
        child.expect("answer")
        child.expect("42")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_the_shell_heads_an_unnamed_column_with_its_expression(run):
    """Through the engine: a writer that shows labels (the shell's) gets `v * 2`, a plain one
    (run --format csv) Flink's EXPR$0."""
    import io

    from streamsql.runtime.results import ResultWriter

    class Labelled(ResultWriter):
        shows_labels = True

    labelled, plain = io.StringIO(), io.StringIO()
    sql = "SELECT v * 2, v FROM (VALUES (1), (2)) AS t(v)"
    run.engine.run_script(sql, Labelled("csv", labelled))
    run.engine.run_script(sql, ResultWriter("csv", plain))
    assert labelled.getvalue().splitlines()[0] == "v * 2,v"
    assert plain.getvalue().splitlines()[0] == "EXPR$0,v"
