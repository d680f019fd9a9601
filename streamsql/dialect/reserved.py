"""Flink's reserved words where a name or an expression must be: ``Encountered "as"``.

sqlglot reads many dialects, so it takes most keywords as names when a name fits:
``SELECT as * FROM t`` is ``SELECT *`` to it (BigQuery's ``SELECT AS STRUCT`` with
nothing after the AS), ``SELECT a group FROM t`` an alias named ``group``, ``FROM t AS
on`` a table alias, ``SELECT a AS FROM t`` an alias named FROM. Flink's parser (Calcite)
reserves these words: each is a syntax error there, ``Encountered "as" at line 1, column
8``, and running the query sqlglot read instead would run another query than the one
written. A reserved word is a name only when quoted with backticks (`` `group` ``).

Only the words of SQL's structure are checked (clauses, operators, joins, set
operations): those are never a function or a type in Flink, so refusing them as names
cannot refuse valid SQL. Reserved words that are also functions or types (``DATE``,
``YEAR``, ``USER``, ``COUNT``, ``VALUE``, ...) are left to the planner.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

# Calcite's reserved words of SQL's structure (Flink's "Reserved Keywords" list holds them
# all); sqlglot has keyword tokens for some and reads the others as plain words.
RESERVED = frozenset("""
    ALL AND ANY AS ASYMMETRIC BETWEEN BOTH BY CASE CROSS CUBE DISTINCT ELSE END ESCAPE
    EXCEPT EXISTS FETCH FOR FROM FULL GROUP HAVING IN INNER INSERT INTERSECT INTERVAL INTO
    IS JOIN LATERAL LEADING LIKE LIMIT MATCH_RECOGNIZE MINUS NATURAL NOT NULL OFFSET ON OR
    ORDER OUTER OVER PARTITION ROLLUP SELECT SIMILAR SOME SYMMETRIC TABLE THEN TRAILING
    UNION UNNEST USING VALUES WHEN WHERE WINDOW WITH WITHIN TRUE FALSE
""".split())

_QUOTED = (TokenType.IDENTIFIER, TokenType.STRING)


def is_reserved(token) -> bool:
    """An unquoted reserved word (a backtick-quoted one is an IDENTIFIER token)."""
    return token is not None and token.token_type not in _QUOTED and token.text.upper() in RESERVED


def encountered(token, as_name: bool = False) -> str:
    """Flink's message for a token where it cannot be: ``Encountered "as"`` (the position
    is the error's); for a reserved word taken as a name, how to write it as one."""
    message = f'Encountered "{token.text}"'
    if as_name:
        message += f": {token.text.upper()} is a reserved word (quote it to use it as a name: `{token.text.lower()}`)"
    return message


class ReservedWordsParser:
    """Mixed into the Flink dialect's parser, before sqlglot's ``Parser``."""

    def _parse_statement(self):
        """A name is checked once the statement is parsed, not where sqlglot reads one:
        sqlglot tries names speculatively and backs out (``CREATE TEMPORARY TABLE`` reads
        TABLE as a column, then as a keyword), so only the names of the tree are names."""
        statement = super()._parse_statement()
        if statement is not None:
            self._check_names(statement)
        return statement

    def _check_names(self, statement) -> None:
        """The first unquoted name in ``statement`` written as a reserved word, at its token."""
        at = None
        for identifier in statement.find_all(exp.Identifier):
            if identifier.quoted or identifier.name.upper() not in RESERVED or "start" not in identifier.meta:
                continue
            if at is None:
                at = {token.start: index for index, token in enumerate(self._tokens)}
            index = at.get(identifier.meta["start"])
            if index is not None and is_reserved(self._tokens[index]):
                self._retreat(index)
                self.raise_error(encountered(self._curr, as_name=True), self._curr)

    def _parse_alias(self, this, explicit: bool = False):
        """``f(AS)``, ``SELECT a, AS b``: an AS where an expression must be."""
        if this is None and self._curr and self._curr.token_type == TokenType.ALIAS:
            self.raise_error(encountered(self._curr), self._curr)
        return super()._parse_alias(this, explicit)

    def _parse_conjunction(self):
        """``WHERE AND x = 1``: an AND or OR with nothing before it. sqlglot reports the
        missing operand at the end of the statement; Flink at the AND."""
        if self._curr and self._curr.token_type in (*self.CONJUNCTION, *self.DISJUNCTION):
            self.raise_error(encountered(self._curr), self._curr)
        return super()._parse_conjunction()

    def _parse_projections(self):
        """``SELECT AS * FROM t`` (and BigQuery's ``SELECT AS STRUCT ...``, ``AS VALUE``):
        sqlglot took the AS and went on; Flink has no AS before the select list."""
        index = self._index - 1
        if index >= 0 and self._tokens[index].text.upper() in ("STRUCT", "VALUE") \
                and index >= 1 and self._tokens[index - 1].token_type == TokenType.ALIAS:
            index -= 1
        if index >= 0 and self._tokens[index].token_type == TokenType.ALIAS:
            self._retreat(index)
            self.raise_error(encountered(self._curr), self._curr)
        return super()._parse_projections()

    def _parse_group(self, skip_group_by_token: bool = False):
        """``GROUP BY`` with nothing after it: sqlglot read an empty grouping."""
        group = super()._parse_group(skip_group_by_token)
        if group is not None and not group.expressions and not group.args.get("all") \
                and not any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")):
            self.raise_error("Expected an expression after GROUP BY", self._curr or self._prev)
        return group
