"""The interactive SQL shell: `streamsql` with no arguments.

Multi-line statements end with ';' (Enter submits only then), history persists across
sessions, Tab completes keywords, tables, columns and functions. Ctrl-C cancels the
running query (or clears the input) and never leaves the shell; Ctrl-D or QUIT does.
"""

from __future__ import annotations

import threading
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.application import run_in_terminal
from prompt_toolkit.completion import ThreadedCompleter
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import PygmentsLexer
from pygments.lexers.sql import SqlLexer
from rich.console import Console

from streamsql.dialect.script import is_complete
from streamsql.errors import StreamsqlError, with_whole_chain
from streamsql.runtime.engine import Engine
from streamsql.shell.completer import FlinkCompleter, SchemaSnapshot
from streamsql.shell.live import LiveResult
from streamsql.shell.startup import SparkStarter

HELP = """Statements end with ';'. Enter inside an unfinished statement starts a new line.
  SELECT ...; INSERT INTO t SELECT ...;          run a query or a pipeline
  CREATE [OR REPLACE] [TEMPORARY] TABLE|VIEW|FUNCTION ...;  define catalog objects (DROP ... to remove)
  SHOW CATALOGS|DATABASES|TABLES|VIEWS|FUNCTIONS|JOBS;  SHOW CREATE TABLE t;  DESCRIBE t;
  EXPLAIN SELECT ...;                            how streamsql and Spark will run it
  USE db;  CREATE DATABASE db;  SET 'key' = 'value';  SET;  RESET 'key';
  SET 'sql-client.execution.result-mode' = 'table' | 'changelog' | 'tableau';
  SET 'sql-client.verbose' = 'true';             show stack traces on errors
Ctrl-C cancels a running query; QUIT; or Ctrl-D leaves."""


def key_bindings() -> KeyBindings:
    bindings = KeyBindings()

    @Condition
    def finished() -> bool:
        from prompt_toolkit.application import get_app

        text = get_app().current_buffer.text
        return is_complete(text) or text.strip().rstrip(";").upper() in ("QUIT", "EXIT", "HELP", "")

    @bindings.add("enter", filter=finished)
    def _submit(event) -> None:
        event.current_buffer.validate_and_handle()

    return bindings


def run_repl(engine: Engine, history: Path | None = None, warm_up: bool = True) -> int:
    """The shell: it opens at once; Spark starts behind the prompt (status in the toolbar),
    then, with ``warm_up``, runs a small streaming query of its own while the user types
    (runtime.warm_up)."""
    console = Console(highlight=False)
    history = history or Path.home() / ".streamsql_history"
    completer = FlinkCompleter(lambda: SchemaSnapshot.from_catalog(engine.catalog))
    session = PromptSession(
        history=FileHistory(str(history)),
        lexer=PygmentsLexer(SqlLexer),
        completer=ThreadedCompleter(completer),
        complete_while_typing=False,
        multiline=True,
        key_bindings=key_bindings(),
        prompt_continuation=lambda width, line, wrap: "-> ".rjust(width),
    )
    console.print("streamsql: Flink SQL on Spark. HELP; for help, QUIT; to leave.", style="bold")
    engine.catalog.databases()  # catalog files that do not load are reported now, not while typing
    starter = SparkStarter(engine, on_change=lambda: _announce(session, starter, console), warm_up=warm_up)
    starter.start()
    console.print(starter.status(), style="dim", markup=False)
    while True:
        if starter.ended is not None and not starter.seen:  # it ended while a statement ran
            _announce(session, starter, console)
        try:
            text = session.prompt("Flink SQL> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        command = text.strip().rstrip(";").strip().upper()
        if command in ("QUIT", "EXIT"):
            break
        if command == "HELP":
            console.print(HELP, markup=False)
            continue
        if command:
            _execute(engine, text, console)
            completer.refresh()  # the statement may have changed the catalog
    engine.stop()
    console.print("Goodbye.")
    return 0


def _announce(session: PromptSession, starter: SparkStarter, console: Console) -> None:
    """Say once that Spark is ready (or did not start): above the prompt when one is shown
    (the prompt is drawn again under it), else at once (a statement waited for it)."""

    def show() -> None:
        with _ANNOUNCING:
            if not starter.seen:
                starter.seen = True
                console.print(starter.status(), style="dim", markup=False)

    app = session.app
    if app.is_running and app.loop is not None and threading.current_thread() is not threading.main_thread():
        app.loop.call_soon_threadsafe(lambda: run_in_terminal(show))
    else:
        show()


_ANNOUNCING = threading.Lock()


def run_file(engine: Engine, text: str, console: Console | None = None) -> int:
    """Run a script as Flink's `sql-client.sh -f` (or `-i`) does: results in tableau mode, an
    [INFO] line per statement; 1 after the first error (nothing after it runs)."""
    console = console or Console(highlight=False)
    console.print("[INFO] Executing SQL from file.", style="bold blue", markup=False)
    return 0 if _execute(engine, text, console, mode="tableau") else 1


def _execute(engine: Engine, text: str, console: Console, mode: str | None = None) -> bool:
    """Run what was typed; False when it failed (the error is printed)."""
    mode = mode or engine.settings.get("sql-client.execution.result-mode", "table").lower()
    writer = LiveResult(console, mode, engine.settings)
    try:
        engine.run_script(text, writer)
    except KeyboardInterrupt:
        writer.close()
        engine.cancel()
        console.print("Query cancelled.", style="yellow")
        return False
    except StreamsqlError as error:
        writer.close()
        console.print(error.render(), style="red", markup=False)
        if engine.settings.get("sql-client.verbose", "false").lower() == "true":
            with_whole_chain(error)
            console.print_exception()
        return False
    except Exception as error:  # a bug in streamsql: report it, keep the shell
        writer.close()
        console.print(f"Internal error: {type(error).__name__}: {error}", style="red", markup=False)
        if engine.settings.get("sql-client.verbose", "false").lower() == "true":
            console.print_exception()
        return False
    return True
