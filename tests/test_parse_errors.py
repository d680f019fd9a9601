"""Parse errors said about the SQL, at the first offending token, never with sqlglot internals."""

from __future__ import annotations

import random
import re

import pytest

from streamsql.catalog import Catalog
from streamsql.dialect.script import parse_script
from streamsql.errors import SqlSyntaxError, StreamsqlError
from streamsql.runtime.engine import Engine
from tests.conftest import ROOT

INTERNALS = re.compile(r"<class '|TokenType\.|Token token_type|Required keyword|\bCOMMAND\b|sqlglot\.")


def error_of(sql: str) -> SqlSyntaxError:
    with pytest.raises(SqlSyntaxError) as caught:
        parse_script(sql)
    return caught.value


RESERVED = "is a reserved word (quote it to use it as a name: `{}`)"


@pytest.mark.parametrize("sql, message, position", [
    # a reserved word where an expression or a name must be: Flink's "Encountered", at the word
    ("SELECT as * FROM t", 'Encountered "as"', (1, 8)),
    ("SELECT AS STRUCT a FROM t", 'Encountered "AS"', (1, 8)),
    ("SELECT a, as b FROM t", 'Encountered "as"', (1, 11)),
    ("SELECT f(as) FROM t", 'Encountered "as"', (1, 10)),
    ("SELECT a FROM t WHERE and x = 1", 'Encountered "and"', (1, 23)),
    ("SELECT a FROM t\nWHERE or x = 1", 'Encountered "or"', (2, 7)),
    ("SELECT a FROM t ORDER BY as", 'Encountered "as"', (1, 26)),
    ("SELECT a FROM t on", 'Encountered "on"', (1, 17)),
    ("SELECT a AS FROM t", f'Encountered "FROM": FROM {RESERVED.format("from")}', (1, 13)),
    ("SELECT group FROM t", f'Encountered "group": GROUP {RESERVED.format("group")}', (1, 8)),
    ("SELECT a, order FROM t", f'Encountered "order": ORDER {RESERVED.format("order")}', (1, 11)),
    ("SELECT t.end FROM t", f'Encountered "end": END {RESERVED.format("end")}', (1, 10)),
    ("SELECT a all FROM t", f'Encountered "all": ALL {RESERVED.format("all")}', (1, 10)),
    ("SELECT a FROM t AS as", f'Encountered "as": AS {RESERVED.format("as")}', (1, 20)),
    ("SELECT a FROM t WHERE in = 1", f'Encountered "in": IN {RESERVED.format("in")}', (1, 23)),
    ("SELECT values FROM t", f'Encountered "values": VALUES {RESERVED.format("values")}', (1, 8)),
    ("CREATE TABLE t (end INT) WITH ('connector' = 'datagen')", f'Encountered "end": END {RESERVED.format("end")}',
     (1, 17)),
    ("SELECT a FROM t WHERE a = 1 GROUP BY", "Expected an expression after GROUP BY at the end of the statement",
     (1, 37)),
])
def test_reserved_words_where_an_expression_or_a_name_must_be(sql, message, position):
    """sqlglot read each (``SELECT as * FROM t`` ran as ``SELECT *``); Flink refuses each."""
    error = error_of(sql)
    assert (error.message, (error.position.line, error.position.col)) == (message, position)


def test_reserved_words_quoted_and_keywords_in_their_places_still_parse():
    for sql in ("SELECT a AS x, a x, `group`, `as` AS `end`, t.`order` FROM t AS `on`",
                "SELECT TIMESTAMP '2024-01-01 00:00:00', DATE '2024-01-01', INTERVAL '1' SECOND FROM t",
                "SELECT CASE WHEN a > 1 THEN 1 ELSE 2 END, CAST(a AS INT), a IS NOT NULL, a NOT LIKE 'x' FROM t",
                "SELECT * FROM o JOIN r FOR SYSTEM_TIME AS OF o.ts AS r2 ON o.k = r2.k",
                "SELECT a FROM t WHERE a IN (1, 2) AND a BETWEEN 1 AND 2 OR a = 3 GROUP BY a HAVING COUNT(*) > 1",
                "SELECT ALL a FROM t UNION ALL SELECT DISTINCT b FROM u ORDER BY a LIMIT 3",
                "SELECT COUNT(DISTINCT a) FILTER (WHERE a > 1) OVER (PARTITION BY b ORDER BY ts"
                " ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM t",
                "SELECT user, value, `date`, year, CURRENT_TIMESTAMP FROM t",
                "CREATE TABLE t (`end` INT, `value` STRING) WITH ('connector' = 'datagen')",
                "SELECT * FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' SECOND))"):
        assert parse_script(sql)


@pytest.mark.parametrize("sql, message, position", [
    ("SELEC x FROM t", "Unknown statement 'SELEC'; did you mean SELECT?", (1, 1)),
    ("SELECT 1;\n  SELEC 2", "Unknown statement 'SELEC'; did you mean SELECT?", (2, 3)),
    ("FOO bar", "Unknown statement 'FOO' (statements start with SELECT, INSERT, CREATE, DROP, ALTER, SHOW, DESCRIBE, "
                "EXPLAIN, ...)", (1, 1)),
    ("SELECT a > FROM t", "Expected an expression after '>', found 'FROM'", (1, 12)),
    ("SELECT JSON_ARRAYAGG(DISTINCT k) FROM t", "Expected a value in JSON_ARRAYAGG, found 'DISTINCT'", (1, 22)),
    ("SELECT a FROM t WHERE a > = 1", "Expected an expression after '>', found '='", (1, 27)),
    ("SELECT a +", "Expected an expression after '+' at the end of the statement", (1, 11)),
    ("SELECT * FROM", "Expected a table name after FROM at the end of the statement", (1, 14)),
    ("SELECT * FROM WHERE x", "Expected a table name after FROM, found 'WHERE'", (1, 15)),
    ("SELECT a FROM t\nWHERE", "Expected a condition after WHERE at the end of the statement", (2, 6)),
    ("SELECT a FROM t WHERE a BETWEEN 1 AND", "Expected BETWEEN low AND high at the end of the statement", (1, 38)),
    ("SELECT a FROM t WHERE a BETWEEN 1 2", "Expected BETWEEN low AND high, found '2'", (1, 35)),
    ("SELECT a FROM t WHERE a BETWEEN b c GROUP BY a", "Expected BETWEEN low AND high, found 'c'", (1, 35)),
    ("SELECT B . , x FROM bid B", "Expected a column name after '.', found ','", (1, 12)),
    ("SELECT SPLIT_INDEX(a, ) FROM t", "SPLIT_INDEX(...) is missing an argument, found ')'", (1, 23)),
    ("SELECT * FROM TABLE(HOP(TABLE t, DESCRIPTOR(ts), INTERVAL '2' SECOND, , INTERVAL '10' SECOND))",
     "HOP: argument 4 is empty", (1, 71)),
    ("SELECT a AS FROM t", 'Encountered "FROM": FROM is a reserved word (quote it to use it as a name: `from`)',
     (1, 13)),
    # an AS that no name follows is no alias left out
    ("SELECT a, b AS , c FROM t", "Expected a name after AS, found ','", (1, 16)),
    ("SELECT a AS", "Expected a name after AS at the end of the statement", (1, 12)),
    # an empty item of a comma list is no item left out
    ("SELECT a, , b FROM t", "Expected an expression after ',', found ','", (1, 11)),
    ("SELECT , a FROM t", "Unexpected ','", (1, 8)),
    ("SELECT a FROM t GROUP BY a,", "Expected an expression after ',' at the end of the statement", (1, 28)),
    ("SELECT DATE_FORMAT( , 'HH') FROM t", "DATE_FORMAT(...) is missing an argument, found ','", (1, 21)),
    ("SELECT", "Expected an expression after SELECT at the end of the statement", (1, 7)),
    ("SELECT a FROM t AS", "Expected a name after AS at the end of the statement", (1, 19)),
    ("SELECT CAST(a AS) FROM t", "Expected TYPE after CAST, found ')'", (1, 17)),
    ("CREATE VIEW v AS SELECT 1 FROM t SELECT", 'Encountered "SELECT"', (1, 34)),
    # what sqlglot forgives and Flink does not
    ("SELECT a FROM t JOIN u", "INNER JOIN requires a condition: ON ... or USING (...)"
                               " (CROSS JOIN is the join of every pair of rows)", (1, 23)),
    ("SELECT a FROM t LEFT JOIN u WHERE a > 1", "LEFT JOIN requires a condition: ON ... or USING (...)"
                                                " (CROSS JOIN is the join of every pair of rows)", (1, 29)),
    ("SELECT a FROM t, ", "Expected a table after ',' at the end of the statement", (1, 17)),
    ("SELECT a FROM t , JOIN u ON t.a = u.a", "Expected a table after ',', found 'JOIN'", (1, 19)),
    ("SELECT a FROM . t", "Expected a table name, found '.'", (1, 15)),
    ("SELECT a FROM c..t", "Expected a table name, found '.'", (1, 17)),
    ("SELECT a TABLE FROM t", 'Encountered "TABLE": TABLE is a reserved word (quote it to use it as a name: `table`)',
     (1, 10)),
    ("SELECT a FROM t AS TABLE",
     'Encountered "TABLE": TABLE is a reserved word (quote it to use it as a name: `table`)', (1, 20)),
    ("SELECT a + INTERVAL b FROM t", "INTERVAL takes a quoted value and a unit, e.g. INTERVAL '10' SECOND", (1, 21)),
    ("SELECT a + INTERVAL 10 SECOND FROM t", "INTERVAL takes a quoted value and a unit, e.g. INTERVAL '10' SECOND",
     (1, 21)),
    ("SELECT a + INTERVAL '10' FROM t", "Expected a unit after INTERVAL '10' (e.g. INTERVAL '10' SECOND),"
                                        " found 'FROM'", (1, 26)),
    ("SELECT TUMBLE_END(ts, INTERVAL '1' SECOND AS e FROM t GROUP BY TUMBLE(ts, INTERVAL '1' SECOND)",
     "Expecting ), found 'AS'", (1, 43)),
    ("SELECT SUBSTRING(a FROM 2 FROM t", "Expecting ) at the end of the statement", (1, 33)),
    ("CREATE , TEMPORARY VIEW v AS SELECT 1", "Unexpected ','", (1, 8)),
    ("CREATE TABLE t , (a INT)", "Unexpected ','", (1, 16)),
    ("CREATE TEMPORARY VIEW v TEMPORARY AS SELECT 1", "Unexpected 'TEMPORARY': it goes right after CREATE"
                                                     " (CREATE TEMPORARY TABLE|VIEW|FUNCTION ...)", (1, 25)),
    ("CREATE VIEW v AS TEMPORARY SELECT 1", "Unexpected 'TEMPORARY': write CREATE TEMPORARY VIEW v AS SELECT ...",
     (1, 18)),
    # two string literals are one only across lines (the caret at the second's quote)
    ("SELECT 'google' 'baidu' FROM t", "String literal continued on same line", (1, 17)),
    ("SELECT a FROM t WHERE a = 'x'\n  OR a = 'y' /* no */ 'z'", "String literal continued on same line", (2, 23)),
    ("SELECT CAST(a AS) FROM t WHERE b = 'x'", "Expected TYPE after CAST, found ')'", (1, 17)),
    ("SELECT a + INTERVAL 'x' 'y' FROM t", "String literal continued on same line", (1, 25)),
    ("SET 'parallelism.default' '2' = '2'", "String literal continued on same line", (1, 27)),
    ("FROM t SELECT a", "Unexpected 'FROM': a query starts with SELECT (SELECT ... FROM t)", (1, 1)),
    ("SELECT 1;\nFROM SELECT a FROM t", "Unexpected 'FROM': a query starts with SELECT (SELECT ... FROM t)", (2, 1)),
    ("SELECT * FROM (FROM t) AS x", "Unexpected 'FROM': a query starts with SELECT (SELECT ... FROM t)", (1, 16)),
    ("FETCH x", "Unsupported statement: FETCH", (1, 1)),
    ("INSERT INTO SELECT a FROM t", "Expected a table name after INTO, found 'SELECT'", (1, 13)),
    ("INSERT INTO t", "Expected SELECT or VALUES after INSERT INTO ... at the end of the statement", (1, 14)),
    ("INSERT INTO t (a) WHERE", "Expected SELECT or VALUES after INSERT INTO ..., found 'WHERE'", (1, 19)),
])
def test_messages_and_positions(sql, message, position):
    error = error_of(sql)
    assert (error.message, (error.position.line, error.position.col)) == (message, position)


def test_the_caret_is_under_the_offending_token():
    assert error_of("SELECT a > FROM t").render().splitlines()[1:] == ["  SELECT a > FROM t", "             ^"]


def test_statements_that_parse_still_do():
    for sql in ("EXPLAIN SELECT 1", "STOP JOB 'abc'", "RESET 'k'", "RESET", "ALTER TABLE t RESET ('k')",
                "VALUES (1)", "(SELECT 1)", "WITH x AS (SELECT 1) SELECT * FROM x", "SHOW TABLES", "USE demo",
                "CREATE TEMPORARY FUNCTION f AS 'm.f' LANGUAGE PYTHON", "DESCRIBE t", "SET 'a' = 'b'",
                "SELECT a FROM t CROSS JOIN u", "SELECT a FROM t, u", "SELECT a FROM t JOIN u USING (a)",
                "SELECT a FROM t NATURAL JOIN u", "SELECT `table` FROM c.d.t AS `table`",
                "SELECT ts - INTERVAL '1 10' DAY TO HOUR + INTERVAL -'5' SECOND(3) FROM t",
                "SELECT SUBSTRING(a FROM 2 FOR 3), TRIM(BOTH 'x' FROM a), CAST(a AS INT) FROM t",
                "SELECT 'one string '\n  'over two lines' AS s, 'and' -- a comment\n ' one more' FROM t"):
        assert parse_script(sql)


def tokens(sql: str) -> list[str]:
    return re.findall(r"`[^`]*`|'[^']*'|\w+|[^\s\w]", sql)


def mutate(sql: str, r: random.Random) -> str:
    """Broken SQL as a person types it: a token dropped, repeated, swapped, cut off, misspelt,
    or a stray one inserted."""
    t = tokens(sql)
    kind, i = r.randrange(6), r.randrange(len(t))
    if kind == 0:
        del t[i]
    elif kind == 1:
        t.insert(i, t[r.randrange(len(t))])
    elif kind == 2:
        j = r.randrange(len(t))
        t[i], t[j] = t[j], t[i]
    elif kind == 3:
        t = t[: max(1, i)]
    elif kind == 4:
        t[i] = "zz_" + re.sub(r"\W", "", t[i])
    else:
        t.insert(i, r.choice(["(", ")", ",", "'", "`", "INTERVAL", "TABLE", "DESCRIPTOR(", ";", ">", "AND"]))
    return " ".join(t)


def test_broken_nexmark_queries_get_messages_about_the_sql(tmp_path):
    """Seeded mutations of the Nexmark queries, planned (no Spark): every error is a
    StreamsqlError whose message names no Python class, token type or COMMAND."""
    queries = []
    for path in sorted((ROOT / "queries" / "nexmark").glob("q*.sql")):
        text = re.sub(r"--[^\n]*", "", path.read_text())
        queries += [s.strip() for s in text.split(";") if s.strip() and not s.strip().upper().startswith("USE")]
    engine = Engine(Catalog(ROOT / "catalog"), base_dir=tmp_path, log=lambda m: None)
    r = random.Random(7)
    leaks, outcomes = [], {"error": 0, "accepted": 0}
    for _ in range(400):
        broken = "USE nexmark;\n" + mutate(r.choice(queries), r)
        try:
            engine.plan_script(broken)
            outcomes["accepted"] += 1
        except StreamsqlError as error:
            outcomes["error"] += 1
            if INTERNALS.search(error.render()):
                leaks.append((broken, error.render()))
    assert leaks == []
    assert outcomes["error"] > 250  # the mutations do break the SQL
