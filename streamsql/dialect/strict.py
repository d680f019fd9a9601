"""Flink's syntax errors where sqlglot's parser is lenient.

sqlglot reads many dialects and forgives what some of them allow: an empty item of a comma
list, an ``AS`` with no name, a function call with no closing parenthesis, a table name
starting with a dot, a ``JOIN`` with no condition, ``INTERVAL`` over any expression, two
string literals on one line. Flink
(Calcite) rejects each, and accepting one silently runs a different query than the one
written (sqlglot drops the empty item, or reads ``a JOIN b`` as a cross join). Each is a
syntax error here, at the token where the SQL goes wrong.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

from streamsql.dialect.messages import missing_argument
from streamsql.dialect.reserved import encountered

# Flink's reserved words that sqlglot takes as names: ``SELECT price TABLE FROM bid`` is
# an alias named TABLE to sqlglot, a syntax error to Flink (quote it: `table`).
RESERVED_NAMES = {TokenType.TABLE, TokenType.INTERVAL}

# Where the head of a CREATE (its kind and name) ends.
_HEAD_ENDS = {TokenType.L_PAREN, TokenType.ALIAS, TokenType.WITH, TokenType.LIKE, TokenType.COMMENT}

# Joins that need ON or USING in Flink: every kind but CROSS (and a comma).
_CONDITIONED_KINDS = (None, "INNER", "OUTER")


def closed(parse):
    """A function parser that leaves its closing parenthesis to sqlglot, which takes it if it
    is there (``FUNCTION_PARSERS``): here it must be there."""

    def parse_closed(self):
        result = parse(self)
        if not self._curr or self._curr.token_type != TokenType.R_PAREN:
            self.raise_error("Expecting )", self._curr or self._prev)
        return result

    return parse_closed


class StrictParser:
    """Mixed into the Flink dialect's parser, before sqlglot's ``Parser``."""

    def _parse_csv(self, parse_method, sep=TokenType.COMMA):
        """sqlglot skips an empty item of a comma list (``a, , b``, ``f(a, )``, a
        trailing ``SELECT a,``); in Flink SQL each is a syntax error at the token where
        the item should be."""
        if sep != TokenType.COMMA:
            return super()._parse_csv(parse_method, sep)
        start = self._index
        item = parse_method()
        items = [item] if item is not None else []
        while self._curr and self._curr.token_type == sep:
            if item is None:
                self.raise_error(self._empty_item(start, "Unexpected ','"), self._curr)
            self._advance()
            if isinstance(item, exp.Expr):
                self._add_comments(item)
            item = parse_method()
            if item is None:
                self.raise_error(self._empty_item(start, "Expected an expression after ','"),
                                 self._curr or self._prev)
            items.append(item)
        return items

    def _empty_item(self, start: int, message: str) -> str:
        """The message for an empty item of the list starting at token ``start``: a
        function's arguments name the function."""
        if start >= 2 and self._tokens[start - 1].token_type == TokenType.L_PAREN:
            name = self._tokens[start - 2]
            if name.token_type == TokenType.VAR or name.token_type in self.FUNC_TOKENS:
                return missing_argument(name.text, self._curr.text if self._curr else None)
        return message

    def _parse_projections(self):
        projections, exclude = super()._parse_projections()
        if not projections:
            self.raise_error("Expected an expression after SELECT", self._curr or self._prev)
        return projections, exclude

    def _parse_alias(self, this, explicit: bool = False):
        """sqlglot drops an ``AS`` that no name follows (``SELECT a AS , b``); in Flink SQL
        that is a syntax error at the token after it."""
        index = self._index
        self._check_not_reserved()
        aliased = super()._parse_alias(this, explicit)
        if aliased is this:
            self._check_named_after_as(index)
        return aliased

    def _parse_table_alias(self, alias_tokens=None):
        index = self._index
        self._check_not_reserved()
        alias = super()._parse_table_alias(alias_tokens)
        if alias is None:
            self._check_named_after_as(index)
        return alias

    def _check_named_after_as(self, index: int) -> None:
        """An ``AS`` was taken at ``index`` and nothing after it."""
        if self._index == index + 1 and self._prev.token_type == TokenType.ALIAS:
            self.raise_error("Expected a name after AS", self._curr or self._prev)  # (messages adds what follows)

    def _check_not_reserved(self) -> None:
        """An alias (after AS or not) that is one of Flink's reserved words."""
        index = self._index + 1 if self._curr and self._curr.token_type == TokenType.ALIAS else self._index
        named = self._tokens[index] if index < len(self._tokens) else None
        if named and named.token_type in RESERVED_NAMES:
            self._fail_at(index, encountered(named, as_name=True))

    def _fail_at(self, index: int, message: str) -> None:
        """A syntax error at token ``index`` (the error's position is the parser's)."""
        self._retreat(index)
        self.raise_error(message, self._curr or self._prev)

    def _parse_table_parts(self, schema: bool = False, is_db_reference: bool = False,
                           wildcard: bool = False, fast: bool = False):
        """sqlglot reads ``FROM .bid`` and ``FROM cat..bid`` (T-SQL's empty database)."""
        start = self._index
        parts = super()._parse_table_parts(schema, is_db_reference, wildcard, fast)
        for index in range(start, self._index):
            token = self._tokens[index]
            if token.token_type != TokenType.DOT:
                continue
            if index == start or self._tokens[index - 1].token_type == TokenType.DOT:
                self._fail_at(index, "Expected a table name")
        return parts

    def _parse_join(self, skip_join_token: bool = False, parse_bracket: bool = False, alias_tokens=None):
        """A comma with no table after it (``FROM a, ``) and a join with no condition
        (``a JOIN b``, which sqlglot reads as a cross join; Flink requires ON or USING for
        every join but CROSS JOIN)."""
        comma = self._curr if self._curr and self._curr.token_type == TokenType.COMMA else None
        join = super()._parse_join(skip_join_token, parse_bracket, alias_tokens)
        if comma is not None and join is None and self._prev is comma:
            self.raise_error("Expected a table after ','", self._curr or comma)
        if (join is not None and comma is None and not join.args.get("on") and not join.args.get("using")
                and not join.args.get("method") and join.args.get("kind") in _CONDITIONED_KINDS):
            kind = " ".join(filter(None, (join.args.get("side"), join.args.get("kind")))) or "INNER"
            self.raise_error(f"{kind} JOIN requires a condition: ON ... or USING (...)"
                             " (CROSS JOIN is the join of every pair of rows)", self._curr or self._prev)
        return join

    def _parse_interval(self, require_interval: bool = True, parse_function_unit: bool = True):
        """Flink's INTERVAL is a quoted value and a unit (``INTERVAL '10' SECOND``); sqlglot
        also reads ``INTERVAL 10 SECOND``, ``INTERVAL '10'`` and ``INTERVAL price``."""
        if not (require_interval and self._curr and self._curr.token_type == TokenType.INTERVAL):
            return super()._parse_interval(require_interval, parse_function_unit)
        value = self._index + 1
        if value < len(self._tokens) and self._tokens[value].token_type in (TokenType.PLUS, TokenType.DASH):
            value += 1
        token = self._tokens[value] if value < len(self._tokens) else None
        example = "a quoted value and a unit, e.g. INTERVAL '10' SECOND"
        if token is None or token.token_type != TokenType.STRING:
            self._fail_at(value, f"INTERVAL takes {example}")
        interval = super()._parse_interval(require_interval, parse_function_unit)
        if self._index <= value + 1:  # no unit after the value (or the unit inside it)
            self.raise_error(f"Expected a unit after INTERVAL '{token.text}' (e.g. INTERVAL '{token.text}' SECOND)",
                             self._curr or token)
        return interval

    def _parse_select_query(self, *args, **kwargs):
        """sqlglot reads DuckDB's FROM-first queries (``FROM bid SELECT a``, and ``FROM
        SELECT ... FROM bid`` as a subquery); a Flink query starts with SELECT (or WITH,
        VALUES, a parenthesis)."""
        start = self._index if self._curr and self._curr.token_type == TokenType.FROM else None
        query = super()._parse_select_query(*args, **kwargs)
        if start is not None and query is not None:
            self._fail_at(start, "Unexpected 'FROM': a query starts with SELECT (SELECT ... FROM t)")
        return query

    def _parse_between(self, this):
        """``a BETWEEN low AND high``: sqlglot took the AND if it was there (``BETWEEN 1 2``)."""
        if isinstance(this, (exp.Is, exp.NullSafeEQ, exp.NullSafeNEQ)):  # (as sqlglot's own)
            this = exp.Paren(this=this)
        symmetric = True if self._match_text_seq("SYMMETRIC") else False if self._match_text_seq("ASYMMETRIC") else None
        low = self._parse_bitwise()
        if low is not None and self._curr and not self._match(TokenType.AND):
            self.raise_error("Expected BETWEEN low AND high", self._curr)
        high = self._parse_bitwise()
        return self.expression(exp.Between(this=this, low=low, high=high, symmetric=symmetric))

    def _parse_window(self, this, alias: bool = False):
        """``agg(x) IGNORE NULLS FILTER (WHERE ..)``: Flink's validator refuses the FILTER
        (sqlglot's parser stopped at it with "Unexpected '('"); so does ``agg(x IGNORE NULLS)
        FILTER (..)`` (plan.builtins)."""
        window = super()._parse_window(this, alias)
        if isinstance(window, (exp.IgnoreNulls, exp.RespectNulls)) and self._curr is not None \
                and self._curr.token_type == TokenType.FILTER:
            self.raise_error("FILTER must be applied to aggregate function (not after IGNORE NULLS or RESPECT NULLS)",
                             self._curr)
        return window

    def _parse_insert(self, *args, **kwargs):
        """``INSERT INTO t`` with no query after it: sqlglot read it as an insert of nothing."""
        insert = super()._parse_insert(*args, **kwargs)
        if (isinstance(insert, exp.Insert) and insert.expression is None
                and isinstance(insert.this, (exp.Table, exp.Schema))):  # (no table: script.py says so)
            self.raise_error("Expected SELECT or VALUES after INSERT INTO ...", self._curr or self._prev)
        return insert

    def _parse_on_conflict(self):
        """Flink 2.3's ``ON CONFLICT DO NOTHING | DO ERROR | DO DEDUPLICATE`` after an INSERT's
        query (its action as an upper-case Var); sqlglot's other forms (a conflict target,
        ``DO UPDATE SET``, MySQL's ``ON DUPLICATE KEY``) are no Flink SQL."""
        start = self._curr
        if self._match_text_seq("ON", "DUPLICATE", "KEY"):
            self.raise_error("Flink SQL has no ON DUPLICATE KEY: write ON CONFLICT DO NOTHING, DO ERROR or"
                             " DO DEDUPLICATE", start)
        if not self._match_text_seq("ON", "CONFLICT"):
            return None
        where = self._curr
        for action in ("NOTHING", "ERROR", "DEDUPLICATE"):
            if self._match_text_seq("DO", action):
                return self.expression(exp.OnConflict(action=exp.var(f"DO {action}")))
        self.raise_error("Expected DO NOTHING, DO ERROR or DO DEDUPLICATE after ON CONFLICT (Flink's conflict"
                         " strategies)", where or self._prev)

    def _parse_primary(self):
        """Adjacent string literals are one string only across lines (``'foo'`` then
        ``'bar'`` on the next line); on one line Flink (Calcite) refuses them, where sqlglot
        concatenated them."""
        start = self._index
        primary = super()._parse_primary()
        if isinstance(primary, exp.Concat) and self._tokens[start].token_type == TokenType.STRING:
            for index in range(start + 1, self._index):
                if self._tokens[index].line == self._tokens[index - 1].line:
                    self._fail_at(index, "String literal continued on same line")
        return primary

    def _parse_create(self):
        """``CREATE [TEMPORARY] TABLE|VIEW|FUNCTION name``: sqlglot also reads a comma in that
        head (``CREATE , TABLE``, ``CREATE TABLE t , (``) and TEMPORARY anywhere in it
        (``CREATE VIEW v TEMPORARY AS``, ``AS TEMPORARY SELECT``)."""
        start = self._index  # the token after CREATE
        create = super()._parse_create()
        for index in range(start, self._index):
            token = self._tokens[index]
            if token.token_type in _HEAD_ENDS:
                following = self._tokens[index + 1] if index + 1 < self._index else None
                if token.token_type == TokenType.ALIAS and following and following.token_type == TokenType.TEMPORARY:
                    self._fail_at(index + 1, "Unexpected 'TEMPORARY': write CREATE TEMPORARY VIEW v AS SELECT ...")
                break
            if token.token_type == TokenType.COMMA:
                self._fail_at(index, "Unexpected ','")
            if token.token_type == TokenType.TEMPORARY and index != start \
                    and self._tokens[index - 1].token_type != TokenType.REPLACE:  # (CREATE OR REPLACE TEMPORARY)
                self._fail_at(index, "Unexpected 'TEMPORARY': it goes right after CREATE"
                                     " (CREATE TEMPORARY TABLE|VIEW|FUNCTION ...)")
        return create

    def _parse_as_command(self, start):
        """sqlglot keeps a CREATE it cannot parse to the end as a raw command; in Flink SQL
        that is a syntax error at the first token left over."""
        if start.token_type == TokenType.CREATE and self._curr:
            self.raise_error(f"Unexpected '{self._curr.text}'", self._curr)
        return super()._parse_as_command(start)
