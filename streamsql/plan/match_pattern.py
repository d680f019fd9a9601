"""MATCH_RECOGNIZE's PATTERN as Flink accepts it: a sequence of pattern variables, each
with an optional quantifier.

Quantifiers: `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`, `{,m}`, and the reluctant forms `*?`,
`+?`, `{n,}?`, `{n,m}?`, `{,m}?`. What Flink rejects is rejected here with its reason:
alternation (`|`), groups (`(A B)+`), PERMUTE, anchors (`^`, `$`), exclusions (`{- -}`),
the reluctant optional quantifier `??`, a variable used twice, and a greedy variable-length
quantifier on the last variable (Flink: "Greedy quantifiers are not allowed as the last
element of a Pattern yet").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from streamsql.errors import Position, ValidationError


@dataclass(frozen=True)
class Term:
    """One pattern variable and how many rows it takes (high None: no upper bound)."""

    variable: str
    low: int = 1
    high: int | None = 1
    greedy: bool = True

    def __str__(self) -> str:
        if (self.low, self.high) == (1, 1):
            return self.variable
        quantifier = {(0, None): "*", (1, None): "+", (0, 1): "?"}.get((self.low, self.high))
        if quantifier is None:
            quantifier = "{%d}" % self.low if self.low == self.high else "{%s,%s}" % (
                self.low or "", "" if self.high is None else self.high)
        return self.variable + quantifier + ("" if self.greedy or self.low == self.high else "?")


@dataclass
class MatchSpec:
    """What the matcher needs, as plain values (it is shipped to the executors)."""

    terms: list[Term]
    columns: list[str]
    define: dict[str, str] = field(default_factory=dict)  # variable -> Flink SQL condition
    measures: list[tuple[str, str]] = field(default_factory=list)  # (name, Flink SQL expression)
    partition_by: list[str] = field(default_factory=list)
    time_column: str | None = None
    skip: tuple[str, str | None] = ("TO NEXT ROW", None)  # Flink's default (Calcite's)
    within_ms: int | None = None


_TOKEN = re.compile(
    r"\s+|(?P<var>[A-Za-z_][A-Za-z0-9_$]*|`[^`]+`)|(?P<quant>\*|\+|\?|\{\s*\d*\s*(?:,\s*\d*\s*)?\})"
    r"|(?P<other>\{-|-\}|.)",
    re.S,
)
_REJECTED = {
    "|": "alternation (|) is not supported by Flink's MATCH_RECOGNIZE",
    "(": "pattern groups ((A B)+) are not supported by Flink's MATCH_RECOGNIZE",
    ")": "pattern groups ((A B)+) are not supported by Flink's MATCH_RECOGNIZE",
    "^": "anchors (^, $) are not supported by Flink's MATCH_RECOGNIZE",
    "$": "anchors (^, $) are not supported by Flink's MATCH_RECOGNIZE",
    "{-": "exclusions ({- A -}) are not supported by Flink's MATCH_RECOGNIZE",
    "-}": "exclusions ({- A -}) are not supported by Flink's MATCH_RECOGNIZE",
}


def parse_pattern(text: str, start: Position | None = None) -> list[Term]:
    """The terms of a PATTERN's text; ``start`` is where the text begins in the script."""
    terms: list[Term] = []
    pending: str | None = None  # a variable whose quantifier may follow
    tokens = list(_TOKEN.finditer(text))
    index = 0
    while index < len(tokens):
        token = tokens[index]
        index += 1
        where = _position(text, token.start(), start)
        if token.group("var"):
            name = token.group("var").strip("`")
            if name.upper() == "PERMUTE" and not token.group("var").startswith("`"):
                raise ValidationError("PATTERN: PERMUTE is not supported by Flink's MATCH_RECOGNIZE", where)
            if pending is not None:
                terms.append(Term(pending))
            pending = name
            continue
        if token.group("quant"):
            if pending is None:
                raise ValidationError(f"PATTERN: quantifier '{token.group('quant')}' follows no pattern variable", where)
            low, high = _bounds(token.group("quant"), where)
            greedy = True
            if index < len(tokens) and tokens[index].group("quant") == "?":
                if (low, high) == (0, 1):
                    raise ValidationError(
                        "PATTERN: the reluctant optional quantifier (??) is not supported by Flink's"
                        " MATCH_RECOGNIZE; only the greedy ? is", where)
                greedy = False
                index += 1
            terms.append(Term(pending, low, high, greedy))
            pending = None
            continue
        if token.group("other"):
            symbol = token.group("other")
            raise ValidationError(f"PATTERN: {_REJECTED.get(symbol, f'unexpected {symbol!r}')}", where)
    if pending is not None:
        terms.append(Term(pending))
    _check(terms, start)
    return terms


def _bounds(quantifier: str, where: Position | None) -> tuple[int, int | None]:
    if quantifier in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[quantifier]
    inner = quantifier[1:-1].replace(" ", "")
    if "," not in inner:
        if not inner:
            raise ValidationError("PATTERN: {} needs a number of rows, e.g. {3}", where)
        return int(inner), int(inner)
    low_text, high_text = inner.split(",")
    low = int(low_text) if low_text else 0
    high = int(high_text) if high_text else None
    if high is not None and (high < low or high == 0):
        raise ValidationError(f"PATTERN: quantifier {quantifier} allows no rows", where)
    return low, high


def _check(terms: list[Term], start: Position | None) -> None:
    if not terms:
        raise ValidationError("PATTERN is empty", start)
    seen = set()
    for term in terms:
        if term.variable in seen:
            raise ValidationError(
                f"PATTERN: variable {term.variable} appears twice; Flink's MATCH_RECOGNIZE takes each"
                " pattern variable once", start)
        seen.add(term.variable)
    if all(t.low == 0 for t in terms):
        raise ValidationError("PATTERN: every variable is optional, so the pattern could match no rows", start)
    last = terms[-1]
    if last.greedy and last.low != last.high:
        raise ValidationError(
            f"PATTERN: greedy quantifiers are not allowed on the last variable ({last}) in Flink; end the"
            f" pattern with a variable of fixed length, a reluctant quantifier ({last}?) or a variable"
            " whose condition ends the run", start)


def _position(text: str, offset: int, start: Position | None) -> Position | None:
    if start is None:
        return None
    before = text[:offset]
    newlines = before.count("\n")
    if newlines:
        return Position(start.line + newlines, offset - before.rfind("\n"))
    return Position(start.line, start.col + offset)
