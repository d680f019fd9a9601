"""Top-N and deduplication as Flink recognises them: a SELECT that filters the ROW_NUMBER()
(RANK, DENSE_RANK) of its FROM subquery or view by `rn <= N`, `rn < N` or `rn = 1`
(plan.logical builds the Rank from it; plan.temporal and the stateful chain ask too)."""

from __future__ import annotations

from sqlglot import exp

from streamsql.plan.logical_from import conjuncts

RANKINGS = {exp.RowNumber: "ROW_NUMBER", exp.Rank: "RANK", exp.DenseRank: "DENSE_RANK"}  # Flink's Rank's rankType


def rank_pattern(select: exp.Select, view_query, functions=(exp.RowNumber,)):
    """(inner select, rank column, N, other outer conditions) when `select` filters the
    ROW_NUMBER() (or another of ``functions``) of its FROM subquery (or view) by `rn <= N`,
    `rn < N` or `rn = 1`."""
    source = select.args.get("from_")
    if source is None or select.args.get("joins"):
        return None
    if isinstance(source.this, exp.Subquery):
        inner = source.this.this
    elif isinstance(source.this, exp.Table):
        inner = view_query(source.this)
    else:
        return None
    if not isinstance(inner, exp.Select):
        return None
    numbers = {p.alias_or_name for p in inner.expressions
               if isinstance(p.unalias(), exp.Window) and isinstance(p.unalias().this, tuple(functions))}
    if not numbers:
        return None
    conditions = conjuncts(select.args.get("where"))
    for condition in conditions:
        found = _rank_bound(condition, numbers)
        if found is not None:
            rest = [c for c in conditions if c is not condition]
            return inner, found[0], found[1], rest
    return None


def _rank_bound(condition, numbers: set[str]) -> tuple[str, int] | None:
    if not isinstance(condition, (exp.LTE, exp.LT, exp.EQ, exp.GTE, exp.GT)):
        return None
    a, b = condition.this, condition.expression
    flipped = isinstance(a, exp.Literal)
    column, literal = (b, a) if flipped else (a, b)
    if not (isinstance(column, exp.Column) and column.name in numbers and isinstance(literal, exp.Literal)):
        return None
    if not literal.name.isdigit():
        return None
    n = int(literal.name)
    op = type(condition)
    if flipped:
        op = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT}.get(op, op)
    if op is exp.LTE or (op is exp.EQ and n == 1):
        return column.name, n
    if op is exp.LT and n > 1:
        return column.name, n - 1
    return None
