"""MATCH_RECOGNIZE as Flink writes it: sqlglot's clause plus `WITHIN INTERVAL ...`.

sqlglot parses the clause (`exp.MatchRecognize`) but has no `WITHIN`, and keeps the
PATTERN as raw text. The parser here takes the same clauses in Flink's order
(PARTITION BY, ORDER BY, MEASURES, ONE/ALL ROW(S) PER MATCH, AFTER MATCH SKIP, PATTERN,
WITHIN, DEFINE) and records where the pattern text starts, so the pattern parser
(`plan.match_pattern`) can point at a bad quantifier.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType


class MatchRecognize(exp.MatchRecognize):
    """Flink's MATCH_RECOGNIZE; ``within`` is the WITHIN interval, ``pattern`` a Var whose
    meta holds the pattern's line and column."""

    arg_types = {**exp.MatchRecognize.arg_types, "within": False}


def parse_match_recognize(self) -> MatchRecognize | None:
    """The clause after MATCH_RECOGNIZE (the token is current)."""
    if not self._match(TokenType.MATCH_RECOGNIZE):
        return None
    self._match_l_paren()
    partition = self._parse_partition_by()
    order = self._parse_order()
    measures = None
    if self._match_text_seq("MEASURES"):
        measures = self._parse_csv(self._parse_match_recognize_measure)
    rows = _rows(self)
    after = _after(self)
    pattern = _pattern(self) if self._match_text_seq("PATTERN") else None
    within = self._parse_interval() if self._match_text_seq("WITHIN") else None
    define = self._parse_csv(self._parse_name_as_expression) if self._match_text_seq("DEFINE") else None
    self._match_r_paren()
    return self.expression(MatchRecognize(
        partition_by=partition, order=order, measures=measures, rows=rows, after=after, pattern=pattern,
        within=within, define=define, alias=self._parse_table_alias(),
    ))


def _rows(self) -> exp.Var | None:
    if self._match_text_seq("ONE", "ROW", "PER", "MATCH"):
        return exp.var("ONE ROW PER MATCH")
    if self._match_text_seq("ALL", "ROWS", "PER", "MATCH"):
        return exp.var("ALL ROWS PER MATCH")
    return None


def _after(self) -> exp.Var | None:
    if not self._match_text_seq("AFTER", "MATCH", "SKIP"):
        return None
    if self._match_text_seq("PAST", "LAST", "ROW"):
        return exp.var("AFTER MATCH SKIP PAST LAST ROW")
    if self._match_text_seq("TO", "NEXT", "ROW"):
        return exp.var("AFTER MATCH SKIP TO NEXT ROW")
    if self._match_text_seq("TO", "FIRST") or self._match_text_seq("TO", "LAST"):
        direction = self._prev.text.upper()
    elif self._match_text_seq("TO"):
        direction = "LAST"  # SKIP TO var is SKIP TO LAST var (the standard's default)
    else:
        self.raise_error("Expecting PAST LAST ROW, TO NEXT ROW, TO FIRST <variable> or TO LAST <variable>")
        return None
    variable = self._advance_any()
    if not variable:
        self.raise_error(f"Expecting a pattern variable after AFTER MATCH SKIP TO {direction}")
        return None
    return exp.var(f"AFTER MATCH SKIP TO {direction} {variable.text}")


def _pattern(self) -> exp.Var:
    """The raw pattern text between the parentheses, with its start position in meta."""
    self._match_l_paren()
    if not self._curr:
        self.raise_error("Expecting )", self._curr)
    depth, start, end = 1, self._curr, self._curr
    while self._curr and depth > 0:
        if self._curr.token_type == TokenType.L_PAREN:
            depth += 1
        elif self._curr.token_type == TokenType.R_PAREN:
            depth -= 1
        if depth > 0:
            end = self._curr
        self._advance()
    if depth > 0:
        self.raise_error("Expecting ) to close PATTERN")
    text = "" if end is start and start.token_type == TokenType.R_PAREN else self._find_sql(start, end)
    pattern = exp.var(text)
    pattern.meta.update(line=start.line, col=max(1, start.col - len(start.text) + 1))
    return pattern


def match_recognize_sql(self, expression: MatchRecognize) -> str:
    """Flink SQL for the clause (explain output, views written back)."""
    parts = []
    if expression.args.get("partition_by"):
        parts.append("PARTITION BY " + self.expressions(expression, key="partition_by", flat=True))
    if expression.args.get("order"):
        parts.append(self.sql(expression, "order").strip())
    if expression.args.get("measures"):
        parts.append("MEASURES " + self.expressions(expression, key="measures", flat=True))
    for key in ("rows", "after"):
        if expression.args.get(key):
            parts.append(self.sql(expression, key))
    if expression.args.get("pattern"):
        parts.append(f"PATTERN ({self.sql(expression, 'pattern')})")
    if expression.args.get("within"):
        parts.append("WITHIN " + self.sql(expression, "within"))
    if expression.args.get("define"):
        definitions = [f"{self.sql(d, 'alias')} AS {self.sql(d, 'this')}" for d in expression.args["define"]]
        parts.append("DEFINE " + ", ".join(definitions))
    alias = self.sql(expression, "alias")
    return f" MATCH_RECOGNIZE ({' '.join(parts)})" + (f" AS {alias}" if alias else "")
