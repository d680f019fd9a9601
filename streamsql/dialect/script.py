"""Splitting a script into statements and parsing each with exact positions.

The split uses the Flink tokenizer, so a ';' inside a string literal, a quoted
identifier or a comment never ends a statement. Each statement is parsed with the
text before it blanked out (newlines kept), so every line and column the parser
reports is a position in the whole script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from streamsql.dialect.flink import Flink
from streamsql.errors import Position, SqlSyntaxError

_DIALECT = Flink()


@dataclass(frozen=True)
class Statement:
    """One parsed statement, its text and where it starts in the script."""

    expression: exp.Expression
    sql: str
    position: Position


class StatementSet(exp.Expression):
    """EXECUTE STATEMENT SET BEGIN INSERT ...; INSERT ...; END: one job of several INSERTs."""

    arg_types = {"expressions": True}


_SET_BEGIN = re.compile(r"^\s*(?:EXECUTE\s+STATEMENT\s+SET\s+BEGIN|BEGIN\s+STATEMENT\s+SET)\b", re.IGNORECASE)
_SET_END = re.compile(r"^\s*END\s*$", re.IGNORECASE)


def parse_script(script: str) -> list[Statement]:
    """Parse every statement of a script; the first bad one raises SqlSyntaxError."""
    statements: list[Statement] = []
    open_set: list[Statement] | None = None
    set_start = None
    for start, end in _statement_spans(script):
        text = script[start:end]
        begin = _SET_BEGIN.match(text)
        if begin:
            if open_set is not None:
                raise SqlSyntaxError("A STATEMENT SET cannot contain another", _position(script, start), script)
            open_set, set_start = [], start
            start += begin.end()
            text = script[start:end]
            if not text.strip():
                continue
        elif open_set is not None and _SET_END.match(text):
            node = StatementSet(expressions=[s.expression for s in open_set])
            statements.append(Statement(node, script[set_start:end], _position(script, set_start)))
            open_set = None
            continue
        padded = _blank(script[:start]) + text
        statement = Statement(_parse_one(padded, script), text, _position(script, start))
        if open_set is None:
            statements.append(statement)
        elif isinstance(statement.expression, exp.Insert):
            open_set.append(statement)
        else:
            raise SqlSyntaxError("A STATEMENT SET holds only INSERT INTO statements", statement.position, script)
    if open_set is not None:
        raise SqlSyntaxError("STATEMENT SET is missing its END", _position(script, set_start), script)
    return statements


def parse_statement(sql: str) -> exp.Expression:
    """Parse a single statement (a trailing ';' is allowed)."""
    statements = parse_script(sql)
    if len(statements) != 1:
        raise SqlSyntaxError(f"expected one statement, found {len(statements)}")
    return statements[0].expression


def is_complete(text: str) -> bool:
    """True when the text ends with ';' outside strings and comments (REPL submit)."""
    try:
        tokens = _DIALECT.tokenize(text)
    except TokenError:
        return False
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def _statement_spans(script: str) -> list[tuple[int, int]]:
    """(start, end) offsets of each non-empty statement, without the ';'."""
    try:
        tokens = _DIALECT.tokenize(script)
    except TokenError as error:
        raise _token_error(script, error) from None
    spans, first, last = [], None, None
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if first is not None:
                spans.append((first.start, last.end + 1))
            first = None
        else:
            first = first or token
            last = token
    if first is not None:
        spans.append((first.start, last.end + 1))
    return spans


def _parse_one(padded: str, script: str) -> exp.Expression:
    try:
        expressions = _DIALECT.parse(padded)
    except ParseError as error:
        raise _syntax_error(error, script) from None
    except TokenError as error:
        raise _token_error(script, error) from None
    return expressions[0]


def _syntax_error(error: ParseError, script: str) -> SqlSyntaxError:
    detail = error.errors[0] if error.errors else {}
    message = detail.get("description") or str(error)
    line, col = detail.get("line"), detail.get("col")
    highlight = detail.get("highlight") or ""
    if highlight and "near" not in message:
        message = f"{message} near '{highlight}'"
    position = None
    if line and col:
        # sqlglot reports the column of the token's last character; point at its first.
        position = Position(line, max(1, col - len(highlight) + 1))
    return SqlSyntaxError(message, position, script)


def _token_error(script: str, error: TokenError) -> SqlSyntaxError:
    """An unterminated string, identifier or comment: point at where it opens."""
    start = _unterminated_start(script)
    message = "unterminated string, quoted identifier or comment"
    if start is None:
        return SqlSyntaxError(f"{message}: {str(error).splitlines()[0]}", None, script)
    return SqlSyntaxError(message, _position(script, start), script)


def _unterminated_start(script: str) -> int | None:
    """Offset of the quote or comment opener that is never closed."""
    pattern = re.compile(r"'(?:[^']|'')*'|`[^`]*`|--[^\n]*|/\*.*?\*/|(['`]|/\*)", re.DOTALL)
    for match in pattern.finditer(script):
        if match.group(1):
            return match.start(1)
    return None


def _position(script: str, offset: int) -> Position:
    line = script.count("\n", 0, offset) + 1
    col = offset - (script.rfind("\n", 0, offset) + 1) + 1
    return Position(line, col)


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)
