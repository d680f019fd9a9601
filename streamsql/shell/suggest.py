"""What may come at the cursor: the kinds of names the shell completes there, as pgcli does it.

``suggest_type(full_text, text_before_cursor)`` is pure: it reads the statement the cursor
is in and returns suggestion kinds (tables of a database, the columns of the tables a
statement reads, connector options inside ``WITH (``, setting keys after ``SET '``, ...).
Mapping the kinds to names from the catalog is the completer's job (``shell/completer.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from streamsql.dialect.flink import Flink

_DIALECT = Flink()


@dataclass(frozen=True)
class TableRef:
    """A relation a statement names, with the alias it gets there."""

    schema: str | None
    name: str
    alias: str | None = None


@dataclass(frozen=True)
class Keyword:
    pass


@dataclass(frozen=True)
class Function:
    pass


@dataclass(frozen=True)
class Database:
    pass


@dataclass(frozen=True)
class Table:
    """Tables and views of ``schema`` (None: the current database)."""

    schema: str | None = None


@dataclass(frozen=True)
class Column:
    """The columns of ``tables``; ``qualified`` after ``t.``, where only t's columns fit."""

    tables: tuple[TableRef, ...] = ()
    qualified: bool = False


@dataclass(frozen=True)
class ConnectorOption:
    """Option names inside ``WITH (`` of a table of this connector (None: not chosen yet)."""

    connector: str | None = None
    format: str | None = None
    columns: tuple[str, ...] = ()  # the table's columns, for per-column options (datagen's fields.<col>.*)


@dataclass(frozen=True)
class Connector:
    pass


@dataclass(frozen=True)
class Setting:
    pass


Suggestion = Keyword | Function | Database | Table | Column | ConnectorOption | Connector | Setting

# Keywords that end a table reference: what follows them is never an alias.
_NOT_ALIAS = {
    "WHERE", "JOIN", "ON", "GROUP", "ORDER", "LEFT", "RIGHT", "INNER", "FULL", "CROSS", "OUTER", "LIMIT",
    "UNION", "HAVING", "WINDOW", "FOR", "AS", "SELECT", "FROM", "LATERAL", "TABLE", "USING", "NATURAL", "SET",
    "VALUES", "WITH", "PARTITION", "EXCEPT", "INTERSECT", "MINUS", "MATCH_RECOGNIZE", "OFFSET", "FETCH",
}
_TABLE_AFTER = {"FROM", "JOIN", "INTO", "DESCRIBE", "UPDATE"}
_OBJECT_KINDS = {"TABLE", "VIEW"}
_WORD = re.compile(r"[\w$`.]*$")


def suggest_type(full_text: str, text_before_cursor: str) -> list[Suggestion]:
    """The kinds of names that fit at the cursor, most specific first."""
    start, open_quote, in_comment = _scan(text_before_cursor)
    if in_comment:
        return []
    before = text_before_cursor[start:]
    statement = before + _rest_of_statement(full_text[len(text_before_cursor):])
    if open_quote is not None:
        return _in_string(before[: open_quote - start], statement)
    word = _WORD.search(before).group(0)
    tokens = _tokens(before[: len(before) - len(word)])
    words = [t.text.upper() for t in tokens]
    tables = tuple(statement_tables(statement))
    if "." in word:
        parent = word.rsplit(".", 1)[0].replace("`", "")
        if _expects_table(words):
            return [Table(schema=parent.split(".")[-1])]
        return [Column(tables=_resolve(parent, tables), qualified=True)]
    if _expects_database(words):
        return [Database()]
    if _expects_table(words):
        return [Table(), Database()]
    if words[-2:] in (["CREATE", "TABLE"], ["CREATE", "VIEW"], ["CREATE", "DATABASE"], ["CREATE", "FUNCTION"]):
        return []  # a new name
    return [Column(tables=tables), Function(), Keyword()]


def statement_tables(statement: str) -> list[TableRef]:
    """Relations a statement reads or writes, with their aliases: after FROM (a list),
    JOIN, INTO and a window TVF's TABLE argument."""
    tokens = _tokens(statement)
    found, i = [], 0
    while i < len(tokens):
        word = tokens[i].text.upper()
        after_paren = word == "TABLE" and i > 0 and tokens[i - 1].token_type in (TokenType.L_PAREN, TokenType.COMMA)
        if word in ("FROM", "JOIN", "INTO") or after_paren:
            i += 1
            while True:
                name, i = _name(tokens, i)
                if name is None:
                    break
                alias, i = _alias(tokens, i)
                found.append(TableRef(name[-2] if len(name) > 1 else None, name[-1], alias))
                if word != "FROM" or i >= len(tokens) or tokens[i].token_type != TokenType.COMMA:
                    break
                i += 1
        else:
            i += 1
    return found


def _in_string(prefix: str, statement: str) -> list[Suggestion]:
    """Inside a quote: a setting key after SET/RESET, an option name inside WITH (...)."""
    head = prefix.rstrip()
    if re.search(r"(?:^|\s)(?:SET|RESET)$", head, re.IGNORECASE) and not _open_option_list(prefix):
        return [Setting()]
    if not _open_option_list(prefix):
        return []
    if re.search(r"'connector'\s*=$", head, re.IGNORECASE):
        return [Connector()]
    if head.endswith(("(", ",")):
        connector = re.search(r"'connector'\s*=\s*'([^']*)'", statement, re.IGNORECASE)
        fmt = re.search(r"'format'\s*=\s*'([^']*)'", statement, re.IGNORECASE)
        return [ConnectorOption(connector.group(1) if connector else None, fmt.group(1) if fmt else None,
                                defined_columns(statement))]
    return []


def defined_columns(statement: str) -> tuple[str, ...]:
    """The column names a CREATE TABLE statement defines (before its WITH)."""
    match = re.search(r"\bTABLE\s+[\w.`]+\s*\((.*)\)\s*(?:PARTITIONED\s+BY\s*\([^)]*\)\s*)?WITH\s*\(", statement,
                      re.IGNORECASE | re.DOTALL)
    if match is None:
        return ()
    depth, element, elements = 0, "", []
    for char in match.group(1) + ",":
        depth += {"(": 1, ")": -1, "<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            elements.append(element.strip())
            element = ""
        else:
            element += char
    names = [re.match(r"`([^`]+)`|(\w+)", e) for e in elements if e]
    return tuple(m.group(1) or m.group(2) for m in names
                 if m and (m.group(1) or m.group(2).upper() not in ("WATERMARK", "PRIMARY", "CONSTRAINT")))


def _open_option_list(prefix: str) -> bool:
    """The cursor is inside the parentheses of a WITH ( or a SET ( (ALTER TABLE)."""
    opener = None
    for match in re.finditer(r"\b(?:WITH|SET)\s*\(", prefix, re.IGNORECASE):
        opener = match
    if opener is None:
        return False
    depth = 1
    for char in re.sub(r"'(?:[^']|'')*'", "''", prefix[opener.end():]):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return False
    return True


def _expects_table(words: list[str]) -> bool:
    """The words before the cursor end where a table or view name goes."""
    if not words or _show_listing(words):
        return False
    last, previous = words[-1], words[-2] if len(words) > 1 else ""
    if last in _TABLE_AFTER:
        return True
    if last in ("FROM", "IN"):
        return words[:2] == ["SHOW", "COLUMNS"]
    if last in _OBJECT_KINDS:  # DROP TABLE, ALTER TABLE, SHOW CREATE VIEW, TABLE(... TABLE t
        return previous in ("DROP", "ALTER", "(", ",") or words[-3:-1] == ["SHOW", "CREATE"]
    if last == "EXISTS":
        return words[:1] == ["DROP"] and words[-3:-2] in (["TABLE"], ["VIEW"])
    if last == "LIKE":  # CREATE TABLE t (...) WITH (...) LIKE source
        return words[:1] == ["CREATE"] and "TABLE" in words and "SELECT" not in words
    return False


def _show_listing(words: list[str]) -> bool:
    """SHOW TABLES FROM / IN: a database comes next."""
    return len(words) >= 3 and words[-3] == "SHOW" and words[-2] in ("TABLES", "VIEWS", "FUNCTIONS")


def _expects_database(words: list[str]) -> bool:
    if not words:
        return False
    if words[-1] in ("FROM", "IN") and _show_listing(words):
        return True
    return words[-1] == "USE" or words[-2:] in (["DROP", "DATABASE"], ["USE", "CATALOG"]) or (
        words[-1] == "DATABASE" and words[-2:-1] == ["DROP"]
    )


def _resolve(parent: str, tables: tuple[TableRef, ...]) -> tuple[TableRef, ...]:
    """What ``parent.`` names: an alias, a table of the statement, or any table."""
    for ref in tables:
        if ref.alias == parent:
            return (ref,)
    parts = parent.split(".")
    for ref in tables:
        if ref.alias is None and ref.name == parts[-1] and (len(parts) == 1 or ref.schema == parts[-2]):
            return (ref,)
    return (TableRef(parts[-2] if len(parts) > 1 else None, parts[-1]),)


def _name(tokens: list[Token], i: int) -> tuple[list[str] | None, int]:
    parts = []
    while i < len(tokens) and _is_name(tokens[i]):
        parts.append(tokens[i].text)
        i += 1
        if i < len(tokens) and tokens[i].token_type == TokenType.DOT:
            i += 1
        else:
            break
    return (parts or None), i


def _alias(tokens: list[Token], i: int) -> tuple[str | None, int]:
    j = i + 1 if i < len(tokens) and tokens[i].token_type == TokenType.ALIAS else i
    if j < len(tokens) and _is_name(tokens[j]):
        return tokens[j].text, j + 1
    return None, i


def _is_name(token: Token) -> bool:
    if token.token_type == TokenType.IDENTIFIER:
        return True
    return bool(re.fullmatch(r"[A-Za-z_$][\w$]*", token.text)) and token.text.upper() not in _NOT_ALIAS


def _tokens(text: str) -> list[Token]:
    try:
        return _DIALECT.tokenize(text)
    except TokenError:
        return []


def _scan(text: str) -> tuple[int, int | None, bool]:
    """Where the cursor's statement starts, the offset of an unclosed quote (or None),
    and whether the text ends inside a comment."""
    start, quote, comment, i = 0, None, None, 0
    while i < len(text):
        char = text[i]
        if comment == "--":
            comment = None if char == "\n" else comment
        elif comment == "/*":
            if text.startswith("*/", i):
                comment, i = None, i + 1
        elif quote is not None:
            if text[i] == text[quote]:
                quote = None
        elif char in "'`":
            quote = i
        elif text.startswith("--", i) or text.startswith("/*", i):
            comment, i = text[i:i + 2], i + 1
        elif char == ";":
            start = i + 1
        i += 1
    open_quote = quote if quote is not None and text[quote] == "'" else None
    return start, open_quote, comment is not None


def _rest_of_statement(after: str) -> str:
    """The text after the cursor up to the end of its statement (for aliases typed later)."""
    quote = None
    for i, char in enumerate(after):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'`":
            quote = char
        elif char == ";":
            return after[:i]
    return after
