"""`streamsql serve --read-only`: answer queries over the catalog's tables, refuse the rest.

For BI tools that should see the tables and nothing else: no DDL, no INSERT, no jars, no
functions of their own, no reads of arbitrary paths. Each refusal is one line naming what
was refused, Flink-like: ``streamsql serves read-only: CREATE TABLE is refused (line 1,
column 1)``.

- **The SQL Gateway** (``--gateway``) runs streamsql's own planner, so its statements are
  classified here before anything is planned (``check_script``): queries (SELECT, WITH,
  VALUES), SHOW, DESCRIBE, EXPLAIN of a query, USE, SET and RESET of session options pass;
  everything else is refused by its leading keywords (ADD JAR too, which the planner does
  not even parse). Spark's own settings (``spark.*`` keys) cannot be set, by SET or by a
  session's or a statement's properties (``check_settings``). Flink SQL reads no path but
  through a table, and the catalog's tables cannot be created or changed.
- **HiveServer2 and Spark Connect** run Spark's SQL and plans, so read-only is enforced in
  the server's JVM (``read_only_java/*.java``, compiled by runtime.java_build): a session
  extension that refuses, in each SQL statement as it is parsed and in each plan once it is
  resolved, commands that write or change the catalog, relations other than catalog tables,
  user-defined functions, reflect() and TRANSFORM scripts (``spark.sql.runSQLOnFiles`` off,
  a `` parquet.`/path` `` read is named as one); and a gRPC interceptor that refuses,
  before Spark plans them, the Connect requests Spark would act on while planning
  (artifacts, Python/Scala/Java functions, ``spark.read`` of paths, writes, streams, ML, the
  catalog API's changes).
  serve's own session, which registers the catalog's tables, holds a key
  (``ADMIN_CONF``) no client has: the server reads it from an owner-only file.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from streamsql.errors import Position, StreamsqlError

SOURCES = Path(__file__).with_name("read_only_java")
EXTENSION = "streamsql.readonly.ReadOnly"
INTERCEPTOR = "streamsql.readonly.ReadOnlyInterceptor"
ADMIN_CONF = "spark.streamsql.readOnly.admin"  # ReadOnly.java's names
KEY_FILE_ENV = "STREAMSQL_READ_ONLY_KEY_FILE"
# What the JVM side compiles against (PySpark's own jars).
COMPILE_JARS = ("spark-sql_*.jar", "spark-catalyst_*.jar", "spark-sql-api_*.jar", "spark-common-utils_*.jar",
                "spark-common-utils-java_*.jar", "spark-core_*.jar", "spark-connect_*.jar",
                "spark-hive-thriftserver_*.jar", "scala-library-*.jar")


class ReadOnlyError(StreamsqlError):
    """A statement read-only serving refuses."""

    kind = "streamsql serves read-only"


# -- the SQL Gateway: statements classified by their leading keywords and their syntax tree --

# Statements that only read (EXPLAIN and SET are looked at further).
QUERIES = {"SELECT", "WITH", "VALUES", "(", "TABLE"}
ALLOWED = QUERIES | {"SHOW", "DESCRIBE", "DESC", "EXPLAIN", "USE", "SET", "RESET"}
# What else a Flink (or streamsql) statement starts with: each writes, loads or changes something.
STATEMENTS = {"CREATE", "DROP", "ALTER", "INSERT", "UPSERT", "ADD", "REMOVE", "LOAD", "UNLOAD", "STOP", "EXECUTE",
              "BEGIN", "DELETE", "UPDATE", "TRUNCATE", "ANALYZE", "CALL", "MERGE", "REPLACE", "COMPILE"}
# The words after the first that still name the statement (CREATE TEMPORARY TABLE, ADD JAR).
_KIND_WORDS = {"OR", "REPLACE", "TEMPORARY", "SYSTEM", "TABLE", "VIEW", "FUNCTION", "DATABASE", "SCHEMA", "CATALOG",
               "MODULE", "MODULES", "JAR", "JARS", "JOB", "INTO", "OVERWRITE", "STATEMENT", "SET", "MATERIALIZED",
               "MODEL", "IF", "NOT", "EXISTS"}
# Flink's words for what EXPLAIN can show before the statement (EXPLAIN CHANGELOG_MODE SELECT ...).
_EXPLAIN_DETAILS = {"PLAN", "FOR", "ESTIMATED_COST", "CHANGELOG_MODE", "JSON_EXECUTION_PLAN", "PLAN_ADVICE", ","}


def check_script(script: str) -> None:
    """Raise ReadOnlyError at the first statement of ``script`` read-only serving refuses.
    A script that does not parse is left to the planner, which says where."""
    from streamsql.dialect.flink import Flink

    try:
        tokens = Flink().tokenize(script)
    except TokenError:
        return  # the planner reports where the string or comment is left open
    for statement in _split(tokens):
        words = _words(script, statement)
        kind = statement_kind(words)
        if kind is not None:
            raise ReadOnlyError(f"{kind} is refused", _position(script, statement[0].start), script)
    _check_parsed(script)


def statement_kind(words: list[str]) -> str | None:
    """The statement ``words`` start, when read-only refuses it ('CREATE TABLE', 'ADD JAR',
    'EXPLAIN INSERT INTO'); None for one it takes."""
    if not words:
        return None
    first = words[0]
    if first == "EXPLAIN":
        rest = words[1:]
        while rest and rest[0] in _EXPLAIN_DETAILS:
            rest = rest[1:]
        return None if not rest or rest[0] in QUERIES else f"EXPLAIN {_named(rest)}"
    if first == "SET" and len(words) > 1 and words[1].lower().startswith("'spark."):
        return f"SET {words[1]}"  # Spark's own settings
    if first in ALLOWED or first not in STATEMENTS:
        return None  # (a word that starts no statement: the planner says so)
    return _named(words)


def check_settings(settings: dict | None, what: str = "session property") -> None:
    """Refuse Spark's own settings among a session's or a statement's properties."""
    for key in settings or {}:
        if str(key).lower().startswith("spark."):
            raise ReadOnlyError(f"the {what} '{key}' is refused")


def _named(words: list[str]) -> str:
    kind = words[:1]
    for word in words[1:]:
        if word not in _KIND_WORDS:
            break
        kind.append(word)
    return " ".join(w for w in kind if w not in ("IF", "NOT", "EXISTS")) or "an empty statement"


def _check_parsed(script: str) -> None:
    """The syntax tree agrees: each statement a query or one that only reads (a second look,
    should a statement's words and its tree ever differ)."""
    from streamsql.dialect.flink import Show
    from streamsql.dialect.script import parse_script
    from streamsql.errors import SqlSyntaxError

    try:
        statements = parse_script(script)
    except SqlSyntaxError:
        return
    for statement in statements:
        node = statement.expression
        if isinstance(node, exp.Describe) and not isinstance(node.this, exp.Table):
            node = node.this  # EXPLAIN: what it explains
        reads = isinstance(node, (exp.Query, exp.Values, Show, exp.Describe, exp.Use, exp.Set)) or (
            isinstance(node, exp.Command) and node.name.upper() == "RESET")
        if not reads:
            raise ReadOnlyError(f"{node.key.upper()} is refused", statement.position, script)


def _split(tokens: list) -> list[list]:
    statements, current = [], []
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if current:
                statements.append(current)
            current = []
        else:
            current.append(token)
    return statements + ([current] if current else [])


def _words(script: str, tokens: list) -> list[str]:
    """Keywords upper-cased, 'strings' and `names` as written. A command keyword's rest (STOP
    JOB ..., EXECUTE STATEMENT SET ...) is one unquoted string token to sqlglot: its words."""
    words = []
    for token in tokens:
        if token.token_type == TokenType.STRING and script[token.start:token.start + 1] != "'":
            words += [w if w.startswith("'") else w.upper() for w in _RAW_WORDS.findall(token.text)]
        elif token.token_type == TokenType.STRING:
            words.append(f"'{token.text}'")
        elif token.token_type == TokenType.IDENTIFIER:  # `quoted`: a name, never a keyword
            words.append(f"`{token.text}`")
        else:
            words.append(token.text.upper())
    return words


_RAW_WORDS = re.compile(r"'(?:[^']|'')*'|`[^`]*`|\w+|\S")


def _position(script: str, offset: int) -> Position:
    line_start = script.rfind("\n", 0, offset) + 1
    return Position(script.count("\n", 0, offset) + 1, offset - line_start + 1)


# -- HiveServer2 and Spark Connect: Spark settings and the JVM side -----------------------------

_admin_key: str | None = None


def admin_key() -> str:
    """This process's key for serve's own session (the server reads it from a file)."""
    global _admin_key
    if _admin_key is None:
        _admin_key = secrets.token_urlsafe(32)
    return _admin_key


def jar() -> Path | None:
    """The jar of read_only_java/*.java (runtime.java_build), or None without a javac."""
    from streamsql.runtime import java_build

    needed = [java_build.spark_jar(pattern) for pattern in COMPILE_JARS]
    if any(j is None for j in needed):
        return None
    return java_build.built_jar("streamsql-read-only", sorted(SOURCES.glob("*.java")), needed)


def server_conf(conf: dict[str, str], scratch: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``conf`` with read-only serving on, and the environment the server needs for it: the
    name of an owner-only file in ``scratch`` holding the admin key (never the key itself,
    nor on a command line)."""
    built = jar()
    if built is None:
        raise StreamsqlError("Read-only serving needs its checks compiled by a JDK's javac, and they could not be"
                             " (set JAVA_HOME to a JDK)")
    from streamsql.runtime.java_build import on_driver_class_path

    conf = on_driver_class_path(conf, built)
    extensions = [e for e in (conf.get("spark.sql.extensions") or "").split(",") if e]
    conf["spark.sql.extensions"] = ",".join([*extensions, EXTENSION])
    conf["spark.connect.grpc.interceptor.classes"] = INTERCEPTOR
    conf["spark.sql.runSQLOnFiles"] = "false"  # `parquet`.`/path` stays a table name (ReadOnly names it)
    # ${env:...} and ${system:...} in SQL text would show the server's environment (its token).
    conf["spark.sql.variable.substitute"] = "false"
    # Clients send plans uncompressed, which the interceptor can read (it refuses compressed ones).
    conf["spark.connect.session.planCompression.threshold"] = "-1"
    # A refusal (any error) reaches a Connect client as its message, without the server's stack.
    conf["spark.sql.connect.serverStacktrace.enabled"] = "false"
    key_file = Path(scratch) / "read-only.key"
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(admin_key())
    return conf, {KEY_FILE_ENV: str(key_file)}


def as_admin(spark) -> None:
    """Make ``spark`` (serve's own Connect session) exempt: it registers the catalog's tables."""
    spark.conf.set(ADMIN_CONF, admin_key())
