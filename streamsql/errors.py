"""One error root for everything a user can get wrong, with an optional SQL position.

Every user-facing failure is a ``StreamsqlError``: the CLI and the REPL print its
``render()`` (one paragraph, plus the offending line and a caret when the error has a
position) and never a Java or Python stack trace unless asked for one.
"""

from __future__ import annotations

from dataclasses import dataclass

# Starts the message of a ConnectorError raised in an executor (a jdbc read or lookup):
# runtime.failures finds it in Spark's error text and gives the user just that message.
EXECUTOR_MARK = "streamsql-connector-error|"


@dataclass(frozen=True)
class Position:
    """A 1-based line and column in a script."""

    line: int
    col: int


class StreamsqlError(Exception):
    """Base of all errors streamsql reports to users."""

    kind = "Error"

    def __init__(self, message: str, position: Position | None = None, source: str | None = None):
        super().__init__(message)
        self.message = message
        self.position = position
        self.source = source

    def with_source(self, source: str) -> StreamsqlError:
        """Attach the script text so the error can show the offending line."""
        if self.source is None:
            self.source = source
        return self

    def render(self) -> str:
        """The message, where it happened, and the line with a caret under the spot."""
        text = f"{self.kind}: {self.message}"
        if self.position is None:
            return text
        text += f" (line {self.position.line}, column {self.position.col})"
        lines = (self.source or "").splitlines()
        if 0 < self.position.line <= len(lines):
            line = lines[self.position.line - 1]
            text += f"\n  {line}\n  {' ' * (self.position.col - 1)}^"
        return text


class SqlSyntaxError(StreamsqlError):
    """A statement that does not parse."""

    kind = "SQL parse error"


class ValidationError(StreamsqlError):
    """A statement that parses but names something unknown or uses it wrongly."""

    kind = "SQL validation error"


class CatalogError(StreamsqlError):
    """A catalog object that is missing, duplicated or cannot be stored."""

    kind = "Catalog error"


class ConnectorError(StreamsqlError):
    """A table's connector options are wrong or its data cannot be reached."""

    kind = "Connector error"


class DataError(StreamsqlError):
    """Input data that cannot be read as the table's schema says."""

    kind = "Data error"


class ExecutionError(StreamsqlError):
    """A failure while Spark runs a job, reduced to its message."""

    kind = "Execution error"


class JobStateError(StreamsqlError):
    """A job's saved state does not fit what is asked of it (another query, a lost state)."""

    kind = "Job error"


def with_whole_chain(error: BaseException) -> BaseException:
    """``error`` with ``raise ... from None`` undone along its chain, so that a verbose trace
    also shows the Spark (and Java) failure it was translated from."""
    cause = error
    while cause is not None:
        cause.__suppress_context__ = False
        cause = cause.__cause__ or cause.__context__
    return error
