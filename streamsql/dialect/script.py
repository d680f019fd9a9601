"""Splitting a script into statements and parsing each with exact positions.

The split uses the Flink tokenizer, so a ';' inside a string literal, a quoted
identifier or a comment never ends a statement. Each statement is parsed with the
text before it blanked out (newlines kept), so every line and column the parser
reports is a position in the whole script.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from streamsql.dialect.flink import Flink
from streamsql.dialect.messages import describe
from streamsql.dialect.reserved import encountered, is_reserved
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
        tokens = _DIALECT.tokenize(padded)
    except TokenError as error:
        raise _token_error(script, error) from None
    _check_statement_start(tokens, script)
    parser = _DIALECT.parser()
    try:
        expressions = parser.parse(tokens, padded)
    except ParseError as error:
        raise _syntax_error(error, parser, script) from None
    expression = expressions[0]
    if isinstance(expression, exp.Insert) and not isinstance(expression.this, (exp.Table, exp.Schema)):
        into = next((t for t in tokens if t.token_type in (TokenType.INTO, TokenType.OVERWRITE, TokenType.TABLE)), tokens[0])
        following = tokens[tokens.index(into) + 1] if into is not tokens[-1] else into
        raise SqlSyntaxError(f"Expected a table name after {into.text.upper()}, found '{following.text}'",
                             _token_position(following, script), script)
    if isinstance(expression, exp.Command) and expression.name.upper() not in _COMMANDS:
        raise SqlSyntaxError(f"Unsupported statement: {expression.name.upper()}", _token_position(tokens[0], script), script)
    return expression


# Raw commands the planner takes (sqlglot leaves them unparsed); any other is refused here.
_COMMANDS = {"STOP", "RESET", "ALTER"}
# What a Flink statement starts with (EXPLAIN is a DESCRIBE token, STOP and RESET commands).
_STATEMENT_STARTS = {
    *Flink.Parser.STATEMENT_PARSERS, *Flink.Tokenizer.COMMANDS, TokenType.SELECT, TokenType.WITH,
    TokenType.L_PAREN, TokenType.VALUES, TokenType.FROM, TokenType.TABLE,
}
_STATEMENT_WORDS = ["SELECT", "INSERT", "CREATE", "DROP", "ALTER", "SHOW", "DESCRIBE", "EXPLAIN", "USE", "SET",
                    "RESET", "STOP", "EXECUTE", "WITH", "VALUES"]


def _check_statement_start(tokens: list, script: str) -> None:
    """A statement starts with a keyword: `SELEC x FROM t` is refused at SELEC, not at FROM."""
    first = tokens[0] if tokens else None
    if first is None or first.token_type in _STATEMENT_STARTS:
        return
    guess = difflib.get_close_matches(first.text.upper(), _STATEMENT_WORDS, n=1, cutoff=0.6)
    hint = f"; did you mean {guess[0]}?" if guess else f" (statements start with {', '.join(_STATEMENT_WORDS[:8])}, ...)"
    raise SqlSyntaxError(f"Unknown statement '{first.text}'{hint}", _token_position(first, script), script)


# sqlglot's messages that say no more than Flink's ``Encountered "x"``.
_VAGUE = "Incomplete SQL"


def _syntax_error(error: ParseError, parser, script: str) -> SqlSyntaxError:
    """sqlglot's error said about the SQL, at the token the parser stopped at (or just after
    the last one when the statement ended too early)."""
    detail = error.errors[0] if error.errors else {}
    current, previous = parser._curr, parser._prev
    at_end = not current
    found = None if at_end else current.text
    before = previous.text if previous is not None else None
    message = describe(detail.get("description") or str(error), found, before)
    if not at_end and is_reserved(current) and (message == f"Unexpected '{found}'" or message.startswith(_VAGUE)):
        message = encountered(current)  # Flink's words for a reserved word out of place
    if at_end and previous is not None:
        position = _position(script, previous.end + 1)
    elif not at_end:
        position = _token_position(current, script)
    elif detail.get("line") and detail.get("col"):
        position = Position(detail["line"], max(1, detail["col"] - len(detail.get("highlight") or "") + 1))
    else:
        position = None
    return SqlSyntaxError(message, position, script)


def _token_position(token, script: str) -> Position:
    """Where a token starts: its first character's offset (its text leaves out a string's
    quotes, and sqlglot's col is that of its last character)."""
    return _position(script, token.start)


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
