"""Flink SQL client behaviours without Spark: [INFO] lines, filtered SHOW, -f/-i, --version,
max-column-width, EXPLAIN as text, and how the shell's live result draws."""

from __future__ import annotations

import io
import shutil

import pytest
from rich.console import Console

from streamsql import cli
from streamsql.catalog import Catalog
from streamsql.dialect.flink import Flink
from streamsql.dialect.script import parse_statement
from streamsql.errors import CatalogError, SqlSyntaxError, ValidationError
from streamsql.repl import run_file
from streamsql.runtime.engine import Engine
from streamsql.runtime.results import ResultWriter
from streamsql.runtime.show import like_pattern
from streamsql.shell.live import LiveResult
from tests.conftest import ROOT

DDL = """CREATE TABLE bid (auction BIGINT, price BIGINT, channel STRING)
  WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
CREATE TABLE person (id BIGINT, name STRING) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv');
CREATE VIEW pricey AS SELECT auction FROM bid WHERE price > 10;
"""


@pytest.fixture
def engine(tmp_path):
    (tmp_path / "in.csv").write_text("1,2,x\n")
    engine = Engine(Catalog(tmp_path / "catalog"), base_dir=tmp_path, log=lambda m: None)
    engine.run_script("CREATE DATABASE shop;\nUSE shop;\n" + DDL.format(path=tmp_path / "in.csv") + "USE default_database;",
                      ResultWriter("csv", io.StringIO()))
    return engine


def shell(engine: Engine, sql: str, width: int = 120) -> str:
    out = io.StringIO()
    run_file(engine, sql, Console(file=out, width=width, highlight=False, color_system=None))
    return out.getvalue()


def rows(engine: Engine, sql: str) -> list[str]:
    out = io.StringIO()
    engine.run_script(sql, ResultWriter("csv", out))
    return out.getvalue().splitlines()


def test_info_messages_as_flinks_client_prints_them(engine):
    text = shell(engine, """SET 'parallelism.default' = '2';
        RESET 'parallelism.default';
        RESET;
        CREATE TEMPORARY TABLE t (a INT) WITH ('connector' = 'blackhole');
        DROP TEMPORARY TABLE t;
        CREATE DATABASE more;
        USE more;""")
    assert text.splitlines() == [
        "[INFO] Executing SQL from file.",
        "[INFO] Session property has been set.",
        "[INFO] Session property has been reset.",
        "[INFO] All session properties have been set to their default values.",
        "[INFO] Execute statement succeeded.",
        "[INFO] Execute statement succeeded.",
        "[INFO] Execute statement succeeded.",
        "[INFO] Execute statement succeeded.",
    ]


def test_scripts_print_no_info_lines(engine):
    assert rows(engine, "SET 'parallelism.default' = '2'; CREATE TEMPORARY VIEW v AS SELECT 1 AS x;") == []


def test_show_tables_from_in_and_like(engine):
    assert rows(engine, "SHOW TABLES FROM shop;") == ["table name", "bid", "person"]
    assert rows(engine, "SHOW TABLES IN default_catalog.shop LIKE 'b%';") == ["table name", "bid"]
    assert rows(engine, "SHOW TABLES IN shop NOT LIKE 'b%';") == ["table name", "person"]
    assert rows(engine, "SHOW TABLES FROM shop LIKE 'B%';") == ["table name"]  # LIKE is case-sensitive
    assert rows(engine, "SHOW TABLES FROM shop ILIKE 'B%';") == ["table name", "bid"]
    assert rows(engine, "SHOW VIEWS FROM shop;") == ["view name", "pricey"]
    assert rows(engine, "SHOW DATABASES LIKE 's_op';") == ["database name", "shop"]
    assert rows(engine, "USE shop; SHOW TABLES LIKE '%o%';") == ["table name", "person"]


def test_show_columns(engine):
    assert rows(engine, "SHOW COLUMNS FROM shop.bid;")[1:] == [
        "auction,BIGINT,true,,,", "price,BIGINT,true,,,", "channel,STRING,true,,,"]
    assert [r.split(",")[0] for r in rows(engine, "SHOW COLUMNS IN shop.bid LIKE '%n%';")[1:]] == ["auction", "channel"]
    assert [r.split(",")[0] for r in rows(engine, "SHOW COLUMNS IN shop.bid NOT LIKE '%n%';")[1:]] == ["price"]


def test_show_create_view(engine):
    text = "\n".join(rows(engine, "SHOW CREATE VIEW shop.pricey;"))
    assert "CREATE VIEW pricey AS" in text and "price > 10" in text


def test_show_errors_name_the_database_and_position(engine):
    with pytest.raises(CatalogError, match=r"Database 'nope' does not exist \(databases: default_database, shop\)") as error:
        engine.run_script("SHOW TABLES;\nSHOW TABLES FROM nope;", ResultWriter("csv", io.StringIO()))
    assert (error.value.position.line, error.value.position.col) == (2, 1)
    with pytest.raises(ValidationError, match="Catalog 'other' does not exist"):
        rows(engine, "SHOW TABLES FROM other.shop;")
    with pytest.raises(SqlSyntaxError, match="Expected LIKE or ILIKE after NOT"):
        parse_statement("SHOW TABLES NOT 'x'")
    with pytest.raises(SqlSyntaxError, match="Expected FROM or IN and a table name after SHOW COLUMNS"):
        parse_statement("SHOW COLUMNS bid")


def test_an_empty_show_tables_says_where_the_tables_are(engine):
    text = shell(engine, "SHOW TABLES;")
    assert "Empty set" in text
    assert ("[INFO] Database 'default_database' has no tables; tables are in shop (2): SHOW TABLES FROM shop; "
            "or USE shop;") in text
    assert "has no tables" not in shell(engine, "SHOW TABLES LIKE 'x%';")


def test_show_round_trips_through_the_generator():
    for sql in ("SHOW TABLES FROM shop NOT LIKE 'b%'", "SHOW COLUMNS FROM shop.bid ILIKE '%e'", "SHOW DATABASES",
                "SHOW CREATE VIEW shop.pricey"):
        assert parse_statement(sql).sql(dialect=Flink) == sql


def test_like_patterns():
    assert like_pattern("a_c%").fullmatch("abcdef")
    assert not like_pattern("a_c%").fullmatch("ac")
    assert like_pattern(r"50\%").fullmatch("50%") and not like_pattern(r"50\%").fullmatch("500")
    assert like_pattern("A.*", ignore_case=True).fullmatch("a.*") and not like_pattern("a.*").fullmatch("ab")


def test_max_column_width(engine):
    text = shell(engine, "SET 'sql-client.display.max-column-width' = '5'; SHOW TABLES FROM shop;")
    assert "person" not in text and "pe..." in text
    out = io.StringIO()
    engine.run_script("SHOW TABLES FROM shop;", ResultWriter("table", out, settings=engine.settings))
    assert "pe..." in out.getvalue()
    with pytest.raises(ValidationError, match="'sql-client.display.max-column-width' must be a positive integer"):
        rows(engine, "SET 'sql-client.display.max-column-width' = 'wide';")


def test_explain_text_in_table_format_and_a_column_otherwise():
    out = io.StringIO()
    ResultWriter("table", out).text("plan", ["== Operator plan ==", "Calc(select=[a])", "+- TableSourceScan"])
    assert out.getvalue() == "== Operator plan ==\nCalc(select=[a])\n+- TableSourceScan\n"
    out = io.StringIO()
    ResultWriter("csv", out).text("plan", ["== x ==", "  y"])
    assert out.getvalue() == "plan\n== x ==\n  y\n"


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("streamsql 0.1.0 (Flink SQL 1.20 dialect, PySpark ")


def test_file_and_init_options(tmp_path, capsys, monkeypatch):
    catalog = tmp_path / "catalog"
    monkeypatch.setenv("STREAMSQL_CATALOG", str(catalog))
    init = tmp_path / "init.sql"
    init.write_text("CREATE DATABASE IF NOT EXISTS shop;\nSET 'parallelism.default' = '3';\n")
    script = tmp_path / "script.sql"
    script.write_text("SET;\nSHOW DATABASES;\n")
    assert cli.main(["-i", str(init), "-f", str(script)]) == 0
    out = capsys.readouterr().out
    assert out.count("[INFO] Executing SQL from file.") == 2
    assert "parallelism.default" in out and "│ 3 " in out  # the init file's SET holds in the script
    assert "shop" in out
    script.write_text("SHOW TABLES FROM nowhere;\nCREATE DATABASE never;\n")
    assert cli.main(["-f", str(script)]) == 1
    captured = capsys.readouterr().out
    assert "Database 'nowhere' does not exist" in captured and "[INFO] Execute statement" not in captured
    assert cli.main(["-f", str(tmp_path / "missing.sql")]) == 1
    assert "Script" in capsys.readouterr().err


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def live(mode: str, height: int = 14) -> tuple[LiveResult, io.StringIO, FakeClock]:
    out = io.StringIO()
    clock = FakeClock()
    console = Console(file=out, width=100, height=height, force_terminal=True, color_system=None,
                      _environ={"TERM": "xterm"})
    return LiveResult(console, mode, clock=clock), out, clock


def test_the_table_mode_shows_the_newest_rows_and_a_status_line():
    writer, out, clock = live("table")
    writer.begin(["n", "s"])
    assert out.getvalue() == ""  # nothing is drawn before the first row
    clock.now += 2
    writer.rows([(i, f"row {i}") for i in range(40)])
    screen = out.getvalue()
    assert "row 39" in screen and "row 10 " not in screen
    assert "rows: 34-40 of 40 (newest) · PgUp/PgDn · changes: 40 · 20 rows/s" in screen
    writer.scroll(7)  # PgUp: the 7 rows before
    paged = out.getvalue()[len(screen):]
    assert "row 26" in paged and "row 32" in paged and "row 33" not in paged and "rows: 27-33 of 40 ·" in paged
    writer.scroll(100)  # no further back than the first rows
    assert "rows: 1-7 of 40 ·" in out.getvalue()[len(screen) + len(paged):]
    writer.scroll(-100)  # back to the newest
    screen = out.getvalue()
    assert screen.rstrip().endswith("Ctrl-C stops") and "34-40 of 40 (newest)" in screen[-300:]
    writer.note_watermark("2026-01-01T12:00:41.000Z")  # by the engine, while it waits on the query
    assert "· watermark 12:00:41 · updated" in out.getvalue()[len(screen):]
    screen = out.getvalue()
    writer.close()  # cancelled: the rows on screen stay, the live view goes
    left = out.getvalue()[len(screen):]
    assert "row 39" in left and "row 32" not in left and "34-40 of 40 (newest)" in left


def test_the_table_mode_applies_a_changelog():
    writer, out, _ = live("table", height=30)
    writer.begin(["op", "k", "n"])
    writer.rows([("+I", "a", 1), ("+I", "b", 1)])
    writer.rows([("-U", "a", 1), ("+U", "a", 2), ("-D", "b", 1)])
    writer.end()
    final = out.getvalue().split("rows:")[-1]
    assert "│ a │ 2 │" in final and "│ b" not in final
    assert writer.changes == 5 and final.rstrip().endswith("1 row in set")


def test_changelog_and_tableau_print_a_header():
    writer, out, _ = live("changelog")
    writer.begin(["k", "n"])
    writer.rows([("a", 1)])
    writer.rows([("b", None)])
    writer.end()
    assert out.getvalue().splitlines() == ["op | k | n", "----------", "+I | a | 1", "+I | b | NULL", "2 rows in set"]
    writer, out, _ = live("tableau")
    writer.begin(["op", "k"])
    writer.rows([("+I", "a"), ("-D", "a")])
    writer.end()
    assert out.getvalue().splitlines() == ["op | k", "------", "+I | a", "-D | a", "2 rows in set"]


def test_no_empty_table_before_an_error():
    writer, out, _ = live("table")
    writer.begin(["a"])
    writer.close()  # the query failed before any row
    assert out.getvalue() == ""


def test_the_bundled_catalog_points_at_its_demo_database(tmp_path):
    shutil.copytree(ROOT / "catalog" / "demo", tmp_path / "catalog" / "demo", ignore=shutil.ignore_patterns("data"))
    engine = Engine(Catalog(tmp_path / "catalog"), base_dir=tmp_path, log=lambda m: None)
    assert "tables are in demo (3): SHOW TABLES FROM demo; or USE demo;" in shell(engine, "SHOW TABLES;", width=200)


class SlowEngine:
    """An engine whose Spark takes a while to start (or fails to)."""

    remote = None
    warm_up = None

    def __init__(self, failure: Exception | None = None):
        import threading

        self.release = threading.Event()
        self.failure = failure

    def spark_conf(self):
        return {"spark.master": "local[2]"}

    def start_spark(self):
        self.release.wait(30)
        if self.failure:
            raise self.failure
        return "session"


def test_the_start_up_status_line():
    from streamsql.shell.startup import SparkStarter

    clock = FakeClock()
    changes = []
    engine = SlowEngine()
    starter = SparkStarter(engine, on_change=lambda: changes.append(starter.status()), clock=clock)
    assert starter.status() is None
    starter.start()
    assert starter.status() == "Starting Spark (local[2])…" and not starter.ready
    clock.now += 12.34
    engine.release.set()
    assert starter.wait(30) and starter.ready
    assert changes == ["Spark ready (local[2]) in 12.3 s"]

    failing = SlowEngine(RuntimeError("Java gateway process exited before sending its port number\nmore"))
    starter = SparkStarter(failing, clock=clock)
    starter.start()
    failing.release.set()
    assert starter.wait(30) and not starter.ready
    assert starter.status() == "Spark did not start: Java gateway process exited before sending its port number"


def test_spark_start_up_chatter_is_filtered(tmp_path, monkeypatch):
    import os

    from streamsql.runtime.lifetime import forward_stderr

    monkeypatch.delenv("STREAMSQL_VERBOSE", raising=False)
    read, write = os.pipe()
    out = tmp_path / "stderr"
    with open(out, "wb") as target:
        thread = forward_stderr(os.fdopen(read, "rb"), target.fileno())
        os.write(write, b"WARNING: Using incubator modules: jdk.incubator.vector\nSetting default log level to \"WARN\".\n"
                        b"To adjust logging level use sc.setLogLevel(newLevel). For SparkR, use setLogLevel(newLevel).\n"
                        b"26/01/01 10:00:00 ERROR SparkContext: a real problem\n"
                        b"Starting Streaming TransformWithStateInPandas Python worker.\n\n"
                        b"Streaming TransformWithStateInPandas Python worker received parameters for UDF. State server"
                        b" port/path: 41413, key schema: StructType([])\n\n"
                        b"\nTraceback (most recent call last):\n")
        os.close(write)
        thread.join(10)
    # a stateful operator's workers say so at every call; a blank line of anything else stays
    assert out.read_text() == "26/01/01 10:00:00 ERROR SparkContext: a real problem\n\nTraceback (most recent call last):\n"


RUNNER_TRACEBACK = """Traceback (most recent call last):
  File "/v/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 265, in main
    func_id = read_int(infile)
              ^^^^^^^^^^^^^^^^
  File "/v/site-packages/pyspark/serializers.py", line 604, in read_int
    raise EOFError
EOFError

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/v/site-packages/pyspark/worker_util.py", line 253, in get_sock_file_to_executor
    yield sock_file
  File "/v/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 299, in main
    outfile.flush()
BrokenPipeError: [Errno 32] Broken pipe

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/v/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 313, in <module>
    with get_sock_file_to_executor(timeout=None) as sock_file:
BrokenPipeError: [Errno 32] Broken pipe
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_the_data_source_runners_traceback_at_a_stop_is_not_shown(tmp_path, monkeypatch, verbose):
    """Spark's Python data source runner (the generated sources) prints a traceback when a
    stopped query closes its socket: not for the user (their query reports its own errors);
    any other traceback, and whatever follows the runner's, is shown."""
    import os

    from streamsql.runtime.lifetime import forward_stderr

    if verbose:
        monkeypatch.setenv("STREAMSQL_VERBOSE", "1")
    else:
        monkeypatch.delenv("STREAMSQL_VERBOSE", raising=False)
    other = 'Traceback (most recent call last):\n  File "/app/udfs.py", line 2, in f\nZeroDivisionError: division by zero\n'
    read, write = os.pipe()
    out = tmp_path / "stderr"
    with open(out, "wb") as target:
        thread = forward_stderr(os.fdopen(read, "rb"), target.fileno())
        os.write(write, (RUNNER_TRACEBACK + "26/01/01 10:00:00 WARN Something: after it\n" + other).encode())
        os.close(write)
        thread.join(10)
    shown = out.read_text()
    if verbose:
        assert shown == RUNNER_TRACEBACK + "26/01/01 10:00:00 WARN Something: after it\n" + other
    else:
        assert shown == "26/01/01 10:00:00 WARN Something: after it\n" + other


def test_unnamed_columns_keep_flinks_names_and_carry_their_expression_as_a_label():
    from tests.operator_plans import steps

    plan = steps("SELECT price + 1, auction, UPPER(channel) FROM bid;")[-1].plan
    assert [c.name for c in plan.columns] == ["EXPR$0", "auction", "EXPR$2"]  # Flink's names (INSERT, views)
    assert plan.labels == ["price + 1", "auction", "UPPER(channel)"]  # what the shell heads them with
