"""The interactive SQL shell: `streamsql` with no arguments.

Multi-line statements end with ';' (Enter submits only then), history persists across
sessions, Tab completes keywords, tables, columns and functions. Ctrl-C cancels the
running query (or clears the input) and never leaves the shell; Ctrl-D or QUIT does.
"""

from __future__ import annotations

from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import ThreadedCompleter
from prompt_toolkit.filters import Condition
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.lexers import PygmentsLexer
from pygments.lexers.sql import SqlLexer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from streamsql.dialect.script import is_complete
from streamsql.errors import StreamsqlError, with_whole_chain
from streamsql.runtime.engine import Engine
from streamsql.runtime.results import ResultWriter, format_value, render_table
from streamsql.shell.completer import FlinkCompleter, SchemaSnapshot

HELP = """Statements end with ';'. Enter inside an unfinished statement starts a new line.
  SELECT ...; INSERT INTO t SELECT ...;          run a query or a pipeline
  CREATE [OR REPLACE] [TEMPORARY] TABLE|VIEW|FUNCTION ...;  define catalog objects (DROP ... to remove)
  SHOW CATALOGS|DATABASES|TABLES|VIEWS|FUNCTIONS|JOBS;  SHOW CREATE TABLE t;  DESCRIBE t;
  EXPLAIN SELECT ...;                            how streamsql and Spark will run it
  USE db;  CREATE DATABASE db;  SET 'key' = 'value';  SET;  RESET 'key';
  SET 'sql-client.execution.result-mode' = 'table' | 'changelog' | 'tableau';
  SET 'sql-client.verbose' = 'true';             show stack traces on errors
Ctrl-C cancels a running query; QUIT; or Ctrl-D leaves."""


class LiveResult(ResultWriter):
    """Shows a result as it arrives: an updating table, a scrolling changelog, or tableau rows."""

    handles_row_kinds = True  # it prints the op column itself in changelog mode

    def __init__(self, console: Console, mode: str):
        super().__init__("table", console.file)
        self.console = console
        self.mode = mode
        self._live: Live | None = None

    def begin(self, columns: list[str]) -> None:
        super().begin(columns)
        if self.mode == "table" and self._live is None:
            self._live = Live(self._table(), console=self.console, auto_refresh=False, transient=False)
            self._live.start()

    def rows(self, rows: list) -> None:
        self._header_written = True
        formatted = [[format_value(v) for v in row] for row in rows]
        self.count += len(formatted)
        if self.mode == "table":
            if self._has_kinds:  # a changelog: apply it to the table on screen
                for kind, *values in formatted:
                    if kind in ("+I", "+U"):
                        self._buffer.append(values)
                    elif values in self._buffer:  # -U / -D take their row back
                        self._buffer.remove(values)
            else:
                self._buffer.extend(formatted)
            self._live.update(self._table(), refresh=True)
        else:
            prefix = ["+I"] if self.mode == "changelog" and not self._has_kinds else []
            for row in formatted:
                cells = ["NULL" if v is None else v for v in row]
                self.console.print(" | ".join(prefix + cells), markup=False, highlight=False)

    def end(self) -> None:
        self.close()
        self.console.print(f"{self.count} row{'s' if self.count != 1 else ''} in set", style="dim")

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    @property
    def _has_kinds(self) -> bool:
        """An updating result brings its row kinds as a first 'op' column."""
        return bool(self.columns) and self.columns[0] == "op"

    def _table(self) -> Table:
        columns = self.columns[1:] if self._has_kinds else self.columns
        return render_table(columns, self._buffer[-500:])


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


def run_repl(engine: Engine, history: Path | None = None) -> int:
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
    while True:
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


def _execute(engine: Engine, text: str, console: Console) -> None:
    mode = engine.settings.get("sql-client.execution.result-mode", "table").lower()
    writer = LiveResult(console, mode)
    try:
        engine.run_script(text, writer)
    except KeyboardInterrupt:
        writer.close()
        engine.cancel()
        console.print("Query cancelled.", style="yellow")
    except StreamsqlError as error:
        writer.close()
        console.print(error.render(), style="red", markup=False)
        if engine.settings.get("sql-client.verbose", "false").lower() == "true":
            with_whole_chain(error)
            console.print_exception()
    except Exception as error:  # a bug in streamsql: report it, keep the shell
        writer.close()
        console.print(f"Internal error: {type(error).__name__}: {error}", style="red", markup=False)
        if engine.settings.get("sql-client.verbose", "false").lower() == "true":
            console.print_exception()
